/**
 * Random operation sequences against `PartitionedJournal` with P = 4 and a
 * partition-aware reference model, over real `JournalPartition` objects.
 *
 * The model is P instances of the reference model (`JournalOracle`), one per
 * partition, with events routed by the same hash (`partitionOf`), plus what a
 * partitioned journal adds on top of them:
 * - the id registry: a request id already reserved with another fact is a
 *   conflict, whatever partition its key is in (the run stays far inside
 *   `ID_SETTLE_MS`, so no reservation is forgotten during a sequence; that
 *   forgetting is covered by examples in `partitioned.test.ts`);
 * - the claim fan-out, replayed call for call (the share of each partition per
 *   round, from a start that rotates with every claim of a consumer, and of
 *   a claim's `maxBytes` the share of the bytes left in proportion to it, at
 *   least 1; no round starts once the bytes are spent), and the merge by
 *   `observedAt`, then request id;
 * - prune: the partitions in turn until the limit is used up, from a start
 *   that rotates with every prune;
 * - routing by request id: a delivery or operator action goes to the partition
 *   that stores its event, and is `not_outstanding` / `not_quarantined` / `[]`
 *   when none does;
 * - merged reads: stats summed (largest `oldestPendingAgeMs`); quarantine
 *   listings as the partitions' listings (position order, descending for
 *   `order: "newest"`) merged by `observedAt` then request id (latest first
 *   for newest), ties to the lower partition; the audit log as the
 *   partitions' logs (`seq` order) merged by `at`. A listing is read in
 *   pages of a random size and compared, pages joined, with the model's
 *   whole merged list: paging neither skips, repeats nor reorders.
 *
 * So append outcomes (status and position within the partition), claim
 * results, ack / nack / extend / quarantine outcomes and error codes, summed
 * stats, quarantine listings and the audit log (in their merged order),
 * release / discard and prune are all compared exactly; one in flight per key is checked on every claim too,
 * and that a claim with `maxBytes` weighs at most that plus one delivery per partition. The clock is
 * virtual and shared by both sides. "reopen" is a new PartitionedJournal over
 * the same objects, sharing no memory (its claim and prune rotations start
 * over; the model's too).
 *
 * Claims in those sequences rarely find more than a few ready events, so a
 * second property appends up to 30 events over twelve keys (about three per
 * partition, data of several sizes) and claims them with and without
 * `maxBytes`, each claim checked against the model and the byte bound.
 *
 * Quarantines are rare in those sequences (a delivery is often acked or its
 * lease gone by the time a quarantine picks it), so a third property
 * quarantines many events spread over the partitions, late replays
 * included, in an order of their own, releases some, and reads the listings
 * and the audit log in pages of every size.
 *
 * A few dozen sequences by default (about ten seconds); `SOAK=1` runs
 * 200 longer ones.
 */
import { env } from "cloudflare:workers";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { PartitionedJournal, partitionOf } from "../../adapters/durable-objects/index.js";
import { ID_SETTLE_MS } from "../../adapters/durable-objects/partition.js";
import {
  canonicalJson,
  createUsageEvent,
  deliveryBytes,
  EventConflictError,
  NotOutstandingError,
  NotQuarantinedError,
  parseConsumerId,
  type AuditEntry,
  type BatchAppendResult,
  type Capacity,
  type ClaimOptions,
  type ConsumerId,
  type Delivery,
  type DeliveryId,
  type JournalError,
  type JournalStats,
  type PoisonReason,
  type QuarantinedEvent,
  type UsageEvent,
  type UsageJournal,
} from "../../src/index.js";
import { JournalOracle, soakRequested, virtualClock, type VirtualClock } from "../../src/testing/index.js";
import { render, renderOutcome, sameOutcome, settle, type Outcome } from "../../src/testing/compare.js";

const P = 4;
const T0 = 1_700_000_000_000;
/** Soak mode: `SOAK=1 npm test` (reaches workerd through soak-setup.ts), or `VITE_SOAK=1` as before. */
const SOAK = soakRequested() || (import.meta as unknown as { env?: Record<string, unknown> }).env?.["VITE_SOAK"] === "1";
const RUNS = SOAK ? 200 : 30;
const MAX_COMMANDS = SOAK ? 60 : 30;
const MAX_ADVANCE_MS = 4000;
// The model never forgets a reservation: the whole run must stay inside the settle time.
if ((MAX_COMMANDS + 2) * MAX_ADVANCE_MS >= ID_SETTLE_MS) throw new Error("partitioned-model: a run could outlast ID_SETTLE_MS");

const CONSUMERS: readonly ConsumerId[] = [parseConsumerId("billing"), parseConsumerId("warehouse")];
const REQUEST_IDS = Array.from({ length: 8 }, (_, n) => `0190d000-0000-7000-8000-${(n + 1).toString(16).padStart(12, "0")}`);
/**
 * Characters of padding in the data of each request id's events, so that
 * deliveries weigh from some 370 to some 1,270 bytes and a claim's
 * `maxBytes` falls between them in many ways. A function of the id: the
 * padding never turns the same record into a conflicting one.
 */
