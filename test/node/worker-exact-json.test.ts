/**
 * The check of integer literals that `JSON.parse` rounds
 * (`src/worker/exact-json.ts`) on a platform whose `JSON.parse` gives a
 * reviver no source text (Node 20): the scan of the text for its number
 * literals, why its literals are paired with the parsed value by the text's
 * structure and not by a reviver's order of visits, and, where V8 can be
 * told to give the source text (`--harmony-json-parse-with-source`), that the
 * scan answers as the reviver's `context.source` does, for handpicked and
 * generated texts (duplicate keys, integer keys, escaped keys, digits in
 * strings).
 */
import { isDeepStrictEqual } from "node:util";
import { setFlagsFromString } from "node:v8";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { numberLiterals, roundedData, roundedDataByScan, roundedDataBySource, SOURCE_TEXT_ACCESS, TRACKED_DEPTH, type RoundedData } from "../../src/worker/exact-json.js";

const U64 = "18446744073709551615";

/** Each object of `found.body` that `found.holders` holds, as its path in the body and its literal, depth first. */
function holderPaths(found: RoundedData | null): [string, string][] {
  if (found === null) return [];
  const paths: [string, string][] = [];
  const walk = (value: unknown, path: string): void => {
    if (value === null || typeof value !== "object") return;
    const literal = found.holders.get(value);
    if (literal !== undefined) paths.push([path, literal]);
    for (const key of Object.keys(value)) walk((value as Record<string, unknown>)[key], `${path}/${key}`);
  };
  walk(found.body, "");
  return paths;
}

/** Whether the reviver of this platform's `JSON.parse` is handed each primitive's source text now. */
function sourceTextNow(): boolean {
  let seen = false;
  (JSON.parse as (text: string, reviver: (key: string, value: unknown, context?: { source?: unknown }) => unknown) => unknown)("1", (_key, value, context) => {
    seen ||= typeof context?.source === "string";
    return value;
  });
  return seen;
}

/** The numbers of `text` in the order a reviver is handed them. */
function revived(text: string): unknown[] {
  const seen: unknown[] = [];
  JSON.parse(text, (_key, value: unknown) => {
    if (typeof value === "number") seen.push(value);
    return value;
  });
  return seen;
}

/** A small seeded generator (mulberry32), so that every run makes the same texts. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NUMBERS = [
  "0", "-0", "1", "-1", "1.5", "1e3", "-2E-7", "0.000001", "9007199254740991", "-9007199254740991", "9007199254740992", "9007199254740993",
  U64, `-${U64}`, "1152921504606847000", "1152921504606846976", "100000000000000000000000", "1e+21", "1.8446744073709552e19",
  `${U64}.0`, `${U64}e0`, "123456789012345678", "-9223372036854775808", "1234567890123456",
];
const STRINGS = ['""', '"plain"', `"${U64}"`, `"\\"${U64}"`, '"a\\\\"', `"\\u0022 9007199254740993 \\""`, '"\\\\\\"x"', '"[1,{\\"data\\":18446744073709551615}]"'];
const KEYS = ["data", "\\u0064ata", "d\\u0061ta", "a", "b", "0", "1", "10", "4294967294", "4294967295", "__proto__", U64, "-1", "01"];
const SPACES = ["", "", " ", "\n", "\t ", "\r\n"];

/**
 * A JSON text made by `next`, written out by hand (not by `JSON.stringify`)
 * so that it has duplicate keys, escaped keys, integer keys, odd spacing and
 * integer literals as a Go producer writes them; with its number literals in
 * the order written.
 */
