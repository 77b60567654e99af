/**
 * `durableObjectEngine(storage)`: the {@link Engine} over a SQLite-backed
 * Durable Object's `ctx.storage`.
 *
 * Storage: one table, `_isostore_kv(k BLOB PRIMARY KEY, v TEXT, t INTEGER)
 * WITHOUT ROWID`. `k` is the order-preserving byte encoding of the tuple key
 * (`./key-codec.ts`; SQLite compares BLOBs with memcmp, which is the key
 * order), `v` the value as JSON text and `t` its tagging flag
 * (`./value-codec.ts`). A scan is one range query on the primary key (a
 * `keysOnly` scan selects `k` alone: its entries' values are undefined).
 *
 * Transactions. `ctx.storage.sql` is synchronous, but an Engine body is an
 * async function, and `transactionSync` only takes a synchronous callback. So
 * a body runs against a write buffer: `get` and `scan` read SQLite merged
 * with the buffer (a body sees its own writes), `put` / `delete` only touch
 * the buffer, and when the body has resolved the whole buffer is written in
 * ONE `transactionSync` (all or nothing). A body that throws, or a failing
 * call, leaves the buffer unapplied: nothing was written. `deleteRange`
 * reads no row: it records the range as a tombstone that reads skip, and
 * commit deletes it with one range `DELETE` (so deleting large values costs
 * no memory). Bodies run one at a
 * time per engine (an explicit FIFO mutex: the object's input gate only
 * protects storage awaits, so two RPC calls could otherwise interleave
 * bodies), which makes transactions serializable.
 *
 * Durability (why an append is billing-grade): the write of a committed
 * transaction is in the object's SQLite database before `transact`
 * resolves, and the Durable Object output gate holds every outgoing message
 * (the RPC response, a fetch) until that write is confirmed durable. So a
 * caller that saw `accepted` knows the event is stored; if the write fails,
 * the object is reset and the caller sees an error, never a success.
 *
 * Platform limits, and where each is handled:
 * - at most 100 bound parameters per statement: {@link MAX_BOUND_PARAMETERS}
 *   in `applyWrites` (multi-row INSERTs of up to 32 rows x 3 parameters,
 *   DELETEs of up to 64 keys); reads bind at most 3;
 * - statements under 100 KB of SQL text: every value is bound, never
 *   inlined, so the longest statement is the 32-row INSERT (about 600 bytes);
 * - a row (key + value) under 2 MB: {@link MAX_ROW_BYTES}, checked in `put`,
 *   which refuses a larger row with `DurableObjectEngineError`
 *   (`value_too_large`) and dooms the transaction;
 * - 10 GB per object: SQLite reports `SQLITE_FULL`, which `platformError`
 *   turns into `storage_full` (the transaction is not applied);
 * - schema: versioned, idempotent migrations in `_isostore_schema`
 *   ({@link MIGRATIONS}), run when the engine is created.
 */
import {
  checkScanLimit,
  assertValidKey,
  InvalidKeyError,
  type Engine,
  type EngineTransaction,
  type Entry,
  type Key,
  type KeyRange,
  type ScanOptions,
  type TransactionMode,
} from "../../src/engine.js";
import { BTree } from "../../src/ordered/btree.js";
import { DurableObjectEngineError, platformError } from "./errors.js";
import { decodeKey, encodeKey, fromBlob, PREFIX_END, toBlob } from "./key-codec.js";
import { decodeValue, encodeValue, utf8Length, type StoredValue } from "./value-codec.js";

/** The narrow part of `SqlStorage` the engine uses (so it can be checked without workers types). */
export interface SqlHandle {
  exec(query: string, ...bindings: unknown[]): { raw(): IterableIterator<unknown[]>; toArray(): Record<string, unknown>[] };
}

/** The narrow part of `DurableObjectStorage` the engine uses: pass `ctx.storage`. */
export interface DurableObjectStorageHandle {
  readonly sql: SqlHandle;
  transactionSync<T>(closure: () => T): T;
}

