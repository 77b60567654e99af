/**
 * Model-based property test of the memory engine: random batches of
 * concurrently submitted transactions (puts, deletes, range deletes, gets, scans over random
 * ranges, some throwing halfway, some making a refused call) run against the
 * engine and against a naive model (an array sorted with `compareKeys`,
 * filtered with `inRange`). Every read must equal the model's, failed
 * transactions must leave no trace, and the ordered index must keep its
 * invariants. ~200 runs by default; `SOAK=1` runs 5,000.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  compareKeys,
  inRange,
  InvalidKeyError,
  type Entry,
  type EngineTransaction,
  type Key,
  type KeyRange,
  type ScanOptions,
  type TransactionMode,
} from "../../src/engine.js";
import { MemoryEngine } from "./memory-engine.js";

const SOAK = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env.SOAK === "1";
const RUNS = SOAK ? 5_000 : 200;

// ---------------------------------------------------------------------------
// The model

/** The naive reference: a plain array kept sorted with `compareKeys`. */
class Model {
  constructor(private entries: Entry[] = []) {}

  clone(): Model {
    return new Model([...this.entries]);
  }

  put(key: Key, value: unknown): void {
    const others = this.entries.filter((e) => compareKeys(e.key, key) !== 0);
    this.entries = [...others, { key, value }].sort((a, b) => compareKeys(a.key, b.key));
  }

  delete(key: Key): void {
    this.entries = this.entries.filter((e) => compareKeys(e.key, key) !== 0);
  }

  get(key: Key): unknown {
    return this.entries.find((e) => compareKeys(e.key, key) === 0)?.value;
  }

  scan(range: KeyRange, options: ScanOptions): Entry[] {
    const inside = this.entries.filter((e) => inRange(e.key, range));
    if (options.reverse === true) inside.reverse();
    return options.limit === undefined ? inside : inside.slice(0, options.limit);
  }

  all(): Entry[] {
    return [...this.entries];
  }
}

// ---------------------------------------------------------------------------
// Arbitraries

/** Small integers, negatives, fractions (and -0, the same key as 0). */
const numberPart = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: -3, max: 3 }) },
  { weight: 2, arbitrary: fc.constantFrom(-0, -1.5, -0.25, 0.5, 2.75, 1e-9, -1e9) },
  { weight: 1, arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }) },
);
/** Short strings including "", U+0000, U+FFFF and lone surrogate halves. */
const stringPart = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom("", "\u0000", "\u0001", "\uffff", "\ud800", "\udc00", "\udbff", "a", "a\u0000", "ab", "b", "\u00ff", "\u0100"),
  },
  {
    weight: 1,
    arbitrary: fc.string({ unit: fc.constantFrom("a", "b", "\u0000", "\uffff", "\ud800", "\udc00"), maxLength: 3 }),
  },
);
const keyPart = fc.oneof(numberPart, stringPart);
const key: fc.Arbitrary<Key> = fc.array(keyPart, { minLength: 1, maxLength: 3 });

/**
 * Ranges: an optional prefix, and bounds that are random keys or, often, the
 * prefix itself or an extension of it (where the bounds and the prefix tie).
 */
const range: fc.Arbitrary<KeyRange> = fc.array(keyPart, { maxLength: 2 }).chain((prefix) => {
  const bound =
    prefix.length === 0
      ? key
      : fc.oneof(key, fc.constant(prefix), fc.tuple(keyPart).map(([part]): Key => [...prefix, part]));
  return fc.record(
    { prefix: fc.constant(prefix), lower: bound, lowerOpen: fc.boolean(), upper: bound, upperOpen: fc.boolean() },
    { requiredKeys: [] },
  );
});

const scanOptions: fc.Arbitrary<ScanOptions> = fc.record(
  { limit: fc.integer({ min: 1, max: 5 }), reverse: fc.boolean() },
  { requiredKeys: [] },
);

/** A call that the engine must refuse (and that dooms the transaction). */
type BadCall = "invalid key put" | "invalid key get" | "invalid scan bound" | "bad limit";

type Op =
  | { readonly t: "put"; readonly key: Key; readonly value: number }
  | { readonly t: "delete"; readonly key: Key }
  | { readonly t: "deleteRange"; readonly range: KeyRange }
  | { readonly t: "get"; readonly key: Key }
  | { readonly t: "scan"; readonly range: KeyRange; readonly options: ScanOptions }
  | { readonly t: "bad"; readonly call: BadCall };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ t: fc.constant("put" as const), key, value: fc.integer() }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant("delete" as const), key }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("deleteRange" as const), range }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant("get" as const), key }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant("scan" as const), range, options: scanOptions }) },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant("bad" as const),
      call: fc.constantFrom<BadCall>("invalid key put", "invalid key get", "invalid scan bound", "bad limit"),
    }),
  },
);

interface Plan {
  readonly mode: TransactionMode;
  readonly ops: readonly Op[];
  /** Throw a sentinel error before running `ops[throwAt]` (or after all of them). */
  readonly throwAt: number | undefined;
}

