/// <reference lib="dom" />
/**
 * What the IndexedDB engine keeps on disk, and how a database gets there.
 *
 * One database per engine name, one object store `entries` whose records are
 * keyed by the engine's tuple key itself (IndexedDB array keys order exactly
 * like engine keys: numbers before strings, element-wise, a prefix first),
 * with the value stored as is (structured clone). No indexes: the core keeps
 * its own secondary-index entries.
 *
 * Schema versions are the positions in {@link MIGRATIONS}: version `n` is the
 * result of running the first `n` migrations, so an upgrade from `old` runs
 * `MIGRATIONS[old..]` inside the `versionchange` transaction, and a failing
 * migration aborts the upgrade (the open rejects, nothing changed). Migrations
 * are only ever appended.
 *
 * Opening promises: a `blocked` open (an older connection elsewhere that does
 * not close) rejects at once with a retryable `blocked` error instead of
 * hanging; if that open later succeeds anyway, its connection is closed.
 */
import type { DBSchema } from "idb";
import { IndexedDbEngineError, openError } from "./errors.js";

/** The one object store of an engine database. */
export const ENTRIES_STORE = "entries";

/**
 * The stored schema as an `idb` {@link DBSchema}, so code that opens an engine
 * database with `idb` (inspection tools, exports) gets typed handles.
 */
export interface IndexedDbEngineSchema extends DBSchema {
  entries: {
    /** An engine tuple key (strings and finite numbers). */
    key: (string | number)[];
    value: unknown;
  };
}

/**
 * One schema step, run inside the upgrade transaction. It gets the raw
 * handles, not `idb`'s wrappers: those recognise IndexedDB objects through the
 * platform's interface globals (`instanceof IDBRequest`...), which an injected
 * factory (fake-indexeddb in Node without `/auto`) does not provide.
 */
export type Migration = (db: IDBDatabase, tx: IDBTransaction) => void;

/** Every schema step, oldest first. Append only. */
export const MIGRATIONS: readonly Migration[] = [
  // v1: the entries store, keyed by the tuple key (out-of-line keys).
  (db) => {
    db.createObjectStore(ENTRIES_STORE);
  },
];

/** The schema version this code writes and reads. */
export const SCHEMA_VERSION = MIGRATIONS.length;

/**
 * Open (creating or upgrading) the engine database `name` through `factory`.
 * Resolves with the raw connection; the engine drives raw requests on its hot
 * path (see `./indexeddb-engine.ts`). `migrations` is for tests (a later
 * schema version); the engine always passes {@link MIGRATIONS}.
 */
export function openEngineDatabase(factory: IDBFactory, name: string, migrations: readonly Migration[] = MIGRATIONS): Promise<IDBDatabase> {
  const version = migrations.length;
  return new Promise<IDBDatabase>((resolve, reject) => {
    let request: IDBOpenDBRequest;
    try {
      request = factory.open(name, version);
    } catch (error) {
      reject(openError(error));
      return;
    }
    let settled = false;
    request.onupgradeneeded = (event) => {
      const tx = request.transaction!;
      try {
        for (let step = event.oldVersion; step < version; step++) migrations[step]!(request.result, tx);
      } catch (error) {
        // A half-run upgrade must not commit: abort it, and the open rejects with the cause.
        tx.abort();
        if (!settled) {
          settled = true;
          reject(new IndexedDbEngineError("open_failed", `schema migration failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error, retryable: false }));
        }
      }
    };
    request.onblocked = (event) => {
      if (settled) return;
      settled = true;
      reject(
        new IndexedDbEngineError(
          "blocked",
          `opening "${name}" at version ${version} is blocked by another connection at version ${event.oldVersion} (another tab with older code?); close it and retry`,
          { cause: event, retryable: true },
        ),
      );
    };
    request.onsuccess = () => {
      const db = request.result;
      if (settled) {
        // The caller already got "blocked" (or a migration error): nobody owns this connection.
        db.close();
        return;
      }
      settled = true;
      resolve(db);
    };
    request.onerror = (event) => {
      // Handled here: keep the failure from surfacing as an uncaught error event.
      event.preventDefault();
      if (settled) return;
      settled = true;
      reject(openError(request.error));
    };
  });
}