/** Platform limit: bound parameters in one statement. */
export const MAX_BOUND_PARAMETERS = 100;
/**
 * The largest row the engine writes (key bytes + value bytes). The platform
 * limit is 2 MB per row; a little room is kept for SQLite's own row overhead.
 */
export const MAX_ROW_BYTES = 2 * 1024 * 1024 - 4096;
/** The schema version this code writes and reads. */
export const SCHEMA_VERSION = 1;

/** Versioned migrations; each is idempotent (`IF NOT EXISTS`) and runs once, in order. */
export const MIGRATIONS: readonly { readonly version: number; readonly statements: readonly string[] }[] = [
  {
    version: 1,
    statements: ["CREATE TABLE IF NOT EXISTS _isostore_kv (k BLOB PRIMARY KEY, v TEXT NOT NULL, t INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID"],
  },
];

const PREFIX = "isostore durable-objects engine: ";
const ROWS_PER_INSERT = Math.floor(MAX_BOUND_PARAMETERS / 3);
const KEYS_PER_DELETE = MAX_BOUND_PARAMETERS;

/** Bring the object's schema to {@link SCHEMA_VERSION}; a no-op when it is there. */
function migrate(storage: DurableObjectStorageHandle): void {
  storage.transactionSync(() => {
    storage.sql.exec("CREATE TABLE IF NOT EXISTS _isostore_schema (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)");
    const rows = storage.sql.exec("SELECT version FROM _isostore_schema WHERE id = 1").toArray();
    const current = rows.length === 0 ? 0 : Number(rows[0]!["version"]);
    if (current > SCHEMA_VERSION) {
      throw new DurableObjectEngineError("schema_too_new", `the object's schema is version ${current}; this isostore reads up to ${SCHEMA_VERSION}`);
    }
    for (const migration of MIGRATIONS) {
      if (migration.version <= current) continue;
      for (const statement of migration.statements) storage.sql.exec(statement);
    }
    if (current < SCHEMA_VERSION) {
      storage.sql.exec("INSERT INTO _isostore_schema (id, version) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET version = excluded.version", SCHEMA_VERSION);
    }
  });
}

/** A buffered write: the new value (with its encoding), or a delete (`stored: null`). */
interface Pending {
  readonly enc: string;
  readonly key: Key;
  readonly value: unknown;
  readonly stored: StoredValue | null;
}

/** The interval of encodings a range covers (undefined bound: open-ended). */
interface Interval {
  lower: string | undefined;
  lowerOpen: boolean;
  upper: string | undefined;
  upperOpen: boolean;
}

function intervalOf(range: KeyRange): Interval {
  const out: Interval = { lower: undefined, lowerOpen: false, upper: undefined, upperOpen: false };
  if (range.prefix && range.prefix.length > 0) {
    assertValidKey(range.prefix);
    out.lower = encodeKey(range.prefix);
    out.upper = out.lower + PREFIX_END;
    out.upperOpen = true;
  }
  if (range.lower) {
    assertValidKey(range.lower);
    const enc = encodeKey(range.lower);
    const open = range.lowerOpen === true;
    if (out.lower === undefined || enc > out.lower || (enc === out.lower && open)) {
      out.lower = enc;
      out.lowerOpen = open;
    }
  }
  if (range.upper) {
    assertValidKey(range.upper);
    const enc = encodeKey(range.upper);
    const open = range.upperOpen === true;
    if (out.upper === undefined || enc < out.upper || (enc === out.upper && open)) {
      out.upper = enc;
      out.upperOpen = open;
    }
  }
  return out;
}

/**
 * A half-open interval of encodings, `lo <= enc < hi` (`hi` undefined:
 * unbounded). Every {@link Interval} has one: in byte-string order the
 * successor of `enc` is `enc + "\x00"`, so an open lower bound and a closed
 * upper bound both move to it.
 */
