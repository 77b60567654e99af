/// <reference lib="dom" />
/**
 * One engine transaction over the paged layout (`./pages.ts`) and the
 * committed log (`./log.ts`), inside one IndexedDB transaction over the
 * `pages` and `log` stores.
 *
 * How a transaction runs:
 * 1. Its first request reads the database version (the newest key of `log`).
 *    The engine's cache (pages and log) is for one version: when another tab,
 *    worker or engine object wrote since, the transaction reads the log
 *    records after the cached version and brings the cache up to date
 *    (IndexedDB runs a readwrite transaction alone, so the version cannot
 *    move while this one runs).
 *    That read need not come first: the engine may let a transaction read its
 *    cache unchecked ({@link ViewMode}: optimistic, with the version read in
 *    the same round as its change record; trusted, with no version read at
 *    all, the change record's `add` failing if another commit was made on the
 *    same version). A transaction whose view turns out stale is aborted
 *    before any of its writes takes effect and marked `stale`; the engine
 *    runs the body again, checked.
 * 2. Reads look at the committed log's rows first, then find the row's page in
 *    this transaction's view, else in the cache, else with a request (several
 *    pages ahead per request when walking).
 * 3. Writes (`put`, `delete`, `deleteRange`) change nothing stored yet: they
 *    go to an ordered overlay that later reads of this transaction merge
 *    over the log and the pages (a read sees exactly the writes issued
 *    before it).
 * 4. When the body has returned, `flush` stores the writes with one request
 *    as a change record in the log, while the log stays within its limits.
 *    Otherwise it checkpoints: it loads the pages the log's and its own writes
 *    fall on, applies the writes to private copies, splits pages grown past
 *    the limits, folds nearly empty pages into their successors, issues one
 *    `put` per changed page, deletes the log records and adds a checkpoint
 *    record. The engine commits, and the cache takes the change record (or
 *    the new pages) once the commit completed.
 *
 * So a body that fails, or that awaits something else so that IndexedDB
 * commits under it, has stored nothing at all.
 */
import { invalidKeyError, checkScanLimit, type EngineTransaction, type Entry, type Key, type KeyRange, type ScanOptions } from "../../src/engine.js";
import { BTree } from "../../src/ordered/btree.js";
import { encodedInterval, encodeKey, type EncodedInterval } from "../../src/ordered/key-encoding.js";
import { damaged, IndexedDbEngineError, isDataCloneError, uncloneable } from "./errors.js";
import { lowerBound, upperBound } from "../../src/ordered/btree.js";
import { cutPages, isUnderfull, Page, type PageCache, type PageLimits, type PageRecord, PageSet, sizeOf } from "./pages.js";
import {
  type ChangeRecord,
  type CheckpointRecord,
  type CommittedLog,
  contains,
  EVIDENCE_SWEEP,
  isCheckpoint,
  type LogLimits,
  type LogRecord,
  type LogRow,
  MAX_LOG_CLEARED,
  type Moment,
  monotonicNow,
  NEVER,
  recordBytes,
  type Slot,
  trustHolds,
} from "./log.js";
import { CHECKPOINTS_INDEX } from "./schema.js";

const PREFIX = "isostore indexeddb engine: ";

/** A string above every key encoding (encodings use code units up to U+00FF only). */
const TOP = "\u0100";

/** Estimated bytes a stored page takes beyond its rows (its key, fences, the record's structure). */
const PAGE_OVERHEAD = 64;

/** Pages read ahead by one request when a walk moves to the next (or previous) page. */
const WALK_AHEAD = 8;
/** Pages read ahead, after the page holding it, when the flush looks up a written row's page. */
const WRITE_AHEAD = 4;

/** What the transaction needs from the platform. */
export interface PagePlatform {
  readonly IDBKeyRange: typeof IDBKeyRange;
}

/** One record of `IDBObjectStore.getAllRecords` (newer than TypeScript's DOM lib). */
interface IdbRecord {
  readonly key: IDBValidKey;
  readonly value: unknown;
}

/** `getAllRecords`, where the platform has it (Chromium 141+, fake-indexeddb 6). */
type GetAllRecords = (options: { query?: IDBKeyRange | null; count?: number; direction?: IDBCursorDirection }) => IDBRequest<IdbRecord[]>;

/** What a read sees of the overlay: the slots in its interval and the cleared ranges, as they were when it was issued. */
interface Snapshot {
  readonly slots: readonly Slot[];
  /** The slots' encodings (for binary search). */
  readonly encs: readonly string[];
  readonly cleared: readonly EncodedInterval[];
}

/** What a committed flush leaves for the cache: a change record, or the pages a checkpoint wrote. */
export type CacheInstall =
  | { readonly kind: "log"; readonly base: number; readonly record: ChangeRecord; readonly keys: readonly Key[] }
  | {
      readonly kind: "pages";
      readonly base: number;
      readonly puts: readonly Page[];
      readonly deletes: readonly string[];
      /** The date of the checkpoint record it stored. */
      readonly at: number;
    };

/** A record of the `log` store with its version. */
function toLogEntry(record: IdbRecord): { readonly version: number; readonly record: LogRecord } {
  if (typeof record.key !== "number") throw damaged(`a log key is not a number (${typeof record.key})`);
  return { version: record.key, record: record.value as LogRecord };
}

/** The newest key of the `log` store: the database version (0 for no record at all). */
function lastVersion(log: IDBObjectStore): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const request = log.openKeyCursor(null, "prev");
    request.onsuccess = () => {
      const key = request.result?.key;
      if (key === undefined) resolve(0);
      else if (typeof key === "number") resolve(key);
      else reject(damaged(`a log key is not a number (${typeof key})`));
    };
    request.onerror = () => reject(request.error ?? new Error(`${PREFIX}reading the version failed`));
  });
}

