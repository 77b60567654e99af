/**
 * Pages: how the IndexedDB engine packs many engine rows into one IndexedDB
 * record, and the in-memory bookkeeping around them (pure code, no IndexedDB).
 *
 * Why: in Chromium every IndexedDB request costs about 75-200 us whatever it
 * carries (BENCHMARKS.md, "What one IndexedDB request costs"), so an engine
 * that stores one row per record pays that for every row a transaction reads or
 * writes. A page holds a sorted run of rows; a transaction that touches 500
 * rows of a few neighbourhoods writes a handful of pages.
 *
 * Layout (schema v2, see `./schema.ts`): the `pages` store maps a page's low
 * fence `lo` (a key encoding from `src/ordered/key-encoding.ts`, compared as a
 * string exactly as IndexedDB compares string keys) to a {@link PageRecord}
 * holding its high fence and its rows. The pages partition the key space: the
 * first page's low fence is `""` (below every encoding), each page's high
 * fence is the next page's low fence, and the last page's is `null`. A row
 * with encoding `e` lives in the page with `lo <= e < hi`. No page record at
 * all means no rows at all.
 *
 * Pages are immutable once another party may hold them (the engine's cache, a
 * transaction's view): a transaction that changes a page changes a
 * {@link Page.copy}.
 */
import { lowerBound, upperBound } from "../../src/ordered/btree.js";
import { decodeKey } from "../../src/ordered/key-encoding.js";
import type { Key } from "../../src/engine.js";
import { damaged, uncloneable } from "./errors.js";
import { type ChangeRecord, CommittedLog, isCheckpoint, type LogRecord, type Moment, NEVER, Witness } from "./log.js";

/** A page as stored under its low fence. */
export interface PageRecord {
  /** High fence: the next page's low fence, or `null` for the last page. */
  readonly h: string | null;
  /** Row key encodings, ascending. */
  readonly k: readonly string[];
  /** Row values, parallel to `k`. */
  readonly v: readonly unknown[];
  /** Estimated stored size of each value in bytes ({@link sizeOf}), parallel to `k`. */
  readonly s: readonly number[];
}

/** How large a page may grow before it splits. */
export interface PageLimits {
  /** Most rows on one page. */
  readonly maxRows: number;
  /** Most estimated bytes of keys and values on one page (a single larger row gets a page of its own). */
  readonly maxBytes: number;
}

/**
 * The default limits: measured in Chromium, a put of a 2 KB page costs about
 * what a put of a 30-byte row does, and 16 KB about 1.5x that, so pages hold
 * up to 128 index rows or a few dozen event rows.
 */
export const DEFAULT_PAGE_LIMITS: PageLimits = { maxRows: 128, maxBytes: 16 * 1024 };

/** Bytes a key costs on a page beside its value (the string and its slot). */
function keyBytes(enc: string): number {
  return enc.length + 8;
}

/** A page in memory. */
export class Page {
  /** Decoded keys, filled lazily (a page is immutable once shared, so this is stable). */
  private decoded: (Key | undefined)[] | undefined;

  constructor(
    /** Low fence (the IndexedDB key of its record). */
    readonly lo: string,
    /** High fence; `null` for the last page. */
    public hi: string | null,
    public keys: string[],
    public values: unknown[],
    public sizes: number[],
    /** Sum of {@link keyBytes} and `sizes` over the rows. */
    public bytes: number,
  ) {}

  /** The page of a stored record. */
  static fromRecord(lo: string, record: PageRecord): Page {
    let bytes = 0;
    for (let i = 0; i < record.k.length; i++) bytes += keyBytes(record.k[i]!) + record.s[i]!;
    return new Page(lo, record.h, record.k as string[], record.v as unknown[], record.s as number[], bytes);
  }

  /** An empty page spanning `[lo, hi)`. */
  static empty(lo: string, hi: string | null): Page {
    return new Page(lo, hi, [], [], [], 0);
  }

  toRecord(): PageRecord {
    return { h: this.hi, k: this.keys, v: this.values, s: this.sizes };
  }

  /** Whether the row `enc` belongs on this page. */
  covers(enc: string): boolean {
    return enc >= this.lo && (this.hi === null || enc < this.hi);
  }

  /** A private copy to change (the row arrays are copied, the values shared). */
  copy(): Page {
    return new Page(this.lo, this.hi, this.keys.slice(), this.values.slice(), this.sizes.slice(), this.bytes);
  }

