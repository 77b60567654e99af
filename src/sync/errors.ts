/**
 * Errors the forwarder itself raises about a sink (the journal's own errors
 * come from `src/journal/errors.ts`). Like those, each has a stable `code`
 * and says whether trying again may help (`retryable`). The forwarder never
 * throws these out of its loop: they reach `error` events, `lastError` and
 * the nack text of the events involved.
 */

import { causeChain, waitOutMarks } from "../cause-chain.js";
import { JournalError } from "../journal/errors.js";

/** Codes of {@link SinkError}. */
export type SinkErrorCode = "sink_timeout" | "sink_protocol" | "possible_duplicate";

/**
 * A sink misbehaved as a whole (it did not answer in time, or answered
 * something that is not one result per event), or answered in a way that
 * says an event may now be there twice ({@link PossibleDuplicateError}).
 */
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

/**
 * `appendBatch` resolved with something other than one result per event, in
 * order. Nothing of the batch is acknowledged. Not retryable (the same call
 * may well get the same answer), but, like any failure of a whole call that
 * is not a refusal of the request's input, it is the sink's, not the
 * events': the loop holds the batch and sends it again (see `batch.ts`).
 */
export class SinkProtocolError extends SinkError {
  declare readonly code: "sink_protocol";
  constructor(message: string) {
    super("sink_protocol", `the sink broke the appendBatch contract: ${message}`, { retryable: false });
    this.name = "SinkProtocolError";
  }
}

/**
 * An event the forwarder had sent before (a resend: its delivery attempt in
 * the source is over 1, or an earlier send of its batch failed with the
 * outcome unknown) was answered `accepted` rather than `already_present`,
 * and it was observed longer ago than the sink's
 * `capacity.retainAcknowledgedMs`. The sink forgets an event's request id
 * once that window, counted from `observedAt`, has passed, so the earlier
 * send may have been stored, delivered and pruned, and this one stored as a
 * new event: the event may be at the sink twice. Reported (an `error` event,
 * `lastError`) for an operator to reconcile by `requestId`; the event is
 * acknowledged in the source all the same (the sink holds it). The remedy is
 * a sink retention window longer than the longest time an event can wait in
 * the source plus its resends.
 *
 * The sink prunes by its own clock. The age is read on the later of the
 * forwarder's clock and the sink's as the sink tells it
 * (`ForwarderSink.serverNow`; an `HttpJournal` estimates it from the `Date`
 * header of the server's answers, to the second, so a second is added), so a
 * device clock behind the sink's does not hide a possible duplicate. A sink
 * that does not tell its clock leaves the forwarder's alone, and a skew
 * between the two then shifts the boundary by as much.
 */
