/**
 * The OrderedIndex's limits and validators: the checks every method runs at
 * its boundary, exported so callers (and other providers) can check inputs
 * the same way before they send them anywhere.
 *
 * Each validator either throws the spec's typed error or returns a canonical
 * copy of its input, so code past the boundary never shares an object with
 * the caller.
 */
import { InvalidArgumentError } from "../errors.js";
import { utf8Length, validateName } from "../names.js";
import { isBytes } from "../web.js";
import { hasLoneSurrogate } from "../../unicode.js";
import {
  InvalidDueError,
  InvalidOrderedLimitError,
  InvalidOrderedRecordError,
  InvalidRankError,
  InvalidStableKeyError,
  OrderedValueTooLargeError,
  type DueRule,
  type RankRule,
} from "./errors.js";
import type { Due, OrderedId, OrderedRecord, Rank } from "./types.js";

/** The longest stable key, in bytes of UTF-8. */
export const MAX_STABLE_KEY_BYTES = 1024;

/** The largest `limit` a listing takes. */
export const MAX_ORDERED_LIMIT = 1000;

/**
 * The largest value, in bytes. One record is one engine row, and every
 * adapter stores a row of this size comfortably (Durable Objects allow 2 MB
 * per row, even after base64).
 */
export const MAX_ORDERED_VALUE_BYTES = 1_048_576;

/**
 * The largest revision. The spec's revisions are `uint64`; here they are
 * numbers, exact up to 2^53 - 1, so that is where a revision stops advancing
 * (`OrderedRevisionExhaustedError`).
 */
export const MAX_ORDERED_REVISION = Number.MAX_SAFE_INTEGER;

/** The largest order an order scope allocates (then `create` in that scope fails as a backend error). */
export const MAX_ORDERED_ORDER = Number.MAX_SAFE_INTEGER;

/** The canonical unranked rank (`Rank{}`): what a tombstone carries. */
export const UNRANKED: Rank = Object.freeze({ ranked: false, value: 0 });

/** The canonical not-due state (`Due{State: NotDue, UnixMillis: 0}`): what a tombstone carries. */
export const NOT_DUE: Due = Object.freeze({ state: "not_due", unixMillis: 0 });

/** Whether `value` is a valid stable key (see {@link validateStableKey}). */
export function isValidStableKey(value: unknown): value is string {
  if (typeof value !== "string") return false;
  const bytes = utf8Length(value);
  return bytes > 0 && bytes <= MAX_STABLE_KEY_BYTES && !hasLoneSurrogate(value);
}

/**
 * Check a stable key: 1..{@link MAX_STABLE_KEY_BYTES} bytes of valid UTF-8
 * (a JavaScript string without lone surrogates). Anything else is allowed:
 * slashes, uppercase, punctuation, Unicode. Stable keys are not names.
 *
 * @throws {InvalidStableKeyError} with `rule` `type`, `empty`, `too_long` or
 *   `utf8`, and the key's byte length (never the key).
 *
 * @example
 * ```ts
 * validateStableKey("User/Ada Lovelace ✓"); // accepted as is
 * validateStableKey("");                   // throws InvalidStableKeyError (rule "empty")
 * ```
 */
export function validateStableKey(stableKey: string): string {
  if (typeof stableKey !== "string") throw new InvalidStableKeyError("type", 0);
  const bytes = utf8Length(stableKey);
  const reported = Math.min(bytes, 65_535);
  if (bytes === 0) throw new InvalidStableKeyError("empty", 0);
  if (bytes > MAX_STABLE_KEY_BYTES) throw new InvalidStableKeyError("too_long", reported);
  if (hasLoneSurrogate(stableKey)) throw new InvalidStableKeyError("utf8", reported);
  return stableKey;
}

/**
 * Check an identity: `namespace` and `orderingScope` are storage names, then
 * `stableKey` is a stable key. Every method that takes an id runs this first.
 *
 * @throws {InvalidNameError} for the namespace or ordering scope.
 * @throws {InvalidStableKeyError} for the stable key.
 * @throws {InvalidArgumentError} when `id` is not an object.
 */
export function validateOrderedId(id: OrderedId): OrderedId {
  if (id === null || typeof id !== "object") {
    throw new InvalidArgumentError("id", "must be an object { namespace, orderingScope, stableKey }");
  }
  const namespace = validateName(id.namespace);
  const orderingScope = validateName(id.orderingScope);
  const stableKey = validateStableKey(id.stableKey);
  return { namespace, orderingScope, stableKey };
}

function rankRuleBroken(rank: Rank): RankRule | undefined {
  if (rank === null || typeof rank !== "object") return "type";
  if (typeof rank.ranked !== "boolean") return "ranked";
  if (!rank.ranked) return rank.value === 0 ? undefined : "unranked_value";
  return Number.isSafeInteger(rank.value) ? undefined : "value";
}

