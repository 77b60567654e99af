/**
 * Tests of the tuple-keyed map (memory engine, journal read-ahead): random sets, deletes and gets
 * against a naive model keyed by `compareKeys` equality (so `0` and `-0` are
 * one key, `1` and `"1"` two, and a key that is a prefix of another is its own
 * entry), and the pruning promise (deleting every key leaves only the top
 * levels).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compareKeys, type Key } from "./engine.js";
import { TupleMap } from "./tuple-map.js";

const RUNS = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env.SOAK === "1" ? 5_000 : 200;

/** Few distinct elements, so that keys share prefixes and collide. */
const part = fc.constantFrom<string | number>(0, -0, 1, 1.5, -1, "", "0", "1", "a", "\u0000", "\uffff");
const key: fc.Arbitrary<Key> = fc.array(part, { minLength: 1, maxLength: 3 });

type Op =
  | { readonly t: "set"; readonly k: Key; readonly v: number }
  | { readonly t: "delete"; readonly k: Key }
  | { readonly t: "get"; readonly k: Key };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.tuple(key, fc.nat()).map(([k, v]): Op => ({ t: "set", k, v })),
  key.map((k): Op => ({ t: "delete", k })),
  key.map((k): Op => ({ t: "get", k })),
);

/** The naive reference: a list of entries compared with `compareKeys`. */
class Model {
  entries: { key: Key; value: number }[] = [];
  find(k: Key): number {
    return this.entries.findIndex((e) => compareKeys(e.key, k) === 0);
  }
}

describe("TupleMap", () => {
  it("agrees with a compareKeys-keyed list on random sets, deletes and gets (property)", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const map = new TupleMap<{ v: number }>();
        const model = new Model();
        for (const o of ops) {
          const i = model.find(o.k);
          if (o.t === "set") {
            map.set(o.k, { v: o.v });
            if (i === -1) model.entries.push({ key: o.k, value: o.v });
            else model.entries[i] = { key: o.k, value: o.v };
          } else if (o.t === "delete") {
            const removed = map.delete(o.k);
            expect(removed?.v).toBe(i === -1 ? undefined : model.entries[i]!.value);
            if (i !== -1) model.entries.splice(i, 1);
          } else {
            expect(map.get(o.k)?.v).toBe(i === -1 ? undefined : model.entries[i]!.value);
            // getPrefix reads the key made of the first n elements, for every n.
            for (let n = 1; n <= o.k.length; n++) {
              const j = model.find(o.k.slice(0, n));
              expect(map.getPrefix(o.k, n)?.v).toBe(j === -1 ? undefined : model.entries[j]!.value);
            }
          }
        }
        for (const e of model.entries) expect(map.get(e.key)?.v).toBe(e.value);
        // Deleting everything prunes every level but the top one of each key
        // length ever set.
        for (const e of model.entries) expect(map.delete(e.key)?.v).toBe(e.value);
        for (const e of model.entries) expect(map.get(e.key)).toBeUndefined();
        expect(map.levelCount()).toBe(new Set(ops.filter((o) => o.t === "set").map((o) => o.k.length)).size);
      }),
      { numRuns: RUNS },
    );
  });

  it("keeps a key and its extensions apart, and 0 / -0 together", () => {
    const map = new TupleMap<string>();
    map.set(["a"], "a");
    map.set(["a", 1], "a1");
    map.set(["a", "1"], "a'1'");
    map.set([0], "zero");
    expect(map.get(["a"])).toBe("a");
    expect(map.get(["a", 1])).toBe("a1");
    expect(map.get(["a", "1"])).toBe("a'1'");
    expect(map.get([-0])).toBe("zero");
    expect(map.get(["a", 1, 2])).toBeUndefined();
    expect(map.get(["b"])).toBeUndefined();
    map.leaf(["a", 2]).set(2, "a2");
    expect(map.get(["a", 2])).toBe("a2");
    expect(map.delete(["a", 1])).toBe("a1");
    expect(map.get(["a"])).toBe("a");
    expect(map.delete(["a", 1])).toBeUndefined();
    expect(map.delete(["zz", 1])).toBeUndefined();
  });

  it("prunes the levels a delete leaves empty, and clear() empties it", () => {
    const map = new TupleMap<number>();
    map.set(["x", "y", 1], 1);
    map.set(["x", "y", 2], 2);
    map.set(["x", "z", 3], 3);
    expect(map.levelCount()).toBe(4); // top, ["x"], ["x","y"], ["x","z"]
    map.delete(["x", "z", 3]);
    expect(map.levelCount()).toBe(3);
    map.delete(["x", "y", 1]);
    expect(map.levelCount()).toBe(3);
    map.delete(["x", "y", 2]);
    expect(map.levelCount()).toBe(1);
    map.set(["k"], 1);
    map.clear();
    expect(map.get(["k"])).toBeUndefined();
    expect(map.levelCount()).toBe(0);
  });

  it("forEach visits every value once with its whole key", () => {
    const map = new TupleMap<string>();
    const keys = [["a"], ["a", 1], ["a", 2, "x"], ["b", "c"], [0]];
    for (const key of keys) map.set(key, JSON.stringify(key));
    map.delete(["b", "c"]);
    const seen: [string, unknown][] = [];
    map.forEach((value, key) => seen.push([value, key]));
    const expected = keys.filter((key) => key[0] !== "b").map((key) => [JSON.stringify(key), key]);
    expect(seen.sort()).toEqual(expected.sort());
  });
});
