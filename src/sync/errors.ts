/**
 * Errors the forwarder itself raises about a sink (the journal's own errors
 * come from `src/journal/errors.ts`). Like those, each has a stable `code`
 * and says whether trying again may help (`retryable`). The forwarder never
 * throws these out of its loop: they reach `error` events, `lastError` and
 * the nack text of the events involved.
 */

import { causeChain } from "../cause-chain.js";

/** Codes of {@link SinkError}. */
export type SinkErrorCode = "sink_timeout" | "sink_protocol";

/** A sink misbehaved as a whole: it did not answer in time, or answered something that is not one result per event. */
export class SinkError extends Error {
  readonly code: SinkErrorCode;
  readonly retryable: boolean;
  constructor(code: SinkErrorCode, message: string, options: { retryable: boolean; cause?: unknown }) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "SinkError";
    this.code = code;
    this.retryable = options.retryable;
  }
}

/** `appendBatch` did not settle within `sinkTimeoutMs`. Retryable: the sink is idempotent, so the replay is harmless. */
export class SinkTimeoutError extends SinkError {
  declare readonly code: "sink_timeout";
  readonly timeoutMs: number;
  constructor(timeoutMs: number) {
    super("sink_timeout", `the sink did not answer appendBatch within ${timeoutMs} ms`, { retryable: true });
    this.name = "SinkTimeoutError";
    this.timeoutMs = timeoutMs;
  }
}

/** `appendBatch` resolved with something other than one result per event, in order. Nothing of the batch is acknowledged. */
export class SinkProtocolError extends SinkError {
  declare readonly code: "sink_protocol";
  constructor(message: string) {
    super("sink_protocol", `the sink broke the appendBatch contract: ${message}`, { retryable: false });
    this.name = "SinkProtocolError";
  }
}

/** Whether repeating a failed call may succeed: an error's own `retryable` flag; anything without one (a network `TypeError`, an abort) counts as transient. */
export function isRetryable(error: unknown): boolean {
  if (error !== null && typeof error === "object") {
    const flag = (error as { retryable?: unknown }).retryable;
    if (typeof flag === "boolean") return flag;
  }
  return true;
}

/** The stable code of an error, when it carries one (`JournalError`, `SinkError`, ...). */
export function errorCode(error: unknown): string | null {
  if (error !== null && typeof error === "object") {
    const code = (error as { code?: unknown }).code;
    if (typeof code === "string") return code;
  }
  return null;
}

/** The message of an error, or the text of whatever was thrown. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : typeof error === "string" ? error : safeString(error);
}

/** One line describing an error: `code: message`, or its text. */
export function describeError(error: unknown): string {
  const code = errorCode(error);
  const message = errorMessage(error);
  return code === null ? message : `${code}: ${message}`;
}

function safeString(value: unknown): string {
  try {
    return String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

/** Whether the error, or one under it, carries this API `code` or HTTP `status` (an `HttpJournal` error carries both in its cause). */
function carries(error: unknown, codes: readonly string[], statuses: readonly number[]): boolean {
  return causeChain(error).some((link) => {
    const { code, status } = link as { code?: unknown; status?: unknown };
    return (typeof code === "string" && codes.includes(code)) || (typeof status === "number" && statuses.includes(status));
  });
}

/** The sink refused the call as too large (`payload_too_large`, HTTP 413): a smaller batch may pass. */
export function isPayloadTooLarge(error: unknown): boolean {
  return carries(error, ["payload_too_large"], [413]);
}

/** The sink refused the caller's credentials (`unauthorized` / `forbidden`, HTTP 401 / 403). */
export function isAuthFailure(error: unknown): boolean {
  return carries(error, ["unauthorized", "forbidden"], [401, 403]);
}

/**
 * The sink refused the call because the credentials may not append the
 * namespace of an event in it (`forbidden_namespace`, a 403 of the worker):
 * they work, and that event is not theirs to send.
 */
export function isForbiddenNamespace(error: unknown): boolean {
  return carries(error, ["forbidden_namespace"], []);
}

/**
 * Whether a failure of a whole `appendBatch` call is the sink's as a whole
 * rather than any event's: retryable (unavailable, timed out, overloaded) or
 * a refusal of the credentials. The forwarder's loop waits such failures out
 * without charging the events an attempt.
 */
export function isSinkWide(error: unknown): boolean {
  return isRetryable(error) || isAuthFailure(error);
}
