/// <reference lib="dom" />
/**
 * The IndexedDB engine's implementation: an {@link Engine} whose every
 * `transact` is exactly one IndexedDB transaction over the `pages` and `log`
 * stores (`./schema.ts`), with the rows packed into pages (`./pages.ts`),
 * small commits stored as change records in a log (`./log.ts`) until a
 * checkpoint writes them into the pages, and each transaction's reads and
 * writes done by `./paged-transaction.ts`. The public entry point is
 * `indexedDbEngine()` in `./index.ts`.
 *
 * What it promises, beyond the {@link Engine} contract:
 * - Atomicity is IndexedDB's, and stronger than request by request: `put` /
 *   `delete` / `deleteRange` only record the write (later reads of the same
 *   transaction see it); the change record (or the changed pages) is written
 *   once the body has returned, then the transaction commits. A body that throws or rejects
 *   aborts the transaction (`tx.abort()`) and `transact` rejects with exactly
 *   what it threw. A call the engine refuses (invalid key, a value structured
 *   clone refuses, write in a "readonly" transaction, bad scan limit, a dead
 *   handle) throws from the call and, like the memory engine, dooms the
 *   transaction even if the body catches it.
 * - `transact` resolves only after the transaction's `complete` event: with
 *   `durability: "strict"` that is after the data reached the disk, which is
 *   what makes the engine `durable` (billing-grade). `"relaxed"` commits once
 *   the OS has the data and is reported as not durable.
 * - Serializability is IndexedDB's: readwrite transactions on one store run one
 *   at a time in creation order (across tabs too), and `transact` creates its
 *   transaction synchronously once connected, in call order.
 * - A transaction started while no other one of this engine runs reads the
 *   cache unchecked (`ViewMode` in `./paged-transaction.ts`): an awaited write
 *   costs one request (trusted, within `TRUST_MS` of the version's last
 *   confirmation by both the wall clock and a monotonic one, `trustHolds` in
 *   `./log.ts`; the `bases` index refuses a commit made on a version that
 *   another commit already built on) or one round of two (optimistic). When
 *   another tab, worker or engine object wrote meanwhile, that transaction is
 *   aborted before storing anything and the body runs again, in a new
 *   transaction that reads the version first (the Engine contract allows a
 *   body to run more than once), as do the next few transactions: another
 *   tab is writing. That second run is serialized after whatever committed in
 *   between.
 * - A transaction with the hint `grows` (`Engine.transact`) is refused as
 *   `quota_exceeded` before anything of it is stored when its writes do not
 *   fit the origin's quota less the reserve (`./headroom.ts`); while it waits
 *   for a fresh storage estimate (at most `ESTIMATE_TIMEOUT_MS`, then the
 *   check is off for it), transactions called after it wait too, so they
 *   still start in call order.
 * - The page cache holds at most `DEFAULT_CACHE_PAGES` pages and
 *   `DEFAULT_CACHE_BYTES` (32 MiB) of them by the rows' size estimates,
 *   dropping the pages used longest ago; `close()` drops it.
 * - The connection is opened on first use (or by `open()`), closed by itself
 *   on `versionchange` (another tab upgrading or deleting the database) and
 *   reopened by the next `transact`. Failures are typed (`./errors.ts`). An
 *   open never hangs (`openEngineDatabase` in `./schema.ts`): blocked, or
 *   queued behind an open that is (this engine's earlier one, another
 *   engine's upgrade it stepped aside for, another tab's), it rejects with a
 *   retryable `blocked` error, at once or after `OPEN_WAIT_MS` without any
 *   answer; so neither `transact` nor `close()` waits on it for good.
 * - No platform global is read before the first call, and only
 *   `indexedDB` / `IDBKeyRange` (each replaceable by an option), so the module
 *   loads in Node, a page, a Web Worker or a Service Worker alike.
 *
 * Body rules (IndexedDB commits a transaction as soon as it has no pending
 * request when control returns to the event loop): await nothing but this
 * transaction's calls. A body that breaks the rule stores nothing of that
 * run: its calls after the early commit, or its flush, fail with
 * `committed_early`. When the run read over the cache without checking the
 * version first (the engine wrote last, moments ago), what it read is
 * unverified once IndexedDB committed under it, so the engine runs the body
 * again, checked, as after another tab's write: only if that run breaks the
 * rule too does `transact` reject with `committed_early`. A body that awaits
 * something else only now and then may so run twice and succeed, unreported.
 */
