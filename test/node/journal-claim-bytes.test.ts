/**
 * A claim with `maxBytes` reads (and, on an engine with round trips, reads
 * ahead) about what the bytes hold, not the rows and events of `maxEvents`:
 * its pages of ready entries are sized from the bytes left and the average
 * delivery so far.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import type { Engine, EngineTransaction, Key, KeyRange, ScanOptions } from "../../src/engine.js";
import { BILLING_GRADE, createJournal, createUsageEvent, newRequestId, parseConsumerId } from "../../src/index.js";

const t0 = 1_700_000_000_000;
const billing = parseConsumerId("billing");

/** The memory engine, as an engine with round trips (so the journal reads ahead), counting the event rows it hands out. */
function countingEngine(): { engine: Engine; eventRows: () => number } {
  const inner = memoryEngine();
  let rows = 0;
  const isEvent = (key: Key) => key[2] === "e";
  const wrap = (tx: EngineTransaction): EngineTransaction => ({
    get: async <V>(key: Key) => {
      const value = await tx.get<V>(key);
      if (value !== undefined && isEvent(key)) rows++;
      return value;
    },
    put: (key, value) => tx.put(key, value),
    delete: (key) => tx.delete(key),
    scan: async <V>(range: KeyRange, options?: ScanOptions) => {
      const entries = await tx.scan<V>(range, options);
      rows += entries.filter((entry) => isEvent(entry.key)).length;
      return entries;
    },
  });
  const engine: Engine = { durable: false, localReads: false, close: () => inner.close(), transact: (mode, body, options) => inner.transact(mode, (tx) => body(wrap(tx)), options) };
  return { engine, eventRows: () => rows };
}

describe("a claim bounded by maxBytes", () => {
  it("reads a few pages of events, not maxEvents of them", async () => {
    const { engine, eventRows } = countingEngine();
    const journal = createJournal(engine, { name: "usage", capacity: { ...BILLING_GRADE, maxEvents: 100_000 }, clock: () => t0 });
    const text = "x".repeat(10_000);
    for (let n = 0; n < 2000; n += 500) {
      await journal.appendBatch(Array.from({ length: 500 }, (_, i) => createUsageEvent({ record: { requestId: newRequestId(t0 + n + i), namespace: "a", subject: `s${n + i}`, data: { text } }, observedAt: t0 })));
    }
    await journal.claim(billing, { maxEvents: 1, leaseMs: 1000, now: t0 }); // registers the consumer (which walks every event once)
    const before = eventRows();
    const small = await journal.claim(billing, { maxEvents: 2000, leaseMs: 1000, now: t0, maxBytes: 20_000 });
    expect(small).toHaveLength(1);
    expect(eventRows() - before).toBeLessThanOrEqual(40);
    const middle = eventRows();
    const tenth = await journal.claim(billing, { maxEvents: 2000, leaseMs: 1000, now: t0, maxBytes: 200 * 10_100 });
    expect(tenth.length).toBeGreaterThan(150);
    expect(tenth.length).toBeLessThan(200);
    expect(eventRows() - middle).toBeLessThanOrEqual(2 * tenth.length + 40);
  });
});
