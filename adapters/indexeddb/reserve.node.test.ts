/**
 * The IndexedDB engine's reserve (`reserveBytes`, `./headroom.ts`) in Node
 * over fake-indexeddb, with a stubbed StorageManager: a transaction that
 * grows the data (hint `grows`) is refused within the reserve and writes
 * nothing, every other transaction is not, the journal refuses `append` and
 * `appendBatch` (and nothing else) as a non-retryable `backend` error caused
 * by the engine's `quota_exceeded`, and the estimate is read only when stale.
 * The same in real Chromium, on disk: test/node/indexeddb-quota.test.ts.
 */
import { IDBFactory, IDBKeyRange } from "fake-indexeddb";
import { describe, expect, it } from "vitest";
import { BackendError, createJournal, createUsageEvent, newRequestId, parseConsumerId, type UsageEvent } from "../../src/index.js";
import { defaultReserveBytes, ESTIMATE_TTL_MS } from "./headroom.js";
import { IndexedDbEngineError, indexedDbEngine } from "./index.js";
import { IndexedDbEngine } from "./indexeddb-engine.js";

const MiB = 1024 * 1024;

/** A StorageManager whose estimate the test sets, counting the calls. */
function stubStorage(usage: number, quota: number) {
  const stub = {
    usage,
    quota,
    calls: 0,
    estimate: async () => {
      stub.calls++;
      return { usage: stub.usage, quota: stub.quota };
    },
  };
  return stub;
}

/** An engine on a fresh fake-indexeddb, keeping `reserveBytes` below the stub's quota, on a clock the test moves. */
function engineWith(storage: ReturnType<typeof stubStorage> | undefined, reserveBytes?: number) {
  const clock = { now: 1_000_000 };
  const engine = new IndexedDbEngine({
    name: "reserve",
    durability: "strict",
    platform: () => ({ indexedDB: new IDBFactory(), IDBKeyRange }),
    reserveBytes,
    storage: storage === undefined ? undefined : () => storage,
    clock: () => clock.now,
  });
  return { engine, clock };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error("expected a rejection");
    },
    (error: unknown) => error,
  );
}

const GROWS = { grows: true } as const;
const KB = new Uint8Array(1000);

