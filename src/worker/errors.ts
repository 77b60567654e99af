/**
 * Errors of the HTTP API and the one place their codes become statuses.
 *
 * Every failed call answers `{ error: { code, message, retryable, name?, fields? } }`.
 * A journal error keeps its code, class name and spec fields (the wire form
 * of `src/journal/wire.ts`), so `HttpJournal` rebuilds the same typed error;
 * errors of the HTTP layer itself (auth, routing, body) are {@link ApiError}s.
 */
import { JournalError, type JournalErrorCode } from "../journal/errors.js";
import { encodeError } from "../journal/wire.js";

/** Codes of errors that belong to the HTTP layer, not to a journal. */
export type ApiErrorCode =
  | "invalid_request"
  | "invalid_json"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "unknown_journal"
  | "method_not_allowed"
  | "payload_too_large"
  | "unsupported_media_type"
  | "internal";

/** Status of every code, journal and HTTP: the single mapping of the API. */
export const STATUS_OF: Readonly<Record<JournalErrorCode | ApiErrorCode, number>> = Object.freeze({
  invalid_request: 400,
  invalid_json: 400,
  invalid_event: 400,
  invalid_consumer_id: 400,
  invalid_argument: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  unknown_journal: 404,
  not_outstanding: 404,
  not_quarantined: 404,
  method_not_allowed: 405,
  conflict: 409,
  quarantined: 409,
  already_acknowledged: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  at_capacity: 503,
  backend: 503,
  internal: 500,
});

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
  };
}

/** Status, headers and body of the answer to a thrown error. */
export function errorAnswer(error: unknown): { status: number; headers: Record<string, string>; body: ErrorBody } {
  if (error instanceof ApiError) {
    const fields = error.argument === undefined ? {} : { fields: { argument: error.argument } };
    return { status: error.status, headers: {}, body: { error: { code: error.code, message: error.message, retryable: false, ...fields } } };
  }
  if (error instanceof JournalError) {
    const wire = encodeError(error);
    // A backend failure that will not go away by itself is a 500; anything retryable is a 503 with Retry-After.
    const status = error.code === "backend" && !error.retryable ? 500 : STATUS_OF[error.code];
    const headers: Record<string, string> = status === 503 ? { "retry-after": String(RETRY_AFTER_SECONDS) } : {};
    return { status, headers, body: { error: { code: wire.code, message: wire.message, retryable: wire.retryable, name: wire.name, fields: wire.fields } } };
  }
  return {
    status: 500,
    headers: {},
    body: { error: { code: "internal", message: "internal error (see the worker's log)", retryable: false } },
  };
}
