/**
 * One batch of the forwarder: claim, hand to the sink, settle every claimed
 * event in the source. This is where "never lose, never reorder" is decided.
 *
 * The promises:
 * - An event is acknowledged only when the sink answered `accepted` or
 *   `already_present` for it. Nothing else acknowledges.
 * - A per-event refusal the sink calls permanent (`retryable: false`:
 *   `conflict`, `invalid_event`, ...) is quarantined as `rejected`, for an
 *   operator.
 * - A failure that is not the events' fault is not charged to them. That is
 *   a retryable per-event refusal in an answer (`at_capacity`), and every
 *   failure of a whole call but a typed refusal of the request's input
 *   (`isSinkWide` in `errors.ts`): the sink unavailable, timing out or
 *   overloaded (429, 408, any 5xx, a network failure), misconfigured or
 *   misrouted (401, 403 `forbidden`, 403 `forbidden_namespace` for a
 *   namespace the credentials may not append, 404 `unknown_journal` or a
 *   404 page, a 2xx that is not the API's answer such as a captive portal's
 *   200 HTML page: `invalid_answer`, any error body that is not the API's
 *   JSON), or breaking the `appendBatch` contract (`sink_protocol`). Each
 *   failed send is reported (`error` events, `lastError`). The loop holds the batch and
 *   sends what is left of it again after the backoff (capped by the
 *   policy's `maxMs`), so an outage or a misconfiguration of any length
 *   costs each event one delivery attempt: claiming again would spend a new
 *   attempt each time, and the journal's attempt budget would then
 *   quarantine the events as `attempts_exhausted`. `runOnce` and `drain` do
 *   not wait: they nack with backoff.
 * - One event's poison does not hold the batches behind it for ever. Some of
 *   those whole-call failures are answers that may be one event's doing (a
 *   WAF's page, a server bug on its content: a 500 or 400 page, a 500
 *   `internal`, `invalid_answer`, `sink_protocol`; see
 *   `isUnexplainedAnswer`), unlike a network failure, a timeout, 429, 502,
 *   503, 504, a storage failure the API reports (`backend`, however it comes
 *   and goes) or a refusal of the credentials (401, 403), which are never
 *   split in halves. A batch whose whole call fails that way
 *   `SPLIT_AFTER_FAILURES` (3) times in a row is split in halves, down to
 *   single events, as for a 413; the parts the sink accepts are acknowledged. An event that still fails
 *   alone is charged (nacked with backoff, its attempt counted, so the
 *   attempt budget ends it as `attempts_exhausted`) only when another part
 *   of the same send was accepted, which shows the sink takes events;
 *   otherwise nothing is charged and the batch stays held (and reported), as
 *   in an outage, and the next split waits for as many failures again. A
 *   sink that answers a call of no events but fails every call with events
 *   (a broken deploy) is thus an outage: an empty call shows the sink
 *   answers, not that it takes events. So that a poison event held alone
 *   gets that company, the loop tops a held batch up before each resend: it
 *   claims up to `batchSize` minus the events held, which the journal hands
 *   out only for ordering keys not in flight (per-key order holds: the
 *   events of the poison event's own key wait behind it). A topped-up event
 *   spends one attempt when claimed and then stays in the held batch, so an
 *   outage still costs each event one attempt. A poison event alone with
 *   nothing else to claim is held, uncharged, until other events come.
 * - A whole-batch failure that is a typed refusal of the request's input
 *   (400 `invalid_request` / `invalid_json` / `invalid_event`, a local
 *   `invalid_argument`, a non-retryable journal error other than `backend`
 *   such as a whole-call 409 `conflict`, a 400, 409, 415 or 422 with a code of
 *   the API; see `isRequestRefusal`) is nacked with backoff and the error text, not
 *   quarantined: nothing says which event caused it, and the journal's
 *   attempt budget turns a poison batch into `attempts_exhausted` without
 *   guessing here. A batch too large for the sink (`payload_too_large`) is
 *   split in halves until each part passes; a single event too large on its
 *   own is refused for good (`rejected`).
 * - A refusal of the credentials is waited out, with the batch held and each
 *   failed send reported, never charged nor quarantined: 401, 403 `forbidden`
 *   (no append scope at all), and 403 `forbidden_namespace` (the worker
 *   refuses a whole batch for one event's namespace the token may not append
 *   to: a token with the wrong `append:` scope, a misconfiguration as much as
 *   a wrong token, which a corrected token and a restart of the forwarder
 *   end). A batch of several namespaces refused as `forbidden_namespace` is
 *   sent again one namespace at a time, so the namespaces the token covers
 *   go; a namespace refused on its own waits, held, and its events leave the
 *   batch's room to the others' (top-ups), up to `SCOPE_HOLD_EXTRA` (3)
 *   batches of them.
 * - The loop claims a batch (which spends an attempt of each event) only once
 *   the sink answers a call of no events (`sinkAnswers`), at each start and
 *   after a failed batch, until a check answered or a batch claimed
 *   something: restarts and lapsed leases through an outage spend nothing.
 *   The check is made only while the source has events pending. With none
 *   pending but some in flight (another forwarder's leases, or an earlier
 *   run's that have not run out) the loop claims without it: a claim that
 *   finds nothing spends nothing, so no request is made while those leases
 *   run, and the leases that run out are pending, checked for, at the next
 *   poll. Such a claim finds events only where the journal lapses leases an
 *   earlier run took before the device's clock went back (or another
 *   forwarder gave events back meanwhile); they are sent as a batch whose
 *   sends are their check, held through an outage for that one attempt.
 *   That check never charges anything; a top-up of a held batch
 *   claims without it (the batch's own sends are the check).
 * - A resend answered `accepted` for an event observed longer ago than the
 *   sink's `capacity.retainAcknowledgedMs` is reported as a
 *   `PossibleDuplicateError` (and acknowledged): the sink may have stored,
 *   delivered and pruned the earlier copy, and taken this one as new. The
 *   age is read on the later of the forwarder's clock and the sink's, when
 *   the sink tells it (`serverNow`: an `HttpJournal` reads the `Date` header
 *   of the server's answers), since the sink prunes by its own clock. A
 *   resend is an event of a delivery attempt over 1, or one whose earlier
 *   send in this batch failed with the outcome unknown (`isOutcomeUnknown`:
 *   a network failure, a timeout or an abort, a gateway's 502, 504 or 52x, a
 *   500 without the API's JSON); an answer that says nothing was stored (a
 *   portal's 200 page, 401, 403, 404, 408, 503 `at_capacity`, a typed
 *   journal error) does not make one. The forwarder knows only its own
 *   resends: a sink that retries on its own (an `HttpJournal` with more than
 *   one `retry.attempts`) resends unseen, and unreported.
 * - The sink may have stored part of a failed call: the replay finds it as
 *   `already_present` (the sink is idempotent on request ids).
 * - While the sink has not answered, a heartbeat extends the leases every
 *   `heartbeatMs`, so a slow sink does not cause a redelivery; the heartbeat
 *   is stopped, and its last extension settled, before anything is settled.
 * - A call that times out (`sinkTimeoutMs`) is abandoned: its `signal`
 *   aborts, which cancels an `HttpJournal` request, but a request the sink
 *   already received may still be acted on, and a sink that ignores the
 *   signal may still land the call later. That is harmless for the replay
 *   (the sink answers `already_present`), but should the event meanwhile have
 *   been quarantined and a later event of its key forwarded, the late landing
 *   puts it after that event at the sink; the loop's held batch keeps that
 *   from happening for every failure that is not the event's own. The
 *   timeout is reported once: the abandoned call's own later rejection is
 *   reported only when the abort is not its cause.
 * - A settle call that fails (the source is briefly unavailable) is reported;
 *   the event's lease lapses and it is redelivered, and the sink recognises
 *   it. Per-key order holds because the journal hands out at most one
 *   unfinished event per ordering key at a time, and the caller never claims
 *   while a batch is open.
 */
