/**
 * KV: small compare-and-swap metadata (`storage-primitives.go.txt`, `KV`).
 *
 * What it promises:
 * - `put(key, expectedRev, value)` writes only when the key's current
 *   revision is `expectedRev` (0: the key must be absent) and returns the new
 *   revision; otherwise {@link RevisionConflictError} and nothing changes.
 * - Revisions are per key and strictly increasing, also across delete and
 *   re-create: every revision comes from one per-store counter, so a
 *   re-created key never reuses a revision an earlier life of it had (and no
 *   tombstones pile up). Revisions are therefore not dense per key.
 * - `keys(prefix)` is sorted ascending and duplicate-free; `delete` is
 *   idempotent; values are copied in and out.
 * - Keys are storage names (the grammar of `./names.ts`): the spec's KV is a
 *   catalog of hierarchical names, and names keep keys safe as engine keys,
 *   URL segments and object keys.
 */
import type { Engine, KeyRange } from "../engine.js";
import { copyBytes } from "./copy.js";
import { InvalidArgumentError, KeyNotFoundError, RevisionConflictError } from "./errors.js";
import { assertFence, checkFence } from "./fence.js";
import { storeLayout, type KvRow, type StoreLayout } from "./layout.js";
import type { LedgerWriteOptions } from "./ledger.js";
import { validateName, validatePrefix } from "./names.js";
import { throwIfAborted, type CallOptions } from "./options.js";
import { checkCount, transact } from "./transaction.js";
import { isBytes } from "./web.js";

/** The largest KV value (1 MiB); KV holds small metadata, blobs hold bulk bytes. */
export const MAX_KV_VALUE_BYTES = 1024 * 1024;

/** A value and the revision that wrote it. `value` belongs to the caller. */
export interface KvEntry {
  readonly value: Uint8Array;
  readonly rev: number;
}

/** Options of a KV write: a signal, and optionally a lease the write is fenced by. */
export type KvWriteOptions = LedgerWriteOptions;

/** Small CAS'd values by key. */
export interface KV {
  /** @throws {KeyNotFoundError} when the key is absent. */
  get(key: string, options?: CallOptions): Promise<KvEntry>;
  /**
   * Write `value` iff the current revision is `expectedRev` (0 = absent); resolves with the new revision.
   *
   * @throws {RevisionConflictError} when it is not (nothing changes).
   * @throws {AmbiguousError} (`operation` `"kv.put"`, networked stores only)
   *   when the write got no answer: it may have landed. Read the key back
   *   before retrying (a retry at the same `expectedRev` after a landed first
   *   try is a conflict).
   */
  put(key: string, expectedRev: number, value: Uint8Array, options?: KvWriteOptions): Promise<number>;
  /** The keys that start with `prefix` ("" for all), ascending and duplicate-free. */
  keys(prefix: string, options?: CallOptions): Promise<string[]>;
  /**
   * Remove the key; absent is a no-op success.
   *
   * @throws {AmbiguousError} (`operation` `"kv.delete"`, networked stores only) when the delete got no answer: it may have landed.
   */
  delete(key: string, options?: KvWriteOptions): Promise<void>;
}

/** Options of {@link createKV}. */
export interface KvOptions {
  /** The store's name (storage name grammar): keys live under `["s", store]`. */
  readonly store: string;
  /** Read when checking a write's lease fence. Defaults to `Date.now`. */
  readonly clock?: () => number;
}

/**
 * A {@link KV} over an Engine. Usually reached through `createStore`.
 *
 * @example
 * ```ts
 * const { kv } = createStore(memoryEngine(), { name: "app" });
 * const rev = await kv.put("sessions/s1", 0, bytes);       // create
 * await kv.put("sessions/s1", rev, newer);                 // update at the revision read
 * const { value, rev: latest } = await kv.get("sessions/s1");
 * ```
 */
export function createKV(engine: Engine, options: KvOptions): KV {
  return new EngineKV(engine, storeLayout(options), options.clock ?? Date.now);
}

class EngineKV implements KV {
  constructor(
    private readonly engine: Engine,
    private readonly layout: StoreLayout,
    private readonly clock: () => number,
  ) {}

  async get(key: string, options?: CallOptions): Promise<KvEntry> {
    validateName(key);
    const row = await transact(this.engine, "readonly", "kv.get", options, (tx) => tx.get<KvRow>(this.layout.kv(key)));
    if (row === undefined) throw new KeyNotFoundError(key);
    return { value: copyBytes(row.value), rev: row.rev };
  }