const plan: fc.Arbitrary<Plan> = fc
  .record({
    mode: fc.constantFrom<TransactionMode>("readwrite", "readwrite", "readwrite", "readonly"),
    ops: fc.array(op, { maxLength: 10 }),
    throws: fc.oneof({ weight: 3, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
    at: fc.nat(),
  })
  .map(({ mode, ops, throws, at }) => ({ mode, ops, throwAt: throws ? at % (ops.length + 1) : undefined }));

/** Batches of transactions; the transactions of a batch are submitted together. */
const batches = fc.array(fc.array(plan, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 8 });

// ---------------------------------------------------------------------------
// Running a plan against the engine and the model

class Sentinel extends Error {}

/** Make a call the engine must refuse; return what it threw. */
function badCall(tx: EngineTransaction, call: BadCall): unknown {
  try {
    switch (call) {
      case "invalid key put":
        tx.put(["a", NaN], 1);
        break;
      case "invalid key get":
        void tx.get([]);
        break;
      case "invalid scan bound":
        void tx.scan({ lower: [Infinity] });
        break;
      case "bad limit":
        void tx.scan({}, { limit: 0 });
        break;
    }
  } catch (error) {
    return error;
  }
  throw new Error(`the engine accepted a bad call: ${call}`);
}

/** What a transaction is expected to do, decided while its body runs. */
interface Outcome {
  /** The sentinel the body threw, or the first refused call's error. */
  expectedError: unknown;
}

/**
 * The body for `p`: it runs each op on the engine and on a draft of the model,
 * compares every read, and publishes the draft as the new model only when the
 * transaction is to commit. Bodies run one at a time, so the model a body
 * starts from is the state left by the transactions submitted before it.
 */
function body(p: Plan, state: { model: Model }, outcome: Outcome) {
  return async (tx: EngineTransaction): Promise<void> => {
    const draft = state.model.clone();
    let refused: unknown;
    const refuse = (error: unknown, type: new (...args: never[]) => Error): void => {
      expect(error).toBeInstanceOf(type);
      if (refused === undefined) refused = error;
    };
    for (let i = 0; i <= p.ops.length; i++) {
      if (p.throwAt === i) {
        outcome.expectedError = new Sentinel(`planned failure at op ${i}`);
        throw outcome.expectedError;
      }
      const o = p.ops[i];
      if (o === undefined) break;
      switch (o.t) {
        case "put":
          if (p.mode === "readonly") {
            refuse(
              badCallOf(() => tx.put(o.key, o.value)),
              TypeError,
            );
          } else {
            tx.put(o.key, o.value);
            draft.put(o.key, o.value);
          }
          break;
        case "delete":
          if (p.mode === "readonly") {
            refuse(
              badCallOf(() => tx.delete(o.key)),
              TypeError,
            );
          } else {
            tx.delete(o.key);
            draft.delete(o.key);
          }
          break;
        case "deleteRange":
          if (p.mode === "readonly") {
            refuse(
              badCallOf(() => tx.deleteRange!(o.range)),
              TypeError,
            );
          } else {
            tx.deleteRange!(o.range);
            for (const entry of draft.scan(o.range, {})) draft.delete(entry.key);
          }
          break;
        case "get":
          expect(await tx.get(o.key)).toEqual(draft.get(o.key));
          break;
        case "scan":
          expect(await tx.scan(o.range, o.options)).toEqual(draft.scan(o.range, o.options));
          break;
        case "bad":
          refuse(
            badCall(tx, o.call),
            o.call === "bad limit"
              ? RangeError
              : o.call === "invalid key put" && p.mode === "readonly"
                ? TypeError // refused for the mode before the key is looked at
                : InvalidKeyError,
          );
          break;
      }
    }
    if (refused === undefined) state.model = draft;
    else outcome.expectedError = refused;
  };
}

/** Run `write`, which must throw; return what it threw. */
function badCallOf(write: () => void): unknown {
  try {
    write();
  } catch (error) {
    return error;
  }
  throw new Error("the engine accepted a write in a readonly transaction");
}

async function runScenario(chunkCapacity: number, plans: readonly (readonly Plan[])[]): Promise<void> {
  const engine = new MemoryEngine({ chunkCapacity });
  const state = { model: new Model() };
  for (const batch of plans) {
    const outcomes = batch.map((): Outcome => ({ expectedError: undefined }));
    const settled = await Promise.allSettled(batch.map((p, i) => engine.transact(p.mode, body(p, state, outcomes[i]!))));
    settled.forEach((result, i) => {
      const expected = outcomes[i]!.expectedError;
      if (result.status === "rejected") {
        // An assertion failure inside a body surfaces here as an unexpected reason.
        if (result.reason !== expected) throw result.reason;
      } else {
        expect(expected).toBeUndefined();
      }
    });
    // The committed state equals the model, and the index is sound.
    const all = await engine.transact("readonly", (tx) => tx.scan({}));
    expect(all).toEqual(state.model.all());
    const index = engine.inspectIndex();
    index.check();
    expect(index.size).toBe(all.length);
  }
  // Deleting everything leaves an empty index.
  await engine.transact("readwrite", async (tx) => {
    for (const e of await tx.scan({})) tx.delete(e.key);
  });
  const index = engine.inspectIndex();
  index.check();
  expect(index.size).toBe(0);
  expect(index.height).toBe(0);
  await engine.close();
}

describe("memoryEngine against a naive model", () => {
  it(
    "agrees with the model on random transactions, including ones that throw halfway or make refused calls (property)",
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(4, 5, 256), batches, async (chunkCapacity, plans) => {
          await runScenario(chunkCapacity, plans);
        }),
        { numRuns: RUNS },
      );
    },
    SOAK ? 3_600_000 : 120_000,
  );
});