/** The version of the newest checkpoint record (0 for none). */
function newestCheckpoint(log: IDBObjectStore): Promise<number> {
  return requestResult(log.index(CHECKPOINTS_INDEX).openKeyCursor(null, "prev")).then((cursor) => {
    const key = cursor?.primaryKey;
    if (key === undefined) return 0;
    if (typeof key !== "number") throw damaged(`a log key is not a number (${typeof key})`);
    return key;
  });
}

/** A request's result as a promise (a failed request also aborts its transaction). */
export function requestResult<T>(request: IDBRequest<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error ?? new Error(`${PREFIX}request failed`));
  });
}

/**
 * Up to `count` records of `query` in `direction`, in one request where the
 * platform has `getAllRecords`, else two (`getAllKeys` + `getAll`, which see
 * the same data within a transaction) or a cursor (descending).
 */
export function readRecords(store: IDBObjectStore, query: IDBKeyRange | undefined, direction: "next" | "prev", count: number | undefined): Promise<IdbRecord[]> {
  const getAllRecords = (store as unknown as { getAllRecords?: GetAllRecords }).getAllRecords;
  if (typeof getAllRecords === "function") {
    const options: { query?: IDBKeyRange; count?: number; direction?: IDBCursorDirection } = { direction };
    if (query !== undefined) options.query = query;
    if (count !== undefined) options.count = count;
    return requestResult(getAllRecords.call(store, options));
  }
  if (direction === "next") {
    const keys = requestResult(store.getAllKeys(query, count));
    const values = requestResult(store.getAll(query, count));
    return Promise.all([keys, values]).then(([k, v]) => k.map((key, i): IdbRecord => ({ key, value: v[i] as unknown })));
  }
  return new Promise<IdbRecord[]>((resolve, reject) => {
    const out: IdbRecord[] = [];
    const request = store.openCursor(query, "prev");
    request.onsuccess = () => {
      const cursor = request.result;
      if (cursor === null) {
        resolve(out);
        return;
      }
      out.push({ key: cursor.key, value: cursor.value as unknown });
      if (count !== undefined && out.length >= count) resolve(out);
      else cursor.continue();
    };
    request.onerror = () => reject(request.error ?? new Error(`${PREFIX}cursor failed`));
  });
}

/** Whether `key` is a non-empty array of strings and finite numbers. */
function isValidKey(key: unknown): key is Key {
  if (!Array.isArray(key) || key.length === 0) return false;
  for (const part of key as unknown[]) {
    if (typeof part !== "string" && (typeof part !== "number" || !Number.isFinite(part))) return false;
  }
  return true;
}

/** Whether the interval holds no key at all. */
function isEmpty(iv: EncodedInterval): boolean {
  if (iv.lower === undefined || iv.upper === undefined) return false;
  return iv.lower > iv.upper || (iv.lower === iv.upper && (iv.lowerOpen || iv.upperOpen));
}

/** The indexes `[from, to)` of the sorted `keys` that lie in `iv`. */
function rowSpan(keys: readonly string[], iv: EncodedInterval): [number, number] {
  const from = iv.lower === undefined ? 0 : iv.lowerOpen ? upperBound(keys, iv.lower) : lowerBound(keys, iv.lower);
  const to = iv.upper === undefined ? keys.length : iv.upperOpen ? lowerBound(keys, iv.upper) : upperBound(keys, iv.upper);
  return [from, to];
}

/** Whether a page starting at `lo` holds only keys above `iv`. */
function startsAbove(lo: string, iv: EncodedInterval): boolean {
  return iv.upper !== undefined && (lo > iv.upper || (lo === iv.upper && iv.upperOpen));
}

/** Whether every key below a page starting at `lo` lies below `iv`. */
function startsAtOrBelow(lo: string, iv: EncodedInterval): boolean {
  return iv.lower !== undefined && lo <= iv.lower;
}

/**
 * The group of a written row for the flush's page look-ups
 * (`PagedTransaction.loadPagesOf`): its key without the last element and
 * without the numbers right before it, encoded. Rows of one group are
 * neighbours in key order, one index's entries: `["j", name, "p", consumer,
 * observedAt, pos]` groups by `["j", name, "p", consumer]`, `["j", name,
 * "h", consumer, ns, subject]` by `["j", name, "h", consumer, ns]`. Dropping
 * the last element only put every row whose key ends in two numbers (a time
 * and a position) in a group of its own, and a transaction writing 1,000
 * such rows on a few adjacent pages probed 1,000 times (2,000 requests).
 */
function probeGroup(key: Key): string {
  let end = key.length - 1;
  while (end > 0 && typeof key[end - 1] === "number") end--;
  return encodeKey(key.slice(0, end));
}

/** What one round of `PagedTransaction.loadPagesOf` did for one group. */
interface ProbeRound {
  /** How many of the group's unknown rows apart it probed within a run (`Infinity`: the first of each run only). */
  readonly stride: number;
  /** Its rows whose page was unknown when the round began. */
  readonly unknown: number;
  /** The probes it issued. */
  readonly probes: number;
}

/**
 * How many rows apart the next round probes a group's rows still unknown
 * (`unknown` of them) within a run, after the group's `last` round (none:
 * its first round, which probes the first row of each run only). The rows
 * the last round's probes brought in, per probe, tell how many rows one
 * probe covers in this group: probing one row in that many leaves few
 * unknown, whether the group is dense (hundreds per probe: a few probes) or
 * sparse (one or two per probe: nearly every row at once). At most half the
 * last stride, and at least 1 (every row probed, the group's last round): a
 * group needs at most 2 + log2 of the rows its first probe covered rounds,
 * whatever its rows' spread, and two or three in practice.
 */
function nextStride(last: ProbeRound | undefined, unknown: number): number {
  if (last === undefined) return Infinity;
  const perProbe = (last.unknown - unknown) / last.probes;
  return Math.max(1, Math.min(last.stride / 2, perProbe));
}

/** The error of a call on a settled transaction's handle. */
function dead(): Error {
  return new Error(`${PREFIX}this transaction has already finished; its handle cannot be used any more`);
}

