/**
 * The partitioned journal (P > 1) with partitions that register a consumer
 * in steps over several calls (their journals given tiny registration steps
 * here; by default a call walks 50,000 events): a claim registers the
 * consumer everywhere first, and a partition whose registration is not done
 * yet goes on with it at the next claim, so claims smaller than P, which ask
 * the partitions what they could hand out before claiming, still reach
 * every event once.
 */
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { PartitionedJournal } from "../../adapters/durable-objects/index.js";
import { createUsageEvent, parseConsumerId, type Capacity, type Delivery, type UsageJournal } from "../../src/index.js";
import { setRegistrationSteps } from "../../src/journal/journal.js";

const T0 = 1_700_000_000_000;
const billing = parseConsumerId("billing");
const ROOMY: Capacity = { maxEvents: 1000, maxDeliveryAttempts: 5, retainAcknowledgedMs: 60_000, policy: "refuse" };

function rid(n: number): string {
  return `0190d000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`;
}

describe("a partitioned journal registering a consumer in steps", () => {
  it("goes on with each partition's registration at the next claims, and a claim of 1 then reaches every event once", async () => {
    const journal = new PartitionedJournal(env.PARTITIONS, { name: "usage", partitions: 2, capacity: ROOMY, clock: () => T0, scope: "registration-steps/" });
    // Six keys per partition, twelve events in each.
    const subjects: string[][] = [[], []];
    for (let i = 0; subjects.some((list) => list.length < 6); i++) {
      const list = subjects[journal.partitionOf("acme", `user-${i}`)]!;
      if (list.length < 6) list.push(`user-${i}`);
    }
    const events = Array.from({ length: 24 }, (_, i) =>
      createUsageEvent({ record: { requestId: rid(i + 1), namespace: "acme", subject: subjects[i % 2]![Math.floor(i / 2) % 6]!, data: { n: i } }, observedAt: T0 + i }),
    );
    await journal.appendBatch(events);
    // Each partition's journal (opened by the appends) walks 2 events per transaction and 4 per call.
    for (const p of [0, 1]) {
      const stub = env.PARTITIONS.get(env.PARTITIONS.idFromName(journal.objectName(p)));
      await runInDurableObject(stub, (instance) => {
        // The partition's journal is private: this test reaches in to give it small steps.
        setRegistrationSteps((instance as unknown as { journal: UsageJournal }).journal, { eventsPerStep: 2, eventsPerClaim: 4 });
      });
    }
    const handed: Delivery[] = [];
    let empty = 0;
    for (let round = 0; round < 100; round++) {
      const got = await journal.claim(billing, { maxEvents: 1, leaseMs: 60_000, now: T0 + 100 });
      if (got.length === 0) {
        if (handed.length > 0) break;
        empty++;
        continue;
      }
      for (const delivery of got) await journal.ack(delivery.id);
      handed.push(...got);
    }
    // Twelve events per partition, four walked per call: the registration's calls answer nothing.
    expect(empty).toBeGreaterThanOrEqual(2);
    expect(handed.map((delivery) => delivery.event.id).sort()).toEqual(events.map((event) => event.id).sort());
    expect(await journal.stats(billing)).toMatchObject({ pending: 0, inFlight: 0 });
  });
});
