/**
 * The reference model of the OrderedIndex: a plain, obviously correct
 * `OrderedIndex` made of one array of records, with no Engine, no secondary
 * indexes and no cleverness. Each method is straight-line code that follows
 * the spec's comment on that method (quoted above it), so when an
 * implementation and this model disagree, reading the two side by side says
 * which one is wrong.
 *
 * Validation goes through the same validators and error classes as the real
 * index (`src/storage/ordered/validate.ts`, `errors.ts`), so a refused input
 * gives the same error class, `code` and fields. Everything else is its own:
 * listings filter and sort the whole array, stable keys compare by code
 * point (which is UTF-8 byte order), and cursors use a format of the model's
 * own (readable JSON), so the conformance suite never relies on two
 * implementations sharing a token format.
 *
 * Every call is atomic: it validates and decides before it changes anything.
 * Speed is not a goal: every call scans every record.
 */
import { copyBytes } from "../storage/copy.js";
import { throwIfAborted, type CallOptions } from "../storage/options.js";
import { validateName } from "../storage/names.js";
import {
  InvalidOrderedCursorError,
  OrderedDeletedError,
  OrderedRecordNotFoundError,
  OrderedRevisionConflictError,
  OrderedRevisionExhaustedError,
} from "../storage/ordered/errors.js";
import type {
  CreateOrderedResult,
  Due,
  DuePage,
  OrderedCursorKind,
  OrderedId,
  OrderedIndex,
  OrderedPage,
  OrderedRecord,
  Rank,
  RankedPage,
} from "../storage/ordered/types.js";
import {
  MAX_ORDERED_REVISION,
  isValidStableKey,
  validateDue,
  validateDueBound,
  validateOrderedId,
  validateOrderedLimit,
  validateOrderedValue,
  validateRank,
  validateRankingScope,
  validateUint,
} from "../storage/ordered/validate.js";

/** Options of {@link OrderedOracle}. */
export interface OrderedOracleOptions {
  /** The largest revision a record may reach (default `MAX_ORDERED_REVISION`). */
  readonly maxRevision?: number;
}

/** One stored record, mutable in place. */
interface Row {
  readonly id: OrderedId;
  readonly rankingScope: string;
  revision: number;
  readonly order: number;
  rank: Rank;
  due: Due;
  value: Uint8Array;
  deleted: boolean;
}

/** Compare two stable keys by code point, which is the order of their UTF-8 bytes. */
export function compareStableKeys(a: string, b: string): number {
  const left = Array.from(a, (ch) => ch.codePointAt(0)!);
  const right = Array.from(b, (ch) => ch.codePointAt(0)!);
  for (let i = 0; i < Math.min(left.length, right.length); i++) {
    if (left[i]! !== right[i]!) return left[i]! < right[i]! ? -1 : 1;
  }
  return left.length - right.length;
}

/** Compare ASCII names (ordering scopes). */
function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Compare (number, stableKey, orderingScope) positions, ascending. */
function comparePositions(a: { n: number; key: string; scope: string }, b: { n: number; key: string; scope: string }): number {
  if (a.n !== b.n) return a.n < b.n ? -1 : 1;
  const byKey = compareStableKeys(a.key, b.key);
  if (byKey !== 0) return byKey;
  return compareNames(a.scope, b.scope);
}

const CURSOR_PREFIX = "oracle-cursor:";

interface OracleCursor {
  readonly version: number;
  readonly kind: OrderedCursorKind;
  readonly namespace: string;
  /** Ranking scope (ranked) or due bound (due). */
  readonly query: string | number;
  readonly position: { n: number; key: string; scope: string };
}

function snapshot(row: Row): OrderedRecord {
  return {
    id: { ...row.id },
    rankingScope: row.rankingScope,
    revision: row.revision,
    order: row.order,
    due: { ...row.due },
    rank: { ...row.rank },
    value: copyBytes(row.value),
    deleted: row.deleted,
  };
}

/**
 * The reference OrderedIndex.
 *
 * @example
 * const oracle = new OrderedOracle({ maxRevision: 3 });
 * await oracle.create({ namespace: "ns", orderingScope: "s", stableKey: "k" }, "r", new Uint8Array(), { ranked: true, value: 1 }, { state: "not_due", unixMillis: 0 });
 */
export class OrderedOracle implements OrderedIndex {
  private readonly rows: Row[] = [];
  /** The last order each order scope (`namespace` + NUL + `orderingScope`) allocated. */
  private readonly lastOrder = new Map<string, number>();
  private readonly maxRevision: number;

  constructor(options: OrderedOracleOptions = {}) {
    this.maxRevision = options.maxRevision ?? MAX_ORDERED_REVISION;
  }

  /** Every record, in creation order (for failure messages). */
  records(): OrderedRecord[] {
    return this.rows.map(snapshot);
  }

  private find(id: OrderedId): Row | undefined {
    return this.rows.find((row) => row.id.namespace === id.namespace && row.id.orderingScope === id.orderingScope && row.id.stableKey === id.stableKey);
  }

