/**
 * Remote stores: what the HTTP API's store routes (`/v1/stores/{store}/...`,
 * docs/http-api.md) need from a store, and the plain-data form of storage
 * errors that crosses a wire (Workers RPC, an HTTP error body).
 *
 * - {@link RemoteStore}: the part of the core `Store` (`createStore`) the
 *   routes call. A `Store` fits as it is (Node tests, a single-process
 *   server); `StoreObjectClient` (`isostore/durable-objects`) implements it
 *   over a `StoreObject` Durable Object.
 * - {@link StoreTable}: how the app finds a store by name, per request.
 * - {@link encodeStorageError} / {@link decodeStorageError}: a storage error
 *   as `{ code, type, message, fields }` and back into the same class with
 *   the same code, message and spec fields.
 * - {@link encodeBase64} / {@link decodeBase64}: the byte payloads of the
 *   JSON store routes (ledger payloads, KV values, ordered values).
 *
 * Leases and fences do not cross HTTP: a lease needs heartbeats and the
 * holder's own timers, so the HTTP routes offer no leaser and take no fence.
 * This module imports no HTTP framework, so a Durable Object can use it.
 */
import { waitOutCause, waitOutMarks, type WaitOutMarks } from "../cause-chain.js";
import type { Blobs } from "../storage/blobs.js";
import {
  hasSpecName,
  AmbiguousError,
  AppendVerifyError,
  BlobConflictError,
  BlobNotFoundError,
  ConflictError,
  IncompleteCompositeError,
  InvalidArgumentError,
  InvalidNameError,
  KeyNotFoundError,
  LeaseHeldError,
  LeaseLostError,
  RecordNotFoundError,
  RevisionConflictError,
  StorageBackendError,
  StorageError,
  type CompositePart,
  type AmbiguousOperation,
  type NameRule,
} from "../storage/errors.js";
import type { KV } from "../storage/kv.js";
import type { Ledger } from "../storage/ledger.js";
import { AbortedError } from "../storage/options.js";
import {
  InvalidDueError,
  InvalidOrderedCursorError,
  InvalidOrderedLimitError,
  InvalidOrderedRecordError,
  InvalidRankError,
  InvalidStableKeyError,
  OrderedAmbiguousError,
  OrderedDeletedError,
  OrderedRecordNotFoundError,
  OrderedRevisionConflictError,
  OrderedRevisionExhaustedError,
  OrderedValueTooLargeError,
  type DueRule,
  type RankRule,
  type StableKeyRule,
} from "../storage/ordered/errors.js";
import type { Due, OrderedCursorKind, OrderedCursorRule, OrderedId, OrderedIndex, OrderedOperation, Rank } from "../storage/ordered/types.js";

/**
 * The part of a core `Store` the HTTP store routes use: ledger, KV, blobs and
 * the ordered index (no leaser: leases do not cross HTTP). A `Store` from
 * `createStore` is one; so is a `StoreObjectClient`.
 *
 * @example
 * ```ts
 * import { createStore } from "isostore";
 * import { memoryEngine } from "isostore/memory";
 * import type { RemoteStore } from "isostore/worker";
 *
 * const store: RemoteStore = createStore(memoryEngine(), { name: "tenants/acme" });
 * ```
 */
export interface RemoteStore {
  /** The store's name (storage name grammar). */
  readonly name: string;
  readonly ledger: Ledger;
  readonly kv: KV;
  readonly blobs: Blobs;
  /**
   * The ordered index.
   *
   * @throws {IncompleteCompositeError} when the store has none.
   */
  requireOrderedIndex(): OrderedIndex;
}

/**
 * The stores an app serves, by name: a function asked once per request with
 * an already validated store name (`undefined`: no such store, 404
 * `unknown_store`), or a fixed record. A function suits a Worker, whose
 * Durable Object stubs belong to the request that made them.
 */
export type StoreTable = ((name: string) => RemoteStore | undefined) | Readonly<Record<string, RemoteStore>>;

/** The store `name` of `table`, or `undefined`. */
export function resolveStore(table: StoreTable, name: string): RemoteStore | undefined {
  if (typeof table === "function") return table(name);
  return Object.prototype.hasOwnProperty.call(table, name) ? table[name] : undefined;
}

// ---------------------------------------------------------------- errors as data

