/// <reference lib="dom" />
/**
 * `isostore/indexeddb`: the {@link Engine} over IndexedDB, so a browser app
 * (page, Web Worker or Service Worker) can journal usage events locally and
 * lose nothing it accepted, even offline.
 *
 * It promises the whole {@link Engine} contract (checked by `isostore/testing`
 * in real Chromium and, as a fast lane, in Node over fake-indexeddb):
 * - one IndexedDB database per engine name; rows are packed, in key order,
 *   into pages of up to 128 rows or 16 KB, one record each, because every
 *   IndexedDB request costs about the same whatever it carries: a
 *   transaction writing hundreds of neighbouring rows stores a few pages
 *   (layout in `IndexedDbEngineSchema`, an `idb` `DBSchema`);
 * - a small commit is one request: its changes are stored as one record of
 *   a log, and a later commit writes the log's changes into the pages
 *   (a checkpoint) once it holds 128 records or 256 KB; replaced checkpoint
 *   records stay as evidence of the commits they replaced: each is deleted
 *   by a later checkpoint once it is ten minutes old by the wall clock and
 *   20 s are known to have passed since it was written by
 *   `performance.now()` (the time each context saw pass between reading the
 *   database and checkpointing, added up from context to context in the
 *   records, so short-lived Service Workers or tabs count too), or once it
 *   is a day old by the wall clock alone. So a wall clock stepped either
 *   way loses no commit (but for two opposite steps of more than a day
 *   within 10 s), and the log holds about ten minutes of checkpoint records,
 *   a day of them at most when no context ever sees time pass before it
 *   checkpoints;
 * - pages read are cached per engine (at most 2048 pages and 32 MiB by the
 *   rows' size estimates, the pages used longest ago dropped first; dropped
 *   at `close()`) with the log after them, at the
 *   database version (one per writing transaction, in any tab) they were read
 *   at; a transaction that finds a newer version reads the log records after
 *   it, so another tab's writes are never read stale; while nothing else of
 *   the engine runs, a transaction reads its cache without waiting for the
 *   version: a write shortly after the last one (within 10 s by both the
 *   wall clock and `performance.now()`) stores its change record
 *   with one request, which IndexedDB refuses (a unique index) when another
 *   commit was already made on the same version; otherwise the version is
 *   read in the same round. Either way, when another tab wrote meanwhile the
 *   transaction is aborted before storing anything and runs again on the
 *   current version (the Engine contract lets a body run twice);
 * - every `transact` is exactly one IndexedDB transaction that commits or
 *   aborts as a whole, and resolves only after its `complete` event;
 * - `durability: "strict"` (the default) flushes a commit to disk before
 *   `transact` resolves, so the engine is `durable` and a journal over it is
 *   `billing_grade`; `"relaxed"` is faster, may lose the last commits on power
 *   loss, and is reported as not durable (`telemetry_grade`);
 * - several tabs share one database safely: readwrite transactions are
 *   serialized across connections by IndexedDB itself;
 * - typed failures ({@link IndexedDbEngineError}): a `blocked` open rejects at
 *   once (retryable) instead of hanging, and so does every open of the
 *   database (a retry, another engine's reopen) while that blocked request is
 *   still pending (IndexedDB would queue it behind), as does an open that
 *   gets no answer for 10 s (queued behind another tab's blocked upgrade);
 *   a full quota is `quota_exceeded`, an abort is `aborted`; the journal
 *   reports them as `backend` errors with this error as `cause` (and the
 *   `DOMException` as its `cause`); a value IndexedDB cannot store (a
 *   function, a symbol, a WeakMap, a Promise..., at any depth) is refused
 *   by its `put` with a `DataCloneError`, and the transaction writes nothing;
 * - storage kept free for draining (`reserveBytes`): a transaction that grows
 *   the data without bound (hint `grows`: the journal's appends) is refused
 *   as `quota_exceeded`, writing nothing, once the origin's usage would come
 *   within the reserve of its quota, so that claims, acks and prunes can
 *   still run when appends filled the storage (on disk, Chromium at quota
 *   refuses every put and a delete raises the usage);
 * - schema versions with append-only migrations; on `versionchange` the
 *   connection closes itself and the next `transact` reopens;
 * - no `window`, and no platform global read before first use.
 */
