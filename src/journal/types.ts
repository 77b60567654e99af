/**
 * The public shapes of the usage journal (`usage-journal-contract` in
 * `shared/spec`): events, consumers, deliveries, capacity, stats, and the
 * `UsageJournal` interface every implementation (core over an Engine, the
 * partitioned Durable Objects journal, the HTTP client) satisfies.
 *
 * Times are epoch milliseconds. Nothing here depends on a runtime.
 */
import type { JournalError } from "./errors.js";

/** A JSON value: what a usage record's `data` may hold. */
export type JsonValue = null | boolean | number | string | readonly JsonValue[] | { readonly [key: string]: JsonValue };

/**
 * The canonical usage record. `requestId` is the UUIDv7 minted when the request
 * was accepted; it is the event's identity and its idempotency key.
 */
export interface UsageRecord {
  readonly requestId: string;
  /** Together with `subject`, the ordering key: one caller inside one namespace. */
  readonly namespace: string;
  readonly subject: string;
  /** What is billed: any JSON value (e.g. `{ tokens: 42 }`). */
  readonly data: JsonValue;
}

/** The unit ordering is promised within: one caller inside one namespace. */
export interface OrderingKey {
  readonly namespace: string;
  readonly subject: string;
}

/**
 * One accepted usage event: an immutable envelope around the record. Build it
 * with `createUsageEvent`, which validates and freezes it.
 */
export interface UsageEvent {
  /** The request id (UUIDv7): identity and idempotency key of the event. */
  readonly id: string;
  readonly orderingKey: OrderingKey;
  readonly record: UsageRecord;
  /** When the record was first observed. Not part of the fact: the first observation wins. */
  readonly observedAt: number;
}

/** A named consumer (validated by `parseConsumerId`). */
export type ConsumerId = string & { readonly __consumerId: unique symbol };

/** The identity of one delivery attempt. `attempt` is 1 for the first; above 1 is a redelivery. */
export interface DeliveryId {
  readonly consumer: ConsumerId;
  /** The event's request id. */
  readonly event: string;
  readonly attempt: number;
}

/** One claimed event, leased to one consumer until `leaseExpiresAt`. */
export interface Delivery {
  readonly id: DeliveryId;
  readonly event: UsageEvent;
  readonly leaseExpiresAt: number;
}

/** What a claim asks for. */
export interface ClaimOptions {
  /** Upper bound on events returned (a positive integer). */
  readonly maxEvents: number;
  /** How long the returned events stay invisible to other claimants (ms, > 0). */
  readonly leaseMs: number;
  /** The claimant's clock reading (epoch ms). */
  readonly now: number;
  /**
   * Upper bound on the size of the deliveries returned, in bytes of their
   * JSON as UTF-8 (see `deliveryBytes`), like JetStream's `max_bytes`: a
   * claimant that holds or forwards its batch in memory bounds it by size,
   * not only by count. Deliveries are taken in claim order while their total
   * stays within it, and the claim stops before the first that would go over
   * (it never skips to a smaller one): what is not returned is not leased
   * and keeps its place. The first delivery is always returned, so an event
   * larger than the bound is still delivered, alone. Absent: no bound. A
   * positive integer.
   */
  readonly maxBytes?: number;
}

/** Outcome of one append. */
export type AppendResult =
  | { readonly status: "accepted"; readonly position: number }
  | { readonly status: "already_present"; readonly position: number };

/** Outcome of one event of an `appendBatch`. */
export type BatchAppendResult = AppendResult | { readonly status: "rejected"; readonly error: JournalError };

/** Outcome of one delivery of an `ackBatch`. */
export type AckResult = { readonly ok: true } | { readonly ok: false; readonly error: JournalError };

/** Why an event left the delivery path. */
export type PoisonReason = "malformed" | "rejected" | "attempts_exhausted";

/** What a full journal does. */
export type CapacityPolicy = "refuse" | "drop_oldest";

/** The bounds a journal is operated under. */
export interface Capacity {
  /** Events held (everything stored) before `policy` applies. */
  readonly maxEvents: number;
  /** Attempts one event gets before it is quarantined as `attempts_exhausted`. */
  readonly maxDeliveryAttempts: number;
  /** How long an event every consumer finished with is kept, from `observedAt` (ms). */
  readonly retainAcknowledgedMs: number;
  readonly policy: CapacityPolicy;
}

