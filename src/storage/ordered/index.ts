/**
 * The OrderedIndex (`storage-primitives.go.txt`): a durable record collection
 * with an immutable acceptance order plus current ranked and due views,
 * written once over the Engine.
 *
 * - {@link createOrderedIndex} builds one over an engine and a store name.
 * - The validators (`validateOrderedId`, `validateStableKey`, `validateRank`,
 *   `validateDue`, `validateOrderedLimit`, `validateOrderedValue`, ...) and
 *   limits (`MAX_STABLE_KEY_BYTES`, `MAX_ORDERED_LIMIT`,
 *   `MAX_ORDERED_VALUE_BYTES`, `MAX_ORDERED_REVISION`) are the ones every
 *   method runs at its boundary.
 * - Every error is a `StorageError` subclass with a stable `code`.
 *
 * Decisions where the Go spec leaves room, or where TypeScript differs:
 * - Revisions and orders are numbers up to 2^53 - 1; a revision there cannot
 *   advance (`OrderedRevisionExhaustedError`). Rank values and due times are
 *   safe integers.
 * - Stable keys order by their UTF-8 bytes (code-point order, as Go compares
 *   strings), not by UTF-16 code units.
 * - An unranked rank has one form, `{ ranked: false, value: 0 }`, as a
 *   not-due state does; anything else is `InvalidRankError`.
 * - Listing arguments are checked in argument order (names, bound or
 *   `afterOrder`, limit, then the cursor).
 *
 * @example
 * ```ts
 * import { createOrderedIndex } from "isostore";
 * import { memoryEngine } from "isostore/memory";
 *
 * const index = createOrderedIndex(memoryEngine(), { store: "acme" });
 * await index.create({ namespace: "jobs", orderingScope: "inbox", stableKey: "job-1" }, "priority",
 *   new Uint8Array(), { ranked: true, value: 10 }, { state: "due_at", unixMillis: 1_700_000_000_000 });
 * const page = await index.listRanked("jobs", "priority", "", 50);
 * ```
 */
export * from "./types.js";
export * from "./errors.js";
export {
  MAX_ORDERED_LIMIT,
  MAX_ORDERED_ORDER,
  MAX_ORDERED_REVISION,
  MAX_ORDERED_VALUE_BYTES,
  MAX_STABLE_KEY_BYTES,
  NOT_DUE,
  UNRANKED,
  isValidStableKey,
  validateDue,
  validateDueBound,
  validateOrderedId,
  validateOrderedLimit,
  validateOrderedRecord,
  validateOrderedValue,
  validateRank,
  validateRankingScope,
  validateStableKey,
} from "./validate.js";
export { MAX_ORDERED_CURSOR_CHARS, ORDERED_CURSOR_VERSION } from "./cursor.js";
export { createOrderedIndex, type OrderedIndexOptions } from "./ordered-index.js";
