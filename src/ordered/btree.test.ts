/**
 * Tests of the B+ tree (`./btree`): random inserts, deletes and bounded
 * scans against a sorted array, with every structural invariant checked after
 * each step, and the balance promises (logarithmic height, empty after
 * deleting everything).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BTree } from "./btree.js";

const RUNS = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env.SOAK === "1" ? 5_000 : 200;

interface Item {
  readonly enc: string;
  readonly n: number;
}

/** Short strings over a small alphabet, so that inserts and deletes collide. */
const str = fc.string({ unit: fc.constantFrom("a", "b", "c", "\u0000", "\u00ff"), maxLength: 3 });

type Op =
  | { readonly t: "insert"; readonly k: string }
  | { readonly t: "delete"; readonly k: string }
  | {
      readonly t: "scan";
      readonly lo: string | undefined;
      readonly loOpen: boolean;
      readonly hi: string | undefined;
      readonly hiOpen: boolean;
      readonly reverse: boolean;
      readonly limit: number;
    };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: str.map((k): Op => ({ t: "insert", k })) },
  { weight: 3, arbitrary: str.map((k): Op => ({ t: "delete", k })) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.option(str, { nil: undefined }),
        fc.boolean(),
        fc.option(str, { nil: undefined }),
        fc.boolean(),
        fc.boolean(),
        fc.oneof(fc.integer({ min: 1, max: 6 }), fc.constant(Infinity)),
      )
      .map(([lo, loOpen, hi, hiOpen, reverse, limit]): Op => ({ t: "scan", lo, loOpen, hi, hiOpen, reverse, limit })),
  },
);

/** The model's answer to a scan. */
function modelScan(model: readonly string[], o: Extract<Op, { t: "scan" }>): string[] {
  const inside = model.filter(
    (k) =>
      (o.lo === undefined || (o.loOpen ? k > o.lo : k >= o.lo)) &&
      (o.hi === undefined || (o.hiOpen ? k < o.hi : k <= o.hi)),
  );
  if (o.reverse) inside.reverse();
  return inside.slice(0, o.limit);
}

function treeScan(tree: BTree<Item>, o: Extract<Op, { t: "scan" }>): string[] {
  const out: string[] = [];
  tree.scan(o.lo, o.loOpen, o.hi, o.hiOpen, o.reverse, o.limit, (item) => out.push(item.enc));
  return out;
}

