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
 *   records stay for ten minutes, as evidence of the commits they replaced;
 * - pages read are cached per engine with the log after them, at the
 *   database version (one per writing transaction, in any tab) they were read
 *   at; a transaction that finds a newer version reads the log records after
 *   it, so another tab's writes are never read stale; while nothing else of
 *   the engine runs, a transaction reads its cache without waiting for the
 *   version: a write shortly after the last one stores its change record
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
 *   once (retryable) instead of hanging, a full quota is `quota_exceeded`, an
 *   abort is `aborted`; the journal reports them as `backend` errors with
 *   this error as `cause` (and the `DOMException` as its `cause`);
 * - schema versions with append-only migrations; on `versionchange` the
 *   connection closes itself and the next `transact` reopens;
 * - no `window`, and no platform global read before first use.
 */
import type { Engine } from "../../src/engine.js";
import { IndexedDbEngine, type IndexedDbDurability, type IndexedDbPlatform } from "./indexeddb-engine.js";

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
  return new IndexedDbEngine({ name, durability, platform });
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
export type { Engine } from "../../src/engine.js";
