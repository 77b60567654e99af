/**
 * `StoreObject`: the Durable Object that hosts the storage primitives of one
 * store (`createStore(durableObjectEngine(ctx.storage), { name })`: ledger,
 * KV, blobs, OrderedIndex, leases) and exposes them by Workers RPC. It is the
 * single writer of its store, so every compare-and-swap is decided here.
 *
 * Protocol (stable within a major version):
 * - Every call names the store first. The first call stores the name in the
 *   object; a call naming another store is refused
 *   (`invalid_argument`, argument `store`) and changes nothing. Address one
 *   object per store, e.g. `env.STORES.getByName(store)`.
 * - Answers are {@link StoreOutcome}s: a storage error travels as data
 *   ({@link StoreWireError}: its stable `code`, class, message and spec
 *   fields), because RPC keeps an error's message but not its class or
 *   fields. Only a platform failure (the object reset, a broken stream)
 *   rejects the call itself.
 * - The object reads its own clock (`Date.now`) for lease expiry and fencing.
 * - Ledger reads are pages (`ledgerRead`): records from `from`, up to `limit`
 *   and about {@link MAX_READ_PAGE_BYTES}; read on from the last `seq + 1`.
 *   A reader that reads several pages first asks `ledgerBound` (the tip and
 *   the ledger's generation, in one read) and passes that `generation` to
 *   every page: a page of a ledger deleted since (perhaps written again) is
 *   then `record_not_found` rather than records of the new ledger.
 * - Key listings are pages too (`kvKeysPage`, `blobListPage`): keys after
 *   `after`, up to `MAX_KEYS_PAGE` and about `MAX_KEYS_PAGE_BYTES` of key
 *   text, with `more` when the listing goes on (read on from the last key).
 *   A whole listing in one reply (`kvKeys`, `blobList`, kept for older
 *   clients) fails past the 32 MiB RPC reply limit.
 * - Leases. A `Lease` (its timer and signal) cannot cross RPC, so the object
 *   holds it: `leaseAcquire` grants it and the object renews it on its own
 *   timers while the holder keeps calling `leaseAssertHeld` (a heartbeat, at
 *   least once per `ttlMs`); a holder silent for `ttlMs` has its lease
 *   released, so a crashed caller does not keep a name forever.
 *   `leaseRelease` gives it up. If the object is evicted (or redeployed)
 *   the renewals stop until the holder's next heartbeat, which a new
 *   instance answers by adopting the grant from its row (renewed from then
 *   on) while it has not run out; past its expiry the heartbeat fails with
 *   `lease_lost`, as do fenced writes. A release that reaches a new instance
 *   clears the row (while it still names that epoch). So no grant depends on
 *   one instance staying alive. Fence ledger and KV writes with the
 *   `{ lease, epoch }` the grant returned.
 * - Blobs go to R2 when the object's env has an R2 bucket binding named
 *   `STORE_BLOBS` (keys `<object id>/<blob key>`: the object is their only
 *   writer, which is what makes put's same-bytes-or-conflict check safe),
 *   and to the engine (chunked in SQLite) otherwise. Adding or removing the
 *   binding later does not move existing blobs.
 *
 * Wrangler: declare it with `new_sqlite_classes`, e.g.
 * ```toml
 * [[durable_objects.bindings]]
 * name = "STORES"
 * class_name = "StoreObject"
 *
 * [[r2_buckets]]            # optional
 * binding = "STORE_BLOBS"
 * bucket_name = "isostore-blobs"
 *
 * [[migrations]]
 * tag = "v2"
 * new_sqlite_classes = ["StoreObject"]
 * ```
 */