import { causeChain } from "../cause-chain.js";
import { MAX_LEASE_MS } from "../journal/journal.js";
import type { AckResult, BatchAppendResult, Capacity, ConsumerId, Delivery, DeliveryId, DeliveryMode, UsageEvent, UsageJournal } from "../journal/types.js";
import type { AbortSignalLike } from "../storage/options.js";
import { newAbortController } from "../storage/web.js";
import type { Scheduler } from "../storage/leaser.js";
import type { BackoffPolicy } from "./backoff.js";
import {
  describeError,
  isForbiddenNamespace,
  isOutcomeUnknown,
  isPayloadTooLarge,
  isRetryable,
  isSinkDown,
  isSinkWide,
  isUnexplainedAnswer,
  PossibleDuplicateError,
  SinkProtocolError,
  SinkTimeoutError,
} from "./errors.js";

/**
 * What the forwarder writes to: anything with the journal's `appendBatch` (a
 * `UsageJournal`, an `HttpJournal`). The forwarder passes a `signal` that
 * aborts when it stops waiting for the call (`sinkTimeoutMs`): a sink that
 * honours it (`HttpJournal` cancels its request) leaves no call in flight
 * behind; one that ignores it, like a local journal, is simply not waited for.
 *
 * A sink that is a journal also says what it promises, and the forwarder
 * reads it: `mode` and `capacity.policy` (`createForwarder` refuses a
 * `telemetry_grade` sink, or one whose policy is not `refuse`, for a
 * `billing_grade` source unless told otherwise) and
 * `capacity.retainAcknowledgedMs` (a resend answered `accepted` past that age
 * is reported as a possible duplicate). An `HttpJournal` reports the
 * server's values when made with `HttpJournal.connect`, and whatever it was
 * given when constructed directly. A sink without them is not checked.
 *
 * `appendBatch([])` (no events) must resolve (with `[]`), as the journal's
 * contract says (`UsageJournal.appendBatch` takes 0..1000 events): the loop
 * makes that call to check the sink answers before it claims, at each start
 * and after a failed batch. It should fail only while the sink is down, with
 * an error that says so (one carrying a `code`, an HTTP `status` or a
 * `retryable` flag, or a network `TypeError`: see `isSinkDown`). A sink
 * that fails an empty batch with an untyped error (a plain `Error`) is taken
 * as answering, so the loop still claims, but then a sink down that way
 * costs an attempt at each start and after each failed batch.
 */
export interface ForwarderSink {
  appendBatch(events: readonly UsageEvent[], options?: { readonly signal?: AbortSignalLike }): Promise<BatchAppendResult[]>;
  /** The sink journal's delivery mode (`UsageJournal.mode`), when it is one. */
  readonly mode?: DeliveryMode;
  /** The sink journal's capacity, when it is one; the forwarder reads `retainAcknowledgedMs` and `policy` only. */
  readonly capacity?: Partial<Pick<Capacity, "retainAcknowledgedMs" | "policy">>;
  /**
   * The sink's clock now (epoch ms) as far as it knows it, or null when it
   * does not (`HttpJournal.serverNow`: the `Date` header of the server's
   * answers). The sink forgets a request id `retainAcknowledgedMs` after the
   * event's `observedAt` by its own clock, so the forwarder ages a resend by
   * the later of its clock and this one (plus a second for a `Date` header's
   * resolution): a device clock behind the sink's does not hide a resend the
   * sink may have taken as new. Without it, the forwarder's clock alone.
   */
  serverNow?(): number | null;
}

