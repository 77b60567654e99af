/**
 * One batch of the forwarder: claim, hand to the sink, settle every claimed
 * event in the source. This is where "never lose, never reorder" is decided.
 *
 * The promises:
 * - An event is acknowledged only when the sink answered `accepted` or
 *   `already_present` for it. Nothing else acknowledges.
 * - A per-event refusal the sink calls permanent (`retryable: false`:
 *   `conflict`, `invalid_event`, ...) is quarantined as `rejected`, for an
 *   operator. A retryable one (`at_capacity`, ...) is nacked with backoff.
 * - When `appendBatch` as a whole fails (throws, times out, answers the wrong
 *   number of results), every event is nacked with backoff and the error text:
 *   the sink may have stored part of the batch, which the replay finds as
 *   `already_present` (the sink is idempotent on request ids). A permanent
 *   whole-batch error is nacked too, not quarantined: the journal's attempt
 *   budget turns it into `attempts_exhausted` without guessing here.
 * - While the sink has not answered, a heartbeat extends the leases every
 *   `heartbeatMs`, so a slow sink does not cause a redelivery; the heartbeat
 *   is stopped, and its last extension settled, before anything is settled.
 * - A call that times out (`sinkTimeoutMs`) is abandoned, not cancelled: it
 *   may still land at the sink later. That is harmless for the replay (the
 *   sink answers `already_present`), but should the event meanwhile have been
 *   quarantined and a later event of its key forwarded, the late landing puts
 *   it after that event at the sink. Keep `sinkTimeoutMs` above the sink's own
 *   request timeout so an abandoned call has already failed.
 * - A settle call that fails (the source is briefly unavailable) is reported;
 *   the event's lease lapses and it is redelivered, and the sink recognises
 *   it. Per-key order holds because the journal hands out at most one
 *   unfinished event per ordering key at a time, and the caller never claims
 *   while a batch is open.
 */
import { MAX_LEASE_MS } from "../journal/journal.js";
import type { AckResult, BatchAppendResult, ConsumerId, Delivery, DeliveryId, UsageJournal } from "../journal/types.js";
import type { Scheduler } from "../storage/leaser.js";
import type { BackoffPolicy } from "./backoff.js";
import { describeError, isRetryable, SinkProtocolError, SinkTimeoutError } from "./errors.js";

/** What the forwarder writes to: anything with the journal's `appendBatch` (a `UsageJournal`, an `HttpJournal`). */
export type ForwarderSink = Pick<UsageJournal, "appendBatch">;

/** Which step of the forwarder failed. */
export type ForwarderPhase = "claim" | "append" | "ack" | "nack" | "quarantine" | "extend" | "stats" | "lock" | "online" | "internal";

/** How one batch went. Counts are events. */
export interface BatchReport {
  /** Events claimed from the source (0: nothing was claimable, or the claim failed). */
  readonly claimed: number;
  /** Acknowledged in the source after the sink accepted them or already had them. */
  readonly forwarded: number;
  /** Of `forwarded`, those the sink already had (a replay). */
  readonly alreadyPresent: number;
  /** Quarantined in the source as `rejected` (a permanent per-event refusal). */
  readonly quarantined: number;
  /** Nacked with backoff (a retryable refusal or a whole-batch failure). */
  readonly retried: number;
  /** Settle calls (ack, nack, quarantine) the source failed: those events are redelivered when their lease lapses. */
  readonly unsettled: number;
  /** Whether something failed that is worth backing off for (a claim or sink failure, a retryable refusal). */
  readonly failed: boolean;
}

/** A failure the batch reports (the forwarder turns it into an `error` event). */
export interface BatchFailure {
  readonly phase: ForwarderPhase;
  readonly error: unknown;
  /** Request ids concerned (empty for a claim failure). */
  readonly requestIds: readonly string[];
}