/// <reference types="@cloudflare/workers-types" />
import { DurableObject } from "cloudflare:workers";
import type { Engine } from "../../src/engine.js";
import { readAll, MAX_BLOB_BYTES, type Blobs } from "../../src/storage/blobs.js";
import { copyBytes } from "../../src/storage/copy.js";
import { BlobConflictError, BlobNotFoundError, InvalidArgumentError, RecordNotFoundError, StorageBackendError, type StorageError } from "../../src/storage/errors.js";
import type { LeaseFence } from "../../src/storage/fence.js";
import { listKeysPage, type KeysPage, type KvEntry } from "../../src/storage/kv.js";
import { adoptLease, DEFAULT_LEASE_TTL_MS, releaseLease, type Lease } from "../../src/storage/leaser.js";
import { ledgerReader, type LedgerReadBound, type LedgerRecord } from "../../src/storage/ledger.js";
import { validateName, validatePrefix } from "../../src/storage/names.js";
import { throwIfAborted, type CallOptions } from "../../src/storage/options.js";
import type { CreateOrderedResult, Due, DuePage, OrderedId, OrderedPage, OrderedRecord, RankedPage, Rank } from "../../src/storage/ordered/types.js";
import { storeLayout } from "../../src/storage/layout.js";
import { createStore, type Store } from "../../src/storage/store.js";
import { checkCount } from "../../src/storage/transaction.js";
import type { ByteStream } from "../../src/storage/web.js";
import { isBytes, sha256, toHex } from "../../src/storage/web.js";
import { decodeStorageError, encodeStorageError } from "../../src/worker/stores.js";
import { durableObjectEngine } from "./engine.js";

/** A storage error as plain data. */
export interface StoreWireError {
  /** The error's stable code (`StorageError.code`), or `"backend"` for anything else. */
  readonly code: string;
  /** The error's class, e.g. `"RevisionConflictError"`. */
  readonly type: string;
  readonly message: string;
  /** The error's spec fields (`key`, `expectedRev`, `actualRev`, `rule`, ...; the spec's `name` field too). */
  readonly fields: Record<string, unknown>;
}

/** The answer of every {@link StoreObject} call: a value, or a storage error as data. */
export type StoreOutcome<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: StoreWireError };

/** What a granted lease looks like across RPC. */
export interface StoreLeaseGrant {
  readonly name: string;
  readonly epoch: number;
  /** Call `leaseAssertHeld` at least this often, or the object releases the lease. */
  readonly ttlMs: number;
}

/** The bindings {@link StoreObject} looks for. */
export interface StoreObjectEnv {
  /** Optional: where blobs go (else into the object's SQLite storage). */
  readonly STORE_BLOBS?: R2Bucket;
}

/** Ledger records per {@link StoreObject.ledgerRead} page, at most. */
export const MAX_READ_PAGE_RECORDS = 1024;
/** Payload bytes after which a ledger page stops (at least one record is always returned). */
export const MAX_READ_PAGE_BYTES = 8 * 1024 * 1024;

const CONFIG_KEY = ["so", "store"];

/**
 * A thrown value as a {@link StoreWireError}; anything but a `StorageError` is
 * a backend failure. The codec is the core's (`encodeStorageError` of
 * `src/worker/stores.ts`), shared with the HTTP API's error bodies.
 */
export function encodeStoreError(error: unknown): StoreWireError {
  return encodeStorageError(error);
}

/**
 * Rebuild the typed storage error a {@link StoreWireError} describes: the
 * same class (`instanceof` works), `code`, message and spec fields (the
 * spec's `name` field too); a remote `cause` comes back as an `Error` with
 * its message and `retryable`, and the marks of a full or overloaded object
 * (`code` `"storage_full"`, `overloaded`) when sent. What `StoreObjectClient` throws.
 *
 * @example
 * ```ts
 * import { decodeStoreError, type StoreOutcome } from "isostore/durable-objects";
 *
 * // An answer of a StoreObject call made by hand (StoreObjectClient does this for you).
 * function unwrap<T>(outcome: StoreOutcome<T>): T {
 *   if (!outcome.ok) throw decodeStoreError(outcome.error); // e.g. a KeyNotFoundError (instanceof works)
 *   return outcome.value;
 * }
 * ```
 */
export function decodeStoreError(wire: StoreWireError): StorageError {
  return decodeStorageError(wire);
}

async function outcome<T>(call: () => Promise<T>): Promise<StoreOutcome<T>> {
  try {
    return { ok: true, value: await call() };
  } catch (error) {
    return { ok: false, error: encodeStoreError(error) };
  }
}

/** A lease the object holds for a remote holder. */
interface HeldEntry {
  readonly lease: Lease;
  /** Releases the lease when the holder has been silent for a ttl. */
  idle: ReturnType<typeof setTimeout> | undefined;
}

