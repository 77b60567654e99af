/**
 * `isostore/memory`: the reference in-memory {@link Engine}.
 *
 * It is what the kit's contracts are tested against first, what tests and
 * server-side code use when nothing has to outlive the process, and the engine
 * under the throughput benchmark. It promises the whole {@link Engine}
 * contract (checked by `isostore/testing` and by this directory's tests):
 * - ordered tuple keys in a trie with one node per key prefix: point reads,
 *   overwrites and deletes in O(key length) `Map` lookups, inserts in those
 *   plus O(log n) in the one node the key joins; a scan reaches its first
 *   entry in O(key length · log n), then walks from each entry to the next:
 *   O(1) per entry when the entries differ only in their last element (as in
 *   every index of the kit's layers), up to O(key length) per entry when
 *   they part early;
 * - serialized transactions (one body at a time, in call order) that see
 *   their own writes and roll back completely when the body throws, rejects,
 *   or makes a call that fails (invalid key, write in a "readonly"
 *   transaction, bad scan limit);
 * - dead handles once a body settled, and `close()` refusing later
 *   transactions.
 *
 * It is not durable (`durable: false`): the data lives as long as the engine
 * object, and `close()` drops it.
 */

import type { Engine } from "../../src/engine.js";
import { MemoryEngine } from "./memory-engine.js";

/**
 * Options of {@link memoryEngine}. There are none yet; the parameter exists so
 * that options can be added without changing the signature.
 */
export type MemoryEngineOptions = Record<never, never>;

/**
 * Create an empty in-memory {@link Engine}.
 *
 * Values are stored and returned by reference, never cloned: `get` and `scan`
 * hand back the very object that was `put`. That is safe because the core
 * never mutates a value after `put` or `get`; code that uses the engine
 * directly must keep that promise too. Keys are copied when they enter the
 * store (reusing a key array after `put` changes nothing); the key arrays of
 * the entries a scan returns are shared with the engine and with later scans,
 * and must be treated as read-only (as their `readonly` types say).
 *
 * Transactions run one at a time in call order, so a body must not await
 * anything but its own transaction's calls, and must not call `transact` on
 * the same engine (it would wait for itself forever).
 *
 * @example
 * ```ts
 * import { memoryEngine } from "isostore/memory";
 *
 * const engine = memoryEngine();
 * await engine.transact("readwrite", async (tx) => {
 *   tx.put(["user", 1], { name: "Ada" });
 *   tx.put(["user", 2], { name: "Grace" });
 * });
 * const users = await engine.transact("readonly", (tx) => tx.scan({ prefix: ["user"] }));
 * // users: [{ key: ["user", 1], value: { name: "Ada" } }, { key: ["user", 2], value: { name: "Grace" } }]
 * await engine.close();
 * ```
 */
export function memoryEngine(_options: MemoryEngineOptions = {}): Engine {
  return new MemoryEngine();
}

export type { Engine } from "../../src/engine.js";
