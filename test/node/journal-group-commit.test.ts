/**
 * Group commit of concurrent appends (`append` in src/journal/journal.ts):
 * appends that arrive while an append transaction runs commit together in
 * the next one. Each caller must get exactly the answer its own transaction
 * would have given, in call order: the reference model runs the same calls
 * one after another and the answers must match, refusals and drops included.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import {
  createJournal,
  createUsageEvent,
  newRequestId,
  parseConsumerId,
  type Capacity,
  type Engine,
  type JsonValue,
  type UsageEvent,
  type UsageJournal,
} from "../../src/index.js";
import { JournalOracle, virtualClock } from "../../src/testing/index.js";
import { readingAhead } from "./support/reading-ahead.js";

/** An engine that counts the transactions it was asked for and can be told to fail them. */
function countingEngine(inner: Engine): Engine & { transactions: number; failNext: number } {
  const engine = {
    durable: inner.durable,
    transactions: 0,
    failNext: 0,
    close: () => inner.close(),
    transact<T>(mode: Parameters<Engine["transact"]>[0], fn: Parameters<Engine["transact"]>[1]): Promise<T> {
      engine.transactions += 1;
      if (engine.failNext > 0) {
        engine.failNext -= 1;
        return Promise.reject(new Error("disk on fire"));
      }
      return inner.transact(mode, fn) as Promise<T>;
    },
  };
  return engine;
}

async function outcome(call: () => Promise<unknown>): Promise<unknown> {
  try {
    return { ok: await call() };
  } catch (error) {
    return { error: (error as { code?: string }).code ?? String(error) };
  }
}

const consumer = parseConsumerId("billing");
let serial = 0;
function event(subject: string, data: JsonValue = { n: ++serial }, requestId = newRequestId(1_700_000_000_000 + ++serial)): UsageEvent {
  return createUsageEvent({ record: { requestId, namespace: "acme", subject, data }, observedAt: 1_700_000_000_000 });
}

const roomy: Capacity = { maxEvents: 1000, maxDeliveryAttempts: 3, retainAcknowledgedMs: 1000, policy: "refuse" };

