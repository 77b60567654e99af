/**
 * Typed errors of the OrderedIndex: the spec's `Ordered*` and `Invalid*`
 * family, each a {@link StorageError} with a stable `code` and the fields the
 * spec names.
 *
 * Privacy promise: no message ever renders a stable key or a cursor token.
 * Stable keys are opaque caller identities (often user ids or e-mail
 * addresses) and cursors are opaque provider tokens, so a message names an
 * identity by its namespace, ordering scope and the stable key's byte length
 * only. The `id` fields keep the whole identity for code that needs it.
 */
import { quote, StorageError } from "../errors.js";
import { utf8Length } from "../names.js";
import type { Due, OrderedCursorKind, OrderedCursorRule, OrderedId, OrderedOperation, Rank } from "./types.js";

/** Every code an OrderedIndex error can carry. */
export type OrderedErrorCode =
  | "invalid_due"
  | "invalid_rank"
  | "invalid_ordered_cursor"
  | "invalid_ordered_limit"
  | "invalid_ordered_record"
  | "invalid_stable_key"
  | "ordered_ambiguous"
  | "ordered_deleted"
  | "ordered_record_not_found"
  | "ordered_revision_conflict"
  | "ordered_revision_exhausted"
  | "ordered_value_too_large";

/** The largest value a `uint16` length field holds: lengths are reported capped here. */
const UINT16_MAX = 65_535;

/** A byte length, capped at 65,535 as the spec's `uint16` length fields are. */
function cappedByteLength(text: string): number {
  return Math.min(utf8Length(text), UINT16_MAX);
}

/** An identity for a message: namespace and ordering scope quoted, the stable key only by its length. */
function describeOrderedId(id: OrderedId): string {
  const key = typeof id?.stableKey === "string" ? `a ${utf8Length(id.stableKey)}-byte stable key` : "a missing stable key";
  return `record (namespace ${quote(id?.namespace)}, ordering scope ${quote(id?.orderingScope)}, ${key})`;
}

/** A plain copy of an identity, so an error never shares an object with the caller. */
function copyId(id: OrderedId): OrderedId {
  return { namespace: id.namespace, orderingScope: id.orderingScope, stableKey: id.stableKey };
}

/** Why a {@link Due} was refused. */
export type DueRule = "type" | "state" | "not_due_millis" | "millis";

const DUE_RULE_TEXT: Record<DueRule, string> = {
  type: "a due state is an object { state, unixMillis }",
  state: 'state must be "not_due" or "due_at"',
  not_due_millis: "a not_due state has unixMillis 0 (its one canonical form)",
  millis: "unixMillis must be a safe integer (Unix time in milliseconds)",
};

/** A due state that is not canonical or uses an unknown discriminator. `due` is the refused value. */
export class InvalidDueError extends StorageError {
  declare readonly code: "invalid_due";
  readonly due: Due;
  readonly rule: DueRule;
  constructor(due: Due, rule: DueRule) {
    super("invalid_due", `invalid due state: ${DUE_RULE_TEXT[rule]}`);
    this.name = "InvalidDueError";
    this.due = due !== null && typeof due === "object" ? { state: due.state, unixMillis: due.unixMillis } : due;
    this.rule = rule;
  }
}

/** Why a {@link Rank} was refused. */
export type RankRule = "type" | "ranked" | "unranked_value" | "value";

const RANK_RULE_TEXT: Record<RankRule, string> = {
  type: "a rank is an object { ranked, value }",
  ranked: "ranked must be a boolean",
  unranked_value: "an unranked rank has value 0 (its one canonical form)",
  value: "value must be a safe integer",
};

/**
 * A rank that is not canonical or not representable. Not in the Go spec,
 * where any `int64` is a rank: a JavaScript number can also be fractional,
 * infinite or beyond 2^53, and an unranked rank with a nonzero value would
 * give "unranked" two forms (the spec clears a deleted record's rank to the
 * zero `Rank{}`).
 */
export class InvalidRankError extends StorageError {
  declare readonly code: "invalid_rank";
  readonly rank: Rank;
  readonly rule: RankRule;
  constructor(rank: Rank, rule: RankRule) {
    super("invalid_rank", `invalid rank: ${RANK_RULE_TEXT[rule]}`);
    this.name = "InvalidRankError";
    this.rank = rank !== null && typeof rank === "object" ? { ranked: rank.ranked, value: rank.value } : rank;
    this.rule = rule;
  }
}

const CURSOR_RULE_TEXT: Record<OrderedCursorRule, string> = {
  malformed: "malformed",
  unknown_version: "unknown version",
  wrong_kind: "issued for another cursor kind",
  query_mismatch: "issued for another query",
};

/**
 * An opaque continuation cursor was refused: malformed, of an unknown
 * version, of the other listing's kind, or issued for another query. `kind`
 * names the listing that refused it; `cursorLength` is the token's UTF-8 byte
 * length capped at 65,535. Neither the fields nor the message hold the token.
 */
export class InvalidOrderedCursorError extends StorageError {
  declare readonly code: "invalid_ordered_cursor";
  readonly kind: OrderedCursorKind;
  readonly rule: OrderedCursorRule;
  readonly cursorLength: number;
  constructor(kind: OrderedCursorKind, cursor: string, rule: OrderedCursorRule) {
    const cursorLength = typeof cursor === "string" ? cappedByteLength(cursor) : 0;
    super("invalid_ordered_cursor", `invalid ${kind} cursor (${cursorLength} bytes): ${CURSOR_RULE_TEXT[rule]}`);
    this.name = "InvalidOrderedCursorError";
    this.kind = kind;
    this.rule = rule;
    this.cursorLength = cursorLength;
  }
}

