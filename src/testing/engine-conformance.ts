/**
 * The Engine conformance suite: what every adapter's {@link Engine} (memory,
 * IndexedDB, Durable Objects, a third party's) must do, as test cases that do
 * not depend on a test runner. It checks the promises listed at the top of
 * `src/engine.ts`, and nothing an adapter adds on top of them.
 *
 * Two kinds of case:
 * - readable examples, one per promise, each named after it and asserting
 *   concrete values (key order, scan ranges, own writes, rollback, readonly,
 *   refused writes, serializability, `durable`, reopen, values, close);
 * - a model-based case: random batches of transactions submitted together
 *   (puts, deletes, range deletes, gets, scans over random ranges, bodies that throw halfway,
 *   writes the engine must refuse) against a naive model, an array kept sorted
 *   with `compareKeys` and filtered with `inRange`. Every read must equal the
 *   model's, a failed transaction must leave no trace, and the committed state
 *   must equal the model after every batch (and after every reopen, when the
 *   engine can be reopened). The order in which `transact` promises settle is
 *   taken as the serial order: each transaction's reads are checked against
 *   the model as the transactions settled before it left it.
 *
 * Keys are compared with `compareKeys` (so `0` and `-0` are the same key) and
 * values structurally (a `Uint8Array` must come back as a `Uint8Array`): an
 * engine may store values by reference or clone them.
 */
import fc from "fast-check";
import type { Arbitrary } from "fast-check";
import { clearRange, compareKeys, inRange, type Engine, type EngineTransaction, type Entry, type Key, type KeyRange, type ScanOptions, type TransactionMode } from "../engine.js";
import type { ConformanceCase } from "./journal-conformance.js";
import { soakRequested } from "./soak.js";

/** What {@link engineConformanceCases} needs to know about the engine under test. */
export interface EngineConformanceOptions {
  /** Names the implementation in failure messages, e.g. `"memory"`. */
  readonly label: string;
  /** A new, empty engine every call (the cases close what they create). */
  readonly createEngine: () => Promise<Engine> | Engine;
  /**
   * An engine over the same storage as `engine` (a restart): the cases stop
   * using `engine` and use the returned one, which may be `engine` itself.
   * Closing `engine`, when a restart needs it, is up to this function.
   * Without it the reopen case is left out.
   */
  readonly reopen?: (engine: Engine) => Promise<Engine>;
  /** The `durable` flag the engine must report. */
  readonly durable: boolean;
  /** Random batch sequences of the model-based case. Default 100, or 2000 at soak size (`soakRequested()`). */
  readonly runs?: number;
  /** Seed of the random sequences (fast-check prints the seed of a failing run). */
  readonly seed?: number;
}


/**
 * The conformance cases for one engine: the model-based case first, then one
 * readable example per promise of the Engine contract.
 *
 * @example
 * import { it } from "vitest";
 * import { memoryEngine } from "isostore/memory";
 * import { engineConformanceCases } from "isostore/testing";
 *
 * const cases = engineConformanceCases({ label: "memory", durable: false, createEngine: () => memoryEngine(), reopen: async (engine) => engine });
 * for (const c of cases) it(c.name, c.run, c.timeoutMs);
 */
export function engineConformanceCases(options: EngineConformanceOptions): ConformanceCase[] {
  const runs = options.runs ?? (soakRequested() ? 2000 : 100);
  return [
    {
      name: `random concurrent transactions (puts, deletes, range deletes, gets, scans, throwing bodies, refused writes${options.reopen ? ", reopens" : ""}) agree with a sorted-array model`,
      run: () => runModelBased(options, runs),
      timeoutMs: 60_000 + runs * 400,
    },
    {
      name: "range deletes mixed with puts, deletes, gets and scans in one transaction (over stored entries) agree with a sorted-array model, before and after commit",
      run: () => runRangeDeletes(options, runs),
      timeoutMs: 60_000 + runs * 200,
    },
    ...exampleCases(options),
  ];
}

// --------------------------------------------------------------- assertions