/** What one batch needs. */
export interface BatchContext {
  readonly source: UsageJournal;
  readonly consumer: ConsumerId;
  readonly sink: ForwarderSink;
  readonly batchSize: number;
  readonly leaseMs: number;
  readonly heartbeatMs: number;
  readonly sinkTimeoutMs: number | null;
  readonly backoff: BackoffPolicy;
  readonly clock: () => number;
  readonly scheduler: Scheduler;
  readonly report: (failure: BatchFailure) => void;
  /** Told when a claim returned events, before they go to the sink. */
  readonly onClaimed?: (count: number) => void;
}

const MAX_NACK_ERROR_CHARS = 2000;
const EMPTY: BatchReport = Object.freeze({ claimed: 0, forwarded: 0, alreadyPresent: 0, quarantined: 0, retried: 0, unsettled: 0, failed: false });

/** The `retryAfterMs` of a nack: the policy's delay for this attempt, clamped to what `nack` takes. */
export function retryDelay(backoff: BackoffPolicy, failures: number): number {
  const delay = backoff.delayMs(failures);
  if (typeof delay !== "number" || !Number.isFinite(delay)) return 1000;
  return Math.min(MAX_LEASE_MS, Math.max(0, Math.round(delay)));
}

/** Forward one batch. Never rejects: every failure goes to `context.report` and into the report's counts. */
export async function forwardBatch(context: BatchContext): Promise<BatchReport> {
  let deliveries: Delivery[];
  try {
    deliveries = await context.source.claim(context.consumer, { maxEvents: context.batchSize, leaseMs: context.leaseMs, now: context.clock() });
  } catch (error) {
    context.report({ phase: "claim", error, requestIds: [] });
    return { ...EMPTY, failed: true };
  }
  if (deliveries.length === 0) return EMPTY;
  context.onClaimed?.(deliveries.length);

  const heartbeat = startHeartbeat(context, deliveries);
  let results: BatchAppendResult[] | null = null;
  let batchError: unknown = null;
  try {
    results = await appendWithTimeout(context, deliveries);
    if (!Array.isArray(results) || results.length !== deliveries.length) {
      throw new SinkProtocolError(`${deliveries.length} events sent, ${Array.isArray(results) ? results.length : "no array of"} results received`);
    }
  } catch (error) {
    results = null;
    batchError = error;
  } finally {
    await heartbeat.stop();
  }

  if (results === null) {
    context.report({ phase: "append", error: batchError, requestIds: deliveries.map((delivery) => delivery.id.event) });
    const text = describeError(batchError);
    const outcomes = await Promise.all(deliveries.map((delivery) => nack(context, delivery.id, text)));
    const retried = outcomes.filter(Boolean).length;
    return { ...EMPTY, claimed: deliveries.length, retried, unsettled: deliveries.length - retried, failed: true };
  }

  let forwarded = 0;
  let alreadyPresent = 0;
  let quarantined = 0;
  let retried = 0;
  let unsettled = 0;
  let failed = false;
  // What the sink holds is acknowledged in one call (one source transaction, not one per event).
  const held = deliveries.flatMap((delivery, index) => {
    const status = results[index]?.status;
    return status === "accepted" || status === "already_present" ? [{ delivery, status }] : [];
  });
  if (held.length > 0) {
    let acked: AckResult[] | null = null;
    try {
      acked = await context.source.ackBatch(held.map(({ delivery }) => delivery.id));
    } catch (error) {
      context.report({ phase: "ack", error, requestIds: held.map(({ delivery }) => delivery.id.event) });
    }
    held.forEach(({ delivery, status }, index) => {
      const outcome = acked?.[index];
      if (outcome?.ok) {
        forwarded += 1;
        if (status === "already_present") alreadyPresent += 1;
        return;
      }
      unsettled += 1;
      if (outcome && !outcome.ok) context.report({ phase: "ack", error: outcome.error, requestIds: [delivery.id.event] });
    });
  }
  await Promise.all(
    deliveries.map(async (delivery, index) => {
      const result = results[index];
      if (result !== undefined && (result.status === "accepted" || result.status === "already_present")) return;
      const error: unknown = result !== undefined && result.status === "rejected" ? result.error : new SinkProtocolError(`unknown result ${describeResult(result)}`);
      if (!isRetryable(error)) {
        context.report({ phase: "append", error, requestIds: [delivery.id.event] });
        if (await settle(context, "quarantine", delivery.id, () => context.source.quarantine(delivery.id, "rejected"))) quarantined += 1;
        else unsettled += 1;
        return;
      }
      failed = true;
      context.report({ phase: "append", error, requestIds: [delivery.id.event] });
      if (await nack(context, delivery.id, describeError(error))) retried += 1;
      else unsettled += 1;
    }),
  );
  return { claimed: deliveries.length, forwarded, alreadyPresent, quarantined, retried, unsettled, failed };
}

