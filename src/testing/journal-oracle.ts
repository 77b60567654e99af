/**
 * The reference model of the usage journal: a plain, obviously correct
 * `UsageJournal` made of arrays and Maps, with no Engine, no indexes and no
 * cleverness. Every method is straight-line code that follows
 * `docs/journal-semantics.md` section by section (each method names the
 * section it implements), so when an implementation and this model disagree,
 * reading the two side by side says which one is wrong.
 *
 * Validation goes through the same helpers (`src/journal/event.ts`) and error
 * classes (`src/journal/errors.ts`) as the real journal, so a refused input
 * produces the same error class, `code` and fields.
 *
 * Every call is atomic, like a call of the real journal (one Engine
 * transaction): a call that rejects changes nothing, including the
 * opportunistic prune it may have run before it was refused.
 *
 * Speed is not a goal: operations scan every stored event. Use it with the
 * handful of events a model-based test creates.
 */
import {
  AlreadyAcknowledgedError,
  AtCapacityError,
  EventConflictError,
  InvalidArgumentError,
  JournalError,
  NotOutstandingError,
  NotQuarantinedError,
  QuarantinedError,
} from "../journal/errors.js";
import { CLOCK_BACK_TOLERANCE_MS, MAX_KEPT_ATTEMPTS } from "../journal/arguments.js";
import { BILLING_GRADE, checkCapacity, checkDeliveryId, checkInteger, checkUsageEvent, isRequestId, isSameFact, parseConsumerId } from "../journal/event.js";
import type {
  AckResult,
  AppendResult,
  Attempt,
  AttemptOutcome,
  AuditEntry,
  AuditPage,
  ListAuditOptions,
  BatchAppendResult,
  Capacity,
  ClaimOptions,
  ConsumerId,
  Delivery,
  DeliveryId,
  DeliveryMode,
  ExtendOptions,
  JournalStats,
  ListQuarantinedOptions,
  NackOptions,
  OperatorActionOptions,
  PoisonReason,
  PruneOptions,
  QuarantinePage,
  QuarantinedEvent,
  UsageEvent,
  UsageJournal,
} from "../journal/types.js";

/** Options of {@link JournalOracle}. */
export interface JournalOracleOptions {
  /** Journal name: 1..63 characters of `[a-z0-9_-]`. */
  readonly name: string;
  /** Defaults to `BILLING_GRADE`. */
  readonly capacity?: Capacity;
  /** Read wherever the semantics say "the clock". Defaults to `Date.now`. */
  readonly clock?: () => number;
  /** Whether the storage this model stands for outlives the process: decides `mode`. */
  readonly durable?: boolean;
}

/** Cursor prefixes (shared with the real journal). */
export const QUARANTINE_CURSOR_PREFIX = "q1.";
/** Prefix of the cursors of newest-first quarantine pages (`order: "newest"`). */
export const QUARANTINE_NEWEST_CURSOR_PREFIX = "qn1.";
export const AUDIT_CURSOR_PREFIX = "a1.";

/** Batch, claim and listing bounds from the validation table of the semantics. */
const MAX_BATCH_EVENTS = 1000;
const MAX_CLAIM_EVENTS = 10_000;
const MAX_LEASE_MS = 43_200_000;
/** The latest `now` any call takes (epoch ms): the last instant a `Date` holds (events: `checkUsageEvent`). */
const MAX_EPOCH_MS = 8_640_000_000_000_000;
const MAX_NACK_ERROR_CHARS = 2000;
const MAX_ACTOR_CHARS = 200;
const MAX_QUERY_CHARS = 200;
const MAX_PAGE_LIMIT = 1000;
const DEFAULT_PAGE_LIMIT = 100;
const MAX_PRUNE_LIMIT = 100_000;
const DEFAULT_PRUNE_LIMIT = 1000;
/** Sizes deliveries for a claim's `maxBytes`: the UTF-8 bytes of their JSON. */
const UTF8 = new TextEncoder();

/** How many events `append`, `appendBatch` and `claim` prune on the way. */
const OPPORTUNISTIC_PRUNE_LIMIT = 8;
const JOURNAL_NAME = /^[a-z0-9_-]{1,63}$/;
const POISON_REASONS: readonly PoisonReason[] = ["malformed", "rejected", "attempts_exhausted"];

/** One stored event. */
interface StoredEvent {
  readonly position: number;
  /** The canonical frozen event of the first observation. */
  readonly event: UsageEvent;
}

/** One attempt as stored: `outcome` null while no verdict was given. */
interface StoredAttempt {
  attempt: number;
  claimedAt: number;
  leaseExpiresAt: number;
  outcome: AttemptOutcome | null;
}

/** One consumer's status of one stored event ("State" in the semantics). */
interface DeliveryStatus {
  state: "unfinished" | "acked" | "quarantined" | "discarded";
  attempts: number;
  budgetBase: number;
  availableAt: number;
  history: StoredAttempt[];
  reason: PoisonReason | null;
  quarantinedAt: number | null;
}

