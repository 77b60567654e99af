/**
 * The shape of the OrderedIndex (`storage-primitives.go.txt`, everything named
 * `Ordered*`, `Rank`, `Due`, `StableKey`): records, identities, pages, cursors
 * and the interface itself, plus constant objects naming the string values
 * of its unions (`DueState.DueAt`, ...). The engine-backed implementation is
 * `createOrderedIndex` in `./ordered-index.ts`.
 *
 * How the Go shapes map to TypeScript:
 * - `context.Context` becomes an optional `{ signal?: AbortSignal }` last
 *   argument; an aborted call rejects with the signal's reason and changes
 *   nothing.
 * - `uint64` revisions and orders, and `int64` rank values and due times, are
 *   `number`s restricted to safe integers (|n| <= 2^53 - 1). A revision that
 *   would pass `Number.MAX_SAFE_INTEGER` is refused with
 *   `OrderedRevisionExhaustedError`, exactly as the spec refuses to pass the
 *   maximal uint64.
 * - `[]byte` values are `Uint8Array`s, copied on the way in and on the way out.
 * - An empty string is the "no cursor" of a first page and the "exhausted"
 *   `nextCursor` of a last page, as in the spec.
 */
import type { CallOptions } from "../options.js";

/**
 * The optional last argument of every {@link OrderedIndex} method: when its
 * `signal` is aborted (before or during the call), the call rejects with
 * `signal.reason` and changes nothing.
 */
export type OrderedCallOptions = CallOptions;

/**
 * The identity of an ordered record. `(namespace, orderingScope)` is the
 * order scope: the unit within which `order` strictly increases and is never
 * reused. `namespace` and `orderingScope` follow the storage name grammar;
 * `stableKey` is opaque (1..`MAX_STABLE_KEY_BYTES` bytes of valid UTF-8).
 */
export interface OrderedId {
  readonly namespace: string;
  readonly orderingScope: string;
  readonly stableKey: string;
}

/**
 * The mutable rank of a record. `ranked: false` keeps the record out of
 * `listRanked`; its canonical form is `{ ranked: false, value: 0 }` (the only
 * unranked form the index accepts). `value` is a safe integer.
 */
export interface Rank {
  readonly ranked: boolean;
  readonly value: number;
}

/** The discriminator of {@link Due}: `"not_due"` (absent from `listDue`) or `"due_at"`. */
export type DueState = "not_due" | "due_at";

/** The values of {@link DueState}, named as in the spec. */
export const DueState = { NotDue: "not_due", DueAt: "due_at" } as const satisfies Record<string, DueState>;

/**
 * The mutable due time of a record. `due_at`: `unixMillis` is an absolute UTC
 * Unix time in milliseconds (a safe integer, may be negative) and the record
 * takes part in `listDue`. `not_due`: `unixMillis` must be 0, so the non-due
 * state has one canonical form.
 */
export interface Due {
  readonly state: DueState;
  readonly unixMillis: number;
}

/**
 * The complete state of one ordered record, as a snapshot the caller owns.
 * `revision` is 1 on create and advances exactly once per update or live
 * delete. `order` is nonzero, immutable, strictly increasing within the order
 * scope and never reused there; it may be sparse and says nothing about
 * positions, counts or scopes.
 */
export interface OrderedRecord {
  readonly id: OrderedId;
  readonly rankingScope: string;
  readonly revision: number;
  readonly order: number;
  readonly due: Due;
  readonly rank: Rank;
  readonly value: Uint8Array;
  /** A logical tombstone: rank and due are cleared, value, scope, identity and order kept. */
  readonly deleted: boolean;
}

/** What `create` returns: the canonical stored record, and whether this call created it. */
export interface CreateOrderedResult {
  readonly record: OrderedRecord;
  readonly created: boolean;
}

/** A page of `listOrdered`. `nextAfterOrder` is 0 when no rows came back, else the last row's order. */
export interface OrderedPage {
  readonly records: OrderedRecord[];
  readonly nextAfterOrder: number;
}

/** An opaque, versioned continuation token of `listRanked`; `""` means "from the start". */
export type RankedCursor = string;

/** An opaque, versioned continuation token of `listDue`; `""` means "from the start". */
export type DueCursor = string;