  /** The decoded key of row `i`. */
  keyAt(i: number): Key {
    const decoded = (this.decoded ??= new Array<Key | undefined>(this.keys.length));
    return (decoded[i] ??= decodeKey(this.keys[i]!));
  }

  /** Set row `enc` (insert or replace). Only on a private copy. */
  set(enc: string, value: unknown, size: number): void {
    const i = lowerBound(this.keys, enc);
    if (this.keys[i] === enc) {
      this.bytes += size - this.sizes[i]!;
      this.values[i] = value;
      this.sizes[i] = size;
    } else {
      this.keys.splice(i, 0, enc);
      this.values.splice(i, 0, value);
      this.sizes.splice(i, 0, size);
      this.bytes += keyBytes(enc) + size;
    }
    this.decoded = undefined;
  }

  /** Remove row `enc` if present. Only on a private copy. */
  remove(enc: string): void {
    const i = lowerBound(this.keys, enc);
    if (this.keys[i] !== enc) return;
    this.removeRows(i, i + 1);
  }

  /** Remove rows `[from, to)`. Only on a private copy. */
  removeRows(from: number, to: number): void {
    if (to <= from) return;
    for (let i = from; i < to; i++) this.bytes -= keyBytes(this.keys[i]!) + this.sizes[i]!;
    this.keys.splice(from, to - from);
    this.values.splice(from, to - from);
    this.sizes.splice(from, to - from);
    this.decoded = undefined;
  }

  /** Whether the page is small enough to be folded into its successor's rows. */
  underfull(limits: PageLimits): boolean {
    return isUnderfull(this.keys.length, this.bytes, limits);
  }
}

/**
 * Cut the rows of one stretch of the key space `[lo, hi)` into pages within
 * `limits`: greedily from the left (appends at the right end leave full pages
 * behind them), then, when the last page would be underfull, the last two
 * share their rows evenly. The first page keeps `lo`, the others take their
 * first row's key as low fence, the last keeps `hi`. No rows: one empty page.
 */
export function cutPages(lo: string, hi: string | null, keys: string[], values: unknown[], sizes: number[], limits: PageLimits): Page[] {
  const rowBytes = keys.map((key, i) => keyBytes(key) + sizes[i]!);
  const starts: number[] = [0];
  // Rows and bytes of the page being filled (after the loop: the last page).
  let rows = 0;
  let bytes = 0;
  for (let i = 0; i < keys.length; i++) {
    if (rows > 0 && (rows + 1 > limits.maxRows || bytes + rowBytes[i]! > limits.maxBytes)) {
      starts.push(i);
      rows = 0;
      bytes = 0;
    }
    rows++;
    bytes += rowBytes[i]!;
  }
  const n = starts.length;
  if (n >= 2 && isUnderfull(rows, bytes, limits)) {
    // Share the last two pages' rows by count, unless that would overfill one by bytes.
    const from = starts[n - 2]!;
    const mid = from + Math.ceil((keys.length - from) / 2);
    const left = sum(rowBytes, from, mid);
    const right = sum(rowBytes, mid, keys.length);
    if (left <= limits.maxBytes && right <= limits.maxBytes) starts[n - 1] = mid;
  }
  const pages: Page[] = [];
  for (let p = 0; p < n; p++) {
    const from = starts[p]!;
    const to = p + 1 < n ? starts[p + 1]! : keys.length;
    const pageLo = p === 0 ? lo : keys[from]!;
    const pageHi = p + 1 < n ? keys[to]! : hi;
    pages.push(new Page(pageLo, pageHi, keys.slice(from, to), values.slice(from, to), sizes.slice(from, to), sum(rowBytes, from, to)));
  }
  return pages;
}

/** Sum of `values[from..to)`. */
function sum(values: readonly number[], from: number, to: number): number {
  let total = 0;
  for (let i = from; i < to; i++) total += values[i]!;
  return total;
}

/**
 * Whether a page of `rows` rows and `bytes` bytes is small enough to be
 * folded into its neighbour: under a quarter of a page both ways.
 */
export function isUnderfull(rows: number, bytes: number, limits: PageLimits): boolean {
  return rows < limits.maxRows / 4 && bytes < limits.maxBytes / 4;
}

/**
 * Builds pages from rows arriving in ascending key order (a migration copying
 * a whole store): `add` each row, then `finish`; `emit` gets each page with its
 * final high fence.
 */
export class PageBuilder {
  private lo = "";
  private keys: string[] = [];
  private values: unknown[] = [];
  private sizes: number[] = [];
  private bytes = 0;
  private any = false;