/** A readable rendering of keys and values for failure messages (`-0`, lone surrogates and bytes shown as such). */
function show(value: unknown): string {
  if (typeof value === "number") return Object.is(value, -0) ? "-0" : String(value);
  if (typeof value === "string") return JSON.stringify(value);
  if (value === undefined) return "undefined";
  if (isBytes(value)) return `Uint8Array[${Array.from(value).join(",")}]`;
  if (Array.isArray(value)) return `[${(value as unknown[]).map(show).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    if (value instanceof Error) return `${value.constructor.name}(${JSON.stringify(value.message)})`;
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}: ${show(v)}`)
      .join(", ")}}`;
  }
  if (typeof value === "boolean" || typeof value === "bigint") return String(value);
  return typeof value;
}

function isBytes(value: unknown): value is Uint8Array {
  return Object.prototype.toString.call(value) === "[object Uint8Array]";
}

/** Structural equality of stored values: `Uint8Array`s byte by byte (and only with each other), arrays, plain objects, primitives. */
function sameValue(a: unknown, b: unknown): boolean {
  // Object.is: -0 is not 0 (a value keeps its sign), NaN is NaN.
  if (typeof a === "number" && typeof b === "number") return Object.is(a, b);
  if (a === b) return true;
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return false;
  if (isBytes(a) || isBytes(b)) {
    if (!isBytes(a) || !isBytes(b) || a.length !== b.length) return false;
    return a.every((byte, i) => byte === b[i]);
  }
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((item, i) => sameValue(item, b[i]));
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  const keys = Object.keys(left);
  if (keys.length !== Object.keys(right).length) return false;
  return keys.every((k) => Object.prototype.hasOwnProperty.call(right, k) && sameValue(left[k], right[k]));
}

/** Whether an engine's answer is an array at all (it is typed as one, but it comes from the engine under test). */
function isList(value: unknown): boolean {
  return Array.isArray(value);
}

function sameKey(a: Key, b: Key): boolean {
  return isList(a) && a.length === b.length && compareKeys(a, b) === 0;
}

function sameKeys(a: readonly Key[], b: readonly Key[]): boolean {
  return a.length === b.length && a.every((key, i) => sameKey(key, b[i]!));
}

function sameEntries(a: readonly Entry[], b: readonly Entry[]): boolean {
  return isList(a) && a.length === b.length && a.every((entry, i) => sameKey(entry.key, b[i]!.key) && sameValue(entry.value, b[i]!.value));
}

class ConformanceFailure extends Error {
  override readonly name = "ConformanceFailure";
}

/**
 * What a scan with `options` must answer: `expected`, except that a
 * `keysOnly` scan may leave any value undefined (the keys must be the same).
 */
function sameScan(actual: readonly Entry[], expected: readonly Entry[], options: ScanOptions): boolean {
  if (options.keysOnly !== true) return sameEntries(actual, expected);
  return actual.length === expected.length && actual.every((entry, i) => sameKey(entry.key, expected[i]!.key) && (entry.value === undefined || sameValue(entry.value, expected[i]!.value)));
}

function fail(label: string, what: string, expected: unknown, actual: unknown): never {
  throw new ConformanceFailure(`[${label}] ${what}\n  expected: ${show(expected)}\n  actual:   ${show(actual)}`);
}

function keysOfEntries(entries: readonly Entry[]): Key[] {
  return entries.map((entry) => entry.key);
}

/** How a promise ended, never throwing. */
async function settle<T>(promise: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await promise() };
  } catch (error) {
    return { ok: false, error };
  }
}

// --------------------------------------------------------------- examples

/**
 * Keys in the order the contract promises (element-wise; numbers before
 * strings; numbers by value; strings by UTF-16 code units; a prefix first).
 * U+1F600 (a surrogate pair) sorts before U+E000 by code units but after it
 * by code points or UTF-8 bytes.
 */
const ENGINE_ORDERED_KEYS: readonly Key[] = [
  [-Number.MAX_VALUE],
  [-1e9],
  [-2.5],
  [-1],
  [-1, "a"],
  [-0.5],
  [-Number.MIN_VALUE],
  [0],
  [0, -1],
  [0, 0],
  [0, 0, 0],
  [0, ""],
  [0, "a"],
  [Number.MIN_VALUE],
  [0.25],
  [0.5],
  [1],
  [1.5],
  [2],
  [10],
  [1e9],
  [Number.MAX_VALUE],
  [""],
  ["", 0],
  ["", ""],
  ["\u0000"],
  ["\u0000", "\u0000"],
  ["\u0000\u0000"],
  ["\u0001"],
  ["\u0002"],
  ["0"],
  ["A"],
  ["B"],
  ["a"],
  ["a", -1],
  ["a", 1],
  ["a", ""],
  ["a", "b"],
  ["a\u0000"],
  ["aa"],
  ["ab"],
  ["b"],
  ["\u007f"],
  ["\u00fe"],
  ["\u00ff"],
  ["\u00ff\u0000"],
  ["\u0100"],
  ["\u0101"],
  ["\u07ff"],
  ["\u0800"],
  ["\ud800"],
  ["\ud800", 0],
  ["\ud83d\ude00"],
  ["\udbff"],
  ["\udc00"],
  ["\ue000"],
  ["\uffff"],
  ["\uffff", ""],
  ["\uffff\uffff"],
];

/** The keys the scan examples run over. */
const RANGE_KEYS: readonly Key[] = [[1], [2], ["a"], ["a", 1], ["a", 2], ["a", 2, "x"], ["a", 3], ["a", "z"], ["ab"], ["b"]];

async function putAll(engine: Engine, keys: readonly Key[]): Promise<void> {
  await engine.transact("readwrite", async (tx) => {
    keys.forEach((key, i) => tx.put(key, i));
  });
}

async function scanAll(engine: Engine, range: KeyRange = {}, options: ScanOptions = {}): Promise<Entry[]> {
  return engine.transact("readonly", (tx) => tx.scan(range, options));
}

/** Run `body` over a new engine and close the engine afterwards (the latest one, after reopens). */
async function withEngine(options: EngineConformanceOptions, body: (engine: Engine, swap: (next: Engine) => void) => Promise<void>): Promise<void> {
  let engine = await options.createEngine();
  try {
    await body(engine, (next) => {
      engine = next;
    });
  } finally {
    await engine.close();
  }
}

function exampleCases(options: EngineConformanceOptions): ConformanceCase[] {
  const { label } = options;
  const check = (ok: boolean, what: string, expected: unknown, actual: unknown): void => {
    if (!ok) fail(label, what, expected, actual);
  };
  const expectKeys = async (engine: Engine, range: KeyRange, scan: ScanOptions, expected: readonly Key[]): Promise<void> => {
    const actual = keysOfEntries(await scanAll(engine, range, scan));
    check(sameKeys(actual, expected), `scan(${show(range)}, ${show(scan)}) keys`, expected, actual);
  };
  const expectUntouched = async (engine: Engine, before: readonly Entry[], what: string): Promise<void> => {
    const after = await scanAll(engine);
    check(sameEntries(after, before), `${what}: the committed entries must be unchanged`, before, after);
  };
  /** `call` must reject; returns the reason. */
  const expectRejection = async (call: () => Promise<unknown>, what: string): Promise<unknown> => {
    const outcome = await settle(call);
    if (outcome.ok) fail(label, `${what}: transact must reject`, "a rejection", outcome.value);
    return outcome.error;
  };

  const cases: ConformanceCase[] = [
    {
      name: "durable: the flag is what the adapter says about its storage",
      run: () =>
        withEngine(options, async (engine) => {
          check(engine.durable === options.durable, "engine.durable", options.durable, engine.durable);
        }),
    },
    {
      name: "transact: puts, overwrites and deletes commit, a missing key reads as undefined, and transact resolves with the body's result",
      run: () =>
        withEngine(options, async (engine) => {
          const initial = await scanAll(engine);
          check(initial.length === 0, "createEngine must return an empty engine", [], initial);
          const result = await engine.transact("readwrite", async (tx) => {
            tx.put(["a"], 1);
            tx.put(["a"], 2);
            tx.put(["b"], 3);
            tx.delete(["b"]);
            tx.delete(["never"]);
            tx.put(["c", 1], "c1");
            return "the body's result";
          });
          check(result === "the body's result", "transact resolves with the body's result", "the body's result", result);
          const read = await engine.transact("readonly", async (tx) => ({ a: await tx.get(["a"]), b: await tx.get(["b"]), c: await tx.get(["c"]), c1: await tx.get(["c", 1]) }));
          check(sameValue(read, { a: 2, b: undefined, c: undefined, c1: "c1" }), "gets after commit", { a: 2, b: undefined, c: undefined, c1: "c1" }, read);
          const all = await scanAll(engine);
          const expected: Entry[] = [
            { key: ["a"], value: 2 },
            { key: ["c", 1], value: "c1" },
          ];
          check(sameEntries(all, expected), "scan after commit", expected, all);
        }),
    },
    {
      name: "clearRange (deleteRange where the engine has it): deletes exactly the keys scan visits, later reads of the body see it, a throw undoes it, and a readonly transaction refuses it",
      run: () =>
        withEngine(options, async (engine) => {
          const keys: Key[] = [["p", 1], ["p", 2], ["p", 2.5], ["p", 3], ["p", "x"], ["p", 3, "deep"], ["q", 1], ["p"]];
          await engine.transact("readwrite", async (tx) => {
            for (const key of keys) tx.put(key, show(key));
          });
          const range: KeyRange = { prefix: ["p"], lower: ["p", 2], upper: ["p", 3, "deep"] };
          const seen = await engine.transact("readwrite", async (tx) => {
            await clearRange(tx, range);
            tx.put(["p", 2.5], "back");
            return { gone: await tx.get(["p", 2]), back: await tx.get(["p", 2.5]), keys: keysOfEntries(await tx.scan({ prefix: ["p"] })) };
          });
          const left: Key[] = [["p"], ["p", 1], ["p", 2.5], ["p", "x"]];
          check(seen.gone === undefined, "get of a key clearRange deleted, in the same body", undefined, seen.gone);
          check(seen.back === "back", "a put after clearRange in the same body", "back", seen.back);
          check(sameKeys(seen.keys, left), "scan after clearRange in the same body", left, seen.keys);
          await expectKeys(engine, {}, {}, [...left, ["q", 1]]);
          const before = await scanAll(engine);
          await expectRejection(
            () =>
              engine.transact("readwrite", async (tx) => {
                await clearRange(tx, { prefix: ["p"] });
                throw new Error("rolled back on purpose");
              }),
            "a body that throws after clearRange",
          );
          await expectUntouched(engine, before, "a body that threw after clearRange");
          const readonly = engine.transact("readonly", async (tx) => {
            await clearRange(tx, { prefix: ["q"] });
          });
          await expectRejection(() => readonly, "clearRange in a readonly transaction");
          await expectUntouched(engine, before, "a readonly transaction that tried clearRange");
        }),
    },
    {
      name: "clearRange honours open bounds: the bound keys themselves stay",
      run: () =>
        withEngine(options, async (engine) => {
          await engine.transact("readwrite", async (tx) => {
            for (const key of [["p", 1], ["p", 2], ["p", 2, "x"], ["p", 3], ["p", 4]] satisfies Key[]) tx.put(key, show(key));
          });
          await engine.transact("readwrite", (tx) => clearRange(tx, { lower: ["p", 1], lowerOpen: true, upper: ["p", 3], upperOpen: true }));
          await expectKeys(engine, {}, {}, [["p", 1], ["p", 3], ["p", 4]]);
          await engine.transact("readwrite", (tx) => clearRange(tx, { prefix: ["p"], lower: ["p", 3], upper: ["p", 4], upperOpen: true }));
          await expectKeys(engine, {}, {}, [["p", 1], ["p", 4]]);
        }),
    },
    {
      name: "keysOnly scans: the same keys, order and limit as a full scan (values undefined or the stored ones), over stored entries and the body's own writes",
      run: () =>
        withEngine(options, async (engine) => {
          await putAll(engine, RANGE_KEYS);
          const seen = await engine.transact("readwrite", async (tx) => {
            tx.put(["a", 2, "y"], "new");
            tx.delete(["a", 3]);
            const all = await tx.scan({ prefix: ["a"] });
            const keysOnly = await tx.scan({ prefix: ["a"] }, { keysOnly: true });
            const limited = await tx.scan({ prefix: ["a"] }, { keysOnly: true, reverse: true, limit: 2 });
            return { all, keysOnly, limited };
          });
          const keys: Key[] = [["a"], ["a", 1], ["a", 2], ["a", 2, "x"], ["a", 2, "y"], ["a", "z"]];
          check(sameKeys(keysOfEntries(seen.all), keys), "a full scan", keys, keysOfEntries(seen.all));
          const options: ScanOptions = { keysOnly: true };
          check(sameScan(seen.keysOnly, seen.all, options), "a keysOnly scan", seen.all, seen.keysOnly);
          const last = [...seen.all].reverse().slice(0, 2);
          check(sameScan(seen.limited, last, options), "a keysOnly scan in reverse with a limit", last, seen.limited);
          const committed = await scanAll(engine, {}, { keysOnly: true });
          const full = await scanAll(engine);
          check(sameScan(committed, full, options), "a keysOnly scan of the committed entries", full, committed);
        }),
    },
    {
      name: "own writes: a get after the body's own put or delete of a key it read before sees the write",
      run: () =>
        withEngine(options, async (engine) => {
          await engine.transact("readwrite", async (tx) => {
            tx.put(["k"], "old");
            tx.put(["d"], "old");
          });
          const seen = await engine.transact("readwrite", async (tx) => {
            const before = [await tx.get(["k"]), await tx.get(["d"]), await tx.get(["n"])];
            tx.put(["k"], "new");
            tx.delete(["d"]);
            tx.put(["n"], "born");
            return { before, after: [await tx.get(["k"]), await tx.get(["d"]), await tx.get(["n"])] };
          });
          check(sameValue(seen.before, ["old", "old", undefined]), "gets before the writes", ["old", "old", undefined], seen.before);
          check(sameValue(seen.after, ["new", undefined, "born"]), "gets after the writes, in the same body", ["new", undefined, "born"], seen.after);
          await expectKeys(engine, {}, {}, [["k"], ["n"]]);
        }),
    },
    {
      name: "key order: element-wise, numbers before strings, numbers by value (negatives, fractions), strings by UTF-16 code units (U+0000, U+00FF/U+0100, lone surrogates, U+FFFF), a prefix first",
      run: () =>
        withEngine(options, async (engine) => {
          const expected = ENGINE_ORDERED_KEYS;
          for (let i = 1; i < expected.length; i++) {
            if (compareKeys(expected[i - 1]!, expected[i]!) >= 0) throw new Error(`the suite's own key list is out of order at ${i}`);
          }
          // Written in a scrambled order, some twice.
          const scrambled = [...expected].reverse().concat(expected.filter((_, i) => i % 3 === 0));
          const inside = await engine.transact("readwrite", async (tx) => {
            scrambled.forEach((key, i) => tx.put(key, i));
            return { forward: await tx.scan({}), backward: await tx.scan({}, { reverse: true }) };
          });
          check(sameKeys(keysOfEntries(inside.forward), expected), "scan order of a transaction's own writes", expected, keysOfEntries(inside.forward));
          check(sameKeys(keysOfEntries(inside.backward), [...expected].reverse()), "reverse scan order of a transaction's own writes", [...expected].reverse(), keysOfEntries(inside.backward));
          await expectKeys(engine, {}, {}, expected);
          await expectKeys(engine, {}, { reverse: true }, [...expected].reverse());
          // Every key reads back its last value.
          const last = new Map<number, number>();
          scrambled.forEach((key, i) => last.set(expected.findIndex((k) => compareKeys(k, key) === 0), i));
          const values = await engine.transact("readonly", async (tx) => {
            const out: unknown[] = [];
            for (const key of expected) out.push(await tx.get(key));
            return out;
          });
          const want = expected.map((_, i) => last.get(i));
          check(sameValue(values, want), "get of every ordered key", want, values);
        }),
    },
    {
      name: "key order: numbers compare by value, so 0 and -0 are one key",
      run: () =>
        withEngine(options, async (engine) => {
          await engine.transact("readwrite", async (tx) => {
            tx.put(["z", 0], "zero");
            tx.put(["z", -0], "minus zero");
          });
          const all = await scanAll(engine);
          check(all.length === 1 && sameValue(all[0]!.value, "minus zero"), "entries after putting [z, 0] then [z, -0]", [{ key: ["z", 0], value: "minus zero" }], all);
          const got = await engine.transact("readonly", (tx) => tx.get(["z", 0]));
          check(got === "minus zero", "get([z, 0])", "minus zero", got);
          await engine.transact("readwrite", async (tx) => tx.delete(["z", 0]));
          await expectKeys(engine, {}, {}, []);
        }),
    },
    {
      name: "scan: prefix (the prefix key itself included, longer strings excluded; an empty prefix is every key)",
      run: () =>
        withEngine(options, async (engine) => {
          await putAll(engine, RANGE_KEYS);
          await expectKeys(engine, { prefix: ["a"] }, {}, [["a"], ["a", 1], ["a", 2], ["a", 2, "x"], ["a", 3], ["a", "z"]]);
          await expectKeys(engine, { prefix: ["a", 2] }, {}, [["a", 2], ["a", 2, "x"]]);
          await expectKeys(engine, { prefix: ["a", 2, "x"] }, {}, [["a", 2, "x"]]);
          await expectKeys(engine, { prefix: [1] }, {}, [[1]]);
          await expectKeys(engine, { prefix: ["zz"] }, {}, []);
          await expectKeys(engine, { prefix: [""] }, {}, []);
          await expectKeys(engine, { prefix: [] }, {}, RANGE_KEYS);
        }),
    },
    {
      name: "scan: lower and upper bounds, open and closed, alone and intersected with a prefix; an empty or inverted range is empty",
      run: () =>
        withEngine(options, async (engine) => {
          await putAll(engine, RANGE_KEYS);
          await expectKeys(engine, { lower: ["a", 2], upper: ["a", 3] }, {}, [["a", 2], ["a", 2, "x"], ["a", 3]]);
          await expectKeys(engine, { lower: ["a", 2], lowerOpen: true, upper: ["a", 3], upperOpen: true }, {}, [["a", 2, "x"]]);
          await expectKeys(engine, { lower: ["a", 2], lowerOpen: true, upper: ["a", 3] }, {}, [["a", 2, "x"], ["a", 3]]);
          await expectKeys(engine, { lower: ["a", 2], upper: ["a", 3], upperOpen: true }, {}, [["a", 2], ["a", 2, "x"]]);
          await expectKeys(engine, { upper: [2] }, {}, [[1], [2]]);
          await expectKeys(engine, { upper: [2], upperOpen: true }, {}, [[1]]);
          await expectKeys(engine, { upper: [""] }, {}, [[1], [2]]);
          await expectKeys(engine, { lower: ["ab"] }, {}, [["ab"], ["b"]]);
          await expectKeys(engine, { lower: ["a", "z"], lowerOpen: true }, {}, [["ab"], ["b"]]);
          await expectKeys(engine, { lower: [1.5], upper: ["a", 0] }, {}, [[2], ["a"]]);
          await expectKeys(engine, { prefix: ["a"], lower: ["a", 2], lowerOpen: true }, {}, [["a", 2, "x"], ["a", 3], ["a", "z"]]);
          await expectKeys(engine, { prefix: ["a"], upper: ["b"] }, {}, [["a"], ["a", 1], ["a", 2], ["a", 2, "x"], ["a", 3], ["a", "z"]]);
          await expectKeys(engine, { prefix: ["a"], lower: [0], upper: ["a", 1] }, {}, [["a"], ["a", 1]]);
          await expectKeys(engine, { prefix: ["a"], lower: ["a"], lowerOpen: true, upper: ["a", "z"], upperOpen: true }, {}, [["a", 1], ["a", 2], ["a", 2, "x"], ["a", 3]]);
          await expectKeys(engine, { prefix: ["a", 2], lower: ["a", 2], lowerOpen: true }, {}, [["a", 2, "x"]]);
          await expectKeys(engine, { prefix: ["a", 2], upper: ["a", 2], upperOpen: true }, {}, []);
          await expectKeys(engine, { prefix: ["a", 2], upper: ["a", 2] }, {}, [["a", 2]]);
          await expectKeys(engine, { lower: ["b"], upper: ["a"] }, {}, []);
          await expectKeys(engine, { lower: ["b"], upper: ["a"] }, { reverse: true }, []);
          await expectKeys(engine, { lower: ["b"], lowerOpen: true, upper: ["b"] }, {}, []);
          await expectKeys(engine, { lower: ["a", 2, "x"], upper: ["a", 2, "x"] }, {}, [["a", 2, "x"]]);
          await expectKeys(engine, { prefix: ["b"], lower: ["a"], upper: ["a", "z"] }, {}, []);
        }),
    },
    {
      name: "scan: limit and reverse (the first entries in scan order, counted after the range is applied)",
      run: () =>
        withEngine(options, async (engine) => {
          await putAll(engine, RANGE_KEYS);
          await expectKeys(engine, { prefix: ["a"] }, { limit: 2 }, [["a"], ["a", 1]]);
          await expectKeys(engine, { prefix: ["a"] }, { limit: 2, reverse: true }, [["a", "z"], ["a", 3]]);
          await expectKeys(engine, { upper: ["a", 2], upperOpen: true }, { reverse: true }, [["a", 1], ["a"], [2], [1]]);
          await expectKeys(engine, { lower: ["a", 1], lowerOpen: true }, { limit: 3 }, [["a", 2], ["a", 2, "x"], ["a", 3]]);
          await expectKeys(engine, { lower: ["a", 1], upper: ["ab"], upperOpen: true }, { limit: 3, reverse: true }, [["a", "z"], ["a", 3], ["a", 2, "x"]]);
          await expectKeys(engine, {}, { limit: 100 }, RANGE_KEYS);
          // Limits past 2^53 are integers too (a SQL engine must not bind them as REAL).
          await expectKeys(engine, {}, { limit: 2 ** 63 }, RANGE_KEYS);
          await expectKeys(engine, {}, { limit: 1e300, reverse: true }, [...RANGE_KEYS].reverse());
          await expectKeys(engine, {}, { limit: 1, reverse: true }, [["b"]]);
          await expectKeys(engine, {}, { reverse: false }, RANGE_KEYS);
          const first = await scanAll(engine, { prefix: ["a"] }, { limit: 1 });
          const want: Entry[] = [{ key: ["a"], value: 2 }];
          check(sameEntries(first, want), "scan entries carry their values", want, first);
        }),
    },
    {
      name: "own writes: a transaction's gets and scans (with ranges, limit and reverse) see its own puts and deletes before it commits",
      run: () =>
        withEngine(options, async (engine) => {
          await engine.transact("readwrite", async (tx) => {
            for (let i = 0; i < 10; i++) tx.put(["a", i], `stored-${i}`);
            tx.put(["a"], "prefix itself");
            tx.put(["b", 0], "other");
          });
          const seen = await engine.transact("readwrite", async (tx) => {
            tx.delete(["a", 0]);
            tx.delete(["a", 1]);
            tx.put(["a", 2], "overwritten");
            tx.put(["a", 4.5], "new");
            tx.put(["a", 11], "new at the end");
            tx.delete(["a", 11]);
            tx.put(["a", 12], "put after a delete");
            tx.delete(["b", 0]);
            tx.put(["b", 0], "deleted then put");
            return {
              gets: [await tx.get(["a", 0]), await tx.get(["a", 2]), await tx.get(["a", 4.5]), await tx.get(["a", 11]), await tx.get(["b", 0]), await tx.get(["a", 3])],
              first: await tx.scan({ prefix: ["a"] }, { limit: 3 }),
              last: await tx.scan({ prefix: ["a"], upper: ["a", 5], upperOpen: true }, { limit: 2, reverse: true }),
              bounded: await tx.scan({ prefix: ["a"], lower: ["a", 4], lowerOpen: true, upper: ["a", 6] }),
              tail: await tx.scan({ prefix: ["a"] }, { reverse: true, limit: 2 }),
              all: await tx.scan({}),
            };
          });
          const gets = [undefined, "overwritten", "new", undefined, "deleted then put", "stored-3"];
          check(sameValue(seen.gets, gets), "gets of own writes", gets, seen.gets);
          const first: Entry[] = [
            { key: ["a"], value: "prefix itself" },
            { key: ["a", 2], value: "overwritten" },
            { key: ["a", 3], value: "stored-3" },
          ];
          check(sameEntries(seen.first, first), "scan(prefix a, limit 3) over own writes", first, seen.first);
          check(sameKeys(keysOfEntries(seen.last), [["a", 4.5], ["a", 4]]), "reverse bounded scan over own writes", [["a", 4.5], ["a", 4]], keysOfEntries(seen.last));
          check(sameKeys(keysOfEntries(seen.bounded), [["a", 4.5], ["a", 5], ["a", 6]]), "bounded scan over own writes", [["a", 4.5], ["a", 5], ["a", 6]], keysOfEntries(seen.bounded));
          check(sameKeys(keysOfEntries(seen.tail), [["a", 12], ["a", 9]]), "reverse scan with limit over own writes", [["a", 12], ["a", 9]], keysOfEntries(seen.tail));
          const committed = await scanAll(engine);
          check(sameEntries(seen.all, committed), "what the transaction saw is what it committed", seen.all, committed);
        }),
    },
    {
      name: "atomicity: a body that throws rolls back every write and transact rejects with exactly what it threw",
      run: () =>
        withEngine(options, async (engine) => {
          await engine.transact("readwrite", async (tx) => {
            tx.put(["keep"], "k");
            tx.put(["overwrite"], "o");
            tx.put(["remove"], "r");
          });
          const before = await scanAll(engine);
          const boom = new Error("boom");
          const afterAwait = await expectRejection(
            () =>
              engine.transact("readwrite", async (tx) => {
                tx.put(["new"], "n");
                tx.put(["overwrite"], "changed");
                tx.delete(["remove"]);
                await tx.get(["keep"]);
                await tx.scan({});
                tx.put(["new"], "again");
                throw boom;
              }),
            "a body that throws after awaiting its own calls",
          );
          check(afterAwait === boom, "the rejection is the thrown error itself", boom, afterAwait);
          await expectUntouched(engine, before, "after a body threw");
          const sync = new Error("sync");
          const syncReason = await expectRejection(
            () =>
              engine.transact("readwrite", (tx: EngineTransaction): Promise<never> => {
                tx.put(["new"], 1);
                tx.delete(["keep"]);
                throw sync;
              }),
            "a body that throws synchronously",
          );
          check(syncReason === sync, "the rejection of a synchronous throw is the thrown error itself", sync, syncReason);
          const notAnError = { not: "an Error" };
          const odd = await expectRejection(
            () =>
              engine.transact("readwrite", async (tx) => {
                tx.put(["new"], 1);
                await tx.get(["new"]);
                return Promise.reject(notAnError); // eslint-disable-line @typescript-eslint/prefer-promise-reject-errors -- the point of the example
              }),
            "a body that rejects with a non-Error",
          );
          check(odd === notAnError, "the rejection is the very value the body rejected with", notAnError, odd);
          await expectUntouched(engine, before, "after failed bodies");
          // The engine goes on working.
          await engine.transact("readwrite", async (tx) => tx.put(["after"], 1));
          await expectKeys(engine, {}, {}, [["after"], ["keep"], ["overwrite"], ["remove"]]);
        }),
    },
    {
      name: "readonly: put and delete in a readonly transaction are refused, transact rejects (even when the body catches what the call threw) and nothing changes",
      run: () =>
        withEngine(options, async (engine) => {
          await engine.transact("readwrite", async (tx) => tx.put(["a"], 1));
          const before = await scanAll(engine);
          const attempts: [string, (tx: EngineTransaction) => void][] = [
            ["put", (tx) => tx.put(["b"], 2)],
            ["overwrite", (tx) => tx.put(["a"], 2)],
            ["delete", (tx) => tx.delete(["a"])],
          ];
          for (const [what, write] of attempts) {
            // The call's failure propagates out of the body.
            await expectRejection(
              () =>
                engine.transact("readonly", async (tx) => {
                  write(tx);
                  await tx.get(["a"]);
                }),
              `a ${what} in a readonly transaction`,
            );
            // The body swallows whatever the call threw and returns normally.
            await expectRejection(
              () =>
                engine.transact("readonly", async (tx) => {
                  try {
                    write(tx);
                  } catch {
                    // swallowed on purpose: the failure must still surface from transact
                  }
                  return "the body thinks it succeeded";
                }),
              `a ${what} in a readonly transaction whose error the body catches`,
            );
            await expectUntouched(engine, before, `after a refused readonly ${what}`);
          }
          const reads = await engine.transact("readonly", async (tx) => [await tx.get(["a"]), (await tx.scan({})).length]);
          check(sameValue(reads, [1, 1]), "reads in a readonly transaction", [1, 1], reads);
        }),
    },
    {
      name: "refused writes: a key that is not a non-empty tuple of strings and finite numbers is refused, and the whole transaction rolls back even when the body catches the error",
      run: () =>
        withEngine(options, async (engine) => {
          await engine.transact("readwrite", async (tx) => tx.put(["a"], 1));
          const before = await scanAll(engine);
          const invalid: unknown[] = [[], [Number.NaN], [Infinity], ["a", -Infinity], [null], [true], [["nested"]], ["a", undefined], "a"];
          for (const key of invalid) {
            for (const call of ["put", "delete"] as const) {
              let thrown: unknown = undefined;
              const reason = await expectRejection(
                () =>
                  engine.transact("readwrite", async (tx) => {
                    tx.put(["b"], 2);
                    tx.delete(["a"]);
                    try {
                      if (call === "put") tx.put(key as Key, 3);
                      else tx.delete(key as Key);
                    } catch (error) {
                      thrown = error;
                    }
                    // (No further call: what a doomed transaction's calls do is the engine's business.)
                    return "swallowed";
                  }),
                `${call}(${show(key)}) whose error the body catches`,
              );
              const code = (reason as { code?: unknown } | null)?.code;
              check(code === "invalid_key", `${call}(${show(key)}) rejects with an InvalidKeyError (code "invalid_key")`, "invalid_key", reason);
              if (thrown !== undefined) check(thrown === reason, `${call}(${show(key)}): transact rejects with what the call threw`, thrown, reason);
              await expectUntouched(engine, before, `after ${call}(${show(key)})`);
            }
          }
        }),
    },
    {
      name: "serializability: concurrent read-modify-write transactions all land, and no reader sees half of another transaction",
      run: () =>
        withEngine(options, async (engine) => {
          await engine.transact("readwrite", async (tx) => {
            tx.put(["counter"], 0);
            tx.put(["account", "x"], 100);
            tx.put(["account", "y"], 0);
          });
          const n = 20;
          const increments = Array.from({ length: n }, () =>
            engine.transact("readwrite", async (tx) => {
              const seen = (await tx.get<number>(["counter"])) ?? 0;
              await tx.scan({ prefix: ["account"] });
              tx.put(["counter"], seen + 1);
              return seen;
            }),
          );
          const transfers = Array.from({ length: 10 }, (_, i) =>
            engine.transact("readwrite", async (tx) => {
              const x = (await tx.get<number>(["account", "x"]))!;
              tx.put(["account", "x"], x - 7);
              const y = (await tx.get<number>(["account", "y"]))!;
              tx.put(["account", "y"], y + 7);
              if (i % 3 === 2) throw new Error("a transfer that fails after writing");
              return x + y;
            }),
          );
          const readers = Array.from({ length: 10 }, () =>
            engine.transact("readonly", async (tx) => {
              const entries = await tx.scan<number>({ prefix: ["account"] });
              return entries.reduce((sum, entry) => sum + entry.value, 0);
            }),
          );
          const [seen, transferred, sums] = await Promise.all([Promise.all(increments), Promise.allSettled(transfers), Promise.all(readers)]);
          const sorted = [...seen].sort((a, b) => a - b);
          const expected = Array.from({ length: n }, (_, i) => i);
          check(sameValue(sorted, expected), "each increment saw a distinct count (one at a time)", expected, sorted);
          const counter = await engine.transact("readonly", (tx) => tx.get(["counter"]));
          check(counter === n, "counter after concurrent increments (no lost update)", n, counter);
          check(
            sums.every((sum) => sum === 100),
            "readers running beside transfers see a consistent total",
            sums.map(() => 100),
            sums,
          );
          const committed = transferred.filter((result) => result.status === "fulfilled").length;
          const failed = transferred.filter((result, i) => result.status === "rejected" && i % 3 === 2).length;
          check(committed === 7 && failed === 3, "transfers: the failing ones rejected, the others committed", { committed: 7, failed: 3 }, { committed, failed });
          const accounts = (await scanAll(engine, { prefix: ["account"] })).map((entry) => entry.value);
          check(sameValue(accounts, [100 - 7 * 7, 7 * 7]), "accounts after the committed transfers only", [51, 49], accounts);
        }),
    },
    {
      name: "values: Uint8Array and nested plain values round-trip through put, get and scan",
      run: () =>
        withEngine(options, async (engine, swap) => {
          const values: unknown[] = [
            new Uint8Array([0, 1, 2, 127, 128, 255]),
            new Uint8Array(0),
            { bytes: new Uint8Array([9]), list: [new Uint8Array(0), "s"], nested: { deeper: { bytes: new Uint8Array([1, 2]) } } },
            { n: -1.5, big: 1e300, small: -5e-324, int: 42, t: true, f: false, none: null, s: "", u: "\u0000\u00ff\u{1f600}\ud800", list: [1, "two", null, true, { nested: 1.5 }, []], empty: {} },
            [[[]], {}, [{ a: [{ b: "c" }] }]],
            { $u8: "not bytes", $o: { $u8: "AA==" }, $z: 0, __proto_like: "x", "key with spaces": 1, "": "empty key" },
            // An own `__proto__` key (a computed key is a property, not the prototype), beside bytes and without.
            { ["__proto__"]: { a: 1 }, bytes: new Uint8Array([7]) },
            { ["__proto__"]: "plain" },
            // -0 keeps its sign, alone, nested, beside bytes.
            -0,
            { n: -0, list: [-0, 0] },
            { n: -0, bytes: new Uint8Array([1]) },
            "a string",
            "",
            0,
            -7.25,
            true,
            false,
            null,
            [],
            {},
          ];
          const copies = (): unknown[] => values.map((value) => clone(value));
          const inside = await engine.transact("readwrite", async (tx) => {
            copies().forEach((value, i) => tx.put(["v", i], value));
            const gets: unknown[] = [];
            for (let i = 0; i < values.length; i++) gets.push(await tx.get(["v", i]));
            return gets;
          });
          check(sameValue(inside, values), "values read back inside the writing transaction", values, inside);
          let current = engine;
          const readBack = async (what: string): Promise<void> => {
            const read = await current.transact("readonly", async (tx) => {
              const gets: unknown[] = [];
              for (let i = 0; i < values.length; i++) gets.push(await tx.get(["v", i]));
              return { gets, scanned: (await tx.scan({ prefix: ["v"] })).map((entry) => entry.value) };
            });
            check(sameValue(read.gets, values), `values read back with get ${what}`, values, read.gets);
            check(sameValue(read.scanned, values), `values read back with scan ${what}`, values, read.scanned);
          };
          await readBack("after commit");
          if (options.reopen) {
            current = await options.reopen(engine);
            swap(current);
            await readBack("after reopen");
          }
        }),
    },
    {
      name: "close: transact calls after close reject",
      run: async () => {
        const engine = await options.createEngine();
        await engine.transact("readwrite", async (tx) => tx.put(["a"], 1));
        await engine.close();
        await expectRejection(() => engine.transact("readonly", (tx) => tx.get(["a"])), "transact after close");
        await expectRejection(() => engine.transact("readwrite", async (tx) => tx.put(["b"], 1)), "a readwrite transact after close");
      },
    },
  ];
  if (options.reopen) {
    const reopen = options.reopen;
    cases.push({
      name: "reopen: an engine over the same storage keeps every committed write and nothing of a rolled-back one",
      run: () =>
        withEngine(options, async (engine, swap) => {
          await putAll(engine, RANGE_KEYS);
          await engine.transact("readwrite", async (tx) => {
            tx.delete(["b"]);
            tx.put(["a"], { changed: new Uint8Array([1, 2, 3]) });
          });
          await expectRejection(
            () =>
              engine.transact("readwrite", async (tx) => {
                tx.put(["rolled back"], 1);
                tx.delete(["a", 1]);
                throw new Error("undo");
              }),
            "a body that throws before the reopen",
          );
          const before = await scanAll(engine);
          const reopened = await reopen(engine);
          swap(reopened);
          check(reopened.durable === options.durable, "durable after reopen", options.durable, reopened.durable);
          const after = await scanAll(reopened);
          check(sameEntries(after, before), "entries after reopen", before, after);
          // And it goes on working, over the same data.
          await reopened.transact("readwrite", async (tx) => tx.put(["c"], "after reopen"));
          const again = await reopen(reopened);
          swap(again);
          const last = await scanAll(again, { lower: ["b"] });
          const want: Entry[] = [{ key: ["c"], value: "after reopen" }];
          check(sameEntries(last, want), "a write after a reopen survives the next reopen", want, last);
        }),
    });
  }
  return cases;
}

