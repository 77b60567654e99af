/**
 * Journals written before the indexes by observedAt existed (`t`: every
 * stored event; `p`: each consumer's unfinished events; see
 * `src/journal/layout.ts`). Stats read such data in full (the oldest pending
 * event is the one observed earliest, wherever it sits), and the first
 * writing transaction builds both indexes and marks the meta row
 * (`agesIndexed`). Here a journal's index rows and mark are removed, a new
 * journal opens the same engine, and its answers must be those of a journal
 * that always had them, before and after more traffic.
 */
import { describe, expect, it } from "vitest";
import type { Engine } from "../../src/engine.js";
import { createUsageEvent, newRequestId, parseConsumerId, type Capacity, type UsageJournal } from "../../src/index.js";
import { legacyTwins } from "./support/legacy-twins.js";

const capacity: Capacity = { maxEvents: 100, maxDeliveryAttempts: 3, retainAcknowledgedMs: 10_000, policy: "refuse" };
const billing = parseConsumerId("billing");
const audit = parseConsumerId("audit");
const t0 = 1_700_000_000_000;

/** Appends whose observedAt run backwards every third event (late replays), then claims and acks by billing. */
async function traffic(journal: UsageJournal, now: () => number, from: number): Promise<void> {
  for (let i = 0; i < 9; i++) {
    const observedAt = i % 3 === 2 ? t0 - 5_000 - from - i : t0 + from + i;
    await journal.append(createUsageEvent({ record: { requestId: newRequestId(t0 + from + i), namespace: "acme", subject: `user-${i % 4}`, data: { n: from + i } }, observedAt }));
  }
  const deliveries = await journal.claim(billing, { maxEvents: 3, leaseMs: 1000, now: now() });
  if (deliveries[0]) await journal.ack(deliveries[0].id);
}

/** Remove journal `name`'s `t` and `p` rows and its meta row's mark, as data written before them. */
async function withoutAgeIndexes(engine: Engine, name: string): Promise<void> {
  await engine.transact("readwrite", async (tx) => {
    const meta = (await tx.get<{ agesIndexed?: boolean }>(["j", name, "m"]))!;
    expect(meta.agesIndexed).toBe(true);
    const { agesIndexed: _dropped, ...old } = meta;
    tx.put(["j", name, "m"], old);
    for (const prefix of ["t", "p"]) {
      const rows = await tx.scan({ prefix: ["j", name, prefix] });
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) tx.delete(row.key);
    }
  });
}

async function indexRows(engine: Engine, name: string): Promise<number[]> {
  return engine.transact("readonly", async (tx) => [(await tx.scan({ prefix: ["j", name, "t"] })).length, (await tx.scan({ prefix: ["j", name, "p"] })).length]);
}

describe("journals written before the indexes by observedAt", () => {
  it("report the age of the earliest observed pending event, and the first write builds the indexes", async () => {
    const twins = await legacyTwins(capacity, t0 + 100, (journal, now) => traffic(journal, now, 0), withoutAgeIndexes);
    const { reopened, plain, legacyEngine, plainEngine, now } = twins;
    const stats = async (journal: UsageJournal) => [await journal.stats(billing), await journal.stats(audit)];
    const expected = await stats(plain);
    // The late replays are the oldest: registered (billing) and not (audit).
    expect(expected.map((s) => s.oldestPendingAgeMs)).toEqual([5_108, 5_108]);
    expect(await stats(reopened)).toEqual(expected);
    expect(await indexRows(legacyEngine, "usage")).toEqual([0, 0]); // stats only read
    twins.advance(500);
    await traffic(reopened, now, 100);
    await traffic(plain, now, 100);
    expect(await stats(reopened)).toEqual(await stats(plain));
    expect(await indexRows(legacyEngine, "usage")).toEqual(await indexRows(plainEngine, "usage"));
    await twins.close();
  });
});