const PADDING = [0, 900, 0, 300, 0, 600, 100, 0];
const REASONS: readonly PoisonReason[] = ["malformed", "rejected", "attempts_exhausted"];

/** Six subjects that cover all four partitions (two partitions get two). */
const SUBJECTS: readonly string[] = (() => {
  const chosen: string[] = [];
  const counts = new Array<number>(P).fill(0);
  for (let i = 0; chosen.length < 6; i++) {
    const subject = `user-${i}`;
    const p = partitionOf("acme", subject, P);
    if (counts[p]! < (chosen.length < 4 ? 1 : 2)) {
      counts[p]! += 1;
      chosen.push(subject);
    }
  }
  return chosen;
})();

const CAPACITIES: readonly Capacity[] = [
  { maxEvents: 100, maxDeliveryAttempts: 2, retainAcknowledgedMs: 2000, policy: "refuse" },
  { maxEvents: 3, maxDeliveryAttempts: 3, retainAcknowledgedMs: 0, policy: "refuse" },
  { maxEvents: 3, maxDeliveryAttempts: 2, retainAcknowledgedMs: 1000, policy: "drop_oldest" },
];

// ------------------------------------------------------------------ model

/** Split `total` over `n` targets evenly, the remainder going to the targets from `start` on. */
function split(total: number, targets: readonly number[], caps: ReadonlyMap<number, number> | null, from: number): number[] {
  const shares = targets.map(() => 0);
  const start = Math.max(0, targets.findIndex((p) => p >= from));
  let left = total;
  for (let grew = true; left > 0 && grew; ) {
    grew = false;
    for (let k = 0; k < targets.length && left > 0; k++) {
      const i = (start + k) % targets.length;
      if (caps === null || shares[i]! < (caps.get(targets[i]!) ?? 0)) {
        shares[i]! += 1;
        left -= 1;
        grew = true;
      }
    }
  }
  return shares;
}

/** P oracles, the id registry, the claim fan-out and the merged reads of a partitioned journal. */
class PartitionedModel {
  readonly oracles: JournalOracle[];
  /** request id -> fact, for every id ever reserved (nothing is forgotten inside the settle time). */
  private readonly registry = new Map<string, string>();
  /** Consumer -> the partition its next claim starts from (what the journal keeps in its learned state). */
  private readonly rotations = new Map<string, number>();
  /** The partition the next prune starts from (also in the journal's learned state). */
  private pruneStart = 0;

  constructor(capacity: Capacity, clock: () => number) {
    this.oracles = Array.from({ length: P }, () => new JournalOracle({ name: "model", capacity, clock, durable: true }));
  }

  private partition(event: UsageEvent): number {
    return partitionOf(event.orderingKey.namespace, event.orderingKey.subject, P);
  }

  private reserve(event: UsageEvent): JournalError | null {
    const fact = canonicalJson([event.record.namespace, event.record.subject, event.record.data]);
    const known = this.registry.get(event.id);
    if (known === undefined) this.registry.set(event.id, fact);
    else if (known !== fact) return new EventConflictError(event.id);
    return null;
  }

  /** The partition that stores `requestId`, or -1. */
  holder(requestId: string): number {
    return this.oracles.findIndex((oracle) => oracle.snapshot().events.some((stored) => stored.event.id === requestId));
  }

  async append(event: UsageEvent) {
    const refused = this.reserve(event);
    if (refused !== null) throw refused;
    return this.oracles[this.partition(event)]!.append(event);
  }

  async appendBatch(events: readonly UsageEvent[]): Promise<BatchAppendResult[]> {
    const results = new Array<BatchAppendResult | undefined>(events.length);
    const shares = new Map<number, { events: UsageEvent[]; indexes: number[] }>();
    events.forEach((event, index) => {
      const refused = this.reserve(event);
      if (refused !== null) {
        results[index] = { status: "rejected", error: refused };
        return;
      }
      const p = this.partition(event);
      let share = shares.get(p);
      if (share === undefined) shares.set(p, (share = { events: [], indexes: [] }));
      share.events.push(event);
      share.indexes.push(index);
    });
    for (const [p, share] of shares) {
      const answers = await this.oracles[p]!.appendBatch(share.events);
      answers.forEach((answer, i) => (results[share.indexes[i]!] = answer));
    }
    return results as BatchAppendResult[];
  }

