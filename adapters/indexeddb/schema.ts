/// <reference lib="dom" />
/**
 * What the IndexedDB engine keeps on disk, and how a database gets there.
 *
 * One database per engine name with two object stores (schema v4):
 * - `pages`: the rows, packed into pages keyed by their low fence (a key
 *   encoding), each holding a sorted run of rows (`./pages.ts`). No indexes:
 *   the core keeps its own secondary-index entries.
 * - `log`: one record per committed writing transaction since the last
 *   checkpoint, keyed by the database version it made (`./log.ts`): the
 *   changes not yet written into the pages, or the checkpoint itself. Its
 *   newest key is the database version, which tells an engine whether what
 *   it caches is still current. Two indexes: `bases` (unique, multi-entry,
 *   over `b`: the versions each record was made on, so two commits made on
 *   one version cannot both be stored) and `checkpoints` (over `cp`, only
 *   checkpoint records have it: the newest one is where an engine with an
 *   empty cache starts reading). Replaced checkpoint records are kept for a
 *   while as evidence (`./log.ts`).
 *
 * Schema v1 stored one record per row in an `entries` store keyed by the tuple
 * key itself; the v2 migration copies those rows into pages, in key order, and
 * drops the store. Schema v2 kept the version in a `meta` store; v3 replaces
 * it with the log, starting with a checkpoint record (the pages hold
 * everything) at version 1. v4 adds the two indexes and gives the existing
 * checkpoint record its fields (an old time: it is kept no longer than the
 * next checkpoint); change records from before carry no bases, which is
 * harmless: every engine reads the version after the upgrade before it
 * trusts one. The version step makes every connection of older
 * code close (`versionchange`), so no engine that ignores the log reads pages
 * it has not seen written.
 *
 * Schema versions are the positions in {@link MIGRATIONS}: version `n` is the
 * result of running the first `n` migrations, so an upgrade from `old` runs
 * `MIGRATIONS[old..]` inside the `versionchange` transaction, and a failing
 * migration aborts the upgrade (the open rejects, nothing changed). Migrations
 * are only ever appended.
 *
 * Opening promises: an open answers, or rejects with a typed error, without
 * hanging.
 * - A `blocked` open (an older connection elsewhere that does not close)
 *   rejects at once with a retryable `blocked` error. IndexedDB cannot take
 *   an open back: the request stays pending, and if it later succeeds (the
 *   other connection closed; its upgrade then runs), its connection is
 *   closed.
 * - IndexedDB queues every later open of the database behind that pending
 *   request, so those would wait as long: while it is pending, an open of the
 *   same database through the same factory (a retry, or another engine
 *   reopening after it stepped aside on `versionchange`) rejects at once
 *   with a retryable `blocked` error too, as does any such open already
 *   queued behind it, and issues no request. Once the pending request
 *   ended, opens go through again (and one at an older version than the
 *   upgrade that ran meanwhile gets `version`).
 * - An open that gets no answer at all within {@link OPEN_WAIT_MS} waits
 *   behind an open this module does not know of (another tab's blocked
 *   upgrade, a delete): it rejects with a retryable `blocked` error, and is
 *   then pending as above.
 */
import type { DBSchema } from "idb";
import type { Key } from "../../src/engine.js";
import { encodeKey } from "../../src/ordered/key-encoding.js";
import { IndexedDbEngineError, openError } from "./errors.js";
import { type CheckpointRecord, isCheckpoint, type LogRecord } from "./log.js";
import { DEFAULT_PAGE_LIMITS, PageBuilder, sizeOf, type PageRecord } from "./pages.js";

/** The store of pages (schema v2). */
export const PAGES_STORE = "pages";
/** The store of schema v2's version counter (gone from v3 on). */
const META_STORE = "meta";
/** The store of the committed log (schema v3). */
export const LOG_STORE = "log";
/** Schema v1's one store, a record per row (gone from v2 on). */
const ENTRIES_STORE = "entries";
/** The log's index of the versions each record was made on (schema v4). */
export const BASES_INDEX = "bases";
/** The log's index of checkpoint records by version (schema v4). */
export const CHECKPOINTS_INDEX = "checkpoints";
/** Rows the v2 migration reads per request. */
const MIGRATION_BATCH = 512;

/**
 * The stored schema as an `idb` {@link DBSchema}, so code that opens an engine
 * database with `idb` (inspection tools, exports) gets typed handles.
 */
