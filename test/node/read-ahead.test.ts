/**
 * The read-ahead handle (src/journal/read-ahead.ts) must answer exactly what the engine
 * would, at any point of the transaction: reads it cached, its own writes
 * over them, and cached scans that a write inside their range makes stale.
 * A counting transaction shows which calls reached the engine.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import type { EngineTransaction, Key } from "../../src/engine.js";
import { readAhead } from "../../src/journal/read-ahead.js";

function counting(tx: EngineTransaction): EngineTransaction & { gets: number; scans: number } {
  const counted = {
    gets: 0,
    scans: 0,
    get: <V>(key: Key) => {
      counted.gets += 1;
      return tx.get<V>(key);
    },
    put: (key: Key, value: unknown) => tx.put(key, value),
    delete: (key: Key) => tx.delete(key),
    scan: ((range, options) => {
      counted.scans += 1;
      return tx.scan(range, options);
    }) as EngineTransaction["scan"],
  };
  return counted;
}

describe("read-ahead", () => {
  it("answers cached reads without the engine, and its own writes over them", async () => {
    const engine = memoryEngine();
    await engine.transact("readwrite", async (raw) => {
      raw.put(["a", "1"], "one");
      const tx = counting(raw);
      const cached = await readAhead(tx, [["a", "1"], ["a", "2"]], [[["a", "3"], "known"]]);
      expect(tx.gets).toBe(2);
      expect(await cached.get(["a", "1"])).toBe("one");
      expect(await cached.get(["a", "2"])).toBeUndefined();
      expect(await cached.get(["a", "3"])).toBe("known");
      expect(tx.gets).toBe(2);
      cached.put(["a", "2"], "two");
      cached.delete(["a", "1"]);
      expect(await cached.get(["a", "2"])).toBe("two");
      expect(await cached.get(["a", "1"])).toBeUndefined();
      expect(tx.gets).toBe(2);
      // A key it never read goes to the engine.
      expect(await cached.get(["b"])).toBeUndefined();
      expect(tx.gets).toBe(3);
      // Reading ahead again extends the same handle.
      expect(await readAhead(cached, [["b"]])).toBe(cached);
    });
    await engine.close();
  });

  it("serves a cached scan until a write lands inside its range", async () => {
    const engine = memoryEngine();
    await engine.transact("readwrite", async (raw) => {
      for (const n of [1, 2, 3, 4]) raw.put(["k", "x", n], n);
      const tx = counting(raw);
      const scan = { range: { prefix: ["k", "x"], lower: ["k", "x", 1], lowerOpen: true }, options: { limit: 2 } };
      const cached = await readAhead(tx, [], [], [scan]);
      expect(tx.scans).toBe(1);
      const keys = async () => (await cached.scan(scan.range, scan.options)).map((entry) => entry.key);
      expect(await keys()).toEqual([["k", "x", 2], ["k", "x", 3]]);
      expect(tx.scans).toBe(1);
      // Writes outside the range (another prefix, or below `lower`) keep it.
      cached.put(["k", "y", 2], 0);
      cached.put(["k", "x", 1], "again");
      expect(await keys()).toEqual([["k", "x", 2], ["k", "x", 3]]);
      expect(tx.scans).toBe(1);
      // A write inside it (even past the limit's reach) makes the next scan go to the engine.
      cached.delete(["k", "x", 2]);
      expect(await keys()).toEqual([["k", "x", 3], ["k", "x", 4]]);
      expect(tx.scans).toBe(2);
      // A different limit is a different scan.
      await cached.scan(scan.range, { limit: 3 });
      expect(tx.scans).toBe(3);
    });
    await engine.close();
  });

  it("reads keys that differ only in a nearby integer with one scan, and sparse ones one by one", async () => {
    const engine = memoryEngine();
    await engine.transact("readwrite", async (raw) => {
      for (let n = 1; n <= 300; n++) raw.put(["e", n], `event ${n}`);
      raw.put(["u", "c", 5], "five");
      raw.put(["u", "c", 9], "nine");
      const tx = counting(raw);
      // Under "e": two positions close together and one far off (beyond
      // 3 * 4 + 4 rows): one run and one point read. Under "u": three
      // close ones (one not stored): one run.
      const cached = await readAhead(tx, [["e", 10], ["e", 400], ["e", 12], ["u", "c", 5], ["u", "c", 9], ["u", "c", 7]]);
      expect([tx.scans, tx.gets]).toEqual([2, 1]);
      expect(await cached.get(["e", 10])).toBe("event 10");
      expect(await cached.get(["e", 12])).toBe("event 12");
      expect(await cached.get(["e", 400])).toBeUndefined();
      expect(await cached.get(["u", "c", 5])).toBe("five");
      expect(await cached.get(["u", "c", 7])).toBeUndefined();
      expect(await cached.get(["u", "c", 9])).toBe("nine");
      expect([tx.scans, tx.gets]).toEqual([2, 1]);
      // A group spread wider than its limit allows is read key by key.
      const sparse = counting(raw);
      const spread = await readAhead(sparse, [["e", 1], ["e", 200]]);
      expect([sparse.scans, sparse.gets]).toEqual([0, 2]);
      expect(await spread.get(["e", 200])).toBe("event 200");
    });
    await engine.close();
  });

  it("reads the keys past a run cut short by other keys in its range one by one", async () => {
    const engine = memoryEngine();
    await engine.transact("readwrite", async (raw) => {
      raw.put(["p", 1], "one");
      raw.put(["p", 3], "three");
      // Non-integer keys between 1 and 3: more rows than the run's limit (2 * 4 + 4).
      for (let k = 0; k < 200; k++) raw.put(["p", 1 + (k + 1) / 1000], k);
      const tx = counting(raw);
      const cached = await readAhead(tx, [["p", 1], ["p", 3]]);
      expect([tx.scans, tx.gets]).toEqual([1, 1]);
      expect(await cached.get(["p", 1])).toBe("one");
      expect(await cached.get(["p", 3])).toBe("three");
      expect([tx.scans, tx.gets]).toEqual([1, 1]);
    });
    await engine.close();
  });

  it("forwards deleteRange when the engine has it, and forgets what it cached in the range", async () => {
    const engine = memoryEngine();
    await engine.transact("readwrite", async (raw) => {
      for (const n of [1, 2, 3, 4]) raw.put(["d", n], n);
      raw.put(["d", "s"], "string");
      const tx = Object.assign(counting(raw), { deleteRange: raw.deleteRange!.bind(raw) });
      const scan = { range: { prefix: ["d"] } };
      const cached = await readAhead(tx, [["d", 1], ["d", 3], ["d", "s"]], [], [scan]);
      const [gets, scans] = [tx.gets, tx.scans];
      cached.deleteRange!({ prefix: ["d"], lower: ["d", 2], upper: ["d", 3] });
      expect(await cached.get(["d", 1])).toBe(1);
      expect(await cached.get(["d", 3])).toBeUndefined();
      expect(await cached.get(["d", "s"])).toBe("string");
      expect([tx.gets, tx.scans]).toEqual([gets, scans]);
      // The cached scan is read again, and sees the deletion.
      expect((await cached.scan(scan.range)).map((entry) => entry.key)).toEqual([["d", 1], ["d", 4], ["d", "s"]]);
      expect(tx.scans).toBe(scans + 1);
      // Over a handle without deleteRange, the wrapper has none either (callers fall back to clearRange's scan and deletes).
      const plain = await readAhead(counting(raw), []);
      expect(typeof plain.deleteRange === "function").toBe(false);
    });
    await engine.close();
  });

  it("reads a group of string keys with one range read, and the keys past a range cut short one by one", async () => {
    const engine = memoryEngine();
    await engine.transact("readwrite", async (raw) => {
      for (const id of ["a", "b", "c", "d"]) raw.put(["i", id], id.toUpperCase());
      const tx = counting(raw);
      const cached = await readAhead(tx, [], [], [], [{ prefix: ["i"], keys: [["i", "c"], ["i", "a"], ["i", "x"]] }]);
      expect([tx.scans, tx.gets]).toEqual([1, 0]);
      expect(await cached.get(["i", "a"])).toBe("A");
      expect(await cached.get(["i", "c"])).toBe("C");
      expect(await cached.get(["i", "x"])).toBeUndefined();
      expect([tx.scans, tx.gets]).toEqual([1, 0]);
      // 40 other keys between "m" and "n": past the group's limit (2 * 4 + 4 rows).
      for (let k = 0; k < 40; k++) raw.put(["i", `m${k}`], k);
      raw.put(["i", "n"], "N");
      const sparse = counting(raw);
      const partly = await readAhead(sparse, [], [], [], [{ prefix: ["i"], keys: [["i", "m"], ["i", "n"]] }]);
      expect([sparse.scans, sparse.gets]).toEqual([1, 1]);
      expect(await partly.get(["i", "m"])).toBeUndefined();
      expect(await partly.get(["i", "n"])).toBe("N");
      expect([sparse.scans, sparse.gets]).toEqual([1, 1]);
    });
    await engine.close();
  });
});