/** A deep copy of a test value, so that an engine that keeps references cannot pass by sharing objects with the expectation. */
function clone(value: unknown): unknown {
  if (isBytes(value)) return new Uint8Array(value);
  if (Array.isArray(value)) return (value as unknown[]).map(clone);
  if (value !== null && typeof value === "object") {
    const copy: Record<string, unknown> = {};
    // defineProperty: an own `__proto__` key stays a key (an assignment would set the prototype).
    for (const [k, v] of Object.entries(value)) Object.defineProperty(copy, k, { value: clone(v), enumerable: true, writable: true, configurable: true });
    return copy;
  }
  return value;
}

// ------------------------------------------------------------------ model

/** The naive reference: a plain array kept sorted with `compareKeys`, filtered with `inRange`. */
class SortedArrayModel {
  constructor(private entries: Entry[] = []) {}

  clone(): SortedArrayModel {
    return new SortedArrayModel([...this.entries]);
  }

  put(key: Key, value: unknown): void {
    const others = this.entries.filter((entry) => compareKeys(entry.key, key) !== 0);
    this.entries = [...others, { key, value }].sort((a, b) => compareKeys(a.key, b.key));
  }

  delete(key: Key): void {
    this.entries = this.entries.filter((entry) => compareKeys(entry.key, key) !== 0);
  }