import type { Engine, EngineTransaction, TransactionMode, TransactOptions } from "../../src/engine.js";
import { connectionLostError, IndexedDbEngineError, transactionAbortError } from "./errors.js";
import { Headroom, isReserveRefusal, storageFromGlobals, type StorageEstimator } from "./headroom.js";
import { PagedTransaction, type ViewMode } from "./paged-transaction.js";
import { DEFAULT_LOG_LIMITS, type LogLimits, type Moment, monotonicNow, trustHolds } from "./log.js";
import { DEFAULT_PAGE_LIMITS, PageCache, type PageLimits } from "./pages.js";
import { LOG_STORE, MIGRATIONS, openEngineDatabase, PAGES_STORE, type Migration } from "./schema.js";

const PREFIX = "isostore indexeddb engine: ";

/** How strongly a committed readwrite transaction is flushed (IndexedDB's `durability`). */
export type IndexedDbDurability = "strict" | "relaxed";

/** What the engine needs from the platform. */
export interface IndexedDbPlatform {
  readonly indexedDB: IDBFactory;
  readonly IDBKeyRange: typeof IDBKeyRange;
}

/** The platform's IndexedDB, looked up when first needed (never at module load). */
export function platformFromGlobals(): IndexedDbPlatform {
  const host = globalThis as { indexedDB?: IDBFactory; IDBKeyRange?: typeof IDBKeyRange };
  if (host.indexedDB === undefined || host.IDBKeyRange === undefined) {
    throw new IndexedDbEngineError("open_failed", "this environment has no IndexedDB (pass the `indexedDB` and `IDBKeyRange` options, e.g. from fake-indexeddb)", {
      retryable: false,
    });
  }
  return { indexedDB: host.indexedDB, IDBKeyRange: host.IDBKeyRange };
}

/** The stores every transaction spans. */
const STORES = [PAGES_STORE, LOG_STORE];

/** Options of the {@link IndexedDbEngine} constructor (see `indexedDbEngine()`). */
export interface IndexedDbEngineConfig {
  readonly name: string;
  readonly durability: IndexedDbDurability;
  /** Resolved on first use; `undefined` means the platform's globals. */
  readonly platform: (() => IndexedDbPlatform) | undefined;
  /** Schema steps (tests pass a longer list to simulate newer code); default {@link MIGRATIONS}. */
  readonly migrations?: readonly Migration[];
  /** How large pages grow before they split; default {@link DEFAULT_PAGE_LIMITS}. */
  readonly pageLimits?: PageLimits;
  /** Most pages the cache keeps; default {@link DEFAULT_CACHE_PAGES}. */
  readonly cachePages?: number;
  /** Most estimated bytes the cache keeps; default {@link DEFAULT_CACHE_BYTES}. */
  readonly cacheBytes?: number;
  /** How much the log holds before a commit checkpoints; default {@link DEFAULT_LOG_LIMITS}. */
  readonly logLimits?: LogLimits;
  /** Epoch ms (default `Date.now`); tests pass one they move, to cross `TRUST_MS` and `EVIDENCE_MS`, or step it back. */
  readonly clock?: () => number;
  /**
   * A monotonic clock of the context, ms (default `performance.now()`): a
   * version is trusted less than `TRUST_MS` after its confirmation by both
   * clocks, and a replaced checkpoint record is deleted once `WITNESS_MS` is
   * known to have passed since it was written, by the time this clock and
   * those of earlier engines (handed on in the records) counted, and
   * `EVIDENCE_MS` by the wall clock; or once it is `EVIDENCE_MAX_MS` old by
   * the wall clock alone (`Witness` in `./log.ts`). Only spans of it are
   * used, never compared with another context's. Tests pass one they move
   * with `clock`, or not when they step `clock`.
   */
  readonly monotonic?: () => number;
  /** Bytes kept free for transactions that do not grow the data (see `reserveBytes` in `./index.ts`); undefined: the default. */
  readonly reserveBytes?: number | undefined;
  /** The StorageManager whose estimate the reserve is checked against; undefined: `navigator.storage`, looked up on first use. */
  readonly storage?: (() => StorageEstimator | undefined) | undefined;
  /** How long a growing transaction waits for a storage estimate (ms); default `ESTIMATE_TIMEOUT_MS` (`./headroom.ts`). Tests shorten it. */
  readonly estimateTimeoutMs?: number | undefined;
  /** How long an open may wait without any answer (ms); default `OPEN_WAIT_MS` (`./schema.ts`). Tests shorten it. */
  readonly openWaitMs?: number | undefined;
}