interface Span {
  readonly lo: string;
  readonly hi: string | undefined;
}

function spanOf(interval: Interval): Span {
  const lo = interval.lower === undefined ? "" : interval.lowerOpen ? interval.lower + "\x00" : interval.lower;
  const hi = interval.upper === undefined ? undefined : interval.upperOpen ? interval.upper : interval.upper + "\x00";
  return { lo, hi };
}

/** The WHERE clause (with its leading space; empty for every key) and the bindings of `span`: at most 2. */
function spanWhere(span: Span): { where: string; bindings: unknown[] } {
  const where: string[] = [];
  const bindings: unknown[] = [];
  if (span.lo !== "") {
    where.push("k >= ?");
    bindings.push(toBlob(span.lo));
  }
  if (span.hi !== undefined) {
    where.push("k < ?");
    bindings.push(toBlob(span.hi));
  }
  return { where: where.length > 0 ? ` WHERE ${where.join(" AND ")}` : "", bindings };
}

/** `a < b` where `b` undefined is above everything. */
function below(a: string, b: string | undefined): boolean {
  return b === undefined || a < b;
}

/** The spans of `span` that no tombstone covers, in ascending order (`tombstones` sorted and disjoint). */
function gaps(span: Span, tombstones: readonly Span[]): Span[] {
  const out: Span[] = [];
  let cur = span.lo;
  for (const t of tombstones) {
    if (!below(cur, span.hi)) break;
    if (!below(cur, t.hi)) continue; // the tombstone ends before cur
    if (!below(t.lo, span.hi)) break; // it starts after the span
    if (cur < t.lo) out.push({ lo: cur, hi: t.lo });
    if (t.hi === undefined) return out;
    cur = t.hi;
  }
  if (below(cur, span.hi)) out.push({ lo: cur, hi: span.hi });
  return out;
}

class DurableObjectTransaction implements EngineTransaction {
  live = true;
  failed = false;
  failure: unknown = undefined;
  /** The write buffer, by key encoding; the last write of a key wins. */
  readonly writes = new Map<string, Pending>();
  /**
   * The same buffer in key order, so a scan takes the buffered writes of its
   * interval in O(log n + k) instead of filtering and sorting the whole
   * buffer (quadratic over a transaction that mixes many writes and scans,
   * e.g. a large prune).
   */
  private readonly ordered = new BTree<Pending>();
  /**
   * The spans `deleteRange` cleared, sorted and disjoint: the stored rows in
   * them are gone for this body's reads, and commit deletes them (one
   * `DELETE ... WHERE k >= ? AND k < ?` each) before it writes the buffer.
   * The buffer holds no write inside a tombstone made before it (deleteRange
   * drops them), so a write there came later and wins.
   */
  tombstones: Span[] = [];

  constructor(
    private readonly sql: SqlHandle,
    private readonly readonly: boolean,
  ) {}

  private fail(error: unknown): unknown {
    if (!this.failed) {
      this.failed = true;
      this.failure = error;
    }
    return error;
  }

  private checkKey(key: Key): string {
    try {
      assertValidKey(key);
      return encodeKey(key);
    } catch (error) {
      throw this.fail(error);
    }
  }

  get<V = unknown>(key: Key): Promise<V | undefined> {
    if (!this.live) throw dead();
    const enc = this.checkKey(key);
    const pending = this.writes.get(enc);
    if (pending !== undefined) return Promise.resolve((pending.stored === null ? undefined : pending.value) as V | undefined);
    if (this.tombstones.length > 0 && this.cleared(enc)) return Promise.resolve(undefined);
    try {
      for (const row of this.sql.exec("SELECT v, t FROM _isostore_kv WHERE k = ?", toBlob(enc)).raw()) {
        return Promise.resolve(decodeValue(row[0] as string, row[1] as number) as V);
      }
      return Promise.resolve(undefined);
    } catch (error) {
      throw this.fail(platformError(error, "get"));
    }
  }