/** Which delivery guarantee a journal provides. */
export type DeliveryMode = "telemetry_grade" | "billing_grade";

/** One consumer's delivery position. */
export interface JournalStats {
  /** Stored, not finished by this consumer, not currently leased. */
  readonly pending: number;
  /** Claimed under a lease that has not expired. */
  readonly inFlight: number;
  /** Set aside as poison for this consumer, awaiting an operator. */
  readonly quarantined: number;
  /**
   * `now - observedAt` (at least 0) of the pending event observed earliest,
   * wherever it was appended (a late replay counts from when it happened):
   * how far behind the consumer is. Null when none is pending.
   */
  readonly oldestPendingAgeMs: number | null;
  /**
   * Events lost to `drop_oldest` (journal-wide), over the whole life of the
   * journal's data: a lifetime counter, never reset. A journal that has only
   * ever run under `refuse` reports 0 (a `refuse` journal never drops). Data
   * once written under `drop_oldest` and reopened under `refuse` keeps
   * reporting its past drops, where the spec says "always zero under
   * Refuse": a deliberate choice, since zeroing it would hide from operators
   * that events were lost (see `docs/journal-semantics.md`, "stats").
   */
  readonly dropped: number;
  readonly capacity: Capacity;
}

/** How one delivery attempt ended. `null` while it has not ended (see `Attempt.outcome`). */
export type AttemptOutcome =
  | { readonly kind: "acked"; readonly at: number }
  | { readonly kind: "nacked"; readonly at: number; readonly error: string }
  | { readonly kind: "quarantined"; readonly at: number; readonly reason: PoisonReason }
  | { readonly kind: "expired"; readonly at: number };

/** One delivery attempt of one event to one consumer. */
export interface Attempt {
  readonly attempt: number;
  readonly claimedAt: number;
  readonly leaseExpiresAt: number;
  /**
   * How the attempt ended; `null` while its lease is still running. An attempt
   * whose lease ran out without a verdict reads as `expired` at its
   * `leaseExpiresAt`.
   */
  readonly outcome: AttemptOutcome | null;
}

/** A quarantined event as an operator sees it. */
export interface QuarantinedEvent {
  readonly consumer: ConsumerId;
  readonly event: UsageEvent;
  readonly position: number;
  readonly reason: PoisonReason;
  readonly quarantinedAt: number;
  /** Its attempt history, as `attempts()` reads it (the latest `MAX_KEPT_ATTEMPTS`). */
  readonly attempts: readonly Attempt[];
}

/** A page of quarantined events. `nextCursor` is null on the last page. */
export interface QuarantinePage {
  readonly items: readonly QuarantinedEvent[];
  readonly nextCursor: string | null;
}

/** Options of `listQuarantined`. */
export interface ListQuarantinedOptions {
  /** Page size, 1..1000 (default 100). */
  readonly limit?: number;
  /** The `nextCursor` of the previous page. */
  readonly after?: string | null;
  /** Case-insensitive substring of the request id, the ordering key `namespace/subject`, or the reason. */
  readonly query?: string;
  /**
   * `"oldest"` (default): oldest position first. `"newest"`: newest position
   * first (what an operator reviews first). A cursor continues in the order
   * it was issued for; using it with the other order is `invalid_argument`.
   */
  readonly order?: "oldest" | "newest";
}

/** An operator action, as the audit log records it. */
export interface AuditEntry {
  /** Increasing sequence number within the journal. */
  readonly seq: number;
  readonly at: number;
  readonly action: "release" | "discard";
  readonly consumer: ConsumerId;
  readonly requestId: string;
  /** The quarantine reason the action resolved. */
  readonly reason: PoisonReason;
  /** Who did it, as the caller reported (e.g. a token name). */
  readonly actor: string | null;
}

/** A page of the audit log. */
export interface AuditPage {
  readonly items: readonly AuditEntry[];
  readonly nextCursor: string | null;
}

/** Options of `listAudit`. */
export interface ListAuditOptions {
  /** Entries per page, 1..1000 (default 100). */
  readonly limit?: number;
  /** The `nextCursor` of the previous page of the same listing (same `requestId`); absent or null for the first page. */
  readonly after?: string | null;
  /**
   * Only the entries of this event (a UUIDv7 request id), every consumer's:
   * read from a per-event index, so inspecting one event does not walk the
   * whole log.
   */
  readonly requestId?: string;
}

