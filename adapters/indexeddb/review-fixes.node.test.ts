/**
 * The IndexedDB engine in Node over fake-indexeddb: defects a review found,
 * each staged as it happened.
 * - Two storage estimates asked for at once (the one a refusal asks for, and
 *   the one transactions wait for) took the bytes committed before them off
 *   twice, and a growing transaction got into the reserve.
 * - A `blocked` open left its request pending, and every later open of the
 *   database (the retry it invites, another engine reopening after it stepped
 *   aside) queued behind it for good, and so did that engine's `close()`.
 * - Scans of an empty range returned one shared array.
 * - Values structured clone refuses (a WeakMap, a Promise, a function deep
 *   down) passed `put` and failed at the commit with the platform's raw
 *   `DataCloneError`.
 * - A storage estimate that never answered held every transaction.
 */
import { IDBFactory, IDBKeyRange } from "fake-indexeddb";
import { describe, expect, it } from "vitest";
import { IndexedDbEngineError, indexedDbEngine } from "./index.js";
import { IndexedDbEngine } from "./indexeddb-engine.js";
import { MIGRATIONS, openEngineDatabase, SCHEMA_VERSION } from "./schema.js";
import { retryWhileBlocked } from "../../test/node/support/retry-blocked.js";

const KiB = 1024;
const MiB = 1024 * KiB;
const GROWS = { grows: true } as const;

/** `promise`'s outcome, or a failure naming `what` when it has not settled within `ms` (a hang). */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<{ value?: T; error?: unknown }> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} still pending after ${ms} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve({ value });
      },
      (error: unknown) => {
        clearTimeout(timer);
        resolve({ error });
      },
    );
  });
}