/** Which step of the forwarder failed. */
export type ForwarderPhase = "claim" | "append" | "ack" | "nack" | "quarantine" | "extend" | "stats" | "lock" | "online" | "internal";

/** How one batch went. Counts are events. */
export interface BatchReport {
  /** Events claimed from the source, a held batch's top-ups included (0: nothing was claimable, or the claim failed). */
  readonly claimed: number;
  /** Acknowledged in the source after the sink accepted them or already had them. */
  readonly forwarded: number;
  /** Of `forwarded`, those the sink already had (a replay). */
  readonly alreadyPresent: number;
  /** Quarantined in the source as `rejected` (a permanent per-event refusal). */
  readonly quarantined: number;
  /** Nacked: a whole-batch failure no event is known to have caused for good, a retryable refusal outside the loop, or what a stopping loop held. */
  readonly retried: number;
  /** Settle calls (ack, nack, quarantine) the source failed, and held events whose lease the source stopped recognising: those events are redelivered when their lease lapses. */
  readonly unsettled: number;
  /** Times what was left of the batch went to the sink again after a failure that was not the events' fault (only the loop holds a batch so). */
  readonly resent: number;
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
  /** Told when a claim returned events, before they go to the sink (a held batch's top-ups too). */
  readonly onClaimed?: (count: number) => void;
  /**
   * Told when a send of a held batch settled events (acknowledged,
   * quarantined or nacked some) and the batch stays open, waiting to send the
   * rest again: the counts settled since the batch began or since last told.
   * What the batch settles as it ends is told by its report only; the
   * report's counts are the batch's whole, what was told included.
   */
  readonly onSettled?: (counts: SettledCounts) => void;
}

/** Events of one batch settled so far, as {@link BatchContext.onSettled} tells them (the counts of {@link BatchReport}). */
export type SettledCounts = Pick<BatchReport, "forwarded" | "alreadyPresent" | "quarantined" | "retried">;

const MAX_NACK_ERROR_CHARS = 2000;
const EMPTY: BatchReport = Object.freeze({ claimed: 0, forwarded: 0, alreadyPresent: 0, quarantined: 0, retried: 0, unsettled: 0, resent: 0, failed: false });

/** The `retryAfterMs` of a nack: the policy's delay for this attempt, clamped to what `nack` takes. */
export function retryDelay(backoff: BackoffPolicy, failures: number): number {
  const delay = backoff.delayMs(failures);
  if (typeof delay !== "number" || !Number.isFinite(delay)) return 1000;
  return Math.min(MAX_LEASE_MS, Math.max(0, Math.round(delay)));
}

/**
 * How the loop keeps a batch while the sink as a whole fails, rather than
 * nack it (see {@link forwardBatch}). `runOnce` and `drain` pass none.
 */
export interface BatchHold {
  /** Whether to go on holding (false once the loop stopped). */
  active(): boolean;
  /**
   * Resolve after `ms`, or earlier when interrupted (the loop stopped or lost
   * its lock, the device came back online). An interruption since the previous
   * wait ended (or since the hold was made) counts too: it ends this wait at
   * once, so one that lands while a send or a settle is in flight is not lost.
   */
  wait(ms: number): Promise<void>;
  /** Told before each wait after a failed send, with when the next send is due (clock ms). */
  waiting(retryAt: number): void;
  /** Told when what is left of the batch goes to the sink again. */
  resending(): void;
}

/** What became of one claimed event at the sink. */
type Outcome =
  /** The sink holds it: acknowledge. */
  | { readonly kind: "held"; readonly status: "accepted" | "already_present" }
  /** The sink refused this event for good (`conflict`, `invalid_event`, too large on its own, ...): quarantine as `rejected`. */
  | { readonly kind: "refused"; readonly error: unknown }
  /** Not this event's fault (the whole call failed for anything but a refusal of its input, or the sink is full for this event): send again later. */
  | { readonly kind: "again"; readonly error: unknown }
  /** The sink refused the whole call's input and no event is known to be the cause: nack, and let the attempt budget decide. */
  | { readonly kind: "failed"; readonly error: unknown }
  /**
   * The call failed with an answer that may be an event's doing (`isUnexplainedAnswer`): `lone` when the call
   * carried this event alone. Resolved by {@link forwardBatch} into `failed` (a lone event, another part of the
   * batch accepted in the same send) or `again`.
   */
  | { readonly kind: "suspect"; readonly error: unknown; readonly lone: boolean };

/** A batch whose whole call failed this many times in a row with an unexplained answer is split, to find the event at fault. */
export const SPLIT_AFTER_FAILURES = 3;

/** How one {@link send} treats an unexplained answer: split the call in halves (`split`), and whether it did. */
interface SendProbe {
  readonly split: boolean;
  splitDone: boolean;
}

/** Counts of one batch as it settles (the mutable side of {@link BatchReport}). */
interface Tally {
  forwarded: number;
  alreadyPresent: number;
  quarantined: number;
  retried: number;
  unsettled: number;
  resent: number;
  failed: boolean;
}

/** Options of {@link forwardBatch}. */
export interface ForwardBatchOptions {
  /**
   * Claim only once the sink answers a call of no events (`sinkAnswers`);
   * while the source says nothing is pending, ask the sink nothing (see
   * `forwardBatch`). The loop asks for it at each start and after a failed
   * batch.
   */
  readonly checkSink?: boolean;
  /** Told when that check was made and the sink answered, before the claim (whatever the claim then finds). */
  readonly onSinkAnswered?: () => void;
}