/** The error of a write in a readonly transaction. */
function readonlyWrite(what: string): TypeError {
  return new TypeError(`${PREFIX}${what} in a readonly transaction`);
}

/** The error of a call after IndexedDB committed the transaction under a body that awaited something else. */
export function committedEarly(): IndexedDbEngineError {
  return new IndexedDbEngineError(
    "committed_early",
    "IndexedDB committed the transaction while its body awaited something other than the transaction's own calls; none of the body's writes were stored",
    { retryable: false },
  );
}

/** The error of an optimistic transaction that read a stale cache (the engine runs the body again). */
function staleView(): IndexedDbEngineError {
  return new IndexedDbEngineError("aborted", `${PREFIX}the transaction read a stale cache; it runs again`, { retryable: true });
}

/** The value of row `enc` on `page`, if it is there. */
function rowOf<V>(page: Page, enc: string): V | undefined {
  const i = lowerBound(page.keys, enc);
  return (page.keys[i] === enc ? page.values[i] : undefined) as V | undefined;
}

/** One resolved `true`, shared (a view known current). */
const CURRENT: Promise<boolean> = Promise.resolve(true);
/** One resolved promise, shared (the view of an unchecked transaction is ready at once). */
const READY: Promise<void> = Promise.resolve();

/**
 * How a transaction learns that the engine's cache (its view) is the
 * database's current version; the engine chooses (`./indexeddb-engine.ts`):
 * - `checked`: its first request reads the version, and every read waits for
 *   it (and for the catch-up when another tab wrote).
 * - `optimistic`: the body reads the cache at once; the version read goes out
 *   first and answers before anything else of the transaction happens. A
 *   moved version aborts the transaction before any write.
 * - `trusted` (a writing transaction whose engine confirmed the version less
 *   than `TRUST_MS` ago by both of its clocks, `trustHolds` in `./log.ts`):
 *   no version read at all. The change record's `add`
 *   is the check: the `bases` index refuses a second commit made on one
 *   version (`./log.ts`), so a stale view's commit fails and aborts. The
 *   trust is judged again when the `add` has run (IndexedDB may run a
 *   transaction long after it was created, behind other contexts' ones): if
 *   it expired by then, the transaction aborts too, and nothing commits
 *   before that answer. A body that writes nothing, and a checkpoint, read
 *   the version before committing.
 *
 * A stale view's transaction stores nothing; the engine runs the body again,
 * checked.
 */
export type ViewMode = "checked" | "optimistic" | "trusted";

/** The handle of one engine transaction over pages. */
export class PagedTransaction implements EngineTransaction {
  /** False once the body settled: every call then throws. */
  live = true;
  /** Set by the first refused call; dooms the transaction. */
  failed = false;
  failure: unknown = undefined;
  /** How the IndexedDB transaction ended, once it has (calls then throw). */
  ended: "committed" | "aborted" | null = null;
  /** What the cache takes when the commit completes (set by a flush that wrote). */
  install: CacheInstall | null = null;
  /** Estimated bytes the flush stored: the change record, or the pages and record of a checkpoint (the engine's headroom counts them). */
  storedBytes = 0;
  /**
   * Set by the engine's own body (never by a caller's): the flush writes the
   * committed log into the pages now (a checkpoint), whatever the log's
   * limits, so that rows deleted since the last checkpoint leave the pages.
   */
  forceCheckpoint = false;

  /** The database version this transaction reads (known once `ready` resolved). */
  private version = 0;
  private readonly ready: Promise<void>;
  /** How this transaction learns that its view is current (see {@link ViewMode}). */
  readonly mode: ViewMode;
  /**
   * Whether pages loaded may enter the cache: `true` once the view is known
   * current (checked; optimistic once the version read confirmed it; trusted
   * from the start, see {@link ViewMode}), `false` once it is known stale.
   */
  private current: boolean | null;
  /** Set when the view turned out stale (the engine runs the body again). */
  stale = false;
  /** The version read's verdict: issued at the start (optimistic) or on demand (trusted); checked: `true`. */
  private verdict: Promise<boolean> | null;
  /** When the cache's version was confirmed, as the transaction was created (what a trusted view rests on). */
  private trustedSince: Moment = NEVER;
  /**
   * A reading of both clocks taken in a request callback of this transaction: while
   * a callback runs, the transaction holds its lock, so no other transaction
   * of the database has built on the version it commits before this time.
   * A commit confirms its version as of this reading (see `oncomplete` in
   * `./indexeddb-engine.ts`), not as of its `complete` event, which a
   * frozen or busy context may handle long after.
   */
  lockedAt: Moment | null = null;
  /** The committed log at that version (set once `ready` resolved). */
  private log: CommittedLog | null = null;
  /** Committed pages this transaction has seen (the partition cannot change under it). */
  private readonly view = new PageSet();
  private overlay: BTree<Slot> | null = null;
  private cleared: EncodedInterval[] = [];

  constructor(
    private readonly pages: IDBObjectStore,
    private readonly logStore: IDBObjectStore,
    private readonly cache: PageCache,
    private readonly readonly: boolean,
    private readonly platform: PagePlatform,
    private readonly limits: PageLimits,
    private readonly logLimits: LogLimits,
    /** Aborts the transaction (when a refused call dooms it). */
    private readonly doom: () => void,
    /** The engine's choice (see {@link ViewMode}); anything but "checked" needs a cache that knows a version. */
    mode: ViewMode = "checked",
    /** Aborts the transaction at once (a stale view found by the version read). */
    private readonly onStale: () => void = doom,
    /** The engine's clocks: when a version was confirmed, when a checkpoint was written (see {@link Moment}). */
    private readonly now: () => Moment = () => ({ wall: Date.now(), mono: monotonicNow() }),
  ) {
    this.mode = mode !== "checked" && cache.version !== null ? mode : "checked";
    if (this.mode === "checked") {
      this.current = true;
      this.verdict = CURRENT;
      this.ready = this.start();
      // A failed read aborts the transaction, which settles transact; calls see the rejection.
      this.ready.catch(() => undefined);
    } else {
      this.version = cache.version!;
      this.log = cache.log;
      this.ready = READY;
      // Trusted: pages only change at checkpoints, and when this view turns out stale the next
      // transaction catches up, which drops every cached page if a checkpoint happened meanwhile.
      this.current = this.mode === "trusted" ? true : null;
      this.trustedSince = cache.confirmedAt;
      this.verdict = this.mode === "optimistic" ? this.readVerdict() : null;
    }
  }

