/**
 * Example tests of the IndexedDB engine, one (or a few) per promise it makes,
 * shared by the Node lane (fake-indexeddb, `./indexeddb-engine.node.test.ts`)
 * and real Chromium (`test/browser/indexeddb-engine.test.ts`): key order,
 * scans, atomic rollback, own writes, serializability, readonly, dead handles,
 * refused calls, close and reopen, durability and the journal's mode, typed
 * errors through the journal.
 *
 * Not a test file by itself (it registers nothing until called); named
 * `.test.ts` so the build leaves it out.
 */
import { describe, expect, it } from "vitest";
import { InvalidKeyError, type Engine, type Entry, type Key, type KeyRange } from "../../src/engine.js";
import { BackendError, createJournal, createUsageEvent, newRequestId } from "../../src/index.js";
import { compareKeys } from "../../src/engine.js";
import { encodeKey } from "../../src/ordered/key-encoding.js";
import { IndexedDbEngineError, type IndexedDbEngineHandle, type IndexedDbEngineOptions } from "./index.js";
import { IndexedDbEngine, type IndexedDbPlatform } from "./indexeddb-engine.js";
import { DEFAULT_LOG_LIMITS, EVIDENCE_MS, EVIDENCE_SWEEP, type LogLimits, TRUST_MS } from "./log.js";
import { LOG_STORE, MIGRATIONS, openEngineDatabase, PAGES_STORE } from "./schema.js";

/** How a lane creates engines: a fresh database name every call unless one is given. */
export interface EngineLane {
  /** An engine on a new, empty database (or on `name`, to reopen one). */
  engine(options?: Partial<IndexedDbEngineOptions>): IndexedDbEngineHandle;
  /** The IndexedDB the lane's engines use. */
  platform(): IndexedDbPlatform;
}

let databases = 0;
const runId = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

/** A database name no other test uses. */
function freshName(what: string): string {
  return `${what}-${runId}-${++databases}`;
}

