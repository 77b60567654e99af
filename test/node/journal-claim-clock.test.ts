/**
 * A claim's `now` is the claimer's clock, which may run ahead of the
 * journal's. Pruning forgets request ids, so the pruning a claim does (the
 * opportunistic prune, and the full prune before a new consumer registers)
 * runs at the earlier of its `now` and the journal's clock: an event still
 * inside its window by the journal's clock keeps its request id, and a
 * retried append of it is not journaled (and delivered) twice.
 *
 * The conformance suite checks the opportunistic prune on every
 * implementation; the registration is checked here, on the core journal and
 * the reference model (and for a `PartitionedJournal` in
 * test/workers/partitioned.test.ts).
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { createJournal, createUsageEvent, parseConsumerId, type Capacity, type UsageJournal } from "../../src/index.js";
import { JournalOracle } from "../../src/testing/index.js";

const t0 = 1_700_000_000_000;
const billing = parseConsumerId("billing");
const warehouse = parseConsumerId("warehouse");
const CAPACITY: Capacity = { maxEvents: 100, maxDeliveryAttempts: 3, retainAcknowledgedMs: 1000, policy: "refuse" };
const rid = (n: number) => `0190d000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`;
const event = (n: number) => createUsageEvent({ record: { requestId: rid(n), namespace: "acme", subject: `user-${n}`, data: { tokens: n } }, observedAt: t0 });
/** More than one opportunistic prune (8) takes: only the registration's full prune could take them all. */
const EVENTS = 12;

const subjects: Record<string, (clock: () => number) => UsageJournal> = {
  memory: (clock) => createJournal(memoryEngine(), { name: "usage", capacity: CAPACITY, clock }),
  oracle: (clock) => new JournalOracle({ name: "usage", capacity: CAPACITY, clock }),
};

describe("a claim whose now runs ahead of the journal's clock", () => {
  for (const [label, open] of Object.entries(subjects)) {
    it(`${label}: a new consumer registers at the clock: it gets the events still inside their window, and their ids are kept`, async () => {
      let now = t0;
      const journal = open(() => now);
      for (let n = 1; n <= EVENTS; n++) await journal.append(event(n));
      for (const delivery of await journal.claim(billing, { maxEvents: 20, leaseMs: 1000, now })) await journal.ack(delivery.id);

      // warehouse's clock is 10 s fast: by it, every window (t0 + 1000) has passed.
      const handed = await journal.claim(warehouse, { maxEvents: 20, leaseMs: 1000, now: t0 + 10_000 });
      expect(handed.map((delivery) => delivery.id.event)).toEqual(Array.from({ length: EVENTS }, (_, index) => rid(index + 1)));
      for (let n = 1; n <= EVENTS; n++) expect(await journal.append(event(n))).toEqual({ status: "already_present", position: n });

      // By the journal's clock too, once it gets there (warehouse finished them).
      for (const delivery of handed) await journal.ack(delivery.id);
      now = t0 + 1000;
      expect(await journal.prune({ now })).toEqual({ pruned: EVENTS });
    });

    it(`${label}: a claim at a now behind the clock prunes at its now`, async () => {
      let now = t0;
      const journal = open(() => now);
      await journal.append(event(1));
      for (const delivery of await journal.claim(billing, { maxEvents: 1, leaseMs: 1000, now })) await journal.ack(delivery.id);
      now = t0 + 5000;
      expect(await journal.claim(billing, { maxEvents: 1, leaseMs: 1000, now: t0 + 999 })).toEqual([]);
      // The claim's pruning did not take event 1 (its window ends at t0 + 1000), so an explicit prune still finds it.
      expect(await journal.prune({ now: t0 + 1000 })).toEqual({ pruned: 1 });
    });
  }
});