  /**
   * Whether the view is current, once known: checked at once; optimistic by
   * the version read issued at the start; trusted by the change record's
   * `add` when there is one, else by a version read issued now.
   */
  confirmed(): Promise<boolean> {
    if (this.verdict === null) {
      this.verdict = this.readVerdict();
    }
    return this.verdict;
  }

  /**
   * Read the version behind the cache's back: the verdict, and on another
   * version the abort, from the request's own event (IndexedDB answers
   * requests in order, so nothing issued after it has taken effect).
   */
  private readVerdict(): Promise<boolean> {
    return lastVersion(this.logStore).then(
      (version) => {
        if (version === this.version) {
          this.current = true;
          this.lockedAt = this.now();
          if (this.cache.version === version) this.cache.confirmedAt = this.lockedAt;
          this.cache.witness.observe(version, this.lockedAt.mono);
          return true;
        }
        this.markStale();
        this.onStale();
        return false;
      },
      () => {
        // The transaction ended without an answer (aborted, or committed under a body that awaited
        // something else): what the body read is unverified. Nothing of it was stored (a body that
        // wrote fails before its writes), so the engine runs it again, checked. Or the read failed
        // while the transaction is live (a damaged log): abort it, so that no write queued behind
        // the read commits unverified (aborting an ended transaction does nothing).
        this.markStale();
        this.onStale();
        return false;
      },
    );
  }

  /** Note a stale view: nothing loaded enters the cache, and the cache's version is no longer trusted. */
  private markStale(): void {
    this.stale = true;
    this.current = false;
    this.cache.confirmedAt = NEVER;
  }

  /** Read the database version and bring the cache to it (see the module comment). */
  private async start(): Promise<void> {
    const version = await lastVersion(this.logStore);
    this.version = version;
    const cache = this.cache;
    while (cache.version !== version) {
      const seen = cache.version;
      // The records after the cached version. A cache that knows none (or a later one: the database
      // was deleted and made again) reads from the newest checkpoint: the records before it are
      // replaced checkpoints kept as evidence. (After a known version they are few: at most those of
      // the evidence time, and the catch-up starts after the last checkpoint among them anyway.)
      const from = seen !== null && seen < version ? seen : null;
      const lower = from === null ? await newestCheckpoint(this.logStore) : from + 1;
      const records = await readRecords(this.logStore, lower > 0 ? this.platform.IDBKeyRange.lowerBound(lower) : undefined, "next", undefined);
      // Another transaction of this engine (a concurrent reader) may have moved the cache meanwhile.
      if (cache.version !== seen) continue;
      const entries = records.map(toLogEntry);
      cache.catchUp(from, version, entries);
      // The time the checkpoint records read know to have passed (they were stored before this reading).
      const mono = this.now().mono;
      for (const entry of entries) if (isCheckpoint(entry.record)) cache.witness.learn(entry.record, mono);
    }
    cache.confirmedAt = this.now();
    // The version read was committed before now.
    cache.witness.observe(version, cache.confirmedAt.mono);
    this.log = cache.log;
  }

  /**
   * Estimated bytes of the body's writes, as a change record would store
   * them ({@link recordBytes}): what a growing transaction adds.
   */
  writeBytes(): number {
    let bytes = 16 + this.cleared.length * 64;
    this.overlay?.scan(undefined, false, undefined, false, false, Infinity, (slot) => {
      bytes += slot.enc.length + 8 + (slot.deleted ? 0 : slot.size);
    });
    return bytes;
  }

  /** Whether the body wrote anything (so `flush` has work). */
  get hasWrites(): boolean {
    return (this.overlay !== null && this.overlay.size > 0) || this.cleared.length > 0 || this.forceCheckpoint;
  }

  get<V = unknown>(key: Key): Promise<V | undefined> {
    this.check();
    if (!isValidKey(key)) throw this.fail(invalidKeyError(key));
    const enc = encodeKey(key);
    const slot = this.overlay?.find(enc);
    if (slot !== undefined) return Promise.resolve((slot.deleted ? undefined : slot.value) as V | undefined);
    for (const iv of this.cleared) if (contains(iv, enc)) return Promise.resolve(undefined);
    return this.ready.then(() => {
      const log = this.log!;
      const logged = log.rows.find(enc);
      if (logged !== undefined) return (logged.deleted ? undefined : logged.value) as V | undefined;
      if (log.hides(enc)) return undefined;
      const page = this.pageFor(enc);
      return page instanceof Page ? rowOf<V>(page, enc) : page.then((loaded) => rowOf<V>(loaded, enc), this.refused);
    }, this.refused);
  }

  put(key: Key, value: unknown): void {
    this.check();
    if (this.readonly) throw this.fail(readonlyWrite("put"));
    if (!isValidKey(key)) throw this.fail(invalidKeyError(key));
    let size: number;
    try {
      size = sizeOf(value);
    } catch (error) {
      throw this.fail(error);
    }
    this.write(encodeKey(key), key, value, size, false);
  }

  delete(key: Key): void {
    this.check();
    if (this.readonly) throw this.fail(readonlyWrite("delete"));
    if (!isValidKey(key)) throw this.fail(invalidKeyError(key));
    this.write(encodeKey(key), key, undefined, 0, true);
  }

