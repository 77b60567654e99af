/**
 * `usageJournal`: Hono middleware that journals the usage a request's handler
 * reports, for a Worker that bills from it.
 *
 * At acceptance the middleware fixes the request's id: the `x-request-id`
 * header when the caller sent a UUIDv7 there (so a retried request keeps its
 * id and is journaled once), else a fresh UUIDv7. The id is on the context (`c.get("requestId")`) and on the
 * response (`x-request-id`). The handler reports usage with
 * `c.get("reportUsage")(value)`; after the handler, `toRecord` turns the value
 * into `{ namespace, subject, data }` and the event is appended with the
 * acceptance time as `observedAt`.
 *
 * - `billing_grade`: the append finishes before the response is settled. If
 *   it fails, the handler's response is dropped and the request fails with
 *   the status the worker's API gives the error's code (`errorAnswer`,
 *   `STATUS_OF`), the code and the error's own `retryable` in the body: 503
 *   and `Retry-After` for what a retry may fix (`at_capacity`, a retryable
 *   `backend` failure), where a client that retries is billed once, because
 *   nothing was journaled (or, with the same `x-request-id`, the journal
 *   recognises the id). A retryable `backend` failure may have come after
 *   the commit (a networked journal whose reply was lost), so the middleware
 *   first appends again, at once, up to three tries in all: the append is
 *   idempotent, and a try that answers settles it and the request is served
 *   (an `already_present` after a failed try counts as this request's own
 *   commit: nothing tells it from an earlier request's, so a replay of an id
 *   already served that meets a failed try is served again, billed once; the
 *   middleware would rather serve a request twice than bill one it never
 *   served). Only when every try fails is the request refused, and the answer
 *   says the journal did not confirm the usage rather than that nothing was
 *   journaled: if the first try had in fact committed, a retry with the same
 *   id is a `duplicate_request` (billed, not served), the one window left,
 *   which needs the journal to fail three times in a row after a commit.
 *   409 for a `conflict` (the same request id with other usage: a bug, never
 *   a retry); 400 for usage that is not a valid event;
 *   500 for a failure a retry will not fix. A request whose id was already
 *   served and billed (the journal answers `already_present` on the first
 *   try) is not served again: 409 `duplicate_request`. The handler ran, but its answer is
 *   dropped, because the usage was billed once and a caller could otherwise
 *   send one id forever and be served every time, billed once. A retry whose
 *   first answer was lost learns that it was served and billed; for another
 *   answer it sends a new id (or none). A refusal replaces the handler's
 *   answer whole: none of the headers the handler set (cookies, `Location`)
 *   go with it, only those the response had before the handler ran (set by
 *   outer middleware) and `x-request-id`. It needs a journal whose `mode`
 *   is `billing_grade` (durable storage): over a `telemetry_grade` one it is
 *   refused at construction (`InvalidArgumentError`, argument `journal`), or,
 *   when `journal` is a function, each request fails with 500.
 * - `telemetry_grade`: the append runs after the response (in
 *   `executionCtx.waitUntil` when there is one) and never delays it; a failed
 *   append counts in `counters.dropped` and goes to `onDropped`. Its answer
 *   leaves before the append, so a repeated id is served again (and
 *   journaled once): telemetry, not billing.
 */
import type { Context, MiddlewareHandler } from "hono";
import { isRequestId, newRequestId, createUsageEvent } from "../journal/event.js";
import { BackendError, InvalidArgumentError, JournalError } from "../journal/errors.js";
import type { AppendResult, DeliveryMode, JsonValue, UsageJournal } from "../journal/types.js";
import { ApiError, errorAnswer } from "./errors.js";

/** What `toRecord` answers: the ordering key and the billed data of one request. */
export interface ReportedUsage {
  readonly namespace: string;
  readonly subject: string;
  readonly data: JsonValue;
}

/** Context variables the middleware sets. */
export interface UsageVariables<U> {
  /** The request's id (UUIDv7), fixed at acceptance. */
  requestId: string;
  /** Report the request's usage (call at most once; a later call replaces the value). */
  reportUsage: (usage: U) => void;
}

