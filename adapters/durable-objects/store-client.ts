/**
 * `StoreObjectClient`: a store (`RemoteStore` of `isostore/worker`: ledger,
 * KV, blobs, ordered index) over a {@link StoreObject} Durable Object, by
 * Workers RPC. It is what the isostore Worker serves the HTTP store routes
 * with, and any Worker can use it directly.
 *
 * - Errors come back typed: a `StoreWireError` answer is rebuilt into the
 *   same `StorageError` class with its code, message and spec fields
 *   ({@link decodeStoreError}).
 * - A call the platform fails (the object reset, overloaded, a broken
 *   connection, a reply lost) has no storage answer, and the call may have
 *   run in the object all the same. For a write the outcome is then
 *   unknown: `AmbiguousError` (ledger append and delete, KV put and delete,
 *   blob put and delete; its `operation` says which) or
 *   `OrderedAmbiguousError` (ordered create / update / delete): the spec's
 *   networked-provider errors. Resolve a ledger append with
 *   `appendDefinite`; read back before retrying a KV compare-and-swap. A
 *   read (nothing to have written) is a `StorageBackendError`. Either way
 *   `cause` is a `DurableObjectEngineError` (with `retryable`). A refusal
 *   the object answered (a typed error, as data) is definite, as ever.
 * - Ledger reads: `read` fixes its bound and the ledger's generation with one
 *   `ledgerBound` call, then reads pages (`ledgerRead`, each checked by the
 *   object against that generation) up to that bound, so the cursor never
 *   tails later appends and never reads on into a ledger deleted and
 *   written again under it: it ends with `RecordNotFoundError` instead.
 * - Key listings (`kv.keys`, `blobs.list`) read pages (`kvKeysPage`,
 *   `blobListPage`), each far under the RPC reply limit, on from the last
 *   key until the object says there are no more. Each page is its own read:
 *   a key present for the whole listing is listed once, one added or
 *   removed meanwhile may or may not be.
 * - Blobs stream: `put` hands its stream to the object, `get` answers the
 *   object's stream; neither is buffered here.
 * - Signals are checked before each call (an RPC in flight cannot be
 *   withdrawn). Fences (`{ fence }`) are passed through; leases are not
 *   offered here (use the object's `lease*` methods).
 * - Stubs belong to the request that made them: make a client per request
 *   (it is cheap; the stub is made on first use).
 */
/// <reference types="@cloudflare/workers-types" />
import type { Blobs } from "../../src/storage/blobs.js";
import { AmbiguousError, InvalidArgumentError, StorageBackendError } from "../../src/storage/errors.js";
import type { LeaseFence } from "../../src/storage/fence.js";
import type { KeysPage, KV, KvEntry, KvWriteOptions } from "../../src/storage/kv.js";
import {
  boundOfLife,
  checkLife,
  PagedLedgerCursor,
  type Ledger,
  type LedgerCursor,
  type LedgerReadBound,
  type LedgerReadOptions,
  type LedgerRecord,
  type LedgerAppendOptions,
  type LedgerWriteOptions,
} from "../../src/storage/ledger.js";
import { validateName } from "../../src/storage/names.js";
import { throwIfAborted, type CallOptions } from "../../src/storage/options.js";
import { OrderedAmbiguousError } from "../../src/storage/ordered/errors.js";
import type {
  CreateOrderedResult,
  Due,
  DueCursor,
  DuePage,
  OrderedCallOptions,
  OrderedId,
  OrderedIndex,
  OrderedPage,
  OrderedRecord,
  Rank,
  RankedCursor,
  RankedPage,
} from "../../src/storage/ordered/types.js";
import { checkCount } from "../../src/storage/transaction.js";
import { isBytes, type ByteStream, type PlatformByteStream } from "../../src/storage/web.js";
import type { RemoteStore } from "../../src/worker/stores.js";
import { platformError } from "./errors.js";
import { decodeStoreError, type StoreOutcome } from "./store-object.js";

