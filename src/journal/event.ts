/**
 * Building and checking the journal's inputs: usage events (with their UUIDv7
 * identity), consumer names, delivery ids and capacity. Everything that enters
 * a journal passes through here, so a bad input is refused with a typed error
 * before anything is written.
 */
import { InvalidArgumentError, InvalidConsumerIdError, InvalidEventError } from "./errors.js";
import type { Capacity, ConsumerId, DeliveryId, JsonValue, UsageEvent, UsageRecord } from "./types.js";
import { utf8Length } from "../storage/names.js";
import { randomBytes } from "../storage/web.js";
import { hasLoneSurrogate } from "../unicode.js";

/**
 * The longest consumer name, in bytes of UTF-8 (as the spec's `ConsumerId::MAX_LEN`
 * measures `str::len`). A valid name is ASCII, so it is also 63 characters.
 */
export const MAX_CONSUMER_ID_LENGTH = 63;
/** The longest namespace or subject (characters). */
export const MAX_ORDERING_PART_LENGTH = 256;
/** The largest record `data`, measured as canonical JSON (characters). */
export const MAX_RECORD_DATA_CHARS = 64 * 1024;
/** The deepest nesting of record `data`. */
export const MAX_RECORD_DATA_DEPTH = 32;
/**
 * The latest time a journal takes, in epoch ms: 8.64e15 (year 275760), the
 * last instant a JavaScript `Date` holds. An event's `observedAt` and the
 * `now` of every call (claim, extend, nack, release, discard, prune) are
 * integers from 0 to this; past it they are refused like any bad value. So
 * `now` plus the longest lease or nack delay (12 hours) is still a safe
 * integer, and every time a journal answers is a valid `Date`.
 */
export const MAX_EPOCH_MS = 8_640_000_000_000_000;

/**
 * The spec's conservative default for a billing-grade journal: refuse rather
 * than lose, 8 attempts, acknowledged events kept 24 hours.
 */
export const BILLING_GRADE: Capacity = Object.freeze({
  maxEvents: 1_000_000,
  maxDeliveryAttempts: 8,
  retainAcknowledgedMs: 24 * 60 * 60 * 1000,
  policy: "refuse",
});

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Whether `text` is a UUIDv7 in canonical (lowercase, hyphenated) form. */
export function isRequestId(text: unknown): text is string {
  return typeof text === "string" && UUID_V7.test(text);
}

let lastMs = -1;
let sequence = 0;

/**
 * Mint a UUIDv7 request id. Ids minted by one process sort by time, and ids
 * minted within the same millisecond still sort in minting order (the 12-bit
 * `rand_a` field is a counter seeded at random each millisecond).
 *
 * @example
 * const requestId = newRequestId(); // "01890a5d-ac96-7f3e-9b2a-..."
 */
export function newRequestId(now: number = Date.now()): string {
  let ms = Math.max(0, Math.floor(now));
  const random = randomBytes(10);
  if (ms <= lastMs) {
    ms = lastMs;
    sequence += 1;
    if (sequence > 0xfff) {
      ms += 1;
      sequence = random[0]! & 0x3ff;
    }
  } else {
    sequence = ((random[0]! << 8) | random[1]!) & 0x3ff;
  }
  lastMs = ms;
  const hex = (value: number, width: number) => value.toString(16).padStart(width, "0");
  const timeHex = hex(ms, 12);
  const randA = hex(0x7000 | sequence, 4);
  const variant = hex(0x8000 | ((random[2]! << 8) | random[3]!) & 0x3fff, 4);
  let tail = "";
  for (let i = 4; i < 10; i++) tail += hex(random[i]!, 2);
  return `${timeHex.slice(0, 8)}-${timeHex.slice(8)}-${randA}-${variant}-${tail}`;
}