  async claim(consumer: ConsumerId, options: ClaimOptions): Promise<Delivery[]> {
    const start = this.rotations.get(consumer) ?? 0;
    this.rotations.set(consumer, (start + 1) % P);
    const got: Delivery[][] = this.oracles.map(() => []);
    let candidates = this.oracles.map((_, p) => p);
    let left = options.maxEvents;
    let bytesLeft = options.maxBytes ?? Infinity;
    let caps: Map<number, number> | null = null;
    for (let round = 0; left > 0 && bytesLeft > 0 && candidates.length > 0; ) {
      if (caps === null && left < candidates.length) {
        // Fewer left than partitions: each is asked, read-only, how many it could hand out at most.
        const probed = new Map(candidates.map((p) => [p, this.oracles[p]!.claimableAtMost(consumer, options.now, left)] as const));
        caps = probed;
        candidates = candidates.filter((p) => probed.get(p)! > 0);
        continue;
      }
      const shares = split(left, candidates, caps, (start + round) % P);
      const [eventsThisRound, bytesThisRound] = [left, bytesLeft];
      const out = new Set<number>();
      for (const [i, p] of candidates.entries()) {
        const share = shares[i]!;
        if (share === 0) continue;
        // This partition's share of the bytes left, in proportion to its share of the events (Infinity without maxBytes).
        const budget = Math.max(1, Math.floor((bytesThisRound * share) / eventsThisRound));
        const bounded = budget !== Infinity;
        const deliveries = await this.oracles[p]!.claim(consumer, { maxEvents: share, leaseMs: options.leaseMs, now: options.now, ...(bounded ? { maxBytes: budget } : {}) });
        const bytes = bounded ? weight(deliveries) : 0;
        got[p]!.push(...deliveries);
        left -= deliveries.length;
        bytesLeft -= bytes;
        const cap = caps?.get(p);
        if (cap !== undefined) caps!.set(p, cap - deliveries.length);
        if (deliveries.length < share || cap === deliveries.length) out.add(p);
      }
      candidates = candidates.filter((p) => !out.has(p));
      round += 1;
    }
    // Merge: the head with the smallest (observedAt, request id), ties to the lower partition.
    return merge(got, (a, b) => observedBefore(a.event, b.event)).slice(0, options.maxEvents);
  }

  private async routed<T>(requestId: string, call: (oracle: JournalOracle) => Promise<T>, missing: () => T): Promise<T> {
    const p = this.holder(requestId);
    return p === -1 ? missing() : call(this.oracles[p]!);
  }

  ack(delivery: DeliveryId): Promise<void> {
    return this.routed(delivery.event, (oracle) => oracle.ack(delivery), () => {
      throw new NotOutstandingError(delivery, "the event is not journaled");
    });
  }

  quarantine(delivery: DeliveryId, reason: PoisonReason): Promise<void> {
    return this.routed(delivery.event, (oracle) => oracle.quarantine(delivery, reason), () => {
      throw new NotOutstandingError(delivery, "the event is not journaled");
    });
  }

  extend(delivery: DeliveryId, leaseMs: number, now: number): Promise<{ leaseExpiresAt: number }> {
    return this.routed(delivery.event, (oracle) => oracle.extend(delivery, { leaseMs, now }), () => {
      throw new NotOutstandingError(delivery, "the event is not journaled");
    });
  }

  nack(delivery: DeliveryId, retryAfterMs: number, now: number): Promise<void> {
    return this.routed(delivery.event, (oracle) => oracle.nack(delivery, { retryAfterMs, error: "boom", now }), () => {
      throw new NotOutstandingError(delivery, "the event is not journaled");
    });
  }

  operate(action: "release" | "discard", consumer: ConsumerId, requestId: string, now: number, actor: string | undefined): Promise<void> {
    const options = actor === undefined ? { now } : { now, actor };
    return this.routed(requestId, (oracle) => oracle[action](consumer, requestId, options), () => {
      throw new NotQuarantinedError(consumer, requestId);
    });
  }

  attempts(consumer: ConsumerId, requestId: string) {
    return this.routed(requestId, (oracle) => oracle.attempts(consumer, requestId), () => []);
  }

  async stats(consumer: ConsumerId): Promise<JournalStats> {
    const all = await Promise.all(this.oracles.map((oracle) => oracle.stats(consumer)));
    let oldest: number | null = null;
    for (const part of all) if (part.oldestPendingAgeMs !== null) oldest = Math.max(oldest ?? 0, part.oldestPendingAgeMs);
    return {
      pending: all.reduce((sum, part) => sum + part.pending, 0),
      inFlight: all.reduce((sum, part) => sum + part.inFlight, 0),
      quarantined: all.reduce((sum, part) => sum + part.quarantined, 0),
      oldestPendingAgeMs: oldest,
      dropped: all.reduce((sum, part) => sum + part.dropped, 0),
      capacity: this.oracles[0]!.capacity,
    };
  }

  /**
   * Every quarantined event of `consumer` in the partitioned journal's
   * order: each partition's listing in its order, merged by `observedAt`
   * then request id (newest first: the latest first), ties to the lower
   * partition.
   */
  async quarantined(consumer: ConsumerId, order: "oldest" | "newest"): Promise<QuarantinedEvent[]> {
    const pages = await Promise.all(this.oracles.map((oracle) => oracle.listQuarantined(consumer, { limit: 1000, order })));
    return merge(
      pages.map((page) => page.items),
      order === "oldest" ? (a, b) => observedBefore(a.event, b.event) : (a, b) => observedBefore(b.event, a.event),
    );
  }