/** Wait (a few ms at a time, at most a second) until `done()`. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  expect(done()).toBe(true);
}

describe("review fixes: overlapping storage estimates", () => {
  it("never takes the bytes committed before two overlapping estimates off twice: a growing transaction stays out of the reserve", async () => {
    // Estimates the test answers by hand, in the order it chooses.
    const asked: ((answer: { usage: number; quota: number }) => void)[] = [];
    const storage = { estimate: () => new Promise<{ usage: number; quota: number }>((resolve) => asked.push(resolve)) };
    const engine = new IndexedDbEngine({
      name: "overlap",
      durability: "strict",
      platform: () => ({ indexedDB: new IDBFactory(), IDBKeyRange }),
      reserveBytes: 1 * MiB,
      storage: () => storage,
      clock: () => 1_000_000,
    });
    // Usage 8 MiB, limit 9 MiB: 1 MiB of room.
    let usage = 8 * MiB;
    const first = engine.transact("readwrite", async (tx) => tx.put(["g", 0], new Uint8Array(1000)), GROWS);
    await until(() => asked.length === 1);
    asked[0]!({ usage, quota: 10 * MiB });
    await first;
    // About 200 KB in small growing commits: counted by the engine, under a quarter of the room (no new estimate).
    for (let i = 1; i <= 20; i++) {
      await engine.transact("readwrite", async (tx) => tx.put(["g", i], new Uint8Array(10 * KiB)), GROWS);
      usage += 10 * KiB + 40;
    }
    expect(asked).toHaveLength(1);
    // 900 KB does not fit: refused; the log holds change records, so the engine checkpoints and asks again.
    const big = engine.transact("readwrite", async (tx) => tx.put(["big"], new Uint8Array(900 * KiB)), GROWS);
    await until(() => asked.length === 2);
    // Another growing transaction meanwhile finds the estimate stale and asks too (the others wait for it).
    const small = engine.transact("readwrite", async (tx) => tx.put(["g", 99], new Uint8Array(10)), GROWS);
    await until(() => asked.length === 3);
    // The later estimate answers first, then the earlier one: both show the usage as it is.
    asked[2]!({ usage, quota: 10 * MiB });
    await new Promise((resolve) => setTimeout(resolve, 5));
    asked[1]!({ usage, quota: 10 * MiB });
    // Usage (8.2 MiB) plus 900 KB still exceeds the limit: refused, whatever answered in which order.
    await expect(big).rejects.toMatchObject({ code: "quota_exceeded" });
    await small;
    expect(await engine.transact("readonly", (tx) => tx.get(["big"]))).toBeUndefined();
    await engine.close();
  });
});

describe("review fixes: a blocked open leaves nothing hanging", () => {
  /** A raw connection that ignores versionchange (an old tab's code), and engines on the same database. */
  async function staged(idb: IDBFactory) {
    const make = (migrations = MIGRATIONS, openWaitMs?: number) =>
      new IndexedDbEngine({ name: "db", durability: "strict", platform: () => ({ indexedDB: idb, IDBKeyRange }), migrations, openWaitMs });
    const current = make();
    await current.transact("readwrite", async (tx) => tx.put(["a"], 1));
    const old = await openEngineDatabase(idb, IDBKeyRange, "db", MIGRATIONS);
    return { make, current, old };
  }

  it("rejects the retry a `blocked` open invites at once, `blocked` again, while the blocking connection stays; it goes through once that closed", async () => {
    const idb = new IDBFactory();
    const { make, current, old } = await staged(idb);
    const newer = make([...MIGRATIONS, () => undefined]);
    const first = await within(newer.open(), 1000, "the first open");
    expect(first.error).toBeInstanceOf(IndexedDbEngineError);
    expect(first.error).toMatchObject({ code: "blocked", retryable: true });
    const retry = await within(newer.open(), 1000, "the retry");
    expect(retry.error).toBeInstanceOf(IndexedDbEngineError);
    expect(retry.error).toMatchObject({ code: "blocked", retryable: true });
    // The engine on the current schema stepped aside on versionchange: its next transaction does not hang either.
    const reopen = await within(
      current.transact("readonly", (tx) => tx.get(["a"])),
      1000,
      "the transaction of the engine that stepped aside",
    );
    expect(reopen.error).toMatchObject({ code: "blocked", retryable: true });
    await within(current.close(), 1000, "close() of the engine that stepped aside");
    old.close();
    await retryWhileBlocked(() => newer.open());
    expect(await newer.transact("readonly", (tx) => tx.get(["a"]))).toBe(1);
    // The upgrade ran: code on the older schema now gets `version`, at once.
    const older = make();
    await expect(older.transact("readonly", (tx) => tx.get(["a"]))).rejects.toMatchObject({ code: "version", retryable: false });
    await Promise.all([older.close(), newer.close()]);
  });

  it("rejects an open already queued behind the open that got `blocked`", async () => {
    const idb = new IDBFactory();
    const { make, current, old } = await staged(idb);
    const steps = [...MIGRATIONS, () => undefined];
    const [one, two] = [make(steps), make(steps)];
    const outcomes = await Promise.all([within(one.open(), 1000, "the first open"), within(two.open(), 1000, "the open queued behind it")]);
    for (const outcome of outcomes) expect(outcome.error).toMatchObject({ code: "blocked", retryable: true });
    old.close();
    await retryWhileBlocked(() => two.open());
    await Promise.all([one.close(), two.close(), current.close()]);
  });

  it("rejects `blocked` an open that gets no answer in time (queued behind an open it does not know of), and its retries at once", async () => {
    const idb = new IDBFactory();
    const { make, current, old } = await staged(idb);
    await current.close();
    // Another tab's upgrade, blocked by the old connection: every later open queues behind it.
    const foreign = idb.open("db", SCHEMA_VERSION + 1);
    const upgraded = new Promise<void>((resolve) => {
      foreign.onsuccess = () => {
        foreign.result.close();
        resolve();
      };
    });
    const engine = make(MIGRATIONS, 300);
    const opened = await within(engine.open(), 2000, "the open queued behind another tab's upgrade");
    expect(opened.error).toBeInstanceOf(IndexedDbEngineError);
    expect(opened.error).toMatchObject({ code: "blocked", retryable: true });
    const started = Date.now();
    const again = await within(
      engine.transact("readonly", (tx) => tx.get(["a"])),
      2000,
      "a transaction of that engine",
    );
    expect(again.error).toMatchObject({ code: "blocked", retryable: true });
    // At once: not after another wait.
    expect(Date.now() - started).toBeLessThan(200);
    await within(engine.close(), 1000, "close()");
    old.close();
    await upgraded;
  });
});

