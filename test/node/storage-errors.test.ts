/**
 * Engine-independent rules of the storage primitives: the name grammar as a
 * property against the spec's regular expression, the shape of the typed
 * errors, how engine failures surface (a renewal that fails or never
 * settles included), argument and option checks, and calls that overlap.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { newByteStream } from "../../src/storage/web.js";
import { virtualClock, virtualScheduler, type VirtualClock, type VirtualScheduler } from "../../src/testing/index.js";
import {
  AppendVerifyError,
  ConflictError,
  createLeaser,
  createStore,
  InvalidNameError,
  InvalidStorageArgumentError,
  LeaseHeldError,
  MAX_NAME_BYTES,
  StorageBackendError,
  StorageError,
  validateName,
  type Engine,
} from "../../src/index.js";

const GRAMMAR = /^[a-z0-9][a-z0-9_.-]*(\/[a-z0-9][a-z0-9_.-]*)*$/;
const utf8Bytes = (text: string) => new TextEncoder().encode(text).length;

/**
 * A scheduler driven by hand that, like real timers, does not wait for the
 * work a callback starts (so a renewal that never settles stalls nothing),
 * and keeps what any callback's promise rejected with.
 */
function handScheduler(time: VirtualClock): VirtualScheduler {
  return virtualScheduler(time, { waitForCallbacks: false });
}

/** A memory engine whose read-write transactions, while `mode` says so, fail or never settle. */
function troubledEngine(): { engine: Engine; mode: "ok" | "fail" | "hang" } {
  const inner = memoryEngine();
  const state: { engine: Engine; mode: "ok" | "fail" | "hang" } = {
    mode: "ok",
    engine: {
      durable: false,
      close: () => inner.close(),
      transact: (mode, fn) => {
        if (mode === "readwrite" && state.mode === "hang") return new Promise(() => undefined);
        if (mode === "readwrite" && state.mode === "fail") return Promise.reject(new Error("engine down"));
        return inner.transact(mode, fn);
      },
    },
  };
  return state;
}

describe("storage name grammar", () => {
  it("accepts exactly the names the spec's grammar describes, up to 512 bytes", () => {
    const alphabet = fc.constantFrom(..."ab09_.-/A é".split(""));
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: alphabet, maxLength: 12 }), fc.string({ unit: alphabet, minLength: 500, maxLength: 520 })), (name) => {
        const valid = GRAMMAR.test(name) && utf8Bytes(name) <= MAX_NAME_BYTES;
        let accepted = true;
        try {
          validateName(name);
        } catch (error) {
          expect(error).toBeInstanceOf(InvalidNameError);
          accepted = false;
        }
        expect(accepted).toBe(valid);
      }),
      { numRuns: 2000 },
    );
  });

  it("counts the limit in UTF-8 bytes", () => {
    expect(() => validateName("a".repeat(512))).not.toThrow();
    expect(() => validateName("a".repeat(513))).toThrow(expect.objectContaining({ rule: "too_long" }) as Error);
  });
});

describe("storage errors", () => {
  it("are StorageErrors with a stable code, the spec's fields, and a stack that starts with the class name", () => {
    const conflict = new ConflictError("orders/acme", 4);
    expect(conflict).toBeInstanceOf(StorageError);
    expect(conflict).toBeInstanceOf(Error);
    expect({ code: conflict.code, name: conflict.name, expected: conflict.expected }).toEqual({ code: "conflict", name: "orders/acme", expected: 4 });
    expect(conflict.stack?.split("\n")[0]).toMatch(/^ConflictError: /);
    const held = new LeaseHeldError("jobs/a", 7);
    expect({ code: held.code, name: held.name, holderEpoch: held.holderEpoch }).toEqual({ code: "lease_held", name: "jobs/a", holderEpoch: 7 });
  });

  it("carry their cause where the spec has Unwrap", () => {
    const cause = new Error("network");
    expect(new AppendVerifyError("log", 3, cause).cause).toBe(cause);
  });

  it("quote a refused name bounded and escaped", () => {
    const error = new InvalidNameError(`x\n${"y".repeat(5000)}`, "character");
    expect(error.message.length).toBeLessThan(300);
    expect(error.message).not.toContain("\n");
    expect(error.name.length).toBe(5002);
  });
});

describe("engine failures", () => {
  it("surface as StorageBackendError naming the operation, with the engine's error as cause, and change nothing", async () => {
    const inner = memoryEngine();
    const failure = new Error("disk on fire");
    let failing = false;
    const engine: Engine = {
      durable: false,
      close: () => inner.close(),
      transact: (mode, fn) => (failing ? Promise.reject(failure) : inner.transact(mode, fn)),
    };
    const store = createStore(engine, { name: "s" });
    await store.ledger.append("log", 0, new Uint8Array([1]));
    failing = true;
    const error = await store.ledger.append("log", 1, new Uint8Array([2])).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StorageBackendError);
    expect(error).toMatchObject({ code: "backend", operation: "ledger.append", cause: failure });
    failing = false;
    expect(await store.ledger.tip("log")).toBe(1);
    await engine.close();
  });
});