  /** Forget the overlay's writes in `range` and hide every stored row there (applied by the flush). */
  deleteRange(range: KeyRange): void {
    this.check();
    if (this.readonly) throw this.fail(readonlyWrite("deleteRange"));
    let iv: EncodedInterval;
    try {
      iv = encodedInterval(range);
    } catch (error) {
      throw this.fail(error);
    }
    if (isEmpty(iv)) return;
    const overlay = this.overlay;
    if (overlay !== null) {
      const doomed: string[] = [];
      overlay.scan(iv.lower, iv.lowerOpen, iv.upper, iv.upperOpen, false, Infinity, (slot) => doomed.push(slot.enc));
      for (const enc of doomed) overlay.delete(enc);
    }
    this.cleared.push(iv);
  }

  scan<V = unknown>(range: KeyRange, options?: ScanOptions): Promise<Entry<V>[]> {
    this.check();
    let limit: number;
    let iv: EncodedInterval;
    try {
      limit = checkScanLimit(options?.limit, PREFIX);
      iv = encodedInterval(range);
    } catch (error) {
      throw this.fail(error);
    }
    // A fresh array per call: the caller owns what a scan returns and may change it.
    if (isEmpty(iv)) return Promise.resolve([]);
    const snapshot = this.snapshot(iv);
    const reverse = options?.reverse === true;
    return this.ready.then(() => (reverse ? this.walkDown(iv, limit, snapshot) : this.walkUp(iv, limit, snapshot)).catch(this.refused), this.refused) as Promise<Entry<V>[]>;
  }

  /**
   * Apply the body's writes (see the module comment). Issues the requests;
   * the caller commits. Throws (and the caller aborts) when a page cannot be
   * stored or IndexedDB already committed under the body. A value IndexedDB
   * refuses to clone that `put` did not recognise (a platform object that is
   * not serializable, a proxy) is reported as the engine's `DataCloneError`
   * ({@link uncloneable}, the platform's error as `cause`), as `put` reports
   * the ones it recognises: a refused call, not a failure of the engine.
   */
  async flush(): Promise<void> {
    try {
      await this.store();
    } catch (error) {
      if (isDataCloneError(error)) throw this.fail(uncloneable("a value this transaction wrote", error));
      throw error;
    }
  }

  /** The work of {@link flush}. */
  private async store(): Promise<void> {
    await this.ready;
    if (this.ended !== null) throw committedEarly();
    const log = this.log!;
    const next = this.version + 1;
    const keys: Key[] = [];
    const rows: LogRow[] = [];
    this.overlay?.scan(undefined, false, undefined, false, false, Infinity, (slot) => {
      keys.push(slot.key);
      rows.push(slot.deleted ? [slot.enc] : [slot.enc, slot.size, slot.value]);
    });
    const record: ChangeRecord = { c: this.cleared, r: rows, b: this.version };
    const limits = this.logLimits;
    if (this.forceCheckpoint && log.empty && rows.length === 0 && record.c.length === 0) return;
    if (
      !this.forceCheckpoint &&
      log.records < limits.records &&
      log.bytes + recordBytes(record) <= limits.bytes &&
      log.cleared.length + record.c.length <= MAX_LOG_CLEARED
    ) {
      const request = this.logStore.add(record, next);
      if (this.mode === "trusted") {
        // The verdict is the add's answer, judged when IndexedDB executed it (the transaction holds its
        // lock in the callback), not when the transaction was created: IndexedDB may run it much later,
        // behind other contexts' transactions, by when the evidence of a commit on this version may be
        // gone. A stale view fails the add (ConstraintError); a trust that expired meanwhile aborts it.
        this.verdict = new Promise<boolean>((resolve) => {
          request.onsuccess = () => {
            const now = this.now();
            this.lockedAt = now;
            if (trustHolds(this.trustedSince, now)) resolve(true);
            else {
              this.markStale();
              this.onStale();
              resolve(false);
            }
          };
          request.onerror = () => {
            if (request.error?.name === "ConstraintError") this.markStale();
            resolve(false);
          };
        });
      } else {
        request.onsuccess = () => {
          this.lockedAt = this.now();
        };
      }
      this.install = { kind: "log", base: this.version, record, keys };
      this.storedBytes = recordBytes(record);
      return;
    }
    // A checkpoint rewrites pages from the cache's: not before the cache is known to be current.
    if (!(await this.confirmed())) throw staleView();
    await this.checkpoint(log);
  }

  /**
   * Write the committed log's changes and this transaction's into the pages,
   * and replace the log records with a checkpoint record.
   */
  private async checkpoint(log: CommittedLog): Promise<void> {
    // The log's rows (but those this transaction cleared) under this transaction's rows.
    const overlay = new BTree<Slot>();
    log.rows.scan(undefined, false, undefined, false, false, Infinity, (slot) => {
      if (!this.cleared.some((iv) => contains(iv, slot.enc))) overlay.insert(slot);
    });
    this.overlay?.scan(undefined, false, undefined, false, false, Infinity, (slot) => overlay.set(slot));
    const { puts, deletes } = await this.writePages(overlay, log.cleared.concat(this.cleared));
    const next = this.version + 1;
    // The change records since the last checkpoint go; their bases move to this checkpoint's record.
    const floor = this.version - log.records;
    if (log.records > 0) this.logStore.delete(this.platform.IDBKeyRange.bound(floor, next, true, true));
    const bases: number[] = [];
    for (let base = floor; base <= this.version; base++) bases.push(base);
    const written = this.now();
    const at = written.wall;
    // The version it is made on was committed before now (a cache is never ahead of the database; a
    // stale one's add fails anyway), and the time the engine knows to have passed since earlier commits
    // goes with the record, to engines that read it later, in this context or another (`Witness`, ./log.ts).
    const witness = this.cache.witness;
    witness.observe(this.version, written.mono);
    this.logStore.add({ checkpoint: true, cp: next, at, b: bases, w: witness.carry(written.mono) } satisfies LogRecord, next);
    // Replaced checkpoint records past the evidence time go, the oldest first, a few per checkpoint;
    // those dated in the future are re-dated to now (see `Witness` in ./log.ts).
    const oldest = await requestResult(this.logStore.index(CHECKPOINTS_INDEX).getAll(null, EVIDENCE_SWEEP));
    const now = this.now();
    this.lockedAt = now;
    const sweep = witness.sweep(oldest as CheckpointRecord[], next, now);
    for (const record of sweep.redated) this.logStore.put(record, record.cp);
    for (const cp of sweep.deletes) this.logStore.delete(cp);
    this.install = { kind: "pages", base: this.version, puts, deletes, at };
    this.storedBytes = puts.reduce((sum, page) => sum + page.bytes + PAGE_OVERHEAD, 16 + 8 * bases.length);
  }

