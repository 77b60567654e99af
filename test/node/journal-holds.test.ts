/**
 * drop_oldest's holds on keys are rows of their own (`g`, `gt`), so storage
 * stays bounded: a hold whose lease end has passed is forgotten by the
 * consumer's next claim, and a journal that never dropped an event in flight
 * writes none. (What the holds do is checked by the conformance examples and
 * the model on every implementation; this is about the rows they leave.)
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { createJournal, createUsageEvent, parseConsumerId, type Capacity } from "../../src/index.js";

const billing = parseConsumerId("billing");
const rid = (n: number) => `0190b000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`;
const t0 = 1_700_000_000_000;

async function rowsUnder(engine: ReturnType<typeof memoryEngine>, table: string): Promise<number> {
  return engine.transact("readonly", async (tx) => (await tx.scan({ prefix: ["j", "usage", table] })).length);
}

describe("drop_oldest holds", () => {
  it("leave no rows once their lease ends have passed and the consumer claimed again", async () => {
    let now = t0;
    const engine = memoryEngine();
    const capacity: Capacity = { maxEvents: 2, maxDeliveryAttempts: 3, retainAcknowledgedMs: 0, policy: "drop_oldest" };
    const journal = createJournal(engine, { name: "usage", capacity, clock: () => now });
    // Each append drops the previous key's event while it is in flight: 300 keys held, each left empty.
    for (let n = 1; n <= 300; n++) {
      await journal.append(createUsageEvent({ record: { requestId: rid(n), namespace: "acme", subject: `user-${n}`, data: { n } }, observedAt: t0 }));
      await journal.claim(billing, { maxEvents: 1, leaseMs: 1000, now });
    }
    expect((await journal.stats(billing)).dropped).toBe(298);
    expect(await rowsUnder(engine, "g")).toBeGreaterThan(0);
    expect(await rowsUnder(engine, "h")).toBe(2); // one head row per key with an unfinished event
    now += 2000;
    await journal.claim(billing, { maxEvents: 10, leaseMs: 1000, now });
    expect([await rowsUnder(engine, "g"), await rowsUnder(engine, "gt")]).toEqual([0, 0]);
  });

  it("is forgotten by a claim at exactly its end", async () => {
    let now = t0;
    const engine = memoryEngine();
    const journal = createJournal(engine, { name: "usage", capacity: { maxEvents: 2, maxDeliveryAttempts: 3, retainAcknowledgedMs: 0, policy: "drop_oldest" }, clock: () => now });
    for (let n = 1; n <= 3; n++) {
      await journal.append(createUsageEvent({ record: { requestId: rid(n), namespace: "acme", subject: `user-${n}`, data: { n } }, observedAt: t0 }));
      if (n === 1) await journal.claim(billing, { maxEvents: 1, leaseMs: 1000, now });
    }
    expect(await rowsUnder(engine, "g")).toBe(1); // event 1 dropped in flight: user-1 held until t0 + 1000
    now = t0 + 1000;
    await journal.claim(billing, { maxEvents: 10, leaseMs: 1000, now });
    expect([await rowsUnder(engine, "g"), await rowsUnder(engine, "gt")]).toEqual([0, 0]);
  });

  it("are not written by a journal that never drops an event in flight", async () => {
    const engine = memoryEngine();
    const journal = createJournal(engine, { name: "usage", capacity: { maxEvents: 2, maxDeliveryAttempts: 3, retainAcknowledgedMs: 0, policy: "drop_oldest" }, clock: () => t0 });
    await journal.claim(billing, { maxEvents: 1, leaseMs: 1000, now: t0 });
    for (let n = 1; n <= 5; n++) await journal.append(createUsageEvent({ record: { requestId: rid(n), namespace: "acme", subject: "user", data: { n } }, observedAt: t0 }));
    expect((await journal.stats(billing)).dropped).toBe(3);
    expect([await rowsUnder(engine, "g"), await rowsUnder(engine, "gt")]).toEqual([0, 0]);
  });
});