describe("group commit of concurrent appends", () => {
  it("commits a burst of concurrent appends in far fewer transactions, in call order", async () => {
    const engine = countingEngine(memoryEngine());
    const journal = createJournal(engine, { name: "usage", capacity: roomy });
    const events = Array.from({ length: 50 }, (_, i) => event(`user-${i % 5}`));
    const results = await Promise.all(events.map((e) => journal.append(e)));
    expect(results.map((r) => r.status)).toEqual(events.map(() => "accepted"));
    expect(results.map((r) => r.position)).toEqual(events.map((_, i) => i + 1));
    // The first append runs alone; the other 49 arrived meanwhile and commit as one group.
    expect(engine.transactions).toBe(2);
    const claimed = await journal.claim(consumer, { maxEvents: 100, leaseMs: 1000, now: Date.now() });
    expect(claimed.map((d) => d.event.id)).toEqual(events.slice(0, 5).map((e) => e.id));
  });

  it("a sequential caller still gets one transaction per append", async () => {
    const engine = countingEngine(memoryEngine());
    const journal = createJournal(engine, { name: "usage", capacity: roomy });
    for (let i = 0; i < 5; i++) await journal.append(event("user-1"));
    expect(engine.transactions).toBe(5);
  });

  it("a refused event in a group fails only its own caller; the others commit", async () => {
    const engine = countingEngine(memoryEngine());
    const journal = createJournal(engine, { name: "usage", capacity: roomy });
    const first = event("user-1", { tokens: 1 });
    const conflicting = event("user-1", { tokens: 2 }, first.id);
    const others = [event("user-2"), event("user-3")];
    const answers = await Promise.all([first, conflicting, ...others, first].map((e) => outcome(() => journal.append(e))));
    expect(answers).toEqual([
      { ok: { status: "accepted", position: 1 } },
      { error: "conflict" },
      { ok: { status: "accepted", position: 2 } },
      { ok: { status: "accepted", position: 3 } },
      { ok: { status: "already_present", position: 1 } },
    ]);
  });

  it("each append of a group does its own opportunistic pruning, as it would alone", async () => {
    const time = virtualClock(1_700_000_000_000);
    const journal = createJournal(memoryEngine(), { name: "usage", capacity: roomy, clock: time.clock });
    const old = Array.from({ length: 20 }, (_, i) => event(`user-${i}`));
    await journal.appendBatch(old);
    for (const delivery of await journal.claim(consumer, { maxEvents: 100, leaseMs: 100, now: time.now })) await journal.ack(delivery.id);
    time.advance(roomy.retainAcknowledgedMs + 1);
    // One after another, the first three appends would prune 8 + 8 + 4 of the
    // 20 finished events; the fourth then finds the last one's id forgotten
    // and accepts it anew. (The first runs alone, the other three as a group.)
    const answers = await Promise.all([event("user-a"), event("user-b"), event("user-c"), old[19]!].map((e) => journal.append(e)));
    expect(answers.map((a) => a.status)).toEqual(["accepted", "accepted", "accepted", "accepted"]);
  });

  it("a group whose clock crosses a retention deadline between two of its appends prunes as those appends would one by one", async () => {
    const t0 = 1_700_000_000_000; // every event here is observed at t0: event 1's window ends at t0 + 1000
    const auditor = parseConsumerId("auditor"); // never claims: its stats show what is stored
    const storedAfter = async (together: boolean) => {
      const time = virtualClock(t0);
      const engine = countingEngine(memoryEngine());
      const journal = createJournal(engine, { name: "usage", capacity: roomy, clock: time.clock });
      await journal.append(event("user-1"));
      for (const delivery of await journal.claim(consumer, { maxEvents: 10, leaseMs: 100, now: t0 })) await journal.ack(delivery.id);
      const [a, b, c] = [event("user-a"), event("user-b"), event("user-c")];
      const before = engine.transactions;
      if (together) {
        // A runs alone; B (at t0 + 999, event 1 not yet due) and C (at t0 + 1000, due) arrive meanwhile and commit as one group.
        const calls = [journal.append(a)];
        time.now = t0 + 999;
        calls.push(journal.append(b));
        time.now = t0 + 1000;
        calls.push(journal.append(c));
        expect((await Promise.all(calls)).map((result) => result.status)).toEqual(["accepted", "accepted", "accepted"]);
        expect(engine.transactions - before).toBe(2);
      } else {
        await journal.append(a);
        time.now = t0 + 999;
        await journal.append(b);
        time.now = t0 + 1000;
        await journal.append(c);
      }
      return (await journal.stats(auditor)).pending;
    };
    expect(await storedAfter(false)).toBe(3); // C's append pruned event 1
    expect(await storedAfter(true)).toBe(3);
  });

  it("an engine failure of a group's transaction re-runs its appends one by one", async () => {
    const engine = countingEngine(memoryEngine());
    const journal = createJournal(engine, { name: "usage", capacity: roomy });
    const events = Array.from({ length: 4 }, () => event("user-1"));
    const firstDone = journal.append(events[0]!);
    engine.failNext = 2; // the group's transaction and the first re-run
    const rest = events.slice(1).map((e) => outcome(() => journal.append(e)));
    await firstDone;
    const answers = await Promise.all(rest);
    expect(answers).toEqual([{ error: "backend" }, { ok: { status: "accepted", position: 2 } }, { ok: { status: "accepted", position: 3 } }]);
    expect((await journal.stats(consumer)).pending).toBe(3);
  });

  it.each([
    ["", (engine: Engine) => engine],
    [", reading ahead", readingAhead],
  ])("bursts of concurrent appends answer like the same appends one by one (reference model%s)", async (_label, wrap) => {
    const burstArb = fc.array(
      fc.record({ subject: fc.integer({ min: 0, max: 5 }), reuse: fc.option(fc.nat(30), { nil: undefined }), conflicting: fc.boolean() }),
      { minLength: 1, maxLength: 12 },
    );
    const stepArb = fc.oneof(
      { weight: 3, arbitrary: burstArb.map((burst) => ({ kind: "burst" as const, burst })) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: 20 }).map((max) => ({ kind: "claimAck" as const, max })) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: 3000 }).map((ms) => ({ kind: "advance" as const, ms })) },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          maxEvents: fc.oneof(fc.integer({ min: 3, max: 10 }), fc.integer({ min: 20, max: 40 })),
          retainAcknowledgedMs: fc.integer({ min: 0, max: 2000 }),
          policy: fc.constantFrom("refuse" as const, "drop_oldest" as const),
        }),
        fc.array(stepArb, { maxLength: 16 }),
        async (bounds, steps) => {
          const capacity: Capacity = { ...bounds, maxDeliveryAttempts: 2 };
          const time = virtualClock(1_700_000_000_000);
          const engine = wrap(memoryEngine());
          const journal: UsageJournal = createJournal(engine, { name: "usage", capacity, clock: time.clock });
          const oracle = new JournalOracle({ name: "usage", capacity, clock: time.clock, durable: false });
          const sent: UsageEvent[] = [];
          for (const step of steps) {
            if (step.kind === "advance") {
              time.advance(step.ms);
            } else if (step.kind === "claimAck") {
              const expected = await outcome(() => oracle.claim(consumer, { maxEvents: step.max, leaseMs: 500, now: time.now }));
              const actual = await outcome(() => journal.claim(consumer, { maxEvents: step.max, leaseMs: 500, now: time.now }));
              expect(actual).toEqual(expected);
              for (const delivery of (expected as { ok?: { id: Parameters<UsageJournal["ack"]>[0] }[] }).ok ?? []) {
                expect(await outcome(() => journal.ack(delivery.id))).toEqual(await outcome(() => oracle.ack(delivery.id)));
              }
            } else {
              const events = step.burst.map(({ subject, reuse, conflicting }) => {
                const earlier = reuse === undefined ? undefined : sent[reuse % Math.max(1, sent.length)];
                if (earlier === undefined) return event(`user-${subject}`);
                return conflicting ? event(`user-${subject}`, { other: true }, earlier.id) : earlier;
              });
              sent.push(...events);
              // The journal sees the burst concurrently; the model one call after another.
              const actual = await Promise.all(events.map((e) => outcome(() => journal.append(e))));
              const expected: unknown[] = [];
              for (const e of events) expected.push(await outcome(() => oracle.append(e)));
              expect(actual).toEqual(expected);
            }
          }
          expect(await outcome(() => journal.stats(consumer))).toEqual(await outcome(() => oracle.stats(consumer)));
          await engine.close();
        },
      ),
      { numRuns: process.env["SOAK"] === "1" ? 5000 : 200 },
    );
  });
});