  /** The audit log in the partitioned journal's order: each partition's log in `seq` order, merged by `at`, ties to the lower partition. */
  async audit(): Promise<AuditEntry[]> {
    const pages = await Promise.all(this.oracles.map((oracle) => oracle.listAudit({ limit: 1000 })));
    return merge(
      pages.map((page) => page.items),
      (a, b) => a.at < b.at,
    );
  }

  /** The partitions in turn until `limit` is used up, from a start that rotates with every prune (kept with the claim rotations). */
  async prune(now: number, limit: number): Promise<{ pruned: number }> {
    const start = this.pruneStart;
    this.pruneStart = (start + 1) % P;
    let pruned = 0;
    for (let k = 0; k < P; k++) {
      if (pruned >= limit) break;
      pruned += (await this.oracles[(start + k) % P]!.prune({ now, limit: limit - pruned })).pruned;
    }
    return { pruned };
  }

  reopen(): void {
    this.rotations.clear();
    this.pruneStart = 0;
  }
}

/** The total `deliveryBytes` of `deliveries` (what a claim's `maxBytes` bounds). */
function weight(deliveries: readonly Delivery[]): number {
  return deliveries.reduce((sum, delivery) => sum + deliveryBytes(delivery), 0);
}

/** Fail unless `claimed` weighs at most `maxBytes` plus one delivery per partition (the largest of each will do). */
function expectWithinButOnePerPartition(claimed: readonly Delivery[], maxBytes: number): void {
  const largest = new Map<number, number>();
  for (const delivery of claimed) {
    const p = partitionOf(delivery.event.orderingKey.namespace, delivery.event.orderingKey.subject, P);
    largest.set(p, Math.max(largest.get(p) ?? 0, deliveryBytes(delivery)));
  }
  const slack = [...largest.values()].reduce((sum, size) => sum + size, 0);
  expect(weight(claimed), "within maxBytes but for one delivery per partition").toBeLessThanOrEqual(maxBytes + slack);
}

/** Whether event `a` was observed before `b`, or at the same time with the smaller request id. */
function observedBefore(a: UsageEvent, b: UsageEvent): boolean {
  return a.observedAt < b.observedAt || (a.observedAt === b.observedAt && a.id < b.id);
}

/** Merge lists, keeping each list's order: at every step the head `before` puts first, ties to the lower list. */
function merge<T>(lists: readonly (readonly T[])[], before: (a: T, b: T) => boolean): T[] {
  const heads = lists.map(() => 0);
  const merged: T[] = [];
  for (;;) {
    let best = -1;
    for (let p = 0; p < lists.length; p++) {
      const item = lists[p]![heads[p]!];
      if (item !== undefined && (best === -1 || before(item, lists[best]![heads[best]!]!))) best = p;
    }
    if (best === -1) return merged;
    merged.push(lists[best]![heads[best]!]!);
    heads[best]! += 1;
  }
}

/** Every item of a cursor listing, read in pages of `limit` and joined; fails if a page holds more than `limit`. */
async function allPages<T>(limit: number, list: (after: string | null) => Promise<{ readonly items: readonly T[]; readonly nextCursor: string | null }>): Promise<T[]> {
  const items: T[] = [];
  let after: string | null = null;
  do {
    const page: { readonly items: readonly T[]; readonly nextCursor: string | null } = await list(after);
    if (page.items.length > limit) throw new Error(`a page of ${page.items.length} items, over its limit ${limit}`);
    items.push(...page.items);
    after = page.nextCursor;
  } while (after !== null);
  return items;
}

// --------------------------------------------------------------- commands

interface EventSpec {
  readonly id: number;
  readonly subject: number;
  readonly data: number;
  readonly offset: number;
}

type Command =
  | { readonly kind: "append"; readonly event: EventSpec }
  | { readonly kind: "batch"; readonly events: readonly EventSpec[] }
  | { readonly kind: "claim"; readonly consumer: number; readonly maxEvents: number; readonly leaseMs: number; readonly maxBytes: number | undefined }
  | { readonly kind: "ack" | "quarantine" | "extend" | "nack"; readonly pick: number; readonly skew: number; readonly reason: PoisonReason; readonly ms: number }
  | { readonly kind: "release" | "discard"; readonly consumer: number; readonly id: number; readonly actor: string | undefined }
  | { readonly kind: "attempts"; readonly consumer: number; readonly id: number }
  | { readonly kind: "stats"; readonly consumer: number }
  | { readonly kind: "quarantined"; readonly consumer: number; readonly order: "oldest" | "newest"; readonly pageSize: number }
  | { readonly kind: "prune"; readonly limit: number }
  | { readonly kind: "advance"; readonly ms: number }
  | { readonly kind: "reopen" };

