/**
 * `usageJournal`: Hono middleware that journals the usage a request's handler
 * reports, for a Worker that bills from it.
 *
 * At acceptance the middleware fixes the request's id. A client that may
 * retry sends its own in `x-request-id`: a UUIDv7 (RFC 9562, hyphenated, in
 * any letter case; it is used in lowercase), the same on every retry of one
 * request, so the retry is journaled (billed) once. In `billing_grade` mode
 * a header that is not a UUIDv7 (a version 4 id from `crypto.randomUUID()`,
 * say) is answered 400 `invalid_request` (argument `x-request-id`) before the
 * handler runs, rather than replaced by a fresh id each try, which would bill
 * every retry again; in `telemetry_grade` mode (no retry to protect; proxies
 * set such headers) it is replaced by a minted id. Without the header the
 * middleware mints a UUIDv7. The id is on the
 * context (`c.get("requestId")`) and on the response (`x-request-id`). The
 * handler reports usage with `c.get("reportUsage")(value)` before it returns
 * its response; after the handler, `toRecord` turns the value into
 * `{ namespace, subject, data }` and the event is appended with the
 * acceptance time as `observedAt`. Once the handler has returned, the
 * response is settled: a later report (a streamed handler reporting at the
 * end of its stream) counts in `counters.late` instead of being dropped
 * without a word; in `billing_grade` mode it throws
 * {@link UsageReportedLateError}, in `telemetry_grade` mode that error goes
 * to `onDropped` (counted dropped) and the stream goes on. A streamed handler
 * that bills must therefore know its usage before it returns (or report an
 * estimate up front).
 *
 * - `billing_grade`: the append finishes before the response is settled. It
 *   needs a journal whose `mode` is `billing_grade` (durable storage) and
 *   whose capacity `policy` is `refuse` (the only policy that keeps a billing
 *   promise: `drop_oldest` would later drop events already billed for). Any
 *   other journal is refused at construction (`InvalidArgumentError`,
 *   argument `journal`), or, when `journal` is a function, each request fails
 *   with 500 `backend`. When the append does not succeed, the handler's
 *   response is dropped and the request fails with the status the worker's
 *   API gives the error's code (`errorAnswer`, `STATUS_OF`), the code and the
 *   error's own `retryable` in the body, and the answer says whether the
 *   usage may have been journaled:
 *   - Nothing was journaled: `at_capacity`, or a `backend` failure carrying
 *     the marks of a full or overloaded storage object (a refusal before any
 *     commit): 503 and `Retry-After`, "could not be journaled, so it was not
 *     served". A retry is billed once.
 *   - The outcome is unknown: any other `backend` failure, which may have
 *     come after the commit (a networked journal, or a Durable Object, whose
 *     reply was lost), or no answer within `appendTimeoutMs` (default 10 s).
 *     Such a retryable failure is first tried again at once, up to three
 *     tries in all: the append is idempotent, and a try that answers settles
 *     it and the request is served (an `already_present` after a failed try
 *     counts as this request's own commit: nothing tells it from an earlier
 *     request's, so a replay of an id already served that meets a failed try
 *     is served again, billed once; the middleware would rather serve a
 *     request twice than bill one it never served). When no try answers, the
 *     request is not served (503 and `Retry-After` for a retryable failure and
 *     a timeout, 500 for one a retry will not fix) and the answer says the
 *     usage may have been journaled: the client retries with the same
 *     `x-request-id`, and a 409 `duplicate_request` then means the first
 *     try was billed though never served. That is the window left: the
 *     journal failing three times in a row after a commit, or committing
 *     after the timeout.
 *   - The request id was already used: the journal answers `already_present`
 *     on the first try for an id the client sent (the id was served and
 *     billed; for an id the middleware minted it is this request's own
 *     commit, answered after a retry inside the journal client), or `conflict` for an
 *     id the client sent (it was journaled with other usage: a retry whose
 *     handler reported other figures, say): 409 `duplicate_request` ("this
 *     request id was already used"), not served again, because the usage was
 *     billed once and a caller could otherwise send one id forever and be
 *     served every time, billed once. A retry whose first answer was lost
 *     learns that it was served and billed; for another answer it sends a
 *     new id (or none). A `conflict` on an id the middleware minted itself
 *     is a bug, never a retry: 409 `conflict`.
 *   - `toRecord` threw, returned something that is neither a record nor
 *     null, or returned a record that is not a valid event: a fault of the
 *     server's code, not of the request. It is logged (`console.error`) with
 *     a short id, and the answer is 500 `internal` naming the extractor and
 *     that id.
 *
 *   The handler runs before the journal is asked, so it runs again for a
 *   replayed request id (a client's retry, a duplicate) and only its answer
 *   is dropped: a handler with side effects (a message sent, a row written)
 *   must be idempotent for a request id (key them by `c.get("requestId")`).
 *   A refusal replaces the handler's answer whole: none of the headers the
 *   handler set (cookies, `Location`) go with it, only those the response
 *   had before the handler ran (set by outer middleware) and `x-request-id`.
 * - `telemetry_grade`: the append runs after the response (in
 *   `executionCtx.waitUntil` when there is one) and never delays it; a failed
 *   append (or a failed `toRecord`) counts in `counters.dropped` and goes to
 *   `onDropped`. Its answer leaves before the append, so a repeated id is
 *   served again (and journaled once): telemetry, not billing.
 */
