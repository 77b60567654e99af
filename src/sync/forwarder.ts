/**
 * `createForwarder`: drain one usage journal into another, e.g. a browser's
 * IndexedDB journal into the edge's journal over HTTP, while the device goes
 * offline and back, tabs open and close, and the edge is slow or refuses.
 *
 * The promises (the batch rules are in `batch.ts`):
 * - Every claimed event ends acknowledged after the sink holds it, or
 *   quarantined as `rejected` after a permanent refusal of that event. An
 *   outage or a misconfiguration of the sink (unavailable, timing out, full,
 *   refusing the credentials: 401, 403 `forbidden`, or 403
 *   `forbidden_namespace` for a namespace the token's `append:` scopes miss;
 *   answering 404, 5xx or something that is not the API's answer) is waited
 *   out by the loop with the batch held and reported at each send: it costs
 *   each event one delivery attempt, whatever its length. Only a batch whose input the sink refuses (a typed
 *   400) with no event to blame is nacked and redelivered, and the journal's
 *   attempt budget quarantines a poison batch as `attempts_exhausted` in the
 *   end (see `batch.ts`).
 * - A sink is only as durable as it says: a `billing_grade` source is not
 *   drained into a `telemetry_grade` sink, nor one whose `capacity.policy`
 *   is not `refuse` (both may lose what they accepted) unless
 *   `allowTelemetrySink` says so, since an event acknowledged here is gone
 *   from the source's outbox.
 * - The loop claims (which spends a delivery attempt) only once the sink
 *   answers a call of no events: at each start and after a failed batch, so
 *   restarts and lapsed leases through an outage spend no attempts. That
 *   check never charges an event, and is made only while events are pending:
 *   with none pending, the loop claims first (a claim that finds nothing
 *   spends nothing), so a forwarder whose events another one leases (a
 *   second tab without the lock) asks the sink nothing while those leases
 *   run; leases that run out are pending, and checked for, at the next poll
 *   (see `batch.ts`). A held batch is topped up with events of
 *   other ordering keys before each resend, so an event the sink fails alone
 *   is sent with others, whose acceptance charges it (see `batch.ts`).
 * - Exactly once at the sink needs its retention window: the sink knows a
 *   request id for `capacity.retainAcknowledgedMs` after its `observedAt`,
 *   and a resend after that is stored as a new event. So the sink's window
 *   must exceed the longest time an event can wait in the source plus its
 *   resends (an offline device's time offline included); a resend answered
 *   `accepted` past it is reported as a `PossibleDuplicateError`.
 * - Per-key order at the sink is the source's: one batch at a time, and a
 *   batch holds at most one event per ordering key (the journal's claim).
 * - The loop never dies: every failure is an `error` event and `lastError`;
 *   a listener that throws is reported and ignored.
 * - Timers go through the injected scheduler and time through the injected
 *   clock, so tests run the loop on virtual time.
 */
import { InvalidArgumentError } from "../journal/errors.js";
import { parseConsumerId } from "../journal/event.js";
import { MAX_BATCH_EVENTS, MAX_LEASE_MS } from "../journal/journal.js";
import type { ConsumerId, UsageJournal } from "../journal/types.js";
import { globalScheduler, type Scheduler } from "../storage/leaser.js";
import type { AbortSignalLike } from "../storage/options.js";
import { exponentialBackoff, isBackoffPolicy, type BackoffPolicy, type ExponentialBackoffOptions } from "./backoff.js";
import {
  forwardBatch,
  retryDelay,
  type BatchContext,
  type BatchFailure,
  type BatchHold,
  type BatchReport,
  type ForwardBatchOptions,
  type ForwarderPhase,
  type ForwarderSink,
  type SettledCounts,
} from "./batch.js";
import { errorCode, errorMessage, isRetryable } from "./errors.js";
import { ForwarderEvents, reportListenerError, type ForwarderEvent, type ForwarderListener, type ForwarderListenerOptions } from "./events.js";
import { browserLocks, type LockManagerLike } from "./lock.js";
import { alwaysOnline, type OnlineSource } from "./online.js";

/** Default `batchSize`. */
export const DEFAULT_BATCH_SIZE = 100;
/** Default `leaseMs` (30 s). */
export const DEFAULT_FORWARDER_LEASE_MS = 30_000;
/** Default `pollIntervalMs` (5 s). */
export const DEFAULT_POLL_INTERVAL_MS = 5_000;
/** Default `sinkTimeoutMs` (60 s). */
export const DEFAULT_SINK_TIMEOUT_MS = 60_000;

/**
 * Where the forwarder is:
 * - `stopped`: not started, or stopped;
 * - `standby`: started, waiting for the lock another forwarder (tab) holds;
 * - `offline`: started, paused until the online source says online;
 * - `forwarding`: a batch is in flight, or more is claimable right away;
 * - `idle`: nothing was claimable; polling every `pollIntervalMs`;
 * - `backing_off`: the last batch failed; retrying at `nextRetryAt`.
 */