/** Everything the journal holds. Replaced wholesale when a call is rolled back. */
interface OracleState {
  nextPosition: number;
  /** In position order. */
  events: StoredEvent[];
  /** Registered consumers, in registration order. */
  consumers: ConsumerId[];
  /** consumer -> position -> status, for every registered consumer and stored event. */
  statuses: Map<ConsumerId, Map<number, DeliveryStatus>>;
  /** Events lost to drop_oldest, ever: kept by `withCapacity`, whatever the new policy. */
  dropped: number;
  audit: AuditEntry[];
  /**
   * Per consumer and ordering key (`holdKey`): no event of the key is claimable by the consumer
   * before this time. Set when drop_oldest drops an event the consumer holds in flight, to that
   * lease's end: the consumer may still be working on it.
   */
  holds: Map<string, number>;
}

/** The key of {@link OracleState.holds}. */
function holdKey(consumer: ConsumerId, event: UsageEvent): string {
  return JSON.stringify([consumer, event.orderingKey.namespace, event.orderingKey.subject]);
}

/** A debugging picture of the model's state (plain data). */
export interface JournalOracleSnapshot {
  readonly name: string;
  readonly mode: DeliveryMode;
  readonly capacity: Capacity;
  readonly nextPosition: number;
  readonly dropped: number;
  readonly events: readonly { readonly position: number; readonly event: UsageEvent }[];
  readonly consumers: readonly {
    readonly consumer: ConsumerId;
    readonly statuses: readonly {
      readonly position: number;
      readonly requestId: string;
      readonly state: DeliveryStatus["state"];
      readonly attempts: number;
      readonly budgetBase: number;
      readonly availableAt: number;
      readonly reason: PoisonReason | null;
      readonly quarantinedAt: number | null;
      readonly history: readonly Attempt[];
    }[];
  }[];
  readonly audit: readonly AuditEntry[];
}

function emptyState(): OracleState {
  return { nextPosition: 1, events: [], consumers: [], statuses: new Map(), dropped: 0, audit: [], holds: new Map() };
}

function copyStatus(status: DeliveryStatus): DeliveryStatus {
  return { ...status, history: status.history.map((attempt) => ({ ...attempt })) };
}

function copyState(state: OracleState): OracleState {
  const statuses = new Map<ConsumerId, Map<number, DeliveryStatus>>();
  for (const [consumer, byPosition] of state.statuses) {
    const copy = new Map<number, DeliveryStatus>();
    for (const [position, status] of byPosition) copy.set(position, copyStatus(status));
    statuses.set(consumer, copy);
  }
  return {
    nextPosition: state.nextPosition,
    events: [...state.events],
    consumers: [...state.consumers],
    statuses,
    dropped: state.dropped,
    audit: [...state.audit],
    holds: new Map(state.holds),
  };
}

function freshStatus(): DeliveryStatus {
  return { state: "unfinished", attempts: 0, budgetBase: 0, availableAt: 0, history: [], reason: null, quarantinedAt: null };
}

function sameOrderingKey(a: UsageEvent, b: UsageEvent): boolean {
  return a.orderingKey.namespace === b.orderingKey.namespace && a.orderingKey.subject === b.orderingKey.subject;
}

function latestAttempt(status: DeliveryStatus): StoredAttempt | undefined {
  return status.history[status.history.length - 1];
}


/** `max(0, t - observedAt)` of the event observed earliest among `events`, or `null` when there is none. */
function ageOfOldest(events: readonly StoredEvent[], t: number): number | null {
  let earliest: number | null = null;
  for (const stored of events) if (earliest === null || stored.event.observedAt < earliest) earliest = stored.event.observedAt;
  return earliest === null ? null : Math.max(0, t - earliest);
}

/** "In flight at time t": unfinished, latest attempt without outcome, lease not run out. */
function isInFlight(status: DeliveryStatus, t: number): boolean {
  const latest = latestAttempt(status);
  return status.state === "unfinished" && latest !== undefined && latest.outcome === null && latest.leaseExpiresAt > t;
}

/** The history as `attempts()` reads it at time t (an unanswered, run-out attempt reads as expired). */
function readHistory(status: DeliveryStatus, t: number): Attempt[] {
  return status.history.map((stored) => {
    let outcome: AttemptOutcome | null = stored.outcome === null ? null : { ...stored.outcome };
    if (stored.outcome === null && stored.leaseExpiresAt <= t) outcome = { kind: "expired", at: stored.leaseExpiresAt };
    return { attempt: stored.attempt, claimedAt: stored.claimedAt, leaseExpiresAt: stored.leaseExpiresAt, outcome };
  });
}

function checkOptionsObject(argument: string, options: unknown): void {
  if (options === null || typeof options !== "object") throw new InvalidArgumentError(argument, "must be an object");
}

/** Parse a cursor token `prefix + integer`; anything else is InvalidArgumentError("after"). */
function parseCursor(prefix: string, token: unknown): number {
  if (typeof token !== "string" || !token.startsWith(prefix)) {
    throw new InvalidArgumentError("after", "is not a cursor this journal issued");
  }
  // Positions and sequence numbers start at 1, so no journal issues `…0` or a leading zero.
  const digits = token.slice(prefix.length);
  if (!/^[1-9][0-9]*$/.test(digits) || !Number.isSafeInteger(Number(digits))) {
    throw new InvalidArgumentError("after", "is not a cursor this journal issued");
  }
  return Number(digits);
}