function generate(next: () => number, options: { distinctKeys?: boolean } = {}): { text: string; literals: string[] } {
  const pick = <T,>(from: readonly T[]): T => from[Math.floor(next() * from.length)] as T;
  const literals: string[] = [];
  const value = (depth: number): string => {
    // A container at the top, a primitive at depth 5.
    const kind = depth === 0 ? 3 + Math.floor(next() * 2) : depth >= 5 ? Math.floor(next() * 3) : Math.floor(next() * 5);
    if (kind === 0) {
      const literal = pick(NUMBERS);
      literals.push(literal);
      return literal;
    }
    if (kind === 1) return pick(STRINGS);
    if (kind === 2) return pick(["true", "false", "null"]);
    const count = Math.floor(next() * 4);
    const members: string[] = [];
    for (let i = 0; i < count; i++) {
      // Half of the keys are `data`, so that rounded literals are often under one.
      const key = options.distinctKeys === true ? `k${i}` : next() < 0.5 ? "data" : pick(KEYS);
      const member = kind === 3 ? value(depth + 1) : `"${key}"${pick(SPACES)}:${pick(SPACES)}${value(depth + 1)}`;
      members.push(`${pick(SPACES)}${member}${pick(SPACES)}`);
    }
    return kind === 3 ? `[${members.join(",")}]` : `{${members.join(",")}}`;
  };
  return { text: `${pick(SPACES)}${value(0)}${pick(SPACES)}`, literals };
}

describe("numberLiterals: the number tokens of a JSON text, in document order", () => {
  it("skips strings, digits and escaped quotes in them, and keys", () => {
    expect(numberLiterals(`{"a":"1 2 3","b":"\\"${U64}\\"","${U64}":4}`)).toEqual(["4"]);
    expect(numberLiterals(`["\\\\",5,"\\\\\\"",6,"\\u0022",7]`)).toEqual(["5", "6", "7"]);
    expect(numberLiterals(`{"data":"[1,{\\"data\\":${U64}}]","n":8}`)).toEqual(["8"]);
    expect(numberLiterals('"12345678901234567890"')).toEqual([]);
  });

  it("finds numbers nested in arrays and objects, signed, fractional, with exponents, -0", () => {
    const text = ` { "a" : [ 1 , [ -2 , { "b" : 3.25e-7 } ] , -0 ] ,\n\t"c":{"d":[${U64},-${U64}]},"e":1E+21,"f":0.5,"g":[true,false,null,-0.0e0] } `;
    expect(numberLiterals(text)).toEqual(["1", "-2", "3.25e-7", "-0", U64, `-${U64}`, "1E+21", "0.5", "-0.0e0"]);
    expect(numberLiterals(U64)).toEqual([U64]);
    expect(numberLiterals("-0")).toEqual(["-0"]);
    expect(numberLiterals("[]")).toEqual([]);
  });

  it("finds, in generated texts, exactly the literals written, in order", () => {
    const next = random(7);
    for (let i = 0; i < 2000; i++) {
      const { text, literals } = generate(next);
      expect(numberLiterals(text), text).toEqual(literals);
    }
  });
});

describe("a reviver's order of visits is not the text's order", () => {
  it("is the text's order with no integer keys and no duplicate keys", () => {
    const next = random(11);
    for (let i = 0; i < 1000; i++) {
      const { text } = generate(next, { distinctKeys: true });
      expect(revived(text), text).toEqual(numberLiterals(text).map(Number));
    }
  });

  it("is not, with an integer key after another key, or with a duplicate key: pairing by order would be wrong", () => {
    // An object's integer keys are revived first, in numeric order.
    expect(numberLiterals('{"b":1,"0":2}').map(Number)).toEqual([1, 2]);
    expect(revived('{"b":1,"0":2}')).toEqual([2, 1]);
    // An earlier value of a duplicate key is never revived: the text has a number more.
    expect(numberLiterals('{"a":1,"a":2}').map(Number)).toEqual([1, 2]);
    expect(revived('{"a":1,"a":2}')).toEqual([2]);
    // So the scan pairs by structure: the literal of the integer key is the reviver's first.
    const found = roundedDataByScan(`{"data":{"b":${U64},"0":9007199254740993}}`);
    expect(holderPaths(found)).toEqual([["", "9007199254740993"]]);
  });
});

