/**
 * `createOrderedIndex`: the OrderedIndex, implemented once over any Engine.
 *
 * Every method validates its inputs (the id first), then runs in one engine
 * transaction that awaits nothing but engine calls; a refused or aborted call
 * changes nothing, and engine failures become `StorageBackendError`s with the
 * engine's error as `cause`. The precedence of each method (validation,
 * lookup, revision check) is the spec's, written out on the interface in
 * `./types.ts`. The index keeps no state outside the engine, so a new index
 * over the same engine and store continues where an old one stopped.
 *
 * Orders are allocated per order scope from a counter row (1, 2, 3, ...):
 * dense today, but callers may rely only on what the spec promises (nonzero,
 * strictly increasing, never reused).
 */
import type { Engine, EngineTransaction } from "../../engine.js";
import { copyBytes } from "../copy.js";
import { InvalidArgumentError, StorageBackendError } from "../errors.js";
import { validateName } from "../names.js";
import type { CallOptions } from "../options.js";
import { transact } from "../transaction.js";
import { isBytes } from "../web.js";
import { decodeDueCursor, decodeRankedCursor, encodeDueCursor, encodeRankedCursor, type DuePosition, type RankedPosition } from "./cursor.js";
import {
  InvalidOrderedRecordError,
  OrderedDeletedError,
  OrderedRecordNotFoundError,
  OrderedRevisionConflictError,
  OrderedRevisionExhaustedError,
} from "./errors.js";
import { OrderedLayout, type RecordRow } from "./layout.js";
import type { CreateOrderedResult, Due, DuePage, OrderedId, OrderedIndex, OrderedPage, OrderedRecord, Rank, RankedPage } from "./types.js";
import {
  MAX_ORDERED_ORDER,
  MAX_ORDERED_REVISION,
  NOT_DUE,
  UNRANKED,
  validateDue,
  validateDueBound,
  validateOrderedId,
  validateOrderedLimit,
  validateOrderedValue,
  validateRank,
  validateRankingScope,
  validateUint,
} from "./validate.js";

/** Options of {@link createOrderedIndex}. */
export interface OrderedIndexOptions {
  /** The store (a storage name) whose subtree holds the index; one engine holds many stores. */
  readonly store: string;
  /**
   * The largest revision a record may reach (default
   * {@link MAX_ORDERED_REVISION}). Meant for tests, which set it low to reach
   * `OrderedRevisionExhaustedError` in a few updates.
   */
  readonly maxRevision?: number;
}

/**
 * Create an OrderedIndex over an Engine, in the subtree of store
 * `options.store`.
 *
 * @example
 * ```ts
 * import { createOrderedIndex } from "isostore";
 * import { memoryEngine } from "isostore/memory";
 *
 * const index = createOrderedIndex(memoryEngine(), { store: "tenants/acme" });
 * const id = { namespace: "jobs", orderingScope: "inbox", stableKey: "job-42" };
 * const { record } = await index.create(id, "priority", new Uint8Array([1]), { ranked: true, value: 5 }, { state: "due_at", unixMillis: Date.now() });
 * const due = await index.listDue("jobs", Date.now(), "", 100);
 * await index.update(id, record.revision, record.value, { ranked: false, value: 0 }, { state: "not_due", unixMillis: 0 });
 * ```
 */
export function createOrderedIndex(engine: Engine, options: OrderedIndexOptions): OrderedIndex {
  if (options === null || typeof options !== "object") throw new InvalidArgumentError("options", "createOrderedIndex needs { store }");
  const store = validateName(options.store);
  const maxRevision = options.maxRevision ?? MAX_ORDERED_REVISION;
  if (!Number.isSafeInteger(maxRevision) || maxRevision < 1) throw new InvalidArgumentError("maxRevision", "must be a safe integer >= 1");
  return new EngineOrderedIndex(engine, new OrderedLayout(store), maxRevision);
}