  /**
   * Apply `cleared`, then the rows of `overlay`, to the pages (see the module
   * comment); returns the pages put and the low fences of the pages deleted.
   */
  private async writePages(overlay: BTree<Slot>, cleared: readonly EncodedInterval[]): Promise<{ puts: Page[]; deletes: string[] }> {
    const limits = this.limits;
    /** Private copies of the pages this flush changes, by low fence. */
    const changed = new Map<string, Page>();
    const copyOf = (page: Page): Page => {
      let copy = changed.get(page.lo);
      if (copy === undefined) {
        copy = page.copy();
        changed.set(page.lo, copy);
      }
      return copy;
    };
    // Cleared ranges first: a written row inside one was written after the clear.
    for (const iv of cleared) {
      let page = await this.pageFor(iv.lower ?? "");
      for (;;) {
        const copy = copyOf(page);
        const [from, to] = rowSpan(copy.keys, iv);
        copy.removeRows(from, to);
        if (page.hi === null || startsAbove(page.hi, iv)) break;
        page = await this.pageAt(page.hi, iv.upper, WALK_AHEAD);
      }
    }
    if (overlay.size > 0) {
      await this.loadPagesOf(overlay);
      let page: Page | undefined;
      overlay.scan(undefined, false, undefined, false, false, Infinity, (slot) => {
        if (page === undefined || !page.covers(slot.enc)) page = this.view.containing(slot.enc)!;
        const copy = copyOf(page);
        if (slot.deleted) copy.remove(slot.enc);
        else copy.set(slot.enc, slot.value, slot.size);
      });
    }
    // Nearly empty pages fold into their successors: make sure those are at hand.
    const successors: string[] = [];
    for (const copy of changed.values()) {
      if (copy.hi !== null && copy.underfull(limits) && !changed.has(copy.hi) && this.known(copy.hi) === undefined) successors.push(copy.hi);
    }
    if (successors.length > 0) await Promise.all(successors.map((lo) => Promise.resolve(this.pageAt(lo, undefined, 1))));

    const dirty = [...changed.values()].sort((a, b) => (a.lo < b.lo ? -1 : a.lo > b.lo ? 1 : 0));
    const consumed = new Set<string>();
    const puts: Page[] = [];
    const deletes: string[] = [];
    for (const first of dirty) {
      if (consumed.has(first.lo)) continue;
      let keys = first.keys;
      let values = first.values;
      let sizes = first.sizes;
      let hi = first.hi;
      let rows = keys.length;
      let bytes = first.bytes;
      const folded: string[] = [];
      while (hi !== null && isUnderfull(rows, bytes, limits)) {
        const next = changed.get(hi) ?? this.known(hi);
        if (next === undefined) break;
        keys = keys.concat(next.keys);
        values = values.concat(next.values);
        sizes = sizes.concat(next.sizes);
        rows += next.keys.length;
        bytes += next.bytes;
        folded.push(next.lo);
        consumed.add(next.lo);
        hi = next.hi;
      }
      const pieces = cutPages(first.lo, hi, keys, values, sizes, limits);
      const los = new Set(pieces.map((piece) => piece.lo));
      for (const lo of folded) if (!los.has(lo)) deletes.push(lo);
      puts.push(...pieces);
    }
    const stored: Page[] = [];
    for (const lo of deletes) this.pages.delete(lo);
    for (const page of puts) {
      if (page.lo === "" && page.hi === null && page.keys.length === 0) {
        // No rows left at all: no pages at all.
        this.pages.delete("");
        deletes.push("");
        continue;
      }
      const record: PageRecord = page.toRecord();
      this.pages.put(record, page.lo);
      stored.push(page);
    }
    return { puts: stored, deletes };
  }

  /**
   * Refuse a call on a handle that is dead or whose transaction ended; a
   * refusal dooms the transaction, caught or not, and every later call
   * throws that first refusal again (the transaction is being aborted: what
   * it would read is gone), as `transact` rejects with it.
   */
  private check(): void {
    if (!this.live) throw dead();
    if (this.failed) throw this.failure;
    if (this.ended === "committed") throw this.fail(committedEarly());
    if (this.ended === "aborted") throw this.fail(new IndexedDbEngineError("aborted", `${PREFIX}the transaction was aborted; its writes were rolled back`, { retryable: true }));
  }

  private write(enc: string, key: Key, value: unknown, size: number, deleted: boolean): void {
    const overlay = (this.overlay ??= new BTree<Slot>());
    const slot = overlay.find(enc);
    if (slot !== undefined) {
      slot.value = value;
      slot.size = size;
      slot.deleted = deleted;
    } else {
      overlay.insert({ enc, key: key.slice(), value, size, deleted });
    }
  }

  /** The overlay as a read issued now sees it within `iv` (`null`: nothing written that matters). */
  private snapshot(iv: EncodedInterval): Snapshot | null {
    const overlay = this.overlay;
    const slots: Slot[] = [];
    if (overlay !== null && overlay.size > 0) {
      overlay.scan(iv.lower, iv.lowerOpen, iv.upper, iv.upperOpen, false, Infinity, (slot) => {
        slots.push({ enc: slot.enc, key: slot.key, value: slot.value, size: slot.size, deleted: slot.deleted });
      });
    }
    if (slots.length === 0 && this.cleared.length === 0) return null;
    return { slots, encs: slots.map((slot) => slot.enc), cleared: this.cleared.slice() };
  }