/** A storage error as plain data (structured-clone and JSON safe). */
export interface StorageWireError {
  /** The error's stable code (`StorageError.code`), or `"backend"` for anything else. */
  readonly code: string;
  /** The error's class, e.g. `"RevisionConflictError"`. */
  readonly type: string;
  readonly message: string;
  /**
   * The error's spec fields (`key`, `expectedRev`, `actualRev`, `rule`, ...;
   * the spec's `name` field too), `cause` as its message, and `retryable`
   * when the cause says whether trying again may help; `causeCode`
   * (`"storage_full"`) and `overloaded` (`true`) when a cause under the error
   * says waiting out fixes it (a full or overloaded storage object: the
   * worker answers a 503 with `Retry-After`), absent otherwise and from
   * senders that predate them.
   */
  readonly fields: Record<string, unknown>;
}

/** Own properties of an error that are not spec fields. */
const NOT_FIELDS = new Set(["stack", "message", "code", "cause"]);

function isPlainData(value: unknown): boolean {
  if (value === null || ["string", "number", "boolean"].includes(typeof value)) return true;
  if (Array.isArray(value)) return value.every(isPlainData);
  if (typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) return Object.values(value).every(isPlainData);
  return false;
}

/**
 * A thrown value as a {@link StorageWireError}. A `StorageError` keeps its
 * code, class, message and spec fields; anything else is a backend failure
 * (`code` `"backend"`) whose message is kept as `fields.cause`. Of a cause,
 * only its message, `retryable` and its waiting-out marks travel
 * (`causeCode`, `overloaded`: see {@link StorageWireError.fields}).
 *
 * @example
 * ```ts
 * encodeStorageError(new KeyNotFoundError("a/b"));
 * // { code: "key_not_found", type: "KeyNotFoundError", message: 'kv key "a/b" not found', fields: { key: "a/b" } }
 * ```
 */
export function encodeStorageError(error: unknown): StorageWireError {
  const fields: Record<string, unknown> = {};
  if (error instanceof StorageError) {
    for (const [field, value] of Object.entries(error)) {
      if (!NOT_FIELDS.has(field) && isPlainData(value)) fields[field] = value;
    }
    // `name` holds the spec's field where there is one (whatever it is spelled like), else the class name.
    if (hasSpecName(error) && typeof error.name === "string") fields["name"] = error.name;
    else delete fields["name"];
    const cause = (error as { cause?: unknown }).cause;
    if (cause instanceof Error) fields["cause"] = cause.message;
    // An engine or platform failure says whether trying again may help (`retryable` on the cause).
    const retryable = (cause as { retryable?: unknown } | undefined)?.retryable;
    if (typeof retryable === "boolean") fields["retryable"] = retryable;
    Object.assign(fields, markFields(waitOutMarks(error)));
    return { code: error.code, type: error.constructor.name, message: error.message, fields };
  }
  const message = error instanceof Error ? error.message : String(error);
  // The thrown value is the cause of the backend failure it becomes: its own marks count.
  const marks = markFields(waitOutMarks({ cause: error }));
  return { code: "backend", type: "StorageBackendError", message: `storage backend failed: ${message}`, fields: { cause: message, ...marks } };
}

/** {@link WaitOutMarks} as wire fields (`causeCode`, `overloaded`). */
function markFields(marks: WaitOutMarks | undefined): Record<string, unknown> {
  return { ...(marks?.code === undefined ? {} : { causeCode: marks.code }), ...(marks?.overloaded === undefined ? {} : { overloaded: marks.overloaded }) };
}

/** Whether a storage error (or its decoded cause) says trying again may help. */
export function storageRetryable(error: StorageError): boolean {
  const cause = (error as { cause?: unknown }).cause as { retryable?: unknown } | undefined;
  return typeof cause === "object" && cause !== null && cause.retryable === true;
}

const text = (value: unknown, fallback = ""): string => (typeof value === "string" ? value : fallback);
/** The writes an `AmbiguousError` may name (an unknown name reads as an append's, the older answers' only kind). */
const AMBIGUOUS_OPERATIONS: readonly AmbiguousOperation[] = ["ledger.append", "ledger.delete", "kv.put", "kv.delete", "blobs.put", "blobs.delete"];
const count = (value: unknown): number => (typeof value === "number" && Number.isFinite(value) ? value : 0);

