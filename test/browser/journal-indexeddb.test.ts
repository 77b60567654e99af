/**
 * The journal conformance suite against the IndexedDB engine in real
 * Chromium (strict durability, so billing_grade), plus the reopen test: close
 * the database, open a new engine and journal on the same name, continue.
 *
 * Every subject gets a database of its own, deleted when the subject closes.
 * "Reopen" inside the model-based case closes the engine and opens a new one
 * on the same database. The model-based case runs {@link RUNS} random
 * sequences (the suite's default is 300, about 19 s of real strict commits on
 * the 2-core CI box; 200 keeps the whole browser lane near 30 s). The Node
 * lane over fake-indexeddb runs the default 300.
 */
import { describe, expect, it } from "vitest";
import { indexedDbEngine } from "../../adapters/indexeddb/index.js";
import { createJournal, createUsageEvent, newRequestId, parseConsumerId } from "../../src/index.js";
import { journalConformanceCases } from "../../src/testing/index.js";

/** Random sequences of the model-based case in this lane. */
const RUNS = 200;

const run = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
let counter = 0;

function deleteDatabase(name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = indexedDB.deleteDatabase(name);
    request.onsuccess = () => resolve();
    request.onerror = () => reject(request.error ?? new Error(`could not delete ${name}`));
  });
}

describe("usage journal over the IndexedDB engine (Chromium)", () => {
  const cases = journalConformanceCases({
    label: "indexeddb (Chromium)",
    durable: true,
    canReopen: true,
    canChangeCapacity: true,
    runs: RUNS,

    createSubject: async (options) => {
      const name = `conformance-${run}-${++counter}`;
      let engine = indexedDbEngine({ name });
      return {
        journal: createJournal(engine, options),
        reopen: async (changed) => {
          await engine.close();
          engine = indexedDbEngine({ name });
          return createJournal(engine, { ...options, ...changed });
        },
        close: async () => {
          await engine.close();
          await deleteDatabase(name);
        },
      };
    },
  });
  for (const c of cases) it(c.name, c.run, c.timeoutMs);
});

describe("reopening the IndexedDB journal (Chromium)", () => {
  it("keeps accepted events, leases and acks across close and reopen, and continues from there", async () => {
    const name = `reopen-${run}`;
    const consumer = parseConsumerId("billing");
    const events = Array.from({ length: 5 }, (_, i) =>
      createUsageEvent({ record: { requestId: newRequestId(1_700_000_000_000 + i), namespace: "acme", subject: `user-${i % 2}`, data: { units: i } }, observedAt: 1_700_000_000_000 + i }),
    );
    let now = 1_700_000_001_000;
    const clock = () => now;
    let engine = indexedDbEngine({ name });
    let journal = createJournal(engine, { name: "usage", clock });
    expect(journal.mode).toBe("billing_grade");
    await journal.appendBatch(events);
    const first = await journal.claim(consumer, { maxEvents: 10, leaseMs: 60_000, now });
    expect(first.map((d) => d.event.id)).toEqual([events[0]!.id, events[1]!.id]);
    await journal.ack(first[0]!.id);
    await engine.close();

    engine = indexedDbEngine({ name });
    journal = createJournal(engine, { name: "usage", clock });
    now += 1;
    // Accepted events are all there; the ack held; the other lease is still running.
    expect(await journal.append(events[4]!)).toMatchObject({ status: "already_present" });
    expect(await journal.stats(consumer)).toMatchObject({ pending: 3, inFlight: 1 });
    const second = await journal.claim(consumer, { maxEvents: 10, leaseMs: 60_000, now });
    expect(second.map((d) => d.event.id)).toEqual([events[2]!.id]);
    // After the lease lapses the unacked delivery comes back as attempt 2.
    await journal.ack(second[0]!.id);
    now += 120_000;
    const third = await journal.claim(consumer, { maxEvents: 10, leaseMs: 60_000, now });
    expect(third.map((d) => [d.event.id, d.id.attempt])).toEqual([
      [events[1]!.id, 2],
      [events[4]!.id, 1],
    ]);
    await engine.close();
    await deleteDatabase(name);
  });
});
