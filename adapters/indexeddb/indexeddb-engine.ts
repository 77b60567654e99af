/// <reference lib="dom" />
/**
 * The IndexedDB engine's implementation: an {@link Engine} whose every
 * `transact` is exactly one IndexedDB transaction over the `entries` store
 * (`./schema.ts`). The public entry point is `indexedDbEngine()` in
 * `./index.ts`.
 *
 * What it promises, beyond the {@link Engine} contract:
 * - Atomicity is IndexedDB's: `put` / `delete` / `deleteRange` issue requests without waiting
 *   (a request that fails aborts the transaction, so `transact` rejects);
 *   `get` / `scan` await their requests. A body that throws or rejects aborts
 *   the transaction (`tx.abort()`) and `transact` rejects with exactly what it
 *   threw. A call the engine refuses (invalid key, write in a "readonly"
 *   transaction, bad scan limit, a dead handle) throws from the call and, like
 *   the memory engine, dooms the transaction even if the body catches it.
 * - `transact` resolves only after the transaction's `complete` event: with
 *   `durability: "strict"` that is after the data reached the disk, which is
 *   what makes the engine `durable` (billing-grade). `"relaxed"` commits once
 *   the OS has the data and is reported as not durable.
 * - Serializability is IndexedDB's: readwrite transactions on one store run one
 *   at a time in creation order (across tabs too), and `transact` creates its
 *   transaction synchronously once connected, in call order.
 * - The connection is opened on first use (or by `open()`), closed by itself
 *   on `versionchange` (another tab upgrading or deleting the database) and
 *   reopened by the next `transact`. Failures are typed (`./errors.ts`).
 * - No platform global is read before the first call, and only
 *   `indexedDB` / `IDBKeyRange` (each replaceable by an option), so the module
 *   loads in Node, a page, a Web Worker or a Service Worker alike.
 *
 * Body rules (IndexedDB commits a transaction as soon as it has no pending
 * request when control returns to the event loop): await nothing but this
 * transaction's calls. A body that breaks the rule and then throws gets a
 * `committed_early` error, because its earlier writes may have committed.
 */
import {
  invalidKeyError,
  checkScanLimit,
  assertValidKey,
  type Engine,
  type EngineTransaction,
  type Entry,
  type Key,
  type KeyRange,
  type ScanOptions,
  type TransactionMode,
} from "../../src/engine.js";
import { connectionLostError, IndexedDbEngineError, transactionAbortError } from "./errors.js";
import { ENTRIES_STORE, MIGRATIONS, openEngineDatabase, type Migration } from "./schema.js";

const PREFIX = "isostore indexeddb engine: ";

/** How strongly a committed readwrite transaction is flushed (IndexedDB's `durability`). */
export type IndexedDbDurability = "strict" | "relaxed";

/** What the engine needs from the platform. */
export interface IndexedDbPlatform {
  readonly indexedDB: IDBFactory;
  readonly IDBKeyRange: typeof IDBKeyRange;
}

/** One record of `IDBObjectStore.getAllRecords` (newer than TypeScript's DOM lib). */
interface IdbRecord {
  readonly key: IDBValidKey;
  readonly value: unknown;
}

/** `getAllRecords`, where the platform has it (Chromium 141+, fake-indexeddb 6). */
type GetAllRecords = (options: { query?: IDBKeyRange | null; count?: number; direction?: IDBCursorDirection }) => IDBRequest<IdbRecord[]>;

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

/** Whether `key` is a non-empty array of strings and finite numbers (the fast check before `assertValidKey`). */
function isValidKey(key: unknown): key is Key {
  if (!Array.isArray(key) || key.length === 0) return false;
  for (const part of key as unknown[]) {
    if (typeof part !== "string" && (typeof part !== "number" || !Number.isFinite(part))) return false;
  }
  return true;
}

/** The error of a call on a settled transaction's handle. */
function dead(): Error {
  return new Error(`${PREFIX}this transaction has already finished; its handle cannot be used any more`);
}