/**
 * Check a rank and return its canonical copy: `{ ranked: true, value }` with
 * a safe-integer value, or exactly `{ ranked: false, value: 0 }`.
 *
 * @throws {InvalidRankError} with `rule` `type`, `ranked`, `unranked_value` or `value`.
 */
export function validateRank(rank: Rank): Rank {
  const rule = rankRuleBroken(rank);
  if (rule !== undefined) throw new InvalidRankError(rank, rule);
  return rank.ranked ? { ranked: true, value: rank.value === 0 ? 0 : rank.value } : { ranked: false, value: 0 };
}

function dueRuleBroken(due: Due): DueRule | undefined {
  if (due === null || typeof due !== "object") return "type";
  if (due.state === "not_due") return due.unixMillis === 0 ? undefined : "not_due_millis";
  if (due.state !== "due_at") return "state";
  return Number.isSafeInteger(due.unixMillis) ? undefined : "millis";
}

/**
 * Check a due state and return its canonical copy: `{ state: "due_at",
 * unixMillis }` with a safe-integer Unix time in milliseconds, or exactly
 * `{ state: "not_due", unixMillis: 0 }`.
 *
 * @throws {InvalidDueError} with `rule` `type`, `state` (unknown
 *   discriminator), `not_due_millis` (not canonical) or `millis`.
 */
export function validateDue(due: Due): Due {
  const rule = dueRuleBroken(due);
  if (rule !== undefined) throw new InvalidDueError(due, rule);
  return due.state === "due_at" ? { state: "due_at", unixMillis: due.unixMillis === 0 ? 0 : due.unixMillis } : { state: "not_due", unixMillis: 0 };
}

/**
 * Check a listing limit: an integer from 1 through `max`.
 *
 * @throws {InvalidOrderedLimitError} with the refused limit and `max`.
 */
export function validateOrderedLimit(limit: number, max: number = MAX_ORDERED_LIMIT): number {
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > max) throw new InvalidOrderedLimitError(limit, max);
  return limit;
}

/**
 * Check a record value: a `Uint8Array` of at most
 * {@link MAX_ORDERED_VALUE_BYTES} bytes (zero bytes is fine). Returns the
 * same array; the index copies it before keeping it.
 *
 * @throws {OrderedValueTooLargeError} with the size and the maximum.
 * @throws {InvalidArgumentError} when `value` is not a `Uint8Array`.
 */
export function validateOrderedValue(value: Uint8Array, max: number = MAX_ORDERED_VALUE_BYTES): Uint8Array {
  if (!isBytes(value)) throw new InvalidArgumentError("value", "must be a Uint8Array");
  if (value.byteLength > max) throw new OrderedValueTooLargeError(value.byteLength, max);
  return value;
}

/**
 * Check a ranking scope: a storage name.
 *
 * @throws {InvalidNameError}
 */
export function validateRankingScope(rankingScope: string): string {
  return validateName(rankingScope);
}

/**
 * Check a revision or order a caller passes back (`expectedRevision`,
 * `afterOrder`): a safe integer >= 0. The spec's `uint64` cannot be anything
 * else; a JavaScript number can.
 *
 * @throws {InvalidArgumentError} naming `argument`.
 */
export function validateUint(argument: string, value: number): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new InvalidArgumentError(argument, "must be a safe integer >= 0");
  }
  return value === 0 ? 0 : value;
}

/**
 * Check a due bound (`dueAtOrBefore`): a safe integer, Unix milliseconds.
 *
 * @throws {InvalidArgumentError}
 */
export function validateDueBound(dueAtOrBefore: number): number {
  if (typeof dueAtOrBefore !== "number" || !Number.isSafeInteger(dueAtOrBefore)) {
    throw new InvalidArgumentError("dueAtOrBefore", "must be a safe integer (Unix time in milliseconds)");
  }
  return dueAtOrBefore === 0 ? 0 : dueAtOrBefore;
}

/**
 * Check the invariants of a whole record, the ones that cross fields: a
 * positive revision and order, a valid rank, due state and value, and a
 * tombstone that is unranked and not due.
 *
 * @throws {InvalidOrderedRecordError} naming the broken rule.
 */
export function validateOrderedRecord(record: OrderedRecord): OrderedRecord {
  const id = record.id;
  const broken = (rule: string): never => {
    throw new InvalidOrderedRecordError(id, rule);
  };
  if (!Number.isSafeInteger(record.revision) || record.revision < 1) broken("revision must be a positive safe integer");
  if (!Number.isSafeInteger(record.order) || record.order < 1) broken("order must be a positive safe integer");
  if (rankRuleBroken(record.rank) !== undefined) broken("rank is not canonical");
  if (dueRuleBroken(record.due) !== undefined) broken("due is not canonical");
  if (!isBytes(record.value)) broken("value must be a Uint8Array");
  if (typeof record.deleted !== "boolean") broken("deleted must be a boolean");
  if (record.deleted && (record.rank.ranked || record.due.state !== "not_due")) broken("a tombstone is unranked and not due");
  return record;
}
