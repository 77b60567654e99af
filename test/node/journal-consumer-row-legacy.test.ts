/**
 * Consumer rows written before they counted finished events. A consumer's
 * counters (`c` rows, see `src/journal/layout.ts`) used to hold `unfinished`;
 * they now hold `finished`, so that an append writes no consumer row. A row in
 * the old shape is converted when read (`finished = stored - unfinished -
 * quarantined`, against the stored count the old rows agree with); the first
 * writing transaction converts them all and marks the meta row
 * (`countsFinished`), so that appends, which no longer touch consumer rows,
 * cannot make an old row stale. Here a journal's rows are rewritten into the
 * old shape, a new journal opens the same engine, and its answers must be
 * those of a journal that never saw the old shape, before and after more
 * traffic.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import type { Engine } from "../../src/engine.js";
import { createJournal, createUsageEvent, newRequestId, parseConsumerId, type Capacity, type UsageJournal } from "../../src/index.js";
import { legacyTwins } from "./support/legacy-twins.js";

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

/** Rewrite journal `name`'s consumer rows (and its meta row) into the old shape, as the old code kept them. */
async function toLegacyRows(engine: Engine, name: string): Promise<void> {
  await engine.transact("readwrite", async (tx) => {
    const meta = (await tx.get<{ stored: number; countsFinished?: boolean }>(["j", name, "m"]))!;
    expect(meta.countsFinished).toBe(true);
    const { countsFinished: _dropped, ...old } = meta;
    tx.put(["j", name, "m"], old);
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
    const twins = await legacyTwins(capacity, t0 + 100, (journal, now) => traffic(journal, now, 0), toLegacyRows);
    const { reopened, plain, now } = twins;
    expect(await statsOf(reopened)).toEqual(await statsOf(plain));
    // More traffic, past the retention window so finished events are pruned.
    twins.advance(20_000);
    await traffic(reopened, now, 100);
    await traffic(plain, now, 100);
    expect(await statsOf(reopened)).toEqual(await statsOf(plain));
    const pending = await statsOf(plain);
    expect(pending.map((stats) => (stats as { pending: number }).pending).every((count) => count > 0)).toBe(true);
    await twins.close();
  });

  it("are all converted by the first writing transaction, so later appends (which no longer touch them) cannot leave one stale", async () => {
    // A's append commits a higher stored count without reading the consumer
    // row; then, in a group commit, B appends and C's prune (at a later clock
    // reading) deletes a delivered event and reads the consumer row. Left in
    // the old shape after A, the row would be read against the wrong count.
    const run = async (legacyRows: boolean): Promise<unknown> => {
      let time = t0;
      const engine = memoryEngine();
      const first = createJournal(engine, { name: "usage", capacity, clock: () => time });
      const make = (n: number) => createUsageEvent({ record: { requestId: newRequestId(t0 + n), namespace: "acme", subject: `user-${n}`, data: { n } }, observedAt: t0 });
      await first.append(make(1));
      await first.append(make(2));
      const [delivery] = await first.claim(consumers[0]!, { maxEvents: 1, leaseMs: 1000, now: time });
      await first.ack(delivery!.id);
      if (legacyRows) await toLegacyRows(engine, "usage");
      const journal = createJournal(engine, { name: "usage", capacity, clock: () => time });
      time = t0 + capacity.retainAcknowledgedMs - 1; // nothing due yet
      const a = journal.append(make(3));
      const b = journal.append(make(4));
      time = t0 + capacity.retainAcknowledgedMs; // event 1 is due for C's prune
      const c = journal.append(make(5));
      await Promise.all([a, b, c]);
      const stats = await journal.stats(consumers[0]!);
      await engine.close();
      return stats;
    };
    const plain = await run(false);
    expect((plain as { pending: number }).pending).toBe(4);
    expect(await run(true)).toEqual(plain);
  });
});