/**
 * Parse a consumer name: 1 to 63 characters of lowercase ASCII letters,
 * digits, `-` and `_` (it is a storage key, a metric dimension and something
 * an operator types).
 *
 * The rules apply in the spec's order: empty, then the length in bytes of
 * UTF-8 (so `"é".repeat(32)`, 32 characters but 64 bytes, is `too_long`),
 * then the characters.
 *
 * @throws InvalidConsumerIdError with `rule` `empty`, `too_long` (and `max`,
 *   63) or `character` (and `character`, the first one not allowed).
 * @example
 * const consumer = parseConsumerId("billing");
 */
export function parseConsumerId(name: string): ConsumerId {
  if (typeof name !== "string" || name.length === 0) {
    throw new InvalidConsumerIdError(String(name ?? ""), "empty", "a consumer name must not be empty");
  }
  // A UTF-16 unit is at least one byte: a name over 63 units needs no counting.
  if (name.length > MAX_CONSUMER_ID_LENGTH || utf8Length(name) > MAX_CONSUMER_ID_LENGTH) {
    throw new InvalidConsumerIdError(
      name,
      "too_long",
      `consumer name \`${name}\` is over the ${MAX_CONSUMER_ID_LENGTH}-byte limit`,
      { max: MAX_CONSUMER_ID_LENGTH },
    );
  }
  for (const character of name) {
    const ok = (character >= "a" && character <= "z") || (character >= "0" && character <= "9") || character === "-" || character === "_";
    if (!ok) {
      throw new InvalidConsumerIdError(
        name,
        "character",
        `consumer name \`${name}\` contains \`${character}\`; use lowercase letters, digits, \`-\`, and \`_\``,
        { character },
      );
    }
  }
  return name as ConsumerId;
}

/**
 * Canonical JSON of a JSON value: object keys sorted, no whitespace, `-0` as
 * `0`. Two records are the same fact exactly when their canonical JSON is equal.
 */
export function canonicalJson(value: JsonValue): string {
  if (value === null || typeof value === "boolean" || typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number") return Object.is(value, -0) ? "0" : JSON.stringify(value);
  if (Array.isArray(value)) return `[${(value as readonly JsonValue[]).map(canonicalJson).join(",")}]`;
  const object = value as { readonly [key: string]: JsonValue };
  const keys = Object.keys(object).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(object[k]!)}`).join(",")}}`;
}

/** Why `value` is not a JSON value within the bounds, or null when it is. */
function jsonProblem(value: unknown, depth: number): string | null {
  if (depth > MAX_RECORD_DATA_DEPTH) return `nested deeper than ${MAX_RECORD_DATA_DEPTH} levels`;
  if (value === null || typeof value === "boolean" || typeof value === "string") return null;
  if (typeof value === "number") return Number.isFinite(value) ? null : `holds the non-finite number ${value}`;
  if (Array.isArray(value)) {
    for (const item of value) {
      const problem = jsonProblem(item, depth + 1);
      if (problem) return problem;
    }
    return null;
  }
  if (typeof value === "object") {
    const proto = Object.getPrototypeOf(value) as unknown;
    if (proto !== Object.prototype && proto !== null) return "holds an object that is not a plain object";
    for (const item of Object.values(value)) {
      const problem = jsonProblem(item, depth + 1);
      if (problem) return problem;
    }
    return null;
  }
  return `holds a value of type ${typeof value}`;
}

/**
 * Events this module built: deeply frozen and canonical, so checking one again
 * at a journal's boundary can be skipped (it cannot have changed since).
 */
const built = new WeakSet<object>();

function remember(event: UsageEvent): UsageEvent {
  built.add(event);
  return event;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object") {
    for (const item of Object.values(value)) deepFreeze(item);
    Object.freeze(value);
  }
  return value;
}