  constructor(
    private readonly limits: PageLimits,
    private readonly emit: (page: Page) => void,
  ) {}

  add(enc: string, value: unknown, size: number): void {
    const b = keyBytes(enc) + size;
    if (this.keys.length > 0 && (this.keys.length + 1 > this.limits.maxRows || this.bytes + b > this.limits.maxBytes)) {
      this.flush(enc);
      this.lo = enc;
    }
    this.keys.push(enc);
    this.values.push(value);
    this.sizes.push(size);
    this.bytes += b;
    this.any = true;
  }

  /** Emit the last page (nothing at all when no row was added: no rows, no pages). */
  finish(): void {
    if (this.any) this.flush(null);
  }

  private flush(hi: string | null): void {
    this.emit(new Page(this.lo, hi, this.keys, this.values, this.sizes, this.bytes));
    this.keys = [];
    this.values = [];
    this.sizes = [];
    this.bytes = 0;
  }
}

/** Deepest nesting {@link sizeOf} estimates; below it a value counts as this many bytes (and is only checked). */
const SIZE_DEPTH = 32;
const DEEP_VALUE_BYTES = 64;

/**
 * Built-in objects structured clone refuses (they hold internal state it
 * cannot copy), by their `Object.prototype.toString` tag, which also names
 * them when they come from another realm (an iframe). The iterators of the
 * built-in collections and strings (`Map Iterator`, `Array Iterator`...)
 * end in ` Iterator`.
 */
const UNCLONEABLE_TAGS: ReadonlySet<string> = new Set(["WeakMap", "WeakSet", "WeakRef", "FinalizationRegistry", "Promise", "Generator", "AsyncGenerator", "Arguments", "Iterator Helper"]);

/** The built-in kind structured clone refuses that `value` (an object) is, or undefined when it may be cloned. */
function uncloneableKind(value: object): string | undefined {
  // Plain objects and arrays of this realm, the common case, are none of those (and cost no tag lookup).
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto === Object.prototype || proto === Array.prototype || proto === null) return undefined;
  const tag = Object.prototype.toString.call(value).slice(8, -1);
  return UNCLONEABLE_TAGS.has(tag) || tag.endsWith(" Iterator") ? tag : undefined;
}

/**
 * An estimate of the bytes `value` takes stored (for page budgets, not an
 * exact figure), refusing with a `DataCloneError` what structured clone would
 * refuse in any case (functions and symbols, and the built-in objects of
 * {@link UNCLONEABLE_TAGS}: weak collections, promises, generators, iterators,
 * `arguments`), at any depth, so that a bad value fails at its `put`, not at
 * the commit. Class instances pass, as structured clone copies them: as plain
 * objects, their own enumerable properties only. (Platform objects that are
 * not serializable, such as DOM nodes, are not recognised here; IndexedDB
 * refuses them at the commit, and the engine reports that as the same
 * `DataCloneError`, see `flush` in `./paged-transaction.ts`.)
 */
export function sizeOf(value: unknown, depth = 0): number {
  switch (typeof value) {
    case "string":
      return value.length + 4;
    case "number":
      return 9;
    case "boolean":
    case "undefined":
      return 2;
    case "bigint":
      return 16;
    case "function":
    case "symbol":
      throw uncloneable(`a ${typeof value}`);
    default:
      break;
  }
  if (value === null) return 2;
  if (depth >= SIZE_DEPTH) {
    checkCloneable(value);
    return DEEP_VALUE_BYTES;
  }
  if (ArrayBuffer.isView(value)) return value.byteLength + 16;
  if (value instanceof ArrayBuffer) return value.byteLength + 16;
  if (value instanceof Date) return 9;
  const kind = uncloneableKind(value as object);
  if (kind !== undefined) throw uncloneable(`a ${kind}`);
  let total = 8;
  if (Array.isArray(value)) {
    const items = value as unknown[];
    for (const item of items) total += sizeOf(item, depth + 1);
    // Structured clone copies an array's other own properties too (rare: checked only when there are any).
    const keys = Object.keys(items);
    if (keys.length !== items.length) for (const key of keys) if (!isIndex(key, items.length)) total += key.length + 4 + sizeOf((items as unknown as Record<string, unknown>)[key], depth + 1);
    return total;
  }
  if (value instanceof Map) {
    for (const [k, v] of value as Map<unknown, unknown>) total += sizeOf(k, depth + 1) + sizeOf(v, depth + 1);
    return total;
  }
  if (value instanceof Set) {
    for (const item of value as Set<unknown>) total += sizeOf(item, depth + 1);
    return total;
  }
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) total += key.length + 4 + sizeOf(record[key], depth + 1);
  return total;
}