/**
 * The storage primitives of one store, by Workers RPC (declare it with
 * `new_sqlite_classes`; see the module comment for the protocol). Reach it
 * through {@link StoreObjectClient}.
 *
 * @example
 * ```ts
 * // wrangler.toml: a binding `STORES` of class_name "StoreObject",
 * // and a migration with new_sqlite_classes = ["StoreObject"].
 * import { StoreObjectClient, type StoreObject } from "isostore/durable-objects";
 * export { StoreObject } from "isostore/durable-objects";
 *
 * export default {
 *   async fetch(request: Request, env: { STORES: DurableObjectNamespace<StoreObject> }): Promise<Response> {
 *     const store = new StoreObjectClient(env.STORES, "tenants/acme");
 *     return Response.json(await store.kv.keys("settings/"));
 *   },
 * };
 * ```
 */
export class StoreObject<Env extends StoreObjectEnv = StoreObjectEnv> extends DurableObject<Env> {
  private readonly engine: Engine;
  private opening: Promise<Store> | null = null;
  private readonly leases = new Map<string, HeldEntry>();
  /** The lease time to live (and the longest a holder may stay silent); a subclass may change it. */
  protected readonly leaseTtlMs: number = DEFAULT_LEASE_TTL_MS;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.engine = durableObjectEngine(ctx.storage);
  }

  /**
   * The hosted store, after checking (and on first use storing) its name.
   * Opened once per instance (concurrent first calls share the opening), so
   * every call goes through the same primitives: one R2 blob queue per key.
   */
  private async open(name: string): Promise<Store> {
    validateName(name);
    if (this.opening === null) {
      const opening = this.bind(name);
      this.opening = opening;
      opening.catch(() => {
        if (this.opening === opening) this.opening = null; // an engine failure: the next call tries again
      });
    }
    const store = await this.opening;
    if (store.name !== name) throw wrongStore(store.name, name);
    return store;
  }

  /** The store this object hosts: the stored name, or `name` stored now. */
  private async bind(name: string): Promise<Store> {
    const stored = await this.engine.transact("readwrite", async (tx) => {
      const existing = await tx.get<string>(CONFIG_KEY);
      if (existing === undefined) tx.put(CONFIG_KEY, name);
      return existing ?? name;
    });
    const store = createStore(this.engine, { name: stored, leaseTtlMs: this.leaseTtlMs, onLeaseRenewError: () => undefined });
    const bucket = this.env.STORE_BLOBS;
    return bucket === undefined ? store : { ...store, blobs: new R2Blobs(bucket, `${this.ctx.id.toString()}/`) };
  }

  private serve<T>(store: string, call: (store: Store) => Promise<T>): Promise<StoreOutcome<T>> {
    return outcome(async () => call(await this.open(store)));
  }

  // ------------------------------------------------------------ ledger

  /** An append; given `life`, it lands only in that life of the ledger (see `LedgerAppendOptions.life`). */
  async ledgerAppend(store: string, name: string, expected: number, payload: Uint8Array, fence?: LeaseFence, life?: number): Promise<StoreOutcome<void>> {
    return this.serve(store, (s) => s.ledger.append(name, expected, payload, life === undefined ? fenced(fence) : { ...fenced(fence), life }));
  }

  /**
   * Records `from`.. (0: from the start), up to `limit` and about
   * {@link MAX_READ_PAGE_BYTES}, of the ledger as it is now. With
   * `generation` (from {@link ledgerBound}), only of that life of the ledger:
   * if it was deleted since, the answer is `record_not_found` (`seq` the
   * first record asked for), never records of a later life.
   */
  async ledgerRead(store: string, name: string, from: number, limit: number = MAX_READ_PAGE_RECORDS, generation?: number): Promise<StoreOutcome<LedgerRecord[]>> {
    return this.serve(store, async (s) => {
      const max = Math.min(checkCount("limit", limit, 1), MAX_READ_PAGE_RECORDS);
      const reader = ledgerReader(this.engine, { store: s.name });
      const now = await reader.bound(name);
      const first = Math.max(checkCount("from", from, 0), 1);
      if (generation !== undefined && generation !== null && checkCount("generation", generation, 0) !== now.generation) throw new RecordNotFoundError(name, first);
      const cursor = reader.cursor(name, first, { tip: Math.min(now.tip, first + max - 1), generation: now.generation });
      const records: LedgerRecord[] = [];
      let bytes = 0;
      try {
        while (records.length < max && bytes < MAX_READ_PAGE_BYTES) {
          const record = await cursor.next();
          if (record === undefined) break;
          records.push(record);
          bytes += record.payload.length;
        }
      } finally {
        await cursor.close();
      }
      return records;
    });
  }

  /** The ledger's tip and generation, in one read: what a multi-page reader is bounded at (see {@link ledgerRead}). */
  async ledgerBound(store: string, name: string): Promise<StoreOutcome<LedgerReadBound>> {
    return this.serve(store, (s) => ledgerReader(this.engine, { store: s.name }).bound(name));
  }

  async ledgerTip(store: string, name: string): Promise<StoreOutcome<number>> {
    return this.serve(store, (s) => s.ledger.tip(name));
  }

  async ledgerDelete(store: string, name: string, fence?: LeaseFence): Promise<StoreOutcome<void>> {
    return this.serve(store, (s) => s.ledger.delete(name, fenced(fence)));
  }

  // ---------------------------------------------------------------- KV

  async kvGet(store: string, key: string): Promise<StoreOutcome<KvEntry>> {
    return this.serve(store, (s) => s.kv.get(key));
  }

  async kvPut(store: string, key: string, expectedRev: number, value: Uint8Array, fence?: LeaseFence): Promise<StoreOutcome<number>> {
    return this.serve(store, (s) => s.kv.put(key, expectedRev, value, fenced(fence)));
  }

  /** Every key with `prefix`, in one reply: past the RPC reply limit (32 MiB) it fails. Superseded by {@link kvKeysPage}. */
  async kvKeys(store: string, prefix: string): Promise<StoreOutcome<string[]>> {
    return this.serve(store, (s) => s.kv.keys(prefix));
  }

  /** A page of the keys with `prefix` after `after` (exclusive; `""` from the start), ascending, byte-capped; `more` when more follow. */
  async kvKeysPage(store: string, prefix: string, after: string = ""): Promise<StoreOutcome<KeysPage>> {
    return this.serve(store, (s) => listKeysPage(this.engine, storeLayout({ store: s.name }), "kv", prefix, after ?? ""));
  }

  async kvDelete(store: string, key: string, fence?: LeaseFence): Promise<StoreOutcome<void>> {
    return this.serve(store, (s) => s.kv.delete(key, fenced(fence)));
  }

  // ------------------------------------------------------------- blobs

  async blobPut(store: string, key: string, content: Uint8Array | ReadableStream<Uint8Array>): Promise<StoreOutcome<void>> {
    return this.serve(store, (s) => s.blobs.put(key, content as ByteStream | Uint8Array));
  }

  /** The blob's bytes as a stream (`blob_not_found` when absent). */
  async blobGet(store: string, key: string): Promise<StoreOutcome<ReadableStream<Uint8Array>>> {
    return this.serve(store, async (s) => (await s.blobs.get(key)) as ReadableStream<Uint8Array>);
  }

  /** Every blob key with `prefix`, in one reply: past the RPC reply limit (32 MiB) it fails. Superseded by {@link blobListPage}. */
  async blobList(store: string, prefix: string): Promise<StoreOutcome<string[]>> {
    return this.serve(store, (s) => s.blobs.list(prefix));
  }

  /** A page of the blob keys with `prefix` after `after` (exclusive; `""` from the start), ascending, byte-capped; `more` when more follow. */
  async blobListPage(store: string, prefix: string, after: string = ""): Promise<StoreOutcome<KeysPage>> {
    return this.serve(store, (s) =>
      s.blobs instanceof R2Blobs ? s.blobs.listPage(prefix, after ?? "") : listKeysPage(this.engine, storeLayout({ store: s.name }), "bm", prefix, after ?? ""),
    );
  }

  async blobDelete(store: string, key: string): Promise<StoreOutcome<void>> {
    return this.serve(store, (s) => s.blobs.delete(key));
  }

  // ------------------------------------------------------ ordered index

  async orderedGet(store: string, id: OrderedId): Promise<StoreOutcome<OrderedRecord>> {
    return this.serve(store, (s) => s.requireOrderedIndex().get(id));
  }

  async orderedCreate(store: string, id: OrderedId, rankingScope: string, value: Uint8Array, rank: Rank, due: Due): Promise<StoreOutcome<CreateOrderedResult>> {
    return this.serve(store, (s) => s.requireOrderedIndex().create(id, rankingScope, value, rank, due));
  }

  async orderedUpdate(store: string, id: OrderedId, expectedRevision: number, value: Uint8Array, rank: Rank, due: Due): Promise<StoreOutcome<OrderedRecord>> {
    return this.serve(store, (s) => s.requireOrderedIndex().update(id, expectedRevision, value, rank, due));
  }

  async orderedDelete(store: string, id: OrderedId, expectedRevision: number): Promise<StoreOutcome<OrderedRecord>> {
    return this.serve(store, (s) => s.requireOrderedIndex().delete(id, expectedRevision));
  }

  async orderedListOrdered(store: string, namespace: string, orderingScope: string, afterOrder: number, limit: number): Promise<StoreOutcome<OrderedPage>> {
    return this.serve(store, (s) => s.requireOrderedIndex().listOrdered(namespace, orderingScope, afterOrder, limit));
  }

  async orderedListRanked(store: string, namespace: string, rankingScope: string, after: string, limit: number): Promise<StoreOutcome<RankedPage>> {
    return this.serve(store, (s) => s.requireOrderedIndex().listRanked(namespace, rankingScope, after, limit));
  }

  async orderedListDue(store: string, namespace: string, dueAtOrBefore: number, after: string, limit: number): Promise<StoreOutcome<DuePage>> {
    return this.serve(store, (s) => s.requireOrderedIndex().listDue(namespace, dueAtOrBefore, after, limit));
  }

  // ------------------------------------------------------------ leases

  /** Take the lease `name` (`lease_held` while another holder owns it). */
  async leaseAcquire(store: string, name: string): Promise<StoreOutcome<StoreLeaseGrant>> {
    return this.serve(store, async (s) => {
      const lease = await s.leaser.acquire(name);
      this.hold(name, lease);
      return { name: lease.name, epoch: lease.epoch, ttlMs: this.leaseTtlMs };
    });
  }

  /**
   * Check that the holder at `epoch` owns `name` now (`lease_lost` if not);
   * also the holder's heartbeat. A grant this instance does not hold in
   * memory (made by an instance since evicted or redeployed) is adopted: it
   * is renewed from its row, and from now on by this instance.
   */
  async leaseAssertHeld(store: string, name: string, epoch: number): Promise<StoreOutcome<void>> {
    return this.serve(store, async (s) => {
      const entry = this.leases.get(name);
      if (entry !== undefined && entry.lease.epoch === epoch) {
        await s.leaser.assertHeld(name, epoch);
        this.heartbeat(name, entry);
      } else {
        // The adoption checks the row as assertHeld would (`lease_lost` when it is not this grant's).
        this.hold(name, await adoptLease(s.leaser, name, epoch));
      }
    });
  }

  /**
   * Give up the lease granted at `epoch`. Idempotent; never frees a later
   * holder. A grant this instance does not hold in memory (made by an
   * instance since evicted or redeployed) is released by its row.
   */
  async leaseRelease(store: string, name: string, epoch: number): Promise<StoreOutcome<void>> {
    return this.serve(store, async (s) => {
      validateName(name);
      checkCount("epoch", epoch, 1);
      const entry = this.leases.get(name);
      if (entry === undefined || entry.lease.epoch !== epoch) return releaseLease(s.leaser, name, epoch);
      this.forget(name, entry);
      await entry.lease.release();
    });
  }

  /** Keep `lease` in memory, renewed while its holder heartbeats (replacing any older grant of the name). */
  private hold(name: string, lease: Lease): void {
    const previous = this.leases.get(name);
    if (previous !== undefined) this.forget(name, previous);
    const entry: HeldEntry = { lease, idle: undefined };
    this.leases.set(name, entry);
    this.heartbeat(name, entry);
    lease.signal.addEventListener("abort", () => {
      if (this.leases.get(name) === entry) this.forget(name, entry);
    });
  }

  /** (Re)start the holder's silence timer: after a ttl without a heartbeat the lease is released. */
  private heartbeat(name: string, entry: HeldEntry): void {
    if (entry.idle !== undefined) clearTimeout(entry.idle);
    entry.idle = setTimeout(() => {
      entry.idle = undefined;
      if (this.leases.get(name) === entry) this.forget(name, entry);
      entry.lease.release().catch(() => undefined); // not renewed any more either way: it runs out at its expiry
    }, this.leaseTtlMs);
  }

  private forget(name: string, entry: HeldEntry): void {
    if (entry.idle !== undefined) clearTimeout(entry.idle);
    entry.idle = undefined;
    if (this.leases.get(name) === entry) this.leases.delete(name);
  }
}