export type ForwarderState = "idle" | "forwarding" | "backing_off" | "offline" | "standby" | "stopped";

/** A failure, as `error` events and `lastError` carry it. */
export interface ForwarderFailure {
  readonly phase: ForwarderPhase;
  /** The error as thrown or as the sink returned it. */
  readonly error: unknown;
  /** Its stable code (`at_capacity`, `conflict`, `sink_timeout`, ...) or null. */
  readonly code: string | null;
  readonly message: string;
  /** Whether trying again may help. */
  readonly retryable: boolean;
  /** The request ids concerned (empty when the failure is not about events). */
  readonly requestIds: readonly string[];
  /** Clock reading when it happened. */
  readonly at: number;
}

/** A snapshot of the forwarder: the detail of `state` and `progress` events. */
export interface ForwarderProgress {
  readonly state: ForwarderState;
  /**
   * Events acknowledged after the sink held them, since creation. Counted as
   * each send settles: a batch held open (for a namespace the token may not
   * append, say, while top-ups go through it) counts what it forwarded at
   * once, with a `progress` event, not when it ends.
   */
  readonly forwarded: number;
  /** Events quarantined as `rejected`, since creation (counted as `forwarded` is). */
  readonly quarantined: number;
  /** Nacks, since creation (counted as `forwarded` is). */
  readonly retried: number;
  /** Batches that claimed something, since creation, each counted at its first claim. */
  readonly batches: number;
  /** `source.stats(consumer).pending` after the latest batch, or the latest send of a held batch that settled events; null before the first or if it failed. */
  readonly pending: number | null;
  /**
   * `source.stats(consumer).quarantined`, read with `pending`: every event of
   * this consumer set aside in the source, whatever the reason (`rejected` by
   * the sink, `attempts_exhausted` at a claim, an operator's), where
   * `quarantined` counts only this forwarder's `rejected` ones. Null before
   * the first read or if it failed.
   */
  readonly quarantinedInSource: number | null;
  /** The latest failure, or null. */
  readonly lastError: ForwarderFailure | null;
  /** When the loop tries again after a failure (clock ms); null unless `backing_off`. */
  readonly nextRetryAt: number | null;
  /** Failed batches, and failed sends of a held batch, in a row (resets after a batch without failure). */
  readonly consecutiveFailures: number;
}

/** What `drain` reports: the sum of its batches. */
export interface DrainReport extends BatchReport {
  readonly batches: number;
}

/** The events a forwarder dispatches, by type, with the type of their `detail`. */
export interface ForwarderEventMap {
  /** The state changed. */
  state: ForwarderProgress;
  /**
   * A batch ended (or an idle poll refreshed `pending`), a held batch waits to
   * send again, or a send of a held batch settled events (the totals moved;
   * `pending` is read when a batch ends and after each such send).
   */
  progress: ForwarderProgress;
  /** One batch that claimed something, or failed. */
  batch: BatchReport;
  /** Something failed. Also stored as `progress.lastError`. */
  error: ForwarderFailure;
}

/** The single-forwarder lock: a name, and optionally the manager (default `navigator.locks`). */
export interface ForwarderLockOptions {
  /** The Web Locks name shared by every forwarder that must not run at the same time (one per origin: per source and consumer). */
  readonly name: string;
  /** Default: the platform's `navigator.locks`; required where there is none. */
  readonly manager?: LockManagerLike;
}