/** Whether `key` (an own key of an array of `length` items) is one of its indexes. */
function isIndex(key: string, length: number): boolean {
  const n = Number(key);
  return Number.isInteger(n) && n >= 0 && n < length && String(n) === key;
}

/**
 * Refuse, as {@link sizeOf} does, what structured clone would refuse in
 * `value`, however deep: iteratively (no stack to overflow) and visiting each
 * object once (a value may hold cycles, which structured clone keeps).
 */
function checkCloneable(value: unknown): void {
  const seen = new Set<object>();
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item === "function" || typeof item === "symbol") throw uncloneable(`a ${typeof item}`);
    if (typeof item !== "object" || item === null || seen.has(item)) continue;
    seen.add(item);
    if (ArrayBuffer.isView(item) || item instanceof ArrayBuffer || item instanceof Date) continue;
    const kind = uncloneableKind(item);
    if (kind !== undefined) throw uncloneable(`a ${kind}`);
    if (item instanceof Map) {
      for (const [k, v] of item as Map<unknown, unknown>) stack.push(k, v);
    } else if (item instanceof Set) {
      for (const member of item as Set<unknown>) stack.push(member);
    } else {
      // Arrays too: their indexes are own keys.
      const record = item as Record<string, unknown>;
      for (const key of Object.keys(record)) stack.push(record[key]);
    }
  }
}

/**
 * A set of pages ordered by low fence, answering "which of these pages holds
 * encoding `e`" by binary search. The pages need not be contiguous (a cache
 * holds some pages of the partition); a page is found only when it covers `e`.
 */
export class PageSet {
  protected los: string[] = [];
  protected readonly byLo = new Map<string, Page>();

  get size(): number {
    return this.byLo.size;
  }

  /** The page whose interval holds `enc`, if present. */
  containing(enc: string): Page | undefined {
    const i = upperBound(this.los, enc) - 1;
    if (i < 0) return undefined;
    const page = this.byLo.get(this.los[i]!)!;
    return page.hi === null || enc < page.hi ? page : undefined;
  }

  /** The page with low fence `lo`, if present. */
  at(lo: string): Page | undefined {
    return this.byLo.get(lo);
  }

  /** The page whose high fence is `lo` (the predecessor of the page at `lo`), if present. */
  before(lo: string): Page | undefined {
    const i = lowerBound(this.los, lo) - 1;
    if (i < 0) return undefined;
    const page = this.byLo.get(this.los[i]!)!;
    return page.hi === lo ? page : undefined;
  }

  /** Add `page`, replacing the page with the same low fence. */
  add(page: Page): void {
    if (!this.byLo.has(page.lo)) {
      const i = lowerBound(this.los, page.lo);
      this.los.splice(i, 0, page.lo);
    }
    this.byLo.set(page.lo, page);
  }

  /** Remove the page at `lo`, if present. */
  remove(lo: string): void {
    if (!this.byLo.delete(lo)) return;
    const i = lowerBound(this.los, lo);
    this.los.splice(i, 1);
  }

  clear(): void {
    this.los = [];
    this.byLo.clear();
  }

  /** Every page, ascending. */
  all(): Page[] {
    return this.los.map((lo) => this.byLo.get(lo)!);
  }
}

/** Estimated bytes a cached page takes in memory beyond its rows' estimates (the page object, its arrays). */
export const CACHED_PAGE_OVERHEAD = 64;

/** Estimated bytes `page` takes in the cache: its rows ({@link Page.bytes}, by {@link sizeOf}) and its overhead. */
export function cachedBytes(page: Page): number {
  return page.bytes + CACHED_PAGE_OVERHEAD;
}

/**
 * The engine's cache of the committed state at one version of the database
 * (the counter of `./log.ts`): some of the pages, and the whole committed log
 * after them. A transaction that reads a newer version brings it up to date
 * ({@link catchUp}), so a write from another tab or worker is never read
 * stale. Bounded twice: beyond `capacity` pages, or beyond `maxBytes`
 * estimated bytes ({@link cachedBytes}: a row larger than a page gets a page
 * of its own, so the page count alone bounds nothing), it drops the pages
 * used longest ago; a page larger than `maxBytes` on its own is not kept at
 * all. (The log is bounded by its own limits.)
 */