  /**
   * What a read of `iv` merges over the pages: the committed log's rows and
   * cleared ranges, under this transaction's writes as they were when the
   * read was issued (`written`). Its cleared ranges hide the log's rows too;
   * its rows replace the log's.
   */
  private overLog(iv: EncodedInterval, written: Snapshot | null): Snapshot | null {
    const log = this.log!;
    if (log.empty) return written;
    const logged: Slot[] = [];
    log.rows.scan(iv.lower, iv.lowerOpen, iv.upper, iv.upperOpen, false, Infinity, (slot) => {
      logged.push(slot);
    });
    if (logged.length === 0 && log.cleared.length === 0) return written;
    if (written === null) return { slots: logged, encs: logged.map((slot) => slot.enc), cleared: log.cleared };
    const slots: Slot[] = [];
    const mine = written.slots;
    let m = 0;
    for (const slot of logged) {
      while (m < mine.length && mine[m]!.enc < slot.enc) slots.push(mine[m++]!);
      if (m < mine.length && mine[m]!.enc === slot.enc) continue;
      if (!written.cleared.some((c) => contains(c, slot.enc))) slots.push(slot);
    }
    while (m < mine.length) slots.push(mine[m++]!);
    return { slots, encs: slots.map((slot) => slot.enc), cleared: log.cleared.concat(written.cleared) };
  }

  /** A committed page known without a request: in this transaction's view, else in a cache of this version. */
  private known(lo: string): Page | undefined {
    const page = this.view.at(lo);
    if (page !== undefined) return page;
    return this.adopt(this.cache.version === this.version ? this.cache.at(lo) : undefined);
  }

  /** Take a cached page into the view. */
  private adopt(page: Page | undefined): Page | undefined {
    if (page !== undefined) this.view.add(page);
    return page;
  }

  /** Take loaded records into the view (and the cache, when it holds this version); returns their pages. */
  private take(records: readonly IdbRecord[]): Page[] {
    // Optimistic: only once the version read confirmed this version (it answers before any page read).
    const cacheable = this.cache.version === this.version && this.current === true;
    const pages: Page[] = [];
    for (const record of records) {
      const lo = record.key;
      if (typeof lo !== "string") throw damaged(`a page key is not a string (${typeof lo})`);
      let page = this.view.at(lo);
      if (page === undefined) {
        page = Page.fromRecord(lo, record.value as PageRecord);
        this.view.add(page);
        if (cacheable) this.cache.add(page);
      }
      pages.push(page);
    }
    return pages;
  }

  /** The page holding `enc`. */
  private pageFor(enc: string): Page | Promise<Page> {
    const known = this.view.containing(enc) ?? this.adopt(this.cache.version === this.version ? this.cache.containing(enc) : undefined);
    if (known !== undefined) return known;
    return this.loadContaining(enc);
  }

  /** Load the page holding `enc` (one request). */
  private loadContaining(enc: string): Promise<Page> {
    const query = this.platform.IDBKeyRange.bound("", enc);
    return readRecords(this.pages, query, "prev", 1).then((records) => {
      const page = this.take(records)[0];
      if (page !== undefined) {
        if (!page.covers(enc)) throw damaged(`the page at ${JSON.stringify(page.lo)} ends before a key it should hold`);
        return page;
      }
      // No page at or below `enc`: there are no pages at all (the first one starts at "").
      const root = this.view.at("") ?? Page.empty("", null);
      this.view.add(root);
      return root;
    });
  }

  /** The page starting at `lo` (a high fence of a known page), reading up to `ahead` pages from there up to `upper`. */
  private pageAt(lo: string, upper: string | undefined, ahead: number): Page | Promise<Page> {
    const known = this.known(lo);
    if (known !== undefined) return known;
    const KeyRangeClass = this.platform.IDBKeyRange;
    const query = upper === undefined || upper < lo ? KeyRangeClass.lowerBound(lo) : KeyRangeClass.bound(lo, upper);
    return readRecords(this.pages, query, "next", ahead).then((records) => {
      const page = this.take(records)[0];
      if (page === undefined || page.lo !== lo) throw damaged(`no page starts at the high fence ${JSON.stringify(lo)}`);
      return page;
    });
  }

  /** The page ending at `lo` (the predecessor of the page starting there), reading up to a few more below it. */
  private pageBefore(lo: string): Page | Promise<Page> {
    const known = this.view.before(lo) ?? this.adopt(this.cache.version === this.version ? this.cache.before(lo) : undefined);
    if (known !== undefined) return known;
    const query = this.platform.IDBKeyRange.bound("", lo, false, true);
    return readRecords(this.pages, query, "prev", WALK_AHEAD).then((records) => {
      const page = this.take(records)[0];
      if (page === undefined || page.hi !== lo) throw damaged(`no page ends at the low fence ${JSON.stringify(lo)}`);
      return page;
    });
  }