export interface IndexedDbEngineSchema extends DBSchema {
  pages: {
    /** The page's low fence: a key encoding (`""` for the first page). */
    key: string;
    value: PageRecord;
  };
  log: {
    /** The database version the record's commit made. */
    key: number;
    value: LogRecord;
    indexes: {
      /** The versions a record was made on (unique). */
      bases: number;
      /** A checkpoint record's own version. */
      checkpoints: number;
    };
  };
}

/**
 * One schema step, run inside the upgrade transaction. It gets the raw
 * handles, not `idb`'s wrappers: those recognise IndexedDB objects through the
 * platform's interface globals (`instanceof IDBRequest`...), which an injected
 * factory (fake-indexeddb in Node without `/auto`) does not provide.
 */
export type Migration = (db: IDBDatabase, tx: IDBTransaction, keyRanges: typeof IDBKeyRange) => void;

/** Every schema step, oldest first. Append only. */
export const MIGRATIONS: readonly Migration[] = [
  // v1: the entries store, keyed by the tuple key (out-of-line keys).
  (db) => {
    db.createObjectStore(ENTRIES_STORE);
  },
  // v2: rows packed into pages; v1's rows are copied over in key order, then its store goes.
  (db, tx, keyRanges) => {
    const pages = db.createObjectStore(PAGES_STORE);
    db.createObjectStore(META_STORE).put(0, "version");
    const entries = tx.objectStore(ENTRIES_STORE);
    const builder = new PageBuilder(DEFAULT_PAGE_LIMITS, (page) => pages.put(page.toRecord(), page.lo));
    // Batches of keys and values (two requests over the same range see the same rows).
    const step = (after: IDBValidKey | undefined): void => {
      const query = after === undefined ? undefined : keyRanges.lowerBound(after, true);
      const keys = entries.getAllKeys(query, MIGRATION_BATCH);
      const values = entries.getAll(query, MIGRATION_BATCH);
      values.onsuccess = () => {
        const k = keys.result;
        const v = values.result;
        for (let i = 0; i < k.length; i++) builder.add(encodeKey(k[i] as unknown as Key), v[i], sizeOf(v[i]));
        if (k.length === MIGRATION_BATCH) step(k[k.length - 1]);
        else {
          builder.finish();
          db.deleteObjectStore(ENTRIES_STORE);
        }
      };
    };
    step(undefined);
  },
  // v3: the log replaces the version counter; the pages hold everything, as a checkpoint says.
  (db) => {
    db.deleteObjectStore(META_STORE);
    db.createObjectStore(LOG_STORE).add({ checkpoint: true } satisfies LogRecord, 1);
  },
  // v4: evidence of every commit (the bases index) and the checkpoints index; the existing checkpoint gets its fields.
  (_db, tx) => {
    const log = tx.objectStore(LOG_STORE);
    log.createIndex(BASES_INDEX, "b", { unique: true, multiEntry: true });
    log.createIndex(CHECKPOINTS_INDEX, "cp");
    const cursor = log.openCursor();
    cursor.onsuccess = () => {
      const at = cursor.result;
      if (at === null) return;
      const record = at.value as LogRecord;
      if (isCheckpoint(record) && record.cp === undefined) {
        at.update({ checkpoint: true, cp: at.key as number, at: 0, b: [] } satisfies CheckpointRecord);
      }
      at.continue();
    };
  },
];

/** The schema version this code writes and reads. */
export const SCHEMA_VERSION = MIGRATIONS.length;

/**
 * How long an open may wait for its first answer (upgradeneeded, blocked,
 * success or error), in ms, before it rejects `blocked`: only an open queued
 * behind another pending open or delete of the database waits that long
 * (an open normally answers within milliseconds; a slow upgrade has answered
 * `upgradeneeded` already).
 */
export const OPEN_WAIT_MS = 10_000;

/** An open request issued by {@link openEngineDatabase} and not ended yet. */
interface PendingOpen {
  readonly version: number;
  /** Set once its caller got `blocked` while the request stays pending (IndexedDB queues later opens behind it). */
  abandoned: boolean;
  /** Answer its caller with `error` (once; later calls do nothing) and mark it abandoned. */
  readonly refuse: (error: IndexedDbEngineError) => void;
}

/**
 * The pending open requests of {@link openEngineDatabase}, by factory and
 * database name, in the order they were issued (IndexedDB's order too).
 */
const pendingOpens = new WeakMap<IDBFactory, Map<string, PendingOpen[]>>();

