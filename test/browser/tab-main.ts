/// <reference lib="dom" />
/**
 * What runs inside an extra page (tab.html) opened by the multi-tab and
 * reload tests: a journal over the IndexedDB engine and a few scripted
 * routines, exposed as `globalThis.isostoreTab` for `page.evaluate` (see
 * tab-commands.ts). Every routine opens its own engine and closes it before
 * returning, except where a test wants a delivery left in flight.
 */
import { indexedDbEngine } from "../../adapters/indexeddb/index.js";
import { createJournal, createUsageEvent, newRequestId, parseConsumerId, type UsageEvent } from "../../src/index.js";

/** One delivery as a tab worker saw it. High-resolution wall-clock times (shared by the tabs of one browser). */
export interface DeliveryLog {
  readonly event: string;
  readonly key: string;
  readonly attempt: number;
  readonly tab: string;
  /** When the claim that handed it out had resolved. */
  readonly claimedAt: number;
  /** When this tab started acknowledging it. */
  readonly ackStartedAt: number;
}

const capacity = { maxEvents: 100_000, maxDeliveryAttempts: 8, retainAcknowledgedMs: 86_400_000, policy: "refuse" } as const;

function wallClock(): number {
  return performance.timeOrigin + performance.now();
}

function journalOn(db: string) {
  const engine = indexedDbEngine({ name: db });
  return { engine, journal: createJournal(engine, { name: "usage", capacity }) };
}

/** An event a tab appended: its id and ordering key. */
export interface AppendedEvent {
  readonly id: string;
  readonly key: string;
}

/** `count` events over `keys` ordering keys, observed from `seed` on (ids are new UUIDv7s every call). */
export function makeEvents(count: number, keys: number, seed: number): UsageEvent[] {
  return Array.from({ length: count }, (_, i) =>
    createUsageEvent({
      record: { requestId: newRequestId(seed + i), namespace: "acme", subject: `user-${i % keys}`, data: { units: i } },
      observedAt: seed + i,
    }),
  );
}

const api = {
  /** Append `count` new events (one batch per 50) and return the accepted ones, in append order. */
  async append(db: string, count: number, keys: number, seed: number): Promise<AppendedEvent[]> {
    const { engine, journal } = journalOn(db);
    const events = makeEvents(count, keys, seed);
    const accepted: AppendedEvent[] = [];
    for (let i = 0; i < events.length; i += 50) {
      const batch = events.slice(i, i + 50);
      const results = await journal.appendBatch(batch);
      results.forEach((result, j) => {
        const event = batch[j]!;
        if (result.status === "accepted") accepted.push({ id: event.id, key: `${event.orderingKey.namespace}/${event.orderingKey.subject}` });
      });
    }
    await engine.close();
    return accepted;
  },

  /** Append `count` new events one at a time, each awaited; returns [id, position] of each, in order. */
  async appendEach(db: string, count: number, keys: number, seed: number): Promise<[string, number, string][]> {
    const { engine, journal } = journalOn(db);
    const out: [string, number, string][] = [];
    for (const event of makeEvents(count, keys, seed)) {
      const result = await journal.append(event);
      out.push([event.id, result.position, result.status]);
    }
    await engine.close();
    return out;
  },

  /**
   * A delivery worker: claim up to 3 events for `consumer` with a long lease,
   * "deliver" each (a short random pause), ack it; stop after `idleRounds`
   * empty claims in a row. Returns every delivery it made.
   */
  async work(db: string, tab: string, consumer: string, idleRounds: number): Promise<DeliveryLog[]> {
    const { engine, journal } = journalOn(db);
    const id = parseConsumerId(consumer);
    const log: DeliveryLog[] = [];
    let idle = 0;
    while (idle < idleRounds) {
      const deliveries = await journal.claim(id, { maxEvents: 3, leaseMs: 600_000, now: Date.now() });
      const claimedAt = wallClock();
      if (deliveries.length === 0) {
        idle++;
        await new Promise((resolve) => setTimeout(resolve, 5));
        continue;
      }
      idle = 0;
      for (const delivery of deliveries) {
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 3));
        const ackStartedAt = wallClock();
        const key = `${delivery.event.orderingKey.namespace}/${delivery.event.orderingKey.subject}`;
        log.push({ event: delivery.event.id, key, attempt: delivery.id.attempt, tab, claimedAt, ackStartedAt });
        await journal.ack(delivery.id);
      }
    }
    await engine.close();
    return log;
  },

  /**
   * Start appending `count` events one by one without waiting (each accepted
   * id is reported through the `reportAccepted` binding the test exposed),
   * and claim `claim` events with a lease, leaving them in flight. Resolves
   * once the claim is done; the appends go on until the page goes away.
   */
  async deliverThenHang(db: string, consumer: string, count: number, seed: number, claim: number, now: number): Promise<string[]> {
    const { journal } = journalOn(db);
    const report = (globalThis as { reportAccepted?: (id: string) => Promise<void> }).reportAccepted;
    const events = makeEvents(count, 10, seed);
    void (async () => {
      for (const event of events) {
        const result = await journal.append(event);
        if (result.status === "accepted" && report) await report(event.id);
      }
    })();
    const deliveries = await journal.claim(parseConsumerId(consumer), { maxEvents: claim, leaseMs: 30_000, now });
    return deliveries.map((d) => d.event.id);
  },

  /** Claim with `now`, ack everything, until drained; returns [event id, attempt] of each delivery. */
  async drain(db: string, consumer: string, now: number): Promise<[string, number][]> {
    const { engine, journal } = journalOn(db);
    const id = parseConsumerId(consumer);
    const out: [string, number][] = [];
    for (;;) {
      const deliveries = await journal.claim(id, { maxEvents: 50, leaseMs: 30_000, now });
      if (deliveries.length === 0) break;
      for (const delivery of deliveries) {
        out.push([delivery.event.id, delivery.id.attempt]);
        await journal.ack(delivery.id);
      }
    }
    await engine.close();
    return out;
  },

  /** The consumer's stats at `now` (the journal's clock is the page's). */
  async stats(db: string, consumer: string): Promise<{ pending: number; inFlight: number }> {
    const { engine, journal } = journalOn(db);
    const stats = await journal.stats(parseConsumerId(consumer));
    await engine.close();
    return { pending: stats.pending, inFlight: stats.inFlight };
  },
};

export type TabApi = typeof api;

(globalThis as { isostoreTab?: TabApi }).isostoreTab = api;
