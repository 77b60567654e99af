/**
 * Typed errors of the usage journal. Every error the journal throws is a
 * `JournalError` with a stable `code` (a metric dimension and the key the
 * HTTP layer maps to a status) and the fields the spec names. Codes never
 * change meaning; new ones may be added.
 */
import type { Capacity, DeliveryId } from "./types.js";

/** Every code a journal error can carry. */
export type JournalErrorCode =
  | "at_capacity"
  | "conflict"
  | "not_outstanding"
  | "quarantined"
  | "already_acknowledged"
  | "not_quarantined"
  | "backend"
  | "invalid_event"
  | "invalid_consumer_id"
  | "invalid_argument";

/** Base class of every journal error. Narrow on `code`. */
export class JournalError extends Error {
  readonly code: JournalErrorCode;
  /** Whether repeating the same call later may succeed. */
  readonly retryable: boolean;
  constructor(code: JournalErrorCode, message: string, options?: { cause?: unknown; retryable?: boolean }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "JournalError";
    this.code = code;
    this.retryable = options?.retryable ?? false;
  }
}

/** Renders a delivery id as the spec does: `consumer:event#attempt`. */
export function formatDeliveryId(delivery: DeliveryId): string {
  return `${delivery.consumer}:${delivery.event}#${delivery.attempt}`;
}

/**
 * The journal is full and cannot make room (policy `refuse`, or everything it
 * holds is quarantined or undeliverable). The event was NOT journaled.
 */
export class AtCapacityError extends JournalError {
  declare readonly code: "at_capacity";
  /**
   * Events the journal is retaining, all of them undelivered (the spec's
   * count: delivered events are given up first). A refused append changes
   * nothing, so when the journal holds more than `capacity.maxEvents` (data
   * written under a larger limit) and some stored events are delivered, this
   * is the count they would have left, below what `stats` shows (see
   * docs/journal-semantics.md, `append`).
   */
  readonly pending: number;
  readonly capacity: Capacity;
  constructor(pending: number, capacity: Capacity) {
    super(
      "at_capacity",
      `usage journal is at capacity (${pending} events retained, limit ${capacity.maxEvents}); the event was not journaled`,
      { retryable: true },
    );
    this.name = "AtCapacityError";
    this.pending = pending;
    this.capacity = capacity;
  }
}

/** The same request id was appended with a different record. */
export class EventConflictError extends JournalError {
  declare readonly code: "conflict";
  /** The idempotency key (request id). */
  readonly key: string;
  constructor(key: string) {
    super("conflict", `usage event \`${key}\` was already journaled with different content`);
    this.name = "EventConflictError";
    this.key = key;
  }
}

/** The consumer was never handed this event, or it is no longer journaled (or no longer this attempt's). */
export class NotOutstandingError extends JournalError {
  declare readonly code: "not_outstanding";
  readonly delivery: DeliveryId;
  /**
   * Beyond the spec: true when the journal found the delivery's event stored
   * (and refused for another reason: an expired lease, an older attempt, a
   * discarded event, one never delivered to this consumer), false when it did
   * not (not journaled, or the consumer never claimed) or does not say. A
   * journal split over several (the partitioned journal) asks the others
   * for the event only when it is false.
   */
  readonly eventStored: boolean;
  constructor(delivery: DeliveryId, detail?: string, eventStored = false) {
    super("not_outstanding", `delivery \`${formatDeliveryId(delivery)}\` is not outstanding${detail ? `: ${detail}` : ""}`);
    this.name = "NotOutstandingError";
    this.delivery = delivery;
    this.eventStored = eventStored;
  }
}

/** The event is quarantined for this consumer; an operator has to release it. */
export class QuarantinedError extends JournalError {
  declare readonly code: "quarantined";
  readonly delivery: DeliveryId;
  constructor(delivery: DeliveryId) {
    super("quarantined", `delivery \`${formatDeliveryId(delivery)}\` is quarantined; an operator has to release it`);
    this.name = "QuarantinedError";
    this.delivery = delivery;
  }
}

/** The event was already acknowledged by this consumer. */
export class AlreadyAcknowledgedError extends JournalError {
  declare readonly code: "already_acknowledged";
  readonly delivery: DeliveryId;
  constructor(delivery: DeliveryId) {
    super("already_acknowledged", `delivery \`${formatDeliveryId(delivery)}\` was already acknowledged`);
    this.name = "AlreadyAcknowledgedError";
    this.delivery = delivery;
  }
}

/** An operator action named an event that is not quarantined for that consumer. */
export class NotQuarantinedError extends JournalError {
  declare readonly code: "not_quarantined";
  readonly consumer: string;
  readonly requestId: string;
  constructor(consumer: string, requestId: string) {
    super("not_quarantined", `usage event \`${requestId}\` is not quarantined for consumer \`${consumer}\``);
    this.name = "NotQuarantinedError";
    this.consumer = consumer;
    this.requestId = requestId;
  }
}

/** The storage engine failed. `cause` is the engine's error. */
export class BackendError extends JournalError {
  declare readonly code: "backend";
  constructor(message: string, options?: { cause?: unknown; retryable?: boolean }) {
    super("backend", `usage journal backend: ${message}`, options);
    this.name = "BackendError";
  }
}

/** A record could not become an event. `rule` names the rule it broke. */
export class InvalidEventError extends JournalError {
  declare readonly code: "invalid_event";
  readonly requestId: string;
  readonly rule: string;
  constructor(requestId: string, rule: string, reason: string) {
    super("invalid_event", `\`${requestId}\` is not a usage event: ${reason}`);
    this.name = "InvalidEventError";
    this.requestId = requestId;
    this.rule = rule;
  }
}

/**
 * A consumer name was refused (the spec's `InvalidConsumerId`). `rule` is
 * `empty`, `too_long` (the spec's `TooLong { name, max }`) or `character`
 * (`Character { name, character }`); `consumer` is the spec's `name`. The
 * rules apply in that order, so a name both too long and holding a character
 * not allowed is `too_long`.
 */
export class InvalidConsumerIdError extends JournalError {
  declare readonly code: "invalid_consumer_id";
  /** The name as given. */
  readonly consumer: string;
  readonly rule: "empty" | "too_long" | "character";
  /**
   * With `too_long` only: the limit, in bytes of UTF-8 (63, `MAX_CONSUMER_ID_LENGTH`;
   * a valid name is ASCII, so also characters). Absent with the other rules.
   */
  declare readonly max?: number;
  /**
   * With `character` only: the first character of the name not allowed (one
   * code point, e.g. `"é"` or `"😀"`). Absent with the other rules.
   */
  declare readonly character?: string;
  constructor(
    consumer: string,
    rule: "empty" | "too_long" | "character",
    message: string,
    details: { readonly max?: number; readonly character?: string } = {},
  ) {
    super("invalid_consumer_id", message);
    this.name = "InvalidConsumerIdError";
    this.consumer = consumer;
    this.rule = rule;
    // Own properties only where the rule has them (`"max" in error` says which).
    if (rule === "too_long" && details.max !== undefined) (this as { max?: number }).max = details.max;
    if (rule === "character" && details.character !== undefined) (this as { character?: string }).character = details.character;
  }
}

/** An option or argument is out of its range. `argument` names it. */
export class InvalidArgumentError extends JournalError {
  declare readonly code: "invalid_argument";
  readonly argument: string;
  constructor(argument: string, message: string) {
    super("invalid_argument", `${argument}: ${message}`);
    this.name = "InvalidArgumentError";
    this.argument = argument;
  }
}