/** A listing limit outside the inclusive range 1..`max`. */
export class InvalidOrderedLimitError extends StorageError {
  declare readonly code: "invalid_ordered_limit";
  readonly limit: number;
  readonly max: number;
  constructor(limit: number, max: number) {
    super("invalid_ordered_limit", `limit must be an integer from 1 to ${max}, got ${typeof limit === "number" ? String(limit) : typeof limit}`);
    this.name = "InvalidOrderedLimitError";
    this.limit = limit;
    this.max = max;
  }
}

/**
 * A record that violates an invariant crossing several fields (for example a
 * tombstone that is still ranked). The index raises it for a stored row that
 * fails its checks, so corrupt storage is reported rather than served.
 */
export class InvalidOrderedRecordError extends StorageError {
  declare readonly code: "invalid_ordered_record";
  readonly id: OrderedId;
  readonly rule: string;
  constructor(id: OrderedId, rule: string) {
    super("invalid_ordered_record", `${describeOrderedId(id)} is not a valid ordered record: ${rule}`);
    this.name = "InvalidOrderedRecordError";
    this.id = copyId(id);
    this.rule = rule;
  }
}

/** Why a stable key was refused. */
export type StableKeyRule = "type" | "empty" | "too_long" | "utf8";

const STABLE_KEY_RULE_TEXT: Record<StableKeyRule, string> = {
  type: "a stable key must be a string",
  empty: "a stable key must not be empty",
  too_long: "a stable key is too long",
  utf8: "a stable key must be valid UTF-8 (no lone surrogates)",
};

/**
 * A stable key that is empty, too long or not valid UTF-8. `stableKeyLength`
 * is its UTF-8 byte length (a lone surrogate counts 3) capped at 65,535; the
 * error never keeps or renders the key itself.
 */
export class InvalidStableKeyError extends StorageError {
  declare readonly code: "invalid_stable_key";
  readonly rule: StableKeyRule;
  readonly stableKeyLength: number;
  constructor(rule: StableKeyRule, stableKeyLength: number) {
    super("invalid_stable_key", `invalid stable key (${stableKeyLength} bytes): ${STABLE_KEY_RULE_TEXT[rule]}`);
    this.name = "InvalidStableKeyError";
    this.rule = rule;
    this.stableKeyLength = stableKeyLength;
  }
}

/**
 * A networked mutation whose acknowledgement was lost: it may or may not
 * have committed. The engine-backed index never throws it; it exists for
 * remote providers. `cause` is the transport error, when there is one.
 */
export class OrderedAmbiguousError extends StorageError {
  declare readonly code: "ordered_ambiguous";
  readonly operation: OrderedOperation;
  readonly id: OrderedId;
  constructor(operation: OrderedOperation, id: OrderedId, cause?: unknown) {
    super("ordered_ambiguous", `${operation} of ${describeOrderedId(id)} has an unknown outcome`, cause === undefined ? undefined : { cause });
    this.name = "OrderedAmbiguousError";
    this.operation = operation;
    this.id = copyId(id);
  }
}

/** An update of a tombstone: tombstones cannot be resurrected. */
export class OrderedDeletedError extends StorageError {
  declare readonly code: "ordered_deleted";
  readonly id: OrderedId;
  constructor(id: OrderedId) {
    super("ordered_deleted", `${describeOrderedId(id)} is deleted and cannot be updated`);
    this.name = "OrderedDeletedError";
    this.id = copyId(id);
  }
}

/** An identity that was never created (a tombstone is not absent). */
export class OrderedRecordNotFoundError extends StorageError {
  declare readonly code: "ordered_record_not_found";
  readonly id: OrderedId;
  constructor(id: OrderedId) {
    super("ordered_record_not_found", `${describeOrderedId(id)} was never created`);
    this.name = "OrderedRecordNotFoundError";
    this.id = copyId(id);
  }
}

/** A compare-and-swap whose current revision is not `expectedRevision`; `actualRevision` is the current one. */
export class OrderedRevisionConflictError extends StorageError {
  declare readonly code: "ordered_revision_conflict";
  readonly id: OrderedId;
  readonly expectedRevision: number;
  readonly actualRevision: number;
  constructor(id: OrderedId, expectedRevision: number, actualRevision: number) {
    super("ordered_revision_conflict", `${describeOrderedId(id)}: expected revision ${expectedRevision}, found ${actualRevision}`);
    this.name = "OrderedRevisionConflictError";
    this.id = copyId(id);
    this.expectedRevision = expectedRevision;
    this.actualRevision = actualRevision;
  }
}

/** A mutation that cannot advance `revision` any further; the record is unchanged. */
export class OrderedRevisionExhaustedError extends StorageError {
  declare readonly code: "ordered_revision_exhausted";
  readonly id: OrderedId;
  readonly revision: number;
  constructor(id: OrderedId, revision: number) {
    super("ordered_revision_exhausted", `${describeOrderedId(id)}: revision ${revision} cannot advance`);
    this.name = "OrderedRevisionExhaustedError";
    this.id = copyId(id);
    this.revision = revision;
  }
}

/** A value over the supported maximum size in bytes. */
export class OrderedValueTooLargeError extends StorageError {
  declare readonly code: "ordered_value_too_large";
  readonly size: number;
  readonly max: number;
  constructor(size: number, max: number) {
    super("ordered_value_too_large", `ordered value of ${size} bytes is over the ${max}-byte maximum`);
    this.name = "OrderedValueTooLargeError";
    this.size = size;
    this.max = max;
  }
}