export class PossibleDuplicateError extends SinkError {
  declare readonly code: "possible_duplicate";
  readonly requestId: string;
  /** The event's `observedAt` (epoch ms). */
  readonly observedAt: number;
  /** The forwarder's clock when the sink answered (epoch ms). */
  readonly answeredAt: number;
  /**
   * The sink's clock when it answered, at its latest as the sink told it
   * (`ForwarderSink.serverNow` plus a second for a `Date` header's
   * resolution; epoch ms), or null when the sink did not tell.
   */
  readonly sinkNow: number | null;
  /** The sink's retention window for acknowledged events (ms). */
  readonly retainAcknowledgedMs: number;
  /** The event's delivery attempt in the source. */
  readonly attempt: number;
  constructor(details: { requestId: string; observedAt: number; answeredAt: number; sinkNow?: number | null; retainAcknowledgedMs: number; attempt: number }) {
    const sinkNow = details.sinkNow ?? null;
    const bySink = sinkNow !== null && sinkNow > details.answeredAt;
    const age = (bySink ? sinkNow : details.answeredAt) - details.observedAt;
    super(
      "possible_duplicate",
      `the sink answered accepted for \`${details.requestId}\`, sent before (attempt ${details.attempt}) and observed ${age} ms ago${bySink ? " by the sink's clock" : ""}, ` +
        `beyond the sink's retainAcknowledgedMs of ${details.retainAcknowledgedMs} ms: an earlier copy may have been stored and pruned, so the event may be at the sink twice`,
      { retryable: false },
    );
    this.name = "PossibleDuplicateError";
    this.requestId = details.requestId;
    this.observedAt = details.observedAt;
    this.answeredAt = details.answeredAt;
    this.sinkNow = sinkNow;
    this.retainAcknowledgedMs = details.retainAcknowledgedMs;
    this.attempt = details.attempt;
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

/**
 * The sink refused the call because the credentials may not append the
 * namespace of an event in it (`forbidden_namespace`, a 403 of the worker).
 * A fault of the sink's credentials (a token with the wrong `append:` scope),
 * not of the event: the forwarder waits it out as it does a 403 `forbidden`,
 * charging and quarantining nothing, and sends a batch of several namespaces
 * again one namespace at a time so that those the credentials cover go.
 */
export function isForbiddenNamespace(error: unknown): boolean {
  return carries(error, ["forbidden_namespace"], []);
}

/**
 * Codes of a refusal of the request's input: the worker's `invalid_request`
 * and `invalid_json` (400, which `HttpJournal` rebuilds as an
 * `InvalidArgumentError`), `invalid_event` (400), and the journal's own
 * `invalid_argument` / `invalid_consumer_id` (a local sink, or `HttpJournal`'s
 * checks before the network).
 */
const BAD_INPUT_CODES: readonly string[] = ["invalid_request", "invalid_json", "invalid_event", "invalid_argument", "invalid_consumer_id"];

/**
 * Statuses of a refusal of the request's input when the answer carries a
 * code of the API: 400 Bad Request, 409 Conflict, 415 Unsupported Media
 * Type, 422 Unprocessable Content.
 */
const REFUSAL_STATUSES: readonly number[] = [400, 409, 415, 422];

/** Whether `code` is one of the API's (not `http_<status>`, which `HttpJournal` makes up for a body without one, nor `invalid_answer`). */
function isApiCode(code: unknown): code is string {
  return typeof code === "string" && !/^http_\d+$/.test(code) && code !== "invalid_answer";
}

/**
 * Whether a failure of a whole `appendBatch` call is a typed refusal of the
 * request itself for its input: the error carries one of the API's or the
 * journal's bad-input codes (`invalid_request`, `invalid_json`,
 * `invalid_event`, `invalid_argument`, `invalid_consumer_id`); or it is a
 * journal error (`JournalError`) that is not retryable and not `backend`
 * (say a whole-call 409 `conflict`, which `HttpJournal` rebuilds as the
 * journal's error); or it (or a cause under it, as an `HttpJournal` error
 * carries its `HttpError`) is an HTTP 400, 409, 415 or 422 with a code of
 * the API. Such a status without one (`http_400`: the body was not the API's
 * JSON, so a proxy or a portal answered) is not: nothing says the request
 * was at fault. 413 `payload_too_large` is a refusal of the request too, but
 * the forwarder splits the batch for it before it asks (see
 * {@link isPayloadTooLarge}); 403 `forbidden_namespace` is a refusal of the
 * credentials, not of the input (see {@link isForbiddenNamespace}).
 */
export function isRequestRefusal(error: unknown): boolean {
  const code = errorCode(error);
  if (code !== null && BAD_INPUT_CODES.includes(code)) return true;
  if (error instanceof JournalError && error.code !== "backend" && !error.retryable) return true;
  return causeChain(error).some((link) => {
    const { code: linkCode, status } = link as { code?: unknown; status?: unknown };
    return typeof status === "number" && REFUSAL_STATUSES.includes(status) && isApiCode(linkCode);
  });
}

/**
 * Whether a failure of a whole `appendBatch` call is the sink's as a whole
 * rather than any event's, as far as one call can tell: every failure that
 * is not a typed refusal of the request's input ({@link isRequestRefusal}).
 * So: the sink unavailable, overloaded or timing out (429, 5xx of any kind,
 * 408, a network failure), a misconfigured or misrouted sink (401 / 403
 * refusing the credentials, for every namespace or, `forbidden_namespace`,
 * for one; 404 `unknown_journal` or a 404 page, a 2xx that
 * is not the API's answer: `invalid_answer`, e.g. a captive portal's 200 HTML
 * page), an error body that is not the API's JSON, a sink that breaks the
 * `appendBatch` contract (`sink_protocol`), anything untyped. None of these
 * says anything about the events on its own: the forwarder's loop waits them
 * out without charging the events an attempt. Some of them may still be one
 * event's doing (a WAF's page, a server bug on that event's content: see
 * {@link isUnexplainedAnswer}), which the loop finds out by splitting.
 */
export function isSinkWide(error: unknown): boolean {
  return !isRequestRefusal(error);
}

/**
 * Whether a sink-wide failure ({@link isSinkWide}) is an answer that may be
 * one event's doing rather than an outage: the sink (or something in front
 * of it) answered, not retryable, and not about the credentials. That is a
 * non-retryable error that is not a typed refusal of the input and whose
 * chain carries no 401, 403 or 408 (a 500 or a 400 page without the API's
 * JSON, a 500 `internal`, a 404, a 2xx that is not the API's answer,
 * `sink_protocol`). Not: a network failure, a timeout or an abort, 429, 502,
 * 503, 504, `at_capacity` (all retryable: an outage that passes), a storage
 * failure the API reports (`backend`, retryable or not: the storage's fault,
 * not an event's), 401 / 403 (credentials), 408.
 * The forwarder's loop splits a batch that keeps failing this way, to find
 * the event that causes it (see `batch.ts`).
 */
export function isUnexplainedAnswer(error: unknown): boolean {
  if (isRequestRefusal(error) || isRetryable(error)) return false;
  return !carries(error, [], [401, 403, 408]) && !isStorageFault(error);
}

/**
 * The 4xx answers to a call of no events that say the sink is not there for
 * this client (credentials, a wrong URL, a proxy, a timeout, a rate limit)
 * rather than that a working sink refused the call.
 */
const DOWN_4XX: readonly number[] = [401, 403, 404, 407, 408, 429];

/**
 * Whether a failed call of no events (the forwarder's check that the sink
 * answers before it claims, see `sinkAnswers` in `batch.ts`) says the sink
 * is down or unreachable: a failure the module can read, anywhere in its
 * cause chain: an HTTP `status` of 5xx, 401, 403, 404, 407, 408 or 429 (or
 * one outside 4xx: a 2xx that is not the API's answer); with no status, a
 * string `code` (the journal's errors, a timeout's `sink_timeout`, Node's
 * `ECONNREFUSED`), a `retryable` flag, a network failure as `fetch` reports
 * it (a `TypeError`) or an abort or a timeout (`AbortError`, `TimeoutError`).
 * So a network failure, a timeout, 429, any 5xx, `backend`, 401, 403, 404, a
 * page that is not the API's answer all say down. Not: a typed refusal of
 * the request's input ({@link isRequestRefusal}: a sink that refuses an
 * empty batch is up), another 4xx (a server that refused the call answered
 * it), and an untyped error (a plain `Error` with none of these: a custom
 * sink that refuses an empty batch its own way), which the sink threw, so it
 * answered.
 */
export function isSinkDown(error: unknown): boolean {
  if (isRequestRefusal(error)) return false;
  const chain = causeChain(error);
  // An HTTP status says it all: a server that refused the call with a 4xx other than these answered.
  const status = chain.map((link) => (link as { status?: unknown }).status).find((value): value is number => typeof value === "number");
  if (status !== undefined) return status < 400 || status >= 500 || DOWN_4XX.includes(status);
  return chain.some((link) => {
    const { code, status, retryable, name } = link as { code?: unknown; status?: unknown; retryable?: unknown; name?: unknown };
    return typeof code === "string" || typeof status === "number" || typeof retryable === "boolean" || link instanceof TypeError || name === "TypeError" || name === "AbortError" || name === "TimeoutError";
  });
}

/**
 * Whether the failure is the sink's storage failing: an HTTP answer with
 * the API's code `backend` (a 500 or 503 of the worker whose journal's
 * storage failed), or, with no HTTP answer in it, a journal `BackendError`
 * (a local sink's engine, or one rebuilt from a partition's wire). Such a
 * failure is an outage, however often it comes back and however it
 * alternates with successes: never a reason to split a batch or to charge an
 * event.
 */
function isStorageFault(error: unknown): boolean {
  for (const link of causeChain(error)) {
    const { code, status } = link as { code?: unknown; status?: unknown };
    if (typeof status === "number") return code === "backend";
  }
  return error instanceof JournalError && error.code === "backend";
}

/**
 * Whether, after a failure of a whole `appendBatch` call, the sink may have
 * stored the events: the outcome is unknown. That is a network failure, a
 * timeout or an abort (the request may have arrived), a gateway's 5xx (502,
 * 504, Cloudflare's 52x) or a 500 without the API's JSON body (the origin
 * may have acted before it failed), a sink that broke the `appendBatch`
 * contract (it did something), a storage failure the API reports (`backend`,
 * 500 or 503: a lost reply between the worker and its storage object may
 * follow a commit), and anything untyped. Not: any other answer of the API
 * or in front of it, which says nothing was stored (a 2xx that is not the
 * API's answer, 401, 403, 404, 408, 429, 503 `at_capacity`, a typed journal
 * error other than `backend`, a full or overloaded storage object, a
 * refusal).
 */
export function isOutcomeUnknown(error: unknown): boolean {
  const chain = causeChain(error);
  for (const link of chain) {
    const { code, status } = link as { code?: unknown; status?: unknown };
    if (typeof status === "number" && typeof code === "string") {
      // A 500 of any kind, and a storage failure the API reports (`backend`, 500 or 503): the worker's storage
      // may have committed before the failure reached it (a lost reply between the worker and its Durable Object).
      return status === 500 || status === 502 || status === 504 || (status >= 520 && status <= 529) || (status === 503 && code === "backend");
    }
  }
  if (error instanceof JournalError) {
    // A journal error other than `backend` is a typed refusal: nothing stored. A `backend` error may have
    // committed (a lost reply), unless the wire's marks say a full or overloaded storage object refused it.
    if (error.code !== "backend") return false;
    return waitOutMarks(error) === undefined;
  }
  return true;
}
