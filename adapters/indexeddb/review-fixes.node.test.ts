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
 * - Trust in a confirmed version was judged by the wall clock alone: stepped
 *   back, it brought a long-past confirmation back into trust, and a commit
 *   on a base whose evidence was swept meanwhile was stored below the newest
 *   checkpoint, where no engine reads it (`transact` resolved, the write was
 *   lost). The sweep dated evidence by the wall clock alone too: stepped
 *   forward past the evidence time and back within a trust, it did the same.
 * - A replaced checkpoint record was deleted only by an engine that had
 *   itself seen it stored for 20 s: apps whose contexts live less (a Service
 *   Worker, short tab sessions) never deleted any, and the log grew without
 *   bound. The time is now handed on in the records, and a record a day old
 *   by the wall clock goes anyway.
 * - The sweep looked at the 8 oldest replaced checkpoint records only: 8
 *   dated in the future (written while the clock ran ahead) stalled it.
 * - The page cache was bounded by page count only: rows larger than a page
 *   get a page each, so it held far more than the 32 MiB documented.
 * - A body that caught a refused call and then read got a platform
 *   `AbortError` (and so did `transact`) instead of the refusal.
 */
import { IDBFactory, IDBKeyRange } from "fake-indexeddb";
import { describe, expect, it } from "vitest";
import type { EngineTransaction } from "../../src/engine.js";
import { IndexedDbEngineError, indexedDbEngine } from "./index.js";
import { IndexedDbEngine } from "./indexeddb-engine.js";
import { EVIDENCE_MAX_MS, type LogLimits, TRUST_MS, WITNESS_MS } from "./log.js";
import type { PageCache } from "./pages.js";
import { LOG_STORE, MIGRATIONS, openEngineDatabase, SCHEMA_VERSION } from "./schema.js";
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

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const DAY = 24 * 60 * MINUTE;

/**
 * One machine: engines (tabs) on one fake-indexeddb database, with the two
 * clocks the test moves: `pass` lets real time go by (both clocks move),
 * `step` moves the wall clock alone (NTP, a user, a bad RTC).
 */
function machine(name: string) {
  const idb = new IDBFactory();
  const time = { wall: 1000 * DAY, mono: 0 };
  /** An engine; `monoOrigin`: its context's monotonic clock reads that much more (contexts do not share one). */
  const make = (logLimits: LogLimits, monoOrigin = 0): IndexedDbEngine =>
    new IndexedDbEngine({
      name,
      durability: "strict",
      platform: () => ({ indexedDB: idb, IDBKeyRange }),
      logLimits,
      clock: () => time.wall,
      monotonic: () => time.mono + monoOrigin,
      reserveBytes: 0,
    });
  const pass = (ms: number): void => {
    time.wall += ms;
    time.mono += ms;
  };
  const step = (ms: number): void => {
    time.wall += ms;
  };
  /** Every record of the `log` store. */
  const log = async (): Promise<{ checkpoint?: boolean; cp?: number; at?: number; b?: number | number[] }[]> => {
    const db = await openEngineDatabase(idb, IDBKeyRange, name, MIGRATIONS);
    try {
      return await new Promise((resolve) => {
        const request = db.transaction(LOG_STORE).objectStore(LOG_STORE).getAll();
        request.onsuccess = () => resolve(request.result as { b?: number | number[] }[]);
      });
    } finally {
      db.close();
    }
  };
  /** The versions the stored records name as their bases (the evidence of every commit not swept). */
  const bases = async (): Promise<number[]> => (await log()).flatMap((record) => record.b ?? []);
  return { time, make, pass, step, log, bases };
}

const put = (engine: IndexedDbEngine, key: string, value: unknown): Promise<void> => engine.transact("readwrite", async (tx) => tx.put([key], value));
const get = (engine: IndexedDbEngine, key: string): Promise<unknown> => engine.transact("readonly", (tx) => tx.get([key]));
const cacheOf = (engine: IndexedDbEngine): PageCache => (engine as unknown as { cache: PageCache }).cache;