function idOf(value: unknown): OrderedId {
  const id = (typeof value === "object" && value !== null ? value : {}) as Record<string, unknown>;
  return { namespace: text(id["namespace"]), orderingScope: text(id["orderingScope"]), stableKey: text(id["stableKey"]) };
}

/**
 * The cause of a decoded error: the remote cause's message, with `retryable`
 * and the waiting-out marks (`code` `"storage_full"`, `overloaded: true`)
 * when they were sent.
 */
function causeOf(fields: Record<string, unknown>): Error | undefined {
  const message = fields["cause"];
  const retryable = fields["retryable"];
  const marked = waitOutCause({ code: fields["causeCode"], overloaded: fields["overloaded"] });
  if (typeof message !== "string" && typeof retryable !== "boolean" && marked === undefined) return undefined;
  const cause = marked ?? new Error("remote failure");
  if (typeof message === "string") cause.message = message;
  if (typeof retryable === "boolean") Object.defineProperty(cause, "retryable", { value: retryable, enumerable: true });
  return cause;
}

/** The error class a wire error's code names, built from its fields; `null` for an unknown code. */
function rebuild(code: string, f: Record<string, unknown>): StorageError | null {
  const cause = causeOf(f);
  switch (code) {
    case "invalid_name":
      return new InvalidNameError(text(f["name"]), text(f["rule"], "type") as NameRule);
    case "invalid_argument":
      return new InvalidArgumentError(text(f["argument"], "argument"), "");
    case "backend":
      return new StorageBackendError(text(f["operation"], "remote"), cause);
    case "aborted":
      return new AbortedError();
    case "conflict":
      return new ConflictError(text(f["name"]), count(f["expected"]));
    case "ambiguous":
      return new AmbiguousError(text(f["name"]), count(f["expected"]), cause, AMBIGUOUS_OPERATIONS.find((operation) => operation === f["operation"]) ?? "ledger.append");
    case "append_verify_failed":
      return new AppendVerifyError(text(f["name"]), count(f["seq"]), cause);
    case "record_not_found":
      return new RecordNotFoundError(text(f["name"]), count(f["seq"]));
    case "lease_held":
      return new LeaseHeldError(text(f["name"]), count(f["holderEpoch"]));
    case "lease_lost":
      return new LeaseLostError(text(f["name"]), count(f["epoch"]));
    case "key_not_found":
      return new KeyNotFoundError(text(f["key"]));
    case "revision_conflict":
      return new RevisionConflictError(text(f["key"]), count(f["expectedRev"]), count(f["actualRev"]));
    case "blob_conflict":
      return new BlobConflictError(text(f["key"]));
    case "blob_not_found":
      return new BlobNotFoundError(text(f["key"]));
    case "incomplete_composite":
      return new IncompleteCompositeError((Array.isArray(f["missing"]) ? f["missing"] : []) as CompositePart[]);
    case "invalid_due":
      return new InvalidDueError(f["due"] as Due, text(f["rule"], "type") as DueRule);
    case "invalid_rank":
      return new InvalidRankError(f["rank"] as Rank, text(f["rule"], "type") as RankRule);
    case "invalid_ordered_cursor": {
      const error = new InvalidOrderedCursorError(text(f["kind"], "ranked") as OrderedCursorKind, "", text(f["rule"], "malformed") as OrderedCursorRule);
      // The token itself never travels; keep the length it was reported with.
      Object.defineProperty(error, "cursorLength", { value: count(f["cursorLength"]), enumerable: true });
      return error;
    }
    case "invalid_ordered_limit":
      return new InvalidOrderedLimitError(count(f["limit"]), count(f["max"]));
    case "invalid_ordered_record":
      return new InvalidOrderedRecordError(idOf(f["id"]), text(f["rule"]));
    case "invalid_stable_key":
      return new InvalidStableKeyError(text(f["rule"], "type") as StableKeyRule, count(f["stableKeyLength"]));
    case "ordered_ambiguous":
      return new OrderedAmbiguousError(text(f["operation"], "create") as OrderedOperation, idOf(f["id"]), cause);
    case "ordered_deleted":
      return new OrderedDeletedError(idOf(f["id"]));
    case "ordered_record_not_found":
      return new OrderedRecordNotFoundError(idOf(f["id"]));
    case "ordered_revision_conflict":
      return new OrderedRevisionConflictError(idOf(f["id"]), count(f["expectedRevision"]), count(f["actualRevision"]));
    case "ordered_revision_exhausted":
      return new OrderedRevisionExhaustedError(idOf(f["id"]), count(f["revision"]));
    case "ordered_value_too_large":
      return new OrderedValueTooLargeError(count(f["size"]), count(f["max"]));
    default:
      return null;
  }
}

