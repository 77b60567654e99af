/**
 * The Engine: the only thing an adapter implements.
 *
 * A small transactional, ordered key-value store over tuple keys. Every
 * contract of the kit (the usage journal, the storage primitives, the queue)
 * is written once, over this interface, with its own secondary-index entries.
 *
 * Promises an Engine makes (checked by `isostore/testing`):
 * - Keys are tuples of strings and finite numbers, ordered element-wise the way
 *   IndexedDB orders array keys: a number sorts before any string, numbers by
 *   value, strings by UTF-16 code units, and a tuple that is a prefix of another
 *   sorts first.
 * - `transact(mode, fn)` runs `fn` in one transaction: it sees its own writes,
 *   and either all of its writes commit or, when `fn` throws (or the engine
 *   fails), none of them do. Transactions are serializable with respect to each
 *   other.
 * - Inside `fn`, code awaits nothing but the transaction's own calls
 *   (IndexedDB commits a transaction the moment it waits on anything else).
 * - An engine may run `fn` more than once for one `transact` call (the
 *   IndexedDB engine runs a body optimistically over its cache and runs it
 *   again when another tab wrote meanwhile). Only the last run's writes
 *   commit and only its result (or error) is what `transact` settles with, so
 *   `fn` must have no effect outside the transaction: it returns what it
 *   computed, and the caller acts on it after `transact` settled.
 * - Values are plain structured data (JSON-like values and `Uint8Array`). The
 *   core never mutates a value after `put` or after `get`, so an engine may hand
 *   back the very object it stored.
 */

/** One element of a tuple key. Numbers must be finite. */
export type KeyPart = string | number;

/** A tuple key, compared element-wise (see {@link compareKeys}). */
export type Key = readonly KeyPart[];

/**
 * Which keys a scan visits. All bounds are optional; `prefix` restricts the
 * scan to keys that begin with it, and `lower` / `upper` (full keys) narrow it
 * further.
 */
export interface KeyRange {
  /** Only keys that start with these elements. */
  readonly prefix?: Key;
  /** Smallest key visited (inclusive unless `lowerOpen`). */
  readonly lower?: Key;
  readonly lowerOpen?: boolean;
  /** Largest key visited (inclusive unless `upperOpen`). */
  readonly upper?: Key;
  readonly upperOpen?: boolean;
}

/** Options of {@link EngineTransaction.scan}. */
export interface ScanOptions {
  /** At most this many entries (a positive integer). Unbounded when absent. */
  readonly limit?: number;
  /** Visit keys in descending order. */
  readonly reverse?: boolean;
  /**
   * A hint: the caller reads only the entries' keys (a listing). An engine
   * may then leave every `value` undefined and skip reading and decoding the
   * values (the Durable Objects engine selects only the keys); one that
   * reads values anyway may return them. The keys, their order and the
   * limit are the same either way. Absent means false.
   */
  readonly keysOnly?: boolean;
}

/** One stored entry, as a scan returns it. */
export interface Entry<V = unknown> {
  readonly key: Key;
  readonly value: V;
}

/** Whether a transaction may write. */
export type TransactionMode = "readonly" | "readwrite";

/**
 * The handle a transaction body works with. `put` and `delete` are queued in
 * order and take effect for later reads of the same transaction at once; a
 * failure of either surfaces as the rejection of `transact`.
 */
export interface EngineTransaction {
  get<V = unknown>(key: Key): Promise<V | undefined>;
  put(key: Key, value: unknown): void;
  delete(key: Key): void;
  scan<V = unknown>(range: KeyRange, options?: ScanOptions): Promise<Entry<V>[]>;
  /**
   * Optional: delete every key `range` holds (the keys `scan(range)` would
   * visit), queued like `delete` and with the same effect as deleting each.
   * An engine offers it when it can do better than a scan and a delete per
   * key (IndexedDB: one request instead of one per key). Callers use
   * {@link clearRange}, which falls back to exactly that.
   */
  deleteRange?(range: KeyRange): void;
}

/**
 * Delete every key in `range`: with the engine's own `deleteRange` when it
 * has one (one request on IndexedDB), else by scanning the range and deleting
 * each key. Await it before relying on the keys being gone.
 *
 * @example
 * ```ts
 * await engine.transact("readwrite", async (tx) => {
 *   await clearRange(tx, { prefix: ["sessions", "user-1"] });
 * });
 * ```
 */
export async function clearRange(tx: EngineTransaction, range: KeyRange): Promise<void> {
  if (tx.deleteRange) {
    tx.deleteRange(range);
    return;
  }
  for (const entry of await tx.scan(range)) tx.delete(entry.key);
}

/**
 * Options of {@link Engine.transact}: hints about the transaction, never a
 * change of its meaning. An engine that has no use for a hint ignores it.
 */