function wrongStore(stored: string, asked: string): InvalidArgumentError {
  return new InvalidArgumentError("store", `this object hosts store ${JSON.stringify(stored)}, not ${JSON.stringify(asked.slice(0, 96))}`);
}

function fenced(fence: LeaseFence | undefined): { fence?: LeaseFence } {
  return fence === undefined || fence === null ? {} : { fence };
}

// ---------------------------------------------------------------- R2 blobs

/**
 * {@link Blobs} in an R2 bucket, under `prefix` (which no other writer
 * uses). Same contract as the engine's blobs: put of the same bytes is a
 * no-op, of other bytes `BlobConflictError`. The check and the write are one
 * step per key here (a per-key queue in this object, the prefix's only
 * writer), since R2 has no put-if-absent; the content's SHA-256 is kept in
 * the object's custom metadata and checked by R2 on upload. An already
 * aborted signal refuses a call before it changes anything (as the engine's
 * blobs do; signals do not cross the object's RPC, so this serves code in
 * the object).
 */
class R2Blobs implements Blobs {
  private readonly queues = new Map<string, Promise<unknown>>();

  constructor(
    private readonly bucket: R2Bucket,
    private readonly prefix: string,
  ) {}

  /** Run `step` after every earlier step on `key`. */
  private serial<T>(key: string, step: () => Promise<T>): Promise<T> {
    const before = this.queues.get(key) ?? Promise.resolve();
    const run = before.then(step, step);
    const settled = run.catch(() => undefined);
    this.queues.set(key, settled);
    void settled.then(() => {
      if (this.queues.get(key) === settled) this.queues.delete(key);
    });
    return run;
  }