/** Whether a stored value is a record row this code can read (corrupt storage is reported, not served). */
function rowProblem(row: RecordRow): string | undefined {
  if (row === null || typeof row !== "object" || row.v !== 1) return "unknown row format";
  if (typeof row.rankingScope !== "string") return "ranking scope is not a string";
  if (!Number.isSafeInteger(row.revision) || row.revision < 1) return "revision must be a positive safe integer";
  if (!Number.isSafeInteger(row.order) || row.order < 1) return "order must be a positive safe integer";
  if (row.rank !== null && !Number.isSafeInteger(row.rank)) return "rank must be a safe integer or null";
  if (row.dueAt !== null && !Number.isSafeInteger(row.dueAt)) return "due time must be a safe integer or null";
  if (!isBytes(row.value)) return "value must be a Uint8Array";
  if (typeof row.deleted !== "boolean") return "deleted must be a boolean";
  if (row.deleted && (row.rank !== null || row.dueAt !== null)) return "a tombstone is unranked and not due";
  return undefined;
}

/** The caller's snapshot of a stored row: fresh objects, a copy of the value. */
function toRecord(id: OrderedId, row: RecordRow): OrderedRecord {
  return {
    id: { namespace: id.namespace, orderingScope: id.orderingScope, stableKey: id.stableKey },
    rankingScope: row.rankingScope,
    revision: row.revision,
    order: row.order,
    due: row.dueAt === null ? { ...NOT_DUE } : { state: "due_at", unixMillis: row.dueAt },
    rank: row.rank === null ? { ...UNRANKED } : { ranked: true, value: row.rank },
    value: copyBytes(row.value),
    deleted: row.deleted,
  };
}

class EngineOrderedIndex implements OrderedIndex {
  constructor(
    private readonly engine: Engine,
    private readonly layout: OrderedLayout,
    private readonly maxRevision: number,
  ) {}

  /** The stored row of `id`, checked, or `undefined` when it was never created. */
  private async readRow(tx: EngineTransaction, id: OrderedId): Promise<RecordRow | undefined> {
    const row = await tx.get<RecordRow>(this.layout.record(id.namespace, id.orderingScope, id.stableKey));
    if (row === undefined) return undefined;
    const problem = rowProblem(row);
    if (problem !== undefined) throw new InvalidOrderedRecordError(id, problem);
    return row;
  }

  /** Make the ranked and due entries of `id` match `next` (given they matched `previous`). */
  private moveIndexEntries(tx: EngineTransaction, id: OrderedId, previous: RecordRow | undefined, next: RecordRow): void {
    const { namespace, orderingScope, stableKey } = id;
    const rankedKey = (row: RecordRow | undefined) =>
      row === undefined || row.rank === null ? undefined : this.layout.ranked(namespace, row.rankingScope, row.rank, stableKey, orderingScope);
    const dueKey = (row: RecordRow | undefined) => (row === undefined || row.dueAt === null ? undefined : this.layout.due(namespace, row.dueAt, stableKey, orderingScope));
    for (const keyOf of [rankedKey, dueKey]) {
      const before = keyOf(previous);
      const after = keyOf(next);
      if (before !== undefined && after !== undefined && before.every((part, i) => part === after[i])) continue;
      if (before !== undefined) tx.delete(before);
      if (after !== undefined) tx.put(after, stableKey);
    }
  }

  async get(id: OrderedId, options?: CallOptions): Promise<OrderedRecord> {
    const checked = validateOrderedId(id);
    return transact(this.engine, "readonly", "ordered.get", options, async (tx) => {
      const row = await this.readRow(tx, checked);
      if (row === undefined) throw new OrderedRecordNotFoundError(checked);
      return toRecord(checked, row);
    });
  }

