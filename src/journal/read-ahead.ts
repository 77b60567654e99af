/**
 * Read-ahead for batch operations: issue many reads of one transaction at
 * once, then serve them from a transaction-local cache that the transaction's
 * own writes keep coherent.
 *
 * Why: IndexedDB (and any engine with request round trips) pays one round trip
 * per awaited read. A batch append that looks each request id up in turn waits
 * on N round trips; reading them together waits on about one.
 *
 * Point reads are cached write-through: a `put` or `delete` of a cached key
 * updates the cache, so a later `get` sees exactly what the engine would
 * return. Scans are cached by their exact range and options; a write to a
 * key inside a cached scan's range forgets that scan (it is read again from
 * the engine if asked for), so a cached scan is never stale.
 */
import { inRange, type Entry, type EngineTransaction, type Key, type KeyRange, type ScanOptions } from "../engine.js";

function cacheKey(key: Key): string {
  return JSON.stringify(key);
}

/** A scan to read ahead: the range always has a prefix (that is how cached scans are found on writes). */
export interface ScanRequest {
  readonly range: KeyRange & { readonly prefix: Key };
  readonly options?: ScanOptions;
}

function scanText(range: KeyRange, options: ScanOptions | undefined): string {
  return JSON.stringify([
    range.prefix ?? null,
    range.lower ?? null,
    range.lowerOpen === true,
    range.upper ?? null,
    range.upperOpen === true,
    options?.limit ?? null,
    options?.reverse === true,
  ]);
}

interface CachedScan {
  readonly range: KeyRange;
  readonly entries: readonly Entry[];
}

/** A transaction handle that answers some reads from what was read ahead. */
class ReadAheadTransaction implements EngineTransaction {
  private readonly values = new Map<string, unknown>();
  /** Cached scans by their text, grouped by the text of their prefix. */
  private readonly scans = new Map<string, Map<string, CachedScan>>();
  /** Lengths of the prefixes of cached scans (a written key is checked against each). */
  private readonly prefixLengths = new Set<number>();

  constructor(private readonly tx: EngineTransaction) {}

  /** Read `keys` and `scans` together and cache the answers; `known` are cached as given. */
  async load(keys: readonly Key[], known: readonly (readonly [Key, unknown])[], scans: readonly ScanRequest[]): Promise<void> {
    for (const [key, value] of known) this.values.set(cacheKey(key), value);
    const unique = new Map<string, Key>();
    for (const key of keys) {
      const text = cacheKey(key);
      if (!this.values.has(text)) unique.set(text, key);
    }
    const pendingScans = new Map<string, ScanRequest>();
    for (const scan of scans) pendingScans.set(scanText(scan.range, scan.options), scan);
    const [values, scanned] = await Promise.all([
      Promise.all([...unique.values()].map((key) => this.tx.get(key))),
      Promise.all([...pendingScans.values()].map((scan) => this.tx.scan(scan.range, scan.options))),
    ]);
    let i = 0;
    for (const text of unique.keys()) this.values.set(text, values[i++]);
    i = 0;
    for (const [text, scan] of pendingScans) {
      const prefixText = cacheKey(scan.range.prefix);
      let group = this.scans.get(prefixText);
      if (!group) this.scans.set(prefixText, (group = new Map<string, CachedScan>()));
      group.set(text, { range: scan.range, entries: scanned[i++]! });
      this.prefixLengths.add(scan.range.prefix.length);
    }
  }

  get<V>(key: Key): Promise<V | undefined> {
    const text = cacheKey(key);
    return this.values.has(text) ? Promise.resolve(this.values.get(text) as V | undefined) : this.tx.get<V>(key);
  }

  put(key: Key, value: unknown): void {
    this.tx.put(key, value);
    this.written(key, value, true);
  }

  delete(key: Key): void {
    this.tx.delete(key);
    this.written(key, undefined, false);
  }

  scan<V>(range: KeyRange, options?: ScanOptions): Promise<Entry<V>[]> {
    if (range.prefix !== undefined && this.scans.size > 0) {
      const cached = this.scans.get(cacheKey(range.prefix))?.get(scanText(range, options));
      if (cached) return Promise.resolve(cached.entries.slice() as Entry<V>[]);
    }
    return this.tx.scan<V>(range, options);
  }

  private written(key: Key, value: unknown, present: boolean): void {
    const text = cacheKey(key);
    if (this.values.has(text)) this.values.set(text, present ? value : undefined);
    for (const length of this.prefixLengths) {
      if (length > key.length) continue;
      const group = this.scans.get(cacheKey(key.slice(0, length)));
      if (!group) continue;
      for (const [scanKey, scan] of group) if (inRange(key, scan.range)) group.delete(scanKey);
    }
  }
}

/**
 * Read `keys` (and `scans`) together, one engine call each awaited as a group,
 * and return a transaction handle that answers them from memory. `known` are
 * keys whose current value the caller already read in this transaction (by a
 * scan, say): they are cached as given and not read again. Called on a handle
 * it returned, it adds to that handle's cache rather than wrapping it again.
 */
export async function readAhead(
  tx: EngineTransaction,
  keys: readonly Key[],
  known: readonly (readonly [Key, unknown])[] = [],
  scans: readonly ScanRequest[] = [],
): Promise<EngineTransaction> {
  const cached = tx instanceof ReadAheadTransaction ? tx : new ReadAheadTransaction(tx);
  await cached.load(keys, known, scans);
  return cached;
}