  async put(key: string, content: ByteStream | Uint8Array, options?: CallOptions): Promise<void> {
    validateName(key);
    throwIfAborted(options);
    const bytes = isBytes(content) ? copyBytes(content) : await readAll(content, MAX_BLOB_BYTES);
    if (bytes.length > MAX_BLOB_BYTES) throw new InvalidArgumentError("content", `exceeds ${MAX_BLOB_BYTES} bytes`);
    const digest = toHex(await sha256(bytes));
    await this.serial(key, async () => {
      throwIfAborted(options);
      const existing = await r2("blobs.put", () => this.bucket.head(this.prefix + key));
      if (existing !== null) {
        if (existing.customMetadata?.["sha256"] === digest && existing.size === bytes.length) return;
        throw new BlobConflictError(key);
      }
      await r2("blobs.put", () => this.bucket.put(this.prefix + key, bytes, { sha256: digest, customMetadata: { sha256: digest } }));
    });
  }

  async get(key: string, options?: CallOptions): Promise<ReadableStream> {
    validateName(key);
    throwIfAborted(options);
    const object = await this.serial(key, () => r2("blobs.get", () => this.bucket.get(this.prefix + key)));
    if (object === null) throw new BlobNotFoundError(key);
    return object.body;
  }

  async delete(key: string, options?: CallOptions): Promise<void> {
    validateName(key);
    throwIfAborted(options);
    await this.serial(key, () => {
      throwIfAborted(options);
      return r2("blobs.delete", () => this.bucket.delete(this.prefix + key));
    });
  }

  /** One R2 list page (at most 1000 keys, so far under the RPC reply limit) after `after`. */
  async listPage(prefix: string, after: string): Promise<KeysPage> {
    validatePrefix(prefix);
    if (typeof after !== "string") throw new InvalidArgumentError("after", "must be a string");
    const options: R2ListOptions = after > prefix ? { prefix: this.prefix + prefix, startAfter: this.prefix + after } : { prefix: this.prefix + prefix };
    const page = await r2("blobs.list", () => this.bucket.list(options));
    return { keys: page.objects.map((object) => object.key.slice(this.prefix.length)), more: page.truncated };
  }

  async list(prefix: string, options?: CallOptions): Promise<string[]> {
    validatePrefix(prefix);
    throwIfAborted(options);
    const keys: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await r2("blobs.list", () => this.bucket.list(cursor === undefined ? { prefix: this.prefix + prefix } : { prefix: this.prefix + prefix, cursor }));
      for (const object of page.objects) keys.push(object.key.slice(this.prefix.length));
      if (!page.truncated) break;
      cursor = page.cursor;
    }
    return keys;
  }
}

async function r2<T>(operation: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw new StorageBackendError(operation, error);
  }
}
