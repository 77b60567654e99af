/**
 * Typed errors of the Durable Objects adapter.
 *
 * Everything that goes wrong below the journal (a value over the row limit, a
 * full object, an unknown schema, a platform failure of an object or its
 * stub) is a {@link DurableObjectEngineError} with a stable `code`, the
 * platform error as `cause`, and `retryable`. The core journal turns such an
 * error into a `BackendError` (code `backend`) that keeps `retryable` and
 * `cause`; `PartitionedJournal` does the same for failures of an RPC call.
 */
import { BackendError } from "../../src/journal/errors.js";

/** Every code a {@link DurableObjectEngineError} carries. */
export type DurableObjectEngineErrorCode =
  /** A row (key + value) is over the platform's 2 MB row limit. */
  | "value_too_large"
  /** The object's database is full (10 GB per object) or the disk is. */
  | "storage_full"
  /** The object's schema was written by a newer version of isostore. */
  | "schema_too_new"
  /** The engine was closed. */
  | "closed"
  /** Any other failure of the platform (storage reset, object overloaded, network). */
  | "platform";

/** A failure of the Durable Object engine or of a call into a Durable Object. */
export class DurableObjectEngineError extends Error {
  readonly code: DurableObjectEngineErrorCode;
  /** Whether repeating the same call later may succeed. */
  readonly retryable: boolean;
  /** The platform said the object is overloaded: back off, do not retry at once. */
  readonly overloaded: boolean;
  constructor(code: DurableObjectEngineErrorCode, message: string, options: { cause?: unknown; retryable?: boolean; overloaded?: boolean } = {}) {
    super(`isostore durable-objects: ${message}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "DurableObjectEngineError";
    this.code = code;
    this.retryable = options.retryable ?? false;
    this.overloaded = options.overloaded ?? false;
  }
}

/**
 * Classify an error thrown by the platform (`sql.exec`, `transactionSync`, a
 * stub call). Workers mark their exceptions with `retryable` (a transient
 * failure, e.g. a storage reset or a broken connection: safe to retry) and
 * `overloaded` (the object is over its limits: retrying at once makes it
 * worse, so it is reported as not retryable). `SQLITE_FULL` is the 10 GB
 * per-object limit.
 */
export function platformError(error: unknown, what: string): DurableObjectEngineError {
  if (error instanceof DurableObjectEngineError) return error;
  const flags = (typeof error === "object" && error !== null ? error : {}) as { retryable?: unknown; overloaded?: unknown; message?: unknown };
  const message = typeof flags.message === "string" ? flags.message : String(error);
  if (/SQLITE_FULL|database or disk is full/i.test(message)) {
    return new DurableObjectEngineError("storage_full", `${what}: the object's storage is full (${message})`, { cause: error });
  }
  const overloaded = flags.overloaded === true;
  const retryable = flags.retryable === true && !overloaded;
  return new DurableObjectEngineError("platform", `${what}: ${message}`, { cause: error, retryable, overloaded });
}

/** A platform failure as the journal's typed `BackendError`. */
export function backendError(error: unknown, what: string): BackendError {
  const typed = platformError(error, what);
  return new BackendError(typed.message, { cause: typed, retryable: typed.retryable });
}