describe("argument checks", () => {
  it("refuse an object that only claims to be a Uint8Array (Symbol.toStringTag), as payload, value and blob, changing nothing", async () => {
    const engine = memoryEngine();
    const store = createStore(engine, { name: "app" });
    const fake = { length: 2, 0: 65, 1: 66, [Symbol.toStringTag]: "Uint8Array" } as unknown as Uint8Array;
    await expect(store.kv.put("k", 0, fake)).rejects.toMatchObject({ code: "invalid_argument" });
    await expect(store.ledger.append("log", 0, fake)).rejects.toMatchObject({ code: "invalid_argument" });
    await expect(store.blobs.put("b", fake)).rejects.toMatchObject({ code: "invalid_argument" });
    expect(await store.kv.keys("")).toEqual([]);
    expect(await store.ledger.tip("log")).toBe(0);
    expect(await store.blobs.list("")).toEqual([]);
    // A real one from another realm's constructor is still bytes.
    const { runInNewContext } = await import("node:vm");
    const foreign = runInNewContext("new Uint8Array([65, 66])") as Uint8Array;
    expect(foreign instanceof Uint8Array).toBe(false);
    expect(await store.kv.put("k", 0, foreign)).toBe(1);
    await engine.close();
  });

  it("refuse a clock, scheduler or renewal-error callback that is not a function (or has no timer functions), naming the option, before anything is created", async () => {
    const engine = memoryEngine();
    const refused = (argument: string) => expect.objectContaining({ code: "invalid_argument", argument }) as Error;
    expect(() => createStore(engine, { name: "app", clock: 5 as never })).toThrow(refused("clock"));
    expect(() => createStore(engine, { name: "app", scheduler: {} as never })).toThrow(refused("scheduler"));
    expect(() => createStore(engine, { name: "app", scheduler: { setTimeout: () => 1 } as never })).toThrow(refused("scheduler"));
    expect(() => createStore(engine, { name: "app", onLeaseRenewError: "log" as never })).toThrow(refused("onLeaseRenewError"));
    expect(() => createLeaser(engine, { store: "app", clock: "now" as never })).toThrow(InvalidStorageArgumentError);
    expect(() => createLeaser(engine, { store: "app", scheduler: { setTimeout: 1, clearTimeout: 2 } as never })).toThrow(refused("scheduler"));
    expect(() => createLeaser(engine, { store: "app", onRenewError: {} as never })).toThrow(refused("onRenewError"));
    // Nothing was granted on the way: the name is free.
    const lease = await createStore(engine, { name: "app" }).leaser.acquire("job");
    expect(lease.epoch).toBe(1);
    await lease.release();
    await engine.close();
  });

  it("refuse a lease ttl too short to renew before it runs out", () => {
    const engine = memoryEngine();
    expect(() => createStore(engine, { name: "app", leaseTtlMs: 1 })).toThrow(expect.objectContaining({ code: "invalid_argument" }));
    expect(() => createStore(engine, { name: "app", leaseTtlMs: 3, leaseRenewEveryMs: 3 })).toThrow(expect.objectContaining({ code: "invalid_argument" }));
    expect(() => createStore(engine, { name: "app", leaseTtlMs: 2 })).not.toThrow();
  });
});

describe("a blob whose content stream fails", () => {
  it("is refused with a typed error carrying the stream's error, and nothing is stored", async () => {
    const engine = memoryEngine();
    const store = createStore(engine, { name: "app" });
    const broken = new Error("upload broke off");
    let pulls = 0;
    const stream = newByteStream({
      pull: async (controller) => {
        await Promise.resolve();
        if (pulls++ === 0) controller.enqueue(new Uint8Array([1, 2, 3]));
        else controller.error(broken);
      },
    });
    const refusal = await store.blobs.put("snap", stream).then(
      () => null,
      (error: unknown) => error,
    );
    expect(refusal).toBeInstanceOf(StorageError);
    expect(refusal).toMatchObject({ code: "invalid_argument", argument: "content", cause: broken });
    expect(await store.blobs.list("")).toEqual([]);
    await engine.close();
  });
});

describe("blob content that is not a readable stream of bytes", () => {
  it("is refused with a typed error for the content (a locked stream, an object whose reader fails, with the cause), and nothing is stored", async () => {
    const engine = memoryEngine();
    const store = createStore(engine, { name: "app" });
    const refusal = (content: unknown) =>
      store.blobs.put("snap", content as Uint8Array).then(
        () => null,
        (error: unknown) => error,
      );
    const locked = new ReadableStream<Uint8Array>({
      start: (controller) => {
        controller.enqueue(new Uint8Array([1]));
        controller.close();
      },
    });
    locked.getReader();
    expect(await refusal(locked)).toMatchObject({ code: "invalid_argument", argument: "content", cause: expect.any(TypeError) as Error });
    const broken = new Error("no reader for you");
    expect(await refusal({ getReader: () => { throw broken; } })).toMatchObject({ code: "invalid_argument", argument: "content", cause: broken });
    expect(await refusal({ getReader: () => ({}) })).toMatchObject({ code: "invalid_argument", argument: "content", cause: expect.any(TypeError) as Error });
    expect(await refusal({ getReader: () => null })).toMatchObject({ code: "invalid_argument", argument: "content" });
    expect(await store.blobs.list("")).toEqual([]);
    await engine.close();
  });
});