/** Options of {@link createForwarder}. */
export interface ForwarderOptions {
  /** The journal to drain. */
  readonly source: UsageJournal;
  /** The source consumer the forwarder claims as (a consumer name). */
  readonly consumer: ConsumerId | string;
  /**
   * Where events go; its `appendBatch` must be idempotent on request ids
   * (every `UsageJournal` is), and only is within its retention window
   * (`capacity.retainAcknowledgedMs`, counted from each event's
   * `observedAt`). For an `HttpJournal`, make it with `HttpJournal.connect`,
   * so its `mode` and `capacity` are the server's, and with
   * `retry: { attempts: 1 }`, so that every resend is the forwarder's own
   * (see {@link createForwarder}).
   */
  readonly sink: ForwarderSink;
  /**
   * Forward a `billing_grade` source into a `telemetry_grade` sink. Default
   * false: `createForwarder` refuses that pair, because the forwarder
   * acknowledges an event in the source (and the source may then prune it)
   * as soon as the sink accepted it, and a telemetry-grade sink (a worker
   * over a memory journal, say) may lose what it accepted on a restart; the
   * event would then be gone from both. The same holds for a sink whose
   * `capacity.policy` is not `refuse` (`drop_oldest` drops accepted events
   * when full, whatever its mode). Set it only when losing forwarded events
   * is acceptable (the sink's mode and policy are checked when it reports them).
   */
  readonly allowTelemetrySink?: boolean;
  /** Events per claim and per `appendBatch`, 1..1000. Default 100. */
  readonly batchSize?: number;
  /** Lease of a claim (ms), 2..12 h. Default 30 s. */
  readonly leaseMs?: number;
  /** How often leases are extended while the sink has not answered (ms), 1..leaseMs-1. Default `leaseMs / 2`. */
  readonly heartbeatMs?: number;
  /** How long `appendBatch` may take before the batch counts as failed (ms), or null for no limit. Default 60 s. */
  readonly sinkTimeoutMs?: number | null;
  /** The idle poll interval (ms), 1..12 h. Default 5 s. */
  readonly pollIntervalMs?: number;
  /** A policy, or options of {@link exponentialBackoff}. Used for nack delays and for the loop's pause after a failure. */
  readonly backoff?: BackoffPolicy | ExponentialBackoffOptions;
  /** Epoch-ms clock. Default `Date.now`. */
  readonly clock?: () => number;
  /** Timers. Default the global `setTimeout` / `clearTimeout`. */
  readonly scheduler?: Scheduler;
  /** Online state; the loop pauses while offline. Default always online; in a browser pass `browserOnline()`. */
  readonly online?: OnlineSource;
  /** Forward only while holding this lock; stand by otherwise. Default: no lock. */
  readonly lock?: ForwarderLockOptions;
  /** Where an exception thrown by an event listener goes. Default the platform's `reportError`, else `console.error`. */
  readonly onListenerError?: (error: unknown, event: ForwarderEvent<unknown>) => void;
}

/** Options of {@link Forwarder.drain}. */
export interface DrainOptions {
  /** Stop after this many batches even if more is claimable. Default unlimited. */
  readonly maxBatches?: number;
}

/** A running (or stoppable) forwarder. Listen with `addEventListener("progress" | "state" | "batch" | "error", ...)`. */
export interface Forwarder {
  readonly consumer: ConsumerId;
  /** A snapshot of the current state and totals. */
  readonly progress: ForwarderProgress;
  /** Start the loop (no-op when started): take the lock if configured, then forward, poll and back off on the scheduler. */
  start(): void;
  /**
   * Stop the loop; resolves when the batch in flight (if any) has settled
   * (a batch held through a sink outage is nacked, claimable at once) and the
   * lock is released. `start()` may be called again at any time, also before
   * this resolves.
   */
  stop(): Promise<void>;
  /**
   * Forward one batch now (claim, append, settle), regardless of the loop,
   * online state and lock. It does not wait out a sink outage as the loop
   * does: a failure that is not the events' fault is nacked with backoff,
   * which spends a delivery attempt of each event when it is claimed again.
   */
  runOnce(): Promise<BatchReport>;
  /** Forward batches now until nothing is claimable at this instant (or `maxBatches`); the sum of the batches. Regardless of online state and lock. */
  drain(options?: DrainOptions): Promise<DrainReport>;
  addEventListener<K extends keyof ForwarderEventMap>(type: K, listener: ForwarderListener<ForwarderEventMap[K]>, options?: ForwarderListenerOptions): void;
  removeEventListener<K extends keyof ForwarderEventMap>(type: K, listener: ForwarderListener<ForwarderEventMap[K]>): void;
}

// ------------------------------------------------------------------ options

interface Settings {
  readonly context: Omit<BatchContext, "report" | "onClaimed" | "onSettled">;
  readonly pollIntervalMs: number;
  readonly online: OnlineSource;
  readonly lock: { readonly name: string; readonly manager: LockManagerLike } | null;
  readonly onListenerError: (error: unknown, event: ForwarderEvent<unknown>) => void;
}

function checkWholeMs(argument: string, value: unknown, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new InvalidArgumentError(argument, `must be an integer from ${min} to ${max}, got ${String(value)}`);
  }
  return value;
}

function checkMethods(argument: string, value: unknown, methods: readonly string[]): void {
  if (value === null || typeof value !== "object") throw new InvalidArgumentError(argument, `must be an object with ${methods.join(", ")}`);
  for (const method of methods) {
    if (typeof (value as Record<string, unknown>)[method] !== "function") {
      throw new InvalidArgumentError(argument, `must have a \`${method}\` method`);
    }
  }
}

/**
 * Refuse a `billing_grade` source drained into a sink that says it is
 * `telemetry_grade`, unless `allowTelemetrySink` (see {@link ForwarderOptions.allowTelemetrySink}).
 */