/**
 * Pages the engine keeps in memory by default. With {@link DEFAULT_CACHE_BYTES}:
 * the page count alone bounds nothing (a row larger than a page gets a page
 * of its own: a 256 KiB blob chunk, say), and 2048 pages of up to 16 KiB fill
 * those bytes.
 */
export const DEFAULT_CACHE_PAGES = 2048;
/**
 * Bytes of pages the engine keeps in memory by default, at most: 32 MiB, by
 * the rows' size estimates (`cachedBytes` in `./pages.ts`: `sizeOf` of each
 * value and its key, plus a little per page), not a measure of the heap.
 */
export const DEFAULT_CACHE_BYTES = 32 * 1024 * 1024;

/**
 * The IndexedDB {@link Engine}. Use `indexedDbEngine()` from
 * `isostore/indexeddb` rather than this class.
 */
export class IndexedDbEngine implements Engine {
  /** Strict commits reach the disk before `transact` resolves; relaxed ones may not. */
  readonly durable: boolean;
  /** The database name. */
  readonly name: string;
  readonly durability: IndexedDbDurability;
  private readonly options: { durability: IndexedDbDurability };
  private readonly resolvePlatform: () => IndexedDbPlatform;
  private readonly migrations: readonly Migration[];
  private readonly limits: PageLimits;
  private readonly logLimits: LogLimits;
  /** Committed pages of the version last seen (see `./pages.ts`). */
  private readonly cache: PageCache;
  private platform: IndexedDbPlatform | null = null;
  private db: IDBDatabase | null = null;
  private opening: Promise<IDBDatabase> | null = null;
  /** How long an open may wait without any answer before it rejects `blocked` (`openEngineDatabase`). */
  private readonly openWaitMs: number | undefined;
  private closed = false;
  /** `transact` calls not settled yet. */
  private pending = 0;
  /** IndexedDB transactions created and not yet ended (only a lone one reads its view unchecked). */
  private running = 0;
  /** Transactions still to run checked after a stale view (another tab is writing). */
  private contended = 0;
  /** Epoch ms: when a version was confirmed, when a checkpoint was written (internal: tests move it). */
  private readonly clock: () => number;
  /** Monotonic ms of this context (internal: tests move it). */
  private readonly monotonic: () => number;
  /** Both clocks read now. */
  private readonly now = (): Moment => ({ wall: this.clock(), mono: this.monotonic() });
  /** `close()` calls waiting for `pending` to reach 0. */
  private drained: (() => void)[] = [];
  /** The storage kept free for transactions that do not grow the data (`./headroom.ts`). */
  private readonly headroom: Headroom;
  /**
   * Transactions waiting, in call order, for the storage estimate a growing
   * transaction asked for (null: none asked for). They start together, in
   * that order, once it answered, so waiting reorders nothing.
   */
  private waiting: (() => void)[] | null = null;

  constructor(config: IndexedDbEngineConfig) {
    this.name = config.name;
    this.durability = config.durability;
    this.durable = config.durability === "strict";
    this.options = { durability: config.durability };
    this.resolvePlatform = config.platform ?? platformFromGlobals;
    this.migrations = config.migrations ?? MIGRATIONS;
    this.limits = config.pageLimits ?? DEFAULT_PAGE_LIMITS;
    this.logLimits = config.logLimits ?? DEFAULT_LOG_LIMITS;
    this.cache = new PageCache(config.cachePages ?? DEFAULT_CACHE_PAGES, config.cacheBytes ?? DEFAULT_CACHE_BYTES);
    this.clock = config.clock ?? Date.now;
    this.monotonic = config.monotonic ?? monotonicNow;
    this.headroom = new Headroom(config.storage ?? storageFromGlobals, config.reserveBytes, this.clock, config.estimateTimeoutMs);
    this.openWaitMs = config.openWaitMs;
  }