/** The {@link StoreObject} RPC methods the client calls (a `DurableObjectStub<StoreObject>` has them). */
export interface StoreObjectStub {
  ledgerAppend(store: string, name: string, expected: number, payload: Uint8Array, fence?: LeaseFence, life?: number): Promise<StoreOutcome<void>>;
  ledgerRead(store: string, name: string, from: number, limit?: number, generation?: number): Promise<StoreOutcome<LedgerRecord[]>>;
  ledgerBound(store: string, name: string): Promise<StoreOutcome<LedgerReadBound>>;
  ledgerTip(store: string, name: string): Promise<StoreOutcome<number>>;
  ledgerDelete(store: string, name: string, fence?: LeaseFence): Promise<StoreOutcome<void>>;
  kvGet(store: string, key: string): Promise<StoreOutcome<KvEntry>>;
  kvPut(store: string, key: string, expectedRev: number, value: Uint8Array, fence?: LeaseFence): Promise<StoreOutcome<number>>;
  kvKeys(store: string, prefix: string): Promise<StoreOutcome<string[]>>;
  kvKeysPage(store: string, prefix: string, after?: string): Promise<StoreOutcome<KeysPage>>;
  kvDelete(store: string, key: string, fence?: LeaseFence): Promise<StoreOutcome<void>>;
  blobPut(store: string, key: string, content: Uint8Array | ReadableStream<Uint8Array>): Promise<StoreOutcome<void>>;
  blobGet(store: string, key: string): Promise<StoreOutcome<ReadableStream<Uint8Array>>>;
  blobList(store: string, prefix: string): Promise<StoreOutcome<string[]>>;
  blobListPage(store: string, prefix: string, after?: string): Promise<StoreOutcome<KeysPage>>;
  blobDelete(store: string, key: string): Promise<StoreOutcome<void>>;
  orderedGet(store: string, id: OrderedId): Promise<StoreOutcome<OrderedRecord>>;
  orderedCreate(store: string, id: OrderedId, rankingScope: string, value: Uint8Array, rank: Rank, due: Due): Promise<StoreOutcome<CreateOrderedResult>>;
  orderedUpdate(store: string, id: OrderedId, expectedRevision: number, value: Uint8Array, rank: Rank, due: Due): Promise<StoreOutcome<OrderedRecord>>;
  orderedDelete(store: string, id: OrderedId, expectedRevision: number): Promise<StoreOutcome<OrderedRecord>>;
  orderedListOrdered(store: string, namespace: string, orderingScope: string, afterOrder: number, limit: number): Promise<StoreOutcome<OrderedPage>>;
  orderedListRanked(store: string, namespace: string, rankingScope: string, after: string, limit: number): Promise<StoreOutcome<RankedPage>>;
  orderedListDue(store: string, namespace: string, dueAtOrBefore: number, after: string, limit: number): Promise<StoreOutcome<DuePage>>;
}

/** Where the client finds its object: a `DurableObjectNamespace<StoreObject>` (e.g. `env.STORES`). */
export interface StoreObjectNamespace {
  idFromName(name: string): DurableObjectId;
  get(id: DurableObjectId): unknown;
}

/** Ledger records the client's cursor asks for per page. */
const READ_PAGE = 256;

/**
 * A store hosted by a {@link StoreObject}, addressed by its name (one object
 * per store: `namespace.idFromName(store)`).
 *
 * @example
 * ```ts
 * import { StoreObjectClient, type StoreObject } from "isostore/durable-objects";
 *
 * export default {
 *   async fetch(request: Request, env: { STORES: DurableObjectNamespace<StoreObject> }) {
 *     const store = new StoreObjectClient(env.STORES, "tenants/acme");
 *     const rev = await store.kv.put("settings/theme", 0, new TextEncoder().encode("dark"));
 *     return new Response(String(rev));
 *   },
 * };
 * ```
 */
export class StoreObjectClient implements RemoteStore {
  readonly name: string;
  readonly ledger: Ledger;
  readonly kv: KV;
  readonly blobs: Blobs;
  readonly orderedIndex: OrderedIndex;
  private readonly stubOf: () => StoreObjectStub;
  private stub: StoreObjectStub | null = null;

  /**
   * @param namespace the `StoreObject` namespace binding; the store's object
   *   is `namespace.get(namespace.idFromName(name))`, made on first use.
   * @throws {InvalidNameError} when `name` breaks the storage name grammar.
   */
  constructor(namespace: StoreObjectNamespace, name: string) {
    this.name = validateName(name);
    this.stubOf = () => namespace.get(namespace.idFromName(name)) as StoreObjectStub;
    this.ledger = new ClientLedger(this);
    this.kv = new ClientKV(this);
    this.blobs = new ClientBlobs(this);
    this.orderedIndex = new ClientOrderedIndex(this);
  }

  /**
   * A client over a stub you already hold (e.g. from `getByName`, or a
   * test double). A Durable Object stub answers any property name, so it is
   * told apart from a namespace by this factory rather than by probing.
   */
  static fromStub(stub: StoreObjectStub, name: string): StoreObjectClient {
    return new StoreObjectClient({ idFromName: (id) => id as unknown as DurableObjectId, get: () => stub }, name);
  }

  /** The ordered index (every `StoreObject` has one). */
  requireOrderedIndex(): OrderedIndex {
    return this.orderedIndex;
  }