  put(key: Key, value: unknown): void {
    if (!this.live) throw dead();
    if (this.readonly) throw this.fail(new TypeError(`${PREFIX}put in a readonly transaction`));
    const enc = this.checkKey(key);
    let stored: StoredValue;
    try {
      stored = encodeValue(value);
    } catch (error) {
      throw this.fail(error);
    }
    // Limit: a row under 2 MB (see MAX_ROW_BYTES). Cheap bound first, exact size only near it.
    if (enc.length + stored.text.length * 3 > MAX_ROW_BYTES) {
      const size = enc.length + utf8Length(stored.text);
      if (size > MAX_ROW_BYTES) {
        throw this.fail(new DurableObjectEngineError("value_too_large", `a row of ${size} bytes is over the ${MAX_ROW_BYTES}-byte limit per row`));
      }
    }
    this.buffer({ enc, key: key.slice(), value, stored });
  }

  private buffer(pending: Pending): void {
    this.writes.set(pending.enc, pending);
    this.ordered.set(pending);
  }

  delete(key: Key): void {
    if (!this.live) throw dead();
    if (this.readonly) throw this.fail(new TypeError(`${PREFIX}delete in a readonly transaction`));
    const enc = this.checkKey(key);
    this.buffer({ enc, key, value: undefined, stored: null });
  }

  /**
   * Delete every key of `range` without reading a row: drop the buffered
   * writes inside it and record its span as a tombstone (see
   * {@link tombstones}); commit deletes the stored rows with one statement.
   */
  deleteRange(range: KeyRange): void {
    if (!this.live) throw dead();
    if (this.readonly) throw this.fail(new TypeError(`${PREFIX}deleteRange in a readonly transaction`));
    let span: Span;
    try {
      span = spanOf(intervalOf(range));
    } catch (error) {
      throw this.fail(error);
    }
    if (!below(span.lo, span.hi)) return;
    const dropped: string[] = [];
    this.ordered.scan(span.lo, false, span.hi, true, false, Infinity, (pending) => dropped.push(pending.enc));
    for (const enc of dropped) {
      this.writes.delete(enc);
      this.ordered.delete(enc);
    }
    // Merge it into the sorted, disjoint list (touching spans merge too).
    let lo = span.lo;
    let hi = span.hi;
    const before: Span[] = [];
    const after: Span[] = [];
    for (const t of this.tombstones) {
      if (t.hi !== undefined && t.hi < lo) before.push(t);
      else if (hi !== undefined && t.lo > hi) after.push(t);
      else {
        if (t.lo < lo) lo = t.lo;
        if (hi !== undefined && (t.hi === undefined || t.hi > hi)) hi = t.hi;
      }
    }
    this.tombstones = [...before, { lo, hi }, ...after];
  }

  /** Whether a tombstone covers `enc` (binary search). */
  private cleared(enc: string): boolean {
    const list = this.tombstones;
    let a = 0;
    let b = list.length;
    while (a < b) {
      const m = (a + b) >>> 1;
      if (list[m]!.lo <= enc) a = m + 1;
      else b = m;
    }
    return a > 0 && below(enc, list[a - 1]!.hi);
  }

  /** The stored rows `[k, v, t]` (`[k]` when `keysOnly`) of `spans` (in scan order), each span one range query run only when the caller reads on. */
  private *rows(spans: readonly Span[], reverse: boolean, limit: number | undefined, keysOnly: boolean): Generator<unknown[]> {
    for (const span of spans) {
      const { where, bindings } = spanWhere(span);
      let query = `SELECT ${keysOnly ? "k" : "k, v, t"} FROM _isostore_kv${where} ORDER BY k${reverse ? " DESC" : ""}`;
      if (limit !== undefined) {
        query += " LIMIT ?";
        bindings.push(limit);
      }
      yield* this.sql.exec(query, ...bindings).raw();
    }
  }

