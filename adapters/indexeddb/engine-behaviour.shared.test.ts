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
import { IndexedDbEngineError, type IndexedDbEngineHandle, type IndexedDbEngineOptions } from "./index.js";

/** How a lane creates engines: a fresh database name every call unless one is given. */
export interface EngineLane {
  /** An engine on a new, empty database (or on `name`, to reopen one). */
  engine(options?: Partial<IndexedDbEngineOptions>): IndexedDbEngineHandle;
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

    it("says a body that awaited something else and then failed may have committed (committed_early)", async () => {
      const engine = lane.engine();
      const failure = engine.transact("readwrite", async (tx) => {
        tx.put(["early"], 1);
        // Breaks the rule: IndexedDB commits while the body waits on a timer.
        await new Promise((resolve) => setTimeout(resolve, 50));
        tx.put(["late"], 2);
      });
      await expect(failure).rejects.toMatchObject({ code: "committed_early" });
      expect(await keysOf(engine)).toEqual([["early"]]);
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
}
