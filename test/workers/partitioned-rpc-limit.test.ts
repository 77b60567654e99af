/**
 * A partitioned journal over the Workers RPC limit (32 MiB serialized per
 * argument list or reply): a claim whose deliveries would not fit one reply
 * is made in several RPCs (every event delivered, no attempt spent on a
 * reply that failed), and an `appendBatch` whose share for one partition
 * would not fit one call is sent in slices; a quarantine page longer than
 * one RPC carries is read in several; a claim with `maxBytes` made in
 * several RPCs stops where one claim of the core would, even between two
 * RPCs. Heavy: the size tests store some 300
 * events of 60,000 "€" each (about 120 KB serialized, 36 MB together).
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { PartitionedJournal } from "../../adapters/durable-objects/index.js";
import { CLAIM_RPC_EVENTS } from "../../adapters/durable-objects/partitioned-journal.js";
import { memoryEngine } from "../../adapters/memory/index.js";
import { createJournal, createUsageEvent, deliveryBytes, parseConsumerId, type Capacity, type Delivery, type UsageEvent } from "../../src/index.js";

const T0 = 1_700_000_000_000;
const billing = parseConsumerId("billing");
const auditor = parseConsumerId("auditor");
const CAPACITY: Capacity = { maxEvents: 10_000, maxDeliveryAttempts: 2, retainAcknowledgedMs: 60_000, policy: "refuse" };
/** Big events per test: 300 x ~120 KB is over 32 MiB. */
const BIG = 300;
const BLOB = "\u20ac".repeat(60_000);
let scopes = 0;

function rid(n: number): string {
  return `0190c000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`;
}

/** Event `n`, observed at `T0 + n`, big (`{ blob }`) or small. */
function usage(n: number, subject: string, big: boolean): UsageEvent {
  return createUsageEvent({ record: { requestId: rid(n), namespace: "acme", subject, data: big ? { blob: BLOB } : { units: n } }, observedAt: T0 + n });
}

function open(partitions: number, ignored: unknown[], capacity: Capacity = CAPACITY): PartitionedJournal {
  return new PartitionedJournal(env.PARTITIONS, {
    name: "usage",
    partitions,
    capacity,
    clock: () => T0,
    scope: `rpc-limit-${scopes++}/`,
    onIgnoredError: (error) => ignored.push(error),
  });
}

/** `count` subjects whose keys live in partition `p`. */
function subjectsIn(journal: PartitionedJournal, p: number, count: number): string[] {
  const out: string[] = [];
  for (let i = 0; out.length < count; i++) if (journal.partitionOf("acme", `s${i}`) === p) out.push(`s${i}`);
  return out;
}

/** Append in batches of 100 (each well under the limit, whatever the partitions). */
async function appendAll(journal: PartitionedJournal, events: readonly UsageEvent[]): Promise<void> {
  for (let i = 0; i < events.length; i += 100) {
    const results = await journal.appendBatch(events.slice(i, i + 100));
    expect(results.every((result) => result.status === "accepted")).toBe(true);
  }
}

/** Claim everything in one call and check it is all of `events`, first attempts, in `observedAt` order. */
async function claimAll(journal: PartitionedJournal, events: readonly UsageEvent[], maxEvents: number, ignored: unknown[]): Promise<void> {
  const got: Delivery[] = await journal.claim(billing, { maxEvents, leaseMs: 60_000, now: T0 });
  expect(ignored).toEqual([]);
  expect(got.map((delivery) => delivery.event.id)).toEqual([...events].sort((a, b) => a.observedAt - b.observedAt).map((event) => event.id));
  expect(got.every((delivery) => delivery.id.attempt === 1)).toBe(true);
  expect(got[0]!.event.record.data).toEqual({ blob: BLOB });
  const stats = await journal.stats(billing);
  expect({ pending: stats.pending, inFlight: stats.inFlight, quarantined: stats.quarantined }).toEqual({ pending: 0, inFlight: events.length, quarantined: 0 });
}