  async create(id: OrderedId, rankingScope: string, value: Uint8Array, rank: Rank, due: Due, options?: CallOptions): Promise<CreateOrderedResult> {
    const checked = validateOrderedId(id);
    return transact(this.engine, "readwrite", "ordered.create", options, async (tx) => {
      const existing = await this.readRow(tx, checked);
      if (existing !== undefined) return { record: toRecord(checked, existing), created: false };
      // Candidate fields are validated only now that the identity is known to be absent.
      const scope = validateRankingScope(rankingScope);
      const bytes = validateOrderedValue(value);
      const canonicalRank = validateRank(rank);
      const canonicalDue = validateDue(due);
      const { namespace, orderingScope, stableKey } = checked;
      const sequenceKey = this.layout.sequence(namespace, orderingScope);
      const last = (await tx.get<number>(sequenceKey)) ?? 0;
      if (!Number.isSafeInteger(last) || last < 0) throw new InvalidOrderedRecordError(checked, "the order scope's counter is corrupt");
      if (last >= MAX_ORDERED_ORDER) throw new StorageBackendError("ordered.create", new RangeError("the order scope has allocated its last order"));
      const row: RecordRow = {
        v: 1,
        rankingScope: scope,
        revision: 1,
        order: last + 1,
        rank: canonicalRank.ranked ? canonicalRank.value : null,
        dueAt: canonicalDue.state === "due_at" ? canonicalDue.unixMillis : null,
        value: copyBytes(bytes),
        deleted: false,
      };
      tx.put(sequenceKey, row.order);
      tx.put(this.layout.record(namespace, orderingScope, stableKey), row);
      tx.put(this.layout.accepted(namespace, orderingScope, row.order), stableKey);
      this.moveIndexEntries(tx, checked, undefined, row);
      return { record: toRecord(checked, row), created: true };
    });
  }

  async update(id: OrderedId, expectedRevision: number, value: Uint8Array, rank: Rank, due: Due, options?: CallOptions): Promise<OrderedRecord> {
    const checked = validateOrderedId(id);
    return transact(this.engine, "readwrite", "ordered.update", options, async (tx) => {
      const row = await this.readRow(tx, checked);
      if (row === undefined) throw new OrderedRecordNotFoundError(checked);
      if (row.deleted) throw new OrderedDeletedError(checked);
      const bytes = validateOrderedValue(value);
      const canonicalRank = validateRank(rank);
      const canonicalDue = validateDue(due);
      const expected = validateUint("expectedRevision", expectedRevision);
      if (row.revision !== expected) throw new OrderedRevisionConflictError(checked, expected, row.revision);
      if (row.revision >= this.maxRevision) throw new OrderedRevisionExhaustedError(checked, row.revision);
      const next: RecordRow = {
        ...row,
        revision: row.revision + 1,
        rank: canonicalRank.ranked ? canonicalRank.value : null,
        dueAt: canonicalDue.state === "due_at" ? canonicalDue.unixMillis : null,
        value: copyBytes(bytes),
      };
      this.moveIndexEntries(tx, checked, row, next);
      tx.put(this.layout.record(checked.namespace, checked.orderingScope, checked.stableKey), next);
      return toRecord(checked, next);
    });
  }

  async delete(id: OrderedId, expectedRevision: number, options?: CallOptions): Promise<OrderedRecord> {
    const checked = validateOrderedId(id);
    return transact(this.engine, "readwrite", "ordered.delete", options, async (tx) => {
      const row = await this.readRow(tx, checked);
      if (row === undefined) throw new OrderedRecordNotFoundError(checked);
      // A tombstone answers with its state whatever revision the caller names (a retried delete).
      if (row.deleted) return toRecord(checked, row);
      const expected = validateUint("expectedRevision", expectedRevision);
      if (row.revision !== expected) throw new OrderedRevisionConflictError(checked, expected, row.revision);
      if (row.revision >= this.maxRevision) throw new OrderedRevisionExhaustedError(checked, row.revision);
      const next: RecordRow = { ...row, revision: row.revision + 1, rank: null, dueAt: null, deleted: true };
      this.moveIndexEntries(tx, checked, row, next);
      tx.put(this.layout.record(checked.namespace, checked.orderingScope, checked.stableKey), next);
      return toRecord(checked, next);
    });
  }

  /** The record an index entry points at; an entry without its record (or with another record) is corruption. */
  private async indexed(tx: EngineTransaction, id: OrderedId, matches: (row: RecordRow) => boolean): Promise<OrderedRecord> {
    const row = await this.readRow(tx, id);
    if (row === undefined || !matches(row)) throw new InvalidOrderedRecordError(id, "an index entry does not match its record");
    return toRecord(id, row);
  }