function checkDurability(options: ForwarderOptions): void {
  const allow = options.allowTelemetrySink ?? false;
  if (typeof allow !== "boolean") throw new InvalidArgumentError("allowTelemetrySink", "must be a boolean");
  const sourceMode = (options.source as { mode?: unknown }).mode;
  if (allow || sourceMode !== "billing_grade") return;
  const sinkMode = (options.sink as { mode?: unknown }).mode;
  const name = (options.sink as { name?: unknown }).name;
  const sink = typeof name === "string" ? `the sink journal \`${name}\`` : "the sink";
  const policy = sinkPolicy(options.sink);
  if (sinkMode !== "telemetry_grade") {
    if (policy === undefined || policy === "refuse") return;
    throw new InvalidArgumentError(
      "sink",
      `${sink} has capacity policy ${typeof policy === "string" ? policy : JSON.stringify(policy) ?? "unknown"} (when full it drops events it accepted instead of refusing the append) and the source is billing_grade: an event acknowledged in the source after the sink accepted it could be lost from both. ` +
        'Forward into a sink whose capacity policy is "refuse" (BILLING_GRADE; for an HttpJournal, made with HttpJournal.connect, which reports the server\'s capacity), or pass allowTelemetrySink: true to accept that loss',
    );
  }
  throw new InvalidArgumentError(
    "sink",
    `${sink} is telemetry_grade (it may lose an event it accepted) and the source is billing_grade: an event acknowledged in the source after the sink accepted it could be lost from both. ` +
      "Forward into a billing_grade sink (for an HttpJournal, made with HttpJournal.connect, which reports the server's mode), or pass allowTelemetrySink: true to accept that loss",
  );
}

/** The sink's `capacity.policy`, or undefined when it reports no capacity (such a sink is not checked). */
function sinkPolicy(sink: ForwarderSink): unknown {
  try {
    const capacity = (sink as { capacity?: unknown }).capacity;
    return capacity !== null && typeof capacity === "object" ? (capacity as { policy?: unknown }).policy : undefined;
  } catch {
    return undefined;
  }
}

function readSettings(options: ForwarderOptions): Settings {
  if (options === null || typeof options !== "object") throw new InvalidArgumentError("options", "must be an object");
  checkMethods("source", options.source, ["claim", "ackBatch", "nack", "quarantine", "extend", "stats"]);
  checkMethods("sink", options.sink, ["appendBatch"]);
  checkDurability(options);
  const consumer = parseConsumerId(options.consumer);
  const batchSize = checkWholeMs("batchSize", options.batchSize ?? DEFAULT_BATCH_SIZE, 1, MAX_BATCH_EVENTS);
  const leaseMs = checkWholeMs("leaseMs", options.leaseMs ?? DEFAULT_FORWARDER_LEASE_MS, 2, MAX_LEASE_MS);
  const heartbeatMs = checkWholeMs("heartbeatMs", options.heartbeatMs ?? Math.floor(leaseMs / 2), 1, leaseMs - 1);
  const sinkTimeoutMs = options.sinkTimeoutMs === null ? null : checkWholeMs("sinkTimeoutMs", options.sinkTimeoutMs ?? DEFAULT_SINK_TIMEOUT_MS, 1, MAX_LEASE_MS);
  const pollIntervalMs = checkWholeMs("pollIntervalMs", options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS, 1, MAX_LEASE_MS);
  const backoff = isBackoffPolicy(options.backoff) ? options.backoff : exponentialBackoff(options.backoff ?? {});
  const clock = options.clock ?? Date.now;
  if (typeof clock !== "function") throw new InvalidArgumentError("clock", "must be a function returning epoch milliseconds");
  const scheduler = options.scheduler ?? globalScheduler();
  checkMethods("scheduler", scheduler, ["setTimeout", "clearTimeout"]);
  const online = options.online ?? alwaysOnline();
  checkMethods("online", online, ["isOnline", "subscribe"]);
  let lock: Settings["lock"] = null;
  if (options.lock !== undefined) {
    if (options.lock === null || typeof options.lock !== "object") throw new InvalidArgumentError("lock", "must be an object { name, manager? }");
    const name = options.lock.name;
    if (typeof name !== "string" || name.length === 0 || name.length > 200 || name.startsWith("-")) {
      throw new InvalidArgumentError("lock.name", "must be a string of 1 to 200 characters not starting with `-` (a Web Locks name)");
    }
    const manager = options.lock.manager ?? browserLocks();
    if (manager === null) throw new InvalidArgumentError("lock.manager", "no Web Locks API here (navigator.locks); pass a manager or drop `lock`");
    checkMethods("lock.manager", manager, ["request"]);
    lock = { name, manager };
  }
  const onListenerError = options.onListenerError ?? reportListenerError;
  if (typeof onListenerError !== "function") throw new InvalidArgumentError("onListenerError", "must be a function");
  return {
    context: { source: options.source, consumer, sink: options.sink, batchSize, leaseMs, heartbeatMs, sinkTimeoutMs, backoff, clock, scheduler },
    pollIntervalMs,
    online,
    lock,
    onListenerError,
  };
}

interface AbortControllerLike {
  readonly signal: AbortSignalLike;
  abort(reason?: unknown): void;
}