  // "Get validates id first, then returns the current record, including a logical tombstone.
  // An identity that has never been created returns *OrderedRecordNotFoundError."
  async get(id: OrderedId, options?: CallOptions): Promise<OrderedRecord> {
    const checked = validateOrderedId(id);
    throwIfAborted(options);
    const row = this.find(checked);
    if (row === undefined) throw new OrderedRecordNotFoundError(checked);
    return snapshot(row);
  }

  // "Create validates id first and then atomically inspects that identity. If it already exists,
  // including as a tombstone, Create returns its canonical stored record with created == false without
  // validating the candidate rankingScope, value, rank, or due state. Only when the identity is absent
  // does Create validate those candidate fields, assign revision 1, and allocate a nonzero immutable
  // order strictly greater than every order the scope has allocated before."
  async create(id: OrderedId, rankingScope: string, value: Uint8Array, rank: Rank, due: Due, options?: CallOptions): Promise<CreateOrderedResult> {
    const checked = validateOrderedId(id);
    throwIfAborted(options);
    const existing = this.find(checked);
    if (existing !== undefined) return { record: snapshot(existing), created: false };
    const scope = validateRankingScope(rankingScope);
    const bytes = validateOrderedValue(value);
    const canonicalRank = validateRank(rank);
    const canonicalDue = validateDue(due);
    const scopeKey = `${checked.namespace}\u0000${checked.orderingScope}`;
    const order = (this.lastOrder.get(scopeKey) ?? 0) + 1;
    this.lastOrder.set(scopeKey, order);
    const row: Row = { id: checked, rankingScope: scope, revision: 1, order, rank: canonicalRank, due: canonicalDue, value: copyBytes(bytes), deleted: false };
    this.rows.push(row);
    return { record: snapshot(row), created: true };
  }

  // "Update validates id first. An absent record returns *OrderedRecordNotFoundError and a tombstone
  // returns *OrderedDeletedError, in both cases regardless of expectedRevision. For a live record, Update
  // validates candidate Value, Rank, and Due before comparing expectedRevision [...] A valid match replaces
  // only Value, Rank, and Due and advances Revision exactly once. [...] If Revision cannot advance, it
  // returns *OrderedRevisionExhaustedError unchanged."
  async update(id: OrderedId, expectedRevision: number, value: Uint8Array, rank: Rank, due: Due, options?: CallOptions): Promise<OrderedRecord> {
    const checked = validateOrderedId(id);
    throwIfAborted(options);
    const row = this.find(checked);
    if (row === undefined) throw new OrderedRecordNotFoundError(checked);
    if (row.deleted) throw new OrderedDeletedError(checked);
    const bytes = validateOrderedValue(value);
    const canonicalRank = validateRank(rank);
    const canonicalDue = validateDue(due);
    const expected = validateUint("expectedRevision", expectedRevision);
    if (row.revision !== expected) throw new OrderedRevisionConflictError(checked, expected, row.revision);
    if (row.revision >= this.maxRevision) throw new OrderedRevisionExhaustedError(checked, row.revision);
    row.revision += 1;
    row.value = copyBytes(bytes);
    row.rank = canonicalRank;
    row.due = canonicalDue;
    return snapshot(row);
  }

  // "Delete validates id first. An absent record returns *OrderedRecordNotFoundError. A tombstone returns
  // its canonical existing state regardless of expectedRevision [...]. For a live record, a stale
  // expectedRevision returns *OrderedRevisionConflictError; a matching revision advances exactly once,
  // sets Deleted, clears Rank to Rank{} and Due to Due{State: NotDue, UnixMillis: 0}, and preserves Value,
  // RankingScope, identity, and immutable Order. If Revision cannot advance, it returns
  // *OrderedRevisionExhaustedError unchanged."
  async delete(id: OrderedId, expectedRevision: number, options?: CallOptions): Promise<OrderedRecord> {
    const checked = validateOrderedId(id);
    throwIfAborted(options);
    const row = this.find(checked);
    if (row === undefined) throw new OrderedRecordNotFoundError(checked);
    if (row.deleted) return snapshot(row);
    const expected = validateUint("expectedRevision", expectedRevision);
    if (row.revision !== expected) throw new OrderedRevisionConflictError(checked, expected, row.revision);
    if (row.revision >= this.maxRevision) throw new OrderedRevisionExhaustedError(checked, row.revision);
    row.revision += 1;
    row.deleted = true;
    row.rank = { ranked: false, value: 0 };
    row.due = { state: "not_due", unixMillis: 0 };
    return snapshot(row);
  }

  // "ListOrdered returns the immutable acceptance-order stream, including tombstones, in ascending Order
  // after the exclusive numeric afterOrder." NextAfterOrder "is zero when no rows were returned; otherwise
  // it is the final immutable order in Records".
  async listOrdered(namespace: string, orderingScope: string, afterOrder: number, limit: number, options?: CallOptions): Promise<OrderedPage> {
    const ns = validateName(namespace);
    const scope = validateName(orderingScope);
    const after = validateUint("afterOrder", afterOrder);
    const max = validateOrderedLimit(limit);
    throwIfAborted(options);
    const stream = this.rows
      .filter((row) => row.id.namespace === ns && row.id.orderingScope === scope && row.order > after)
      .sort((a, b) => a.order - b.order)
      .slice(0, max);
    const last = stream[stream.length - 1];
    return { records: stream.map(snapshot), nextAfterOrder: last === undefined ? 0 : last.order };
  }