import type { Engine } from "../../src/engine.js";
import { IndexedDbEngine, type IndexedDbDurability, type IndexedDbPlatform } from "./indexeddb-engine.js";
import type { StorageManagerLike } from "./persistent-storage.js";

/** Options of {@link indexedDbEngine}. */
export interface IndexedDbEngineOptions {
  /** The IndexedDB database name (one database per engine). */
  readonly name: string;
  /**
   * `"strict"` (default): a commit reaches the disk before `transact`
   * resolves (`durable: true`). `"relaxed"`: the OS has it; faster, not
   * durable across power loss (`durable: false`).
   */
  readonly durability?: IndexedDbDurability;
  /**
   * The IndexedDB factory to use; defaults to the global `indexedDB`, looked
   * up on first use. In Node pass fake-indexeddb's `IDBFactory` with its
   * `IDBKeyRange` (no global needed).
   */
  readonly indexedDB?: IDBFactory;
  /** The `IDBKeyRange` class matching `indexedDB`; defaults to the global one. */
  readonly IDBKeyRange?: typeof IDBKeyRange;
  /**
   * Bytes of the origin's storage quota kept free for the transactions that
   * do not grow the data: a transaction that does (hint `grows` of
   * `Engine.transact`: the journal's `append` and `appendBatch`, nothing
   * else) is refused as `quota_exceeded` (not retryable; the journal answers
   * a `BackendError` `backend` with this error as `cause`; no `DOMException`
   * under it) and writes nothing, when the origin's usage plus what it would
   * write exceeds `quota - reserveBytes`. Claims, acks, nacks, quarantines,
   * prunes and the engine's checkpoints may use the reserve.
   *
   * Why: measured in Chromium 156 on disk, an origin at its quota has every
   * IndexedDB put refused (even 100 bytes), and deleting raises the usage
   * (deletes are logged; the space returns only when the storage compacts),
   * so a journal whose appends filled the quota could never be drained.
   * When a growing transaction is refused while the engine's log holds
   * change records (a prune's deletes not yet out of the pages), the engine
   * writes the log into the pages, reads a fresh estimate and runs the body
   * once more, so that space a drain freed is taken at once where the
   * storage gives it back (in memory, off the record).
   *
   * Default: a tenth of the quota, at least 64 MiB, at most half the quota
   * (`defaultReserveBytes`). At real quotas (GBs: Chromium grants an origin
   * up to 60% of the disk, Firefox up to 10 GiB best-effort) that keeps
   * 64 MiB to a few GiB free. The floor: the usage Chromium counts on disk
   * jumps far beyond what is written (measured: 0.5-0.65 MB when a checkpoint
   * writes the log's 256 KB into pages, 1.6-5.4 MB when LevelDB turns its
   * 4 MiB write buffer into a table, falling back later or not for minutes),
   * and a LevelDB compaction rewrites tens of MB before it frees the old
   * files; the reserve must hold such a jump with room to spare for the
   * drain itself (a claim and ack of 100 events write tens of KB). The
   * fraction: what draining needs grows with the journal, the origin's other
   * storage shares the quota, and the estimate lags other tabs by up to a
   * second. `0` turns the check off.
   *
   * Usage and quota are `navigator.storage.estimate()`'s (one IPC, about
   * 0.3-0.6 ms in Chromium 156, against 1.4 ms or more for a strict append),
   * read again only when stale: after a second, once this engine wrote a
   * quarter of the room left above the limit (between two estimates its own
   * commits are added), and after a refusal; so an append's cost does not
   * measurably move. Where there is no `navigator.storage` (Node with
   * fake-indexeddb, old browsers), or the estimate fails, has no quota or
   * does not answer within a second (its answer is taken when it comes),
   * nothing is refused by this check.
   */
  readonly reserveBytes?: number;
  /**
   * The StorageManager whose `estimate()` gives the usage and quota that
   * `reserveBytes` is checked against; defaults to `navigator.storage`,
   * looked up on first use. `null`: no check.
   */
  readonly storage?: StorageManagerLike | null;
}