  scan<V = unknown>(range: KeyRange, options?: ScanOptions): Promise<Entry<V>[]> {
    if (!this.live) throw dead();
    let limit: number;
    let interval: Interval;
    let reverse: boolean;
    let keysOnly: boolean;
    try {
      limit = checkScanLimit(options?.limit, PREFIX);
      reverse = options?.reverse === true;
      keysOnly = options?.keysOnly === true;
      interval = intervalOf(range);
    } catch (error) {
      throw this.fail(error);
    }
    // The buffered writes inside the interval, in scan order; deletes among them
    // may hide stored rows, so ask SQLite for that many more.
    const overlay: Pending[] = [];
    let deletes = 0;
    if (this.writes.size > 0) {
      this.ordered.scan(interval.lower, interval.lowerOpen, interval.upper, interval.upperOpen, reverse, Infinity, (pending) => {
        overlay.push(pending);
        if (pending.stored === null) deletes++;
      });
    }
    // The spans of the interval no tombstone covers, each one range query in scan order.
    const spans = this.tombstones.length === 0 ? [spanOf(interval)] : gaps(spanOf(interval), this.tombstones);
    if (reverse) spans.reverse();
    // SQLite binds a number past 2^53 as REAL, which LIMIT refuses: such a limit reads unbounded (the loop stops at `limit`).
    const sqlLimit = limit + deletes <= Number.MAX_SAFE_INTEGER ? limit + deletes : undefined;
    const out: Entry<V>[] = [];
    try {
      let o = 0;
      const take = (pending: Pending): void => {
        if (pending.stored !== null) out.push({ key: pending.key, value: (keysOnly ? undefined : pending.value) as V });
      };
      for (const row of this.rows(spans, reverse, sqlLimit, keysOnly)) {
        if (out.length >= limit) break;
        const enc = fromBlob(row[0] as ArrayBuffer);
        // Overlay entries that come first in scan order.
        while (o < overlay.length && out.length < limit && (reverse ? overlay[o]!.enc > enc : overlay[o]!.enc < enc)) take(overlay[o++]!);
        if (out.length >= limit) break;
        if (o < overlay.length && overlay[o]!.enc === enc) {
          take(overlay[o++]!); // the buffered write replaces (or deletes) the stored row
          continue;
        }
        out.push({ key: decodeKey(enc), value: (keysOnly ? undefined : decodeValue(row[1] as string, row[2] as number)) as V });
      }
      while (o < overlay.length && out.length < limit) take(overlay[o++]!);
    } catch (error) {
      throw this.fail(platformError(error, "scan"));
    }
    return Promise.resolve(out);
  }
}

function dead(): Error {
  return new Error(`${PREFIX}this transaction has already finished; its handle cannot be used any more`);
}

/**
 * Split `count` rows into chunks of at most `max`, each a power of two: the
 * statements then come in a handful of shapes (1, 2, 4, ... rows), which the
 * platform's prepared-statement cache keeps, instead of one shape per size.
 */
function chunkSizes(count: number, max: number): number[] {
  let top = 1;
  while (top * 2 <= max) top *= 2;
  const sizes: number[] = [];
  for (let left = count, size = top; left > 0; ) {
    while (size > left) size /= 2;
    sizes.push(size);
    left -= size;
  }
  return sizes;
}

/**
 * Write a transaction's buffer: one `transactionSync`, chunked under the
 * bound-parameter limit. The tombstones' range DELETEs run first: every
 * buffered write inside one came after it (see `tombstones`).
 */