function checkLimit(value: unknown, max: number, fallback: number): number {
  return value === undefined ? fallback : checkInteger("limit", value, 1, max);
}

/**
 * The reference model of `UsageJournal`. Same inputs, same answers and same
 * errors as any conforming implementation, by construction rather than by
 * cleverness.
 *
 * @example
 * const clock = virtualClock(1_700_000_000_000);
 * const oracle = new JournalOracle({ name: "billing", capacity: BILLING_GRADE, clock: clock.clock, durable: false });
 * await oracle.append(event);
 */
export class JournalOracle implements UsageJournal {
  readonly name: string;
  readonly capacity: Capacity;
  readonly mode: DeliveryMode;
  private readonly clock: () => number;
  private state: OracleState = emptyState();

  /** Section "mode, name, capacity". */
  constructor(options: JournalOracleOptions) {
    checkOptionsObject("options", options);
    if (typeof options.name !== "string" || !JOURNAL_NAME.test(options.name)) {
      throw new InvalidArgumentError("name", "a journal name is 1 to 63 characters of lowercase letters, digits, `-` and `_`");
    }
    this.name = options.name;
    this.capacity = checkCapacity(options.capacity ?? BILLING_GRADE);
    this.clock = options.clock ?? Date.now;
    this.mode = options.durable === true ? "billing_grade" : "telemetry_grade";
  }

  /**
   * The same stored journal opened again with other bounds or another policy
   * (what `createJournal` over the same engine with a new `capacity` does).
   * The two oracles share their state from then on; use only the new one.
   *
   * @example
   * const dropping = oracle.withCapacity({ ...oracle.capacity, policy: "drop_oldest" });
   */
  withCapacity(capacity: Capacity): JournalOracle {
    const reopened = new JournalOracle({ name: this.name, capacity, clock: this.clock, durable: this.mode === "billing_grade" });
    reopened.state = this.state;
    return reopened;
  }

  // ---------------------------------------------------------------- append

  /** Section "append(event)". */
  async append(event: UsageEvent): Promise<AppendResult> {
    return this.atomically(() => {
      // 1. Validate; opportunistic prune.
      const checked = checkUsageEvent(event);
      const now = this.clock();
      this.pruneEvents(now, OPPORTUNISTIC_PRUNE_LIMIT);
      return this.appendChecked(checked, now);
    });
  }

  /** Section "appendBatch(events)". */
  async appendBatch(events: readonly UsageEvent[]): Promise<BatchAppendResult[]> {
    return this.atomically(() => {
      if (!Array.isArray(events)) throw new InvalidArgumentError("events", "must be an array of usage events");
      if (events.length > MAX_BATCH_EVENTS) {
        throw new InvalidArgumentError("events", `holds ${events.length} events; a batch holds at most ${MAX_BATCH_EVENTS}`);
      }
      const now = this.clock();
      this.pruneEvents(now, OPPORTUNISTIC_PRUNE_LIMIT);
      const results: BatchAppendResult[] = [];
      for (const event of events as readonly unknown[]) {
        try {
          // Each event is appended as `append` steps 1-4; its own refusal changes nothing.
          results.push(this.atomically(() => this.appendChecked(checkUsageEvent(event as UsageEvent), now)));
        } catch (error) {
          if (!(error instanceof JournalError)) throw error;
          results.push({ status: "rejected", error });
        }
      }
      return results;
    });
  }

  /** `append` steps 2-4, for a validated event, at `now`. */
  private appendChecked(event: UsageEvent, now: number): AppendResult {
    // 2. Idempotency: same fact -> already_present, else conflict. A stored event due for pruning is
    //    forgotten already (pruning forgets the key, whenever it gets to it): the append is a new event.
    const existing = this.findEvent(event.id);
    if (existing !== undefined && this.isPrunable(existing, now)) this.deleteEvent(existing.position);
    else if (existing !== undefined) {
      if (isSameFact(existing.event, event)) return { status: "already_present", position: existing.position };
      throw new EventConflictError(event.id);
    }
    // 3. Make room while full.
    while (this.state.events.length >= this.capacity.maxEvents) this.makeRoom();
    // 4. Store at the next position; unfinished (attempts 0) for every registered consumer.
    const position = this.state.nextPosition;
    this.state.nextPosition += 1;
    this.state.events.push({ position, event });
    for (const consumer of this.state.consumers) this.statusesOf(consumer).set(position, freshStatus());
    return { status: "accepted", position };
  }

