/**
 * Errors of the HTTP API and the one place their codes become statuses.
 *
 * Every failed call answers `{ error: { code, message, retryable, name?, fields?, cause? } }`.
 * A journal error keeps its code, class name and spec fields (the wire form
 * of `src/journal/wire.ts`), so `HttpJournal` rebuilds the same typed error;
 * a journal `backend` error whose storage object is full or overloaded also
 * keeps those marks as `cause` (see {@link ErrorBody}), the one sign a client
 * has that the call was refused before anything committed;
 * errors of the HTTP layer itself (auth, routing, body) are {@link ApiError}s.
 * A storage error (the store routes) keeps its code, class name and spec
 * fields the same way (`./stores.ts`), so a client rebuilds the same class.
 */
import { waitOutMarks, type WaitOutMarks } from "../cause-chain.js";
import { JournalError, type JournalErrorCode } from "../journal/errors.js";
import { encodeError } from "../journal/wire.js";
import { StorageError } from "../storage/errors.js";
import { randomBytes, toHex } from "../storage/web.js";
import type { OrderedErrorCode } from "../storage/ordered/errors.js";
import { encodeStorageError, storageRetryable } from "./stores.js";

/** Codes of errors that belong to the HTTP layer, not to a journal. */
export type ApiErrorCode =
  | "invalid_request"
  | "invalid_json"
  | "unauthorized"
  | "forbidden"
  | "forbidden_namespace"
  | "not_found"
  | "unknown_journal"
  | "unknown_store"
  | "method_not_allowed"
  | "payload_too_large"
  | "unsupported_media_type"
  | "duplicate_request"
  | "internal";

/** Codes of the storage primitives' errors (`src/storage/errors.ts`, `src/storage/ordered/errors.ts`). */
export type StorageErrorCode =
  | OrderedErrorCode
  | "invalid_name"
  | "invalid_argument"
  | "backend"
  | "aborted"
  | "conflict"
  | "ambiguous"
  | "append_verify_failed"
  | "record_not_found"
  | "lease_held"
  | "lease_lost"
  | "key_not_found"
  | "revision_conflict"
  | "blob_conflict"
  | "blob_not_found"
  | "incomplete_composite";

/** Status of every code, journal, storage and HTTP: the single mapping of the API. */
export const STATUS_OF: Readonly<Record<JournalErrorCode | StorageErrorCode | ApiErrorCode, number>> = Object.freeze({
  invalid_request: 400,
  invalid_json: 400,
  invalid_event: 400,
  invalid_consumer_id: 400,
  invalid_argument: 400,
  invalid_name: 400,
  invalid_due: 400,
  invalid_rank: 400,
  invalid_ordered_cursor: 400,
  invalid_ordered_limit: 400,
  invalid_stable_key: 400,
  ordered_value_too_large: 400,
  unauthorized: 401,
  forbidden: 403,
  forbidden_namespace: 403,
  not_found: 404,
  unknown_journal: 404,
  not_outstanding: 404,
  not_quarantined: 404,
  unknown_store: 404,
  record_not_found: 404,
  key_not_found: 404,
  blob_not_found: 404,
  ordered_record_not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  duplicate_request: 409,
  quarantined: 409,
  already_acknowledged: 409,
  revision_conflict: 409,
  blob_conflict: 409,
  ordered_revision_conflict: 409,
  ordered_deleted: 409,
  ordered_revision_exhausted: 409,
  lease_held: 409,
  lease_lost: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  at_capacity: 503,
  backend: 503,
  internal: 500,
  // A stored row that fails its checks, a store without the primitive asked for, an abort: server faults.
  invalid_ordered_record: 500,
  incomplete_composite: 500,
  aborted: 500,
  // A networked store's mutation whose acknowledgement was lost: the outcome is unknown (not retryable blindly).
  ambiguous: 504,
  ordered_ambiguous: 504,
  append_verify_failed: 504,
});

/** Storage codes of a mutation whose outcome is unknown (504): answered `retryable: false`, with no `fields.retryable`. */
const UNKNOWN_OUTCOME_CODES: ReadonlySet<string> = new Set(["ambiguous", "ordered_ambiguous", "append_verify_failed"]);

/** `fields` without the lost reply's own `retryable`. */
function withoutRetryable(fields: Record<string, unknown>): Record<string, unknown> {
  if (!("retryable" in fields)) return fields;
  const { retryable: _dropped, ...rest } = fields;
  return rest;
}

/** Seconds a client is told to wait (`Retry-After`) before retrying a 503. */
export const RETRY_AFTER_SECONDS = 1;

/** An error of the HTTP layer (auth, routing, body). */
export class ApiError extends Error {
  readonly code: ApiErrorCode;
  readonly status: number;
  /** For `invalid_request`: the argument (request field) refused first, e.g. `maxEvents`. */
  readonly argument: string | undefined;
  constructor(code: ApiErrorCode, message: string, argument?: string) {
    super(message);
    this.name = "ApiError";
    this.code = code;
    this.status = STATUS_OF[code];
    this.argument = argument;
  }
}

/** The JSON body of an error answer. */
export interface ErrorBody {
  readonly error: {
    readonly code: string;
    readonly message: string;
    readonly retryable: boolean;
    readonly name?: string;
    readonly fields?: Record<string, unknown>;
    /**
     * A journal `backend` error's {@link WaitOutMarks} (`code: "storage_full"`,
     * `overloaded: true`), only when its storage object is full or overloaded:
     * the call was refused before anything committed, so a client may repeat
     * even a call that is not idempotent (`HttpJournal` does). Nothing else of
     * the cause is ever answered.
     */
    readonly cause?: WaitOutMarks;
  };
}