const eventArb: fc.Arbitrary<EventSpec> = fc.record({
  id: fc.nat({ max: REQUEST_IDS.length - 1 }),
  subject: fc.nat({ max: SUBJECTS.length - 1 }),
  data: fc.constantFrom(0, 0, 0, 1),
  offset: fc.integer({ min: -3000, max: 0 }),
});
const consumerArb = fc.constantFrom(0, 0, 1);
/**
 * A claim's `maxBytes`: mostly absent; else up to a few deliveries of these
 * events (370 to 1,270 bytes of JSON each, see {@link PADDING}), so that a
 * bound falls before, on and after a delivery, and a partition's share of
 * it is often less than one.
 */
const maxBytesArb = fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 2, arbitrary: fc.integer({ min: 1, max: 3000 }) });
const deliveryCommand = (kind: "ack" | "quarantine" | "extend" | "nack") =>
  fc
    .record({ pick: fc.nat({ max: 20 }), skew: fc.constantFrom(0, 0, 0, 0, 1, -1), reason: fc.constantFrom(...REASONS), ms: fc.integer({ min: 0, max: 3000 }) })
    .map((fields): Command => ({ kind, ...fields }));

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 4, arbitrary: eventArb.map((event): Command => ({ kind: "append", event })) },
  { weight: 2, arbitrary: fc.array(eventArb, { minLength: 1, maxLength: 6 }).map((events): Command => ({ kind: "batch", events })) },
  {
    weight: 4,
    arbitrary: fc
      .record({ consumer: consumerArb, maxEvents: fc.integer({ min: 1, max: 6 }), leaseMs: fc.integer({ min: 1, max: 3000 }), maxBytes: maxBytesArb })
      .map((c): Command => ({ kind: "claim", ...c })),
  },
  { weight: 4, arbitrary: deliveryCommand("ack") },
  { weight: 1, arbitrary: deliveryCommand("quarantine") },
  { weight: 1, arbitrary: deliveryCommand("extend") },
  { weight: 1, arbitrary: deliveryCommand("nack") },
  {
    weight: 1,
    arbitrary: fc
      .record({ kind: fc.constantFrom<"release" | "discard">("release", "discard"), consumer: consumerArb, id: fc.nat({ max: REQUEST_IDS.length - 1 }), actor: fc.option(fc.constant("ops"), { nil: undefined }) })
      .map((c): Command => c),
  },
  { weight: 1, arbitrary: fc.record({ consumer: consumerArb, id: fc.nat({ max: REQUEST_IDS.length - 1 }) }).map((c): Command => ({ kind: "attempts", ...c })) },
  { weight: 1, arbitrary: consumerArb.map((consumer): Command => ({ kind: "stats", consumer })) },
  {
    weight: 1,
    arbitrary: fc
      .record({ consumer: consumerArb, order: fc.constantFrom<"oldest" | "newest">("oldest", "newest"), pageSize: fc.integer({ min: 1, max: 5 }) })
      .map((c): Command => ({ kind: "quarantined", ...c })),
  },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 3 }).map((limit): Command => ({ kind: "prune", limit })) },
  { weight: 3, arbitrary: fc.integer({ min: 0, max: MAX_ADVANCE_MS }).map((ms): Command => ({ kind: "advance", ms })) },
  { weight: 1, arbitrary: fc.constant<Command>({ kind: "reopen" }) },
);

// -------------------------------------------------------------------- run

let scopes = 0;

function eventOf(spec: EventSpec, time: VirtualClock): UsageEvent {
  return createUsageEvent({
    record: { requestId: REQUEST_IDS[spec.id]!, namespace: "acme", subject: SUBJECTS[spec.subject]!, data: { units: spec.data, note: "x".repeat(PADDING[spec.id]!) } },
    observedAt: time.now + spec.offset,
  });
}

/** Run one call on both sides and fail unless they agree. */
async function agree(step: string, subject: () => Promise<unknown>, model: () => Promise<unknown>): Promise<Outcome> {
  const actual = await settle(subject);
  const expected = await settle(model);
  if (!sameOutcome(actual, expected)) {
    throw new Error(`${step}\n  partitioned: ${renderOutcome(actual)}\n  model:       ${renderOutcome(expected)}`);
  }
  return actual;
}