  deleteRange(range: KeyRange): void {
    this.entries = this.entries.filter((entry) => !inRange(entry.key, range));
  }

  get(key: Key): unknown {
    return this.entries.find((entry) => compareKeys(entry.key, key) === 0)?.value;
  }

  scan(range: KeyRange, options: ScanOptions): Entry[] {
    const inside = this.entries.filter((entry) => inRange(entry.key, range));
    if (options.reverse === true) inside.reverse();
    return options.limit === undefined ? inside : inside.slice(0, options.limit);
  }

  all(): Entry[] {
    return [...this.entries];
  }
}

/** Small integers, negatives, fractions, extremes (and -0, the same key as 0). */
const numberPart: Arbitrary<number> = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: -3, max: 3 }) },
  { weight: 2, arbitrary: fc.constantFrom(-0, -1.5, -0.25, 0.5, 2.75, 1e-9, -1e9, Number.MIN_VALUE, -Number.MAX_VALUE) },
  { weight: 1, arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }) },
);
/** Short strings including "", U+0000, U+00FF / U+0100, U+FFFF, lone surrogate halves and a surrogate pair. */
const stringPart: Arbitrary<string> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom("", "\u0000", "\u0001", "\u00ff", "\u0100", "\uffff", "\ud800", "\udc00", "\udbff", "\ud83d\ude00", "\ue000", "a", "a\u0000", "ab", "b"),
  },
  { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom("a", "b", "\u0000", "\u00ff", "\u0100", "\uffff", "\ud800", "\udc00"), maxLength: 3 }) },
);
const keyPart: Arbitrary<string | number> = fc.oneof(numberPart, stringPart);
/**
 * Keys: often one of a small pool (so that a read, a write and a read of one
 * key in one transaction, or a bound equal to a stored key, come up in most
 * runs; -0 beside 0 too), else random.
 */