/**
 * The wall clock stepped back 11 minutes, a second passes, and `a` (3 s after its confirmation by both clocks)
 * trusts its version and commits on it without reading it: the evidence refuses that commit and the body runs again
 * on the newest version, so the write lands. Returns a new engine that read it.
 */
async function expectStaleTrustRefused(m: ReturnType<typeof machine>, a: IndexedDbEngine): Promise<IndexedDbEngine> {
  m.step(-11 * MINUTE);
  m.pass(SECOND);
  let runs = 0;
  await a.transact("readwrite", async (tx) => {
    runs++;
    tx.put(["late"], "accepted");
  });
  expect(runs).toBe(2);
  const fresh = m.make({ records: 128, bytes: MiB });
  expect(await get(fresh, "late")).toBe("accepted");
  return fresh;
}

describe("review fixes: a wall clock stepped back or forth loses no commit", () => {
  it("ends the trust in a confirmed version by the monotonic clock too: a clock stepped back 20 minutes does not bring it back", async () => {
    const m = machine("clock-back");
    const small = { records: 2, bytes: MiB };
    const [a, b] = [m.make(small), m.make(small)];
    await put(a, "a0", 0); // A confirms its version by its commit
    const base = cacheOf(a).version!;
    const confirmed = m.time.wall;
    // The wall clock is stepped back 20 minutes; A stays idle. B builds on A's version and checkpoints.
    m.step(-20 * MINUTE);
    for (let i = 0; i < 3; i++) {
      m.pass(SECOND);
      await put(b, `b${i}`, i);
    }
    // 15 minutes on, B's checkpoints sweep the record of the commit made on A's version (dated 10 minutes back).
    m.pass(15 * MINUTE);
    for (let i = 3; i < 9; i++) {
      m.pass(SECOND);
      await put(b, `b${i}`, i);
    }
    expect(await m.bases()).not.toContain(base);
    // Five minutes more: by the wall clock, A confirmed its version a second ago; 20 minutes went by.
    m.pass(5 * MINUTE);
    m.time.wall = confirmed + SECOND;
    const runs: number[] = [];
    await a.transact("readwrite", async (tx) => {
      runs.push(runs.length);
      tx.put(["late"], "accepted");
    });
    // A read the version (its trust is over), found it stale, and ran again on the newest: every engine reads the write.
    expect(runs).toEqual([0, 1]);
    expect(await get(a, "late")).toBe("accepted");
    const fresh = m.make(small);
    expect(await get(fresh, "late")).toBe("accepted");
    expect(await get(fresh, "b8")).toBe(8);
    for (const engine of [a, b, fresh]) await engine.close();
  });

  it("deletes evidence only once the sweeping engine has seen it for WITNESS_MS on its monotonic clock: a wall clock stepped forward past the evidence time and back within a trust loses nothing", async () => {
    const m = machine("clock-forth-and-back");
    const a = m.make({ records: 128, bytes: MiB }); // change records: A's commits can be trusted
    const b = m.make({ records: 0, bytes: 0 }); // B checkpoints (and sweeps) at every commit
    await put(a, "a0", 0);
    await put(a, "a1", 1); // A has just confirmed its version by its commit
    const base = cacheOf(a).version!;
    m.pass(SECOND);
    await put(b, "b0", 0); // B commits on A's version: its checkpoint record names A's version
    expect(await m.bases()).toContain(base);
    // The wall clock jumps 11 minutes ahead: B's next checkpoint finds that record past the evidence time.
    m.step(11 * MINUTE);
    m.pass(SECOND);
    await put(b, "b1", 1);
    // B saw it stored a second ago only: it stays.
    expect(await m.bases()).toContain(base);
    // The clock is stepped back: A, 3 s after its confirmation by both clocks, trusts its version and commits
    // on it without reading it; the evidence refuses that commit, and A runs again on the newest version.
    const fresh = await expectStaleTrustRefused(m, a);
    expect(await get(fresh, "b1")).toBe(1);
    // Once B has seen it for WITNESS_MS, the evidence goes (past the evidence time by the wall clock too).
    m.pass(WITNESS_MS);
    m.step(11 * MINUTE);
    await put(b, "b2", 2);
    expect(await m.bases()).not.toContain(base);
    for (const engine of [a, b, fresh]) await engine.close();
  });

  it("still trusts a version confirmed moments ago by both clocks: a write then costs its change record alone", async () => {
    const m = machine("trusted");
    const a = m.make({ records: 128, bytes: MiB });
    await put(a, "a0", 0);
    m.pass(TRUST_MS - 1);
    // Trusted: the transaction reads no version before its body runs, so a read of the cache is at hand.
    const mode = await a.transact("readwrite", async (tx) => {
      tx.put(["a1"], 1);
      return (tx as unknown as { mode: string }).mode;
    });
    expect(mode).toBe("trusted");
    m.pass(1);
    const later = await a.transact("readwrite", async (tx) => {
      tx.put(["a2"], 2);
      return (tx as unknown as { mode: string }).mode;
    });
    expect(later).toBe("trusted"); // confirmed again by the commit before
    m.pass(TRUST_MS);
    expect(await a.transact("readwrite", async (tx) => (tx.put(["a3"], 3), (tx as unknown as { mode: string }).mode))).toBe("optimistic");
    await a.close();
  });
});