/** A new `AbortController` where the platform has one (it always should; without it a stopped standby simply declines the grant). */
function newAbortController(): AbortControllerLike | null {
  const Ctor = (globalThis as Record<string, unknown>)["AbortController"];
  return typeof Ctor === "function" ? new (Ctor as new () => AbortControllerLike)() : null;
}

// ---------------------------------------------------------------- forwarder

/**
 * Create a forwarder that drains `source` (as `consumer`) into `sink`. It
 * does nothing until `start()` (or `runOnce()` / `drain()`).
 *
 * The sink's retention window bounds exactly-once delivery: the sink
 * recognises a resent event (`already_present`) only for
 * `capacity.retainAcknowledgedMs` after its `observedAt`, so that window must
 * exceed the longest time an event can wait in the source plus its resends.
 * For an offline browser that time has no bound of its own (a device offline
 * for a week holds its outbox for a week), so size the edge's window for the
 * longest absence you accept. A resend the sink answers `accepted` past the
 * window is reported (an `error` event with a `PossibleDuplicateError`
 * naming the request id): the event may be at the sink twice. Only the
 * forwarder's own resends are reported, so build an `HttpJournal` sink with
 * `retry: { attempts: 1 }`: its own retries (4 tries by default) would resend
 * after a lost reply without the forwarder knowing. The forwarder does its
 * own resending.
 *
 * @throws InvalidArgumentError naming the option out of range (`batchSize`,
 *   `leaseMs`, `heartbeatMs`, `sinkTimeoutMs`, `pollIntervalMs`, `backoff.*`,
 *   `source`, `sink`, `clock`, `scheduler`, `online`, `lock.name`, `lock.manager`,
 *   `allowTelemetrySink`); InvalidArgumentError(`sink`) for a `telemetry_grade`
 *   sink, or one whose `capacity.policy` is not `refuse`, of a `billing_grade`
 *   source without `allowTelemetrySink: true`;
 *   InvalidConsumerIdError for a bad consumer name.
 * @example
 * ```ts
 * import { createJournal, BILLING_GRADE } from "isostore";
 * import { indexedDbEngine } from "isostore/indexeddb";
 * import { HttpJournal } from "isostore/http";
 * import { browserOnline, createForwarder } from "isostore/sync";
 *
 * const local = createJournal(indexedDbEngine({ name: "usage" }), { name: "usage", capacity: BILLING_GRADE });
 * // connect() asks the worker for the journal's mode and capacity (its retention window included).
 * // retry: { attempts: 1 }: the forwarder resends itself, and reports a resend that may be a duplicate.
 * const edgeJournal = await HttpJournal.connect({ baseUrl: "https://edge.example", journal: "usage", token, retry: { attempts: 1 } });
 * const forwarder = createForwarder({
 *   source: local,
 *   consumer: "edge",
 *   sink: edgeJournal,
 *   batchSize: 100,
 *   leaseMs: 30_000,
 *   backoff: { initialMs: 1_000, maxMs: 60_000 },
 *   online: browserOnline(),
 *   lock: { name: "isostore-forwarder/usage/edge" },
 * });
 * forwarder.addEventListener("progress", (event) => render(event.detail.pending));
 * forwarder.addEventListener("error", (event) => console.warn(event.detail.message));
 * forwarder.start();
 * // later
 * await forwarder.stop();
 * ```
 */