const keyArb: Arbitrary<Key> = fc.oneof(
  { weight: 1, arbitrary: fc.constantFrom<Key>(["k"], ["k", 0], ["k", -0], ["k", 1], ["k", 1, "x"], ["k", "a"], ["k", "b"], ["m"]) },
  { weight: 1, arbitrary: fc.array(keyPart, { minLength: 1, maxLength: 3 }) },
);

/** Ranges: an optional prefix, and bounds that are random keys or, often, the prefix itself or an extension of it. */
const rangeArb: Arbitrary<KeyRange> = fc.array(keyPart, { maxLength: 2 }).chain((prefix) => {
  const bound = prefix.length === 0 ? keyArb : fc.oneof(keyArb, fc.constant(prefix), keyPart.map((part): Key => [...prefix, part]));
  return fc.record({ prefix: fc.constant(prefix), lower: bound, lowerOpen: fc.boolean(), upper: bound, upperOpen: fc.boolean() }, { requiredKeys: [] });
});

const scanOptionsArb: Arbitrary<ScanOptions> = fc.record({ limit: fc.integer({ min: 1, max: 5 }), reverse: fc.boolean(), keysOnly: fc.boolean() }, { requiredKeys: [] });

const valueArb: Arbitrary<unknown> = fc.oneof(
  { weight: 5, arbitrary: fc.integer() },
  { weight: 1, arbitrary: fc.record({ n: fc.integer(), bytes: fc.uint8Array({ maxLength: 4 }), s: fc.constantFrom("", "x", "\u0000\ud800") }) },
);