/** A page of `listRanked`. An empty `nextCursor` means the result set is exhausted. */
export interface RankedPage {
  readonly records: OrderedRecord[];
  readonly nextCursor: RankedCursor;
}

/** A page of `listDue`. An empty `nextCursor` means the result set is exhausted. */
export interface DuePage {
  readonly records: OrderedRecord[];
  readonly nextCursor: DueCursor;
}

/** Which listing rejected a cursor. */
export type OrderedCursorKind = "ranked" | "due";

/** The values of {@link OrderedCursorKind}, named as in the spec (`RankedCursorKind`, `DueCursorKind`). */
export const OrderedCursorKind = { Ranked: "ranked", Due: "due" } as const satisfies Record<string, OrderedCursorKind>;

/** Why a cursor was rejected: a fixed classification that never quotes the token. */
export type OrderedCursorRule = "malformed" | "unknown_version" | "wrong_kind" | "query_mismatch";

/** The values of {@link OrderedCursorRule}, named as in the spec (`OrderedCursorMalformed`, ...). */
export const OrderedCursorRule = {
  Malformed: "malformed",
  UnknownVersion: "unknown_version",
  WrongKind: "wrong_kind",
  QueryMismatch: "query_mismatch",
} as const satisfies Record<string, OrderedCursorRule>;

/** The mutations whose outcome a networked provider may not know (`OrderedAmbiguousError`). */
export type OrderedOperation = "create" | "update" | "delete";

/** The values of {@link OrderedOperation}, named as in the spec (`OrderedCreateOperation`, ...). */
export const OrderedOperation = { Create: "create", Update: "update", Delete: "delete" } as const satisfies Record<string, OrderedOperation>;

/**
 * A durable record collection with an immutable acceptance order plus current
 * ranked and due views. Every method validates its inputs at the boundary
 * (an `OrderedId` first, with `validateOrderedId`), and every refused call
 * changes nothing.
 */
export interface OrderedIndex {
  /**
   * The current record, tombstones included. Never created:
   * `OrderedRecordNotFoundError`.
   */
  get(id: OrderedId, options?: OrderedCallOptions): Promise<OrderedRecord>;

  /**
   * Create the record unless its identity exists. When it exists (tombstones
   * included) resolve with the stored record and `created: false` without
   * validating the candidate fields. Otherwise validate `rankingScope`,
   * `value`, `rank` and `due`, assign revision 1 and a fresh order.
   */
  create(id: OrderedId, rankingScope: string, value: Uint8Array, rank: Rank, due: Due, options?: OrderedCallOptions): Promise<CreateOrderedResult>;

  /**
   * Replace value, rank and due of a live record at `expectedRevision`.
   * Absent: `OrderedRecordNotFoundError`; tombstone: `OrderedDeletedError`
   * (whatever the revision); then candidate validation; then the revision
   * check (`OrderedRevisionConflictError`); at the revision ceiling
   * `OrderedRevisionExhaustedError`.
   */
  update(id: OrderedId, expectedRevision: number, value: Uint8Array, rank: Rank, due: Due, options?: OrderedCallOptions): Promise<OrderedRecord>;

  /**
   * Tombstone a live record at `expectedRevision`: revision + 1, rank and due
   * cleared, everything else kept. A tombstone resolves with its stored state
   * whatever `expectedRevision` says.
   */
  delete(id: OrderedId, expectedRevision: number, options?: OrderedCallOptions): Promise<OrderedRecord>;

  /** The acceptance-order stream of one order scope (tombstones included), ascending, after the exclusive `afterOrder` (0: from the start). */
  listOrdered(namespace: string, orderingScope: string, afterOrder: number, limit: number, options?: OrderedCallOptions): Promise<OrderedPage>;

  /** Live ranked records of one ranking scope, descending by (rank, stableKey, orderingScope), keyset-paginated. */
  listRanked(namespace: string, rankingScope: string, after: RankedCursor, limit: number, options?: OrderedCallOptions): Promise<RankedPage>;

  /** Live `due_at` records due at or before `dueAtOrBefore`, ascending by (dueAt, stableKey, orderingScope), keyset-paginated. */
  listDue(namespace: string, dueAtOrBefore: number, after: DueCursor, limit: number, options?: OrderedCallOptions): Promise<DuePage>;
}