export class PageCache extends PageSet {
  /** The version the cached pages and log belong to; `null` before the first transaction. */
  version: number | null = null;
  /** The change records after the pages, at {@link version}. Replaced (not emptied) on a reset. */
  log = new CommittedLog();
  /**
   * When {@link version} was last confirmed to be the database's (both of
   * the engine's clocks, see `trustHolds` in `./log.ts`): by reading it, or
   * by a commit made on the one before. {@link NEVER} when unconfirmed (a
   * reset, a stale transaction).
   */
  confirmedAt: Moment = NEVER;
  /** The time this engine knows to have passed since commits it read or made (see {@link Witness}). Forgotten on a reset. */
  witness = new Witness();
  /** Estimated bytes of the cached pages ({@link cachedBytes}, as each was added). */
  private held = 0;
  /** What each cached page was counted as when added (pages are immutable once shared; this keeps the sum exact anyway). */
  private readonly weights = new Map<string, number>();

  constructor(
    private readonly capacity: number,
    private readonly maxBytes: number = Infinity,
  ) {
    super();
  }

  /** Estimated bytes of the cached pages (at most the bound given to the constructor). */
  get bytes(): number {
    return this.held;
  }

  /** Forget everything, and the version too. */
  reset(): void {
    this.clear();
    this.log = new CommittedLog();
    this.version = null;
    this.confirmedAt = NEVER;
    this.witness = new Witness();
  }

  override clear(): void {
    super.clear();
    this.weights.clear();
    this.held = 0;
  }

  override remove(lo: string): void {
    const weight = this.weights.get(lo);
    if (weight === undefined) return;
    this.weights.delete(lo);
    this.held -= weight;
    super.remove(lo);
  }

  /**
   * Move to `version`, given the log records after `from` (every record when
   * `from` is `null`: the cache knows no version). Change records alone apply
   * to the log and leave the cached pages current; a checkpoint among them
   * (or no known version) means the pages changed: they are forgotten, and
   * the log is rebuilt from the change records after the last checkpoint.
   */
  catchUp(from: number | null, version: number, records: readonly { readonly version: number; readonly record: LogRecord }[]): void {
    let start = 0;
    records.forEach((entry, i) => {
      if (isCheckpoint(entry.record)) start = i + 1;
    });
    if (from === null || start > 0) {
      this.clear();
      this.log = new CommittedLog();
    } else if (records.length !== version - from || records.some((entry, i) => entry.version !== from + 1 + i)) {
      throw damaged(`the log should hold versions ${from + 1} to ${version}, it holds ${records.length} records there`);
    }
    for (let i = start; i < records.length; i++) this.log.apply(records[i]!.record as ChangeRecord);
    this.version = version;
  }

  override containing(enc: string): Page | undefined {
    const page = super.containing(enc);
    if (page !== undefined) this.touch(page);
    return page;
  }

  override at(lo: string): Page | undefined {
    const page = super.at(lo);
    if (page !== undefined) this.touch(page);
    return page;
  }

  override add(page: Page): void {
    // The page replaces any cached one at its low fence (an older version of it).
    this.remove(page.lo);
    const weight = cachedBytes(page);
    if (weight > this.maxBytes) return;
    super.add(page);
    this.weights.set(page.lo, weight);
    this.held += weight;
    while (this.byLo.size > this.capacity || this.held > this.maxBytes) {
      const oldest = this.byLo.keys().next().value as string;
      this.remove(oldest);
    }
  }

  /**
   * A committed checkpoint's pages: `puts` replace, `deletes` go, the log is
   * empty, and the cache moves from version `base` to `base + 1`. When the
   * cache is not at `base` (another transaction already moved it), it is
   * emptied instead.
   */
  install(base: number, puts: readonly Page[], deletes: readonly string[]): void {
    if (this.version !== base) {
      this.reset();
      return;
    }
    for (const lo of deletes) this.remove(lo);
    for (const page of puts) this.add(page);
    this.log = new CommittedLog();
    this.version = base + 1;
  }

  /** A committed change record (`keys`: its rows' keys): as {@link install}, for the log. */
  installChange(base: number, record: ChangeRecord, keys: readonly Key[]): void {
    if (this.version !== base) {
      this.reset();
      return;
    }
    this.log.apply(record, keys);
    this.version = base + 1;
  }

  /** Mark `page` as just used (Map order is the eviction order). */
  private touch(page: Page): void {
    this.byLo.delete(page.lo);
    this.byLo.set(page.lo, page);
  }
}