  /** `append` step 3, one round: reclaim a delivered event, else apply the policy. */
  private makeRoom(): void {
    const delivered = this.state.events.filter((stored) => this.isDelivered(stored.position));
    delivered.sort((a, b) => a.event.observedAt - b.event.observedAt || a.position - b.position);
    const reclaimable = delivered[0];
    if (reclaimable !== undefined) {
      this.deleteEvent(reclaimable.position);
      return;
    }
    if (this.capacity.policy === "refuse") throw new AtCapacityError(this.state.events.length, this.capacity);
    // The oldest unacknowledged event that is not quarantined (evidence), in flight or not.
    const droppable = this.state.events.find((stored) => !this.isQuarantinedByAnyone(stored.position));
    if (droppable === undefined) throw new AtCapacityError(this.state.events.length, this.capacity);
    // A consumer holding it in flight may still be working on it: none of its key's events is
    // claimable by that consumer before the lease's end (never two events of a key out at once).
    const now = this.clock();
    for (const consumer of this.state.consumers) {
      const status = this.statusOf(consumer, droppable.position);
      if (!isInFlight(status, now)) continue;
      const key = holdKey(consumer, droppable.event);
      this.state.holds.set(key, Math.max(this.state.holds.get(key) ?? 0, latestAttempt(status)!.leaseExpiresAt));
    }
    this.deleteEvent(droppable.position);
    this.state.dropped += 1;
  }

  /** Whether drop_oldest's hold on the consumer's ordering key of `event` still runs at `now`. */
  private isHeld(consumer: ConsumerId, event: UsageEvent, now: number): boolean {
    return (this.state.holds.get(holdKey(consumer, event)) ?? 0) > now;
  }

  // ----------------------------------------------------------------- claim

  /** Section "claim(consumer, { maxEvents, leaseMs, now })". */
  async claim(consumer: ConsumerId, options: ClaimOptions): Promise<Delivery[]> {
    return this.atomically(() => {
      // 1. Validate; opportunistic prune at min(`now`, the clock); register the consumer if new.
      const c = parseConsumerId(consumer);
      checkOptionsObject("options", options);
      const maxEvents = checkInteger("maxEvents", options.maxEvents, 1, MAX_CLAIM_EVENTS);
      const leaseMs = checkInteger("leaseMs", options.leaseMs, 1, MAX_LEASE_MS);
      const now = checkInteger("now", options.now, 0, MAX_EPOCH_MS);
      const maxBytes = options.maxBytes === undefined ? Infinity : checkInteger("maxBytes", options.maxBytes, 1);
      // Pruning forgets request ids: a `now` ahead of the clock (a claimer's fast clock) prunes no earlier than the clock.
      const pruneAt = Math.min(now, this.clock());
      this.pruneEvents(pruneAt, OPPORTUNISTIC_PRUNE_LIMIT);
      this.register(c, pruneAt);
      // 2. The claimer's clock went back: a lease claimed more than CLOCK_BACK_TOLERANCE_MS after `now` has lapsed (expired at `now`).
      for (const [position, status] of this.statusesOf(c)) {
        if (this.lapsesAt(c, position, now)) latestAttempt(status)!.outcome = { kind: "expired", at: now };
      }

      // 3. Take the candidate with the smallest position until maxEvents are chosen, or
      //    until the next delivery would take the chosen ones' JSON over maxBytes (the first is always taken).
      const chosen: { position: number; delivery: Delivery }[] = [];
      let bytes = 0;
      while (chosen.length < maxEvents) {
        const candidate = this.nextCandidate(c, now);
        if (candidate === undefined) break;
        const status = this.statusOf(c, candidate.position);
        if (status.attempts - status.budgetBase >= this.capacity.maxDeliveryAttempts) {
          status.state = "quarantined";
          status.reason = "attempts_exhausted";
          status.quarantinedAt = now;
          continue;
        }
        const delivery: Delivery = {
          id: { consumer: c, event: candidate.event.id, attempt: status.attempts + 1 },
          event: candidate.event,
          leaseExpiresAt: now + leaseMs,
        };
        const size = UTF8.encode(JSON.stringify(delivery)).length;
        if (chosen.length > 0 && bytes + size > maxBytes) break;
        bytes += size;
        status.attempts += 1;
        status.history.push({ attempt: status.attempts, claimedAt: now, leaseExpiresAt: now + leaseMs, outcome: null });
        // Only the latest attempts are kept.
        if (status.history.length > MAX_KEPT_ATTEMPTS) status.history.splice(0, status.history.length - MAX_KEPT_ATTEMPTS);
        status.availableAt = 0;
        chosen.push({ position: candidate.position, delivery });
      }
      // 4. In position order.
      chosen.sort((a, b) => a.position - b.position);
      return chosen.map((entry) => entry.delivery);
    });
  }

  /**
   * At most `limit`: the ordering keys with unfinished events that are not
   * blocked for `consumer` at `now` (each gives a claim at most one event).
   * What a Durable Objects partition's read-only `claimable` answers, for
   * models of the partitioned claim; 0 for an unregistered consumer.
   */
  claimableAtMost(consumer: ConsumerId, now: number, limit: number): number {
    if (!this.isRegistered(consumer)) return 0;
    let count = 0;
    const seen: StoredEvent[] = [];
    for (const stored of this.state.events) {
      if (count >= limit) break;
      if (this.statusOf(consumer, stored.position).state !== "unfinished" || seen.some((other) => sameOrderingKey(other.event, stored.event))) continue;
      seen.push(stored);
      const unfinished = this.state.events.filter(
        (other) => sameOrderingKey(other.event, stored.event) && this.statusOf(consumer, other.position).state === "unfinished",
      );
      // A lease the claim at `now` would lapse (claimed after `now` + CLOCK_BACK_TOLERANCE_MS, see `claim`) does not block.
      if (unfinished.some((other) => isInFlight(this.statusOf(consumer, other.position), now) && !this.lapsesAt(consumer, other.position, now))) continue;
      if (this.statusOf(consumer, stored.position).availableAt > now || this.isHeld(consumer, stored.event, now)) continue;
      count += 1;
    }
    return count;
  }