export interface TransactOptions {
  /**
   * The transaction grows the stored data without bound: nothing else the
   * caller does takes back what it adds (the journal's `append` and
   * `appendBatch`, and nothing else of the journal). An engine whose storage
   * has a hard limit may refuse such a transaction early, while storage is
   * nearly full, so that every other transaction (the claims, acks, prunes
   * and the engine's own housekeeping that free space) can still use the
   * room kept in reserve; it refuses with its own error, as it would refuse a
   * full storage, and writes nothing. Only a `"readwrite"` transaction can
   * grow. The IndexedDB engine uses it (`reserveBytes`); memory and Durable
   * Objects ignore it. Absent means false.
   */
  readonly grows?: boolean;
}

/** A transactional, ordered key-value store over tuple keys. */
export interface Engine {
  /** Whether committed data outlives the process (memory: false). */
  readonly durable: boolean;
  /**
   * A performance hint, never a change of meaning: true when a read costs no
   * round trip (the data is in this process: memory, a Durable Object's
   * SQLite). The core then reads one key at a time instead of reading ahead
   * in groups, which pays off only where each request waits on a round trip
   * (IndexedDB). Absent means false.
   */
  readonly localReads?: boolean;
  /**
   * Run `fn` in one transaction and resolve with its result once the
   * transaction committed. A throw inside `fn` rolls back everything it wrote
   * and rejects with that error. `options` are hints (see
   * {@link TransactOptions}); an engine may ignore them.
   */
  transact<T>(mode: TransactionMode, fn: (tx: EngineTransaction) => Promise<T>, options?: TransactOptions): Promise<T>;
  /** Release the engine's resources. Further calls reject. */
  close(): Promise<void>;
}

/**
 * Compare two key parts the way IndexedDB compares array elements: numbers
 * before strings, numbers by value, strings by UTF-16 code units.
 */
export function compareKeyParts(a: KeyPart, b: KeyPart): number {
  if (typeof a === "number") {
    if (typeof b === "number") return a < b ? -1 : a > b ? 1 : 0;
    return -1;
  }
  if (typeof b === "number") return 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Compare two tuple keys element-wise; a proper prefix sorts first. */
export function compareKeys(a: Key, b: Key): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const c = compareKeyParts(a[i]!, b[i]!);
    if (c !== 0) return c;
  }
  return a.length - b.length;
}

/** Whether `key` starts with every element of `prefix`. */
export function hasPrefix(key: Key, prefix: Key): boolean {
  if (key.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) {
    if (compareKeyParts(key[i]!, prefix[i]!) !== 0) return false;
  }
  return true;
}

/** Whether `key` lies inside `range`. */
export function inRange(key: Key, range: KeyRange): boolean {
  if (range.prefix && !hasPrefix(key, range.prefix)) return false;
  if (range.lower) {
    const c = compareKeys(key, range.lower);
    if (c < 0 || (c === 0 && range.lowerOpen)) return false;
  }
  if (range.upper) {
    const c = compareKeys(key, range.upper);
    if (c > 0 || (c === 0 && range.upperOpen)) return false;
  }
  return true;
}

/** Thrown by an engine for a key or range it cannot store or compare. */
export class InvalidKeyError extends TypeError {
  readonly code = "invalid_key";
  constructor(message: string) {
    super(message);
    this.name = "InvalidKeyError";
  }
}

/** Check that `key` is a non-empty tuple of strings and finite numbers. */
export function assertValidKey(key: unknown): asserts key is Key {
  if (!Array.isArray(key) || key.length === 0) {
    throw new InvalidKeyError("an engine key must be a non-empty array of strings and numbers");
  }
  for (const part of key as unknown[]) {
    if (typeof part === "string") continue;
    if (typeof part === "number" && Number.isFinite(part)) continue;
    throw new InvalidKeyError(`an engine key element must be a string or a finite number, got ${String(part)}`);
  }
}

/**
 * The error {@link assertValidKey} throws for `key`: for engines that test keys
 * with a faster check first and only build the error on the slow path.
 */
export function invalidKeyError(key: unknown): InvalidKeyError {
  try {
    assertValidKey(key);
  } catch (error) {
    if (error instanceof InvalidKeyError) return error;
    throw error;
  }
  return new InvalidKeyError("an engine key must be a non-empty array of strings and numbers");
}

/**
 * Check a scan `limit`: absent means unbounded (`Infinity`), otherwise it must
 * be a positive integer. `label` prefixes the RangeError's message (the engine's name).
 */
export function checkScanLimit(limit: unknown, label = ""): number {
  if (limit === undefined) return Infinity;
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit <= 0) {
    throw new RangeError(`${label}scan limit must be a positive integer, got ${typeof limit === "number" ? String(limit) : typeof limit}`);
  }
  return limit;
}