type Op =
  | { readonly t: "put"; readonly key: Key; readonly value: unknown }
  | { readonly t: "delete"; readonly key: Key }
  | { readonly t: "get"; readonly key: Key }
  | { readonly t: "scan"; readonly range: KeyRange; readonly options: ScanOptions }
  /** `clearRange`: the engine's `deleteRange` where it has one (skipped in a readonly transaction). */
  | { readonly t: "clearRange"; readonly range: KeyRange }
  /** A write the engine must refuse whatever the mode: a key with a NaN or an Infinity in it. */
  | { readonly t: "invalid"; readonly call: "put" | "delete"; readonly key: Key };

const putOpArb: Arbitrary<Op> = fc.record({ t: fc.constant("put" as const), key: keyArb, value: valueArb });
const deleteOpArb: Arbitrary<Op> = fc.record({ t: fc.constant("delete" as const), key: keyArb });
const getOpArb: Arbitrary<Op> = fc.record({ t: fc.constant("get" as const), key: keyArb });
const scanOpArb: Arbitrary<Op> = fc.record({ t: fc.constant("scan" as const), range: rangeArb, options: scanOptionsArb });
const clearRangeOpArb: Arbitrary<Op> = fc.record({ t: fc.constant("clearRange" as const), range: rangeArb });