  /**
   * Open the database now (creating or upgrading it) instead of on the first
   * `transact`, to surface a `blocked` or failed open early. Harmless when open.
   */
  async open(): Promise<void> {
    if (this.closed) throw this.closedError();
    if (this.db === null) await this.connect();
  }

  /**
   * See {@link Engine.transact}. With `options.grows` (a readwrite
   * transaction that grows the data without bound), the transaction is
   * refused as `quota_exceeded`, writing nothing, when what it would write
   * does not fit the origin's quota less the reserve (`./headroom.ts`).
   */
  transact<T>(mode: TransactionMode, fn: (tx: EngineTransaction) => Promise<T>, options?: TransactOptions): Promise<T> {
    if (this.closed) return Promise.reject(this.closedError());
    if (mode !== "readonly" && mode !== "readwrite") {
      return Promise.reject(new TypeError(`${PREFIX}unknown transaction mode ${String(mode)}`));
    }
    if (typeof fn !== "function") return Promise.reject(new TypeError(`${PREFIX}transact needs a function`));
    this.pending++;
    const grows = mode === "readwrite" && options?.grows === true;
    // Unchecked first (see viewMode); a stale view runs the body again, reading the version first.
    const start = (): Promise<T> =>
      this.attempt(mode, fn, true, grows).catch((error: unknown) => {
        if (error !== STALE) throw error;
        return this.attempt(mode, fn, false, grows);
      });
    if (grows && this.waiting === null && this.headroom.stale) this.refreshHeadroom();
    const waiting = this.waiting;
    let run =
      waiting === null
        ? start()
        : new Promise<T>((resolve, reject) => {
            waiting.push(() => {
              start().then(resolve, reject);
            });
          });
    if (grows) run = run.catch((error: unknown) => this.afterRefusal(fn, error));
    return run.finally(() => this.settled());
  }

  /**
   * A growing transaction refused for the reserve (`error`, else rethrown):
   * when the committed log holds change records, their deletes (a prune's)
   * have not left the pages yet, so the space they hold is not free (in
   * memory; on disk it is free once the storage compacts). Write the log
   * into the pages in a transaction of its own (it may use the reserve),
   * read a fresh estimate and run the body once more; its answer stands.
   */
  private async afterRefusal<T>(fn: (tx: EngineTransaction) => Promise<T>, error: unknown): Promise<T> {
    if (!isReserveRefusal(error) || this.cache.log.empty) throw error;
    try {
      await this.attempt(
        "readwrite",
        (tx) => {
          (tx as PagedTransaction).forceCheckpoint = true;
          return Promise.resolve();
        },
        false,
        false,
      );
    } catch {
      throw error;
    }
    await this.headroom.refresh();
    return this.attempt("readwrite", fn, false, true);
  }

  /** Ask for a fresh storage estimate; transactions called meanwhile wait for it, and then start in call order. */
  private refreshHeadroom(): void {
    const waiting: (() => void)[] = [];
    this.waiting = waiting;
    // Whatever the refresh does, the transactions waiting for it start (it promises not to reject;
    // should it, the check simply keeps its last state).
    const release = (): void => {
      this.waiting = null;
      for (const start of waiting) start();
    };
    void this.headroom.refresh().then(release, release);
  }

  /** One run of `fn` in its own IndexedDB transaction (connected: created now, so transactions start in call order). */
  private attempt<T>(mode: TransactionMode, fn: (tx: EngineTransaction) => Promise<T>, unchecked: boolean, grows: boolean): Promise<T> {
    return this.db !== null ? this.run(this.db, mode, fn, unchecked, grows) : this.connect().then((db) => this.run(db, mode, fn, unchecked, grows));
  }

  /**
   * Refuse every later `transact`, let the running ones finish (those still
   * waiting for the connection included: an open answers, or rejects, within
   * a bounded time, see `openEngineDatabase`), then close the connection and
   * drop the cache. The data stays on disk: a new engine on the same name
   * sees it.
   */
  async close(): Promise<void> {
    this.closed = true;
    if (this.pending > 0) {
      await new Promise<void>((resolve) => {
        this.drained.push(resolve);
      });
    }
    if (this.opening !== null) {
      // An open started by `open()` with no transaction: wait for it (bounded), then close it.
      await this.opening.then(
        () => undefined,
        () => undefined,
      );
    }
    this.db?.close();
    this.db = null;
    this.cache.reset();
  }