/**
 * Forward one batch. Never rejects: every failure goes to `context.report`
 * and into the report's counts.
 *
 * With a `hold` (the loop), a failure that is not the events' fault (any
 * failure of the whole call but a typed refusal of its input, see
 * `isSinkWide`, or a per-event `at_capacity`) keeps the batch: what is left
 * of it is sent again after the backoff, its leases extended meanwhile,
 * until the sink takes it or the loop stops. A claim
 * counts a delivery attempt, so nacking and claiming again through an outage
 * would spend the events' attempt budget and quarantine them as
 * `attempts_exhausted` for no fault of theirs; a held batch spends one
 * attempt whatever the outage's length. When the loop stops, what is left is
 * nacked to be claimable at once. Without a hold, such failures are nacked
 * with backoff.
 *
 * A batch the sink finds too large (`payload_too_large`, HTTP 413) is split
 * in halves and each half sent on its own, down to single events; a single
 * event the sink finds too large is quarantined as `rejected`. A held batch
 * whose whole call failed `SPLIT_AFTER_FAILURES` times in a row with an
 * answer that may be one event's doing is split the same way (see the module
 * comment).
 */
export async function forwardBatch(context: BatchContext, hold: BatchHold | null = null, options: ForwardBatchOptions = {}): Promise<BatchReport> {
  // Read before the source's stats: a lease they count in flight (unexpired when read) has not run out at this `now`
  // either, so a claim at it after `leased` does not take it (see `claimOutlook`).
  let now = context.clock();
  // Claiming spends a delivery attempt: while the sink does not answer, nothing is claimed. No request is made while
  // nothing is pending. With nothing in flight either there is nothing to claim (an idle outbox, or one that just
  // went offline, asks the sink nothing). With leases out (another forwarder's, an earlier run's not run out yet)
  // the claim comes first: one that finds nothing spends nothing, and asks the sink nothing. It finds events only
  // where the journal lapses leases at it (the clock went back since an earlier run took them): those go to the
  // sink as a batch, whose sends are their check, as a top-up's are, and an outage holds them for that one attempt.
  // Leases that run out are pending at the next read, and claimed only once the sink answers.
  if (options.checkSink === true) {
    const outlook = await claimOutlook(context);
    if (outlook === "nothing") return EMPTY;
    if (outlook !== "leased") {
      if (!(await sinkAnswers(context))) return { ...EMPTY, failed: true };
      options.onSinkAnswered?.();
      now = context.clock();
    }
  }
  let deliveries: Delivery[];
  try {
    deliveries = await context.source.claim(context.consumer, { maxEvents: context.batchSize, leaseMs: context.leaseMs, now });
  } catch (error) {
    context.report({ phase: "claim", error, requestIds: [] });
    return { ...EMPTY, failed: true };
  }
  if (deliveries.length === 0) return EMPTY;
  context.onClaimed?.(deliveries.length);

  const tally: Tally = { forwarded: 0, alreadyPresent: 0, quarantined: 0, retried: 0, unsettled: 0, resent: 0, failed: false };
  // Events claimed by this batch, top-ups included.
  let claimed = deliveries.length;
  let outstanding = deliveries;
  let failures = 0;
  // Whether a held event's lease lapsed (or the source stopped recognising it): the batch then claims no more.
  let lapsed = false;
  // Request ids held because the sink's credentials may not append their namespace (403 `forbidden_namespace`).
  let waitingForScope = new Set<string>();
  // Sends in a row whose events all failed with an unexplained answer (see `isUnexplainedAnswer`) and none was accepted.
  let unexplained = 0;
  // Request ids of this batch a failed send may have stored (the outcome of the call is unknown): a later send of them is a resend.
  const sentBefore = new Set<string>();
  // What `onSettled` was told so far; the report counts the whole batch.
  const told: { -readonly [K in keyof SettledCounts]: number } = { forwarded: 0, alreadyPresent: 0, quarantined: 0, retried: 0 };
  const tellSettled = () => {
    const counts: SettledCounts = {
      forwarded: tally.forwarded - told.forwarded,
      alreadyPresent: tally.alreadyPresent - told.alreadyPresent,
      quarantined: tally.quarantined - told.quarantined,
      retried: tally.retried - told.retried,
    };
    if (counts.forwarded === 0 && counts.quarantined === 0 && counts.retried === 0) return;
    told.forwarded = tally.forwarded;
    told.alreadyPresent = tally.alreadyPresent;
    told.quarantined = tally.quarantined;
    told.retried = tally.retried;
    context.onSettled?.(counts);
  };
  // The heartbeat keeps the leases while the sink has the events and while a held batch waits;
  // it is paused, its extension in flight settled, whenever events are settled.
  const heartbeat = startHeartbeat(context, deliveries);
  try {
    for (;;) {
      const probe: SendProbe = { split: unexplained >= SPLIT_AFTER_FAILURES - 1, splitDone: false };
      // An event that failed alone, after as many unexplained failures in a row as SPLIT_AFTER_FAILURES, is charged
      // only when another part of the same send was accepted: that shows the sink takes events (see `resolveSuspects`).
      const outcomes = resolveSuspects(await send(context, outstanding, sentBefore, probe));
      // Held for a namespace the sink's credentials may not append: they wait for a corrected token, and do not
      // take the room of the events the credentials do cover (see `topUp`).
      waitingForScope = new Set(outstanding.filter((_, i) => outcomes[i]!.kind === "again" && isForbiddenNamespace((outcomes[i] as { error: unknown }).error)).map((delivery) => delivery.id.event));
      // A split that found no part the sink takes proves nothing: the next split waits for as many failures again.
      unexplained = outcomes.some((outcome) => outcome.kind === "again" && isUnexplainedAnswer(outcome.error)) && !probe.splitDone ? unexplained + 1 : 0;
      await heartbeat.pause();
      const again = await settle(context, outstanding, outcomes, tally, hold === null ? "nack" : hold.active() ? "keep" : "give_back");
      if (again.length === 0 || hold === null) break;
      // Asked again after the settle: the loop may have stopped (or lost its lock) while it ran, and then there is nothing to wait for.
      if (hold.active()) {
        // The batch stays open, for as long as the sink takes to take the rest: what it settled counts now.
        tellSettled();
        heartbeat.resume(again.map((delivery) => delivery.id));
        failures += 1;
        const delay = retryDelay(context.backoff, failures);
        hold.waiting(context.clock() + delay);
        await hold.wait(delay);
        await heartbeat.pause();
        // Before a top-up claims more, the held leases are confirmed ours: one that lapsed unseen (the wait may end
        // before the next beat finds it) would be handed out again by that claim, an attempt more while the sink
        // may still be down. A lapse found here stops the top-ups, as one the heartbeat found does.
        if (!lapsed && hold.active()) await heartbeat.confirm(again.map((delivery) => delivery.id));
      }
      // An event whose lease the source no longer recognises (an operator quarantined it, say) is not this batch's any more.
      const lost = heartbeat.lost();
      outstanding = again.filter((delivery) => !lost.has(deliveryKey(delivery.id)));
      tally.unsettled += again.length - outstanding.length;
      // Lost while the sink was failing (the leases lapsed: a device asleep, timers throttled): the next claim of
      // them spends an attempt, so the loop backs off and claims again only once the sink answers.
      if (outstanding.length < again.length) {
        lapsed = true;
        tally.failed = true;
      }
      if (outstanding.length === 0 || !hold.active()) {
        // The loop stopped, or another forwarder took the lock: give the events back at once, for whoever forwards next.
        await nackAll(context, outstanding, "the forwarder stopped (or lost its lock) while the sink was failing", tally, 0);
        if (outstanding.length > 0) tally.failed = true;
        break;
      }
      // Top the held batch up with events of other ordering keys (the journal hands out none of a key in flight), so
      // that an event the sink fails alone is sent with company, whose acceptance charges it (see the module
      // comment). Not once a lease lapsed: what lapsed would be claimed again, an attempt more each, while the sink
      // may still be down (the next batch claims only once it answers).
      if (!lapsed) {
        const scoped = outstanding.filter((delivery) => waitingForScope.has(delivery.id.event)).length;
        const added = await topUp(context, outstanding.length - Math.min(scoped, SCOPE_HOLD_EXTRA * context.batchSize));
        if (added.length > 0) {
          claimed += added.length;
          context.onClaimed?.(added.length);
          // A held event handed out again: its lease lapsed before the heartbeat saw it (timers asleep). The new
          // delivery replaces the old one, which is not this batch's any more, and the batch claims no more.
          const fresh = new Set(added.map((delivery) => delivery.id.event));
          const kept = outstanding.filter((delivery) => !fresh.has(delivery.id.event));
          if (kept.length < outstanding.length) {
            lapsed = true;
            tally.failed = true;
            tally.unsettled += outstanding.length - kept.length;
          }
          outstanding = [...kept, ...added];
        }
      }
      heartbeat.resume(outstanding.map((delivery) => delivery.id));
      tally.resent += 1;
      hold.resending();
    }
  } finally {
    await heartbeat.stop();
  }
  return { claimed, ...tally };
}

