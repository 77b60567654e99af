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
import { compareKeys, inRange, type Entry, type EngineTransaction, type Key, type KeyRange, type ScanOptions } from "../engine.js";
import { TupleMap } from "../tuple-map.js";

/** Cached as "read, and there is no such key" (the map holds no `undefined`). */
const ABSENT: unique symbol = Symbol("absent");
/** Being read by `load` (a `get` meanwhile goes to the engine). */
const PENDING: unique symbol = Symbol("pending");

/** A scan to read ahead: the range always has a non-empty prefix (that is how cached scans are found on writes). */
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
  /** Keys read ahead, by key (no strings built per lookup). */
  private readonly values = new TupleMap<unknown>();
  /** Cached scans by their text, grouped by their prefix. */
  private readonly scans = new TupleMap<Map<string, CachedScan>>();
  private scanCount = 0;
  /** Lengths of the prefixes of cached scans (a written key is checked against each). */
  private readonly prefixLengths = new Set<number>();

  /** Present when the engine's handle has it: forwards, and forgets what it cached in the range. */
  readonly deleteRange?: (range: KeyRange) => void;

  constructor(private readonly tx: EngineTransaction) {
    if (tx.deleteRange) {
      this.deleteRange = (range: KeyRange): void => {
        tx.deleteRange!(range);
        // A key still being read is absent from now on too (its read answers what it held before).
        this.values.forEach((_value, key) => {
          if (inRange(key, range)) this.values.set(key, ABSENT);
        });
        // Cached scans are few and short-lived: forget them all rather than work out which overlap.
        this.scans.clear();
        this.scanCount = 0;
        this.prefixLengths.clear();
      };
    }
  }

  /**
   * Read `keys`, `groups` and `scans` together and cache the answers; `known`
   * are cached as given. Each group's keys are read with one range read from
   * the smallest to the largest (see {@link ReadGroup}).
   */
  async load(
    keys: readonly Key[],
    known: readonly (readonly [Key, unknown])[],
    scans: readonly ScanRequest[],
    groups: readonly ReadGroup[],
  ): Promise<void> {
    for (const [key, value] of known) this.values.set(key, value === undefined ? ABSENT : value);
    // Each key read once (a key listed twice is marked as pending the first time).
    const unique: Key[] = [];
    const fresh = (list: readonly Key[]): Key[] => {
      const out: Key[] = [];
      for (const key of list) {
        if (this.values.get(key) !== undefined) continue;
        this.values.set(key, PENDING);
        out.push(key);
      }
      unique.push(...out);
      return out;
    };
    const { points, runs } = planReads(fresh(keys));
    for (const group of groups) {
      const wanted = fresh(group.keys).sort(compareKeys);
      if (wanted.length < 2) points.push(...wanted);
      else runs.push(runOf(group.prefix, wanted));
    }
    const pendingScans = new Map<string, ScanRequest>();
    for (const scan of scans) pendingScans.set(scanText(scan.range, scan.options), scan);
    let values: unknown[];
    let scanned: Entry[][];
    let ran: Entry[][];
    try {
      [values, scanned, ran] = await Promise.all([
        Promise.all(points.map((key) => this.tx.get(key))),
        Promise.all([...pendingScans.values()].map((scan) => this.tx.scan(scan.range, scan.options))),
        Promise.all(runs.map((run) => this.tx.scan(run.range, { limit: run.limit }))),
      ]);
      // A run cut short by its limit leaves its keys past the last entry unread: read those one by one.
      const rest: Key[] = [];
      runs.forEach((run, r) => {
        const entries = ran[r]!;
        const found = new TupleMap<unknown>();
        for (const entry of entries) found.set(entry.key, entry.value);
        const last = entries.length >= run.limit ? entries[entries.length - 1]!.key : null;
        for (const key of run.keys) {
          if (last !== null && compareKeys(key, last) > 0) rest.push(key);
          else this.settle(key, found.get(key));
        }
      });
      const restValues = await Promise.all(rest.map((key) => this.tx.get(key)));
      rest.forEach((key, k) => this.settle(key, restValues[k]));
    } catch (error) {
      for (const key of unique) if (this.values.get(key) === PENDING) this.values.delete(key);
      throw error;
    }
    points.forEach((key, k) => this.settle(key, values[k]));
    let i = 0;
    for (const [text, scan] of pendingScans) {
      let group = this.scans.get(scan.range.prefix);
      if (!group) this.scans.set(scan.range.prefix, (group = new Map<string, CachedScan>()));
      if (!group.has(text)) this.scanCount++;
      group.set(text, { range: scan.range, entries: scanned[i++]! });
      this.prefixLengths.add(scan.range.prefix.length);
    }
  }

  /** Cache what `key` held when read, unless a write while the read was out already set what it holds now. */
  private settle(key: Key, value: unknown): void {
    if (this.values.get(key) === PENDING) this.values.set(key, value === undefined ? ABSENT : value);
  }

  get<V>(key: Key): Promise<V | undefined> {
    const cached = this.values.get(key);
    if (cached === undefined || cached === PENDING) return this.tx.get<V>(key);
    return Promise.resolve(cached === ABSENT ? undefined : (cached as V));
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
    if (range.prefix !== undefined && range.prefix.length > 0 && this.scanCount > 0) {
      const cached = this.scans.get(range.prefix)?.get(scanText(range, options));
      if (cached) return Promise.resolve(cached.entries.slice() as Entry<V>[]);
    }
    return this.tx.scan<V>(range, options);
  }

  private written(key: Key, value: unknown, present: boolean): void {
    if (this.values.get(key) !== undefined) this.values.set(key, present && value !== undefined ? value : ABSENT);
    if (this.scanCount === 0) return;
    for (const length of this.prefixLengths) {
      if (length > key.length || length === 0) continue;
      const group = this.scans.getPrefix(key, length);
      if (!group) continue;
      for (const [scanKey, scan] of group) {
        if (inRange(key, scan.range)) {
          group.delete(scanKey);
          this.scanCount--;
        }
      }
    }
  }
}

