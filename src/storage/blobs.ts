/**
 * Blobs: bulk immutable bytes by key (`storage-primitives.go.txt`, `Blobs`).
 *
 * What it promises:
 * - `put(key, bytes | stream)` reads the content fully, computes its SHA-256
 *   outside any transaction, then commits in ONE transaction: when the key is
 *   absent it stores the content; when it holds the same content (same digest
 *   and size) it is a no-op success; when it holds different content it
 *   fails with {@link BlobConflictError} and the original stays untouched.
 * - Content is stored in chunks of at most {@link BLOB_CHUNK_BYTES}, so no
 *   engine value exceeds what an adapter can hold in one row (Durable
 *   Objects: 2 MB).
 * - `get` returns a `ReadableStream` that reads one chunk per engine
 *   transaction; should the blob be deleted (or replaced) while it is read,
 *   the stream errors with {@link BlobNotFoundError} rather than mixing
 *   contents.
 * - `delete` is idempotent; `list(prefix)` is ascending and duplicate-free.
 * - Keys are storage names (callers content-address them, e.g.
 *   `snapshots/<sha256 hex>`; see {@link contentAddress}).
 *
 * The whole content is held in memory during `put`: Web Crypto has no
 * incremental digest, and the write must be one transaction anyway.
 */
import { clearRange, type Engine } from "../engine.js";
import { copyBytes } from "./copy.js";
import { BlobConflictError, BlobNotFoundError, InvalidArgumentError, StorageError } from "./errors.js";
import { BLOB_CHUNK_BYTES, storeLayout, type BlobMetaRow, type StoreLayout } from "./layout.js";
import { validateName, validatePrefix } from "./names.js";
import { throwIfAborted, type CallOptions } from "./options.js";
import { transact } from "./transaction.js";
import { isBytes, newByteStream, sha256, toHex, type ByteStream, type ByteStreamReader, type PlatformByteStream } from "./web.js";

export { BLOB_CHUNK_BYTES };

/** The largest blob (256 MiB): the whole content is held in memory while it is written. */
export const MAX_BLOB_BYTES = 256 * 1024 * 1024;

/** Bulk immutable bytes by key. */
export interface Blobs {
  /**
   * Store `content` at `key`. The same bytes again is a no-op success.
   *
   * @throws {BlobConflictError} when `key` holds different content (left untouched).
   * @throws {InvalidArgumentError} (`argument` `"content"`, nothing stored) when
   *   `content` is neither bytes nor a readable stream of them: not a stream, a
   *   locked stream, a chunk that is not a `Uint8Array`, a stream that fails
   *   (its error as `cause`), or more than {@link MAX_BLOB_BYTES}.
   * @throws {AmbiguousError} (`operation` `"blobs.put"`, networked stores only)
   *   when the put got no answer: the blob may have been stored (putting the
   *   same bytes again is safe).
   */
  put(key: string, content: ByteStream | Uint8Array, options?: CallOptions): Promise<void>;
  /**
   * The content at `key`, as a stream of chunks.
   *
   * @throws {BlobNotFoundError} when `key` is absent.
   */
  get(key: string, options?: CallOptions): Promise<PlatformByteStream>;
  /**
   * Remove the blob; absent is a no-op success.
   *
   * @throws {AmbiguousError} (`operation` `"blobs.delete"`, networked stores only) when the delete got no answer: it may have landed.
   */
  delete(key: string, options?: CallOptions): Promise<void>;
  /** The keys that start with `prefix` ("" for all), ascending and duplicate-free. */
  list(prefix: string, options?: CallOptions): Promise<string[]>;
}

/** Options of {@link createBlobs}. */
export interface BlobsOptions {
  /** The store's name (storage name grammar): keys live under `["s", store]`. */
  readonly store: string;
}

/**
 * A {@link Blobs} over an Engine. Usually reached through `createStore`.
 *
 * @example
 * ```ts
 * const { blobs } = createStore(memoryEngine(), { name: "app" });
 * const key = `snapshots/${await contentAddress(bytes)}`;
 * await blobs.put(key, bytes);          // again: a no-op
 * const stream = await blobs.get(key);  // ReadableStream<Uint8Array>
 * ```
 */
export function createBlobs(engine: Engine, options: BlobsOptions): Blobs {
  return new EngineBlobs(engine, storeLayout(options));
}

/**
 * SHA-256 of `content` as lowercase hex (64 characters), via Web Crypto.
 * A stream is read to its end.
 *
 * @example
 * ```ts
 * await contentAddress(new Uint8Array()); // "e3b0c442...b855"
 * ```
 */
export async function contentAddress(content: ByteStream | Uint8Array): Promise<string> {
  const bytes = isBytes(content) ? content : await readAll(content, MAX_BLOB_BYTES);
  return toHex(await sha256(bytes));
}

/** `error`'s message, for the message of the error that wraps it. */
function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Read a stream of `Uint8Array` chunks into one array, refusing more than `max` bytes.
 *
 * @throws {InvalidArgumentError} (`argument` `"content"`) when `stream` cannot be
 *   read (not a stream, already locked, a reader that does not work, a chunk
 *   that is not a `Uint8Array`), fails while it is read (its error as `cause`),
 *   or holds more than `max` bytes.
 */