/**
 * How many batches' worth of events a held batch may keep, beyond its own
 * size, while they wait for credentials that may append their namespace
 * (403 `forbidden_namespace`): they do not count against the top-ups, so the
 * namespaces the credentials cover still go, up to this many such events in
 * the oldest positions. Past it they hold the batch's room too, until the
 * credentials are corrected (reported on every send).
 */
const SCOPE_HOLD_EXTRA = 3;

/**
 * Claim up to `batchSize - held` more events for a held batch (none when it
 * is full); `held` leaves out the events waiting for credentials, up to
 * {@link SCOPE_HOLD_EXTRA} batches of them. A failed claim is reported and
 * adds nothing: the held batch goes on as it is.
 */
async function topUp(context: BatchContext, held: number): Promise<Delivery[]> {
  const room = context.batchSize - held;
  if (room <= 0) return [];
  try {
    return await context.source.claim(context.consumer, { maxEvents: room, leaseMs: context.leaseMs, now: context.clock() });
  } catch (error) {
    context.report({ phase: "claim", error, requestIds: [] });
    return [];
  }
}

/** A key for one delivery (an event's request id and its attempt): a lapsed event claimed again is a new delivery. */
function deliveryKey(id: DeliveryId): string {
  return `${id.attempt}:${id.event}`;
}

/**
 * Send `deliveries` to the sink; one outcome per delivery, in order. Every
 * failure is reported here, and so is a resend that may have been stored
 * twice (see {@link checkResend}). Never rejects. A whole call that fails
 * with its outcome unknown (`isOutcomeUnknown`) adds its request ids to
 * `sentBefore`. With `probe.split`, a call that fails with an unexplained
 * answer (`isUnexplainedAnswer`) is split in halves, down to single events.
 */