  async listOrdered(namespace: string, orderingScope: string, afterOrder: number, limit: number, options?: CallOptions): Promise<OrderedPage> {
    const ns = validateName(namespace);
    const scope = validateName(orderingScope);
    const after = validateUint("afterOrder", afterOrder);
    const max = validateOrderedLimit(limit);
    return transact(this.engine, "readonly", "ordered.listOrdered", options, async (tx) => {
      const prefix = this.layout.acceptedAll(ns, scope);
      const entries = await tx.scan<string>({ prefix, lower: [...prefix, after], lowerOpen: true }, { limit: max });
      const records: OrderedRecord[] = [];
      for (const entry of entries) {
        const order = entry.key[entry.key.length - 1];
        const id = { namespace: ns, orderingScope: scope, stableKey: entry.value };
        records.push(await this.indexed(tx, id, (row) => row.order === order));
      }
      return { records, nextAfterOrder: records.length === 0 ? 0 : records[records.length - 1]!.order };
    });
  }

  async listRanked(namespace: string, rankingScope: string, after: string, limit: number, options?: CallOptions): Promise<RankedPage> {
    const ns = validateName(namespace);
    const scope = validateName(rankingScope);
    const max = validateOrderedLimit(limit);
    const position: RankedPosition | undefined = after === "" ? undefined : decodeRankedCursor(after, ns, scope);
    return transact(this.engine, "readonly", "ordered.listRanked", options, async (tx) => {
      const prefix = this.layout.rankedAll(ns, scope);
      const upper = position === undefined ? {} : { upper: this.layout.ranked(ns, scope, position.rank, position.stableKey, position.orderingScope), upperOpen: true };
      const entries = await tx.scan<string>({ prefix, ...upper }, { limit: max + 1, reverse: true });
      const records: OrderedRecord[] = [];
      for (const entry of entries.slice(0, max)) {
        const rank = entry.key[prefix.length];
        const orderingScope = entry.key[entry.key.length - 1] as string;
        const id = { namespace: ns, orderingScope, stableKey: entry.value };
        records.push(await this.indexed(tx, id, (row) => !row.deleted && row.rank === rank && row.rankingScope === scope));
      }
      const last = records[records.length - 1];
      const nextCursor =
        entries.length > max && last !== undefined
          ? encodeRankedCursor(ns, scope, { rank: last.rank.value, stableKey: last.id.stableKey, orderingScope: last.id.orderingScope })
          : "";
      return { records, nextCursor };
    });
  }

  async listDue(namespace: string, dueAtOrBefore: number, after: string, limit: number, options?: CallOptions): Promise<DuePage> {
    const ns = validateName(namespace);
    const bound = validateDueBound(dueAtOrBefore);
    const max = validateOrderedLimit(limit);
    const position: DuePosition | undefined = after === "" ? undefined : decodeDueCursor(after, ns, bound);
    return transact(this.engine, "readonly", "ordered.listDue", options, async (tx) => {
      // A position past the bound (only a hand-made token has one) leaves nothing to list.
      if (position !== undefined && position.dueAt > bound) return { records: [], nextCursor: "" };
      const prefix = this.layout.dueAll(ns);
      const lower = position === undefined ? {} : { lower: this.layout.due(ns, position.dueAt, position.stableKey, position.orderingScope), lowerOpen: true };
      // Due times are integers, so "at or before the bound" is "below bound + 1" (exact up to 2^53).
      const entries = await tx.scan<string>({ prefix, ...lower, upper: [...prefix, bound + 1], upperOpen: true }, { limit: max + 1 });
      const records: OrderedRecord[] = [];
      for (const entry of entries.slice(0, max)) {
        const dueAt = entry.key[prefix.length];
        const orderingScope = entry.key[entry.key.length - 1] as string;
        const id = { namespace: ns, orderingScope, stableKey: entry.value };
        records.push(await this.indexed(tx, id, (row) => !row.deleted && row.dueAt === dueAt));
      }
      const last = records[records.length - 1];
      const nextCursor =
        entries.length > max && last !== undefined
          ? encodeDueCursor(ns, bound, { dueAt: last.due.unixMillis, stableKey: last.id.stableKey, orderingScope: last.id.orderingScope })
          : "";
      return { records, nextCursor };
    });
  }
}