async function runSequence(capacity: Capacity, commands: readonly Command[]): Promise<void> {
  const time = virtualClock(T0);
  const scope = `model-p${P}-${scopes++}/`;
  const open = () => new PartitionedJournal(env.PARTITIONS, { name: "model", partitions: P, capacity, clock: time.clock, scope });
  let journal: UsageJournal = open();
  const model = new PartitionedModel(capacity, time.clock);
  const deliveries: DeliveryId[] = [];
  const log: string[] = [];
  const step = (what: string) => {
    log.push(`${time.now - T0}ms ${what}`);
    return `step ${log.length} of:\n    ${log.join("\n    ")}`;
  };
  // Register both consumers in every partition on both sides (an empty claim reaches every partition).
  for (const consumer of CONSUMERS) {
    await agree(step(`claim ${consumer} (register)`), () => journal.claim(consumer, { maxEvents: 2 * P, leaseMs: 1, now: time.now }), () => model.claim(consumer, { maxEvents: 2 * P, leaseMs: 1, now: time.now }));
  }
  for (const command of commands) {
    switch (command.kind) {
      case "append": {
        const event = eventOf(command.event, time);
        await agree(step(`append ${render(event.record)}`), () => journal.append(event), () => model.append(event));
        break;
      }
      case "batch": {
        const events = command.events.map((spec) => eventOf(spec, time));
        await agree(step(`appendBatch ${render(events.map((event) => event.record))}`), () => journal.appendBatch(events), () => model.appendBatch(events));
        break;
      }
      case "claim": {
        const consumer = CONSUMERS[command.consumer]!;
        const options = { maxEvents: command.maxEvents, leaseMs: command.leaseMs, now: time.now, ...(command.maxBytes === undefined ? {} : { maxBytes: command.maxBytes }) };
        const outcome = await agree(step(`claim ${consumer} ${render(options)}`), () => journal.claim(consumer, options), () => model.claim(consumer, options));
        if (outcome.ok) {
          const claimed = outcome.value as Delivery[];
          const keys = claimed.map((delivery) => delivery.event.orderingKey.subject);
          expect(new Set(keys).size, "one event per ordering key in a claim").toBe(keys.length);
          if (command.maxBytes !== undefined) expectWithinButOnePerPartition(claimed, command.maxBytes);
          deliveries.unshift(...claimed.map((delivery) => delivery.id));
        }
        break;
      }
      case "ack":
      case "quarantine":
      case "extend":
      case "nack": {
        const picked = deliveries[command.pick % Math.max(1, deliveries.length)];
        if (picked === undefined) break;
        const delivery: DeliveryId = { ...picked, attempt: Math.max(1, picked.attempt + command.skew) };
        const what = step(`${command.kind} ${render(delivery)} ${command.kind === "quarantine" ? command.reason : command.ms}`);
        if (command.kind === "ack") await agree(what, () => journal.ack(delivery), () => model.ack(delivery));
        else if (command.kind === "quarantine") await agree(what, () => journal.quarantine(delivery, command.reason), () => model.quarantine(delivery, command.reason));
        else if (command.kind === "extend") {
          await agree(what, () => journal.extend(delivery, { leaseMs: Math.max(1, command.ms), now: time.now }), () => model.extend(delivery, Math.max(1, command.ms), time.now));
        } else await agree(what, () => journal.nack(delivery, { retryAfterMs: command.ms, error: "boom", now: time.now }), () => model.nack(delivery, command.ms, time.now));
        break;
      }
      case "release":
      case "discard": {
        const consumer = CONSUMERS[command.consumer]!;
        const requestId = REQUEST_IDS[command.id]!;
        const options = command.actor === undefined ? { now: time.now } : { now: time.now, actor: command.actor };
        await agree(step(`${command.kind} ${consumer} ${requestId}`), () => journal[command.kind](consumer, requestId, options), () => model.operate(command.kind, consumer, requestId, time.now, command.actor));
        break;
      }
      case "attempts": {
        const consumer = CONSUMERS[command.consumer]!;
        const requestId = REQUEST_IDS[command.id]!;
        await agree(step(`attempts ${consumer} ${requestId}`), () => journal.attempts(consumer, requestId), () => model.attempts(consumer, requestId));
        break;
      }
      case "stats": {
        const consumer = CONSUMERS[command.consumer]!;
        await agree(step(`stats ${consumer}`), () => journal.stats(consumer), () => model.stats(consumer));
        break;
      }
      case "quarantined": {
        const consumer = CONSUMERS[command.consumer]!;
        const { order, pageSize } = command;
        await agree(
          step(`listQuarantined ${consumer} ${order}, pages of ${pageSize}`),
          () => allPages(pageSize, (after) => journal.listQuarantined(consumer, { limit: pageSize, order, after })),
          () => model.quarantined(consumer, order),
        );
        break;
      }
      case "prune":
        await agree(step(`prune ${command.limit}`), () => journal.prune({ now: time.now, limit: command.limit }), () => model.prune(time.now, command.limit));
        break;
      case "advance":
        time.advance(command.ms);
        step(`advance ${command.ms}`);
        break;
      case "reopen":
        journal = open();
        model.reopen();
        step("reopen");
        break;
    }
  }
  // The end state, as every consumer and an operator see it.
  for (const consumer of CONSUMERS) {
    await agree(step(`final stats ${consumer}`), () => journal.stats(consumer), () => model.stats(consumer));
    for (const order of ["oldest", "newest"] as const) {
      await agree(step(`final listQuarantined ${consumer} ${order}`), async () => (await journal.listQuarantined(consumer, { limit: 1000, order })).items, () => model.quarantined(consumer, order));
    }
  }
  await agree(step("final listAudit"), async () => (await journal.listAudit({ limit: 1000 })).items, () => model.audit());
  await agree(step("final listAudit, pages of 2"), () => allPages(2, (after) => journal.listAudit({ limit: 2, after })), () => model.audit());
  for (const requestId of REQUEST_IDS) {
    const expected = model.holder(requestId);
    for (const consumer of CONSUMERS) {
      await agree(step(`final attempts ${consumer} ${requestId} (partition ${expected})`), () => journal.attempts(consumer, requestId), () => model.attempts(consumer, requestId));
    }
  }
}