/** The error of a write in a readonly transaction. */
function readonlyWrite(what: string): TypeError {
  return new TypeError(`${PREFIX}${what} in a readonly transaction`);
}

/** A request's result as a promise (a failed request also aborts its transaction). */
function requestResult<T>(request: IDBRequest<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error ?? new Error(`${PREFIX}request failed`));
  });
}

/** An engine key as IndexedDB takes it (our readonly tuple is a valid array key). */
function idbKey(key: Key | readonly unknown[]): IDBValidKey {
  return key as unknown as IDBValidKey;
}

/**
 * The IndexedDB range of an engine {@link KeyRange}: `prefix`, `lower` and
 * `upper` intersected into one interval (the tighter bound wins; on a tie, the
 * open one). `undefined` is every key, `null` no key at all.
 *
 * A prefix `p` is the interval `[p, [...p, []])`: an array element sorts after
 * every string and number, so `[...p, []]` lies above every key that extends
 * `p` and below every key after them.
 */
function toIdbRange(range: KeyRange, platform: IndexedDbPlatform): IDBKeyRange | undefined | null {
  const cmp = (a: readonly unknown[], b: readonly unknown[]): number => platform.indexedDB.cmp(a, b);
  let lower: readonly unknown[] | undefined;
  let lowerOpen = false;
  let upper: readonly unknown[] | undefined;
  let upperOpen = false;
  if (range.prefix) {
    const prefix: unknown = range.prefix;
    // An empty prefix is every key (as in `inRange`); otherwise it must be a valid key.
    if (!(Array.isArray(prefix) && prefix.length === 0)) {
      assertValidKey(prefix);
      lower = prefix;
      upper = [...prefix, []];
      upperOpen = true;
    }
  }
  if (range.lower) {
    assertValidKey(range.lower);
    const open = range.lowerOpen === true;
    const c = lower === undefined ? 1 : cmp(range.lower, lower);
    if (c > 0 || (c === 0 && open)) {
      lower = range.lower;
      lowerOpen = open;
    }
  }
  if (range.upper) {
    assertValidKey(range.upper);
    const open = range.upperOpen === true;
    const c = upper === undefined ? -1 : cmp(range.upper, upper);
    if (c < 0 || (c === 0 && open)) {
      upper = range.upper;
      upperOpen = open;
    }
  }
  const KeyRangeClass = platform.IDBKeyRange;
  if (lower !== undefined && upper !== undefined) {
    const c = cmp(lower, upper);
    if (c > 0 || (c === 0 && (lowerOpen || upperOpen))) return null;
    return KeyRangeClass.bound(lower, upper, lowerOpen, upperOpen);
  }
  if (lower !== undefined) return KeyRangeClass.lowerBound(lower, lowerOpen);
  if (upper !== undefined) return KeyRangeClass.upperBound(upper, upperOpen);
  return undefined;
}

/** One resolved empty scan, shared. */
const NO_ENTRIES: Promise<Entry<never>[]> = Promise.resolve([]);

/** The handle of one IndexedDB transaction. */
class IndexedDbTransaction implements EngineTransaction {
  /** False once the body settled: every call then throws. */
  live = true;
  /** Set by the first refused call; dooms the transaction. */
  failed = false;
  failure: unknown = undefined;

  constructor(
    private readonly store: IDBObjectStore,
    private readonly readonly: boolean,
    private readonly platform: IndexedDbPlatform,
    /** Aborts the transaction (when a refused call dooms it). */
    private readonly doom: () => void,
  ) {}

  get<V = unknown>(key: Key): Promise<V | undefined> {
    if (!this.live) throw dead();
    if (!isValidKey(key)) throw this.fail(invalidKeyError(key));
    let request: IDBRequest;
    try {
      request = this.store.get(idbKey(key));
    } catch (error) {
      throw this.fail(error);
    }
    return requestResult(request) as Promise<V | undefined>;
  }

