/**
 * Consumer rows written before they counted finished events. A consumer's
 * counters (`c` rows, see `src/journal/layout.ts`) used to hold `unfinished`;
 * they now hold `finished`, so that an append writes no consumer row. A row in
 * the old shape is converted when read (`finished = stored - unfinished -
 * quarantined`). Here a journal's rows are rewritten into the old shape, a new
 * journal opens the same engine, and its answers must be those of a journal
 * that never saw the old shape, before and after more traffic.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import type { Engine } from "../../src/engine.js";
import { createJournal, createUsageEvent, newRequestId, parseConsumerId, type Capacity, type UsageJournal } from "../../src/index.js";

const capacity: Capacity = { maxEvents: 100, maxDeliveryAttempts: 3, retainAcknowledgedMs: 10_000, policy: "refuse" };
const consumers = [parseConsumerId("billing"), parseConsumerId("audit")];
const t0 = 1_700_000_000_000;

/** The same traffic on any journal: appends over 3 keys, claims, acks, a quarantine, a prune. */
async function traffic(journal: UsageJournal, now: () => number, from: number): Promise<void> {
  for (let i = 0; i < 12; i++) {
    await journal.append(
      createUsageEvent({ record: { requestId: newRequestId(t0 + from + i), namespace: "acme", subject: `user-${i % 3}`, data: { n: from + i } }, observedAt: t0 + from + i }),
    );
  }
  for (const consumer of consumers) {
    const deliveries = await journal.claim(consumer, { maxEvents: 3, leaseMs: 1000, now: now() });
    const [first, second] = deliveries;
    if (first) await journal.ack(first.id);
    if (second) await journal.quarantine(second.id, "malformed");
  }
  await journal.prune({ now: now(), limit: 100 });
}

/** Rewrite every consumer row of journal `name` into the old shape, as the old code kept it. */
async function toLegacyRows(engine: Engine, name: string): Promise<void> {
  await engine.transact("readwrite", async (tx) => {
    const meta = (await tx.get<{ stored: number }>(["j", name, "m"]))!;
    for (const entry of await tx.scan<{ finished: number; quarantined: number; leased: number }>({ prefix: ["j", name, "c"] })) {
      const { finished, quarantined, leased } = entry.value;
      expect(finished).toBeTypeOf("number");
      tx.put(entry.key, { unfinished: meta.stored - finished - quarantined, quarantined, leased });
    }
  });
}

async function statsOf(journal: UsageJournal): Promise<unknown[]> {
  return Promise.all(consumers.map((consumer) => journal.stats(consumer)));
}

describe("consumer rows in the old shape (unfinished instead of finished)", () => {
  it("are read as what they counted, and the journal goes on exactly as one that never had them", async () => {
    let time = t0 + 100;
    const now = () => time;
    const legacyEngine = memoryEngine();
    const plainEngine = memoryEngine();
    const legacy = createJournal(legacyEngine, { name: "usage", capacity, clock: now });
    const plain = createJournal(plainEngine, { name: "usage", capacity, clock: now });
    await traffic(legacy, now, 0);
    await traffic(plain, now, 0);
    await toLegacyRows(legacyEngine, "usage");
    const reopened = createJournal(legacyEngine, { name: "usage", capacity, clock: now });
    expect(await statsOf(reopened)).toEqual(await statsOf(plain));
    // More traffic, past the retention window so finished events are pruned.
    time += 20_000;
    await traffic(reopened, now, 100);
    await traffic(plain, now, 100);
    expect(await statsOf(reopened)).toEqual(await statsOf(plain));
    const pending = await statsOf(plain);
    expect(pending.map((stats) => (stats as { pending: number }).pending).every((count) => count > 0)).toBe(true);
    await legacyEngine.close();
    await plainEngine.close();
  });
});
