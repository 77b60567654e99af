/**
 * Reopening stored data under another capacity policy. A journal created under
 * `refuse` does not keep the drop-candidate index (`o`, see
 * `src/journal/layout.ts`); a `drop_oldest` journal opened later over the same
 * engine builds it at its first drop. These runs drive random histories under
 * `refuse`, switch both the journal and the reference model to `drop_oldest`
 * (`JournalOracle.withCapacity`), go on, and require the same answers
 * throughout, drops included.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { createJournal, createUsageEvent, newRequestId, parseConsumerId, type Capacity, type Delivery, type UsageJournal } from "../../src/index.js";
import { JournalOracle, virtualClock } from "../../src/testing/index.js";

type Op =
  | { kind: "append"; key: number }
  | { kind: "claim"; consumer: number; max: number }
  | { kind: "ack" | "quarantine"; nth: number }
  | { kind: "advance"; ms: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("append" as const), key: fc.integer({ min: 0, max: 2 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("claim" as const), consumer: fc.integer({ min: 0, max: 1 }), max: fc.integer({ min: 1, max: 3 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("ack" as const), nth: fc.nat(20) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("quarantine" as const), nth: fc.nat(20) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("advance" as const), ms: fc.integer({ min: 1, max: 4000 }) }) },
);

const consumers = [parseConsumerId("billing"), parseConsumerId("audit")];

/** A call's answer as plain data: its value, or its error's code. */
async function outcome(call: () => Promise<unknown>): Promise<unknown> {
  try {
    return { ok: await call() };
  } catch (error) {
    return { error: (error as { code?: string }).code ?? String(error) };
  }
}

describe("reopening a refuse journal as drop_oldest", () => {
  it("answers like the reference model before and after the switch, drops included", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 3, max: 7 }),
        fc.integer({ min: 0, max: 3000 }),
        fc.array(opArb, { maxLength: 30 }),
        fc.array(opArb, { maxLength: 30 }),
        async (maxEvents, retainAcknowledgedMs, before, after) => {
          const time = virtualClock(1_700_000_000_000);
          const refuse: Capacity = { maxEvents, maxDeliveryAttempts: 2, retainAcknowledgedMs, policy: "refuse" };
          const engine = memoryEngine();
          let journal: UsageJournal = createJournal(engine, { name: "usage", capacity: refuse, clock: time.clock });
          let oracle = new JournalOracle({ name: "usage", capacity: refuse, clock: time.clock, durable: false });
          const deliveries: Delivery[] = [];
          let serial = 0;
          const run = async (op: Op): Promise<void> => {
            const both = async (call: (j: UsageJournal) => Promise<unknown>) => {
              const expected = await outcome(() => call(oracle));
              const actual = await outcome(() => call(journal));
              expect(actual).toEqual(expected);
              return expected;
            };
            if (op.kind === "append") {
              serial += 1;
              const event = createUsageEvent({
                record: { requestId: newRequestId(time.now + serial), namespace: "acme", subject: `user-${op.key}`, data: { n: serial } },
                observedAt: time.now,
              });
              await both((j) => j.append(event));
            } else if (op.kind === "claim") {
              const answer = (await both((j) => j.claim(consumers[op.consumer]!, { maxEvents: op.max, leaseMs: 2000, now: time.now }))) as { ok?: Delivery[] };
              deliveries.push(...(answer.ok ?? []));
            } else if (op.kind === "ack" || op.kind === "quarantine") {
              const delivery = deliveries[op.nth % Math.max(1, deliveries.length)];
              if (delivery === undefined) return;
              await both((j) => (op.kind === "ack" ? j.ack(delivery.id) : j.quarantine(delivery.id, "malformed")));
            } else if (op.kind === "advance") {
              time.advance(op.ms);
            }
          };
          for (const op of before) await run(op);
          const drop: Capacity = { ...refuse, policy: "drop_oldest" };
          journal = createJournal(engine, { name: "usage", capacity: drop, clock: time.clock });
          oracle = oracle.withCapacity(drop);
          for (const op of after) await run(op);
          // Fill it past capacity, so the switch is always followed by drops.
          for (let i = 0; i < maxEvents + 2; i++) await run({ kind: "append", key: i % 3 });
          for (const consumer of consumers) {
            expect(await outcome(() => journal.stats(consumer))).toEqual(await outcome(() => oracle.stats(consumer)));
            expect(await outcome(() => journal.claim(consumer, { maxEvents: 100, leaseMs: 1, now: time.now }))).toEqual(
              await outcome(() => oracle.claim(consumer, { maxEvents: 100, leaseMs: 1, now: time.now })),
            );
          }
          await engine.close();
        },
      ),
      { numRuns: process.env["SOAK"] === "1" ? 5000 : 150 },
    );
  });
});
