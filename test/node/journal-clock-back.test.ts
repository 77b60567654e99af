/**
 * A claimer's clock that went back (see `claim` in docs/journal-semantics.md):
 * the leases its consumer claimed more than `CLOCK_BACK_TOLERANCE_MS` after a
 * claim's `now` lapse at that claim. Beyond the conformance example, two cases
 * it cannot reach: a consumer row written before `claimedThrough` existed (the
 * first claim looks at its leases once), and the read-only count a partition
 * answers (`claimable`), which must not fall short of what that claim finds,
 * in the core and in the reference model alike.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { Layout, type ConsumerRow } from "../../src/journal/layout.js";
import { Work } from "../../src/journal/work.js";
import { createJournal, createUsageEvent, parseConsumerId, type Capacity, type UsageJournal } from "../../src/index.js";
import { JournalOracle } from "../../src/testing/journal-oracle.js";

const t0 = 1_700_000_000_000;
const HOUR = 3_600_000;
const consumer = parseConsumerId("fwd");
const capacity: Capacity = { maxEvents: 100, maxDeliveryAttempts: 5, retainAcknowledgedMs: 60_000, policy: "refuse" };
const rid = (n: number) => `0190b000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`;
const usage = (n: number, subject: string) => createUsageEvent({ record: { requestId: rid(n), namespace: "acme", subject, data: { n } }, observedAt: t0 });
const handed = async (journal: UsageJournal, now: number) => (await journal.claim(consumer, { maxEvents: 10, leaseMs: 60_000, now })).map((delivery) => `${delivery.id.event.slice(-1)}#${delivery.id.attempt}`);

describe("a claimer's clock that went back", () => {
  it("a consumer row written before claimedThrough existed: the first claim looks at its leases and lapses those claimed after its now, as the model does", async () => {
    const engine = memoryEngine();
    const core = createJournal(engine, { name: "outbox", capacity, clock: () => t0 });
    const model = new JournalOracle({ name: "outbox", capacity, clock: () => t0 });
    for (const journal of [core, model]) {
      for (const [n, subject] of [[1, "a"], [2, "a"], [3, "b"], [4, "c"]] as const) await journal.append(usage(n, subject));
      await journal.claim(consumer, { maxEvents: 1, leaseMs: 60_000, now: t0 + 2 * HOUR }); // event 1, by a clock 2 h ahead
    }
    // Rewrite the consumer row as the code before the field wrote it.
    await engine.transact("readwrite", async (tx) => {
      const key = new Layout("outbox").consumer(consumer);
      const { claimedThrough, ...row } = (await tx.get<ConsumerRow>(key))!;
      expect(claimedThrough).toBe(t0 + 2 * HOUR);
      tx.put(key, row);
    });
    expect(await handed(core, t0)).toEqual(["1#2", "3#1", "4#1"]);
    expect(await handed(model, t0)).toEqual(["1#2", "3#1", "4#1"]);
    expect(await core.stats(consumer)).toEqual(await model.stats(consumer));
    expect((await core.attempts(consumer, rid(1)))[0]).toMatchObject({ attempt: 1, outcome: { kind: "expired", at: t0 } });
  });

  it("the read-only count of claimable keys counts a lease the claim at that now would lapse (core and model)", async () => {
    const engine = memoryEngine();
    const core = createJournal(engine, { name: "p", capacity, clock: () => t0 });
    const model = new JournalOracle({ name: "p", capacity, clock: () => t0 });
    for (const journal of [core, model]) {
      await journal.append(usage(1, "a"));
      await journal.claim(consumer, { maxEvents: 1, leaseMs: 60_000, now: t0 + 2 * HOUR });
    }
    const coreCount = await engine.transact("readonly", (tx) => new Work(tx, new Layout("p"), capacity).claimableAtMost(consumer, t0, 10));
    expect([coreCount, model.claimableAtMost(consumer, t0, 10)]).toEqual([1, 1]);
    expect(await handed(core, t0)).toEqual(["1#2"]);
    expect(await handed(model, t0)).toEqual(["1#2"]);
  });
});