const opArb: Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: putOpArb },
  { weight: 3, arbitrary: deleteOpArb },
  { weight: 2, arbitrary: getOpArb },
  { weight: 3, arbitrary: scanOpArb },
  { weight: 1, arbitrary: clearRangeOpArb },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant("invalid" as const),
      call: fc.constantFrom<"put" | "delete">("put", "delete"),
      key: fc.constantFrom<Key>([Number.NaN], ["a", Infinity], [-Infinity, "b"]),
    }),
  },
);

interface Plan {
  readonly mode: TransactionMode;
  readonly ops: readonly Op[];
  /** Throw a planned error before `ops[throwAt]` (or after all of them). */
  readonly throwAt: number | undefined;
  /** Whether the body catches what a refused call threw (and returns normally) rather than letting it propagate. */
  readonly swallow: boolean;
}

const planArb: Arbitrary<Plan> = fc
  .record({
    mode: fc.constantFrom<TransactionMode>("readwrite", "readwrite", "readwrite", "readonly"),
    ops: fc.array(opArb, { maxLength: 8 }),
    throws: fc.oneof({ weight: 3, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
    at: fc.nat(),
    swallow: fc.boolean(),
  })
  .map(({ mode, ops, throws, at, swallow }) => ({ mode, ops, throwAt: throws ? at % (ops.length + 1) : undefined, swallow }));

/** One step of a run: transactions submitted together, or a restart over the same storage. */
type Step = { readonly t: "batch"; readonly plans: readonly Plan[] } | { readonly t: "reopen" };

function stepsArb(canReopen: boolean): Arbitrary<Step[]> {
  const batch: Arbitrary<Step> = fc.array(planArb, { minLength: 1, maxLength: 4 }).map((plans) => ({ t: "batch" as const, plans }));
  const step = canReopen ? fc.oneof({ weight: 6, arbitrary: batch }, { weight: 1, arbitrary: fc.constant<Step>({ t: "reopen" }) }) : batch;
  return fc.array(step, { minLength: 1, maxLength: 8 });
}

/** The error a plan throws on purpose. */
class PlannedFailure extends Error {
  override readonly name = "PlannedFailure";
}

/**
 * One call of a body, to replay on a draft of the model once the transaction
 * settled: a write changes the draft, a read throws a `ConformanceFailure`
 * when what the engine answered differs from the draft.
 */
type Replay = (draft: SortedArrayModel) => void;

/** What the run expects of one transaction, decided while its body runs. */
type Expectation =
  | { readonly kind: "resolve"; readonly result: string }
  /** Reject with exactly this error (the body threw it). */
  | { readonly kind: "same"; readonly error: unknown }
  /** Reject with anything: the body swallowed a refused call (or the call did not throw at once). */
  | { readonly kind: "any"; readonly why: string };

/** What one body did: its calls in order, and how it ended. */
interface BodyRecord {
  readonly calls: Replay[];
  expectation: Expectation | undefined;
}

function describeOp(op: Op): string {
  switch (op.t) {
    case "put":
      return `put(${show(op.key)}, ${show(op.value)})`;
    case "delete":
      return `delete(${show(op.key)})`;
    case "get":
      return `get(${show(op.key)})`;
    case "scan":
      return `scan(${show(op.range)}, ${show(op.options)})`;
    case "clearRange":
      return `clearRange(${show(op.range)})`;
    case "invalid":
      return `${op.call}(${show(op.key)}) (invalid key)`;
  }
}

/**
 * The body for `plan`: it runs each op on the engine and records it (with
 * what the engine answered) in `record`, to be replayed on the model when the
 * transaction settles. Checking then rather than while the body runs is what
 * makes the check exact: an engine may start a body before the transactions
 * serialized ahead of it finished (IndexedDB runs the body at once and holds
 * its requests), so the state a body reads from is only known once the ones
 * before it settled. The suite takes the order in which `transact` promises
 * settle as the serial order.
 */
function body(label: string, plan: Plan, index: number, record: BodyRecord) {
  return async (tx: EngineTransaction): Promise<string> => {
    const where = (i: number, op: Op): string => `transaction ${index} (${plan.mode}), op ${i}: ${describeOp(op)}`;
    for (let i = 0; i <= plan.ops.length; i++) {
      if (plan.throwAt === i) {
        const error = new PlannedFailure(`transaction ${index} fails on purpose before op ${i}`);
        record.expectation = { kind: "same", error };
        throw error;
      }
      const op = plan.ops[i];
      if (op === undefined) break;
      if (op.t === "invalid" || (plan.mode === "readonly" && (op.t === "put" || op.t === "delete"))) {
        let threw = false;
        let thrown: unknown;
        try {
          if (op.t === "put") tx.put(op.key, op.value);
          else if (op.t === "delete" || op.call === "delete") tx.delete(op.key);
          else tx.put(op.key, 1);
        } catch (error) {
          threw = true;
          thrown = error;
        }
        if (threw && !plan.swallow) {
          record.expectation = { kind: "same", error: thrown };
          throw thrown;
        }
        // No further call: what a doomed transaction's calls do is the engine's business.
        record.expectation = { kind: "any", why: `${describeOp(op)} in a ${plan.mode} transaction must be refused${threw ? " (the body caught what the call threw)" : ""}` };
        return `transaction ${index}`;
      }
      switch (op.t) {
        case "put":
          tx.put(op.key, op.value);
          record.calls.push((draft) => draft.put(op.key, op.value));
          break;
        case "delete":
          tx.delete(op.key);
          record.calls.push((draft) => draft.delete(op.key));
          break;
        case "get": {
          const actual = await tx.get(op.key);
          record.calls.push((draft) => {
            const expected = draft.get(op.key);
            if (!sameValue(actual, expected)) fail(label, where(i, op), expected, actual);
          });
          break;
        }
        case "clearRange":
          if (plan.mode === "readonly") break;
          await clearRange(tx, op.range);
          record.calls.push((draft) => draft.deleteRange(op.range));
          break;
        case "scan": {
          const actual = await tx.scan(op.range, op.options);
          record.calls.push((draft) => {
            const expected = draft.scan(op.range, op.options);
            if (!sameScan(actual, expected, op.options)) fail(label, where(i, op), expected, actual);
          });
          break;
        }
      }
    }
    const result = `transaction ${index}`;
    record.expectation = { kind: "resolve", result };
    return result;
  };
}

/**
 * A transaction settled: replay its calls on a draft of the committed model
 * (checking every read), and make the draft the committed model when it
 * committed writes. Throws a `ConformanceFailure` on a wrong read.
 */
function settleInModel(state: RunState, plan: Plan, record: BodyRecord, committed: boolean): void {
  const draft = state.model.clone();
  for (const call of record.calls) call(draft);
  if (committed && plan.mode === "readwrite" && record.expectation?.kind === "resolve") state.model = draft;
}

interface RunState {
  /** The committed state. */
  model: SortedArrayModel;
}

async function checkCommitted(label: string, engine: Engine, state: RunState, after: string): Promise<void> {
  const { forward, backward } = await engine.transact("readonly", async (tx) => ({ forward: await tx.scan({}), backward: await tx.scan({}, { reverse: true }) }));
  const expected = state.model.all();
  if (!sameEntries(forward, expected)) fail(label, `committed entries ${after}`, expected, forward);
  const reversed = [...expected].reverse();
  if (!sameEntries(backward, reversed)) fail(label, `committed entries in reverse ${after}`, reversed, backward);
}

async function runSteps(options: EngineConformanceOptions, steps: readonly Step[]): Promise<void> {
  const { label } = options;
  let engine = await options.createEngine();
  try {
    const state: RunState = { model: new SortedArrayModel() };
    await checkCommitted(label, engine, state, "of a new engine (createEngine must return an empty engine)");
    for (const [s, step] of steps.entries()) {
      if (step.t === "reopen") {
        engine = await options.reopen!(engine);
        await checkCommitted(label, engine, state, `after the reopen at step ${s}`);
        continue;
      }
      const records: BodyRecord[] = step.plans.map(() => ({ calls: [], expectation: undefined }));
      const settled = await Promise.allSettled(
        step.plans.map((plan, i) =>
          engine.transact(plan.mode, body(label, plan, i, records[i]!)).then(
            (result) => {
              settleInModel(state, plan, records[i]!, true);
              return result;
            },
            (reason: unknown) => {
              settleInModel(state, plan, records[i]!, false);
              throw reason;
            },
          ),
        ),
      );
      settled.forEach((result, i) => {
        const expected = records[i]!.expectation;
        const where = `step ${s}, transaction ${i}`;
        if (result.status === "rejected") {
          if (result.reason instanceof ConformanceFailure) throw result.reason;
          if (expected === undefined || expected.kind === "resolve") {
            fail(label, `${where}: transact must resolve`, expected?.kind === "resolve" ? expected.result : "a result", result.reason);
          }
          if (expected.kind === "same" && result.reason !== expected.error) fail(label, `${where}: transact must reject with exactly what the body threw`, expected.error, result.reason);
        } else {
          if (expected?.kind === "any") fail(label, `${where}: transact must reject: ${expected.why}`, "a rejection", result.value);
          if (expected?.kind === "same") fail(label, `${where}: transact must reject with what the body threw`, expected.error, result.value);
          if (expected?.kind === "resolve" && result.value !== expected.result) fail(label, `${where}: transact resolves with the body's result`, expected.result, result.value);
        }
      });
      await checkCommitted(label, engine, state, `after step ${s}`);
    }
  } finally {
    await engine.close();
  }
}

async function runModelBased(options: EngineConformanceOptions, runs: number): Promise<void> {
  const property = fc.asyncProperty(stepsArb(options.reopen !== undefined), (steps) => runSteps(options, steps));
  await fc.assert(property, options.seed === undefined ? { numRuns: runs } : { numRuns: runs, seed: options.seed });
}

/** The ops of one dense body: range deletes often, among the writes and reads they interact with. */
const denseOpArb: Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: putOpArb },
  { weight: 2, arbitrary: deleteOpArb },
  { weight: 3, arbitrary: getOpArb },
  { weight: 4, arbitrary: scanOpArb },
  { weight: 3, arbitrary: clearRangeOpArb },
);