describe("review fixes: checkpoint records dated in the future", () => {
  it("re-dates them to now, so they wait the full evidence time from now and the sweep goes on", async () => {
    const m = machine("future");
    const engine = m.make({ records: 0, bytes: 0 }); // every commit a checkpoint
    // The clock runs a month ahead (a bad RTC at boot) for 9 checkpoints, then is corrected.
    m.step(30 * DAY);
    for (let i = 0; i < 9; i++) {
      m.pass(SECOND);
      await put(engine, `k${i}`, i);
    }
    m.step(-30 * DAY);
    const count = async (): Promise<number> => (await m.log()).length;
    // For the evidence time after the correction, every record stays (re-dated, not dropped).
    for (let i = 0; i < 9; i++) {
      m.pass(MINUTE);
      await put(engine, `k${i % 50}`, i);
    }
    expect(await count()).toBe(18);
    // Then the sweep goes on: over 5 hours of a checkpoint a minute, the log holds about ten minutes of them.
    for (let i = 0; i < 300; i++) {
      m.pass(MINUTE);
      await put(engine, `k${i % 50}`, i);
    }
    expect(await count()).toBeLessThanOrEqual(12);
    expect((await m.log()).every((record) => record.at! <= m.time.wall)).toBe(true);
    await engine.close();
  });
});

describe("review fixes: the page cache is bounded by bytes", () => {
  it("keeps at most `cacheBytes` of pages, whatever their count (rows larger than a page get one each), reads every row back, and drops them at close()", async () => {
    const engine = new IndexedDbEngine({
      name: "cache-bytes",
      durability: "strict",
      platform: () => ({ indexedDB: new IDBFactory(), IDBKeyRange }),
      cacheBytes: 1 * MiB,
      reserveBytes: 0,
    });
    const row = (i: number): Uint8Array => new Uint8Array(100 * KiB).fill(i);
    for (let i = 0; i < 30; i++) await engine.transact("readwrite", async (tx) => tx.put(["blob", i], row(i)));
    const cache = cacheOf(engine);
    const held = (): number => cache.all().reduce((sum, page) => sum + page.bytes, 0);
    expect(cache.bytes).toBeLessThanOrEqual(1 * MiB);
    expect(held()).toBeLessThanOrEqual(1 * MiB);
    for (let i = 0; i < 30; i++) {
      const value = await engine.transact("readonly", (tx) => tx.get<Uint8Array>(["blob", i]));
      expect(value?.byteLength).toBe(100 * KiB);
      expect(value?.[0]).toBe(i % 256);
    }
    expect(cache.size).toBeGreaterThan(1);
    expect(held()).toBeLessThanOrEqual(1 * MiB);
    // The pages used last are the ones kept.
    expect(cache.all().some((page) => page.keys.length > 0 && (page.values[0] as Uint8Array)[0] === 29)).toBe(true);
    await engine.close();
    expect(cache.size).toBe(0);
    expect(cache.bytes).toBe(0);
  });
});

