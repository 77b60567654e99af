/**
 * `usageJournal`: Hono middleware that journals the usage a request's handler
 * reports, for a Worker that bills from it.
 *
 * At acceptance the middleware fixes the request's id: the `x-request-id`
 * header when the caller sent a UUIDv7 there (so a retried request keeps its
 * id and is journaled once: the journal answers `already_present`), else a
 * fresh UUIDv7. The id is on the context (`c.get("requestId")`) and on the
 * response (`x-request-id`). The handler reports usage with
 * `c.get("reportUsage")(value)`; after the handler, `toRecord` turns the value
 * into `{ namespace, subject, data }` and the event is appended with the
 * acceptance time as `observedAt`.
 *
 * - `billing_grade`: the append finishes before the response is settled. If
 *   it fails, the handler's response is dropped and the request fails with
 *   503 and `Retry-After` (the error's code in the body): a client that
 *   retries is billed once, because nothing was journaled (or, with the same
 *   `x-request-id`, the journal recognises the id).
 * - `telemetry_grade`: the append runs after the response (in
 *   `executionCtx.waitUntil` when there is one) and never delays it; a failed
 *   append counts in `counters.dropped` and goes to `onDropped`.
 */
import type { Context, MiddlewareHandler } from "hono";
import { isRequestId, newRequestId, createUsageEvent } from "../journal/event.js";
import { InvalidArgumentError, JournalError } from "../journal/errors.js";
import type { DeliveryMode, JsonValue, UsageJournal } from "../journal/types.js";
import { RETRY_AFTER_SECONDS } from "./errors.js";

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
}

/** The middleware, with its counters. */
export type UsageJournalMiddleware<U> = MiddlewareHandler<{ Variables: UsageVariables<U> }> & { readonly counters: UsageCounters };

/**
 * Journal the usage each request reports.
 *
 * @example
 * import { Hono } from "hono";
 * import { usageJournal, type UsageVariables } from "isostore/worker";
 *
 * const app = new Hono<{ Variables: UsageVariables<{ tokens: number }> }>();
 * app.use("/api/*", usageJournal({
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
  const clock = options.clock ?? Date.now;
  const onDropped = options.onDropped ?? ((error: unknown, requestId: string) => console.warn(`isostore: usage event ${requestId} dropped:`, error));
  const counters: UsageCounters = { appended: 0, dropped: 0, refused: 0 };

  const middleware: MiddlewareHandler<{ Variables: UsageVariables<U> }> = async (c, next) => {
    const acceptedAt = clock();
    const sent = c.req.header("x-request-id");
    const requestId = sent !== undefined && isRequestId(sent) ? sent : newRequestId(acceptedAt);
    let reported: { value: U } | null = null;
    c.set("requestId", requestId);
    c.set("reportUsage", (usage: U) => {
      reported = { value: usage };
    });
    await next();
    c.header("x-request-id", requestId);
    const usage = reported as { value: U } | null;
    if (usage === null || c.error) return;

    let append: () => Promise<unknown>;
    try {
      const shape = options.toRecord(usage.value, c);
      if (shape === null) return;
      const event = createUsageEvent({ record: { requestId, namespace: shape.namespace, subject: shape.subject, data: shape.data }, observedAt: acceptedAt });
      const journal = typeof options.journal === "function" ? options.journal(c) : options.journal;
      append = () => journal.append(event);
    } catch (error) {
      // A record that cannot become an event is a bug in toRecord: never billed silently.
      append = () => Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }

    if (options.mode === "billing_grade") {
      try {
        await append();
        counters.appended += 1;
      } catch (error) {
        counters.refused += 1;
        const code = error instanceof JournalError ? error.code : "backend";
        const message = `the request's usage could not be journaled, so it was not served (${error instanceof Error ? error.message : String(error)})`;
        c.res = new Response(JSON.stringify({ error: { code, message, retryable: true, requestId } }), {
          status: 503,
          headers: { "content-type": "application/json; charset=utf-8", "retry-after": String(RETRY_AFTER_SECONDS), "x-request-id": requestId },
        });
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