/**
 * Committed entries, then one readwrite body of `ops` (every read checked on
 * the spot against the model: the body is alone), then its commit checked.
 * What it catches: an engine that defers a range delete (a tombstone, a
 * range statement at commit) and then reads a stored row inside it, loses a
 * later put inside it, or applies the range after that put.
 */
async function runRangeDeletes(options: EngineConformanceOptions, runs: number): Promise<void> {
  const { label } = options;
  const seedArb = fc.array(fc.tuple(keyArb, valueArb), { maxLength: 12 });
  const property = fc.asyncProperty(seedArb, fc.array(denseOpArb, { minLength: 1, maxLength: 16 }), async (stored, ops) => {
    await withEngine(options, async (engine) => {
      const state: RunState = { model: new SortedArrayModel() };
      await engine.transact("readwrite", async (tx) => {
        for (const [key, value] of stored) tx.put(key, value);
      });
      for (const [key, value] of stored) state.model.put(key, value);
      await checkCommitted(label, engine, state, "after the stored entries were written");
      const draft = state.model.clone();
      await engine.transact("readwrite", async (tx) => {
        for (const [i, op] of ops.entries()) {
          const where = `op ${i}: ${describeOp(op)} (ops: ${ops.map(describeOp).join("; ")})`;
          switch (op.t) {
            case "put":
              tx.put(op.key, op.value);
              draft.put(op.key, op.value);
              break;
            case "delete":
              tx.delete(op.key);
              draft.delete(op.key);
              break;
            case "clearRange":
              await clearRange(tx, op.range);
              draft.deleteRange(op.range);
              break;
            case "get": {
              const actual = await tx.get(op.key);
              const expected = draft.get(op.key);
              if (!sameValue(actual, expected)) fail(label, where, expected, actual);
              break;
            }
            case "scan": {
              const actual = await tx.scan(op.range, op.options);
              const expected = draft.scan(op.range, op.options);
              if (!sameScan(actual, expected, op.options)) fail(label, where, expected, actual);
              break;
            }
            case "invalid":
              break;
          }
        }
      });
      state.model = draft;
      await checkCommitted(label, engine, state, `after the commit of ${ops.map(describeOp).join("; ")}`);
    });
  });
  await fc.assert(property, options.seed === undefined ? { numRuns: runs } : { numRuns: runs, seed: options.seed });
}
