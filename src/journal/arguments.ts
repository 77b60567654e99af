/**
 * The argument checks of every `UsageJournal` call, in one place, so that
 * each implementation (the core journal, the partitioned journal, the HTTP
 * client) refuses bad input with the same typed error, naming the same
 * argument, before it touches storage or the network.
 */
import { InvalidArgumentError, JournalError } from "./errors.js";
import { checkDeliveryId, checkInteger, checkText, checkUsageEvent, isRequestId, MAX_EPOCH_MS, parseConsumerId } from "./event.js";
import { utf8Length } from "../storage/names.js";
import type {
  ClaimOptions,
  ConsumerId,
  Delivery,
  DeliveryId,
  ExtendOptions,
  ListAuditOptions,
  ListQuarantinedOptions,
  NackOptions,
  OperatorActionOptions,
  PoisonReason,
  PruneOptions,
  UsageEvent,
} from "./types.js";

/** The longest `query` of `listQuarantined` (characters). */
export const MAX_QUARANTINE_QUERY = 200;

/** Most events one `appendBatch` takes. */
export const MAX_BATCH_EVENTS = 1000;
/** Longest lease: 12 hours. */
export const MAX_LEASE_MS = 12 * 60 * 60 * 1000;
/** Most events one claim returns. */
export const MAX_CLAIM_EVENTS = 10_000;
/**
 * Most attempts the history of one event and consumer keeps: the latest
 * ones. Without a bound, an event nacked or released again and again would
 * grow its row past what a store takes in one row (a Durable Object's
 * SQLite row, 2 MB) and stall every claim that reads it; 32 attempts with the
 * longest nack errors stay far below. The `attempt` numbers of the kept
 * attempts say how many came before.
 */
export const MAX_KEPT_ATTEMPTS = 32;
/** Longest cursor text any journal issues or accepts. */
export const MAX_CURSOR_CHARS = 4096;

/** The reasons an event may be quarantined for. */
export const POISON_REASONS: readonly PoisonReason[] = Object.freeze(["malformed", "rejected", "attempts_exhausted"]);

/**
 * A clock reading: an integer of epoch ms from 0 to {@link MAX_EPOCH_MS}
 * (8.64e15, the latest time a `Date` holds), so that it plus the longest lease
 * or delay ({@link MAX_LEASE_MS}) stays a safe integer.
 *
 * @throws InvalidArgumentError naming `argument`, with the range.
 */
export function checkNow(argument: string, now: unknown): number {
  return checkInteger(argument, now, 0, MAX_EPOCH_MS);
}

/** A request id given as an argument (not inside an event). */
export function checkRequestId(requestId: unknown): string {
  if (!isRequestId(requestId)) throw new InvalidArgumentError("requestId", "must be a UUIDv7 request id");
  return requestId;
}

/** The events of an `appendBatch`: each checked event, or the error that refuses it in place. */
export function checkBatch(events: readonly UsageEvent[]): (UsageEvent | JournalError)[] {
  const list: unknown = events;
  if (!Array.isArray(list)) throw new InvalidArgumentError("events", "must be an array of usage events");
  if (events.length > MAX_BATCH_EVENTS) {
    throw new InvalidArgumentError("events", `a batch holds at most ${MAX_BATCH_EVENTS} events, got ${events.length}`);
  }
  // Array.from, not map: map skips the holes of a sparse array, which must be refused in place too.
  return Array.from(events, (event): UsageEvent | JournalError => {
    try {
      return checkUsageEvent(event);
    } catch (error) {
      if (error instanceof JournalError) return error;
      throw error;
    }
  });
}

/** Most deliveries one `ackBatch` takes. */
export const MAX_ACK_BATCH = 1000;

/** The deliveries of an `ackBatch`: each checked delivery id, or the error that refuses it in place. */
export function checkAckBatch(deliveries: readonly DeliveryId[]): (DeliveryId | JournalError)[] {
  const list: unknown = deliveries;
  if (!Array.isArray(list)) throw new InvalidArgumentError("deliveries", "must be an array of delivery ids");
  if (deliveries.length > MAX_ACK_BATCH) {
    throw new InvalidArgumentError("deliveries", `a batch holds at most ${MAX_ACK_BATCH} deliveries, got ${deliveries.length}`);
  }
  return Array.from(deliveries, (delivery): DeliveryId | JournalError => {
    try {
      return checkDeliveryId(delivery);
    } catch (error) {
      if (error instanceof JournalError) return error;
      throw error;
    }
  });
}

/** The arguments of `claim`. */
export function checkClaim(
  consumer: ConsumerId,
  options: ClaimOptions,
): { consumer: ConsumerId; maxEvents: number; leaseMs: number; now: number; maxBytes: number } {
  const id = parseConsumerId(consumer);
  if (options === null || typeof options !== "object") throw new InvalidArgumentError("options", "claim needs { maxEvents, leaseMs, now }");
  return {
    consumer: id,
    maxEvents: checkInteger("maxEvents", options.maxEvents, 1, MAX_CLAIM_EVENTS),
    leaseMs: checkInteger("leaseMs", options.leaseMs, 1, MAX_LEASE_MS),
    now: checkNow("now", options.now),
    maxBytes: checkMaxBytes(options.maxBytes),
  };
}

/** A claim's `maxBytes`: absent (no bound: `Infinity`) or a positive safe integer. */
export function checkMaxBytes(maxBytes: unknown): number {
  return maxBytes === undefined ? Infinity : checkInteger("maxBytes", maxBytes, 1);
}