  /**
   * One RPC call, unwrapped: the value, or the decoded storage error (a
   * definite answer of the object). A call that failed without an answer is
   * `unknown(cause)` when given: every write passes it, since the call may
   * have run in the object and only its reply been lost (an outcome the
   * caller cannot know). Without it (reads) it is a `StorageBackendError`
   * naming `operation`, which promises that nothing was written.
   *
   * @internal
   */
  async call<T>(operation: string, rpc: (stub: StoreObjectStub, store: string) => Promise<StoreOutcome<T>>, unknown?: (cause: unknown) => Error): Promise<T> {
    let outcome: StoreOutcome<T>;
    try {
      if (this.stub === null) this.stub = this.stubOf();
      outcome = await rpc(this.stub, this.name);
    } catch (error) {
      const cause = platformError(error, operation);
      throw unknown === undefined ? new StorageBackendError(operation, cause) : unknown(cause);
    }
    if (!outcome.ok) throw decodeStoreError(outcome.error);
    return outcome.value;
  }

  /**
   * A whole key listing, page by page: `page` asks for the keys after
   * `after` ("" first, then the last key of the page before) until a page
   * says there are no more. The signal is checked before each page.
   *
   * @internal
   */
  async listKeys(
    operation: string,
    options: CallOptions | undefined,
    page: (stub: StoreObjectStub, store: string, after: string) => Promise<StoreOutcome<KeysPage>>,
  ): Promise<string[]> {
    const keys: string[] = [];
    let after = "";
    for (;;) {
      throwIfAborted(options);
      const from = after;
      const answer = await this.call(operation, (stub, store) => page(stub, store, from));
      for (const key of answer.keys) keys.push(key);
      const last = answer.keys[answer.keys.length - 1];
      // A page that says "more" always holds a key; guard anyway, and never step backwards.
      if (!answer.more || last === undefined || last <= after) return keys;
      after = last;
    }
  }
}

function fenceOf(options: LedgerWriteOptions | undefined): LeaseFence | undefined {
  return options?.fence ?? undefined;
}

class ClientLedger implements Ledger {
  constructor(private readonly client: StoreObjectClient) {}

  async append(name: string, expected: number, payload: Uint8Array, options?: LedgerAppendOptions): Promise<void> {
    const life = checkLife(options);
    throwIfAborted(options);
    const fence = fenceOf(options);
    // The object checks the life in the append's own transaction (only there can it tell a rewritten ledger from the old one).
    await this.client.call(
      "ledger.append",
      (stub, store) =>
        life !== undefined
          ? stub.ledgerAppend(store, name, expected, payload, fence, life)
          : fence === undefined
            ? stub.ledgerAppend(store, name, expected, payload)
            : stub.ledgerAppend(store, name, expected, payload, fence),
      (cause) => new AmbiguousError(name, expected, cause),
    );
  }

  async read(name: string, from: number, options?: LedgerReadOptions): Promise<LedgerCursor> {
    validateName(name);
    checkCount("from", from, 0);
    const life = checkLife(options);
    throwIfAborted(options);
    const bound = boundOfLife(name, from, await this.client.call("ledger.read", (stub, store) => stub.ledgerBound(store, name)), life);
    // One `ledgerRead` call per page; the object may answer fewer records than asked (its page is byte-capped),
    // and answers `record_not_found` once the ledger is not the life (generation) the cursor was opened on.
    return new PagedLedgerCursor(name, Math.max(from, 1), bound, READ_PAGE, (first, last) =>
      this.client.call("ledger.read", (stub, store) => stub.ledgerRead(store, name, first, last - first + 1, bound.generation)),
    );
  }

  async tip(name: string, options?: CallOptions): Promise<number> {
    throwIfAborted(options);
    return this.client.call("ledger.tip", (stub, store) => stub.ledgerTip(store, name));
  }

  async delete(name: string, options?: LedgerWriteOptions): Promise<void> {
    throwIfAborted(options);
    const fence = fenceOf(options);
    await this.client.call(
      "ledger.delete",
      (stub, store) => (fence === undefined ? stub.ledgerDelete(store, name) : stub.ledgerDelete(store, name, fence)),
      (cause) => new AmbiguousError(name, 0, cause, "ledger.delete"),
    );
  }
}

class ClientKV implements KV {
  constructor(private readonly client: StoreObjectClient) {}

  async get(key: string, options?: CallOptions): Promise<KvEntry> {
    throwIfAborted(options);
    return this.client.call("kv.get", (stub, store) => stub.kvGet(store, key));
  }

  async put(key: string, expectedRev: number, value: Uint8Array, options?: KvWriteOptions): Promise<number> {
    throwIfAborted(options);
    const fence = fenceOf(options);
    return this.client.call(
      "kv.put",
      (stub, store) => (fence === undefined ? stub.kvPut(store, key, expectedRev, value) : stub.kvPut(store, key, expectedRev, value, fence)),
      (cause) => new AmbiguousError(key, expectedRev, cause, "kv.put"),
    );
  }