export function createForwarder(options: ForwarderOptions): Forwarder {
  const settings = readSettings(options);
  const { clock, scheduler } = settings.context;
  const events = new ForwarderEvents<ForwarderEventMap>(settings.onListenerError);

  let state: ForwarderState = "stopped";
  let forwarded = 0;
  let quarantined = 0;
  let retried = 0;
  let batches = 0;
  let pending: number | null = null;
  let quarantinedInSource: number | null = null;
  let lastError: ForwarderFailure | null = null;
  let nextRetryAt: number | null = null;
  let consecutiveFailures = 0;

  // Loop state. `generation` changes on every start and stop, so a timer,
  // lock grant or online event of an earlier run does nothing.
  let generation = 0;
  let running = false;
  let holdsLock = settings.lock === null;
  let online = true;
  let timer: unknown;
  let timerArmed = false;
  let unsubscribeOnline: (() => void) | null = null;
  let releaseLock: (() => void) | null = null;
  let lockRequest: AbortControllerLike | null = null;
  // Settles once the lock manager has let go of this run's request (granted lock released, or waiting request withdrawn).
  let lockSettled: Promise<void> | null = null;
  let lockFailures = 0;
  let lockRetryTimer: unknown;
  let lockRetryArmed = false;
  // Batches run one at a time, whoever asks (loop, runOnce, drain): never two claims in flight.
  let batchTail: Promise<unknown> = Promise.resolve();
  let ticking = false;
  // Whether the loop's next claim waits for the sink to answer a call of no events: at the start of a run and after
  // a failed batch, until the sink answered or a batch claimed something, so that restarts and lapsed leases through
  // an outage do not spend the events' delivery attempts. The check itself waits for pending events (see `batch.ts`).
  let checkSink = true;
  // The wait of a batch the loop holds through a sink outage: ends early on stop(), a lost lock or back online.
  let holdTimer: unknown;
  let endHoldWait: (() => void) | null = null;
  // Counts interruptions, so one that lands while no wait is running (a send or a settle is in flight) still ends the next wait at once.
  let holdInterrupts = 0;

  const snapshot = (): ForwarderProgress =>
    Object.freeze({ state, forwarded, quarantined, retried, batches, pending, quarantinedInSource, lastError, nextRetryAt, consecutiveFailures });

  const setState = (next: ForwarderState) => {
    if (next !== "backing_off") nextRetryAt = null;
    if (next === state) return;
    state = next;
    events.dispatch("state", snapshot());
  };

  const fail = (phase: ForwarderPhase, error: unknown, requestIds: readonly string[] = []) => {
    lastError = Object.freeze({ phase, error, code: errorCode(error), message: errorMessage(error), retryable: isRetryable(error), requestIds: Object.freeze([...requestIds]), at: clock() });
    events.dispatch("error", lastError);
  };

  const report = (failure: BatchFailure) => fail(failure.phase, failure.error, failure.requestIds);

  async function refreshPending(): Promise<void> {
    try {
      const stats = await settings.context.source.stats(settings.context.consumer);
      pending = stats.pending;
      quarantinedInSource = stats.quarantined;
    } catch (error) {
      pending = null;
      quarantinedInSource = null;
      fail("stats", error);
    }
  }

  /**
   * One batch, queued behind any other, with the totals updated and `pending`
   * refreshed. Never rejects. The totals move as the batch settles events: a
   * batch held open (through an outage, or for a namespace the token may not
   * append while top-ups go) adds what each send settled at once, with a
   * `progress` event, and the rest when it ends; a batch counts in `batches`
   * at its first claim. A batch of the loop leaves the state to the loop; one
   * asked for by `runOnce` / `drain` puts the state back after.
   */
  function runBatch(fromLoop: boolean, hold: BatchHold | null = null, options: ForwardBatchOptions = {}): Promise<BatchReport> {
    const run = batchTail.then(async (): Promise<BatchReport> => {
      const before = state;
      // What this batch added to the totals before it ended (its report counts the whole batch).
      const added = { forwarded: 0, quarantined: 0, retried: 0, batch: false };
      /** The `progress` events of this batch's settled sends, each after its read of `pending` (never rejects). */
      let settledTold: Promise<void> = Promise.resolve();
      const context: BatchContext = {
        ...settings.context,
        report,
        onClaimed: () => {
          if (!added.batch) {
            added.batch = true;
            batches += 1;
          }
          setState("forwarding");
        },
        onSettled: (counts: SettledCounts) => {
          forwarded += counts.forwarded;
          quarantined += counts.quarantined;
          retried += counts.retried;
          added.forwarded += counts.forwarded;
          added.quarantined += counts.quarantined;
          added.retried += counts.retried;
          // `pending` moves too (a held batch may stay open for long): read it, then tell, in order.
          settledTold = settledTold.then(refreshPending).then(() => events.dispatch("progress", snapshot()));
        },
      };
      let batchReport: BatchReport;
      try {
        batchReport = await forwardBatch(context, hold, options);
      } catch (error) {
        // forwardBatch reports instead of throwing; should it ever throw, say so and count a failure.
        fail("internal", error);
        batchReport = { claimed: 0, forwarded: 0, alreadyPresent: 0, quarantined: 0, retried: 0, unsettled: 0, resent: 0, failed: true };
      }
      // What the batch settled since it last told (a batch that threw keeps what it told: those events were settled).
      forwarded += Math.max(0, batchReport.forwarded - added.forwarded);
      quarantined += Math.max(0, batchReport.quarantined - added.quarantined);
      retried += Math.max(0, batchReport.retried - added.retried);
      if (batchReport.claimed > 0 && !added.batch) batches += 1;
      await settledTold;
      await refreshPending();
      if (batchReport.claimed > 0 || batchReport.failed) events.dispatch("batch", batchReport);
      if (!fromLoop) {
        setState(running ? before : "stopped");
        events.dispatch("progress", snapshot());
      }
      return batchReport;
    });
    batchTail = run;
    return run;
  }

  function clearTimer(): void {
    if (timerArmed) scheduler.clearTimeout(timer);
    timerArmed = false;
  }

  function schedule(ms: number): void {
    clearTimer();
    const mine = generation;
    timerArmed = true;
    timer = scheduler.setTimeout(() => {
      timerArmed = false;
      if (mine === generation) runTick(mine);
      // Return nothing: a virtual scheduler awaits what a timer returns, and a batch can wait on that very scheduler.
      return undefined;
    }, ms);
  }

  /** Arrange the next step of the loop now that something changed (started, lock granted, back online). */
  function wake(): void {
    // A tick in progress looks at the online state and schedules the next step itself.
    if (!running || !holdsLock || ticking) return;
    if (!online) {
      clearTimer();
      setState("offline");
      return;
    }
    // Through the scheduler, not inline: callers are event handlers and `start()`, and tests step the loop on virtual time.
    schedule(0);
  }

  /**
   * End the wait of a held batch now (it then sends again, or gives the batch
   * back if the loop stopped or lost its lock). Sticky: with no wait running,
   * the held batch's next wait ends at once (see `BatchHold.wait`).
   */
  function interruptHold(): void {
    holdInterrupts += 1;
    const end = endHoldWait;
    if (end === null) return;
    endHoldWait = null;
    scheduler.clearTimeout(holdTimer);
    end();
  }

  /** How the loop's batch of run `mine` waits out a sink outage (see `batch.ts`). */
  function holdFor(mine: number): BatchHold {
    // The interruptions this hold has seen: one counted since then ends its next wait at once.
    let seen = holdInterrupts;
    return {
      // Held while this run forwards: not once it stopped, nor once another forwarder (tab) took the lock.
      active: () => mine === generation && running && holdsLock,
      wait: (ms) => {
        if (seen !== holdInterrupts) {
          seen = holdInterrupts;
          return Promise.resolve();
        }
        return new Promise<void>((resolve) => {
          const end = () => {
            seen = holdInterrupts;
            resolve();
          };
          endHoldWait = end;
          holdTimer = scheduler.setTimeout(() => {
            if (endHoldWait === end) endHoldWait = null;
            end();
            return undefined;
          }, ms);
        });
      },
      waiting: (retryAt) => {
        consecutiveFailures += 1;
        nextRetryAt = retryAt;
        setState("backing_off");
        events.dispatch("progress", snapshot());
      },
      resending: () => setState("forwarding"),
    };
  }

  function runTick(mine: number): void {
    tick(mine).catch((error: unknown) => fail("internal", error));
  }

  async function tick(mine: number): Promise<void> {
    if (mine !== generation || !running || !holdsLock || ticking) return;
    clearTimer();
    if (!online) {
      setState("offline");
      return;
    }
    ticking = true;
    let report: BatchReport;
    // Whether this tick's sink check was made and answered.
    let answered = false;
    try {
      // The first claim of a run, and the first after a failure, waits until the sink answers; none is asked while
      // nothing is pending (see `batch.ts`).
      report = await runBatch(true, holdFor(mine), {
        checkSink,
        onSinkAnswered: () => {
          answered = true;
        },
      });
    } finally {
      ticking = false;
    }
    // Checked again next time after a failure, and until the sink answered a check or a batch claimed something: a
    // check skipped for want of pending events checked nothing. Once the sink answered, an empty claim (pending events
    // behind another forwarder's leases of their keys) leaves the loop polling with claims alone, as after a batch.
    checkSink = report.failed || (checkSink && report.claimed === 0 && !answered);
    if (mine !== generation || !running) {
      // Stopped meanwhile, and perhaps started again: the new run's wake() found this tick in progress and left the next step to it.
      if (running) wake();
      return;
    }
    if (!holdsLock) {
      setState("standby");
    } else if (!online) {
      setState("offline");
    } else if (report.failed) {
      consecutiveFailures += 1;
      const delay = retryDelay(settings.context.backoff, consecutiveFailures);
      nextRetryAt = clock() + delay;
      setState("backing_off");
      schedule(delay);
    } else {
      consecutiveFailures = 0;
      if (report.claimed > 0) {
        setState("forwarding");
        schedule(0);
      } else {
        setState("idle");
        schedule(settings.pollIntervalMs);
      }
    }
    events.dispatch("progress", snapshot());
  }

  function onOnlineChange(flag: unknown): void {
    // A source that calls back without a value is asked; a throwing one counts as online (never strand events).
    if (typeof flag === "boolean") online = flag;
    else {
      try {
        online = settings.online.isOnline() !== false;
      } catch (error) {
        online = true;
        fail("online", error);
      }
    }
    if (!running) return;
    if (!online) {
      if (!ticking && holdsLock) {
        clearTimer();
        setState("offline");
      }
      return;
    }
    // Back online: try at once rather than wait out a backoff that the outage caused.
    interruptHold();
    wake();
  }

  function requestLock(mine: number): void {
    const lock = settings.lock;
    if (lock === null) return;
    const controller = newAbortController();
    lockRequest = controller;
    setState("standby");
    let granted = false;
    // This request's own release: a later run's grant has its own (the shared `releaseLock` is the current one's).
    let release: (() => void) | null = null;
    const request = (() => {
      try {
        return Promise.resolve(
          lock.manager.request(lock.name, controller === null ? {} : { signal: controller.signal }, async () => {
            if (mine !== generation || !running) return;
            granted = true;
            lockFailures = 0;
            holdsLock = true;
            await new Promise<void>((resolve) => {
              release = resolve;
              releaseLock = resolve;
              wake();
            });
          }),
        );
      } catch (error) {
        return Promise.reject(error instanceof Error ? error : new Error(String(error)));
      }
    })();
    // The lock ended while this run held it (the tab's lock was stolen, or a
    // manager let go on its own): stop forwarding after the batch in flight.
    const lost = () => {
      if (!granted) return;
      granted = false;
      // A stopped run's lock ending must not touch the state of a run started since.
      if (mine === generation) {
        holdsLock = false;
        clearTimer();
        // A batch held through a sink outage goes back at once, for the forwarder that now holds the lock.
        interruptHold();
      }
      if (releaseLock === release) releaseLock = null;
      const own = release;
      release = null;
      own?.();
    };
    const settled = request.then(
      () => {
        if (lockRequest === controller) lockRequest = null;
        const held = granted;
        lost();
        if (held && mine === generation && running) requestLock(mine);
      },
      (error: unknown) => {
        if (lockRequest === controller) lockRequest = null;
        lost();
        if (mine !== generation || !running) return; // our own abort on stop
        fail("lock", error);
        setState("standby");
        lockFailures += 1;
        const delay = retryDelay(settings.context.backoff, lockFailures);
        lockRetryArmed = true;
        lockRetryTimer = scheduler.setTimeout(() => {
          lockRetryArmed = false;
          if (mine === generation && running) requestLock(mine);
          return undefined;
        }, delay);
      },
    );
    // Without an AbortController a waiting request cannot be withdrawn, so stop() must not wait for it.
    lockSettled = controller === null ? null : settled;
  }

  const forwarder: Forwarder = {
    consumer: settings.context.consumer,
    get progress() {
      return snapshot();
    },
    start() {
      if (running) return;
      running = true;
      generation += 1;
      checkSink = true;
      const mine = generation;
      try {
        online = settings.online.isOnline() === true;
        unsubscribeOnline = settings.online.subscribe((flag) => {
          if (mine === generation) onOnlineChange(flag);
        });
      } catch (error) {
        // A broken online source must not keep events from moving: assume online, and say so.
        online = true;
        fail("online", error);
      }
      if (settings.lock === null) {
        holdsLock = true;
        if (online) setState("idle");
        wake();
      } else {
        holdsLock = false;
        requestLock(mine);
      }
    },
    async stop() {
      if (!running) {
        await batchTail;
        if (!running) setState("stopped");
        return;
      }
      running = false;
      generation += 1;
      const mine = generation;
      clearTimer();
      interruptHold();
      if (lockRetryArmed) scheduler.clearTimeout(lockRetryTimer);
      lockRetryArmed = false;
      try {
        unsubscribeOnline?.();
      } catch (error) {
        fail("online", error);
      }
      unsubscribeOnline = null;
      lockRequest?.abort();
      lockRequest = null;
      // This run's lock: kept while its batch settles, then released (a start() meanwhile asks for a lock of its own).
      const release = releaseLock;
      const settled = lockSettled;
      await batchTail;
      if (settings.lock !== null && mine === generation) holdsLock = false;
      if (releaseLock === release) releaseLock = null;
      release?.();
      // Resolve only once the lock is free for the next forwarder (a standby tab), as far as the manager tells.
      if (release !== null || settled !== null) await settled;
      if (lockSettled === settled) lockSettled = null;
      if (mine === generation) setState("stopped");
    },
    runOnce() {
      return runBatch(false);
    },
    async drain(drainOptions: DrainOptions = {}) {
      const maxBatches = drainOptions.maxBatches === undefined ? Number.POSITIVE_INFINITY : checkWholeMs("maxBatches", drainOptions.maxBatches, 1, Number.MAX_SAFE_INTEGER);
      const total = { batches: 0, claimed: 0, forwarded: 0, alreadyPresent: 0, quarantined: 0, retried: 0, unsettled: 0, resent: 0, failed: false };
      while (total.batches < maxBatches) {
        const report = await runBatch(false);
        if (report.claimed === 0) {
          total.failed ||= report.failed;
          break;
        }
        total.batches += 1;
        total.claimed += report.claimed;
        total.forwarded += report.forwarded;
        total.alreadyPresent += report.alreadyPresent;
        total.quarantined += report.quarantined;
        total.retried += report.retried;
        total.unsettled += report.unsettled;
        total.resent += report.resent;
        total.failed ||= report.failed;
      }
      return total;
    },
    addEventListener(type, listener, listenerOptions) {
      events.addEventListener(type, listener, listenerOptions);
    },
    removeEventListener(type, listener) {
      events.removeEventListener(type, listener);
    },
  };
  return forwarder;
}