/** A deterministic pseudo-random source (mulberry32), so a failing sequence replays. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function putAll(engine: Engine, keys: readonly Key[]): Promise<void> {
  await engine.transact("readwrite", async (tx) => {
    keys.forEach((k, i) => tx.put(k, i));
  });
}

async function scanAll(engine: Engine, range: KeyRange = {}, reverse = false): Promise<Entry[]> {
  return engine.transact("readonly", (tx) => tx.scan(range, { reverse }));
}

async function keysOf(engine: Engine, range: KeyRange = {}, reverse = false): Promise<Key[]> {
  return (await scanAll(engine, range, reverse)).map((e) => e.key);
}

const ORDERED_KEYS: Key[] = [
  [-1e308],
  [-2.5],
  [-1],
  [0],
  [0, 0],
  [0, "a"],
  [0.5],
  [1],
  [10],
  [""],
  ["", ""],
  ["\u0000"],
  ["A"],
  ["B"],
  ["a"],
  ["a", 1],
  ["a", "b"],
  ["a\u0000"],
  ["ab"],
  ["b"],
  ["\u00ff"],
  ["\u0100"],
  ["\ud800"],
  ["\udc00"],
  ["\uffff"],
];

const RANGE_KEYS: Key[] = [["a"], ["a", 1], ["a", 2], ["a", 2, "x"], ["a", 3], ["a", "z"], ["ab"], ["b"], [1], [2]];

/** Register the behaviour tests of the engine for one lane. */
export function describeIndexedDbEngine(label: string, lane: EngineLane): void {
  describe(`indexedDbEngine (${label}): basics`, () => {
    it("puts, gets, overwrites and deletes, and resolves transact with the body's result", async () => {
      const engine = lane.engine();
      const result = await engine.transact("readwrite", async (tx) => {
        tx.put(["a"], 1);
        tx.put(["a"], 2);
        tx.put(["b"], 3);
        tx.delete(["b"]);
        tx.delete(["never"]);
        return "done";
      });
      expect(result).toBe("done");
      await engine.transact("readonly", async (tx) => {
        expect(await tx.get(["a"])).toBe(2);
        expect(await tx.get(["b"])).toBeUndefined();
      });
      expect(await scanAll(engine)).toEqual([{ key: ["a"], value: 2 }]);
      await engine.close();
    });

    it("stores structured values (nested objects, Uint8Array) and hands back equal copies", async () => {
      const engine = lane.engine();
      const value = { n: 1, list: [1, "two", null], bytes: new Uint8Array([1, 2, 255]), nested: { ok: true } };
      await engine.transact("readwrite", async (tx) => tx.put(["v"], value));
      const stored = await engine.transact("readonly", (tx) => tx.get<typeof value>(["v"]));
      expect(stored).toEqual(value);
      expect(stored!.bytes).toBeInstanceOf(Uint8Array);
      await engine.close();
    });

    it("is durable with strict durability (a journal over it is billing_grade) and not with relaxed", async () => {
      const strict = lane.engine();
      const relaxed = lane.engine({ durability: "relaxed" });
      expect(strict.durable).toBe(true);
      expect(strict.durability).toBe("strict");
      expect(relaxed.durable).toBe(false);
      expect(createJournal(strict, { name: "j" }).mode).toBe("billing_grade");
      expect(createJournal(relaxed, { name: "j" }).mode).toBe("telemetry_grade");
      // Relaxed still commits.
      await putAll(relaxed, [["x"]]);
      expect(await keysOf(relaxed)).toEqual([["x"]]);
      await strict.close();
      await relaxed.close();
    });
  });

  describe(`indexedDbEngine (${label}): key order`, () => {
    it("orders numbers before strings, numbers by value, strings by UTF-16 code units, prefixes first", async () => {
      const engine = lane.engine();
      const shuffled = [...ORDERED_KEYS].reverse();
      shuffled.push(...ORDERED_KEYS.filter((_, i) => i % 2 === 0));
      await putAll(engine, shuffled);
      expect(await keysOf(engine)).toEqual(ORDERED_KEYS);
      expect(await keysOf(engine, {}, true)).toEqual([...ORDERED_KEYS].reverse());
      await engine.close();
    });
  });

  describe(`indexedDbEngine (${label}): scan ranges`, () => {
    async function filled(): Promise<IndexedDbEngineHandle> {
      const engine = lane.engine();
      await putAll(engine, RANGE_KEYS);
      return engine;
    }

    it("honours prefix (the prefix key itself included, longer strings excluded), and an empty prefix is every key", async () => {
      const engine = await filled();
      expect(await keysOf(engine, { prefix: ["a"] })).toEqual([["a"], ["a", 1], ["a", 2], ["a", 2, "x"], ["a", 3], ["a", "z"]]);
      expect(await keysOf(engine, { prefix: ["a", 2] })).toEqual([["a", 2], ["a", 2, "x"]]);
      expect(await keysOf(engine, { prefix: ["zz"] })).toEqual([]);
      expect(await keysOf(engine, { prefix: [] })).toHaveLength(RANGE_KEYS.length);
      await engine.close();
    });

    it("honours lower/upper with open and closed ends, and intersects them with a prefix", async () => {
      const engine = await filled();
      expect(await keysOf(engine, { lower: ["a", 2], upper: ["a", 3] })).toEqual([["a", 2], ["a", 2, "x"], ["a", 3]]);
      expect(await keysOf(engine, { lower: ["a", 2], lowerOpen: true, upper: ["a", 3], upperOpen: true })).toEqual([["a", 2, "x"]]);
      expect(await keysOf(engine, { upper: [2] })).toEqual([[1], [2]]);
      expect(await keysOf(engine, { lower: ["ab"] })).toEqual([["ab"], ["b"]]);
      expect(await keysOf(engine, { prefix: ["a"], lower: ["a", 2], lowerOpen: true })).toEqual([["a", 2, "x"], ["a", 3], ["a", "z"]]);
      expect(await keysOf(engine, { prefix: ["a"], upper: ["b"] })).toHaveLength(6);
      expect(await keysOf(engine, { prefix: ["a"], lower: [0], upper: ["a", 1] })).toEqual([["a"], ["a", 1]]);
      expect(await keysOf(engine, { prefix: ["a", 2], lower: ["a", 2], lowerOpen: true })).toEqual([["a", 2, "x"]]);
      expect(await keysOf(engine, { prefix: ["a", 2], upper: ["a", 2], upperOpen: true })).toEqual([]);
      expect(await keysOf(engine, { prefix: ["a", 2], upper: ["a", 2] })).toEqual([["a", 2]]);
      await engine.close();
    });

    it("returns nothing for an empty or inverted range", async () => {
      const engine = await filled();
      expect(await keysOf(engine, { lower: ["b"], upper: ["a"] })).toEqual([]);
      expect(await keysOf(engine, { lower: ["b"], upper: ["a"] }, true)).toEqual([]);
      expect(await keysOf(engine, { lower: ["b"], lowerOpen: true, upper: ["b"] })).toEqual([]);
      await engine.close();
    });

    it("honours limit and reverse", async () => {
      const engine = await filled();
      await engine.transact("readonly", async (tx) => {
        expect((await tx.scan({ prefix: ["a"] }, { limit: 2 })).map((e) => e.key)).toEqual([["a"], ["a", 1]]);
        expect((await tx.scan({ prefix: ["a"] }, { limit: 2, reverse: true })).map((e) => e.key)).toEqual([
          ["a", "z"],
          ["a", 3],
        ]);
        expect((await tx.scan({ upper: ["a", 2], upperOpen: true }, { reverse: true })).map((e) => e.key)).toEqual([["a", 1], ["a"], [2], [1]]);
        expect(await tx.scan({}, { limit: 100 })).toHaveLength(RANGE_KEYS.length);
        expect((await tx.scan({ prefix: ["a"] }, { limit: 1 }))[0]).toEqual({ key: ["a"], value: 0 });
      });
      await engine.close();
    });

    it("refuses a limit that is not a positive integer with a RangeError", async () => {
      const engine = await filled();
      for (const limit of [0, -1, 1.5, NaN, Infinity]) {
        await expect(engine.transact("readonly", (tx) => tx.scan({}, { limit }))).rejects.toBeInstanceOf(RangeError);
      }
      await engine.close();
    });
  });

  describe(`indexedDbEngine (${label}): atomicity`, () => {
    it("rolls back every write when the body throws, and rejects with exactly what it threw", async () => {
      const engine = lane.engine();
      await putAll(engine, [["keep"], ["overwrite"], ["remove"]]);
      const before = await scanAll(engine);
      const boom = new Error("boom");
      await expect(
        engine.transact("readwrite", async (tx) => {
          tx.put(["new"], "n");
          tx.put(["overwrite"], "changed");
          tx.delete(["remove"]);
          await tx.get(["keep"]);
          tx.put(["new"], "again");
          throw boom;
        }),
      ).rejects.toBe(boom);
      expect(await scanAll(engine)).toEqual(before);
      await engine.close();
    });

    it("rolls back when the body rejects with a non-Error after awaiting, or throws synchronously", async () => {
      const engine = lane.engine();
      const reason = { not: "an Error" };
      await expect(
        engine.transact("readwrite", async (tx) => {
          tx.put(["a"], 1);
          await tx.scan({});
          // eslint-disable-next-line @typescript-eslint/only-throw-error -- the point of the test
          throw reason;
        }),
      ).rejects.toBe(reason);
      const sync = new Error("sync");
      await expect(
        engine.transact("readwrite", (tx) => {
          tx.put(["b"], 1);
          throw sync;
        }),
      ).rejects.toBe(sync);
      expect(await scanAll(engine)).toEqual([]);
      await engine.close();
    });

    it("shows a transaction its own writes through get and scan", async () => {
      const engine = lane.engine();
      await putAll(engine, [["a"], ["c"]]);
      await engine.transact("readwrite", async (tx) => {
        tx.put(["b"], "new");
        tx.delete(["c"]);
        expect(await tx.get(["b"])).toBe("new");
        expect(await tx.get(["c"])).toBeUndefined();
        expect((await tx.scan({})).map((e) => e.key)).toEqual([["a"], ["b"]]);
      });
      await engine.close();
    });

    it("serializes concurrent read-modify-write transactions: no update is lost", async () => {
      const engine = lane.engine();
      await putAll(engine, [["counter"]]);
      const increments = Array.from({ length: 20 }, () =>
        engine.transact("readwrite", async (tx) => {
          const n = (await tx.get<number>(["counter"])) ?? 0;
          tx.put(["counter"], n + 1);
        }),
      );
      await Promise.all(increments);
      expect(await engine.transact("readonly", (tx) => tx.get(["counter"]))).toBe(20);
      await engine.close();
    });

    it("refuses a value that cannot be cloned from the put itself, and writes nothing of that transaction", async () => {
      const engine = lane.engine();
      await expect(
        engine.transact("readwrite", async (tx) => {
          tx.put(["ok"], 1);
          tx.put(["bad"], { fn: () => 1 });
        }),
      ).rejects.toMatchObject({ name: "DataCloneError" });
      expect(await scanAll(engine)).toEqual([]);
      await engine.close();
    });

    it("commits nothing after a refused call even when the body catches it (invalid key, readonly write)", async () => {
      const engine = lane.engine();
      let caught: unknown;
      await expect(
        engine.transact("readwrite", async (tx) => {
          tx.put(["a"], 1);
          try {
            tx.put([Number.NaN], 2);
          } catch (error) {
            caught = error;
          }
          return "swallowed";
        }),
      ).rejects.toBeInstanceOf(InvalidKeyError);
      expect(caught).toBeInstanceOf(InvalidKeyError);
      await expect(engine.transact("readonly", async (tx) => tx.put(["a"], 1))).rejects.toBeInstanceOf(TypeError);
      await expect(engine.transact("readonly", async (tx) => tx.delete(["a"]))).rejects.toBeInstanceOf(TypeError);
      for (const bad of [[], [true], [Infinity], "a", [["nested"]]]) {
        await expect(engine.transact("readonly", (tx) => tx.get(bad as unknown as Key))).rejects.toBeInstanceOf(InvalidKeyError);
      }
      expect(await scanAll(engine)).toEqual([]);
      await engine.close();
    });

    it("refuses every call on a handle once its body settled", async () => {
      const engine = lane.engine();
      let leaked: Parameters<Parameters<Engine["transact"]>[1]>[0] | undefined;
      await engine.transact("readwrite", async (tx) => {
        leaked = tx;
      });
      expect(() => leaked!.put(["late"], 1)).toThrow(/already finished/);
      expect(() => leaked!.get(["late"])).toThrow(/already finished/);
      expect(await scanAll(engine)).toEqual([]);
      await engine.close();
    });

    it("stores nothing of a body that awaited something else (IndexedDB committed under it), and says so (committed_early)", async () => {
      const engine = lane.engine();
      const failure = engine.transact("readwrite", async (tx) => {
        tx.put(["early"], 1);
        // Breaks the rule: IndexedDB commits while the body waits on a timer.
        await new Promise((resolve) => setTimeout(resolve, 50));
        tx.put(["late"], 2);
      });
      await expect(failure).rejects.toMatchObject({ code: "committed_early" });
      // Writes reach IndexedDB only once the body returned: the early commit stored none of them.
      expect(await keysOf(engine)).toEqual([]);
      // The same when the body does not touch the transaction again after the wait: its writes are refused as a whole.
      await expect(
        engine.transact("readwrite", async (tx) => {
          tx.put(["early"], 1);
          await new Promise((resolve) => setTimeout(resolve, 50));
          return "done";
        }),
      ).rejects.toMatchObject({ code: "committed_early" });
      expect(await keysOf(engine)).toEqual([]);
      // And when the body catches the refused call and returns: the refusal dooms the transaction all the same.
      await expect(
        engine.transact("readwrite", async (tx) => {
          await tx.get(["early"]);
          await new Promise((resolve) => setTimeout(resolve, 50));
          try {
            tx.put(["late"], 2);
          } catch {
            // swallowed on purpose
          }
          return "done";
        }),
      ).rejects.toMatchObject({ code: "committed_early" });
      expect(await keysOf(engine)).toEqual([]);
      await engine.close();
    });
  });

  describe(`indexedDbEngine (${label}): close and reopen`, () => {
    it("keeps the data in the database: a new engine on the same name sees it after close", async () => {
      const first = lane.engine();
      await putAll(first, [["a"], ["b", 1]]);
      await first.close();
      const second = lane.engine({ name: first.name });
      expect(await keysOf(second)).toEqual([["a"], ["b", 1]]);
      await second.close();
    });

    it("lets running transactions finish on close, then refuses new ones with a `closed` error", async () => {
      const engine = lane.engine();
      const running = putAll(engine, [["a"]]);
      const closing = engine.close();
      await expect(running).resolves.toBeUndefined();
      await closing;
      await expect(engine.transact("readonly", async () => 1)).rejects.toMatchObject({ code: "closed", retryable: false });
      await engine.close();
      const again = lane.engine({ name: engine.name });
      expect(await keysOf(again)).toEqual([["a"]]);
      await again.close();
    });

    it("rejects an unknown mode or a missing body", async () => {
      const engine = lane.engine();
      await expect(engine.transact("write" as never, async () => 1)).rejects.toBeInstanceOf(TypeError);
      await expect(engine.transact("readonly", undefined as never)).rejects.toBeInstanceOf(TypeError);
      await engine.close();
    });

    it("reports engine failures through the journal as backend errors with the engine error as cause", async () => {
      const engine = lane.engine();
      const journal = createJournal(engine, { name: "j" });
      await engine.close();
      const event = createUsageEvent({ record: { requestId: newRequestId(1), namespace: "ns", subject: "s", data: { units: 1 } }, observedAt: 1 });
      const error: unknown = await journal.append(event).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(BackendError);
      expect((error as BackendError).retryable).toBe(false);
      expect((error as BackendError).cause).toBeInstanceOf(IndexedDbEngineError);
    });
  });

  describe(`indexedDbEngine (${label}): pages, cache and schema`, () => {
    const paged = (name: string, maxRows: number, cachePages: number, logLimits: LogLimits = DEFAULT_LOG_LIMITS, clock?: () => number): IndexedDbEngine =>
      new IndexedDbEngine({
        name,
        durability: "strict",
        platform: () => lane.platform(),
        pageLimits: { maxRows, maxBytes: 1024 },
        cachePages,
        logLimits,
        // The test's clock stands for both of the engine's (it only moves forward).
        ...(clock ? { clock, monotonic: clock } : {}),
      });
    /** The ages a checkpoint record carries (`w`, see `Witness` in ./log.ts): whatever the engine knew. */
    const ages = expect.any(Array) as unknown;
    /** What the database `name` stores: its log records in version order, and how many pages. */
    const stored = async (name: string): Promise<{ log: unknown[]; pages: number }> => {
      const { indexedDB: factory, IDBKeyRange: keyRanges } = lane.platform();
      const db = await openEngineDatabase(factory, keyRanges, name);
      try {
        const tx = db.transaction([LOG_STORE, PAGES_STORE]);
        const log = new Promise<unknown[]>((resolve) => {
          const request = tx.objectStore(LOG_STORE).getAll();
          request.onsuccess = () => resolve(request.result);
        });
        const pages = new Promise<number>((resolve) => {
          const request = tx.objectStore(PAGES_STORE).count();
          request.onsuccess = () => resolve(request.result);
        });
        return { log: await log, pages: await pages };
      } finally {
        db.close();
      }
    };
    const logs: { label: string; limits: LogLimits }[] = [
      { label: "every commit a checkpoint", limits: { records: 0, bytes: 0 } },
      { label: "a 3-record log", limits: { records: 3, bytes: 4096 } },
      { label: "the default log", limits: DEFAULT_LOG_LIMITS },
    ];

    it.each(logs)("two engines on one database (two tabs) each read the other's writes at once, through page splits and folds ($label)", async ({ limits }) => {
      const name = freshName("two-tabs");
      const tabs = [paged(name, 4, 64, limits), paged(name, 4, 64, limits)];
      const model = new Map<string, { key: Key; value: unknown }>();
      const next = random(7);
      const keyOf = (): Key => {
        const r = next();
        return r < 0.5 ? ["e", Math.floor(next() * 40)] : r < 0.8 ? ["k", `s${Math.floor(next() * 6)}`, Math.floor(next() * 8)] : ["u", Math.floor(next() * 12)];
      };
      const expected = (): Entry[] =>
        [...model.values()].sort((a, b) => compareKeys(a.key, b.key)).map((row) => ({ key: row.key, value: row.value }));
      for (let step = 0; step < 120; step++) {
        const tab = tabs[step % 2]!;
        const r = next();
        if (r < 0.15) {
          // Clear a stretch of event rows.
          const from = Math.floor(next() * 40);
          const to = from + Math.floor(next() * 12);
          await tab.transact("readwrite", async (tx) => tx.deleteRange!({ prefix: ["e"], lower: ["e", from], upper: ["e", to] }));
          for (const [enc, row] of model) if (row.key[0] === "e" && (row.key[1] as number) >= from && (row.key[1] as number) <= to) model.delete(enc);
        } else {
          // A few writes in one transaction, reading one of them back inside it.
          const writes: [Key, number | null][] = [];
          const n = 1 + Math.floor(next() * 6);
          for (let i = 0; i < n; i++) writes.push([keyOf(), next() < 0.3 ? null : step * 10 + i]);
          await tab.transact("readwrite", async (tx) => {
            for (const [key, value] of writes) {
              if (value === null) tx.delete(key);
              else tx.put(key, { step, value, pad: "x".repeat(value % 50) });
            }
            const [lastKey, lastValue] = writes[writes.length - 1]!;
            const seen = (await tx.get<{ value: number }>(lastKey))?.value ?? null;
            expect(seen).toBe(lastValue);
          });
          for (const [key, value] of writes) {
            if (value === null) model.delete(encodeKey(key));
            else model.set(encodeKey(key), { key, value: { step, value, pad: "x".repeat(value % 50) } });
          }
        }
        // The other tab (whose cache holds pages from before) sees exactly the model.
        const other = tabs[(step + 1) % 2]!;
        expect(await scanAll(other)).toEqual(expected());
        if (step % 10 === 0) expect((await scanAll(other, {}, true)).reverse()).toEqual(expected());
      }
      for (const tab of tabs) await tab.close();
    });

    describe("reading the cache unchecked (optimistic and trusted transactions)", () => {
      const increment = async (engine: IndexedDbEngine, runs: number[] = []): Promise<number> =>
        engine.transact("readwrite", async (tx) => {
          const seen = (await tx.get<number>(["counter"])) ?? 0;
          runs.push(seen);
          tx.put(["counter"], seen + 1);
          tx.put(["row", seen], seen);
          return seen + 1;
        });
      const readCounter = async (engine: IndexedDbEngine, runs: unknown[]): Promise<unknown> =>
        engine.transact("readonly", async (tx) => {
          const value = await tx.get(["counter"]);
          runs.push(value);
          return value;
        });

      it.each(logs)("runs a body again, on the current version, when another engine object wrote since its cache's, and once when none did ($label)", async ({ limits }) => {
        let now = 1_000_000;
        const clock = (): number => now;
        const name = freshName("optimistic");
        const [a, b] = [paged(name, 4, 64, limits, clock), paged(name, 4, 64, limits, clock)];
        expect(await increment(a)).toBe(1);
        // A confirmed its version by committing on it: its next writing transaction is trusted, and runs once.
        let runs: number[] = [];
        expect(await increment(a, runs)).toBe(2);
        expect(runs).toEqual([1]);
        // B writes twice (through a checkpoint when the log is small): A's cache is stale. A's trusted
        // commit is refused by the evidence of B's first commit, and its body runs again on the current view.
        expect(await increment(b)).toBe(3);
        expect(await increment(b)).toBe(4);
        runs = [];
        expect(await increment(a, runs)).toBe(5);
        expect(runs).toEqual([2, 4]);
        // Another tab is writing: A's next transactions read the version first, and each runs once.
        for (let i = 0; i < 3; i++) {
          expect(await increment(b)).toBe(6 + 2 * i);
          runs = [];
          expect(await increment(a, runs)).toBe(7 + 2 * i);
          expect(runs).toEqual([6 + 2 * i]);
        }
        // Past the trust time (and the contention), a transaction still reads the cache at once, and the
        // version read issued beside it finds B's write: a readonly body runs again too.
        for (let i = 0; i < 8; i++) await increment(a);
        now += TRUST_MS;
        expect(await increment(b)).toBe(20);
        const reads: unknown[] = [];
        expect(await readCounter(a, reads)).toBe(20);
        expect(reads).toEqual([19, 20]);
        expect(await keysOf(b, { prefix: ["row"] })).toEqual(Array.from({ length: 20 }, (_, i) => ["row", i]));
        await a.close();
        await b.close();
      });

      it.each(logs)("loses no update when three engine objects (tabs) increment one counter at once, in bursts and one by one ($label)", async ({ limits }) => {
        const name = freshName("three-tabs");
        const tabs = [paged(name, 4, 64, limits), paged(name, 4, 64, limits), paged(name, 4, 64, limits)];
        const next = random(11);
        let expected = 0;
        for (let round = 0; round < 6; round++) {
          // A burst: every tab issues a few increments without waiting, so their transactions interleave.
          const burst: Promise<number>[] = [];
          for (let i = 0; i < 9; i++) burst.push(increment(tabs[Math.floor(next() * 3)]!));
          expected += burst.length;
          const seen = (await Promise.all(burst)).sort((x, y) => x - y);
          expect(seen).toEqual(Array.from({ length: burst.length }, (_, i) => expected - burst.length + i + 1));
          // Then one by one, alternating tabs (each mostly a stale view of the others' writes).
          for (let i = 0; i < 4; i++) expect(await increment(tabs[(round + i) % 3]!)).toBe(++expected);
        }
        for (const tab of tabs) expect(await tab.transact("readonly", (tx) => tx.get(["counter"]))).toBe(expected);
        expect(await keysOf(tabs[0]!, { prefix: ["row"] })).toEqual(Array.from({ length: expected }, (_, i) => ["row", i]));
        for (const tab of tabs) await tab.close();
      });

      it("trusts a confirmed version only briefly: long after, the evidence of a missed commit may be gone, so the version is read", async () => {
        let now = 1_000_000;
        const clock = (): number => now;
        const name = freshName("evidence");
        // A commits change records; B checkpoints at every commit, so it deletes the records and, past the
        // evidence time, the checkpoint records that kept their bases.
        const a = paged(name, 4, 64, DEFAULT_LOG_LIMITS, clock);
        const b = paged(name, 4, 64, { records: 0, bytes: 0 }, clock);
        expect(await increment(a)).toBe(1);
        expect(await increment(a)).toBe(2);
        // B commits on A's version (A's cache misses it), then, past the evidence time, checkpoints enough
        // to delete every trace of that commit.
        expect(await increment(b)).toBe(3);
        now += EVIDENCE_MS + 1;
        for (let i = 0; i < 2 * EVIDENCE_SWEEP; i++) await increment(b);
        const total = 3 + 2 * EVIDENCE_SWEEP;
        // A's cache is at version 3 (the new database's checkpoint, then A's two change records); B's first
        // commit was made on 3, and nothing stored says so any more.
        const bases = (await stored(name)).log.flatMap((record) => (record as { b?: number | number[] }).b ?? []);
        expect(bases).not.toContain(3);
        expect(bases).toContain(4);
        // A, idle all that time, no longer trusts its version: it reads it, and no increment is lost.
        const runs: number[] = [];
        expect(await increment(a, runs)).toBe(total + 1);
        expect(runs).toEqual([2, total]);
        await a.close();
        await b.close();
      });

      it("judges its trust when IndexedDB runs the commit, not when the transaction was created: queued behind another tab's transactions past the evidence time, it is checked again", async () => {
        let now = 1_000_000;
        const clock = (): number => now;
        const name = freshName("queued-trust");
        const a = paged(name, 4, 64, DEFAULT_LOG_LIMITS, clock);
        const b = paged(name, 4, 64, { records: 0, bytes: 0 }, clock); // B checkpoints at every commit
        expect(await increment(a)).toBe(1);
        expect(await increment(a)).toBe(2); // A has just confirmed its version
        await b.transact("readonly", (tx) => tx.get(["counter"]));
        // B creates two transactions first (a backlog, or a tab that does not await): the first commits on
        // A's version; between the two, longer than the evidence time passes (B's tab slow or frozen), so the
        // second's checkpoint deletes the record of the first's base.
        const b1 = increment(b);
        const b2 = b.transact("readwrite", async (tx) => {
          const seen = (await tx.get<number>(["counter"])) ?? 0;
          now += EVIDENCE_MS + 1_000;
          tx.put(["counter"], seen + 1);
          tx.put(["row", seen], seen);
          return seen + 1;
        });
        // A writes at once, within its trust time as it creates the transaction; IndexedDB runs it after B's.
        const runs: number[] = [];
        const a3 = increment(a, runs);
        expect([await b1, await b2]).toEqual([3, 4]);
        // When its commit ran, A's trust had expired: it ran again on B's writes rather than commit on a swept base.
        expect(await a3).toBe(5);
        expect(runs).toEqual([2, 4]);
        const fresh = paged(name, 4, 64, DEFAULT_LOG_LIMITS, clock);
        expect(await fresh.transact("readonly", (tx) => tx.get(["counter"]))).toBe(5);
        expect(await keysOf(fresh, { prefix: ["row"] })).toEqual(Array.from({ length: 5 }, (_, i) => ["row", i]));
        for (const engine of [a, b, fresh]) await engine.close();
      });

      it("dates a commit's confirmation from when it ran, not from its complete event: a context that hears of its commit late does not trust it longer", async () => {
        let now = 1_000_000;
        const clock = (): number => now;
        const name = freshName("late-complete");
        const a = paged(name, 4, 64, DEFAULT_LOG_LIMITS, clock);
        const b = paged(name, 4, 64, { records: 0, bytes: 0 }, clock);
        expect(await increment(a)).toBe(1);
        expect(await increment(a)).toBe(2);
        // A's context is busy (or frozen) when its next commit completes: its complete event is handled late.
        const held: (() => void)[] = [];
        let holding = true;
        const db = (a as unknown as { db: IDBDatabase }).db;
        const transaction = db.transaction.bind(db);
        (db as unknown as { transaction: typeof db.transaction }).transaction = ((...args: Parameters<typeof db.transaction>) => {
          const tx = transaction(...args);
          let handler: ((this: IDBTransaction, event: Event) => unknown) | null = null;
          const late = (event: Event) => {
            if (holding) held.push(() => handler?.call(tx, event));
            else handler?.call(tx, event);
          };
          // The platform's own `oncomplete` (an accessor on the prototype in a browser) gets `late`; the engine's
          // handler is kept aside.
          let proto: object | null = Object.getPrototypeOf(tx) as object | null;
          let platformSetter: ((this: IDBTransaction, value: unknown) => void) | undefined;
          while (proto !== null && platformSetter === undefined) {
            const descriptor = Object.getOwnPropertyDescriptor(proto, "oncomplete");
            // eslint-disable-next-line @typescript-eslint/unbound-method -- called with the transaction as `this` below
            platformSetter = descriptor?.set;
            proto = Object.getPrototypeOf(proto) as object | null;
          }
          Object.defineProperty(tx, "oncomplete", {
            set: (h: typeof handler) => {
              handler = h;
              platformSetter?.call(tx, h === null ? null : late);
            },
            get: () => (handler === null ? null : late),
            configurable: true,
          });
          return tx;
        }) as typeof db.transaction;
        const a3 = increment(a);
        await new Promise((resolve) => setTimeout(resolve, 50)); // A's commit is stored; A has not heard of it
        // Meanwhile B builds on A's version and, past the evidence time, sweeps the record of that.
        await b.transact("readonly", (tx) => tx.get(["counter"]));
        expect(await increment(b)).toBe(4);
        now += EVIDENCE_MS + 1_000;
        expect(await increment(b)).toBe(5);
        holding = false;
        for (const handle of held.splice(0)) handle();
        expect(await a3).toBe(3);
        // A's next write reads the version (its confirmation dates from its commit, long ago): nothing lost.
        const runs: number[] = [];
        expect(await increment(a, runs)).toBe(6);
        expect(runs).toEqual([3, 5]);
        const fresh = paged(name, 4, 64, DEFAULT_LOG_LIMITS, clock);
        expect(await fresh.transact("readonly", (tx) => tx.get(["counter"]))).toBe(6);
        for (const engine of [a, b, fresh]) await engine.close();
      });

      it("keeps replaced checkpoint records, with the versions they cover, for the evidence time, then deletes them", async () => {
        let now = 1_000_000;
        const name = freshName("retention");
        const engine = paged(name, 4, 64, { records: 1, bytes: 100_000 }, () => now);
        const checkpoints = async (): Promise<unknown[]> => (await stored(name)).log.filter((record) => (record as { checkpoint?: boolean }).checkpoint === true);
        for (let i = 0; i < 4; i++) await increment(engine);
        // Versions: 1 the new database's checkpoint (given an old time by the schema upgrade), 2 a change
        // record, 3 a checkpoint (made on 2, replacing the record made on 1; it deletes checkpoint 1, past
        // the evidence time), 4 a change record, 5 a checkpoint.
        const t0 = now;
        expect(await checkpoints()).toEqual([
          { checkpoint: true, cp: 3, at: t0, b: [1, 2], w: ages },
          { checkpoint: true, cp: 5, at: t0, b: [3, 4], w: ages },
        ]);
        // Exactly the evidence time later, they are kept.
        now += EVIDENCE_MS;
        await increment(engine);
        await increment(engine);
        expect(await checkpoints()).toEqual([
          { checkpoint: true, cp: 3, at: t0, b: [1, 2], w: ages },
          { checkpoint: true, cp: 5, at: t0, b: [3, 4], w: ages },
          { checkpoint: true, cp: 7, at: now, b: [5, 6], w: ages },
        ]);
        // Past it, the next checkpoint deletes them.
        now += 1;
        await increment(engine);
        await increment(engine);
        expect(await checkpoints()).toEqual([
          { checkpoint: true, cp: 7, at: now - 1, b: [5, 6], w: ages },
          { checkpoint: true, cp: 9, at: now, b: [7, 8], w: ages },
        ]);
        // A cold engine starts reading at the newest checkpoint and sees every row.
        const cold = paged(name, 4, 64, { records: 1, bytes: 100_000 }, () => now);
        expect(await keysOf(cold, { prefix: ["row"] })).toEqual(Array.from({ length: 8 }, (_, i) => ["row", i]));
        await cold.close();
        await engine.close();
      });
    });

    it("folds pages emptied by deletes into their neighbours, so storage shrinks with the rows", async () => {
      const name = freshName("fold");
      // Every commit a checkpoint: the pages alone hold the rows.
      const noLog = { records: 0, bytes: 0 };
      const engine = paged(name, 4, 8, noLog);
      await engine.transact("readwrite", async (tx) => {
        for (let i = 0; i < 100; i++) tx.put(["row", i], i);
      });
      const pagesStored = async (): Promise<number> => {
        const { indexedDB: factory, IDBKeyRange: keyRanges } = lane.platform();
        const db = await openEngineDatabase(factory, keyRanges, name);
        try {
          return await new Promise<number>((resolve, reject) => {
            const request = db.transaction(PAGES_STORE).objectStore(PAGES_STORE).count();
            request.onsuccess = () => resolve(request.result);
            request.onerror = () => reject(request.error ?? new Error("count failed"));
          });
        } finally {
          db.close();
        }
      };
      await engine.close();
      expect(await pagesStored()).toBeGreaterThanOrEqual(25);
      const again = paged(name, 4, 8, noLog);
      // Deletes one at a time, in separate transactions and in a range: every emptied page must go.
      for (let i = 0; i < 40; i++) await again.transact("readwrite", async (tx) => tx.delete(["row", i]));
      await again.transact("readwrite", async (tx) => tx.deleteRange!({ lower: ["row", 40], upper: ["row", 97] }));
      expect(await keysOf(again)).toEqual([["row", 98], ["row", 99]]);
      await again.close();
      expect(await pagesStored()).toBeLessThanOrEqual(2);
    });

    it("keeps a value larger than a page on a page of its own, between small rows", async () => {
      const engine = paged(freshName("large"), 4, 8);
      const large = "L".repeat(200_000);
      await engine.transact("readwrite", async (tx) => {
        for (let i = 0; i < 10; i++) tx.put(["row", i], i === 5 ? large : i);
      });
      const rows = await scanAll(engine);
      expect(rows.map((row) => row.key)).toEqual(Array.from({ length: 10 }, (_, i) => ["row", i]));
      expect(rows[5]!.value).toBe(large);
      await engine.close();
    });

    it("stores small commits as log records and writes them into the pages at the checkpoint", async () => {
      const name = freshName("log");
      const now = 1_000_000;
      const engine = paged(name, 4, 8, { records: 3, bytes: 100_000 }, () => now);
      for (let i = 0; i < 3; i++) await engine.transact("readwrite", async (tx) => tx.put(["row", i], i));
      // The checkpoint of the new database, then one change record per commit, each naming the version
      // it was made on; no page yet.
      const first = { checkpoint: true, cp: 1, at: 0, b: [] };
      expect(await stored(name)).toEqual({
        log: [first, ...[0, 1, 2].map((i) => ({ c: [], r: [[encodeKey(["row", i]), 9, i]], b: i + 1 }))],
        pages: 0,
      });
      expect(await keysOf(engine)).toEqual([0, 1, 2].map((i) => ["row", i]));
      // The log is full: the next commit writes everything into pages and replaces the change records
      // with its checkpoint (the first checkpoint, from the schema upgrade, is past the evidence time).
      await engine.transact("readwrite", async (tx) => tx.put(["row", 3], 3));
      expect(await stored(name)).toEqual({ log: [{ checkpoint: true, cp: 5, at: now, b: [1, 2, 3, 4], w: ages }], pages: 1 });
      await engine.close();
      const reopened = paged(name, 4, 8);
      expect(await keysOf(reopened)).toEqual([0, 1, 2, 3].map((i) => ["row", i]));
      await reopened.close();
    });

    it("upgrades a schema v3 log (no evidence of commits) to v4, keeping its change records and giving its checkpoint an old time", async () => {
      const name = freshName("upgrade-v4");
      const { indexedDB: factory, IDBKeyRange: keyRanges } = lane.platform();
      const v3 = await openEngineDatabase(factory, keyRanges, name, MIGRATIONS.slice(0, 3));
      // What a v3 engine leaves: the checkpoint at 1 and a change record at 2 (no bases).
      const change = { c: [], r: [[encodeKey(["row", 0]), 9, 0]] };
      await new Promise<void>((resolve, reject) => {
        const tx = v3.transaction(LOG_STORE, "readwrite");
        tx.objectStore(LOG_STORE).add(change, 2);
        tx.oncomplete = () => resolve();
        tx.onabort = () => reject(tx.error ?? new Error("aborted"));
      });
      v3.close();
      const now = 1_000_000;
      const [a, b] = [paged(name, 4, 64, DEFAULT_LOG_LIMITS, () => now), paged(name, 4, 64, DEFAULT_LOG_LIMITS, () => now)];
      expect(await scanAll(a)).toEqual([{ key: ["row", 0], value: 0 }]);
      await a.transact("readwrite", async (tx) => tx.put(["row", 1], 1));
      // Two engines that both saw version 3 commit on it: the second one's first run is refused by the
      // evidence of the first, and runs again on version 4.
      await b.transact("readonly", (tx) => tx.get(["row", 0]));
      await a.transact("readwrite", async (tx) => tx.put(["row", 2], 2));
      const runs: unknown[] = [];
      await b.transact("readwrite", async (tx) => {
        runs.push(await tx.get(["row", 2]));
        tx.put(["row", 3], 3);
      });
      expect(runs).toEqual([undefined, 2]);
      expect((await stored(name)).log).toEqual([
        { checkpoint: true, cp: 1, at: 0, b: [] },
        change,
        { c: [], r: [[encodeKey(["row", 1]), 9, 1]], b: 2 },
        { c: [], r: [[encodeKey(["row", 2]), 9, 2]], b: 3 },
        { c: [], r: [[encodeKey(["row", 3]), 9, 3]], b: 4 },
      ]);
      expect(await keysOf(b)).toEqual([0, 1, 2, 3].map((i) => ["row", i]));
      await a.close();
      await b.close();
    });

    it("upgrades a schema v1 database (a record per row) to pages, then v2 to the log, keeping every row in order", async () => {
      const name = freshName("upgrade");
      const { indexedDB: factory, IDBKeyRange: keyRanges } = lane.platform();
      const v1 = await openEngineDatabase(factory, keyRanges, name, MIGRATIONS.slice(0, 1));
      const rows: Entry[] = [];
      for (let i = 0; i < 1_300; i++) rows.push({ key: i % 3 === 0 ? ["a", i] : ["b", `r${String(i).padStart(5, "0")}`, i], value: { i, text: `row ${i}` } });
      await new Promise<void>((resolve, reject) => {
        const tx = v1.transaction("entries", "readwrite");
        for (const row of rows) tx.objectStore("entries").put(row.value, row.key as unknown as IDBValidKey);
        tx.oncomplete = () => resolve();
        tx.onabort = () => reject(tx.error ?? new Error("aborted"));
      });
      v1.close();
      (await openEngineDatabase(factory, keyRanges, name, MIGRATIONS.slice(0, 2))).close();
      const engine = new IndexedDbEngine({ name, durability: "strict", platform: () => lane.platform() });
      expect(await scanAll(engine)).toEqual([...rows].sort((a, b) => compareKeys(a.key, b.key)));
      expect(await engine.transact("readonly", (tx) => tx.get(["a", 300]))).toEqual({ i: 300, text: "row 300" });
      await engine.transact("readwrite", async (tx) => tx.put(["a", 1_000_000], "after"));
      expect(await engine.transact("readonly", (tx) => tx.scan({ prefix: ["a"] }, { reverse: true, limit: 1 }))).toEqual([{ key: ["a", 1_000_000], value: "after" }]);
      await engine.close();
      // The rows now live on pages, and v1's store and v2's version counter are gone.
      const v3 = await openEngineDatabase(factory, keyRanges, name);
      expect([...v3.objectStoreNames].sort()).toEqual(["log", "pages"]);
      const pageCount = await new Promise<number>((resolve, reject) => {
        const request = v3.transaction(PAGES_STORE).objectStore(PAGES_STORE).count();
        request.onsuccess = () => resolve(request.result);
        request.onerror = () => reject(request.error ?? new Error("count failed"));
      });
      expect(pageCount).toBeGreaterThan(5);
      expect(pageCount).toBeLessThan(rows.length / 10);
      v3.close();
    });
  });
}