import type { Context, MiddlewareHandler } from "hono";
import { waitOutMarks } from "../cause-chain.js";
import { createUsageEvent, isRequestId, newRequestId } from "../journal/event.js";
import { BackendError, InvalidArgumentError, JournalError } from "../journal/errors.js";
import type { AppendResult, DeliveryMode, JsonValue, UsageEvent, UsageJournal } from "../journal/types.js";
import { globalScheduler, MAX_TIMER_DELAY_MS, type Scheduler } from "../storage/leaser.js";
import { ApiError, errorAnswer, failureId, type ErrorBody } from "./errors.js";

/** What `toRecord` answers: the ordering key and the billed data of one request. */
export interface ReportedUsage {
  readonly namespace: string;
  readonly subject: string;
  readonly data: JsonValue;
}

/** Context variables the middleware sets. */
export interface UsageVariables<U> {
  /** The request's id (UUIDv7, lowercase), fixed at acceptance. */
  requestId: string;
  /**
   * Report the request's usage, before the handler returns its response (a
   * later call in the same handler replaces the value). A call after the
   * response was settled throws {@link UsageReportedLateError} in
   * `billing_grade` mode, and is counted dropped in `telemetry_grade` mode.
   */
  reportUsage: (usage: U) => void;
}

/** Options of {@link usageJournal}. Names not listed here are ignored. */
export interface UsageJournalOptions<U> {
  /**
   * The journal, or a function that gives it for the request (e.g. built over `c.env`).
   * An `HttpJournal` here should be made with `retry: { attempts: 1 }`: the
   * middleware retries an append itself and takes an `already_present` after
   * its own failed try for this request's commit, where one answered after
   * the client's hidden retry of a lost reply reads as a replayed id (409
   * `duplicate_request`) for an id the client sent (one the middleware
   * minted is always taken as its own).
   */
  readonly journal: UsageJournal | ((c: Context) => UsageJournal);
  /**
   * `billing_grade` needs a journal whose `mode` is `billing_grade` and whose
   * `capacity.policy` is `refuse`: a request is served only once its usage
   * is durable, and a durable event is never dropped to make room.
   */
  readonly mode: DeliveryMode;
  /**
   * Turn what the handler reported into the record's key and data; null
   * records nothing. The `subject` is who is billed: take it from an
   * authenticated identity, never from a value the client chose.
   */
  readonly toRecord: (usage: U, c: Context) => ReportedUsage | null;
  /** Acceptance time (epoch ms; default `Date.now`). */
  readonly clock?: () => number;
  /** Called with every telemetry-grade event lost: an append that failed, or a `toRecord` that failed. Default: `console.warn`. */
  readonly onDropped?: (error: unknown, requestId: string) => void;
  /**
   * How long a billing-grade request waits for its append, all tries
   * included (ms, an integer from 1 to 2,147,483,647; default 10,000). When
   * the journal has not answered by then, the request is not served: 503
   * `backend`, retryable, and the usage may have been journaled (the append
   * may still commit), so the client retries with the same request id. Not
   * used in `telemetry_grade` mode, whose append never delays the response.
   */
  readonly appendTimeoutMs?: number;
  /**
   * The timers of `appendTimeoutMs` (default: the global `setTimeout` and
   * `clearTimeout`); tests pass a virtual one (`virtualScheduler` of
   * `isostore/testing`).
   */
  readonly scheduler?: Scheduler;
}