describe("ledger cursors", () => {
  it("overlapping next() calls, also through the async iterator, hand out each record once, in order, then the end", async () => {
    const engine = memoryEngine();
    const store = createStore(engine, { name: "app" });
    const count = 260; // more than one page (256 records)
    for (let seq = 1; seq <= count; seq++) await store.ledger.append("log", seq - 1, new Uint8Array([seq % 256]));
    const cursor = await store.ledger.read("log", 1);
    const records = await Promise.all(Array.from({ length: count + 2 }, () => cursor.next()));
    expect(records.map((record) => record?.seq)).toEqual([...Array.from({ length: count }, (_, i) => i + 1), undefined, undefined]);

    const iterator = (await store.ledger.read("log", count - 2))[Symbol.asyncIterator]();
    const steps = await Promise.all([iterator.next(), iterator.next(), iterator.next(), iterator.next(), iterator.next()]);
    expect(steps.map((step) => (step.done === true ? "done" : step.value.seq))).toEqual([count - 2, count - 1, count, "done", "done"]);
    await engine.close();
  });
});

describe("leases", () => {
  it("a lease whose renewal never settles is lost at its expiry, when another holder can first be granted the name", async () => {
    const troubled = troubledEngine();
    const time = virtualClock();
    const scheduler = handScheduler(time);
    const options = { name: "app", clock: time.clock, scheduler, leaseTtlMs: 3_000, leaseRenewEveryMs: 1_000 };
    const store = createStore(troubled.engine, options);
    const lease = await store.leaser.acquire("job");
    troubled.mode = "hang";
    await scheduler.advance(2_999); // the renewal due at 1 s never settles
    expect(lease.signal.aborted).toBe(false);
    troubled.mode = "ok";
    const other = createStore(troubled.engine, options);
    await expect(other.leaser.acquire("job")).rejects.toMatchObject({ code: "lease_held", holderEpoch: 1 });
    await scheduler.advance(1); // the expiry
    expect(lease.signal.aborted).toBe(true);
    expect(lease.signal.reason).toMatchObject({ code: "lease_lost", epoch: 1 });
    const taker = await other.leaser.acquire("job");
    expect(taker.epoch).toBe(2);
    await taker.release();
    expect(scheduler.rejections).toEqual([]);
  });

  it("a throwing onLeaseRenewError neither stops renewal nor leaves a rejected promise behind", async () => {
    const troubled = troubledEngine();
    const time = virtualClock();
    const scheduler = handScheduler(time);
    const told: unknown[] = [];
    const onLeaseRenewError = (error: unknown) => {
      told.push(error);
      throw new Error("the logger broke");
    };
    const store = createStore(troubled.engine, { name: "app", clock: time.clock, scheduler, leaseTtlMs: 3_000, leaseRenewEveryMs: 1_000, onLeaseRenewError });
    const lease = await store.leaser.acquire("job");
    troubled.mode = "fail";
    await scheduler.advance(1_000); // the renewal fails, and so does the callback told about it
    expect(told).toEqual([expect.objectContaining({ code: "backend", operation: "lease.renew" })]);
    troubled.mode = "ok";
    await scheduler.advance(10_000); // renewal goes on, well past the first expiry
    expect(lease.signal.aborted).toBe(false);
    await store.leaser.assertHeld("job", lease.epoch);
    expect(scheduler.rejections).toEqual([]);
    await lease.release();
  });

  it("a lease longer than the longest timer delay (2^31 - 1 ms) waits in steps of at most that delay, renews, and is given up at its expiry", async () => {
    const troubled = troubledEngine();
    const time = virtualClock();
    const scheduler = handScheduler(time);
    const day = 86_400_000;
    const store = createStore(troubled.engine, { name: "app", clock: time.clock, scheduler, leaseTtlMs: 90 * day, leaseRenewEveryMs: 30 * day });
    const lease = await store.leaser.acquire("job");
    await scheduler.advance(100 * day); // renewals every 24.9 days at most (the longest delay)
    expect(lease.signal.aborted).toBe(false);
    troubled.mode = "hang"; // no renewal lands any more: the lease ends 90 days after the last one, which came after day 90
    await scheduler.advance(79 * day);
    expect(lease.signal.aborted).toBe(false);
    await scheduler.advance(11 * day);
    expect(lease.signal.aborted).toBe(true);
    expect(scheduler.delays.length).toBeGreaterThan(0);
    expect(Math.max(...scheduler.delays)).toBeLessThanOrEqual(0x7fffffff);
    expect(scheduler.rejections).toEqual([]);
  });

  it("releasing a released lease again resolves at once, also with an already-aborted signal", async () => {
    const engine = memoryEngine();
    const lease = await createStore(engine, { name: "app" }).leaser.acquire("job");
    await lease.release();
    const aborted = new AbortController();
    aborted.abort(new Error("cancelled"));
    await expect(lease.release({ signal: aborted.signal })).resolves.toBeUndefined();
    await engine.close();
  });
});