/**
 * Rebuild the typed storage error a {@link StorageWireError} describes: the
 * same class (so `instanceof` works), `code`, message and spec fields; a
 * remote `cause` comes back as an `Error` with its message (and `retryable`,
 * `code` `"storage_full"` and `overloaded: true` when they were sent, so the
 * worker answers a remote full or overloaded store as a local one). An unknown code becomes a plain `StorageError` with
 * that code and the fields copied on; input that is not a wire error at all
 * becomes a `StorageBackendError`.
 *
 * @example
 * ```ts
 * const error = decodeStorageError({ code: "revision_conflict", type: "RevisionConflictError", message: "...",
 *   fields: { key: "a", expectedRev: 0, actualRev: 3 } });
 * error instanceof RevisionConflictError; // true
 * ```
 */
export function decodeStorageError(wire: StorageWireError): StorageError {
  if (typeof wire !== "object" || wire === null || typeof wire.code !== "string") {
    return new StorageBackendError("remote", new Error("the remote store answered an error that is not a storage error"));
  }
  const fields = typeof wire.fields === "object" && wire.fields !== null ? wire.fields : {};
  let error = rebuild(wire.code, fields);
  if (error === null) {
    error = new StorageError(wire.code, "");
    if (typeof wire.type === "string" && wire.type !== "") error.name = wire.type;
    for (const [field, value] of Object.entries(fields)) {
      if (!NOT_FIELDS.has(field) && field !== "name") Object.defineProperty(error, field, { value, enumerable: true });
    }
  }
  error.message = typeof wire.message === "string" ? wire.message : `storage error \`${wire.code}\``;
  return error;
}

// ---------------------------------------------------------------- base64

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const DECODE = new Int16Array(128).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) DECODE[ALPHABET.charCodeAt(i)] = i;

/** Characters of the standard, padded base64 of `bytes` bytes. */
export function base64Length(bytes: number): number {
  return Math.ceil(bytes / 3) * 4;
}

/** Standard, padded base64 (RFC 4648 section 4) of `bytes`. */
export function encodeBase64(bytes: Uint8Array): string {
  const parts: string[] = [];
  let line = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const a = bytes[i]!;
    const b = i + 1 < bytes.length ? bytes[i + 1]! : 0;
    const c = i + 2 < bytes.length ? bytes[i + 2]! : 0;
    line += ALPHABET[a >> 2]! + ALPHABET[((a & 3) << 4) | (b >> 4)]!;
    line += i + 1 < bytes.length ? ALPHABET[((b & 15) << 2) | (c >> 6)]! : "=";
    line += i + 2 < bytes.length ? ALPHABET[c & 63]! : "=";
    if (line.length >= 8192) {
      parts.push(line);
      line = "";
    }
  }
  parts.push(line);
  return parts.join("");
}

/** Whether `text` is standard, padded base64 (the form {@link encodeBase64} writes). */
export function isBase64(text: string): boolean {
  return text.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(text);
}

/**
 * The bytes of standard, padded base64 `text`.
 *
 * @throws {InvalidArgumentError} (argument `argument`) when `text` is not.
 */
export function decodeBase64(text: string, argument = "base64"): Uint8Array {
  if (typeof text !== "string" || !isBase64(text)) throw new InvalidArgumentError(argument, "must be standard base64 with padding");
  const padding = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  const out = new Uint8Array((text.length / 4) * 3 - padding);
  let o = 0;
  for (let i = 0; i < text.length; i += 4) {
    const a = DECODE[text.charCodeAt(i)]!;
    const b = DECODE[text.charCodeAt(i + 1)]!;
    const c = text[i + 2] === "=" ? 0 : DECODE[text.charCodeAt(i + 2)]!;
    const d = text[i + 3] === "=" ? 0 : DECODE[text.charCodeAt(i + 3)]!;
    const n = (a << 18) | (b << 12) | (c << 6) | d;
    if (o < out.length) out[o++] = (n >> 16) & 0xff;
    if (o < out.length) out[o++] = (n >> 8) & 0xff;
    if (o < out.length) out[o++] = n & 0xff;
  }
  return out;
}