/**
 * The size a claim's `maxBytes` counts for one delivery: the bytes of its
 * JSON (`JSON.stringify(delivery)`) as UTF-8, which is what it takes in an
 * HTTP answer. Every implementation counts with this function, so the same
 * claim returns the same deliveries from each.
 *
 * @example
 * const batch = await journal.claim(billing, { maxEvents: 1000, leaseMs: 30_000, now: Date.now(), maxBytes: 1 << 20 });
 * batch.reduce((sum, delivery) => sum + deliveryBytes(delivery), 0); // at most 1 MiB, unless batch.length is 1
 */
export function deliveryBytes(delivery: Delivery): number {
  return utf8Length(JSON.stringify(delivery));
}

/** The arguments of `quarantine`. */
export function checkQuarantine(delivery: DeliveryId, reason: PoisonReason): { delivery: DeliveryId; reason: PoisonReason } {
  const id = checkDeliveryId(delivery);
  if (!POISON_REASONS.includes(reason)) throw new InvalidArgumentError("reason", `must be one of ${POISON_REASONS.join(", ")}`);
  return { delivery: id, reason };
}

/** The arguments of `extend`. */
export function checkExtend(delivery: DeliveryId, options: ExtendOptions): { delivery: DeliveryId; leaseMs: number; now: number } {
  const id = checkDeliveryId(delivery);
  if (options === null || typeof options !== "object") throw new InvalidArgumentError("options", "extend needs { leaseMs, now }");
  return { delivery: id, leaseMs: checkInteger("leaseMs", options.leaseMs, 1, MAX_LEASE_MS), now: checkNow("now", options.now) };
}

/** The arguments of `nack`. */
export function checkNack(delivery: DeliveryId, options: NackOptions): { delivery: DeliveryId; retryAfterMs: number; error: string; now: number } {
  const id = checkDeliveryId(delivery);
  if (options === null || typeof options !== "object") throw new InvalidArgumentError("options", "nack needs { retryAfterMs, error, now }");
  return {
    delivery: id,
    retryAfterMs: checkInteger("retryAfterMs", options.retryAfterMs, 0, MAX_LEASE_MS),
    error: checkText("error", options.error, 2000),
    now: checkNow("now", options.now),
  };
}

/** The arguments of `attempts`. */
export function checkAttempts(consumer: ConsumerId, requestId: string): { consumer: ConsumerId; requestId: string } {
  return { consumer: parseConsumerId(consumer), requestId: checkRequestId(requestId) };
}

/** A cursor argument: absent, null, or a string (each journal parses its own format). */
export function checkCursorText(after: unknown): string | null {
  if (after === undefined || after === null) return null;
  if (typeof after !== "string" || after.length === 0 || after.length > MAX_CURSOR_CHARS) {
    throw new InvalidArgumentError("after", "is not a cursor this journal issued");
  }
  return after;
}

/** The arguments of `listQuarantined`; `query` is lowercased ("" when absent), `after` is left for the journal to parse. */
export function checkListQuarantined(
  consumer: ConsumerId,
  options: ListQuarantinedOptions,
): { consumer: ConsumerId; limit: number; after: string | null | undefined; query: string; order: "oldest" | "newest" } {
  const id = parseConsumerId(consumer);
  if (options === null || typeof options !== "object") throw new InvalidArgumentError("options", "must be an object");
  const limit = checkInteger("limit", options.limit ?? 100, 1, 1000);
  const query = options.query === undefined ? "" : checkText("query", options.query, MAX_QUARANTINE_QUERY).toLowerCase();
  const order = options.order ?? "oldest";
  if (order !== "oldest" && order !== "newest") throw new InvalidArgumentError("order", 'must be "oldest" or "newest"');
  return { consumer: id, limit, after: options.after, query, order };
}

/** The arguments of `release` and `discard`. */
export function checkOperatorAction(
  action: "release" | "discard",
  consumer: ConsumerId,
  requestId: string,
  options: OperatorActionOptions,
): { consumer: ConsumerId; requestId: string; now: number; actor: string | null } {
  const id = parseConsumerId(consumer);
  const request = checkRequestId(requestId);
  if (options === null || typeof options !== "object") throw new InvalidArgumentError("options", `${action} needs { now }`);
  return {
    consumer: id,
    requestId: request,
    now: checkNow("now", options.now),
    actor: options.actor === undefined ? null : checkText("actor", options.actor, 200),
  };
}

/** The arguments of `listAudit`; `after` is left for the journal to parse. */
export function checkListAudit(options: ListAuditOptions): { limit: number; after: string | null | undefined; requestId: string | undefined } {
  if (options === null || typeof options !== "object") throw new InvalidArgumentError("options", "must be an object");
  const limit = checkInteger("limit", options.limit ?? 100, 1, 1000);
  return { limit, after: options.after, requestId: options.requestId === undefined ? undefined : checkRequestId(options.requestId) };
}

/** The arguments of `prune`. */
export function checkPrune(options: PruneOptions): { now: number; limit: number } {
  if (options === null || typeof options !== "object") throw new InvalidArgumentError("options", "prune needs { now }");
  return { now: checkNow("now", options.now), limit: checkInteger("limit", options.limit ?? 1000, 1, 100_000) };
}

/**
 * How far a claim's `now` may be behind the `now` of an earlier claim of the
 * same consumer before the leases claimed after it count as lapsed (5
 * minutes): a claimer's clock that went back that far (set back by hand, or
 * corrected after booting ahead) would otherwise keep those events in flight
 * for as long as the jump. Claimers whose clocks differ by less keep each
 * other's leases.
 */
export const CLOCK_BACK_TOLERANCE_MS = 5 * 60_000;