describe("roundedDataByScan: the rounded literals of a text, by a scan", () => {
  const holderOf = (text: string): string | undefined => {
    const found = roundedDataByScan(text);
    return found === null ? undefined : found.holders.get(found.body as object);
  };

  it("finds a rounded integer literal in data, at any depth, signed", () => {
    expect(holderOf(`{"data":${U64}}`)).toBe(U64);
    expect(holderOf(`{"data":-${U64}}`)).toBe(`-${U64}`);
    expect(holderOf(`{"data":{"id":[1,{"x":${U64}}]}}`)).toBe(U64);
    expect(holderOf('{"data":{"bytes":9007199254740993}}')).toBe("9007199254740993");
    expect(holderOf('{"data":[1152921504606846976]}')).toBe("1152921504606846976");
    expect(holderOf('{"data":100000000000000000000000}')).toBe("100000000000000000000000");
    // The first in the order of revival: depth first, in text order here.
    expect(holderOf(`{"data":[[9007199254740993],${U64}]}`)).toBe("9007199254740993");
  });

  it("takes what JSON.stringify writes, fractions, exponents, -0 and safe integers", () => {
    for (const data of ["1152921504606847000", "9007199254740991", "-9007199254740991", "1e+21", "1.8446744073709552e19", `${U64}.0`, `${U64}e0`, "-0", "9007199254740993.5", JSON.stringify({ big: 2 ** 60, huge: 1e300 })]) {
      expect(roundedDataByScan(`{"data":${data}}`), data).toBeNull();
    }
  });

  it("does not take digits in strings or keys for numbers", () => {
    expect(roundedDataByScan(`{"data":"${U64}"}`)).toBeNull();
    expect(roundedDataByScan(`{"data":{"${U64}":1}}`)).toBeNull();
    expect(roundedDataByScan(`{"data":"\\"${U64}"}`)).toBeNull();
    expect(roundedDataByScan(`{"data":["\\\\",1,"\\"]${U64}"]}`)).toBeNull();
    // After a string ending in an escaped backslash, the next number is one.
    expect(holderOf(`{"data":["\\\\",${U64}]}`)).toBe(U64);
  });

  it("keeps only the last value of a duplicate key, as JSON.parse does", () => {
    expect(roundedDataByScan(`{"data":${U64},"data":1}`)).toBeNull();
    expect(roundedDataByScan(`{"data":{"a":[${U64}]},"data":{"a":[1]}}`)).toBeNull();
    expect(holderOf(`{"data":1,"data":${U64}}`)).toBe(U64);
    expect(holderOf(`{"data":{"a":${U64},"a":2,"b":9007199254740993}}`)).toBe("9007199254740993");
  });

  it("reads an escaped key as its value", () => {
    expect(holderOf(`{"\\u0064ata":${U64}}`)).toBe(U64);
    expect(holderOf(`{"d\\u0061ta":{"a":${U64}},"data":1}`)).toBeUndefined();
    expect(roundedDataByScan(`{"d\\u0061ta":{"a":${U64}},"data":1}`)).toBeNull();
  });

  it("finds the holders of every event of a batch, each with its own literal", () => {
    const text = `{"events":[{"record":{"data":1}},{"record":{"data":{"n":${U64}}}},{"record":{"data":"${U64}"}},{"record":{"data":[9007199254740993]}}]}`;
    const found = roundedDataByScan(text);
    const events = (found?.body as { events: { record: object }[] }).events;
    expect(events.map((event) => found?.holders.get(event.record))).toEqual([undefined, U64, undefined, "9007199254740993"]);
  });

  it("finds a rounded literal outside any data, with no holder, and one as the whole text", () => {
    expect(holderPaths(roundedDataByScan(`{"other":${U64}}`))).toEqual([]);
    expect(roundedDataByScan(`{"other":${U64}}`)).not.toBeNull();
    expect(roundedDataByScan(U64)?.body).toBe(Number(U64));
  });

  it("follows containers down to TRACKED_DEPTH and ignores the literals below: past it a text nested far deeper than the call stack is only counted", () => {
    const nested = (depth: number, inner: string) => `${'{"data":['.repeat(depth)}${inner}${"]}".repeat(depth)}`;
    // Two containers a level: the literal in the innermost tracked one is found, one level further it is not.
    const deepest = roundedDataByScan(nested(TRACKED_DEPTH / 2, U64));
    expect(holderPaths(deepest).length).toBe(TRACKED_DEPTH / 2);
    expect(roundedDataByScan(nested(TRACKED_DEPTH / 2 + 1, U64))).toBeNull();
    // A rounded literal beside a value nested 200,000 deep: found, and the deep one walked through.
    const depth = 200_000;
    const text = `{"events":[{"record":{"data":${nested(depth, "1")}}},{"record":{"data":[${U64}]}}]}`;
    const found = roundedDataByScan(text);
    const events = (found?.body as { events: { record: object }[] }).events;
    expect(events.map((event) => found?.holders.get(event.record))).toEqual([undefined, U64]);
  });

  it("parses a text only when it holds a rounded literal", () => {
    const parse = vi.spyOn(JSON, "parse");
    try {
      expect(roundedDataByScan(`{"data":"${U64}","n":1152921504606847000}`)).toBeNull();
      expect(roundedDataByScan(`{"data":${"[".repeat(10_000)}9007199254740993${"]".repeat(10_000)}}`)).toBeNull();
      expect(parse).not.toHaveBeenCalled();
      expect(roundedDataByScan(`{"data":${U64}}`)).not.toBeNull();
      expect(parse).toHaveBeenCalledTimes(1);
    } finally {
      parse.mockRestore();
    }
  });

  it("throws SyntaxError for what is not JSON but holds a rounded literal (the caller parsed the text before)", () => {
    expect(() => roundedDataByScan(`{"data":${U64}} x`)).toThrow(SyntaxError);
  });
});

