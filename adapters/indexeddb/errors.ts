/// <reference lib="dom" />
/**
 * Typed errors of the IndexedDB engine.
 *
 * Every failure the engine itself reports (a blocked open, a full quota, a
 * transaction the browser aborted, a connection closed under it) is an
 * {@link IndexedDbEngineError} with a stable `code`, a `retryable` flag and the
 * platform's `DOMException` as `cause`. The journal turns any such error into
 * a `BackendError` that keeps it as its own `cause` and copies `retryable`, so
 * `journalError.cause.cause` is the `DOMException` the browser raised.
 *
 * Errors of the caller (an invalid key, a write in a readonly transaction, a
 * bad scan limit) are the same `InvalidKeyError` / `TypeError` / `RangeError`
 * the memory engine throws, so adapters do not drift. A value IndexedDB
 * cannot store (structured clone refuses it) is refused with a
 * `DataCloneError` ({@link uncloneable}), the platform's own name for it.
 */

/** Every code an {@link IndexedDbEngineError} can carry. */
export type IndexedDbEngineErrorCode =
  /**
   * Another connection (an older tab) holds the database open and did not let
   * an upgrade through; or the open would wait behind such a blocked open
   * (this engine's earlier one, another engine's), or got no answer in time
   * (queued behind another tab's). Retryable: retry once the other
   * connection closed.
   */
  | "blocked"
  /**
   * The origin's storage quota is exhausted (`cause`: the browser's
   * `QuotaExceededError`), or nearly: a transaction that grows the data was
   * refused within `reserveBytes` of it (no `cause`). Rolled back either way.
   */
  | "quota_exceeded"
  /** The browser aborted the transaction (I/O error, connection lost...); it was rolled back. */
  | "aborted"
  /** The body awaited something other than its own transaction's calls, so IndexedDB committed early; none of its writes were stored. */
  | "committed_early"
  /** The database on disk has a newer schema than this code knows. */
  | "version"
  /** The database could not be opened (no IndexedDB, private mode restrictions...). */
  | "open_failed"
  /** `close()` was called on the engine. */
  | "closed";

/** A failure of the IndexedDB engine. Narrow on `code`; `cause` is the platform's error. */
export class IndexedDbEngineError extends Error {
  readonly code: IndexedDbEngineErrorCode;
  /** Whether repeating the same call later may succeed (the journal copies it onto `BackendError`). */
  readonly retryable: boolean;
  constructor(code: IndexedDbEngineErrorCode, message: string, options: { cause?: unknown; retryable: boolean }) {
    super(`isostore indexeddb engine: ${message}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "IndexedDbEngineError";
    this.code = code;
    this.retryable = options.retryable;
  }
}

/** The name of a `DOMException` (or any error-like object), if it has one. */
function nameOf(error: unknown): string | undefined {
  if (typeof error === "object" && error !== null && typeof (error as { name?: unknown }).name === "string") {
    return (error as { name: string }).name;
  }
  return undefined;
}

/**
 * The error a transaction the platform aborted rejects with. `error` is
 * `IDBTransaction.error` (null when nothing but an abort is known).
 */
export function transactionAbortError(error: DOMException | null): IndexedDbEngineError {
  if (nameOf(error) === "QuotaExceededError") {
    // Retrying the same write changes nothing until space is freed (prune, or
    // ask for persistent storage): not retryable.
    return new IndexedDbEngineError("quota_exceeded", "the storage quota is exhausted; the transaction was rolled back", { cause: error, retryable: false });
  }
  const detail = error === null ? "" : `: ${error.name}: ${error.message}`;
  return new IndexedDbEngineError("aborted", `the transaction was aborted and rolled back${detail}`, { cause: error ?? undefined, retryable: true });
}

/** The error of a failed open request. */
export function openError(error: unknown): IndexedDbEngineError {
  if (nameOf(error) === "VersionError") {
    return new IndexedDbEngineError("version", "the database was upgraded by newer code; this version cannot open it", { cause: error, retryable: false });
  }
  if (nameOf(error) === "QuotaExceededError") return transactionAbortError(error as DOMException);
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return new IndexedDbEngineError("open_failed", `the database could not be opened (${message})`, { cause: error, retryable: nameOf(error) === "AbortError" });
}

/** Whether `error` is a `DataCloneError` (structured clone refused a value), the platform's or {@link uncloneable}'s. */
export function isDataCloneError(error: unknown): boolean {
  return nameOf(error) === "DataCloneError";
}

/** The error of a transaction that could not start because its connection went away. */
export function connectionLostError(error: unknown): IndexedDbEngineError {
  return new IndexedDbEngineError("aborted", "the connection closed before the transaction started (another tab upgraded or deleted the database)", {
    cause: error,
    retryable: true,
  });
}

/**
 * The error of a value IndexedDB cannot store: a `DOMException` named
 * `DataCloneError`, as structured clone throws, with the engine's message
 * saying what was refused (`what`, e.g. "a function") and, when the platform
 * refused it first (at the commit), the platform's error as `cause`.
 * `put` throws it (`sizeOf` in `./pages.ts`); the flush throws it when
 * IndexedDB refuses a value `put` could not recognise.
 */
export function uncloneable(what: string, cause?: unknown): DOMException {
  const message = typeof cause === "object" && cause !== null ? (cause as { message?: unknown }).message : undefined;
  const detail = typeof message === "string" && message.length > 0 ? `: ${message}` : "";
  const error = new DOMException(`isostore indexeddb engine: ${what} cannot be stored (structured clone refuses it${detail}); nothing of the transaction was written`, "DataCloneError");
  // DOMException's constructor takes no options: `cause` is set as Error's would be (own, not enumerable).
  if (cause !== undefined) Object.defineProperty(error, "cause", { value: cause, writable: true, configurable: true, enumerable: false });
  return error;
}

/** The error of stored pages or log records that break their own invariants (a damaged database). */
export function damaged(what: string): IndexedDbEngineError {
  return new IndexedDbEngineError("aborted", `the stored data is inconsistent: ${what}`, { retryable: false });
}