function checkOrderingPart(requestId: string, field: string, value: unknown): string {
  if (typeof value !== "string" || value.length === 0) {
    throw new InvalidEventError(requestId, field, `\`${field}\` must be a non-empty string`);
  }
  if (value.length > MAX_ORDERING_PART_LENGTH) {
    throw new InvalidEventError(requestId, field, `\`${field}\` is over ${MAX_ORDERING_PART_LENGTH} characters`);
  }
  // An ordering key is matched exactly (filters, listings, the operator's bulk actions), also through URLs
  // and UTF-8 text, which turn a lone surrogate into U+FFFD: one could not be told from another key.
  if (hasLoneSurrogate(value)) {
    throw new InvalidEventError(requestId, field, `\`${field}\` holds a lone surrogate (not well-formed UTF-16): it would not survive a URL or UTF-8 text unchanged`);
  }
  return value;
}

/** What `createUsageEvent` takes: a record and when it was observed. */
export interface ObservedRecord {
  readonly record: UsageRecord;
  /** Epoch ms, an integer from 0 to {@link MAX_EPOCH_MS}. */
  readonly observedAt: number;
}

/**
 * Wrap an observed record as an immutable usage event, taking its identity from
 * the record's own `requestId`. A record whose id is not a UUIDv7 is refused
 * rather than given a fresh id: a re-identified event is a duplicate no consumer
 * could detect.
 *
 * @throws InvalidEventError naming the rule broken (`request_id`, `namespace`,
 *   `subject`, `data`, `observed_at`: not an integer from 0 to
 *   {@link MAX_EPOCH_MS}).
 * @example
 * const event = createUsageEvent({
 *   record: { requestId: newRequestId(), namespace: "acme", subject: "user-1", data: { tokens: 42 } },
 *   observedAt: Date.now(),
 * });
 */
export function createUsageEvent(observed: ObservedRecord): UsageEvent {
  return buildUsageEvent(observed, MAX_EPOCH_MS);
}

/**
 * An event a journal already stored, rebuilt from its JSON (an HTTP answer):
 * checked as {@link createUsageEvent} checks one, except that `observedAt`
 * may be any non-negative safe integer. Events stored before times were
 * bounded by {@link MAX_EPOCH_MS} may be later, and an answer holding one must
 * still be read (a claim leases it, a quarantine listing shows it).
 */
export function storedUsageEvent(observed: ObservedRecord): UsageEvent {
  return buildUsageEvent(observed, Number.MAX_SAFE_INTEGER);
}

function buildUsageEvent(observed: ObservedRecord, latest: number): UsageEvent {
  const record = (observed as { record?: unknown } | null | undefined)?.record as Partial<UsageRecord> | undefined;
  if (record === null || typeof record !== "object") {
    throw new InvalidEventError("", "record", "a usage event needs a record object");
  }
  const requestId = record.requestId;
  if (!isRequestId(requestId)) {
    throw new InvalidEventError(
      String(requestId),
      "request_id",
      "the request id must be a UUIDv7 in lowercase hyphenated form",
    );
  }
  const namespace = checkOrderingPart(requestId, "namespace", record.namespace);
  const subject = checkOrderingPart(requestId, "subject", record.subject);
  const problem = jsonProblem(record.data, 0);
  if (problem !== null || record.data === undefined) {
    throw new InvalidEventError(requestId, "data", `\`data\` must be a JSON value: it ${problem ?? "is missing"}`);
  }
  const canonical = canonicalJson(record.data);
  if (canonical.length > MAX_RECORD_DATA_CHARS) {
    throw new InvalidEventError(requestId, "data", `\`data\` is over ${MAX_RECORD_DATA_CHARS} characters of JSON`);
  }
  const observedAt = observed.observedAt;
  if (!Number.isSafeInteger(observedAt) || observedAt < 0 || observedAt > latest) {
    throw new InvalidEventError(requestId, "observed_at", `\`observedAt\` must be an integer of epoch milliseconds from 0 to ${latest}${latest === MAX_EPOCH_MS ? " (what a Date holds)" : ""}`);
  }
  const data = JSON.parse(canonical) as JsonValue;
  const event: UsageEvent = deepFreeze({
    id: requestId,
    orderingKey: { namespace, subject },
    record: { requestId, namespace, subject, data },
    observedAt,
  });
  // Only an event a journal would take now counts as checked: a stored one past the bound is refused if appended again.
  return observedAt <= MAX_EPOCH_MS ? remember(event) : event;
}