async function send(context: BatchContext, deliveries: readonly Delivery[], sentBefore: Set<string>, probe: SendProbe = { split: false, splitDone: false }): Promise<Outcome[]> {
  let results: BatchAppendResult[];
  try {
    results = await appendWithTimeout(context, deliveries);
    if (!Array.isArray(results) || results.length !== deliveries.length) {
      throw new SinkProtocolError(`${deliveries.length} events sent, ${Array.isArray(results) ? results.length : "no array of"} results received`);
    }
  } catch (error) {
    context.report({ phase: "append", error, requestIds: deliveries.map((delivery) => delivery.id.event) });
    if (isPayloadTooLarge(error)) {
      // Too large: halves until each part passes, so the other events are not held back with it, and the
      // event refused alone is refused for good.
      if (deliveries.length === 1) return [{ kind: "refused", error }];
      return sendHalves(context, deliveries, sentBefore, probe);
    }
    if (isForbiddenNamespace(error)) {
      // The credentials may not append a namespace of the call (the worker refuses the whole call for it): a fault
      // of the sink's credentials (a token with the wrong `append:` scope), not of the events, so waited out as a
      // 403 `forbidden` is, the batch held and nothing charged. The namespaces the credentials do cover still go:
      // the call is sent again one namespace at a time, and a namespace refused on its own waits.
      const namespaces = byNamespace(deliveries);
      if (namespaces.length > 1) return sendParts(context, deliveries, namespaces, sentBefore, probe);
      return deliveries.map(() => ({ kind: "again", error }));
    }
    // Only a failure that leaves unknown whether the sink stored the events makes a later send of them a resend.
    if (isOutcomeUnknown(error)) for (const delivery of deliveries) sentBefore.add(delivery.id.event);
    if (isUnexplainedAnswer(error)) {
      // An answer that may be one event's doing (a WAF's page, a server bug on its content), after as many failures
      // in a row as SPLIT_AFTER_FAILURES: halves, so that the events the sink takes go, and the one at fault shows.
      if (probe.split && deliveries.length > 1) {
        probe.splitDone = true;
        return sendHalves(context, deliveries, sentBefore, probe);
      }
      return deliveries.map(() => ({ kind: "suspect", error, lone: deliveries.length === 1 }));
    }
    const kind = isSinkWide(error) ? "again" : "failed";
    return deliveries.map(() => ({ kind, error }));
  }
  const retainMs = sinkRetention(context.sink);
  return deliveries.map((delivery, index): Outcome => {
    const result = results[index];
    if (result !== undefined && (result.status === "accepted" || result.status === "already_present")) {
      if (result.status === "accepted") checkResend(context, delivery, sentBefore.has(delivery.id.event), retainMs);
      return { kind: "held", status: result.status };
    }
    const error: unknown = result !== undefined && result.status === "rejected" ? result.error : new SinkProtocolError(`unknown result ${describeResult(result)}`);
    context.report({ phase: "append", error, requestIds: [delivery.id.event] });
    return isRetryable(error) ? { kind: "again", error } : { kind: "refused", error };
  });
}

/** The indexes of `deliveries` grouped by the namespace of their event, in order of first appearance. */
function byNamespace(deliveries: readonly Delivery[]): number[][] {
  const groups = new Map<string, number[]>();
  deliveries.forEach((delivery, index) => {
    const namespace = delivery.event.orderingKey.namespace;
    const group = groups.get(namespace);
    if (group === undefined) groups.set(namespace, [index]);
    else group.push(index);
  });
  return [...groups.values()];
}

/**
 * {@link send} for each part of `deliveries` (`parts`: lists of their indexes,
 * together each index once), one after the other; the outcomes in the order of
 * `deliveries`. A part keeps the order of its events, so an ordering key's
 * events (all of one namespace) go in order.
 */
async function sendParts(context: BatchContext, deliveries: readonly Delivery[], parts: readonly (readonly number[])[], sentBefore: Set<string>, probe: SendProbe): Promise<Outcome[]> {
  const outcomes: Outcome[] = new Array<Outcome>(deliveries.length);
  for (const part of parts) {
    const sent = await send(context, part.map((index) => deliveries[index]!), sentBefore, probe);
    part.forEach((index, at) => {
      outcomes[index] = sent[at]!;
    });
  }
  return outcomes;
}

/** {@link send} for each half of `deliveries`, one after the other. */
async function sendHalves(context: BatchContext, deliveries: readonly Delivery[], sentBefore: Set<string>, probe: SendProbe): Promise<Outcome[]> {
  const half = Math.ceil(deliveries.length / 2);
  return [...(await send(context, deliveries.slice(0, half), sentBefore, probe)), ...(await send(context, deliveries.slice(half), sentBefore, probe))];
}

/**
 * Settle the `suspect` outcomes of one send: an event the sink failed with an
 * unexplained answer when sent alone is charged (`failed`: nacked with
 * backoff, its attempt counted) when another part of the same send was
 * accepted, which shows the sink takes events; any other is `again` (held,
 * as in an outage). That the sink answers a call of no events shows nothing
 * of the kind: a sink broken for every event may still answer it.
 */
function resolveSuspects(outcomes: readonly Outcome[]): Outcome[] {
  const sinkWorks = outcomes.some((outcome) => outcome.kind === "held");
  return outcomes.map((outcome): Outcome => {
    if (outcome.kind !== "suspect") return outcome;
    return { kind: sinkWorks && outcome.lone ? "failed" : "again", error: outcome.error };
  });
}

/**
 * What the source says the consumer could claim, before the loop asks the
 * sink (a failed read says nothing: `unknown`, and the loop checks the sink
 * and claims as usual):
 * - `nothing`: no event pending and none in flight;
 * - `leased`: none pending, some in flight (their leases unexpired when
 *   read). A claim at a `now` read before this finds something only where
 *   the journal lapses a lease at it although it has not run out: leases an
 *   earlier run took (a reloaded page, a closed tab) while the device's
 *   clock was ahead, which a claim lapses at once when they were claimed
 *   more than `CLOCK_BACK_TOLERANCE_MS` after its `now` (the clock went back
 *   since), and events another forwarder gave back meanwhile. Leases of
 *   another forwarder (a second tab without the lock) keep running, and
 *   leases that run out are counted as pending by the next read;
 * - `pending`: events pending: claimable now, or waiting behind an event of
 *   their ordering key in flight, or for a nack's `retryAfterMs`.
 */