/** Options of {@link usageJournal}. */
export interface UsageJournalOptions<U> {
  /** The journal, or a function that gives it for the request (e.g. built over `c.env`). */
  readonly journal: UsageJournal | ((c: Context) => UsageJournal);
  /**
   * `billing_grade` needs a journal whose `mode` is `billing_grade`: a
   * request is served only once its usage is durable.
   */
  readonly mode: DeliveryMode;
  /** Turn what the handler reported into the record's key and data; null records nothing. */
  readonly toRecord: (usage: U, c: Context) => ReportedUsage | null;
  /** Acceptance time (epoch ms; default `Date.now`). */
  readonly clock?: () => number;
  /** Called with every telemetry-grade append that failed. Default: `console.warn`. */
  readonly onDropped?: (error: unknown, requestId: string) => void;
}

/** Counts of one middleware instance (per isolate). */
export interface UsageCounters {
  /** Events appended (accepted or already present). */
  appended: number;
  /** Telemetry-grade events lost to a failed append. */
  dropped: number;
  /** Billing-grade requests failed because their append failed. */
  refused: number;
  /** Billing-grade requests not served because their id was already served and billed (409 `duplicate_request`). */
  duplicates: number;
}

/** The middleware, with its counters. */
export type UsageJournalMiddleware<U> = MiddlewareHandler<{ Variables: UsageVariables<U> }> & { readonly counters: UsageCounters };

/** Appends a billing-grade request makes in all when the journal's answers are retryable backend failures. */
const APPEND_TRIES = 3;

/**
 * `append()`, tried again at once (up to {@link APPEND_TRIES} in all) while it
 * fails with a retryable backend failure. Such a failure may come after the
 * event was committed (a networked journal whose reply was lost): the append
 * is idempotent, so a try that answers `accepted` or `already_present` settles
 * it, and the request is served, rather than answered "not journaled" while it
 * was billed (its client's retry with the same id would then be refused as a
 * duplicate, billed and never served).
 */
async function appendResolvingFailures(append: () => Promise<AppendResult>): Promise<AppendResult> {
  for (let tried = 1; ; tried++) {
    try {
      const result = await append();
      // An earlier try failed: already_present is that try's commit (or, rarely, an earlier request's).
      return tried > 1 && result.status === "already_present" ? { ...result, status: "accepted" } : result;
    } catch (error) {
      if (tried >= APPEND_TRIES || !(error instanceof JournalError) || error.code !== "backend" || !error.retryable) throw error;
    }
  }
}

/** Why a billing-grade middleware cannot use `journal`, or null when it can. */
function telemetryJournalProblem(journal: UsageJournal): string | null {
  if (journal.mode === "billing_grade") return null;
  return `a billing_grade usage middleware needs a billing_grade journal; journal \`${String(journal.name)}\` is ${String(journal.mode)} (its storage does not survive the loss of its process): use mode "telemetry_grade", or a journal over durable storage`;
}

/**
 * Journal the usage each request reports.
 *
 * @throws InvalidArgumentError (`argument` `journal`) for a `billing_grade`
 *   middleware over a journal whose `mode` is `telemetry_grade`.
 * @example
 * import { Hono } from "hono";
 * import { usageJournal, type UsageVariables } from "isostore/worker";
 *
 * const app = new Hono<{ Variables: UsageVariables<{ tokens: number }> }>();
 * app.use("/api/*", usageJournal<{ tokens: number }>({
 *   journal: (c) => journalFor(c.env),
 *   mode: "billing_grade",
 *   toRecord: (usage, c) => ({ namespace: "acme", subject: c.req.header("x-user") ?? "anonymous", data: usage }),
 * }));
 * app.post("/api/complete", (c) => {
 *   c.get("reportUsage")({ tokens: 42 });
 *   return c.json({ ok: true });
 * });
 */