/**
 * Whether an error is a failure of the server's own storage or code (a
 * `backend` journal or storage error, or anything untyped): its message may
 * carry internals (SQL, paths, engine states), so it is logged, not answered.
 */
function isServerFault(error: unknown): boolean {
  if (error instanceof ApiError) return error.code === "internal";
  if (error instanceof JournalError || error instanceof StorageError) return error.code === "backend";
  return true;
}

/** A short id naming one logged failure, for the answer to point at the log line. */
export function failureId(): string {
  return toHex(randomBytes(4));
}

/**
 * Log a server fault with an id, and return the message to answer in its
 * place: its kind and the id, no internals (the caller may be any token
 * holder, a browser's user for one).
 */
function reportServerFault(error: unknown, what: string): string {
  const id = failureId();
  console.error(`isostore worker: ${what} failed [${id}]:`, error);
  return `${what} failed on the server (see the worker's log, error ${id})`;
}

/**
 * Whether a backend failure is one that waiting out fixes, though it is not
 * retryable *at once*: the platform said the storage object is overloaded
 * (`overloaded: true` on a cause; an immediate retry makes it worse, so the
 * adapter reports it as not retryable), or its storage is full (`code`
 * `storage_full`: room comes back as consumers finish and events are
 * pruned). Over HTTP both are a 503 with `Retry-After` and `retryable`, so a
 * client backs off and tries again (a forwarder holds its batch) instead of
 * taking it for a fault of its request (a 500, which a forwarder charges to
 * the events' attempts). The wire codecs carry these marks across RPC
 * (`encodeError` / `decodeError`, `encodeStorageError` /
 * `decodeStorageError`), so an error from a `JournalPartition` or a
 * `StoreObject` answers as it would in-process.
 */
function waitsOut(error: unknown): boolean {
  return waitOutMarks(error) !== undefined;
}

/**
 * Status, headers and body of the answer to a thrown error. A server fault is
 * logged and answered without its message; no answer carries the text of an
 * error's cause (an `ambiguous` outcome's lost reply, say): it is logged with
 * an id the answer names.
 */
export function errorAnswer(error: unknown): { status: number; headers: Record<string, string>; body: ErrorBody } {
  const answer = typedAnswer(error);
  // The underlying error's text (`fields.cause`: an engine's or the network's message, SQL, paths) is the
  // server's internals whatever the error: it goes to the log, never into an answer.
  const { cause, ...fields } = answer.body.error.fields ?? {};
  const redacted = cause === undefined ? answer.body.error : { ...answer.body.error, fields };
  const what = error instanceof StorageError ? "the store's storage" : error instanceof JournalError ? "the journal's storage" : "the request";
  if (isServerFault(error)) return { ...answer, body: { error: { ...redacted, message: reportServerFault(error, what) } } };
  if (cause === undefined) return answer;
  // A typed answer whose cause was kept back (an `ambiguous` outcome, say): its own message stays, with where the cause is.
  const id = failureId();
  console.error(`isostore worker: ${what} answered ${answer.body.error.code} [${id}]:`, error);
  return { ...answer, body: { error: { ...redacted, message: `${answer.body.error.message} (its cause is in the worker's log, error ${id})` } } };
}

function typedAnswer(error: unknown): { status: number; headers: Record<string, string>; body: ErrorBody } {
  if (error instanceof ApiError) {
    const fields = error.argument === undefined ? {} : { fields: { argument: error.argument } };
    return { status: error.status, headers: {}, body: { error: { code: error.code, message: error.message, retryable: false, ...fields } } };
  }
  if (error instanceof JournalError) {
    const wire = encodeError(error);
    const retryable = wire.retryable || (error.code === "backend" && waitsOut(error));
    // A backend failure that will not go away by itself is a 500; anything retryable is a 503 with Retry-After.
    const status = error.code === "backend" && !retryable ? 500 : STATUS_OF[error.code];
    const headers: Record<string, string> = status === 503 ? { "retry-after": String(RETRY_AFTER_SECONDS) } : {};
    const marks = wire.cause === undefined ? {} : { cause: wire.cause };
    return { status, headers, body: { error: { code: wire.code, message: wire.message, retryable, name: wire.name, fields: wire.fields, ...marks } } };
  }
  if (error instanceof StorageError) {
    const wire = encodeStorageError(error);
    // An unknown outcome is never retryable as such, whatever the lost reply's own failure says: a blind
    // retry of a compare-and-swap that applied fails as a conflict. The client reads the outcome first.
    const unknownOutcome = UNKNOWN_OUTCOME_CODES.has(error.code);
    const retryable = !unknownOutcome && (storageRetryable(error) || (error.code === "backend" && waitsOut(error)));
    const known = (STATUS_OF as Readonly<Record<string, number>>)[error.code] ?? 500;
    // As for journals: a backend failure that will not go away by itself is a 500; a retryable one a 503 with Retry-After.
    const status = error.code === "backend" && !retryable ? 500 : known;
    const headers: Record<string, string> = status === 503 ? { "retry-after": String(RETRY_AFTER_SECONDS) } : {};
    const fields = unknownOutcome ? withoutRetryable(wire.fields) : wire.fields;
    return { status, headers, body: { error: { code: wire.code, message: wire.message, retryable, name: wire.type, fields } } };
  }
  return {
    status: 500,
    headers: {},
    body: { error: { code: "internal", message: "internal error", retryable: false } },
  };
}