export async function readAll(stream: ByteStream, max: number = Number.MAX_SAFE_INTEGER): Promise<Uint8Array> {
  if (stream === null || typeof stream !== "object" || typeof stream.getReader !== "function") {
    throw new InvalidArgumentError("content", "must be a Uint8Array or a ReadableStream of Uint8Array");
  }
  let reader: ByteStreamReader;
  try {
    reader = stream.getReader(); // throws for a stream that is locked (already being read)
  } catch (error) {
    throw new InvalidArgumentError("content", `the content stream cannot be read: ${messageOf(error)}`, error);
  }
  if (reader === null || typeof reader !== "object") throw new InvalidArgumentError("content", "the content stream's getReader() returned no reader");
  const parts: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const step = await reader.read();
      if (step.done) break;
      if (!isBytes(step.value)) throw new InvalidArgumentError("content", "a stream chunk is not a Uint8Array");
      size += step.value.length;
      if (size > max) throw new InvalidArgumentError("content", `exceeds ${max} bytes`);
      parts.push(copyBytes(step.value));
    }
  } catch (error) {
    // The stream's own error is already the one we report; a failure to cancel (or a reader without cancel) adds nothing.
    await Promise.resolve()
      .then(() => reader.cancel(error))
      .catch(() => undefined);
    if (error instanceof StorageError) throw error;
    // The caller's stream failed (an upload that broke off): a typed refusal of the content, its error as cause.
    throw new InvalidArgumentError("content", `the content stream failed: ${messageOf(error)}`, error);
  } finally {
    releaseQuietly(reader);
  }
  const all = new Uint8Array(size);
  let offset = 0;
  for (const part of parts) {
    all.set(part, offset);
    offset += part.length;
  }
  return all;
}

/** Release the reader's lock; a reader that cannot (a hand-made one without `releaseLock`) changes nothing about the outcome. */
function releaseQuietly(reader: ByteStreamReader): void {
  try {
    reader.releaseLock();
  } catch {
    // Deliberately ignored: the content is already read (or refused with its own error), and nothing was stored.
  }
}

class EngineBlobs implements Blobs {
  constructor(
    private readonly engine: Engine,
    private readonly layout: StoreLayout,
  ) {}

  async put(key: string, content: ByteStream | Uint8Array, options?: CallOptions): Promise<void> {
    validateName(key);
    throwIfAborted(options);
    const bytes = isBytes(content) ? copyBytes(content) : await readAll(content, MAX_BLOB_BYTES);
    if (bytes.length > MAX_BLOB_BYTES) throw new InvalidArgumentError("content", `exceeds ${MAX_BLOB_BYTES} bytes`);
    const digest = toHex(await sha256(bytes));
    const chunks: Uint8Array[] = [];
    for (let offset = 0; offset < bytes.length; offset += BLOB_CHUNK_BYTES) chunks.push(bytes.slice(offset, offset + BLOB_CHUNK_BYTES));
    const meta: BlobMetaRow = { size: bytes.length, sha256: digest, chunks: chunks.length };
    await transact(this.engine, "readwrite", "blobs.put", options, async (tx) => {
      const existing = await tx.get<BlobMetaRow>(this.layout.blobMeta(key));
      if (existing !== undefined) {
        if (existing.sha256 === meta.sha256 && existing.size === meta.size) return;
        throw new BlobConflictError(key);
      }
      chunks.forEach((chunk, index) => tx.put(this.layout.blobChunk(key, index), chunk));
      tx.put(this.layout.blobMeta(key), meta);
    });
  }

  async get(key: string, options?: CallOptions): Promise<PlatformByteStream> {
    validateName(key);
    const meta = await transact(this.engine, "readonly", "blobs.get", options, (tx) => tx.get<BlobMetaRow>(this.layout.blobMeta(key)));
    if (meta === undefined) throw new BlobNotFoundError(key);
    let index = 0;
    const stream = newByteStream({
      pull: async (controller) => {
        if (index >= meta.chunks) return controller.close();
        try {
          const chunk = await transact(this.engine, "readonly", "blobs.get", undefined, async (tx) => {
            const now = await tx.get<BlobMetaRow>(this.layout.blobMeta(key));
            if (now === undefined || now.sha256 !== meta.sha256) return undefined;
            return tx.get<Uint8Array>(this.layout.blobChunk(key, index));
          });
          if (chunk === undefined) throw new BlobNotFoundError(key);
          index++;
          controller.enqueue(copyBytes(chunk));
          if (index >= meta.chunks) controller.close();
        } catch (error) {
          controller.error(error);
        }
      },
    });
    return stream as unknown as PlatformByteStream;
  }

  async delete(key: string, options?: CallOptions): Promise<void> {
    validateName(key);
    await transact(this.engine, "readwrite", "blobs.delete", options, async (tx) => {
      tx.delete(this.layout.blobMeta(key));
      await clearRange(tx, { prefix: this.layout.blobChunks(key) }); // a range delete where the engine has one: no chunk read
    });
  }

  async list(prefix: string, options?: CallOptions): Promise<string[]> {
    validatePrefix(prefix);
    const entries = await transact(this.engine, "readonly", "blobs.list", options, (tx) => tx.scan(this.layout.prefixRange("bm", prefix), { keysOnly: true }));
    return entries.map((entry) => entry.key[entry.key.length - 1]).filter((key): key is string => typeof key === "string" && key.startsWith(prefix));
  }
}