  put(key: Key, value: unknown): void {
    if (!this.live) throw dead();
    if (this.readonly) throw this.fail(readonlyWrite("put"));
    if (!isValidKey(key)) throw this.fail(invalidKeyError(key));
    try {
      // Not awaited: a failing request aborts the transaction, and transact rejects.
      this.store.put(value, idbKey(key));
    } catch (error) {
      // Synchronous refusals: DataCloneError (a value that cannot be stored), TransactionInactiveError.
      throw this.fail(error);
    }
  }

  delete(key: Key): void {
    if (!this.live) throw dead();
    if (this.readonly) throw this.fail(readonlyWrite("delete"));
    if (!isValidKey(key)) throw this.fail(invalidKeyError(key));
    try {
      this.store.delete(idbKey(key));
    } catch (error) {
      throw this.fail(error);
    }
  }

  /** One request for the whole range (`IDBObjectStore.delete` of a key range). */
  deleteRange(range: KeyRange): void {
    if (!this.live) throw dead();
    if (this.readonly) throw this.fail(readonlyWrite("deleteRange"));
    try {
      const query = toIdbRange(range, this.platform);
      if (query === null) return;
      if (query === undefined) this.store.clear();
      else this.store.delete(query);
    } catch (error) {
      throw this.fail(error);
    }
  }

  scan<V = unknown>(range: KeyRange, options?: ScanOptions): Promise<Entry<V>[]> {
    if (!this.live) throw dead();
    try {
      const bound = checkScanLimit(options?.limit, PREFIX);
      const limit = bound === Infinity ? undefined : bound;
      const reverse = options?.reverse === true;
      const query = toIdbRange(range, this.platform);
      if (query === null) return NO_ENTRIES;
      return this.read<V>(query, limit, reverse);
    } catch (error) {
      throw this.fail(error);
    }
  }

  /** Read the entries of `query` in one request where the platform allows it. */
  private read<V>(query: IDBKeyRange | undefined, limit: number | undefined, reverse: boolean): Promise<Entry<V>[]> {
    const store = this.store;
    const getAllRecords = (store as unknown as { getAllRecords?: GetAllRecords }).getAllRecords;
    if (typeof getAllRecords === "function") {
      const options: { query?: IDBKeyRange; count?: number; direction?: IDBCursorDirection } = {};
      if (query !== undefined) options.query = query;
      if (limit !== undefined) options.count = limit;
      if (reverse) options.direction = "prev";
      return requestResult(getAllRecords.call(store, options)).then((records) =>
        records.map((record) => ({ key: record.key as unknown as Key, value: record.value as V })),
      );
    }
    if (!reverse) {
      // Two requests of one transaction see the same data.
      const keys = requestResult(store.getAllKeys(query, limit));
      const values = requestResult(store.getAll(query, limit));
      return Promise.all([keys, values]).then(([k, v]) => k.map((key, i) => ({ key: key as unknown as Key, value: v[i] as V })));
    }
    return new Promise<Entry<V>[]>((resolve, reject) => {
      const out: Entry<V>[] = [];
      const request = store.openCursor(query, "prev");
      request.onsuccess = () => {
        const cursor = request.result;
        if (cursor === null) {
          resolve(out);
          return;
        }
        out.push({ key: cursor.key as unknown as Key, value: cursor.value as V });
        if (limit !== undefined && out.length >= limit) resolve(out);
        else cursor.continue();
      };
      request.onerror = () => reject(request.error ?? new Error(`${PREFIX}cursor failed`));
    });
  }

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

/** Options of the {@link IndexedDbEngine} constructor (see `indexedDbEngine()`). */
export interface IndexedDbEngineConfig {
  readonly name: string;
  readonly durability: IndexedDbDurability;
  /** Resolved on first use; `undefined` means the platform's globals. */
  readonly platform: (() => IndexedDbPlatform) | undefined;
  /** Schema steps (tests pass a longer list to simulate newer code); default {@link MIGRATIONS}. */
  readonly migrations?: readonly Migration[];
}

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
  private platform: IndexedDbPlatform | null = null;
  private db: IDBDatabase | null = null;
  private opening: Promise<IDBDatabase> | null = null;
  private closed = false;
  /** `transact` calls not settled yet. */
  private pending = 0;
  /** `close()` calls waiting for `pending` to reach 0. */
  private drained: (() => void)[] = [];