  /** Whether a claim of `consumer` at `now` lapses the event's lease: in flight, claimed more than CLOCK_BACK_TOLERANCE_MS after `now`. */
  private lapsesAt(consumer: ConsumerId, position: number, now: number): boolean {
    const status = this.statusOf(consumer, position);
    return isInFlight(status, now) && latestAttempt(status)!.claimedAt > now + CLOCK_BACK_TOLERANCE_MS;
  }

  /**
   * `claim` step 2: the candidate with the smallest position over all ordering
   * keys that are not blocked for `consumer` at `now`.
   */
  private nextCandidate(consumer: ConsumerId, now: number): StoredEvent | undefined {
    let best: StoredEvent | undefined;
    for (const stored of this.state.events) {
      // U(K): this consumer's unfinished events of the key, in position order.
      const unfinished = this.state.events.filter(
        (other) => sameOrderingKey(other.event, stored.event) && this.statusOf(consumer, other.position).state === "unfinished",
      );
      const first = unfinished[0];
      if (first === undefined || first.position !== stored.position) continue; // consider each key once, at its first event
      if (unfinished.some((other) => isInFlight(this.statusOf(consumer, other.position), now))) continue;
      if (this.statusOf(consumer, first.position).availableAt > now || this.isHeld(consumer, first.event, now)) continue;
      if (best === undefined || first.position < best.position) best = first;
    }
    return best;
  }

  // ------------------------------------------------------------- verdicts

  /** Section "ack(delivery)". */
  async ack(delivery: DeliveryId): Promise<void> {
    this.atomically(() => {
      const d = checkDeliveryId(delivery);
      const stored = this.findEvent(d.event);
      if (!this.isRegistered(d.consumer)) throw new NotOutstandingError(d);
      if (stored === undefined) throw new NotOutstandingError(d);
      const status = this.statusOf(d.consumer, stored.position);
      if (status.state === "acked") return;
      if (status.state === "quarantined") throw new QuarantinedError(d);
      if (status.state === "discarded") throw new NotOutstandingError(d);
      if (status.attempts === 0) throw new NotOutstandingError(d);
      // The attempt number is not part of the condition.
      const at = this.clock();
      const latest = latestAttempt(status);
      // Only an attempt still in flight gets the verdict; a lapsed one keeps reading as expired.
      if (latest !== undefined && isInFlight(status, at)) latest.outcome = { kind: "acked", at };
      status.state = "acked";
    });
  }

  /** Section "ackBatch(deliveries)": each delivery exactly as `ack`, a refusal reported in its place. */
  async ackBatch(deliveries: readonly DeliveryId[]): Promise<AckResult[]> {
    const list: unknown = deliveries;
    if (!Array.isArray(list)) throw new InvalidArgumentError("deliveries", "must be an array of delivery ids");
    if (deliveries.length > 1000) throw new InvalidArgumentError("deliveries", "a batch holds at most 1000 deliveries");
    const results: AckResult[] = [];
    for (const delivery of deliveries) {
      try {
        await this.ack(delivery);
        results.push({ ok: true });
      } catch (error) {
        if (!(error instanceof JournalError)) throw error;
        results.push({ ok: false, error });
      }
    }
    return results;
  }

  /** Section "quarantine(delivery, reason)". */
  async quarantine(delivery: DeliveryId, reason: PoisonReason): Promise<void> {
    this.atomically(() => {
      const d = checkDeliveryId(delivery);
      if (!POISON_REASONS.includes(reason)) {
        throw new InvalidArgumentError("reason", 'must be "malformed", "rejected" or "attempts_exhausted"');
      }
      const stored = this.findEvent(d.event);
      if (!this.isRegistered(d.consumer)) throw new NotOutstandingError(d);
      if (stored === undefined) throw new NotOutstandingError(d);
      const status = this.statusOf(d.consumer, stored.position);
      if (status.state === "acked") throw new AlreadyAcknowledgedError(d);
      if (status.state === "quarantined") return; // the first reason is kept
      if (status.state === "discarded") throw new NotOutstandingError(d);
      if (status.attempts === 0) throw new NotOutstandingError(d);
      const at = this.clock();
      const latest = latestAttempt(status);
      // Only an attempt still in flight gets the verdict; a lapsed one keeps reading as expired.
      if (latest !== undefined && isInFlight(status, at)) latest.outcome = { kind: "quarantined", at, reason };
      status.state = "quarantined";
      status.reason = reason;
      status.quarantinedAt = at;
    });
  }