  /**
   * Bring the page of every overlay row into the view, in rounds, all of a
   * round's requests at once. A probe looks up the page holding one row and
   * the {@link WRITE_AHEAD} pages after it (two requests). The rows whose page
   * is unknown are probed by group ({@link probeGroup}: one index's entries)
   * and by run (the rows of a group with no row of a known page between them:
   * a row past a known page lies on another page than the rows before it).
   * The first round probes the first row of each run; each later round
   * probes the first row of each run left and, within a run, one row in
   * every stride the group's earlier probes measured ({@link nextStride}).
   * So a dense group (a registration step's 1,000 `p` or `u` rows on a
   * handful of adjacent pages) costs a probe per few pages, in one or two
   * rounds, and a sparse one (100 `h` rows on 100 pages) about a probe per
   * few rows, in two to four rounds, not a round per few pages. Measured over
   * fake-indexeddb with a cold cache (`./flush-probes.node.test.ts`): 1,000
   * adjacent `p` rows, 4 page reads in 2 rounds (2,000 in 1 before); 100
   * `h` rows on 100 pages, 88 in 3 rounds (58 in 29 before). A warm cache
   * needs no round at all.
   */
  private async loadPagesOf(overlay: BTree<Slot>): Promise<void> {
    const KeyRangeClass = this.platform.IDBKeyRange;
    /** Per group: the stride of its last round, its rows then unknown, and the probes issued. */
    const last = new Map<string, ProbeRound>();
    for (;;) {
      /** The rows whose page is unknown, by group, in key order; whether each starts a run; `known` at its last row. */
      const unknown = new Map<string, { rows: string[]; starts: boolean[]; known: number }>();
      /** Rows on known pages seen so far in this scan (one between two rows of a group ends a run). */
      let known = 0;
      let page: Page | undefined;
      overlay.scan(undefined, false, undefined, false, false, Infinity, (slot) => {
        if (page === undefined || !page.covers(slot.enc)) {
          page = this.view.containing(slot.enc) ?? this.adopt(this.cache.version === this.version ? this.cache.containing(slot.enc) : undefined);
        }
        if (page !== undefined) {
          known++;
          return;
        }
        const group = probeGroup(slot.key);
        const rows = unknown.get(group);
        if (rows === undefined) unknown.set(group, { rows: [slot.enc], starts: [true], known });
        else {
          rows.rows.push(slot.enc);
          rows.starts.push(rows.known !== known);
          rows.known = known;
        }
      });
      if (unknown.size === 0) return;
      const probes: string[] = [];
      for (const [group, { rows, starts }] of unknown) {
        const stride = nextStride(last.get(group), rows.length);
        let issued = 0;
        let next = 0;
        for (let rank = 0; rank < rows.length; rank++) {
          if (rank < next && !starts[rank]) continue;
          probes.push(rows[rank]!);
          issued++;
          next = rank + stride;
        }
        last.set(group, { stride, unknown: rows.length, probes: issued });
      }
      await Promise.all(
        probes.map((enc) =>
          Promise.all([this.loadContaining(enc), readRecords(this.pages, KeyRangeClass.lowerBound(enc, true), "next", WRITE_AHEAD).then((records) => this.take(records))]),
        ),
      );
    }
  }

  /** Ascending scan of `iv`: pages from the one holding its lower end, following high fences. */
  private async walkUp(iv: EncodedInterval, limit: number, written: Snapshot | null): Promise<Entry[]> {
    const snapshot = this.overLog(iv, written);
    const out: Entry[] = [];
    let page = await this.pageFor(iv.lower ?? "");
    for (;;) {
      this.emit(page, iv, snapshot, false, limit, out);
      if (out.length >= limit || page.hi === null || startsAbove(page.hi, iv)) return out;
      page = await this.pageAt(page.hi, iv.upper, WALK_AHEAD);
    }
  }

  /** Descending scan of `iv`: pages from the one holding its upper end, following low fences. */
  private async walkDown(iv: EncodedInterval, limit: number, written: Snapshot | null): Promise<Entry[]> {
    const snapshot = this.overLog(iv, written);
    const out: Entry[] = [];
    let page = await this.pageFor(iv.upper ?? TOP);
    for (;;) {
      this.emit(page, iv, snapshot, true, limit, out);
      if (out.length >= limit || page.lo === "" || startsAtOrBelow(page.lo, iv)) return out;
      page = await this.pageBefore(page.lo);
    }
  }

  /** Append to `out` (up to `limit` entries) the rows of `page` in `iv`, as the overlay snapshot shows them. */
  private emit(page: Page, iv: EncodedInterval, snapshot: Snapshot | null, reverse: boolean, limit: number, out: Entry[]): void {
    const keys = page.keys;
    const [from, to] = rowSpan(keys, iv);
    if (snapshot === null) {
      if (reverse) for (let i = to - 1; i >= from && out.length < limit; i--) out.push({ key: page.keyAt(i), value: page.values[i] });
      else for (let i = from; i < to && out.length < limit; i++) out.push({ key: page.keyAt(i), value: page.values[i] });
      return;
    }
    // Merge the page's rows with the overlay's rows on this page (both ascending).
    const { slots, encs, cleared } = snapshot;
    const merged: Entry[] = [];
    let s = lowerBound(encs, page.lo);
    let i = from;
    const pageEnd = (slot: Slot): boolean => page.hi !== null && slot.enc >= page.hi;
    const hidden = (enc: string): boolean => {
      for (const c of cleared) if (contains(c, enc)) return true;
      return false;
    };
    for (;;) {
      const slot = s < slots.length && !pageEnd(slots[s]!) ? slots[s]! : undefined;
      const rowKey = i < to ? keys[i]! : undefined;
      if (slot === undefined && rowKey === undefined) break;
      if (slot === undefined || (rowKey !== undefined && rowKey < slot.enc)) {
        if (!hidden(rowKey!)) merged.push({ key: page.keyAt(i), value: page.values[i] });
        i++;
        continue;
      }
      if (rowKey === slot.enc) i++;
      if (!slot.deleted) merged.push({ key: slot.key, value: slot.value });
      s++;
    }
    if (reverse) for (let k = merged.length - 1; k >= 0 && out.length < limit; k--) out.push(merged[k]!);
    else for (let k = 0; k < merged.length && out.length < limit; k++) out.push(merged[k]!);
  }

  /**
   * What a read that failed rejects with: the first refused call's error
   * once one doomed the transaction (the abort it caused fails the read's
   * requests with a platform `AbortError`), else `error`.
   */
  private readonly refused = (error: unknown): never => {
    throw this.failed ? this.failure : error;
  };

  /** Record the first refused call, doom the transaction, and return `error` to rethrow. */
  private fail(error: unknown): unknown {
    if (!this.failed) {
      this.failed = true;
      this.failure = error;
      this.doom();
    }
    return error;
  }
}