/** Counts of one middleware instance (per isolate). */
export interface UsageCounters {
  /** Events appended (accepted or already present). */
  appended: number;
  /** Telemetry-grade events lost to a failed append. */
  dropped: number;
  /** Billing-grade requests not served because their usage was not journaled, or not confirmed (an append that failed or timed out, a failed `toRecord`). */
  refused: number;
  /** Billing-grade requests not served because their id was already used (409 `duplicate_request`). */
  duplicates: number;
  /** Usage reports refused because they came after the response was settled ({@link UsageReportedLateError}: thrown in billing grade, dropped in telemetry grade). */
  late: number;
}

/** The middleware, with its counters. */
export type UsageJournalMiddleware<U> = MiddlewareHandler<{ Variables: UsageVariables<U> }> & { readonly counters: UsageCounters };

/**
 * Thrown by `reportUsage` when it is called after the response was settled
 * (once the handler returned it: a streamed handler reporting at the end of
 * its stream). The usage is not journaled: a billing-grade middleware has
 * to know it before the response is served.
 */
export class UsageReportedLateError extends Error {
  readonly code = "usage_reported_late" as const;
  /** The request whose usage came late. */
  readonly requestId: string;
  constructor(requestId: string) {
    super(`usage reported after the response was settled: report it before returning the response (request ${requestId}; the usage was not journaled)`);
    this.name = "UsageReportedLateError";
    this.requestId = requestId;
  }
}

/** The request header that carries the request id, both ways. */
const REQUEST_ID_HEADER = "x-request-id";

/** Appends a billing-grade request makes in all when the journal's answers are retryable backend failures. */
const APPEND_TRIES = 3;

/** The default of {@link UsageJournalOptions.appendTimeoutMs}. */
const DEFAULT_APPEND_TIMEOUT_MS = 10_000;


/**
 * Whether an append failure says the event was not journaled: the journal is
 * full (`at_capacity`), or its storage object is full or overloaded (the
 * wait-out marks on a `backend` failure's causes), both refusals before any
 * commit.
 */
function refusedBeforeCommit(error: unknown): boolean {
  return error instanceof JournalError && (error.code === "at_capacity" || (error.code === "backend" && waitOutMarks(error) !== undefined));
}

/** Whether an append failure may have come after the commit: a `backend` failure (or a broken contract) that is not a refusal before it. */
function mayHaveCommitted(error: unknown): boolean {
  return !(error instanceof JournalError) || (error.code === "backend" && !refusedBeforeCommit(error));
}

/** How a billing-grade append ended. */
type AppendOutcome =
  | { readonly kind: "appended"; readonly result: AppendResult }
  /** Every try failed; `uncertain` when one of them may have come after the commit. */
  | { readonly kind: "failed"; readonly error: unknown; readonly uncertain: boolean }
  /** No try answered within the timeout (the append may still commit). */
  | { readonly kind: "timed_out" };

/**
 * `append()`, tried again at once (up to {@link APPEND_TRIES} in all) while it
 * fails with a retryable backend failure, and waited for at most `timeoutMs`
 * in all. Such a failure may come after the event was committed (a networked
 * journal whose reply was lost): the append is idempotent, so a try that
 * answers `accepted` or `already_present` settles it, and the request is
 * served, rather than answered "not journaled" while it was billed (its
 * client's retry with the same id would then be refused as a duplicate,
 * billed and never served).
 */
async function settleAppend(append: () => Promise<AppendResult>, timeoutMs: number, scheduler: Scheduler): Promise<AppendOutcome> {
  let expired = false;
  let timer: unknown;
  const deadline = new Promise<AppendOutcome>((resolve) => {
    timer = scheduler.setTimeout(() => {
      expired = true;
      resolve({ kind: "timed_out" });
    }, timeoutMs);
  });
  // Never rejects: every failure is an outcome. After the deadline it makes no further try.
  const tries = (async (): Promise<AppendOutcome> => {
    let uncertain = false;
    for (let tried = 1; ; tried++) {
      try {
        const result = await append();
        // An earlier try failed: already_present is that try's commit (or, rarely, an earlier request's).
        return { kind: "appended", result: tried > 1 && result.status === "already_present" ? { ...result, status: "accepted" } : result };
      } catch (error) {
        uncertain ||= mayHaveCommitted(error);
        if (expired || tried >= APPEND_TRIES || !(error instanceof JournalError) || error.code !== "backend" || !error.retryable) return { kind: "failed", error, uncertain };
      }
    }
  })();
  try {
    return await Promise.race([tries, deadline]);
  } finally {
    if (timer !== undefined) scheduler.clearTimeout(timer);
  }
}

