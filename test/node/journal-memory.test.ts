/**
 * The journal conformance suite against the memory engine: the model-based
 * run beside the reference model, and one example per guarantee of the spec.
 * "Reopen" is a new journal over the same engine (the journal keeps no state
 * outside it).
 *
 * The memory engine says its reads are local (`Engine.localReads`), so the
 * journal reads one key at a time over it. The second run hides that hint,
 * so the same suite also drives the read-ahead path (grouped reads, cached
 * scans) that IndexedDB takes, here in the fast lane.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { createJournal, createUsageEvent, newRequestId, parseConsumerId, type DeliveryId, type Engine, type UsageEvent } from "../../src/index.js";
import { journalConformanceCases } from "../../src/testing/index.js";
import { readingAhead } from "./support/reading-ahead.js";

const variants: { label: string; title: string; makeEngine: () => Engine }[] = [
  { label: "memory", title: "usage journal over the memory engine", makeEngine: () => memoryEngine() },
  { label: "memory, reading ahead", title: "usage journal over the memory engine, reading ahead", makeEngine: () => readingAhead(memoryEngine()) },
];

for (const { label, title, makeEngine } of variants) {
  describe(title, () => {
    const cases = journalConformanceCases({
      label,
      durable: false,
      canReopen: true,
      canChangeCapacity: true,
      createSubject: async (options) => {
        const engine = makeEngine();
        return {
          journal: createJournal(engine, options),
          reopen: async (changed) => createJournal(engine, { ...options, ...changed }),
          close: () => engine.close(),
        };
      },
    });
    for (const c of cases) it(c.name, c.run, c.timeoutMs);
  });
}

describe("createJournal without a capacity", () => {
  it("uses BILLING_GRADE: 1,000,000 events, 8 attempts, 24 h retention, refuse", async () => {
    const engine = memoryEngine();
    try {
      const journal = createJournal(engine, { name: "usage" });
      const spec = { maxEvents: 1_000_000, maxDeliveryAttempts: 8, retainAcknowledgedMs: 86_400_000, policy: "refuse" };
      expect(journal.capacity).toEqual(spec);
      expect((await journal.stats(parseConsumerId("billing"))).capacity).toEqual(spec);
    } finally {
      await engine.close();
    }
  });
});

describe("batches with holes (sparse arrays)", () => {
  it("refuse each hole in place with a typed error, as the reference model does, and store the rest", async () => {
    const engine = memoryEngine();
    try {
      const journal = createJournal(engine, { name: "usage" });
      const event = createUsageEvent({ record: { requestId: newRequestId(), namespace: "acme", subject: "user-1", data: { n: 1 } }, observedAt: 1 });
      const events: UsageEvent[] = [];
      events[1] = event;
      const results = await journal.appendBatch(events);
      expect(results).toMatchObject([{ status: "rejected", error: { code: "invalid_event" } }, { status: "accepted", position: 1 }]);
      const deliveries: DeliveryId[] = [];
      deliveries[2] = (await journal.claim(parseConsumerId("billing"), { maxEvents: 1, leaseMs: 1000, now: 1 }))[0]!.id;
      const acks = await journal.ackBatch(deliveries);
      expect(acks).toMatchObject([{ ok: false, error: { code: "invalid_argument" } }, { ok: false, error: { code: "invalid_argument" } }, { ok: true }]);
    } finally {
      await engine.close();
    }
  });
});