  constructor(config: IndexedDbEngineConfig) {
    this.name = config.name;
    this.durability = config.durability;
    this.durable = config.durability === "strict";
    this.options = { durability: config.durability };
    this.resolvePlatform = config.platform ?? platformFromGlobals;
    this.migrations = config.migrations ?? MIGRATIONS;
  }

  /**
   * Open the database now (creating or upgrading it) instead of on the first
   * `transact`, to surface a `blocked` or failed open early. Harmless when open.
   */
  async open(): Promise<void> {
    if (this.closed) throw this.closedError();
    if (this.db === null) await this.connect();
  }

  transact<T>(mode: TransactionMode, fn: (tx: EngineTransaction) => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(this.closedError());
    if (mode !== "readonly" && mode !== "readwrite") {
      return Promise.reject(new TypeError(`${PREFIX}unknown transaction mode ${String(mode)}`));
    }
    if (typeof fn !== "function") return Promise.reject(new TypeError(`${PREFIX}transact needs a function`));
    this.pending++;
    // Connected: create the transaction now, so transactions start in call order.
    const run = this.db !== null ? this.run(this.db, mode, fn) : this.connect().then((db) => this.run(db, mode, fn));
    return run.finally(() => this.settled());
  }

  /**
   * Refuse every later `transact`, let the running ones finish, then close the
   * connection. The data stays on disk: a new engine on the same name sees it.
   */
  async close(): Promise<void> {
    this.closed = true;
    if (this.pending > 0) {
      await new Promise<void>((resolve) => {
        this.drained.push(resolve);
      });
    }
    if (this.opening !== null) {
      // An open started by `open()` with no transaction: wait for it, then close it.
      await this.opening.then(
        () => undefined,
        () => undefined,
      );
    }
    this.db?.close();
    this.db = null;
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
      this.opening = openEngineDatabase(platform.indexedDB, this.name, this.migrations).then(
        (db) => {
          this.opening = null;
          this.db = db;
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

  /** Run `fn` in one IndexedDB transaction on `db`. */
  private run<T>(db: IDBDatabase, mode: TransactionMode, fn: (tx: EngineTransaction) => Promise<T>): Promise<T> {
    const platform = this.platform!;
    return new Promise<T>((resolve, reject) => {
      let tx: IDBTransaction;
      try {
        tx = mode === "readwrite" ? db.transaction(ENTRIES_STORE, mode, this.options) : db.transaction(ENTRIES_STORE, mode);
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
      const handle = new IndexedDbTransaction(tx.objectStore(ENTRIES_STORE), mode === "readonly", platform, abort);
      const settle = (): void => {
        if (body === 0 || state === 0) return;
        if (state === 1) {
          if (body === 1) resolve(outcome as T);
          else {
            reject(
              new IndexedDbEngineError(
                "committed_early",
                "the transaction body failed after IndexedDB had already committed it (the body awaited something other than its own transaction's calls); its earlier writes may be stored",
                { cause: outcome, retryable: false },
              ),
            );
          }
          return;
        }
        // Aborted: by us (a body failure or a refused call), else by the platform.
        // Exactly what the body threw, or the refused call's error (Error or not).
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
        if (abortedByUs) reject(body === 2 ? outcome : handle.failure);
        else reject(transactionAbortError(tx.error));
      };
      tx.oncomplete = () => {
        state = 1;
        settle();
      };
      tx.onabort = () => {
        state = 2;
        settle();
      };
      const onFulfilled = (value: unknown): void => {
        handle.live = false;
        body = 1;
        outcome = value;
        if (handle.failed) abort();
        else if (state === 0) commitNow(tx);
        settle();
      };
      const onRejected = (error: unknown): void => {
        handle.live = false;
        body = 2;
        outcome = error;
        abort();
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