export function usageJournal<U>(options: UsageJournalOptions<U>): UsageJournalMiddleware<U> {
  if (options.mode !== "billing_grade" && options.mode !== "telemetry_grade") throw new InvalidArgumentError("mode", 'must be "billing_grade" or "telemetry_grade"');
  if (typeof options.toRecord !== "function") throw new InvalidArgumentError("toRecord", "must be a function");
  if (options.mode === "billing_grade" && typeof options.journal !== "function") {
    const problem = telemetryJournalProblem(options.journal);
    if (problem !== null) throw new InvalidArgumentError("journal", problem);
  }
  const clock = options.clock ?? Date.now;
  const onDropped = options.onDropped ?? ((error: unknown, requestId: string) => console.warn(`isostore: usage event ${requestId} dropped:`, error));
  const counters: UsageCounters = { appended: 0, dropped: 0, refused: 0, duplicates: 0 };

  const middleware: MiddlewareHandler<{ Variables: UsageVariables<U> }> = async (c, next) => {
    const acceptedAt = clock();
    const sent = c.req.header("x-request-id");
    const requestId = sent !== undefined && isRequestId(sent) ? sent : newRequestId(acceptedAt);
    let reported: { value: U } | null = null;
    // What the response carried before the handler ran (headers outer middleware set, e.g. CORS): a refusal
    // keeps these and nothing the handler set (its cookies and redirects belong to the answer it drops).
    const inherited = new Headers(c.res.headers);
    c.set("requestId", requestId);
    c.set("reportUsage", (usage: U) => {
      reported = { value: usage };
    });
    await next();
    c.header("x-request-id", requestId);
    const usage = reported as { value: U } | null;
    if (usage === null || c.error) return;

    let append: () => Promise<AppendResult>;
    try {
      const shape = options.toRecord(usage.value, c);
      if (shape === null) return;
      const event = createUsageEvent({ record: { requestId, namespace: shape.namespace, subject: shape.subject, data: shape.data }, observedAt: acceptedAt });
      const journal = typeof options.journal === "function" ? options.journal(c) : options.journal;
      const problem = options.mode === "billing_grade" ? telemetryJournalProblem(journal) : null;
      // A misconfigured server (the journal from the function is not durable): not served, not retryable.
      append = problem === null ? () => journal.append(event) : () => Promise.reject(new BackendError(problem, { retryable: false }));
    } catch (error) {
      // A record that cannot become an event is a bug in toRecord: never billed silently.
      append = () => Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }

    if (options.mode === "billing_grade") {
      /** Replace the handler's answer with a refusal: none of the handler's headers go with it. */
      const refuse = (refusal: Error, message?: (text: string) => string): void => {
        // The worker API's one mapping of codes to statuses (and Retry-After on a 503), the error's own `retryable`.
        // A server fault's own message stays in the log (errorAnswer logs it): the answer says which failure it was.
        const { status, headers, body } = errorAnswer(refusal);
        const answerHeaders = new Headers(inherited);
        for (const [name, value] of Object.entries(headers)) answerHeaders.set(name, value);
        answerHeaders.set("content-type", "application/json; charset=utf-8");
        answerHeaders.set("x-request-id", requestId);
        const error = { ...body.error, ...(message ? { message: message(body.error.message) } : {}), requestId };
        // Hono's `c.res` setter copies every header of the response it replaces into the new one: drop that first.
        c.res = undefined;
        c.res = new Response(JSON.stringify({ error }), { status, headers: answerHeaders });
      };
      try {
        const result = await appendResolvingFailures(append);
        counters.appended += 1;
        if (result.status === "already_present") {
          counters.duplicates += 1;
          refuse(new ApiError("duplicate_request", `request ${requestId} was already journaled and billed; a request id is served once: send a new one (or none) to be served again`));
        }
      } catch (error) {
        counters.refused += 1;
        // Anything but a journal error (a throwing toRecord, a journal breaking its contract) is a bug: a retry will not fix it.
        const refusal =
          error instanceof JournalError ? error : new BackendError(error instanceof Error ? error.message : String(error), { cause: error, retryable: false });
        refuse(refusal, (text) =>
          refusal.code === "backend"
            ? `the journal did not confirm the request's usage, so it was not served (${text})`
            : `the request's usage could not be journaled, so it was not served (${text})`,
        );
      }
      return;
    }

    const background = append().then(
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