/** What `runListing` does: events to quarantine, in which order, which to release, how to read the listings. */
interface ListingSpec {
  readonly events: readonly { readonly subject: number; readonly offset: number }[];
  /** Per event, its rank in the quarantine order of the claim that delivered it. */
  readonly ranks: readonly number[];
  /** Per event, whether an operator releases it after all are quarantined. */
  readonly releases: readonly boolean[];
  readonly reads: readonly { readonly order: "oldest" | "newest"; readonly pageSize: number }[];
  readonly auditPageSize: number;
}

const LISTING_EVENTS = 12;

const listingArb: fc.Arbitrary<ListingSpec> = fc.record({
  events: fc.array(fc.record({ subject: fc.nat({ max: SUBJECTS.length - 1 }), offset: fc.integer({ min: -3000, max: 0 }) }), { minLength: 1, maxLength: LISTING_EVENTS }),
  ranks: fc.array(fc.nat({ max: 1000 }), { minLength: LISTING_EVENTS, maxLength: LISTING_EVENTS }),
  releases: fc.array(fc.boolean(), { minLength: LISTING_EVENTS, maxLength: LISTING_EVENTS }),
  reads: fc.array(fc.record({ order: fc.constantFrom<"oldest" | "newest">("oldest", "newest"), pageSize: fc.integer({ min: 1, max: 5 }) }), { minLength: 1, maxLength: 3 }),
  auditPageSize: fc.integer({ min: 1, max: 4 }),
});

/**
 * A journal on fresh objects (scope `label`) and its model, the roomiest
 * capacity, a virtual clock, the consumer the property claims as, and
 * `step`, which logs a call and returns the log so far for a failure.
 */
function oneConsumer(label: string) {
  const time = virtualClock(T0);
  const capacity = CAPACITIES[0]!;
  const journal = new PartitionedJournal(env.PARTITIONS, { name: "model", partitions: P, capacity, clock: time.clock, scope: `${label}-p${P}-${scopes++}/` });
  const model = new PartitionedModel(capacity, time.clock);
  const log: string[] = [];
  const step = (what: string) => {
    log.push(`${time.now - T0}ms ${what}`);
    return `step ${log.length} of:\n    ${log.join("\n    ")}`;
  };
  return { time, journal, model, consumer: CONSUMERS[0]!, step };
}

/**
 * Quarantine `spec.events` on both sides (appended in one batch, observed at
 * random times so a partition's positions may disagree with `observedAt`;
 * claimed until none is left, each claim's deliveries quarantined in the
 * order of `spec.ranks`, the clock advancing before each), release those
 * `spec.releases` names, then read the quarantine listings and the audit log
 * in pages: every page joined must equal the model's merged list.
 */
async function runListing(spec: ListingSpec): Promise<void> {
  const { time, journal, model, consumer, step } = oneConsumer("listing");
  const events = spec.events.map((event, i) =>
    createUsageEvent({
      record: { requestId: `0190e000-0000-7000-8000-${(i + 1).toString(16).padStart(12, "0")}`, namespace: "acme", subject: SUBJECTS[event.subject]!, data: { units: i } },
      observedAt: time.now + event.offset,
    }),
  );
  const rank = new Map(events.map((event, i) => [event.id, spec.ranks[i]!]));
  await agree(step(`appendBatch ${render(events.map((event) => [event.record.subject, event.observedAt - T0]))}`), () => journal.appendBatch(events), () => model.appendBatch(events));
  for (let round = 0; round < events.length; round++) {
    const options = { maxEvents: 100, leaseMs: 600_000, now: time.now };
    const claimed = await agree(step("claim"), () => journal.claim(consumer, options), () => model.claim(consumer, options));
    const delivered = claimed.ok ? (claimed.value as Delivery[]) : [];
    if (delivered.length === 0) break;
    for (const delivery of [...delivered].sort((a, b) => rank.get(a.id.event)! - rank.get(b.id.event)!)) {
      time.advance(1);
      await agree(step(`quarantine ${delivery.id.event}`), () => journal.quarantine(delivery.id, "malformed"), () => model.quarantine(delivery.id, "malformed"));
    }
  }
  for (const [i, event] of events.entries()) {
    if (!spec.releases[i]) continue;
    time.advance(1);
    const options = { now: time.now, actor: "ops" };
    await agree(step(`release ${event.id}`), () => journal.release(consumer, event.id, options), () => model.operate("release", consumer, event.id, time.now, "ops"));
  }
  for (const { order, pageSize } of spec.reads) {
    await agree(
      step(`listQuarantined ${order}, pages of ${pageSize}`),
      () => allPages(pageSize, (after) => journal.listQuarantined(consumer, { limit: pageSize, order, after })),
      () => model.quarantined(consumer, order),
    );
  }
  await agree(step(`listAudit, pages of ${spec.auditPageSize}`), () => allPages(spec.auditPageSize, (after) => journal.listAudit({ limit: spec.auditPageSize, after })), () => model.audit());
}