describe("IndexedDB engine: the reserve kept for transactions that do not grow the data", () => {
  it("refuses a growing transaction that would write into the reserve, writing nothing; the same writes without the hint commit", async () => {
    // Limit: 10 MiB - 1 MiB; usage 9 MiB - 5,000 bytes: four 1,000-byte rows fit, not ten.
    const storage = stubStorage(9 * MiB - 5_000, 10 * MiB);
    const { engine } = engineWith(storage, 1 * MiB);
    await engine.transact("readwrite", async (tx) => tx.put(["small", 0], KB), GROWS);

    const error = await rejection(
      engine.transact(
        "readwrite",
        async (tx) => {
          for (let i = 1; i <= 10; i++) tx.put(["small", i], KB);
          return "done";
        },
        GROWS,
      ),
    );
    expect(error).toBeInstanceOf(IndexedDbEngineError);
    expect(error).toMatchObject({ code: "quota_exceeded", retryable: false });
    expect((error as Error).cause).toBeUndefined();
    expect(await engine.transact("readonly", (tx) => tx.scan({ prefix: ["small"] }))).toHaveLength(1);

    // A transaction that does not grow the data may use the reserve.
    await engine.transact("readwrite", async (tx) => {
      for (let i = 1; i <= 10; i++) tx.put(["small", i], KB);
    });
    expect(await engine.transact("readonly", (tx) => tx.scan({ prefix: ["small"] }))).toHaveLength(11);
    // A growing one that writes nothing (a duplicate append) is answered.
    expect(await engine.transact("readwrite", (tx) => tx.get(["small", 3]), GROWS)).toEqual(KB);
    await engine.close();
  });

  it("the journal refuses append and appendBatch as a non-retryable backend error caused by quota_exceeded, and still claims, acks and prunes", async () => {
    const storage = stubStorage(0, 10 * MiB);
    const { engine, clock } = engineWith(storage, 1 * MiB);
    const capacity = { maxEvents: 1_000, maxDeliveryAttempts: 3, retainAcknowledgedMs: 1_000, policy: "refuse" } as const;
    const journal = createJournal(engine, { name: "usage", capacity, clock: () => clock.now });
    const consumer = parseConsumerId("billing");
    const event = (subject: string): UsageEvent =>
      createUsageEvent({ record: { requestId: newRequestId(), namespace: "acme", subject, data: { n: 1 } }, observedAt: clock.now });
    const first = event("a");
    expect((await journal.append(first)).status).toBe("accepted");
    await journal.claim(consumer, { maxEvents: 10, leaseMs: 60_000, now: clock.now });

    // Nearly full: the next estimate leaves 100 bytes above the limit.
    storage.usage = 9 * MiB - 100;
    clock.now += ESTIMATE_TTL_MS;
    const refused = await rejection(journal.append(event("b")));
    expect(refused).toBeInstanceOf(BackendError);
    expect(refused).toMatchObject({ code: "backend", retryable: false });
    expect((refused as BackendError).cause).toBeInstanceOf(IndexedDbEngineError);
    expect((refused as BackendError).cause).toMatchObject({ code: "quota_exceeded", retryable: false });
    await expect(journal.appendBatch([event("c"), event("d")])).rejects.toMatchObject({ code: "backend", cause: { code: "quota_exceeded" } });
    // Concurrent appends (a group commit) are refused each, and nothing of them is written.
    const group = await Promise.allSettled([journal.append(event("e")), journal.append(event("f")), journal.append(event("g"))]);
    expect(group.map((outcome) => outcome.status)).toEqual(["rejected", "rejected", "rejected"]);
    // Already journaled: answered, writing nothing.
    expect((await journal.append(first)).status).toBe("already_present");

    // Everything else runs in the reserve: stats, claim, ack, prune.
    expect((await journal.stats(consumer)).inFlight).toBe(1);
    const [delivery] = await journal.claim(consumer, { maxEvents: 10, leaseMs: 1, now: clock.now + 60_001 });
    await journal.ack(delivery!.id);
    expect((await journal.prune({ now: clock.now + 70_000 })).pruned).toBe(1);
    expect(await journal.stats(consumer)).toMatchObject({ pending: 0, inFlight: 0 });

    // Space freed (the browser's usage fell): the next append reads a fresh estimate and is accepted.
    storage.usage = 1 * MiB;
    expect((await journal.append(event("h"))).status).toBe("accepted");
    await engine.close();
  });

  it("after a refusal with change records in the log, checkpoints them, reads a fresh estimate and runs the body once more", async () => {
    const storage = stubStorage(0, 10 * MiB);
    const { engine, clock } = engineWith(storage, 1 * MiB);
    await engine.transact("readwrite", async (tx) => tx.put(["row", 1], KB), GROWS);
    await engine.transact("readwrite", async (tx) => tx.delete(["row", 1]));
    storage.usage = 10 * MiB;
    clock.now += ESTIMATE_TTL_MS;
    // The refusal's checkpoint frees the deleted row's space (in memory): the next estimate shows it.
    const estimate = storage.estimate;
    storage.estimate = async () => {
      const answer = await estimate();
      storage.usage = 1 * MiB;
      return answer;
    };
    let runs = 0;
    await engine.transact(
      "readwrite",
      async (tx) => {
        runs++;
        tx.put(["row", 2], KB);
      },
      GROWS,
    );
    expect(runs).toBe(2);
    expect(storage.calls).toBe(3);
    expect(await engine.transact("readonly", (tx) => tx.scan({ prefix: ["row"] }))).toEqual([{ key: ["row", 2], value: KB }]);
    await engine.close();
  });

  it("reads the estimate only when stale: past a second, or once a quarter of the room left was written; never for other transactions", async () => {
    // Room above the limit: 10 MiB - 1 MiB - 5 MiB = 4 MiB.
    const storage = stubStorage(5 * MiB, 10 * MiB);
    const { engine, clock } = engineWith(storage, 1 * MiB);
    await engine.transact("readwrite", async (tx) => tx.put(["other"], KB));
    expect(storage.calls).toBe(0);
    for (let i = 0; i < 50; i++) await engine.transact("readwrite", async (tx) => tx.put(["grow", i], KB), GROWS);
    expect(storage.calls).toBe(1);
    clock.now += ESTIMATE_TTL_MS;
    await engine.transact("readwrite", async (tx) => tx.put(["grow", 50], KB), GROWS);
    expect(storage.calls).toBe(2);
    // A quarter of the 4 MiB room (1 MiB) written since that estimate: the next growing transaction reads again.
    await engine.transact("readwrite", async (tx) => tx.put(["big"], new Uint8Array(Math.round(1.1 * MiB))));
    expect(storage.calls).toBe(2);
    await engine.transact("readwrite", async (tx) => tx.put(["grow", 51], KB), GROWS);
    expect(storage.calls).toBe(3);
    await engine.close();
  });

  it("counts the bytes it committed since the estimate: appends are refused before the estimate is read again", async () => {
    // Room above the limit: 100,000 bytes, for rows of about 1 KB; the clock stands still (one trusted
    // second), and the browser's usage grows by what each commit stored.
    const storage = stubStorage(9 * MiB - 100_000, 10 * MiB);
    const { engine } = engineWith(storage, 1 * MiB);
    let accepted = 0;
    for (let i = 0; i < 200; i++) {
      const outcome = await engine.transact("readwrite", async (tx) => tx.put(["grow", i], KB), GROWS).then(
        () => true,
        () => false,
      );
      if (!outcome) break;
      accepted++;
      storage.usage += 1_040;
    }
    expect(accepted).toBeGreaterThan(90);
    expect(accepted).toBeLessThan(100);
    // Read again as the room shrinks (each time a quarter of it was written), not per transaction.
    expect(storage.calls).toBeGreaterThan(5);
    expect(storage.calls).toBeLessThan(40);
    await engine.close();
  });

  it("keeps call order while a growing transaction waits for the estimate", async () => {
    const storage = stubStorage(0, 10 * MiB);
    const estimate = storage.estimate;
    storage.estimate = () => new Promise((resolve) => setTimeout(() => resolve(estimate()), 20));
    const { engine } = engineWith(storage, 1 * MiB);
    const write = engine.transact("readwrite", async (tx) => tx.put(["k"], "grown"), GROWS);
    const read = engine.transact("readwrite", (tx) => tx.get(["k"]));
    await write;
    expect(await read).toBe("grown");
    await engine.close();
  });

  it("checks nothing where there is no StorageManager (Node), with `reserveBytes: 0`, or when the estimate fails", async () => {
    const bare = engineWith(undefined);
    await bare.engine.transact("readwrite", async (tx) => tx.put(["k"], new Uint8Array(2 * MiB)), GROWS);
    await bare.engine.close();

    const full = stubStorage(10 * MiB, 10 * MiB);
    const off = engineWith(full, 0);
    await off.engine.transact("readwrite", async (tx) => tx.put(["k"], KB), GROWS);
    expect(full.calls).toBe(0);
    await off.engine.close();

    const failing = { calls: 0, estimate: () => Promise.reject(new Error("no estimate here")) };
    const broken = engineWith(failing as never, 1 * MiB);
    await broken.engine.transact("readwrite", async (tx) => tx.put(["k"], KB), GROWS);
    await broken.engine.close();

    // A StorageManager lookup that throws: the check is off, and no transaction waits for it forever.
    const throwing = new IndexedDbEngine({
      name: "reserve-throwing",
      durability: "strict",
      platform: () => ({ indexedDB: new IDBFactory(), IDBKeyRange }),
      reserveBytes: 1 * MiB,
      storage: () => {
        throw new Error("no storage here");
      },
      clock: () => 1_000_000,
    });
    const growing = throwing.transact("readwrite", async (tx) => tx.put(["k"], KB), GROWS);
    const later = throwing.transact("readonly", async (tx) => tx.get(["k"])); // queued behind the estimate
    await growing;
    expect(await later).toEqual(KB);
    await throwing.close();
  });

  it("defaults to a tenth of the quota, at least 64 MiB, at most half the quota; validates `reserveBytes`", () => {
    expect(defaultReserveBytes(10 * 1024 * MiB)).toBe(1024 * MiB);
    expect(defaultReserveBytes(300 * MiB)).toBe(64 * MiB);
    expect(defaultReserveBytes(100 * MiB)).toBe(50 * MiB);
    expect(() => indexedDbEngine({ name: "x", reserveBytes: -1 })).toThrow(TypeError);
    expect(() => indexedDbEngine({ name: "x", reserveBytes: Number.NaN })).toThrow(TypeError);
    expect(() => indexedDbEngine({ name: "x", storage: "navigator" as never })).toThrow(TypeError);
  });
});