/**
 * Create an {@link Engine} over the IndexedDB database `name` (created on
 * first use). The connection opens lazily; call `open()` on the result to
 * open it now and surface a `blocked` or failed open early.
 *
 * Transaction bodies must await nothing but their own transaction's calls:
 * IndexedDB commits a transaction as soon as it waits on anything else.
 *
 * @example
 * ```ts
 * import { createJournal } from "isostore";
 * import { indexedDbEngine, requestPersistentStorage } from "isostore/indexeddb";
 *
 * await requestPersistentStorage();
 * const engine = indexedDbEngine({ name: "usage" }); // durability "strict": billing-grade
 * await engine.open();
 * const journal = createJournal(engine, { name: "usage" });
 * journal.mode; // "billing_grade"
 * ```
 */
export function indexedDbEngine(options: IndexedDbEngineOptions): IndexedDbEngineHandle {
  if (options === null || typeof options !== "object") throw new TypeError("indexedDbEngine needs { name }");
  const { name, durability = "strict" } = options;
  if (typeof name !== "string" || name.length === 0) throw new TypeError("indexedDbEngine: `name` must be a non-empty string");
  if (durability !== "strict" && durability !== "relaxed") {
    throw new TypeError(`indexedDbEngine: \`durability\` must be "strict" or "relaxed", got ${String(durability)}`);
  }
  const { reserveBytes, storage } = options;
  if (reserveBytes !== undefined && (typeof reserveBytes !== "number" || !Number.isFinite(reserveBytes) || reserveBytes < 0)) {
    throw new TypeError(`indexedDbEngine: \`reserveBytes\` must be a finite number of bytes, at least 0, got ${String(reserveBytes)}`);
  }
  if (storage !== undefined && storage !== null && typeof storage !== "object") {
    throw new TypeError("indexedDbEngine: `storage` must be a StorageManager (or null)");
  }
  const factory = options.indexedDB;
  const keyRange = options.IDBKeyRange;
  let platform: (() => IndexedDbPlatform) | undefined;
  if (factory !== undefined || keyRange !== undefined) {
    platform = () => {
      const host = globalThis as { indexedDB?: IDBFactory; IDBKeyRange?: typeof IDBKeyRange };
      const indexedDB = factory ?? host.indexedDB;
      const IDBKeyRangeClass = keyRange ?? host.IDBKeyRange;
      if (indexedDB === undefined || IDBKeyRangeClass === undefined) {
        throw new TypeError("indexedDbEngine: pass both `indexedDB` and `IDBKeyRange` where the platform has no IndexedDB");
      }
      return { indexedDB, IDBKeyRange: IDBKeyRangeClass };
    };
  }
  return new IndexedDbEngine({
    name,
    durability,
    platform,
    reserveBytes,
    storage: storage === undefined ? undefined : () => storage ?? undefined,
  });
}

/** The engine {@link indexedDbEngine} returns: an {@link Engine} plus its name, durability and `open()`. */
export interface IndexedDbEngineHandle extends Engine {
  readonly name: string;
  readonly durability: IndexedDbDurability;
  /** Open (create or upgrade) the database now; rejects with a typed error (e.g. `blocked`). */
  open(): Promise<void>;
}

export type { IndexedDbDurability } from "./indexeddb-engine.js";
export { IndexedDbEngineError, type IndexedDbEngineErrorCode } from "./errors.js";
export { requestPersistentStorage, type PersistentStorageReport, type StorageManagerLike } from "./persistent-storage.js";
export { SCHEMA_VERSION, type IndexedDbEngineSchema } from "./schema.js";
export { defaultReserveBytes } from "./headroom.js";
export type { Engine } from "../../src/engine.js";