function applyWrites(storage: DurableObjectStorageHandle, writes: Map<string, Pending>, tombstones: readonly Span[]): void {
  const puts: Pending[] = [];
  const deletes: Pending[] = [];
  for (const pending of writes.values()) (pending.stored === null ? deletes : puts).push(pending);
  storage.transactionSync(() => {
    for (const span of tombstones) {
      const { where, bindings } = spanWhere(span);
      storage.sql.exec(`DELETE FROM _isostore_kv${where}`, ...bindings);
    }
    // Limit: at most 100 bound parameters per statement (64 keys per DELETE, 32 rows x 3 per INSERT).
    let i = 0;
    for (const size of chunkSizes(deletes.length, KEYS_PER_DELETE)) {
      const chunk = deletes.slice(i, (i += size));
      storage.sql.exec(`DELETE FROM _isostore_kv WHERE k IN (${chunk.map(() => "?").join(", ")})`, ...chunk.map((pending) => toBlob(pending.enc)));
    }
    i = 0;
    for (const size of chunkSizes(puts.length, ROWS_PER_INSERT)) {
      const chunk = puts.slice(i, (i += size));
      const bindings: unknown[] = [];
      for (const pending of chunk) bindings.push(toBlob(pending.enc), pending.stored!.text, pending.stored!.tagged);
      storage.sql.exec(`INSERT OR REPLACE INTO _isostore_kv (k, v, t) VALUES ${chunk.map(() => "(?, ?, ?)").join(", ")}`, ...bindings);
    }
  });
}

class DurableObjectEngine implements Engine {
  readonly durable = true;
  /** Reads are synchronous SQLite calls inside the object: no round trip to save by reading ahead. */
  readonly localReads = true;
  private closed = false;
  /** The FIFO mutex: settles when the last queued transaction settled. */
  private tail: Promise<unknown> = Promise.resolve();

  constructor(private readonly storage: DurableObjectStorageHandle) {
    try {
      migrate(storage);
    } catch (error) {
      throw platformError(error, "schema migration");
    }
  }

  transact<T>(mode: TransactionMode, fn: (tx: EngineTransaction) => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new DurableObjectEngineError("closed", "the engine is closed"));
    if (mode !== "readonly" && mode !== "readwrite") return Promise.reject(new TypeError(`${PREFIX}unknown transaction mode ${String(mode)}`));
    if (typeof fn !== "function") return Promise.reject(new TypeError(`${PREFIX}transact needs a function`));
    const run = this.tail.then(() => this.run(mode, fn));
    this.tail = run.then(ignore, ignore);
    return run;
  }

  private async run<T>(mode: TransactionMode, fn: (tx: EngineTransaction) => Promise<T>): Promise<T> {
    const tx = new DurableObjectTransaction(this.storage.sql, mode === "readonly");
    let result: T;
    try {
      result = await fn(tx);
    } finally {
      tx.live = false;
    }
    if (tx.failed) throw tx.failure;
    if (tx.writes.size > 0 || tx.tombstones.length > 0) {
      try {
        applyWrites(this.storage, tx.writes, tx.tombstones);
      } catch (error) {
        throw platformError(error, "commit");
      }
    }
    return result;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.tail;
  }
}

function ignore(): void {}

/**
 * Create an {@link Engine} over a SQLite-backed Durable Object's storage
 * (declare the class with `new_sqlite_classes`). Creating it runs the schema
 * migrations (idempotent), so create it once per object, in the constructor.
 * It is durable: a committed transaction survives eviction and restarts.
 *
 * @example
 * ```ts
 * import { DurableObject } from "cloudflare:workers";
 * import { createJournal, type UsageEvent } from "isostore";
 * import { durableObjectEngine } from "isostore/durable-objects";
 *
 * export class Usage extends DurableObject {
 *   private readonly journal = createJournal(durableObjectEngine(this.ctx.storage), { name: "usage" });
 *   async record(event: UsageEvent) {
 *     return this.journal.append(event); // resolves once the write is durable
 *   }
 * }
 * ```
 */
export function durableObjectEngine(storage: DurableObjectStorageHandle): Engine {
  return new DurableObjectEngine(storage);
}

export { InvalidKeyError };