  async keys(prefix: string, options?: CallOptions): Promise<string[]> {
    throwIfAborted(options);
    return this.client.listKeys("kv.keys", options, (stub, store, after) => stub.kvKeysPage(store, prefix, after));
  }

  async delete(key: string, options?: KvWriteOptions): Promise<void> {
    throwIfAborted(options);
    const fence = fenceOf(options);
    await this.client.call(
      "kv.delete",
      (stub, store) => (fence === undefined ? stub.kvDelete(store, key) : stub.kvDelete(store, key, fence)),
      (cause) => new AmbiguousError(key, 0, cause, "kv.delete"),
    );
  }
}

class ClientBlobs implements Blobs {
  constructor(private readonly client: StoreObjectClient) {}

  async put(key: string, content: ByteStream | Uint8Array, options?: CallOptions): Promise<void> {
    throwIfAborted(options);
    if (!isBytes(content) && (content === null || typeof content !== "object" || typeof content.getReader !== "function")) {
      throw new InvalidArgumentError("content", "must be a Uint8Array or a ReadableStream of Uint8Array");
    }
    // Handed on as it is: a stream crosses RPC as a stream, so the bytes are not buffered here.
    await this.client.call(
      "blobs.put",
      (stub, store) => stub.blobPut(store, key, content as Uint8Array | ReadableStream<Uint8Array>),
      (cause) => new AmbiguousError(key, 0, cause, "blobs.put"),
    );
  }

  async get(key: string, options?: CallOptions): Promise<PlatformByteStream> {
    throwIfAborted(options);
    return this.client.call("blobs.get", (stub, store) => stub.blobGet(store, key));
  }

  async delete(key: string, options?: CallOptions): Promise<void> {
    throwIfAborted(options);
    await this.client.call("blobs.delete", (stub, store) => stub.blobDelete(store, key), (cause) => new AmbiguousError(key, 0, cause, "blobs.delete"));
  }

  async list(prefix: string, options?: CallOptions): Promise<string[]> {
    throwIfAborted(options);
    return this.client.listKeys("blobs.list", options, (stub, store, after) => stub.blobListPage(store, prefix, after));
  }
}

class ClientOrderedIndex implements OrderedIndex {
  constructor(private readonly client: StoreObjectClient) {}

  async get(id: OrderedId, options?: OrderedCallOptions): Promise<OrderedRecord> {
    throwIfAborted(options);
    return this.client.call("ordered.get", (stub, store) => stub.orderedGet(store, id));
  }

  async create(id: OrderedId, rankingScope: string, value: Uint8Array, rank: Rank, due: Due, options?: OrderedCallOptions): Promise<CreateOrderedResult> {
    throwIfAborted(options);
    return this.client.call(
      "ordered.create",
      (stub, store) => stub.orderedCreate(store, id, rankingScope, value, rank, due),
      (cause) => new OrderedAmbiguousError("create", id, cause),
    );
  }

  async update(id: OrderedId, expectedRevision: number, value: Uint8Array, rank: Rank, due: Due, options?: OrderedCallOptions): Promise<OrderedRecord> {
    throwIfAborted(options);
    return this.client.call(
      "ordered.update",
      (stub, store) => stub.orderedUpdate(store, id, expectedRevision, value, rank, due),
      (cause) => new OrderedAmbiguousError("update", id, cause),
    );
  }

  async delete(id: OrderedId, expectedRevision: number, options?: OrderedCallOptions): Promise<OrderedRecord> {
    throwIfAborted(options);
    return this.client.call(
      "ordered.delete",
      (stub, store) => stub.orderedDelete(store, id, expectedRevision),
      (cause) => new OrderedAmbiguousError("delete", id, cause),
    );
  }

  async listOrdered(namespace: string, orderingScope: string, afterOrder: number, limit: number, options?: OrderedCallOptions): Promise<OrderedPage> {
    throwIfAborted(options);
    return this.client.call("ordered.listOrdered", (stub, store) => stub.orderedListOrdered(store, namespace, orderingScope, afterOrder, limit));
  }

  async listRanked(namespace: string, rankingScope: string, after: RankedCursor, limit: number, options?: OrderedCallOptions): Promise<RankedPage> {
    throwIfAborted(options);
    return this.client.call("ordered.listRanked", (stub, store) => stub.orderedListRanked(store, namespace, rankingScope, after, limit));
  }

  async listDue(namespace: string, dueAtOrBefore: number, after: DueCursor, limit: number, options?: OrderedCallOptions): Promise<DuePage> {
    throwIfAborted(options);
    return this.client.call("ordered.listDue", (stub, store) => stub.orderedListDue(store, namespace, dueAtOrBefore, after, limit));
  }
}