/** The pending opens of `name` through `factory` (a live list, created when missing). */
function pendingOf(factory: IDBFactory, name: string): PendingOpen[] {
  let byName = pendingOpens.get(factory);
  if (byName === undefined) pendingOpens.set(factory, (byName = new Map<string, PendingOpen[]>()));
  let list = byName.get(name);
  if (list === undefined) byName.set(name, (list = []));
  return list;
}

/** Forget `entry` (its request ended). */
function forgetOpen(factory: IDBFactory, name: string, entry: PendingOpen): void {
  const byName = pendingOpens.get(factory);
  const list = byName?.get(name);
  if (list === undefined) return;
  const i = list.indexOf(entry);
  if (i >= 0) list.splice(i, 1);
  if (list.length === 0) byName!.delete(name);
}

/** The `blocked` error of an open of `name` at `version` that would queue behind the abandoned open at `ahead`. */
function behindError(name: string, version: number, ahead: number): IndexedDbEngineError {
  return new IndexedDbEngineError(
    "blocked",
    `opening "${name}" at version ${version} would wait behind an earlier open at version ${ahead} that is still pending (blocked by another connection that has not closed, e.g. another tab with older code, or waiting behind another tab's open); retry once it closed`,
    { retryable: true },
  );
}

/**
 * Open (creating or upgrading) the engine database `name` through `factory`.
 * Resolves with the raw connection; the engine drives raw requests on its hot
 * path (see `./indexeddb-engine.ts`). `migrations` is for tests (a later
 * schema version); the engine always passes {@link MIGRATIONS}. Never hangs
 * (see the module comment): rejects `blocked` at once when blocked or behind
 * a blocked open, and after `waitMs` ({@link OPEN_WAIT_MS}) without answer.
 */
export function openEngineDatabase(
  factory: IDBFactory,
  keyRanges: typeof IDBKeyRange,
  name: string,
  migrations: readonly Migration[] = MIGRATIONS,
  waitMs: number = OPEN_WAIT_MS,
): Promise<IDBDatabase> {
  const version = migrations.length;
  return new Promise<IDBDatabase>((resolve, reject) => {
    const stuck = pendingOpens
      .get(factory)
      ?.get(name)
      ?.find((entry) => entry.abandoned);
    if (stuck !== undefined) {
      // A request would only queue behind it: answer now, and issue none.
      reject(behindError(name, version, stuck.version));
      return;
    }
    let request: IDBOpenDBRequest;
    try {
      request = factory.open(name, version);
    } catch (error) {
      reject(openError(error));
      return;
    }
    let settled = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const entry: PendingOpen = {
      version,
      abandoned: false,
      refuse: (error) => {
        entry.abandoned = true;
        if (settled) return;
        settled = true;
        reject(error);
      },
    };
    pendingOf(factory, name).push(entry);
    /** Any answer of the request: it is not queued behind another any more. */
    const answered = (): void => {
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    };
    /** The request ended (success or error): later opens go through again. */
    const ended = (): void => {
      answered();
      forgetOpen(factory, name, entry);
    };
    /** Answer the caller with `error` while the request stays pending, and the opens queued behind it too. */
    const abandon = (error: IndexedDbEngineError): void => {
      if (settled) return;
      entry.refuse(error);
      const list = pendingOpens.get(factory)?.get(name) ?? [];
      for (const later of list.slice(list.indexOf(entry) + 1)) later.refuse(behindError(name, later.version, version));
    };
    timer = setTimeout(() => {
      timer = undefined;
      abandon(
        new IndexedDbEngineError(
          "blocked",
          `opening "${name}" at version ${version} got no answer within ${waitMs} ms: it waits behind another open or delete of the database (another tab upgrading, blocked by a connection that does not close?); retry later`,
          { retryable: true },
        ),
      );
    }, waitMs);
    request.onupgradeneeded = (event) => {
      answered();
      const tx = request.transaction!;
      try {
        for (let step = event.oldVersion; step < version; step++) migrations[step]!(request.result, tx, keyRanges);
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
      answered();
      abandon(
        new IndexedDbEngineError(
          "blocked",
          `opening "${name}" at version ${version} is blocked by another connection at version ${event.oldVersion} (another tab with older code?); close it and retry`,
          { cause: event, retryable: true },
        ),
      );
    };
    request.onsuccess = () => {
      ended();
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
      ended();
      // Handled here: keep the failure from surfacing as an uncaught error event.
      event.preventDefault();
      if (settled) return;
      settled = true;
      reject(openError(request.error));
    };
  });
}