/**
 * How many stored keys a run's scan may walk per key it wants. Measured on
 * IndexedDB in Chromium (bench/browser/bench-main.ts, "What one IndexedDB
 * request costs"): a `get` costs about 65-95 us, a row of a range read about
 * 14 us, so a range read pays off while it walks fewer than about 5 rows per
 * key wanted; at 4 it is never much dearer than the gets it replaces, and
 * several times cheaper for dense keys (a batch's positions).
 */
const RUN_ROWS_PER_KEY = 4;
/** Rows a run may walk beyond that. */
const RUN_SLACK = 4;

/** Keys read with one scan: they differ only in their last element, a number, and lie close together. */
interface Run {
  readonly range: KeyRange & { readonly prefix: Key };
  readonly limit: number;
  readonly keys: readonly Key[];
}

/**
 * Keys under `prefix` that the caller expects to lie close together in key
 * order (a batch's request ids, which are UUIDv7s: new ones sort after the
 * stored ones): read with one range read from the smallest to the largest,
 * walking at most {@link RUN_ROWS_PER_KEY} rows per key (plus
 * {@link RUN_SLACK}); keys past where a range read was cut short are read one
 * by one.
 */
export interface ReadGroup {
  readonly prefix: Key;
  readonly keys: readonly Key[];
}

/** The run reading `keys` (sorted, all under `prefix`). */
function runOf(prefix: Key, keys: readonly Key[]): Run {
  return { range: { prefix, lower: keys[0]!, upper: keys[keys.length - 1]! }, limit: keys.length * RUN_ROWS_PER_KEY + RUN_SLACK, keys };
}

/**
 * Split reads into point reads and runs. Keys that share every element but
 * the last, an integer (a position, a sequence number), are sorted and cut
 * into clusters whose integers span at most {@link RUN_ROWS_PER_KEY} rows per
 * key (plus {@link RUN_SLACK}); a cluster of two or more is read with one scan
 * from its smallest to its largest key. Integer keys in that span are at most
 * that many rows, so the scan is not cut short unless the range holds other
 * keys (non-integers, say); then the keys past its last entry are read one by
 * one.
 */
function planReads(keys: readonly Key[]): { points: Key[]; runs: Run[] } {
  const byPrefix = new TupleMap<{ prefix: Key; keys: Key[] }>();
  const groups: { prefix: Key; keys: Key[] }[] = [];
  const points: Key[] = [];
  for (const key of keys) {
    const last = key[key.length - 1];
    if (key.length < 2 || typeof last !== "number" || !Number.isInteger(last)) {
      points.push(key);
      continue;
    }
    const prefix = key.slice(0, -1);
    const group = byPrefix.get(prefix);
    if (group) group.keys.push(key);
    else {
      const created = { prefix, keys: [key] };
      byPrefix.set(prefix, created);
      groups.push(created);
    }
  }
  const runs: Run[] = [];
  const at = (key: Key): number => key[key.length - 1] as number;
  for (const { prefix, keys: group } of groups) {
    // Cut the sorted group into clusters whose span stays within their limit.
    group.sort((x, y) => at(x) - at(y));
    let start = 0;
    for (let end = 1; end <= group.length; end++) {
      const fits = end < group.length && at(group[end]!) - at(group[start]!) + 1 <= (end - start + 1) * RUN_ROWS_PER_KEY + RUN_SLACK;
      if (fits) continue;
      const cluster = group.slice(start, end);
      if (cluster.length < 2) points.push(...cluster);
      else runs.push(runOf(prefix, cluster));
      start = end;
    }
  }
  return { points, runs };
}

/**
 * Read `keys` (and `groups`, see {@link ReadGroup}, and `scans`) together, one engine call each awaited as a group,
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
  groups: readonly ReadGroup[] = [],
): Promise<EngineTransaction> {
  const cached = tx instanceof ReadAheadTransaction ? tx : new ReadAheadTransaction(tx);
  await cached.load(keys, known, scans, groups);
  return cached;
}