describe("BTree", () => {
  it("agrees with a sorted array on random inserts, deletes and scans, keeping its invariants (property)", () => {
    fc.assert(
      fc.property(fc.constantFrom(4, 5, 6, 64), fc.array(op, { maxLength: 300 }), (capacity, ops) => {
        const tree = new BTree<Item>(capacity);
        let model: string[] = [];
        ops.forEach((o, n) => {
          switch (o.t) {
            case "insert": {
              const added = tree.insert({ enc: o.k, n });
              expect(added).toBe(!model.includes(o.k));
              if (added) model = [...model, o.k].sort();
              break;
            }
            case "delete": {
              const removed = tree.delete(o.k);
              expect(removed?.enc).toBe(model.includes(o.k) ? o.k : undefined);
              model = model.filter((k) => k !== o.k);
              break;
            }
            case "scan":
              expect(treeScan(tree, o)).toEqual(modelScan(model, o));
              break;
          }
          tree.check();
          expect(tree.size).toBe(model.length);
        });
        const all: string[] = [];
        tree.scan(undefined, false, undefined, false, false, Infinity, (item) => all.push(item.enc));
        expect(all).toEqual(model);
        for (const k of model) expect(tree.find(k)?.enc).toBe(k);
        // Emptying the tree leaves a single empty leaf.
        for (const k of model) expect(tree.delete(k)?.enc).toBe(k);
        tree.check();
        expect(tree.size).toBe(0);
        expect(tree.height).toBe(1);
      }),
      { numRuns: RUNS },
    );
  });

  it("stays balanced: logarithmic height after many inserts, empty after deleting all of them", () => {
    for (const capacity of [4, 64]) {
      const tree = new BTree<Item>(capacity);
      const n = 20_000;
      // A fixed pseudo-random permutation of 0..n-1 (n is not a multiple of 7919).
      const keys = Array.from({ length: n }, (_, i) => String((i * 7919) % n).padStart(6, "0"));
      keys.forEach((k, i) => expect(tree.insert({ enc: k, n: i })).toBe(true));
      tree.check();
      // Every non-root node holds at least capacity/2 entries.
      const minFanout = capacity >> 1;
      expect(tree.height).toBeLessThanOrEqual(Math.ceil(Math.log(n) / Math.log(minFanout)) + 1);
      // Delete in another order, checking the structure now and then.
      const order = Array.from({ length: n }, (_, i) => keys[(i * 104729) % n]!);
      order.forEach((k, i) => {
        expect(tree.delete(k)?.enc).toBe(k);
        if (i % 997 === 0) tree.check();
      });
      tree.check();
      expect(tree.size).toBe(0);
      expect(tree.height).toBe(1);
      expect(tree.delete("000001")).toBeUndefined();
    }
  });

  it("handles ascending and descending bulk inserts (split at either edge)", () => {
    const up = new BTree<Item>(4);
    const down = new BTree<Item>(4);
    for (let i = 0; i < 1_000; i++) {
      up.insert({ enc: String(i).padStart(4, "0"), n: i });
      down.insert({ enc: String(999 - i).padStart(4, "0"), n: i });
    }
    up.check();
    down.check();
    const fromUp: string[] = [];
    up.scan("0100", true, "0105", false, true, 3, (item) => fromUp.push(item.enc));
    expect(fromUp).toEqual(["0105", "0104", "0103"]);
  });

  it("appends above the largest key after deletions left stale separators above it, and refuses a duplicate of the largest key", () => {
    const tree = new BTree<Item>(4);
    const enc = (i: number): string => String(i).padStart(4, "0");
    for (let i = 0; i < 400; i += 2) tree.insert({ enc: enc(i), n: i });
    // Delete the upper half: separators above the new largest key may stay behind.
    for (let i = 398; i >= 200; i -= 2) expect(tree.delete(enc(i))?.n).toBe(i);
    tree.check();
    expect(tree.insert({ enc: enc(198), n: -1 })).toBe(false);
    // Odd keys above the largest one, then ascending past the old range.
    for (let i = 199; i < 600; i += 2) expect(tree.insert({ enc: enc(i), n: i })).toBe(true);
    tree.check();
    // And keys inside the range still take the searching path.
    for (let i = 1; i < 199; i += 2) expect(tree.insert({ enc: enc(i), n: i })).toBe(true);
    tree.check();
    const all: string[] = [];
    tree.scan(undefined, false, undefined, false, false, Infinity, (item) => all.push(item.enc));
    // Every key up to 198, then the odd ones from 199 to 599.
    const expected = [...Array.from({ length: 199 }, (_, i) => i), ...Array.from({ length: 201 }, (_, i) => 199 + 2 * i)].map(enc);
    expect(all).toEqual(expected);
  });

  it("refuses a capacity below 4", () => {
    expect(() => new BTree<Item>(3)).toThrow(RangeError);
    expect(() => new BTree<Item>(4.5)).toThrow(RangeError);
  });

  it("set() replaces the item of a key that is there (size unchanged) and inserts one that is not", () => {
    const tree = new BTree<Item>(4);
    for (let i = 0; i < 50; i++) tree.insert({ enc: String(i).padStart(2, "0"), n: i });
    tree.set({ enc: "17", n: -17 });
    tree.set({ enc: "49", n: -49 });
    tree.set({ enc: "00", n: -1 });
    tree.set({ enc: "17a", n: 1000 });
    tree.check();
    expect(tree.size).toBe(51);
    expect([tree.find("17")?.n, tree.find("49")?.n, tree.find("00")?.n, tree.find("17a")?.n]).toEqual([-17, -49, -1, 1000]);
  });

  it("clear() empties the tree", () => {
    const tree = new BTree<Item>(4);
    for (let i = 0; i < 100; i++) tree.insert({ enc: String(i), n: i });
    tree.clear();
    tree.check();
    expect(tree.size).toBe(0);
    expect(tree.height).toBe(1);
  });
});