/** Options of `release` and `discard`. */
export interface OperatorActionOptions {
  readonly now: number;
  /** Who is acting (recorded in the audit log); at most 200 characters. */
  readonly actor?: string;
}

/** Options of `extend`. */
export interface ExtendOptions {
  /** The new lease runs until `now + leaseMs`. */
  readonly leaseMs: number;
  readonly now: number;
}

/** Options of `nack`. */
export interface NackOptions {
  /** The event becomes claimable again at `now + retryAfterMs` (>= 0). */
  readonly retryAfterMs: number;
  /** Why the attempt failed (kept in the attempt history); at most 2000 characters. */
  readonly error: string;
  readonly now: number;
}

/** Options of `prune`. */
export interface PruneOptions {
  readonly now: number;
  /** At most this many events (default 1000). */
  readonly limit?: number;
}

/**
 * A durable, replayable log of accepted usage events with per-consumer
 * delivery state. Implemented by the core over an Engine (`createJournal`), by
 * the partitioned Durable Objects journal and by the HTTP client.
 */
export interface UsageJournal {
  /** Stable, low-cardinality name: a metric dimension. */
  readonly name: string;
  readonly capacity: Capacity;
  /** `telemetry_grade` when the storage does not outlive the process. */
  readonly mode: DeliveryMode;

  /** Append an accepted event, idempotently on its request id. */
  append(event: UsageEvent): Promise<AppendResult>;
  /** Append several events in one transaction; one result per event, in order. */
  appendBatch(events: readonly UsageEvent[]): Promise<BatchAppendResult[]>;
  /**
   * Claim up to `maxEvents` deliverable events, at most one per ordering key, ordered by position.
   *
   * A consumer's first claim registers it: every stored event joins its backlog. Over a large
   * journal that takes more than one claim (the journal over an Engine walks the stored events in
   * bounded steps, a transaction each and at most 50,000 events per call), so a newcomer's first
   * claims may answer `[]` while it catches up, and until it has, it reads as unregistered
   * (`stats`, `attempts`, verdicts): keep claiming. Retention and reclaiming treat it as registered
   * from its first claim: nothing the other consumers finish from then on is pruned or reclaimed
   * before the newcomer has finished it too.
   */
  claim(consumer: ConsumerId, options: ClaimOptions): Promise<Delivery[]>;
  /** Acknowledge a delivered event (idempotent). */
  ack(delivery: DeliveryId): Promise<void>;
  /**
   * Acknowledge up to 1000 deliveries in one transaction; one result per
   * delivery, in order. Each is exactly `ack`: a refused one (e.g.
   * `not_outstanding`) is reported in place and does not stop the others.
   */
  ackBatch(deliveries: readonly DeliveryId[]): Promise<AckResult[]>;
  /** Set a delivered event aside as poison (idempotent; keeps the first reason). */
  quarantine(delivery: DeliveryId, reason: PoisonReason): Promise<void>;
  /** Heartbeat: the current attempt of an unexpired lease runs until `now + leaseMs`. */
  extend(delivery: DeliveryId, options: ExtendOptions): Promise<{ leaseExpiresAt: number }>;
  /** Give the current attempt back early; claimable again after `retryAfterMs`. */
  nack(delivery: DeliveryId, options: NackOptions): Promise<void>;
  /** Depth, in-flight count, oldest pending age, quarantine count and capacity. */
  stats(consumer: ConsumerId): Promise<JournalStats>;
  /**
   * The delivery attempts of one event to one consumer, oldest first (empty
   * when none): the latest `MAX_KEPT_ATTEMPTS` (32) of them; older ones are
   * forgotten, and the first kept attempt's number says how many.
   */
  attempts(consumer: ConsumerId, requestId: string): Promise<Attempt[]>;
  /** Quarantined events of one consumer, oldest position first, in cursor pages. */
  listQuarantined(consumer: ConsumerId, options?: ListQuarantinedOptions): Promise<QuarantinePage>;
  /** Operator: put a quarantined event back on its key at its original position, attempt budget reset. */
  release(consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<void>;
  /** Operator: finish a quarantined event without delivering it (it becomes prunable). */
  discard(consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<void>;
  /** The operator audit log (or one event's part of it, with `requestId`), oldest first, in cursor pages. */
  listAudit(options?: ListAuditOptions): Promise<AuditPage>;
  /** Forget events every registered consumer finished with whose window has passed. */
  prune(options: PruneOptions): Promise<{ pruned: number }>;
}