  // "ListRanked returns current, nondeleted ranked records in descending (rank, stable_key,
  // ordering_scope) order. [...] Pagination resumes from the frozen (rank, stable_key, ordering_scope)
  // tuple the cursor names, not from a snapshot of the result set."
  async listRanked(namespace: string, rankingScope: string, after: string, limit: number, options?: CallOptions): Promise<RankedPage> {
    const ns = validateName(namespace);
    const scope = validateName(rankingScope);
    const max = validateOrderedLimit(limit);
    const from = after === "" ? undefined : this.openCursor("ranked", after, ns, scope);
    throwIfAborted(options);
    const positionOf = (row: Row) => ({ n: row.rank.value, key: row.id.stableKey, scope: row.id.orderingScope });
    const all = this.rows
      .filter((row) => !row.deleted && row.rank.ranked && row.id.namespace === ns && row.rankingScope === scope)
      .filter((row) => from === undefined || comparePositions(positionOf(row), from) < 0)
      .sort((a, b) => comparePositions(positionOf(b), positionOf(a)));
    const page = all.slice(0, max);
    const last = page[page.length - 1];
    const nextCursor = all.length > max && last !== undefined ? this.issueCursor("ranked", ns, scope, positionOf(last)) : "";
    return { records: page.map(snapshot), nextCursor };
  }

  // "ListDue returns current, nondeleted DueAt records with UnixMillis no later than dueAtOrBefore in
  // ascending (due_at, stable_key, ordering_scope) order. [...] ListDue resumes from the frozen (due_at,
  // stable_key, ordering_scope) tuple the cursor names".
  async listDue(namespace: string, dueAtOrBefore: number, after: string, limit: number, options?: CallOptions): Promise<DuePage> {
    const ns = validateName(namespace);
    const bound = validateDueBound(dueAtOrBefore);
    const max = validateOrderedLimit(limit);
    const from = after === "" ? undefined : this.openCursor("due", after, ns, bound);
    throwIfAborted(options);
    const positionOf = (row: Row) => ({ n: row.due.unixMillis, key: row.id.stableKey, scope: row.id.orderingScope });
    const all = this.rows
      .filter((row) => !row.deleted && row.due.state === "due_at" && row.due.unixMillis <= bound && row.id.namespace === ns)
      .filter((row) => from === undefined || comparePositions(positionOf(row), from) > 0)
      .sort((a, b) => comparePositions(positionOf(a), positionOf(b)));
    const page = all.slice(0, max);
    const last = page[page.length - 1];
    const nextCursor = all.length > max && last !== undefined ? this.issueCursor("due", ns, bound, positionOf(last)) : "";
    return { records: page.map(snapshot), nextCursor };
  }

  private issueCursor(kind: OrderedCursorKind, namespace: string, query: string | number, position: OracleCursor["position"]): string {
    const cursor: OracleCursor = { version: 1, kind, namespace, query, position };
    return CURSOR_PREFIX + JSON.stringify(cursor);
  }

  /** Malformed, then unknown version, then wrong kind, then query mismatch, as the spec lists them. */
  private openCursor(kind: OrderedCursorKind, token: string, namespace: string, query: string | number): OracleCursor["position"] {
    const refuse = (rule: "malformed" | "unknown_version" | "wrong_kind" | "query_mismatch") => new InvalidOrderedCursorError(kind, token, rule);
    if (typeof token !== "string" || !token.startsWith(CURSOR_PREFIX)) throw refuse("malformed");
    let parsed: unknown;
    try {
      parsed = JSON.parse(token.slice(CURSOR_PREFIX.length));
    } catch {
      // Not JSON: nothing this model issued.
      throw refuse("malformed");
    }
    if (parsed === null || typeof parsed !== "object") throw refuse("malformed");
    const cursor = parsed as Partial<OracleCursor>;
    if (typeof cursor.version !== "number") throw refuse("malformed");
    if (cursor.version !== 1) throw refuse("unknown_version");
    if (cursor.kind !== "ranked" && cursor.kind !== "due") throw refuse("malformed");
    if (cursor.kind !== kind) throw refuse("wrong_kind");
    const position = cursor.position;
    if (
      position === undefined ||
      typeof position !== "object" ||
      !Number.isSafeInteger(position.n) ||
      !isValidStableKey(position.key) ||
      typeof position.scope !== "string" ||
      typeof cursor.namespace !== "string" ||
      typeof cursor.query !== typeof query
    ) {
      throw refuse("malformed");
    }
    if (cursor.namespace !== namespace || cursor.query !== query) throw refuse("query_mismatch");
    return { n: position.n, key: position.key, scope: position.scope };
  }
}