async function claimOutlook(context: BatchContext): Promise<"nothing" | "leased" | "pending" | "unknown"> {
  try {
    const stats = await context.source.stats(context.consumer);
    if (stats.pending > 0) return "pending";
    return stats.inFlight > 0 ? "leased" : "nothing";
  } catch {
    return "unknown";
  }
}

/**
 * Whether the sink answers, checked before a claim: an `appendBatch` of no
 * events, which journals and leases nothing (an `HttpJournal` still sends
 * its request, through the same route, credentials and proxies as a real
 * send; the isostore worker runs it as a write transaction that appends
 * nothing). It answers when the call resolves, or fails with an error that
 * does not say the sink is down (`isSinkDown`: a typed refusal of the input,
 * or an untyped error such as a custom sink's plain `Error` for an empty
 * batch): the loop then claims, and the sends' failures are settled by the
 * usual rules. A failure that says the sink is down (a network failure, a
 * timeout, 429, a 5xx, `backend`, refused credentials, a portal's page) is
 * reported and means no. Only a claim depends on it: it never charges an
 * event.
 */
export async function sinkAnswers(context: BatchContext): Promise<boolean> {
  try {
    await appendWithTimeout(context, []);
    return true;
  } catch (error) {
    if (!isSinkDown(error)) return true;
    context.report({ phase: "append", error, requestIds: [] });
    return false;
  }
}

/** The sink's `capacity.retainAcknowledgedMs` when it reports a usable one, else null. */
function sinkRetention(sink: ForwarderSink): number | null {
  try {
    const retain = sink.capacity?.retainAcknowledgedMs;
    return typeof retain === "number" && Number.isFinite(retain) && retain >= 0 ? retain : null;
  } catch {
    return null;
  }
}

/**
 * How far the sink's clock may be ahead of what `serverNow()` says: an
 * `HttpJournal` reads it off a `Date` header, which is truncated to the second.
 */
const SINK_CLOCK_RESOLUTION_MS = 1000;

/**
 * The latest the sink's clock may read now, by its own account
 * (`serverNow()` plus {@link SINK_CLOCK_RESOLUTION_MS}), or null when it tells
 * nothing usable.
 */
function sinkClock(sink: ForwarderSink): number | null {
  try {
    if (typeof sink.serverNow !== "function") return null;
    const now = sink.serverNow();
    return typeof now === "number" && Number.isFinite(now) ? now + SINK_CLOCK_RESOLUTION_MS : null;
  } catch {
    return null;
  }
}

/**
 * Report a {@link PossibleDuplicateError} when `delivery` was sent before (a
 * delivery attempt over 1, or `sentEarlier` in this batch) and the sink
 * answered `accepted` although the event is older than the sink's retention
 * window: the sink forgets a request id `retainMs` after its `observedAt`, so
 * the earlier copy may have been stored and pruned, and this one stored anew.
 * The age is read on the later of the forwarder's clock and the sink's, as
 * the sink tells it (`ForwarderSink.serverNow`, taken at its latest possible
 * reading): the sink prunes by its own clock, which may be ahead of the
 * device's; when either clock says the window has passed, it is reported.
 */
function checkResend(context: BatchContext, delivery: Delivery, sentEarlier: boolean, retainMs: number | null): void {
  if (retainMs === null || (delivery.id.attempt <= 1 && !sentEarlier)) return;
  const now = context.clock();
  const sinkNow = sinkClock(context.sink);
  const observedAt = delivery.event.observedAt;
  if (Math.max(now, sinkNow ?? now) - observedAt < retainMs) return;
  const error = new PossibleDuplicateError({ requestId: delivery.id.event, observedAt, answeredAt: now, sinkNow, retainAcknowledgedMs: retainMs, attempt: delivery.id.attempt });
  context.report({ phase: "append", error, requestIds: [delivery.id.event] });
}

/**
 * Settle what the sink decided: acknowledge what it holds (one `ackBatch`),
 * quarantine what it refused for good, nack whole-batch failures. Returns the
 * deliveries to send again: those with an `again` outcome when `again` is
 * `keep` (a running loop holds them). Otherwise they are nacked: with backoff
 * (`nack`: `runOnce`, `drain`), or claimable at once (`give_back`: the loop
 * stopped or lost its lock while they were out, so whoever forwards next
 * takes them now).
 */
async function settle(
  context: BatchContext,
  deliveries: readonly Delivery[],
  outcomes: readonly Outcome[],
  tally: Tally,
  again: "keep" | "nack" | "give_back",
): Promise<Delivery[]> {
  const keep = again === "keep";
  const held: { delivery: Delivery; status: "accepted" | "already_present" }[] = [];
  const kept: Delivery[] = [];
  const settling: Promise<void>[] = [];
  deliveries.forEach((delivery, index) => {
    const outcome = outcomes[index]!;
    switch (outcome.kind) {
      case "held":
        held.push({ delivery, status: outcome.status });
        return;
      case "refused":
        settling.push(
          settleCall(context, "quarantine", delivery.id, () => context.source.quarantine(delivery.id, "rejected")).then((ok) => {
            if (ok) tally.quarantined += 1;
            else tally.unsettled += 1;
          }),
        );
        return;
      case "again":
        if (keep) {
          kept.push(delivery);
          return;
        }
        settling.push(nackAll(context, [delivery], describeError(outcome.error), tally, again === "give_back" ? 0 : null));
        tally.failed = true;
        return;
      case "failed":
        settling.push(nackAll(context, [delivery], describeError(outcome.error), tally, null));
        tally.failed = true;
        return;
    }
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
        tally.forwarded += 1;
        if (status === "already_present") tally.alreadyPresent += 1;
        return;
      }
      tally.unsettled += 1;
      if (outcome && !outcome.ok) context.report({ phase: "ack", error: outcome.error, requestIds: [delivery.id.event] });
    });
  }
  await Promise.all(settling);
  return kept;
}

