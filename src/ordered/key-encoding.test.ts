/**
 * Tests of the order-preserving key encoding (the IndexedDB engine's): that JavaScript string order on
 * encodings is exactly `compareKeys` order, that prefixes map to string
 * prefixes and to the `[enc(p), prefixUpperBound(enc(p)))` interval, and that
 * encodings stay one-byte strings; and that a range's encoded interval holds
 * exactly the encodings of the keys the range accepts.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compareKeys, hasPrefix, inRange, type Key, type KeyRange } from "../engine.js";
import { decodeKey, encodedInterval, encodeKey, encodeKeyPart, prefixUpperBound } from "./key-encoding.js";

const RUNS = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env.SOAK === "1" ? 5_000 : 200;

/** Code units that sit on the escaping and tagging boundaries of the encoding. */
const edgeUnit = fc.constantFrom(
  "\u0000",
  "\u0001",
  "\u0002",
  "\u0003",
  "a",
  "b",
  "\u007f",
  "\u00fe",
  "\u00ff",
  "\u0100",
  "\u01ff",
  "\ud800",
  "\udbff",
  "\udc00",
  "\udfff",
  "\ufffe",
  "\uffff",
);
const keyString = fc.oneof(
  fc.constantFrom("", "\u0000", "\uffff", "\ud800", "\udc00", "a", "a\u0000", "ab"),
  fc.string({ unit: edgeUnit, maxLength: 4 }),
  fc.string({ unit: "binary", maxLength: 4 }),
);
const keyNumber = fc.oneof(
  fc.integer({ min: -3, max: 3 }),
  fc.constantFrom(
    0,
    -0,
    0.5,
    -0.5,
    1.5,
    -1.5,
    Number.MIN_VALUE,
    -Number.MIN_VALUE,
    Number.MAX_VALUE,
    -Number.MAX_VALUE,
    Number.MAX_SAFE_INTEGER,
    -Number.MAX_SAFE_INTEGER,
    2 ** 31,
    -(2 ** 31),
    2 ** 32,
  ),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);
const keyPart = fc.oneof(keyNumber, keyString);
const key: fc.Arbitrary<Key> = fc.array(keyPart, { minLength: 1, maxLength: 4 });