  private closedError(): IndexedDbEngineError {
    return new IndexedDbEngineError("closed", "the engine is closed", { retryable: false });
  }

  private settled(): void {
    this.pending--;
    if (this.pending === 0 && this.drained.length > 0) {
      const waiters = this.drained;
      this.drained = [];
      for (const resolve of waiters) resolve();
    }
  }

  /** The connection, opening it (once, shared by concurrent callers) when needed. */
  private connect(): Promise<IDBDatabase> {
    if (this.opening === null) {
      let platform: IndexedDbPlatform;
      try {
        platform = this.platform ?? (this.platform = this.resolvePlatform());
      } catch (error) {
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- an IndexedDbEngineError or TypeError from the lookup
        return Promise.reject(error);
      }
      this.opening = openEngineDatabase(platform.indexedDB, platform.IDBKeyRange, this.name, this.migrations, this.openWaitMs).then(
        (db) => {
          this.opening = null;
          this.db = db;
          // A new connection may see a database deleted and rebuilt meanwhile, whose version
          // counter started over: trust nothing cached from before.
          this.cache.reset();
          // Another connection wants to upgrade or delete the database: step aside.
          // The next transact reopens (and may then be `blocked` or hit `version`).
          db.onversionchange = () => {
            db.close();
            if (this.db === db) this.db = null;
          };
          // The browser closed the connection abnormally (storage cleared, I/O failure).
          db.onclose = () => {
            if (this.db === db) this.db = null;
          };
          return db;
        },
        (error: unknown) => {
          this.opening = null;
          throw error;
        },
      );
    }
    return this.opening;
  }

  /**
   * How the next transaction learns its view is current (`ViewMode` in
   * `./paged-transaction.ts`): checked when `unchecked` is not allowed (a
   * rerun), when the cache knows no version, when another transaction of this
   * engine runs (its commit would move the version under this one) or just
   * after a stale view; trusted for a writing transaction within `TRUST_MS`
   * of the version's confirmation by both clocks (`trustHolds`: a wall clock
   * stepped back does not bring a long-past confirmation back into trust);
   * else optimistic.
   */
  private viewMode(mode: TransactionMode, unchecked: boolean): ViewMode {
    if (!unchecked || this.running > 0 || this.cache.version === null) return "checked";
    if (this.contended > 0) {
      this.contended--;
      return "checked";
    }
    return mode === "readwrite" && trustHolds(this.cache.confirmedAt, this.now()) ? "trusted" : "optimistic";
  }

