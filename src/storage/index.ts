/**
 * The storage primitives (`storage-primitives.go.txt`), written once over
 * the Engine: {@link Ledger}, {@link Leaser}, {@link KV}, {@link Blobs}, the
 * OrderedIndex (`./ordered/`), {@link createComposite} and
 * {@link createStore}, the name grammar and the typed errors.
 *
 * How the Go shapes map to TypeScript:
 * - `context.Context` is an optional `{ signal }` last argument; an aborted
 *   call rejects with `signal.reason` and changes nothing.
 * - `uint64` sequences, revisions and epochs are safe-integer `number`s;
 *   `[]byte` is `Uint8Array`, copied in and out; `io.Reader` is a
 *   `ReadableStream<Uint8Array>` (or a `Uint8Array`).
 * - Error structs are `StorageError` subclasses with the spec's fields and a
 *   stable `code`. Where a spec field is called `Name`, `err.name` holds it
 *   (the ledger's or lease's name): identify errors by `code` or
 *   `instanceof`, not by `err.name`.
 *
 * Decisions where the spec leaves room:
 * - Names: ledger names, lease names, KV keys, blob keys and store names all
 *   follow the storage name grammar (`validateName`), checked before any
 *   engine call. Listing prefixes must be a possible start of a name
 *   (`validatePrefix`); `""` lists everything.
 * - KV revisions come from one per-store counter: strictly increasing per
 *   key, also across delete and re-create, but not dense. A revision
 *   mismatch is `RevisionConflictError { key, expectedRev, actualRev }` (the
 *   spec names no KV conflict type; this mirrors the OrderedIndex one).
 * - `appendDefinite`: an ambiguous append whose record is then absent is
 *   `AppendVerifyError` with a `RecordNotFoundError` cause (fail closed: a
 *   networked append may still land); a conflict whose record is absent is
 *   the original `ConflictError`.
 * - Leases: the holder gives up (signal aborted) at its own expiry if no
 *   renewal succeeded by then, before anyone else can be granted the name.
 *   Writes are fenced with the `fence` option of ledger and KV writes
 *   (checked in the write's own transaction) or `Leaser.assertHeld`.
 * - Size bounds (so one engine row stays well under the 2 MB of a Durable
 *   Objects row): ledger payloads and KV values at most 1 MiB; blobs are
 *   chunked at 256 KiB, at most 256 MiB in all (held in memory while put).
 * - Engine failures become `StorageBackendError { operation }` with the
 *   engine's error as `cause`: a definite failure, nothing written.
 *
 * @example
 * ```ts
 * import { createStore } from "isostore";
 * import { memoryEngine } from "isostore/memory";
 *
 * const store = createStore(memoryEngine(), { name: "app" });
 * await store.ledger.append("events", 0, new Uint8Array([1]));
 * ```
 */
export {
  StorageError,
  StorageBackendError,
  // The journal exports an `InvalidArgumentError` of its own (a JournalError); the storage one is exported under this name.
  InvalidArgumentError as InvalidStorageArgumentError,
  InvalidNameError,
  ConflictError,
  AmbiguousError,
  type AmbiguousOperation,
  AppendVerifyError,
  RecordNotFoundError,
  LeaseHeldError,
  LeaseLostError,
  KeyNotFoundError,
  RevisionConflictError,
  BlobConflictError,
  BlobNotFoundError,
  IncompleteCompositeError,
  type CompositePart,
  type NameRule,
} from "./errors.js";
export { MAX_NAME_BYTES, isValidName, validateName, validatePrefix } from "./names.js";
export { AbortedError, throwIfAborted, type AbortSignalLike, type CallOptions, type PlatformAbortSignal } from "./options.js";
export type { ByteStream, ByteStreamReader, PlatformByteStream } from "./web.js";
export type { LeaseFence } from "./fence.js";
export {
  MAX_LEDGER_PAYLOAD_BYTES,
  appendDefinite,
  createLedger,
  readRecord,
  type Ledger,
  type LedgerAppendOptions,
  type LedgerCursor,
  type LedgerOptions,
  type LedgerRecord,
  type LedgerReadOptions,
  type LedgerWriteOptions,
} from "./ledger.js";
export { DEFAULT_LEASE_TTL_MS, createLeaser, type Lease, type Leaser, type LeaserOptions, type Scheduler } from "./leaser.js";
export { MAX_KV_VALUE_BYTES, createKV, type KV, type KvEntry, type KvOptions, type KvWriteOptions } from "./kv.js";
export { BLOB_CHUNK_BYTES, MAX_BLOB_BYTES, contentAddress, createBlobs, readAll, type Blobs, type BlobsOptions } from "./blobs.js";
export { createComposite, type Composite, type CompositeParts } from "./composite.js";
export { createStore, type Store, type StoreOptions } from "./store.js";
export * from "./ordered/index.js";