function describeResult(result: unknown): string {
  try {
    return JSON.stringify(result) ?? String(result);
  } catch {
    return String(result);
  }
}

async function settleCall(context: BatchContext, phase: "ack" | "nack" | "quarantine", id: DeliveryId, call: () => Promise<void>): Promise<boolean> {
  try {
    await call();
    return true;
  } catch (error) {
    context.report({ phase, error, requestIds: [id.event] });
    return false;
  }
}

/**
 * Nack `deliveries` with `text`, claimable again after `retryAfterMs` (null:
 * the backoff's delay for the event's attempt), counting each in `retried`
 * or, when the source fails the call, in `unsettled`.
 */
async function nackAll(context: BatchContext, deliveries: readonly Delivery[], text: string, tally: Tally, retryAfterMs: number | null): Promise<void> {
  const error = text.slice(0, MAX_NACK_ERROR_CHARS);
  await Promise.all(
    deliveries.map(async ({ id }) => {
      const delay = retryAfterMs ?? retryDelay(context.backoff, id.attempt);
      if (await settleCall(context, "nack", id, () => context.source.nack(id, { retryAfterMs: delay, error, now: context.clock() }))) tally.retried += 1;
      else tally.unsettled += 1;
    }),
  );
}

async function appendWithTimeout(context: BatchContext, deliveries: readonly Delivery[]): Promise<BatchAppendResult[]> {
  const timeoutMs = context.sinkTimeoutMs;
  const controller = timeoutMs === null ? null : newAbortController();
  const events = deliveries.map((delivery) => delivery.event);
  const call = Promise.resolve().then(() => (controller === null ? context.sink.appendBatch(events) : context.sink.appendBatch(events, { signal: controller.signal })));
  if (timeoutMs === null || controller === null) return call;
  let timer: unknown;
  // Set when the call timed out: the abort reason, also what the caller is told.
  let timedOut = null as SinkTimeoutError | null;
  const timeout = new Promise<never>((_, reject) => {
    timer = context.scheduler.setTimeout(() => {
      const error = new SinkTimeoutError(timeoutMs);
      timedOut = error;
      controller.abort(error);
      reject(error);
    }, timeoutMs);
  });
  try {
    return await Promise.race([call, timeout]);
  } finally {
    context.scheduler.clearTimeout(timer);
    const reason = timedOut;
    if (reason !== null) {
      // The abandoned call may still fail later; say so rather than leave a rejection unhandled, unless it
      // fails because of the abort itself (an `HttpJournal`'s "abandoned by the caller"): the timeout was
      // reported already, and a second, vaguer error would replace it as `lastError`.
      call.then(undefined, (error: unknown) => {
        if (!causeChain(error).includes(reason)) context.report({ phase: "append", error, requestIds: deliveries.map((delivery) => delivery.id.event) });
      });
    }
  }
}

interface Heartbeat {
  /** Let an extension in flight settle and hold back later ones until {@link resume} (one that fell due meanwhile runs then). */
  pause(): Promise<void>;
  /** Beat again, for `ids` only (the others were settled). */
  resume(ids: readonly DeliveryId[]): void;
  stop(): Promise<void>;
  /** Deliveries (`deliveryKey`) whose lease the source refused to extend for good (it no longer recognises the delivery). */
  lost(): ReadonlySet<string>;
  /**
   * Extend the leases of `ids` now, paused or not, so that {@link lost} says
   * which lapsed unseen (a device asleep, timers throttled): what a held
   * batch checks before it claims more.
   */
  confirm(ids: readonly DeliveryId[]): Promise<void>;
}

/**
 * Extend every lease of the batch each `heartbeatMs` until stopped, on one
 * schedule for the whole batch (pausing does not move it). A lease the
 * source no longer recognises (it lapsed, an operator quarantined it) is
 * reported once and dropped from later beats.
 */
function startHeartbeat(context: BatchContext, deliveries: readonly Delivery[]): Heartbeat {
  let live: readonly DeliveryId[] = deliveries.map((delivery) => delivery.id);
  const lost = new Set<string>();
  let timer: unknown;
  let armed = false;
  let stopped = false;
  let paused = false;
  let due = false;
  let beating: Promise<void> | null = null;

  const arm = () => {
    armed = true;
    timer = context.scheduler.setTimeout(fire, context.heartbeatMs);
  };
  const fire = (): Promise<void> | undefined => {
    armed = false;
    if (stopped) return undefined;
    if (paused) {
      due = true;
      return undefined;
    }
    return beat();
  };
  const beat = (): Promise<void> => {
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
      ids.forEach((id, index) => {
        if (!kept[index]) lost.add(deliveryKey(id));
      });
      live = live.filter((id) => !lost.has(deliveryKey(id)));
      beating = null;
      // A beat asked for out of schedule (`confirm`) leaves a timer already armed as it is.
      if (!stopped && !armed) arm();
    });
    return beating;
  };
  arm();
  return {
    async pause() {
      paused = true;
      if (beating !== null) await beating;
    },
    resume(ids) {
      live = ids.filter((id) => !lost.has(deliveryKey(id)));
      paused = false;
      if (due && !stopped) {
        due = false;
        void beat();
      }
    },
    async stop() {
      stopped = true;
      if (armed) context.scheduler.clearTimeout(timer);
      armed = false;
      if (beating !== null) await beating;
    },
    lost: () => lost,
    async confirm(ids) {
      if (beating !== null) await beating;
      if (stopped) return;
      live = ids.filter((id) => !lost.has(deliveryKey(id)));
      due = false;
      await beat();
    },
  };
}