  /**
   * Run `fn` in one IndexedDB transaction on `db` (`unchecked`: it may read
   * its view unchecked, see {@link viewMode}); a stale view rejects with
   * {@link STALE}. `grows`: refused before its writes are stored when they
   * do not fit the headroom (`./headroom.ts`).
   */
  private run<T>(db: IDBDatabase, mode: TransactionMode, fn: (tx: EngineTransaction) => Promise<T>, unchecked: boolean, grows: boolean): Promise<T> {
    const platform = this.platform!;
    return new Promise<T>((resolve, reject) => {
      let tx: IDBTransaction;
      try {
        tx = mode === "readwrite" ? db.transaction(STORES, mode, this.options) : db.transaction(STORES, mode);
      } catch (error) {
        // InvalidStateError: the connection is closing (versionchange, close event).
        if (this.db === db) this.db = null;
        reject(connectionLostError(error));
        return;
      }
      /** Body: running, fulfilled (with `outcome`) or rejected (with `outcome`). */
      let body: 0 | 1 | 2 = 0;
      let outcome: unknown;
      /** Transaction: running, complete, aborted. */
      let state: 0 | 1 | 2 = 0;
      let abortedByUs = false;
      const abort = (): void => {
        if (state !== 0 || abortedByUs) return;
        try {
          tx.abort();
          abortedByUs = true;
        } catch {
          // InvalidStateError: the transaction already finished (committed or
          // aborted); its own event settles the call.
        }
      };
      /** Abort, once the transaction knows whether its view was current (a stale view's failures are not reported). */
      const abortWhenKnown = (): void => {
        if (handle.mode === "checked") abort();
        else void handle.confirmed().then(abort);
      };
      const view = this.viewMode(mode, unchecked);
      this.running++;
      const handle: PagedTransaction = new PagedTransaction(
        tx.objectStore(PAGES_STORE),
        tx.objectStore(LOG_STORE),
        this.cache,
        mode === "readonly",
        platform,
        this.limits,
        this.logLimits,
        abortWhenKnown,
        view,
        abort,
        this.now,
      );
      const settle = (): void => {
        if (body === 0 || state === 0) return;
        if (handle.stale) {
          // Read from a stale cache: aborted before anything was stored; run the body again, and
          // the next few transactions too read the version first (another tab is writing).
          this.contended = CONTENDED_RUNS;
          // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- a private marker, never seen outside
          reject(STALE);
          return;
        }
        if (state === 1) {
          // Committed. A body that failed (possibly after IndexedDB committed under it) stored
          // nothing: its writes reach IndexedDB only in the flush after it returned. Nor did one
          // that returned after a refused call it caught (committed under it, say).
          if (body === 1 && !handle.failed) resolve(outcome as T);
          // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- exactly what the body threw, or the refused call's error
          else reject(body === 1 ? handle.failure : outcome);
          return;
        }
        // Aborted: by us (a body or flush failure, or a refused call), else by the platform.
        // Exactly what the body threw, or the refused call's error (Error or not).
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
        if (abortedByUs) reject(body === 2 ? outcome : handle.failure);
        else reject(transactionAbortError(tx.error));
      };
      tx.oncomplete = () => {
        state = 1;
        this.running--;
        handle.ended = "committed";
        if (handle.storedBytes > 0) this.headroom.wrote(handle.storedBytes);
        const install = handle.install;
        if (install?.kind === "log") this.cache.installChange(install.base, install.record, install.keys);
        else if (install?.kind === "pages") this.cache.install(install.base, install.puts, install.deletes);
        // The version it committed, by a transaction that started before the reading taken after its add.
        if (install !== null && handle.lockedAt !== null) this.cache.witness.observe(install.base + 1, handle.lockedAt.mono);
        // A commit made on the cached version confirms the one it made.
        if (install !== null && this.cache.version === install.base + 1 && handle.lockedAt !== null) this.cache.confirmedAt = handle.lockedAt;
        settle();
      };
      tx.onabort = () => {
        state = 2;
        this.running--;
        handle.ended = "aborted";
        settle();
      };
      const succeed = (value: unknown): void => {
        body = 1;
        outcome = value;
        // Commit only once the view is confirmed (a stale one was aborted by then).
        if (handle.mode === "checked") {
          if (state === 0) commitNow(tx);
        } else {
          void handle.confirmed().then((current) => {
            if (current && state === 0) commitNow(tx);
          });
        }
        settle();
      };
      const onFulfilled = (value: unknown): void => {
        handle.live = false;
        if (handle.failed) {
          body = 1;
          outcome = value;
          abortWhenKnown();
          settle();
          return;
        }
        if (!handle.hasWrites) {
          succeed(value);
          return;
        }
        if (grows) {
          // Refused before anything is stored (a stale view still runs again: see abortWhenKnown).
          const refusal = this.headroom.refusal(handle.writeBytes());
          if (refusal !== null) {
            onRejected(refusal);
            return;
          }
        }
        // The body's writes reach IndexedDB now, as a change record or whole pages (see ./paged-transaction.ts).
        handle.flush().then(
          () => succeed(value),
          (error: unknown) => onRejected(error),
        );
      };
      const onRejected = (error: unknown): void => {
        handle.live = false;
        body = 2;
        outcome = error;
        abortWhenKnown();
        settle();
      };
      let result: unknown;
      try {
        result = fn(handle);
      } catch (error) {
        onRejected(error);
        return;
      }
      void Promise.resolve(result).then(onFulfilled, onRejected);
    });
  }
}

/** Transactions run checked after a stale view, before reading unchecked again. */
const CONTENDED_RUNS = 8;

/** What `run` rejects with when a transaction read a stale cache (`transact` runs the body again). */
const STALE: unique symbol = Symbol("stale view");

/**
 * Ask IndexedDB to commit now rather than when it notices no request is
 * pending (saves a turn of the event loop). Where `commit()` is missing, or the
 * transaction is already committing, auto-commit does the same a little later.
 */
function commitNow(tx: IDBTransaction): void {
  if (typeof tx.commit !== "function") return;
  try {
    tx.commit();
  } catch {
    // InvalidStateError: no longer active (already committing); auto-commit covers it.
  }
}