/** Why a billing-grade middleware cannot use `journal`, or null when it can. */
function billingJournalProblem(journal: UsageJournal): string | null {
  if (journal.mode !== "billing_grade") {
    return `a billing_grade usage middleware needs a billing_grade journal; journal \`${String(journal.name)}\` is ${String(journal.mode)} (its storage does not survive the loss of its process): use mode "telemetry_grade", or a journal over durable storage`;
  }
  const policy = (journal.capacity as { policy?: unknown } | undefined)?.policy;
  if (policy !== "refuse") {
    return `a billing_grade usage middleware needs a journal whose capacity policy is "refuse"; journal \`${String(journal.name)}\` has policy ${String(policy)} (when full it drops events, billed ones included, instead of refusing the append): use a capacity with policy "refuse" (BILLING_GRADE), or mode "telemetry_grade"`;
  }
  return null;
}

/** The request id the client sent: `undefined` without the header, null when it is not a UUIDv7, else the id in lowercase. */
function sentRequestId(c: Context): string | null | undefined {
  const sent = c.req.header(REQUEST_ID_HEADER);
  if (sent === undefined) return undefined;
  const id = sent.trim().toLowerCase();
  return isRequestId(id) ? id : null;
}

/**
 * Journal the usage each request reports.
 *
 * @throws InvalidArgumentError (`argument` `journal`) for a `billing_grade`
 *   middleware over a journal whose `mode` is `telemetry_grade` or whose
 *   `capacity.policy` is not `refuse`; (`argument` `mode`, `toRecord`,
 *   `appendTimeoutMs`) for an option out of its range.
 * @example
 * import { Hono } from "hono";
 * import { usageJournal, type UsageVariables } from "isostore/worker";
 *
 * // `verifiedUser` is set by your auth middleware from a credential it has verified (a session, a
 * // signed token), never from a header the client writes: the subject is who gets billed.
 * type Variables = UsageVariables<{ tokens: number }> & { verifiedUser: string };
 * const app = new Hono<{ Variables: Variables }>();
 * app.use("/api/*", authenticate); // answers 401, or sets c.set("verifiedUser", ...)
 * app.use("/api/*", usageJournal<{ tokens: number }>({
 *   journal: (c) => journalFor(c.env), // billing_grade, with capacity policy "refuse"
 *   mode: "billing_grade",
 *   toRecord: (usage, c) => ({ namespace: "acme", subject: c.get("verifiedUser") as string, data: usage }),
 * }));
 * app.post("/api/complete", (c) => {
 *   c.get("reportUsage")({ tokens: 42 }); // before the response is returned
 *   return c.json({ ok: true });
 * });
 */