describe("review fixes: a body that catches a refused call", () => {
  /** An engine whose cache is cold (reopened): its reads wait for requests. */
  async function cold(name: string): Promise<{ engine: IndexedDbEngine; reopen: () => IndexedDbEngine }> {
    const idb = new IDBFactory();
    const make = (): IndexedDbEngine => new IndexedDbEngine({ name, durability: "strict", platform: () => ({ indexedDB: idb, IDBKeyRange }), reserveBytes: 0 });
    const engine = make();
    await engine.transact("readwrite", async (tx) => {
      for (let i = 0; i < 300; i++) tx.put(["k", i], i);
    });
    await engine.close();
    return { engine: make(), reopen: make };
  }

  const bodies: [string, (tx: EngineTransaction, refuse: () => void) => Promise<unknown>][] = [
    [
      "then gets",
      async (tx, refuse) => {
        refuse();
        return tx.get(["k", 299]);
      },
    ],
    [
      "then scans",
      async (tx, refuse) => {
        refuse();
        return tx.scan({ prefix: ["k"] });
      },
    ],
    [
      "then writes and reads",
      async (tx, refuse) => {
        refuse();
        tx.put(["k", 1], "x");
        return tx.get(["k", 1]);
      },
    ],
    [
      "after issuing a get it awaits afterwards",
      async (tx, refuse) => {
        const pending = tx.get(["k", 299]);
        refuse();
        return pending;
      },
    ],
    [
      "after issuing a scan it awaits afterwards",
      async (tx, refuse) => {
        const pending = tx.scan({ prefix: ["k"] }, { reverse: true });
        refuse();
        return pending;
      },
    ],
  ];

  it("throws the first refusal again from every later call of the body (the transaction is being aborted), and rejects transact with it", async () => {
    const { engine } = await cold("refused-later-calls");
    let thrown: unknown;
    const later: unknown[] = [];
    const attempt = async (call: () => unknown): Promise<void> => {
      try {
        await call();
        later.push("no error");
      } catch (error) {
        later.push(error);
      }
    };
    const error: unknown = await engine
      .transact("readwrite", async (tx) => {
        try {
          tx.put([], 1);
        } catch (e) {
          thrown = e;
        }
        await attempt(() => tx.put(["k", 1], "x"));
        await attempt(() => tx.delete(["k", 2]));
        await attempt(() => tx.get(["k", 3]));
        await attempt(() => tx.scan({ prefix: ["k"] }));
        return "the body thinks it succeeded";
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(thrown).toMatchObject({ code: "invalid_key" });
    expect(later).toEqual([thrown, thrown, thrown, thrown]);
    expect(later.every((e) => e === thrown)).toBe(true);
    expect(error).toBe(thrown);
    await engine.close();
  });

  for (const [label, body] of bodies) {
    it(`rejects transact with the refusal, as the memory engine does, when the body catches it ${label}`, async () => {
      const { engine, reopen } = await cold(`refused-${label}`);
      let thrown: unknown;
      const refuse = (tx: EngineTransaction) => (): void => {
        try {
          tx.delete([Number.NaN]);
        } catch (error) {
          thrown = error;
        }
      };
      const error: unknown = await engine.transact("readwrite", (tx) => body(tx, refuse(tx))).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(thrown).toMatchObject({ code: "invalid_key" });
      expect(error).toBe(thrown);
      await engine.close();
      // Nothing of it was stored.
      const after = reopen();
      expect(await after.transact("readonly", (tx) => tx.get(["k", 1]))).toBe(1);
      await after.close();
    });
  }
});

describe("review fixes: short-lived contexts keep the log bounded", () => {
  /**
   * `contexts` contexts (a service worker woken, a short tab session), one
   * every `gap` ms, each a new engine whose monotonic clock starts at 0, living
   * `lifeMs` and writing `commits` times evenly over its life; returns the
   * number of checkpoint records after each context.
   */
  async function contexts(m: ReturnType<typeof machine>, options: { contexts: number; gap: number; lifeMs: number; commits: number; logLimits: LogLimits }): Promise<number[]> {
    const counts: number[] = [];
    for (let c = 0; c < options.contexts; c++) {
      m.time.mono = 0; // a new context: its own performance.now()
      const engine = m.make(options.logLimits);
      for (let i = 0; i < options.commits; i++) {
        await put(engine, `k${i % 40}`, [c, i]);
        m.pass(options.lifeMs / options.commits);
      }
      await engine.close();
      m.step(options.gap);
      counts.push((await m.log()).filter((record) => record.checkpoint === true).length);
    }
    return counts;
  }

  it("deletes replaced checkpoint records written by contexts of 15 s each (a witness handed on in the records): about ten minutes of them stay", async () => {
    const m = machine("short-contexts");
    // 100 contexts of 15 s, one every 15 minutes (25 hours), each with a checkpoint or two.
    const counts = await contexts(m, { contexts: 100, gap: 15 * MINUTE, lifeMs: 15 * SECOND, commits: 24, logLimits: { records: 16, bytes: MiB } });
    expect(Math.max(...counts.slice(20))).toBeLessThanOrEqual(6);
    const fresh = m.make({ records: 16, bytes: MiB });
    expect(await get(fresh, "k23")).toEqual([99, 23]);
    await fresh.close();
  });

  it("hands on only the time a context saw pass: a context that reads a record moments after another wrote it does not delete it, whatever either's monotonic clock reads, and a wall clock stepped forward and back loses nothing", async () => {
    const m = machine("handed-on");
    const a = m.make({ records: 128, bytes: MiB }); // change records: A's commits can be trusted
    await put(a, "a0", 0);
    await put(a, "a1", 1); // A has just confirmed its version by its commit
    const base = cacheOf(a).version!;
    m.pass(SECOND);
    // B, a context whose performance.now() reads an hour, checkpoints on A's version and ends.
    const b = m.make({ records: 0, bytes: 0 }, 60 * MINUTE);
    await put(b, "b0", 0);
    await b.close();
    expect(await m.bases()).toContain(base);
    // The wall clock jumps 11 minutes ahead; C, a new context whose clock reads two hours, reads B's
    // record, waits a second and checkpoints: one second and a bit is known to have passed, not 20.
    m.step(11 * MINUTE);
    const c = m.make({ records: 0, bytes: 0 }, 120 * MINUTE);
    await get(c, "b0");
    m.pass(SECOND);
    await put(c, "c0", 0);
    await c.close();
    expect(await m.bases()).toContain(base);
    // The clock is stepped back: A, 3 s after its confirmation, trusts its version; the evidence refuses its commit.
    const fresh = await expectStaleTrustRefused(m, a);
    expect(await get(fresh, "c0")).toBe(0);
    for (const engine of [a, fresh]) await engine.close();
  });

  it("deletes them past EVIDENCE_MAX_MS by the wall clock alone when no context lives to see any time pass (each checkpoints at once and ends)", async () => {
    const m = machine("instant-contexts");
    // 150 contexts, one every 30 minutes (75 hours), each one commit that checkpoints, taking no time at all.
    const counts = await contexts(m, { contexts: 150, gap: 30 * MINUTE, lifeMs: 0, commits: 1, logLimits: { records: 0, bytes: 0 } });
    const bound = EVIDENCE_MAX_MS / (30 * MINUTE) + 2;
    expect(Math.max(...counts)).toBeLessThanOrEqual(bound);
    expect(counts.at(-1)).toBeGreaterThanOrEqual(bound - 4); // the wall clock alone: a day of them stays
  });
});