/** What `runClaims` does: events to append, then claims (some with `maxBytes`), each acknowledged or not. */
interface ClaimsSpec {
  readonly events: readonly { readonly subject: number; readonly padding: number; readonly offset: number }[];
  readonly claims: readonly { readonly maxEvents: number; readonly maxBytes: number | undefined; readonly ack: boolean }[];
}

/** Twelve subjects: about three keys per partition, so that a partition's share of a claim is often more than one event. */
const CLAIM_SUBJECTS = Array.from({ length: 12 }, (_, i) => `user-${i}`);

const claimsArb: fc.Arbitrary<ClaimsSpec> = fc.record({
  events: fc.array(
    fc.record({ subject: fc.nat({ max: CLAIM_SUBJECTS.length - 1 }), padding: fc.constantFrom(0, 0, 100, 300, 600, 900), offset: fc.integer({ min: -3000, max: 0 }) }),
    { minLength: 1, maxLength: 30 },
  ),
  claims: fc.array(fc.record({ maxEvents: fc.integer({ min: 1, max: 16 }), maxBytes: maxBytesArb, ack: fc.boolean() }), { minLength: 1, maxLength: 8 }),
});

/**
 * Append `spec.events` in one batch (observed at random times, with data of
 * several sizes) on both sides, then make `spec.claims` in turn (leases that
 * outlast the run), acknowledging a claim's deliveries when it says so, so
 * that the next events of those keys come up; every claim must agree with
 * the model and weigh at most its `maxBytes` plus one delivery per
 * partition. A last claim without `maxBytes` takes all that is left: what
 * the earlier ones did not return was not leased (the model's answer holds
 * it, first attempts).
 */
async function runClaims(spec: ClaimsSpec): Promise<void> {
  const { time, journal, model, consumer, step } = oneConsumer("claims");
  // Register the consumer in every partition on both sides (an empty claim reaches every partition).
  await agree(step("claim (register)"), () => journal.claim(consumer, { maxEvents: 2 * P, leaseMs: 1, now: time.now }), () => model.claim(consumer, { maxEvents: 2 * P, leaseMs: 1, now: time.now }));
  const events = spec.events.map((event, i) =>
    createUsageEvent({
      record: { requestId: `0190f000-0000-7000-8000-${(i + 1).toString(16).padStart(12, "0")}`, namespace: "acme", subject: CLAIM_SUBJECTS[event.subject]!, data: { units: i, note: "x".repeat(event.padding) } },
      observedAt: time.now + event.offset,
    }),
  );
  await agree(step(`appendBatch ${render(spec.events.map((event, i) => [events[i]!.record.subject, event.offset, event.padding]))}`), () => journal.appendBatch(events), () => model.appendBatch(events));
  for (const { maxEvents, maxBytes, ack } of [...spec.claims, { maxEvents: 100, maxBytes: undefined, ack: false }]) {
    time.advance(1);
    const options = { maxEvents, leaseMs: 600_000, now: time.now, ...(maxBytes === undefined ? {} : { maxBytes }) };
    const claimed = await agree(step(`claim ${render(options)}`), () => journal.claim(consumer, options), () => model.claim(consumer, options));
    const delivered = claimed.ok ? (claimed.value as Delivery[]) : [];
    if (maxBytes !== undefined) expectWithinButOnePerPartition(delivered, maxBytes);
    if (!ack) continue;
    for (const delivery of delivered) await agree(step(`ack ${delivery.id.event}`), () => journal.ack(delivery.id), () => model.ack(delivery.id));
  }
}

describe("partitioned journal, P = 4, against a partition-aware model", () => {
  it(
    "random operation sequences agree with P reference models behind the same routing",
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...CAPACITIES), fc.array(commandArb, { minLength: 1, maxLength: MAX_COMMANDS }), (capacity, commands) => runSequence(capacity, commands)),
        { numRuns: RUNS },
      );
    },
    SOAK ? 3_600_000 : 120_000,
  );

  it(
    "claims with maxBytes over many ready keys split the bytes as the model does, within maxBytes but for one delivery per partition, leasing nothing they do not return",
    async () => {
      await fc.assert(
        fc.asyncProperty(claimsArb, (spec) => runClaims(spec)),
        { numRuns: SOAK ? 200 : 50 },
      );
    },
    SOAK ? 3_600_000 : 120_000,
  );

  it(
    "quarantine listings and the audit log, in pages of any size, are the partitions' lists merged in the documented order",
    async () => {
      await fc.assert(
        fc.asyncProperty(listingArb, (spec) => runListing(spec)),
        { numRuns: SOAK ? 200 : 20 },
      );
    },
    SOAK ? 3_600_000 : 120_000,
  );
});