  async put(key: string, expectedRev: number, value: Uint8Array, options?: KvWriteOptions): Promise<number> {
    validateName(key);
    checkCount("expectedRev", expectedRev, 0);
    if (!isBytes(value)) throw new InvalidArgumentError("value", "must be a Uint8Array");
    if (value.length > MAX_KV_VALUE_BYTES) throw new InvalidArgumentError("value", `is ${value.length} bytes; a KV value holds at most ${MAX_KV_VALUE_BYTES}`);
    const copy = copyBytes(value);
    const fence = checkFence(options?.fence);
    throwIfAborted(options);
    const now = this.clock();
    return transact(this.engine, "readwrite", "kv.put", options, async (tx) => {
      await assertFence(tx, this.layout, fence, now);
      const row = await tx.get<KvRow>(this.layout.kv(key));
      const actual = row?.rev ?? 0;
      if (actual !== expectedRev) throw new RevisionConflictError(key, expectedRev, actual);
      const rev = ((await tx.get<number>(this.layout.kvCounter())) ?? 0) + 1;
      tx.put(this.layout.kvCounter(), rev);
      tx.put(this.layout.kv(key), { rev, value: copy } satisfies KvRow);
      return rev;
    });
  }

  async keys(prefix: string, options?: CallOptions): Promise<string[]> {
    validatePrefix(prefix);
    const entries = await transact(this.engine, "readonly", "kv.keys", options, (tx) => tx.scan(this.layout.prefixRange("kv", prefix), { keysOnly: true }));
    return entries.map((entry) => entry.key[entry.key.length - 1]).filter((key): key is string => typeof key === "string" && key.startsWith(prefix));
  }

  async delete(key: string, options?: KvWriteOptions): Promise<void> {
    validateName(key);
    const fence = checkFence(options?.fence);
    throwIfAborted(options);
    const now = this.clock();
    await transact(this.engine, "readwrite", "kv.delete", options, async (tx) => {
      await assertFence(tx, this.layout, fence, now);
      tx.delete(this.layout.kv(key));
    });
  }
}

/** One page of a key listing: `more` when keys after the last one may follow (read on with `after` = the last key). */
export interface KeysPage {
  readonly keys: string[];
  readonly more: boolean;
}

/** Keys per listing page ({@link listKeysPage}), at most. */
export const MAX_KEYS_PAGE = 4096;
/**
 * Key text per listing page, in bytes (2 per UTF-16 code unit, plus a little
 * per key), after which a page stops; at least one key is always returned.
 * Far under the 32 MiB of a Workers RPC reply.
 */
export const MAX_KEYS_PAGE_BYTES = 2 * 1024 * 1024;

/**
 * One page of the keys of `table` (`"kv"` or blob metadata `"bm"`) with
 * `prefix`, after `after` (exclusive; `""` from the start), ascending: up to
 * {@link MAX_KEYS_PAGE} keys and about {@link MAX_KEYS_PAGE_BYTES}. A keys-only
 * scan: no value is decoded. What a server pages a listing with (each page is
 * its own transaction: a key present for the whole listing is listed once,
 * one added or removed meanwhile may or may not be).
 */
export async function listKeysPage(
  engine: Engine,
  layout: StoreLayout,
  table: "kv" | "bm",
  prefix: string,
  after: string,
  options?: CallOptions,
): Promise<KeysPage> {
  validatePrefix(prefix);
  if (typeof after !== "string") throw new InvalidArgumentError("after", "must be a string");
  const whole = layout.prefixRange(table, prefix);
  const range: KeyRange = after > prefix ? { lower: [...whole.lower.slice(0, -1), after], lowerOpen: true, upper: whole.upper } : whole;
  const operation = table === "kv" ? "kv.keys" : "blobs.list";
  const entries = await transact(engine, "readonly", operation, options, (tx) => tx.scan(range, { limit: MAX_KEYS_PAGE + 1, keysOnly: true }));
  const keys: string[] = [];
  let bytes = 0;
  let more = entries.length > MAX_KEYS_PAGE;
  for (const entry of entries) {
    const key = entry.key[entry.key.length - 1];
    if (typeof key !== "string" || !key.startsWith(prefix)) continue;
    const size = 2 * key.length + 16;
    if (keys.length >= MAX_KEYS_PAGE || (keys.length > 0 && bytes + size > MAX_KEYS_PAGE_BYTES)) {
      more = true;
      break;
    }
    keys.push(key);
    bytes += size;
  }
  return { keys, more };
}