/**
 * Check an event handed to a journal (it may not have come from
 * `createUsageEvent`) and return a canonical, frozen copy.
 */
export function checkUsageEvent(event: UsageEvent): UsageEvent {
  if (event === null || typeof event !== "object") {
    throw new InvalidEventError("", "record", "a usage event must be an object");
  }
  if (built.has(event)) return event;
  const checked = createUsageEvent({ record: event.record, observedAt: event.observedAt });
  if (event.id !== checked.id) {
    throw new InvalidEventError(String(event.id), "request_id", "the event id must equal the record's request id");
  }
  return checked;
}

/** Whether two events under the same request id describe the same billable fact. */
export function isSameFact(a: UsageEvent, b: UsageEvent): boolean {
  return a.record.namespace === b.record.namespace && a.record.subject === b.record.subject && canonicalJson(a.record.data) === canonicalJson(b.record.data);
}

/** Check a delivery id handed to a journal. */
export function checkDeliveryId(delivery: DeliveryId): DeliveryId {
  if (delivery === null || typeof delivery !== "object") {
    throw new InvalidArgumentError("delivery", "a delivery id must be an object { consumer, event, attempt }");
  }
  const consumer = parseConsumerId(delivery.consumer);
  if (!isRequestId(delivery.event)) {
    throw new InvalidArgumentError("delivery.event", "must be a UUIDv7 request id");
  }
  if (!Number.isSafeInteger(delivery.attempt) || delivery.attempt < 1) {
    throw new InvalidArgumentError("delivery.attempt", "must be a positive integer");
  }
  return { consumer, event: delivery.event, attempt: delivery.attempt };
}

/** Check a journal name: 1 to 63 characters of `[a-z0-9_-]` (a metric dimension and a storage key). */
export function checkJournalName(name: unknown): string {
  if (typeof name !== "string" || !/^[a-z0-9_-]{1,63}$/.test(name)) {
    throw new InvalidArgumentError("name", "a journal name is 1 to 63 characters of lowercase letters, digits, `-` and `_`");
  }
  return name;
}

/** Check that `value` is a string of at most `max` characters. */
export function checkText(argument: string, value: unknown, max: number): string {
  if (typeof value !== "string" || value.length > max) {
    throw new InvalidArgumentError(argument, `must be a string of at most ${max} characters`);
  }
  return value;
}

/** Check that `value` is an integer in [min, max]. */
export function checkInteger(argument: string, value: unknown, min: number, max: number = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new InvalidArgumentError(argument, `must be an integer from ${min} to ${max}, got ${String(value)}`);
  }
  return value;
}

/** Check a capacity and return a frozen copy. */
export function checkCapacity(capacity: Capacity): Capacity {
  if (capacity === null || typeof capacity !== "object") {
    throw new InvalidArgumentError("capacity", "must be an object");
  }
  if (capacity.policy !== "refuse" && capacity.policy !== "drop_oldest") {
    throw new InvalidArgumentError("capacity.policy", 'must be "refuse" or "drop_oldest"');
  }
  return Object.freeze({
    maxEvents: checkInteger("capacity.maxEvents", capacity.maxEvents, 1),
    maxDeliveryAttempts: checkInteger("capacity.maxDeliveryAttempts", capacity.maxDeliveryAttempts, 1, 1_000_000),
    retainAcknowledgedMs: checkInteger("capacity.retainAcknowledgedMs", capacity.retainAcknowledgedMs, 0),
    policy: capacity.policy,
  });
}

/** The text form of an ordering key: `namespace/subject`. */
export function orderingKeyText(event: UsageEvent): string {
  return `${event.orderingKey.namespace}/${event.orderingKey.subject}`;
}