  /** Section "extend(delivery, { leaseMs, now }) and nack(…)": extend. */
  async extend(delivery: DeliveryId, options: ExtendOptions): Promise<{ leaseExpiresAt: number }> {
    return this.atomically(() => {
      const d = checkDeliveryId(delivery);
      checkOptionsObject("options", options);
      const leaseMs = checkInteger("leaseMs", options.leaseMs, 1, MAX_LEASE_MS);
      const now = checkInteger("now", options.now, 0, MAX_EPOCH_MS);
      const { latest } = this.currentAttempt(d, now);
      latest.leaseExpiresAt = now + leaseMs;
      return { leaseExpiresAt: latest.leaseExpiresAt };
    });
  }

  /** Section "extend(…) and nack(delivery, { retryAfterMs, error, now })": nack. */
  async nack(delivery: DeliveryId, options: NackOptions): Promise<void> {
    this.atomically(() => {
      const d = checkDeliveryId(delivery);
      checkOptionsObject("options", options);
      const retryAfterMs = checkInteger("retryAfterMs", options.retryAfterMs, 0, MAX_LEASE_MS);
      if (typeof options.error !== "string" || options.error.length > MAX_NACK_ERROR_CHARS) {
        throw new InvalidArgumentError("error", `must be a string of at most ${MAX_NACK_ERROR_CHARS} characters`);
      }
      const now = checkInteger("now", options.now, 0, MAX_EPOCH_MS);
      const { status, latest } = this.currentAttempt(d, now);
      latest.outcome = { kind: "nacked", at: now, error: options.error };
      status.availableAt = now + retryAfterMs;
    });
  }

  /** The gate of `extend` and `nack`: the delivery must be the current, unexpired attempt. */
  private currentAttempt(d: DeliveryId, now: number): { status: DeliveryStatus; latest: StoredAttempt } {
    const stored = this.findEvent(d.event);
    if (!this.isRegistered(d.consumer)) throw new NotOutstandingError(d);
    if (stored === undefined) throw new NotOutstandingError(d);
    const status = this.statusOf(d.consumer, stored.position);
    if (status.state === "acked") throw new AlreadyAcknowledgedError(d);
    if (status.state === "quarantined") throw new QuarantinedError(d);
    if (status.state === "discarded") throw new NotOutstandingError(d);
    const latest = latestAttempt(status);
    if (d.attempt !== status.attempts || latest === undefined || latest.outcome !== null || latest.leaseExpiresAt <= now) {
      throw new NotOutstandingError(d);
    }
    return { status, latest };
  }

  // ------------------------------------------------------------- operator