function describeResult(result: unknown): string {
  try {
    return JSON.stringify(result) ?? String(result);
  } catch {
    return String(result);
  }
}

async function settle(context: BatchContext, phase: "ack" | "nack" | "quarantine", id: DeliveryId, call: () => Promise<void>): Promise<boolean> {
  try {
    await call();
    return true;
  } catch (error) {
    context.report({ phase, error, requestIds: [id.event] });
    return false;
  }
}

function nack(context: BatchContext, id: DeliveryId, text: string): Promise<boolean> {
  return settle(context, "nack", id, () =>
    context.source.nack(id, { retryAfterMs: retryDelay(context.backoff, id.attempt), error: text.slice(0, MAX_NACK_ERROR_CHARS), now: context.clock() }),
  );
}

async function appendWithTimeout(context: BatchContext, deliveries: readonly Delivery[]): Promise<BatchAppendResult[]> {
  const call = Promise.resolve().then(() => context.sink.appendBatch(deliveries.map((delivery) => delivery.event)));
  const timeoutMs = context.sinkTimeoutMs;
  if (timeoutMs === null) return call;
  let timer: unknown;
  let timedOut = false;
  const timeout = new Promise<never>((_, reject) => {
    timer = context.scheduler.setTimeout(() => {
      timedOut = true;
      reject(new SinkTimeoutError(timeoutMs));
    }, timeoutMs);
  });
  try {
    return await Promise.race([call, timeout]);
  } finally {
    context.scheduler.clearTimeout(timer);
    if (timedOut) {
      // The abandoned call may still fail later; say so rather than leave a rejection unhandled.
      call.then(undefined, (error: unknown) => context.report({ phase: "append", error, requestIds: deliveries.map((delivery) => delivery.id.event) }));
    }
  }
}

interface Heartbeat {
  stop(): Promise<void>;
}

/**
 * Extend every lease of the batch each `heartbeatMs` until stopped. A lease
 * the source no longer recognises (it lapsed, an operator quarantined it) is
 * reported once and dropped from later beats.
 */
function startHeartbeat(context: BatchContext, deliveries: readonly Delivery[]): Heartbeat {
  let live = deliveries.map((delivery) => delivery.id);
  let timer: unknown;
  let armed = false;
  let stopped = false;
  let beating: Promise<void> | null = null;

  const arm = () => {
    armed = true;
    timer = context.scheduler.setTimeout(beat, context.heartbeatMs);
  };
  const beat = (): Promise<void> | undefined => {
    armed = false;
    if (stopped) return undefined;
    const ids = live;
    beating = Promise.all(
      ids.map(async (id) => {
        try {
          await context.source.extend(id, { leaseMs: context.leaseMs, now: context.clock() });
          return true;
        } catch (error) {
          context.report({ phase: "extend", error, requestIds: [id.event] });
          return isRetryable(error);
        }
      }),
    ).then((kept) => {
      live = ids.filter((_, index) => kept[index]);
      beating = null;
      if (!stopped) arm();
    });
    return beating;
  };
  arm();
  return {
    async stop() {
      stopped = true;
      if (armed) context.scheduler.clearTimeout(timer);
      armed = false;
      if (beating !== null) await beating;
    },
  };
}