describe("review fixes: empty scans", () => {
  it("returns a fresh array for every scan of an empty range: a caller's change to one shows in no other", async () => {
    const engine = indexedDbEngine({ name: "empty-scans", indexedDB: new IDBFactory(), IDBKeyRange });
    await engine.transact("readwrite", async (tx) => tx.put(["a"], 1));
    const first = await engine.transact("readonly", (tx) => tx.scan({ lower: ["b"], upper: ["a"] }));
    expect(first).toEqual([]);
    (first as unknown[]).push({ key: ["junk"], value: "junk" });
    expect(await engine.transact("readonly", (tx) => tx.scan({ lower: ["c"], upper: ["b"] }))).toEqual([]);
    expect(
      await engine.transact("readwrite", async (tx) => {
        const [one, two] = await Promise.all([tx.scan({ lower: ["b"], upper: ["a"] }), tx.scan({ lower: ["b"], upper: ["a"] })]);
        return one !== two;
      }),
    ).toBe(true);
    await engine.close();
  });
});

describe("review fixes: values structured clone refuses", () => {
  /** A value `depth` objects deep ending in `leaf`. */
  function deep(depth: number, leaf: unknown): unknown {
    let value = leaf;
    for (let i = 0; i < depth; i++) value = { down: value };
    return value;
  }

  const refused: [string, () => unknown][] = [
    ["a WeakMap", () => new WeakMap()],
    ["a WeakSet inside an object", () => ({ set: new WeakSet() })],
    ["a WeakRef inside an array", () => [1, new WeakRef({})]],
    ["a Promise inside a Map", () => new Map([["p", Promise.resolve(1)]])],
    ["a generator", () => (function* generate() {})()],
    ["a Map iterator", () => new Map().keys()],
    ["a function 40 objects deep", () => deep(40, () => 1)],
    ["a symbol 40 objects deep", () => deep(40, Symbol("s"))],
    ["a WeakMap 40 objects deep", () => deep(40, new WeakMap())],
    ["a function on an array's own property", () => Object.assign([1, 2], { extra: () => 1 })],
  ];

  for (const [label, make] of refused) {
    it(`refuses ${label} from the put itself with a DataCloneError, and writes nothing of that transaction`, async () => {
      const engine = indexedDbEngine({ name: "uncloneable", indexedDB: new IDBFactory(), IDBKeyRange });
      let thrown: unknown;
      const error: unknown = await engine
        .transact("readwrite", async (tx) => {
          tx.put(["ok"], 1);
          try {
            tx.put(["bad"], make());
          } catch (e) {
            thrown = e;
          }
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(thrown).toMatchObject({ name: "DataCloneError" });
      expect((thrown as Error).message).toMatch(/^isostore indexeddb engine: .* cannot be stored/);
      expect(error).toBe(thrown);
      expect(await engine.transact("readonly", (tx) => tx.scan({}))).toEqual([]);
      await engine.close();
    });
  }

  it("still stores class instances (as plain objects), cycles and values deeper than the estimate walks", async () => {
    const engine = indexedDbEngine({ name: "cloneable", indexedDB: new IDBFactory(), IDBKeyRange });
    class Point {
      constructor(
        readonly x: number,
        readonly y: number,
      ) {}
    }
    const cycle: { self?: unknown; n: number } = { n: 1 };
    cycle.self = cycle;
    await engine.transact("readwrite", async (tx) => {
      tx.put(["point"], new Point(1, 2));
      tx.put(["cycle"], cycle);
      tx.put(["deep"], deep(40, "leaf"));
    });
    expect(await engine.transact("readonly", (tx) => tx.get(["point"]))).toEqual({ x: 1, y: 2 });
    const stored = await engine.transact("readonly", (tx) => tx.get<{ self: unknown; n: number }>(["cycle"]));
    expect(stored?.self).toBe(stored);
    await engine.close();
  });

  it("reports a value IndexedDB refuses at the commit (one put cannot recognise: a proxy) as the engine's DataCloneError, with the platform's as cause, storing nothing", async () => {
    const engine = indexedDbEngine({ name: "proxy", indexedDB: new IDBFactory(), IDBKeyRange });
    const error: unknown = await engine
      .transact("readwrite", async (tx) => {
        tx.put(["ok"], 1);
        tx.put(["proxy"], new Proxy({ a: 1 }, {}));
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toMatchObject({ name: "DataCloneError" });
    expect((error as Error).message).toMatch(/^isostore indexeddb engine: a value this transaction wrote cannot be stored/);
    expect((error as Error).cause).toMatchObject({ name: "DataCloneError" });
    expect(await engine.transact("readonly", (tx) => tx.scan({}))).toEqual([]);
    await engine.close();
  });
});

describe("review fixes: a storage estimate that never answers", () => {
  it("waits a bounded time for it, then checks nothing: growing and other transactions and close() settle", async () => {
    const storage = { calls: 0, estimate: () => (storage.calls++, new Promise<{ usage: number; quota: number }>(() => undefined)) };
    const engine = new IndexedDbEngine({
      name: "hung-estimate",
      durability: "strict",
      platform: () => ({ indexedDB: new IDBFactory(), IDBKeyRange }),
      reserveBytes: 1 * MiB,
      storage: () => storage,
      estimateTimeoutMs: 300,
    });
    const growing = engine.transact("readwrite", async (tx) => tx.put(["a"], 1), GROWS);
    const other = engine.transact("readonly", (tx) => tx.get(["a"]));
    expect(await within(growing, 2000, "the growing transaction")).toEqual({ value: undefined });
    expect(await within(other, 2000, "the transaction called after it")).toEqual({ value: 1 });
    // While that estimate has not answered, no other is asked for and nothing waits.
    const started = Date.now();
    await engine.transact("readwrite", async (tx) => tx.put(["b"], 2), GROWS);
    expect(Date.now() - started).toBeLessThan(200);
    expect(storage.calls).toBe(1);
    await within(engine.close(), 1000, "close()");
  });

  it("takes an answer that comes after the wait: the check is back once it came", async () => {
    // The first estimate answers late (by hand); later ones at once, with what the late one said.
    const nearlyFull = { usage: 9 * MiB - 1000, quota: 10 * MiB };
    let answer: ((value: { usage: number; quota: number }) => void) | undefined;
    const storage = {
      estimate: () => (answer === undefined ? new Promise<{ usage: number; quota: number }>((resolve) => (answer = resolve)) : Promise.resolve(nearlyFull)),
    };
    const engine = new IndexedDbEngine({
      name: "late-estimate",
      durability: "strict",
      platform: () => ({ indexedDB: new IDBFactory(), IDBKeyRange }),
      reserveBytes: 1 * MiB,
      storage: () => storage,
      clock: () => 1_000_000,
      estimateTimeoutMs: 20,
    });
    expect(await within(engine.transact("readwrite", async (tx) => tx.put(["a"], 1), GROWS), 2000, "the growing transaction")).toEqual({ value: undefined });
    // Nearly full: the late answer leaves 1,000 bytes of room (fresh enough: not read again), not 10 KB.
    answer!(nearlyFull);
    await new Promise((resolve) => setTimeout(resolve, 5));
    await expect(engine.transact("readwrite", async (tx) => tx.put(["b"], new Uint8Array(10 * KiB)), GROWS)).rejects.toMatchObject({ code: "quota_exceeded" });
    await engine.close();
  });
});
