/**
 * Read-ahead for batch operations: issue many point reads of one transaction
 * at once, then serve them from a transaction-local cache that the
 * transaction's own writes keep coherent.
 *
 * Why: IndexedDB (and any engine with request round trips) pays one round trip
 * per awaited read. A batch append that looks each request id up in turn waits
 * on N round trips; reading them together waits on about one. The cache is
 * write-through: a `put` or `delete` of a cached key updates the cache, so a
 * later `get` sees exactly what the engine would return.
 */
import type { EngineTransaction, Key } from "../engine.js";

function cacheKey(key: Key): string {
  return JSON.stringify(key);
}

/**
 * Read `keys` together (one engine call each, awaited as a group) and return a
 * transaction handle that answers those keys from memory.
 */
export async function readAhead(tx: EngineTransaction, keys: readonly Key[]): Promise<EngineTransaction> {
  const unique = new Map<string, Key>();
  for (const key of keys) unique.set(cacheKey(key), key);
  const values = await Promise.all([...unique.values()].map((key) => tx.get(key)));
  const cache = new Map<string, unknown>();
  let i = 0;
  for (const text of unique.keys()) cache.set(text, values[i++]);
  return {
    get<V>(key: Key): Promise<V | undefined> {
      const text = cacheKey(key);
      return cache.has(text) ? Promise.resolve(cache.get(text) as V | undefined) : tx.get<V>(key);
    },
    put(key: Key, value: unknown): void {
      tx.put(key, value);
      const text = cacheKey(key);
      if (cache.has(text)) cache.set(text, value);
    },
    delete(key: Key): void {
      tx.delete(key);
      const text = cacheKey(key);
      if (cache.has(text)) cache.set(text, undefined);
    },
    scan: (range, options) => tx.scan(range, options),
  };
}