describe("partitioned journal over the RPC size limit", () => {
  it("a quarantine page longer than one RPC lists (QUARANTINE_RPC_ITEMS, 74) is read in several, same items and cursors", async () => {
    for (const partitions of [1, 2]) {
      const ignored: unknown[] = [];
      const strict = open(partitions, ignored, { ...CAPACITY, maxDeliveryAttempts: 1 });
      const events = subjectsIn(strict, 0, 100).map((subject, n) => usage(n + 1, subject, false));
      await appendAll(strict, events);
      // One attempt each: the lease runs out and the next claim quarantines them all.
      expect(await strict.claim(billing, { maxEvents: 100, leaseMs: 1, now: T0 })).toHaveLength(100);
      expect(await strict.claim(billing, { maxEvents: 100, leaseMs: 1, now: T0 + 10 })).toEqual([]);
      const ids = events.map((event) => event.id);
      const all = await strict.listQuarantined(billing, { limit: 1000 });
      expect([all.items.map((item) => item.event.id), all.nextCursor]).toEqual([ids, null]);
      const first = await strict.listQuarantined(billing, { limit: 90, order: "newest" });
      expect(first.items.map((item) => item.event.id)).toEqual([...ids].reverse().slice(0, 90));
      const rest = await strict.listQuarantined(billing, { limit: 90, order: "newest", after: first.nextCursor });
      expect([rest.items.map((item) => item.event.id), rest.nextCursor]).toEqual([[...ids].reverse().slice(90), null]);
      expect(ignored).toEqual([]);
    }
  });

  it("P=1: a claim whose deliveries pass 32 MiB is made in several RPCs and delivers every event", { timeout: 120_000 }, async () => {
    const ignored: unknown[] = [];
    const journal = open(1, ignored);
    const events = Array.from({ length: BIG }, (_, n) => usage(n + 1, `s${n}`, true));
    await appendAll(journal, events);
    await claimAll(journal, events, BIG, ignored);
  });

  it("P=2: a claim whose share in one partition passes 32 MiB is made in several RPCs and delivers every event", { timeout: 120_000 }, async () => {
    const ignored: unknown[] = [];
    const journal = open(2, ignored);
    const inP0 = subjectsIn(journal, 0, BIG);
    const inP1 = subjectsIn(journal, 1, 10);
    // Partition 0 holds the big events, partition 1 small ones observed in between.
    const events = [...inP0.map((subject, n) => usage(2 * n + 1, subject, true)), ...inP1.map((subject, n) => usage(60 * n + 2, subject, false))];
    await appendAll(journal, events);
    // Shares of 310: partition 0's is all 300 big events.
    await claimAll(journal, events, 2 * (BIG + 10), ignored);
  });

  it("P=1: a claim with maxBytes made in several RPCs stops where one claim of the core stops, also right after an RPC: nothing past it is leased", async () => {
    const leaseMs = 60_000;
    const events = Array.from({ length: CLAIM_RPC_EVENTS + 5 }, (_, n) => usage(n + 1, `s${n}`, false));
    // What each event's first delivery weighs, built as a claim at T0 builds it.
    const sizes = events.map((event) => deliveryBytes({ id: { consumer: billing, event: event.id, attempt: 1 }, event, leaseExpiresAt: T0 + leaseMs }));
    const upTo = (count: number) => sizes.slice(0, count).reduce((sum, size) => sum + size, 0);
    // The first RPC hands out CLAIM_RPC_EVENTS, all within the bound; the next one's first delivery goes over it by one byte, or fits exactly.
    for (const [maxBytes, expected] of [
      [upTo(CLAIM_RPC_EVENTS + 1) - 1, CLAIM_RPC_EVENTS],
      [upTo(CLAIM_RPC_EVENTS + 1), CLAIM_RPC_EVENTS + 1],
      [upTo(CLAIM_RPC_EVENTS + 3) - 1, CLAIM_RPC_EVENTS + 2],
    ] as const) {
      const ignored: unknown[] = [];
      const journal = open(1, ignored);
      const core = createJournal(memoryEngine(), { name: "usage", capacity: CAPACITY, clock: () => T0 });
      await appendAll(journal, events);
      await core.appendBatch(events);
      const options = { maxEvents: events.length, leaseMs, now: T0, maxBytes };
      const got = await journal.claim(billing, options);
      expect(got.map((delivery) => delivery.id)).toEqual((await core.claim(billing, options)).map((delivery) => delivery.id));
      expect(got.map((delivery) => delivery.id.event)).toEqual(events.slice(0, expected).map((event) => event.id));
      // Nothing past the answer was leased: the rest comes next, first attempts.
      const rest = await journal.claim(billing, { maxEvents: events.length, leaseMs, now: T0 });
      expect(rest.map((delivery) => delivery.id)).toEqual(events.slice(expected).map((event) => ({ consumer: billing, event: event.id, attempt: 1 })));
      expect(ignored).toEqual([]);
    }
  });

  it("P=1: a continued RPC whose first delivery does not fit still commits the quarantine of an event out of attempts it met, as one claim of the core does", async () => {
    const capacity: Capacity = { ...CAPACITY, maxDeliveryAttempts: 1 };
    const n = CLAIM_RPC_EVENTS;
    const keys = Array.from({ length: n }, (_, i) => `s${i}`);
    // Per key an event in flight then one behind it; then `x`: one that runs out of attempts and a big one behind it.
    const events = [
      ...keys.map((subject, i) => usage(i + 1, subject, false)),
      ...keys.map((subject, i) => usage(n + i + 1, subject, false)),
      usage(2 * n + 1, "x", false),
      usage(2 * n + 2, "x", true),
    ];
    const ignored: unknown[] = [];
    const journal = open(1, ignored, capacity);
    const core = createJournal(memoryEngine(), { name: "usage", capacity, clock: () => T0 });
    await appendAll(journal, events);
    await core.appendBatch(events);
    const first = { maxEvents: events.length, leaseMs: 10, now: T0 };
    // The first event of every key and the first of `x` are leased, then every key's acked: `x`'s lease runs out.
    const leased = await journal.claim(billing, first);
    expect(leased.map((delivery) => delivery.id)).toEqual((await core.claim(billing, first)).map((delivery) => delivery.id));
    expect(leased).toHaveLength(n + 1);
    const acked = leased.slice(0, n).map((delivery) => delivery.id);
    expect(await journal.ackBatch(acked)).toEqual(await core.ackBatch(acked));
    // Room for the second event of every key (one RPC's worth), not for the big one: the next RPC meets `x`'s
    // first event out of attempts, quarantines it, and stops before the big one.
    const now = T0 + 20;
    const leaseMs = 60_000;
    const room = events.slice(n, 2 * n).reduce((sum, event) => sum + deliveryBytes({ id: { consumer: billing, event: event.id, attempt: 1 }, event, leaseExpiresAt: now + leaseMs }), 0);
    const second = { maxEvents: events.length, leaseMs, now, maxBytes: room + 100 };
    const got = await journal.claim(billing, second);
    expect(got.map((delivery) => delivery.id)).toEqual((await core.claim(billing, second)).map((delivery) => delivery.id));
    expect(got.map((delivery) => delivery.id.event)).toEqual(events.slice(n, 2 * n).map((event) => event.id));
    const counts = async (of: { stats(consumer: typeof billing): Promise<{ pending: number; inFlight: number; quarantined: number }> }) => {
      const stats = await of.stats(billing);
      return { pending: stats.pending, inFlight: stats.inFlight, quarantined: stats.quarantined };
    };
    expect(await counts(journal)).toEqual(await counts(core));
    expect(await counts(journal)).toEqual({ pending: 1, inFlight: n, quarantined: 1 });
    expect(ignored).toEqual([]);
  });

  it("P=2: appendBatch with one partition's share over 32 MiB stores every event, results in input order", { timeout: 120_000 }, async () => {
    const journal = open(2, []);
    const inP0 = subjectsIn(journal, 0, BIG);
    const inP1 = subjectsIn(journal, 1, 5);
    const events = inP0.map((subject, n) => usage(n + 1, subject, true));
    // Small events of partition 1 spread through the batch.
    inP1.forEach((subject, k) => events.splice(k * 70, 0, usage(1000 + k, subject, false)));
    const results = await journal.appendBatch(events);
    expect(results.every((result) => result.status === "accepted")).toBe(true);
    const positions = (p: number) => results.flatMap((result, i) => (result.status !== "rejected" && journal.partitionOf("acme", events[i]!.record.subject) === p ? [result.position] : []));
    expect(positions(0)).toEqual(Array.from({ length: BIG }, (_, i) => i + 1));
    expect(positions(1)).toEqual([1, 2, 3, 4, 5]);
    expect((await journal.stats(auditor)).pending).toBe(BIG + 5);
  });
});