describe("roundedData on this platform", () => {
  it("finds the rounded literal, by the scan whether or not JSON.parse gives the source text", () => {
    expect(typeof SOURCE_TEXT_ACCESS).toBe("boolean");
    const found = roundedData(`{"data":{"id":${U64}}}`);
    expect(found?.holders.get(found.body as object)).toBe(U64);
    expect(roundedData('{"data":1152921504606847000}')).toBeNull();
  });

  it("does not parse a text with no run of 16 digits", () => {
    expect(roundedData("not JSON, 123456789012345")).toBeNull();
    expect(() => roundedData(`not JSON, ${U64}`)).toThrow(SyntaxError);
  });
});

describe("the scan answers as the reviver's source text does", () => {
  // V8 gives a reviver the source text behind a flag where it is not on by default (Node 20).
  const hadSource = sourceTextNow();
  beforeAll(() => {
    if (!hadSource) setFlagsFromString("--harmony-json-parse-with-source");
  });
  afterAll(() => {
    if (!hadSource) setFlagsFromString("--no-harmony-json-parse-with-source");
  });

  /** Both answers for `text`, as null-ness, parsed body and holders by path. */
  const both = (text: string) => {
    const [source, scan] = [roundedDataBySource(text), roundedDataByScan(text)];
    return {
      source: { found: source !== null, holders: holderPaths(source) },
      scan: { found: scan !== null, holders: holderPaths(scan) },
    };
  };

  it("the reviver is given the source text here", () => {
    expect(sourceTextNow()).toBe(true);
  });

  it("for handpicked texts", () => {
    const texts = [
      `{"data":${U64}}`,
      `{"data":{"b":${U64},"0":9007199254740993}}`,
      `{"data":{"a":${U64},"a":2,"b":9007199254740993}}`,
      `{"a":{"x":[${U64}]},"b":{"data":[9007199254740993]},"a":{"data":1}}`,
      `{"data":{"a":[${U64}],"b":[9007199254740993],"a":[1],"a":[1152921504606846976]}}`,
      `{"\\u0064ata":${U64},"__proto__":{"data":9007199254740993}}`,
      `{"events":[{"record":{"data":1}},{"record":{"data":{"n":${U64}}}}]}`,
      `{"data":{"4294967295":${U64},"4294967294":9007199254740993,"10":1152921504606846976}}`,
      U64,
      `[${U64}]`,
      `{"data":"${U64}"}`,
    ];
    for (const text of texts) {
      const { source, scan } = both(text);
      expect(scan, text).toEqual(source);
    }
  });

  it("for generated texts", () => {
    const next = random(2024);
    let withHolders = 0;
    let outOfOrder = 0;
    for (let i = 0; i < 10_000; i++) {
      const { text, literals } = generate(next);
      const { source, scan } = both(text);
      expect(scan, text).toEqual(source);
      if (source.holders.length > 0) {
        withHolders++;
        if (!isDeepStrictEqual(revived(text), literals.map(Number))) outOfOrder++;
      }
    }
    // The texts put rounded literals under data often enough, and in texts a reviver visits out of order
    // (integer keys, duplicate keys) often enough, for the comparison to mean something.
    expect(withHolders).toBeGreaterThan(400);
    expect(outOfOrder).toBeGreaterThan(100);
  });
});