export function usageJournal<U>(options: UsageJournalOptions<U>): UsageJournalMiddleware<U> {
  if (options.mode !== "billing_grade" && options.mode !== "telemetry_grade") throw new InvalidArgumentError("mode", 'must be "billing_grade" or "telemetry_grade"');
  if (typeof options.toRecord !== "function") throw new InvalidArgumentError("toRecord", "must be a function");
  const appendTimeoutMs: unknown = options.appendTimeoutMs ?? DEFAULT_APPEND_TIMEOUT_MS;
  if (typeof appendTimeoutMs !== "number" || !Number.isSafeInteger(appendTimeoutMs) || appendTimeoutMs < 1 || appendTimeoutMs > MAX_TIMER_DELAY_MS) {
    throw new InvalidArgumentError("appendTimeoutMs", `must be an integer from 1 to ${MAX_TIMER_DELAY_MS}, got ${String(appendTimeoutMs)}`);
  }
  if (options.mode === "billing_grade" && typeof options.journal !== "function") {
    const problem = billingJournalProblem(options.journal);
    if (problem !== null) throw new InvalidArgumentError("journal", problem);
  }
  const clock = options.clock ?? Date.now;
  const scheduler = options.scheduler ?? globalScheduler();
  if (typeof scheduler !== "object" || scheduler === null || typeof scheduler.setTimeout !== "function" || typeof scheduler.clearTimeout !== "function") {
    throw new InvalidArgumentError("scheduler", "must have setTimeout and clearTimeout functions");
  }
  const reportDropped = options.onDropped ?? ((error: unknown, requestId: string) => console.warn(`isostore: usage event ${requestId} dropped:`, error));
  /** Tell `onDropped`; a callback that throws never fails the response nor leaves a rejection unhandled. */
  const onDropped = (error: unknown, requestId: string): void => {
    try {
      reportDropped(error, requestId);
    } catch (failure) {
      console.error(`isostore: onDropped threw for usage event ${requestId}:`, failure);
    }
  };
  const counters: UsageCounters = { appended: 0, dropped: 0, refused: 0, duplicates: 0, late: 0 };

  const middleware: MiddlewareHandler<{ Variables: UsageVariables<U> }> = async (c, next) => {
    const acceptedAt = clock();
    // Telemetry grade has no retry to protect: an id it cannot use (a proxy's v4, say) is replaced, as one never sent.
    const header = sentRequestId(c);
    const sent = header === null && options.mode === "telemetry_grade" ? undefined : header;
    if (sent === null) {
      // Not served: a fresh id for each try of one request would bill every retry again.
      const { status, body } = errorAnswer(
        new ApiError(
          "invalid_request",
          `the ${REQUEST_ID_HEADER} header must be a UUIDv7 (RFC 9562, hyphenated, any letter case), the same on every retry of one request; or send none and one is minted`,
          REQUEST_ID_HEADER,
        ),
      );
      return c.json(body, status as 400);
    }
    const requestId = sent ?? newRequestId(acceptedAt);
    let reported: { value: U } | null = null;
    let settled = false;
    // What the response carried before the handler ran (headers outer middleware set, e.g. CORS): a refusal
    // keeps these and nothing the handler set (its cookies and redirects belong to the answer it drops).
    const inherited = new Headers(c.res.headers);
    c.set("requestId", requestId);
    c.set("reportUsage", (usage: U) => {
      if (settled) {
        // The usage is read once the handler has returned: a later report would be lost without a word. Billing
        // grade throws (the handler must report first); telemetry grade loses that event, told, and goes on.
        counters.late += 1;
        const late = new UsageReportedLateError(requestId);
        if (options.mode === "billing_grade") throw late;
        counters.dropped += 1;
        onDropped(late, requestId);
        return;
      }
      reported = { value: usage };
    });
    try {
      await next();
    } finally {
      settled = true;
    }
    c.header(REQUEST_ID_HEADER, requestId);
    const usage = reported as { value: U } | null;
    if (usage === null || c.error) return;

    let event: UsageEvent;
    try {
      const shape = options.toRecord(usage.value, c);
      if (shape === null) return;
      if (typeof shape !== "object") throw new TypeError(`toRecord returned ${typeof shape}, neither a record ({ namespace, subject, data }) nor null`);
      event = createUsageEvent({ record: { requestId, namespace: shape.namespace, subject: shape.subject, data: shape.data }, observedAt: acceptedAt });
    } catch (error) {
      if (options.mode === "telemetry_grade") {
        counters.dropped += 1;
        onDropped(error, requestId);
        return;
      }
      // A bug in the server's extractor (or a record it built that is no event): not the client's fault, never billed silently.
      counters.refused += 1;
      const id = failureId();
      console.error(`isostore worker: the usage extractor failed [${id}] (request ${requestId}):`, error);
      replace(c, inherited, requestId, 500, {}, {
        error: { code: "internal", message: `the usage extractor failed or returned an invalid record (logged as ${id}), so the request was not served`, retryable: false },
      });
      return;
    }

    let journal: UsageJournal | null = null;
    let journalFailure: unknown = null;
    try {
      journal = typeof options.journal === "function" ? options.journal(c) : options.journal;
      if (typeof journal !== "object" || journal === null) {
        const got = journal === null ? "null" : typeof journal;
        journal = null;
        throw new TypeError(`the journal function returned ${got}, not a journal`);
      }
    } catch (error) {
      journalFailure = error;
    }

    if (options.mode === "billing_grade") {
      /** Replace the handler's answer with a refusal: none of the handler's headers go with it. */
      const refuse = (refusal: Error, message?: (text: string, retryable: boolean) => string): void => {
        // The worker API's one mapping of codes to statuses (and Retry-After on a 503), the error's own `retryable`.
        // A server fault's own message stays in the log (errorAnswer logs it): the answer says which failure it was.
        const { status, headers, body } = errorAnswer(refusal);
        replace(c, inherited, requestId, status, headers, { error: { ...body.error, ...(message ? { message: message(body.error.message, body.error.retryable) } : {}) } });
      };
      const problem = journal === null ? null : billingJournalProblem(journal);
      if (journal === null || problem !== null) {
        // A misconfigured server (the journal function failed, or gave a journal not fit for billing): nothing was
        // appended; not served, not retryable.
        counters.refused += 1;
        const refusal =
          journal === null
            ? new BackendError(`the journal function failed: ${journalFailure instanceof Error ? journalFailure.message : String(journalFailure)}`, { cause: journalFailure, retryable: false })
            : new BackendError(problem ?? "", { retryable: false });
        refuse(refusal, (text) => `the request's usage could not be journaled, so it was not served (${text})`);
        return;
      }
      const [target, ready] = [journal, event];
      const outcome = await settleAppend(() => target.append(ready), appendTimeoutMs, scheduler);
      // The journal failed or did not answer, perhaps after committing: the client learns the outcome by retrying the id.
      const mayBeJournaled = (text: string, retryable: boolean) =>
        `the request's usage may have been journaled (the journal failed or did not answer, perhaps after committing it), so it was not served: ${
          retryable ? `retry with the same ${REQUEST_ID_HEADER} (${requestId}); a 409 duplicate_request then means it was billed` : `a retry must send the same ${REQUEST_ID_HEADER} (${requestId}), and a 409 duplicate_request then means it was billed`
        } (${text})`;
      const used = (what: string) =>
        new ApiError("duplicate_request", `this request id was already used: request ${requestId} was already journaled and billed${what}; a request id is served once: send a new one (or none) to be served again`);
      switch (outcome.kind) {
        case "appended":
          counters.appended += 1;
          // An id minted for this request is no other request's: already_present is its own commit, whose
          // answer a journal's own retry lost (an HttpJournal retries an append after a lost reply).
          if (outcome.result.status === "already_present" && sent !== undefined) {
            counters.duplicates += 1;
            refuse(used(""));
          }
          return;
        case "timed_out":
          counters.refused += 1;
          refuse(new BackendError(`the journal did not answer the append within ${appendTimeoutMs} ms`, { retryable: true }), (text) =>
            mayBeJournaled(`the journal did not answer within ${appendTimeoutMs} ms; ${text}`, true),
          );
          return;
        case "failed": {
          const { error, uncertain } = outcome;
          if (error instanceof JournalError && error.code === "conflict" && sent !== undefined) {
            // The client's own id, journaled with other usage (a retry whose handler reported other figures): already used.
            // (Never this request's own earlier try, which appended the same event: that is already_present.)
            counters.duplicates += 1;
            refuse(used(", with other usage"));
            return;
          }
          counters.refused += 1;
          // Anything but a journal error (a journal breaking its contract) is a bug: a retry will not fix it.
          const refusal = error instanceof JournalError ? error : new BackendError(error instanceof Error ? error.message : String(error), { cause: error, retryable: false });
          refuse(refusal, (text, retryable) => (uncertain ? mayBeJournaled(text, retryable) : `the request's usage could not be journaled, so it was not served (${text})`));
          return;
        }
      }
    }

    const [target, ready] = [journal, event];
    const background = Promise.resolve()
      .then(() => (target === null ? Promise.reject(journalFailure instanceof Error ? journalFailure : new Error(String(journalFailure))) : target.append(ready)))
      .then(
        () => {
          counters.appended += 1;
        },
        (error: unknown) => {
          counters.dropped += 1;
          onDropped(error, requestId);
        },
      );
    let waitUntil: ((promise: Promise<unknown>) => void) | null = null;
    try {
      const context = c.executionCtx;
      waitUntil = (promise) => context.waitUntil(promise);
    } catch {
      waitUntil = null; // no execution context (Node, tests): the promise runs on its own
    }
    waitUntil?.(background);
  };
  return Object.assign(middleware, { counters });
}

/** Replace the response with an error answer: the inherited headers, `x-request-id`, JSON; none of the handler's headers. */
function replace(c: Context, inherited: Headers, requestId: string, status: number, headers: Record<string, string>, body: ErrorBody): void {
  const answerHeaders = new Headers(inherited);
  for (const [name, value] of Object.entries(headers)) answerHeaders.set(name, value);
  answerHeaders.set("content-type", "application/json; charset=utf-8");
  answerHeaders.set(REQUEST_ID_HEADER, requestId);
  // Hono's `c.res` setter copies every header of the response it replaces into the new one: drop that first.
  c.res = undefined;
  c.res = new Response(JSON.stringify({ error: { ...body.error, requestId } }), { status, headers: answerHeaders });
}