describe("key encoding", () => {
  it("orders encodings exactly like compareKeys (property)", () => {
    fc.assert(
      fc.property(key, key, (a, b) => {
        const ea = encodeKey(a);
        const eb = encodeKey(b);
        const expected = Math.sign(compareKeys(a, b));
        const actual = ea < eb ? -1 : ea > eb ? 1 : 0;
        expect(actual).toBe(expected);
      }),
      { numRuns: RUNS * 5 },
    );
  });

  it("orders encodings like compareKeys when keys share a prefix (property)", () => {
    // Random pairs rarely share elements; build pairs that differ late.
    fc.assert(
      fc.property(fc.array(keyPart, { maxLength: 3 }), key, key, (common, a, b) => {
        const ka = [...common, ...a];
        const kb = [...common, ...b];
        const ea = encodeKey(ka);
        const eb = encodeKey(kb);
        expect(ea < eb ? -1 : ea > eb ? 1 : 0).toBe(Math.sign(compareKeys(ka, kb)));
        // A key against its own extension.
        const ec = encodeKey(common.length > 0 ? common : a);
        const ext = [...(common.length > 0 ? common : a), ...b];
        expect(ec < encodeKey(ext)).toBe(true);
      }),
      { numRuns: RUNS * 5 },
    );
  });

  it("sorts a shuffled set of keys exactly like compareKeys (property)", () => {
    fc.assert(
      fc.property(fc.array(key, { maxLength: 40 }), (keys) => {
        const byCompare = [...keys].sort(compareKeys).map(encodeKey);
        const byEncoding = keys.map(encodeKey).sort();
        expect(byEncoding).toEqual(byCompare);
      }),
      { numRuns: RUNS },
    );
  });

  it("maps prefixes to string prefixes and to the prefix interval (property)", () => {
    fc.assert(
      fc.property(key, fc.array(keyPart, { minLength: 1, maxLength: 2 }), fc.boolean(), (k, p, extend) => {
        const full = extend ? [...p, ...k] : k;
        const ek = encodeKey(full);
        const ep = encodeKey(p);
        const expected = hasPrefix(full, p);
        expect(ek.startsWith(ep)).toBe(expected);
        expect(ep <= ek && ek < prefixUpperBound(ep)).toBe(expected);
      }),
      { numRuns: RUNS * 5 },
    );
  });

  it("produces one-byte strings (every code unit at most U+00FF) (property)", () => {
    fc.assert(
      fc.property(key, (k) => {
        const e = encodeKey(k);
        for (let i = 0; i < e.length; i++) expect(e.charCodeAt(i)).toBeLessThanOrEqual(0xff);
      }),
      { numRuns: RUNS },
    );
  });

  it("sorts numbers before strings, numbers by value, strings by code unit, prefixes first", () => {
    const sorted: Key[] = [
      [-Number.MAX_VALUE],
      [-1],
      [-Number.MIN_VALUE],
      [0],
      [0, "a"],
      [Number.MIN_VALUE],
      [1],
      [1, 0],
      [1, ""],
      [2 ** 53],
      [Number.MAX_VALUE],
      [""],
      ["", 0],
      ["\u0000"],
      ["\u0001"],
      ["\u0002"],
      ["a"],
      ["a", -1],
      ["a", "b"],
      ["a\u0000"],
      ["a\u0001"],
      ["ab"],
      ["\u00fe"],
      ["\u00ff"],
      ["\u0100"],
      ["\ud800"],
      ["\udc00"],
      ["\uffff"],
    ];
    for (let i = 1; i < sorted.length; i++) {
      expect(compareKeys(sorted[i - 1]!, sorted[i]!)).toBeLessThan(0);
      expect(encodeKey(sorted[i - 1]!) < encodeKey(sorted[i]!)).toBe(true);
    }
  });

  it("encodes 0 and -0 identically, as compareKeys treats them as equal", () => {
    expect(compareKeys([0], [-0])).toBe(0);
    expect(encodeKey([-0])).toBe(encodeKey([0]));
    expect(encodeKeyPart(-0)).toBe(encodeKeyPart(0));
  });

  it("encodes long strings (beyond one fromCharCode chunk) in order", () => {
    const long = "x".repeat(20_000);
    const a = encodeKey([long, 1]);
    const b = encodeKey([long + "\u0000", 0]);
    const c = encodeKey([long + "y"]);
    expect(a.length).toBe(1 + 20_000 + 1 + 9);
    expect(a < b && b < c).toBe(true);
    expect(encodeKey([long]) < a).toBe(true);
  });

  it("encodes long strings that need escaping (beyond one fromCharCode chunk) in order, the same through the cache or not", () => {
    const escaped = "\uffff\u0000".repeat(3_000); // 15,000 escaped code units
    const a = encodeKey(["p" + escaped, 1]);
    const b = encodeKey(["p" + escaped + "\u0000"]);
    const c = encodeKey(["p" + escaped + "\u0001"]);
    expect(a.length).toBe(1 + 1 + 3_000 * 5 + 1 + 9);
    expect(a < b && b < c).toBe(true);
    for (const s of ["\u0000", "a\u0001b", "\u00ff", "x".repeat(30), "short"]) {
      // The first call may fill the cache, the second reads it.
      expect(encodeKey([s])).toBe(encodeKeyPart(s));
      expect(encodeKey([s])).toBe(encodeKeyPart(s));
    }
  });

  it("decodes every encoding back to its key (property), and refuses strings no key encodes to", () => {
    fc.assert(
      fc.property(key, (k) => {
        expect(decodeKey(encodeKey(k))).toEqual(k.map((part) => (Object.is(part, -0) ? 0 : part)));
      }),
      { numRuns: 500 },
    );
    expect(decodeKey(encodeKey(["a\u0000\u0001\u00ff\uffff", -1.5, 0, Number.MAX_VALUE]))).toEqual(["a\u0000\u0001\u00ff\uffff", -1.5, 0, Number.MAX_VALUE]);
    expect(decodeKey("")).toEqual([]);
    expect(() => decodeKey("\u0009")).toThrow(RangeError);
    expect(() => decodeKey("\u0002abc")).toThrow(RangeError);
    expect(() => decodeKey("\u0001\u0080")).toThrow(RangeError);
  });

  it("concatenates element encodings", () => {
    const k: Key = ["a", 1, "\u0000\uffff", -2.5];
    expect(encodeKey(k)).toBe(k.map(encodeKeyPart).join(""));
  });

  it("holds in a range's encoded interval exactly the encodings of the keys the range accepts (property)", () => {
    // Keys drawn from a few elements, so that bounds, prefixes and keys often share elements and tie.
    const part = fc.constantFrom<string | number>(-1, 0, 1, 2.5, "", "a", "ab", "\u0000");
    const near = fc.array(part, { minLength: 1, maxLength: 3 });
    const range: fc.Arbitrary<KeyRange> = fc.record(
      { prefix: fc.array(part, { maxLength: 2 }), lower: near, lowerOpen: fc.boolean(), upper: near, upperOpen: fc.boolean() },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(range, fc.array(near, { minLength: 1, maxLength: 12 }), (r, keys) => {
        const iv = encodedInterval(r);
        for (const k of keys) {
          const enc = encodeKey(k);
          const aboveLower = iv.lower === undefined || enc > iv.lower || (enc === iv.lower && !iv.lowerOpen);
          const belowUpper = iv.upper === undefined || enc < iv.upper || (enc === iv.upper && !iv.upperOpen);
          expect(aboveLower && belowUpper).toBe(inRange(k, r));
        }
      }),
      { numRuns: RUNS * 5 },
    );
  });
});