  /** Section "release(consumer, requestId, { now, actor }) and discard(…)": release. */
  async release(consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<void> {
    this.atomically(() => {
      const { status, c, now, actor, reason } = this.operatorGate(consumer, requestId, options);
      status.state = "unfinished";
      status.budgetBase = status.attempts;
      status.availableAt = 0;
      status.reason = null;
      status.quarantinedAt = null;
      this.writeAudit(now, "release", c, requestId, reason, actor);
    });
  }

  /** Section "release(…) and discard(consumer, requestId, { now, actor })": discard. */
  async discard(consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<void> {
    this.atomically(() => {
      const { status, c, now, actor, reason } = this.operatorGate(consumer, requestId, options);
      status.state = "discarded";
      this.writeAudit(now, "discard", c, requestId, reason, actor);
    });
  }

  private operatorGate(consumer: ConsumerId, requestId: string, options: OperatorActionOptions) {
    const c = parseConsumerId(consumer);
    if (!isRequestId(requestId)) throw new InvalidArgumentError("requestId", "must be a UUIDv7 request id");
    checkOptionsObject("options", options);
    const now = checkInteger("now", options.now, 0, MAX_EPOCH_MS);
    const actor = options.actor;
    if (actor !== undefined && (typeof actor !== "string" || actor.length > MAX_ACTOR_CHARS)) {
      throw new InvalidArgumentError("actor", `must be a string of at most ${MAX_ACTOR_CHARS} characters`);
    }
    const stored = this.findEvent(requestId);
    if (stored === undefined || !this.isRegistered(c)) throw new NotQuarantinedError(c, requestId);
    const status = this.statusOf(c, stored.position);
    if (status.state !== "quarantined" || status.reason === null) throw new NotQuarantinedError(c, requestId);
    return { status, c, now, actor: actor ?? null, reason: status.reason };
  }

  private writeAudit(at: number, action: "release" | "discard", consumer: ConsumerId, requestId: string, reason: PoisonReason, actor: string | null): void {
    const seq = this.state.audit.length + 1;
    this.state.audit.push({ seq, at, action, consumer, requestId, reason, actor });
  }

  // --------------------------------------------------------------- reading

  /**
   * Section "stats(consumer)". The oldest pending event is the one observed
   * earliest (a late replay appended after newer events is the oldest: its
   * age is how far behind the bill is), whatever its position.
   */
  async stats(consumer: ConsumerId): Promise<JournalStats> {
    const c = parseConsumerId(consumer);
    const t = this.clock();
    const common = { dropped: this.state.dropped, capacity: this.capacity };
    if (!this.isRegistered(c)) {
      // Stats never registers: the whole stored backlog is this consumer's depth.
      return {
        pending: this.state.events.length,
        inFlight: 0,
        quarantined: 0,
        oldestPendingAgeMs: ageOfOldest(this.state.events, t),
        ...common,
      };
    }
    let unfinished = 0;
    let inFlight = 0;
    let quarantined = 0;
    const pending: StoredEvent[] = [];
    for (const stored of this.state.events) {
      const status = this.statusOf(c, stored.position);
      if (status.state === "quarantined") quarantined += 1;
      if (status.state !== "unfinished") continue;
      unfinished += 1;
      if (isInFlight(status, t)) inFlight += 1;
      else pending.push(stored);
    }
    return {
      pending: unfinished - inFlight,
      inFlight,
      quarantined,
      oldestPendingAgeMs: ageOfOldest(pending, t),
      ...common,
    };
  }

  /**
   * Section "attempts(consumer, requestId)". The request id is validated like
   * `release`'s (the semantics list no rule for it here; the house rule is to
   * validate every input at the boundary).
   */
  async attempts(consumer: ConsumerId, requestId: string): Promise<Attempt[]> {
    const c = parseConsumerId(consumer);
    if (!isRequestId(requestId)) throw new InvalidArgumentError("requestId", "must be a UUIDv7 request id");
    const stored = this.findEvent(requestId);
    if (!this.isRegistered(c) || stored === undefined) return [];
    return readHistory(this.statusOf(c, stored.position), this.clock());
  }

  /** Section "listQuarantined(consumer, { limit, after, query })". */
  async listQuarantined(consumer: ConsumerId, options: ListQuarantinedOptions = {}): Promise<QuarantinePage> {
    const c = parseConsumerId(consumer);
    checkOptionsObject("options", options);
    const limit = checkLimit(options.limit, MAX_PAGE_LIMIT, DEFAULT_PAGE_LIMIT);
    const query = options.query;
    if (query !== undefined && (typeof query !== "string" || query.length > MAX_QUERY_CHARS)) {
      throw new InvalidArgumentError("query", `must be a string of at most ${MAX_QUERY_CHARS} characters`);
    }
    const order = options.order ?? "oldest";
    if (order !== "oldest" && order !== "newest") throw new InvalidArgumentError("order", 'must be "oldest" or "newest"');
    const newest = order === "newest";
    const prefix = newest ? QUARANTINE_NEWEST_CURSOR_PREFIX : QUARANTINE_CURSOR_PREFIX;
    const after = options.after === undefined || options.after === null ? null : parseCursor(prefix, options.after);
    if (!this.isRegistered(c)) return { items: [], nextCursor: null };
    const t = this.clock();
    const needle = (query ?? "").toLowerCase();
    const matching: QuarantinedEvent[] = [];
    const stored = newest ? [...this.state.events].reverse() : this.state.events;
    for (const { event, position } of stored) {
      const status = this.statusOf(c, position);
      if (status.state !== "quarantined" || status.reason === null || status.quarantinedAt === null) continue;
      // Oldest first: positions after the cursor; newest first: positions before it.
      if (after !== null && (newest ? position >= after : position <= after)) continue;
      const key = `${event.orderingKey.namespace}/${event.orderingKey.subject}`;
      const matches = event.id.toLowerCase().includes(needle) || key.toLowerCase().includes(needle) || status.reason.toLowerCase().includes(needle);
      if (!matches) continue;
      matching.push({ consumer: c, event, position, reason: status.reason, quarantinedAt: status.quarantinedAt, attempts: readHistory(status, t) });
    }
    const items = matching.slice(0, limit);
    const last = items[items.length - 1];
    const nextCursor = matching.length > limit && last !== undefined ? `${prefix}${last.position}` : null;
    return { items, nextCursor };
  }

  /** Section "listAudit({ limit, after, requestId })". */
  async listAudit(options: ListAuditOptions = {}): Promise<AuditPage> {
    checkOptionsObject("options", options);
    const limit = checkLimit(options.limit, MAX_PAGE_LIMIT, DEFAULT_PAGE_LIMIT);
    const { requestId } = options;
    if (requestId !== undefined && !isRequestId(requestId)) throw new InvalidArgumentError("requestId", "must be a UUIDv7 request id");
    const after = options.after === undefined || options.after === null ? 0 : parseCursor(AUDIT_CURSOR_PREFIX, options.after);
    const matching = this.state.audit.filter((entry) => entry.seq > after && (requestId === undefined || entry.requestId === requestId));
    const items = matching.slice(0, limit).map((entry) => ({ ...entry }));
    const last = items[items.length - 1];
    const nextCursor = matching.length > limit && last !== undefined ? `${AUDIT_CURSOR_PREFIX}${last.seq}` : null;
    return { items, nextCursor };
  }

  // ----------------------------------------------------------------- prune

  /** Section "prune({ now, limit })". */
  async prune(options: PruneOptions): Promise<{ pruned: number }> {
    return this.atomically(() => {
      checkOptionsObject("options", options);
      const now = checkInteger("now", options.now, 0, MAX_EPOCH_MS);
      const limit = checkLimit(options.limit, MAX_PRUNE_LIMIT, DEFAULT_PRUNE_LIMIT);
      return { pruned: this.pruneEvents(now, limit) };
    });
  }

  /** Delete up to `limit` prunable events in ascending `(observedAt, position)` order. */
  private pruneEvents(now: number, limit: number): number {
    const prunable = this.state.events.filter((stored) => this.isPrunable(stored, now));
    prunable.sort((a, b) => a.event.observedAt - b.event.observedAt || a.position - b.position);
    const victims = prunable.slice(0, limit);
    for (const stored of victims) this.deleteEvent(stored.position);
    return victims.length;
  }

  // -------------------------------------------------------------- debugging

  /** A plain-data picture of everything the model holds, for failure messages. */
  snapshot(): JournalOracleSnapshot {
    const t = this.clock();
    return {
      name: this.name,
      mode: this.mode,
      capacity: this.capacity,
      nextPosition: this.state.nextPosition,
      dropped: this.state.dropped,
      events: this.state.events.map((stored) => ({ position: stored.position, event: stored.event })),
      consumers: this.state.consumers.map((consumer) => ({
        consumer,
        statuses: this.state.events.map((stored) => {
          const status = this.statusOf(consumer, stored.position);
          return {
            position: stored.position,
            requestId: stored.event.id,
            state: status.state,
            attempts: status.attempts,
            budgetBase: status.budgetBase,
            availableAt: status.availableAt,
            reason: status.reason,
            quarantinedAt: status.quarantinedAt,
            history: readHistory(status, t),
          };
        }),
      })),
      audit: this.state.audit.map((entry) => ({ ...entry })),
    };
  }

  // ---------------------------------------------------------------- helpers

  /** Run `body` as one transaction: if it throws, the state is as before. */
  private atomically<T>(body: () => T): T {
    const saved = copyState(this.state);
    try {
      return body();
    } catch (error) {
      this.state = saved;
      throw error;
    }
  }

  private findEvent(requestId: string): StoredEvent | undefined {
    return this.state.events.find((stored) => stored.event.id === requestId);
  }

  private isRegistered(consumer: ConsumerId): boolean {
    return this.state.consumers.includes(consumer);
  }

  /**
   * A consumer registers by its first claim, pruning at `now` (the claim's `now`, or the clock when that is
   * earlier): every stored event becomes unfinished for it,
   * once every event due for pruning at `now` is gone (its backlog does not depend on how far the
   * bounded pruning of earlier calls came).
   *
   * All at once, here: the journal over an Engine registers in bounded steps, over several claims
   * when the journal is large ("Registration in steps" in the semantics). What the newcomer gets
   * is then what this registration at the claim that finishes it would give, or more: no event
   * is delivered to all while it registers (none the others finish meanwhile is pruned or
   * reclaimed), and an event its walk passed is not pruned when its window passes later. One
   * exception, under drop_oldest: an event the others finished, once the walk passed it, is not
   * reclaimed for room either, so a full journal drops its oldest open event instead (counted
   * in `dropped`), which this registration would have kept.
   */
  private register(consumer: ConsumerId, now: number): void {
    if (this.isRegistered(consumer)) return;
    this.pruneEvents(now, Infinity);
    this.state.consumers.push(consumer);
    const statuses = new Map<number, DeliveryStatus>();
    for (const stored of this.state.events) statuses.set(stored.position, freshStatus());
    this.state.statuses.set(consumer, statuses);
  }

  private statusesOf(consumer: ConsumerId): Map<number, DeliveryStatus> {
    const statuses = this.state.statuses.get(consumer);
    if (statuses === undefined) throw new Error(`JournalOracle: no statuses for registered consumer ${consumer}`);
    return statuses;
  }

  private statusOf(consumer: ConsumerId, position: number): DeliveryStatus {
    const status = this.statusesOf(consumer).get(position);
    if (status === undefined) throw new Error(`JournalOracle: no status of position ${position} for ${consumer}`);
    return status;
  }

  /** "Prunable" at `now`: delivered, and its window (from observedAt) has passed. */
  private isPrunable(stored: StoredEvent, now: number): boolean {
    return this.isDelivered(stored.position) && stored.event.observedAt + this.capacity.retainAcknowledgedMs <= now;
  }

  /** "Delivered": at least one consumer registered, and every one acked or discarded it. */
  private isDelivered(position: number): boolean {
    if (this.state.consumers.length === 0) return false;
    return this.state.consumers.every((consumer) => {
      const state = this.statusOf(consumer, position).state;
      return state === "acked" || state === "discarded";
    });
  }

  private isQuarantinedByAnyone(position: number): boolean {
    return this.state.consumers.some((consumer) => this.statusOf(consumer, position).state === "quarantined");
  }

  /** Forget an event: its request id, and every consumer's status and history of it. */
  private deleteEvent(position: number): void {
    this.state.events = this.state.events.filter((stored) => stored.position !== position);
    for (const consumer of this.state.consumers) this.statusesOf(consumer).delete(position);
  }
}
