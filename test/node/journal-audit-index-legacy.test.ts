/**
 * Journals written before the per-event index of the audit log existed (`b`
 * rows; `MetaRow.auditIndexedFrom`, see `src/journal/layout.ts`). One event's
 * entries are found in the log written before the index by walking that part
 * of the log, and in the index after it; the first entry written over such
 * data starts the index. Here a journal's index rows and mark are removed, a
 * new journal opens the same engine, and its answers must be those of a
 * journal that always had them, before and after more operator actions.
 */
import { describe, expect, it } from "vitest";
import type { Engine } from "../../src/engine.js";
import { createUsageEvent, parseConsumerId, type Capacity, type UsageJournal } from "../../src/index.js";
import { legacyTwins } from "./support/legacy-twins.js";

const capacity: Capacity = { maxEvents: 100, maxDeliveryAttempts: 3, retainAcknowledgedMs: 10_000, policy: "refuse" };
const billing = parseConsumerId("billing");
const t0 = 1_700_000_000_000;
const ids = [1, 2, 3].map((n) => `0190a000-0000-7000-8000-${String(n).padStart(12, "0")}`);

/** Quarantine events 1..3 (one key each) for billing, release event 1 (`rounds` times) and, the first time, discard event 2. */
async function actions(journal: UsageJournal, now: () => number, rounds: number, discard = true): Promise<void> {
  for (const [i, requestId] of ids.entries()) {
    await journal.append(createUsageEvent({ record: { requestId, namespace: "acme", subject: `user-${i}`, data: { n: i } }, observedAt: t0 }));
  }
  for (let round = 0; round < rounds; round++) {
    for (const delivery of await journal.claim(billing, { maxEvents: 10, leaseMs: 1000, now: now() })) await journal.quarantine(delivery.id, "malformed");
    await journal.release(billing, ids[0]!, { now: now(), actor: "ops" });
    if (round === 0 && discard) await journal.discard(billing, ids[1]!, { now: now(), actor: "ops" });
  }
}

/** Remove journal `name`'s `b` rows and its meta row's mark, as data written before them. */
async function withoutAuditIndex(engine: Engine, name: string): Promise<void> {
  await engine.transact("readwrite", async (tx) => {
    const meta = (await tx.get<{ auditIndexedFrom?: number }>(["j", name, "m"]))!;
    expect(meta.auditIndexedFrom).toBe(1);
    const { auditIndexedFrom: _dropped, ...old } = meta;
    tx.put(["j", name, "m"], old);
    const rows = await tx.scan({ prefix: ["j", name, "b"] });
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) tx.delete(row.key);
  });
}

/** Every page of one event's audit entries, `limit` at a time. */
async function entriesOf(journal: UsageJournal, requestId: string, limit: number) {
  const pages = [];
  let after: string | null = null;
  do {
    const page = await journal.listAudit({ requestId, limit, after });
    pages.push(page);
    after = page.nextCursor;
  } while (after !== null);
  return pages;
}

describe("journals written before the per-event index of the audit log", () => {
  it("list one event's entries from the log before the index and from the index after it, in pages", async () => {
    const twins = await legacyTwins(capacity, t0 + 100, (journal, now) => actions(journal, now, 2), withoutAuditIndex);
    const { reopened, plain, legacyEngine, plainEngine, now } = twins;
    const listings = async (journal: UsageJournal) => Promise.all(ids.flatMap((id) => [entriesOf(journal, id, 1), entriesOf(journal, id, 100)]));
    const expected = await listings(plain);
    // Event 1 was released twice, event 2 discarded once, event 3 never acted on.
    expect(expected[1]![0]!.items.map((entry) => entry.action)).toEqual(["release", "release"]);
    expect(expected[3]![0]!.items.map((entry) => entry.action)).toEqual(["discard"]);
    expect(expected[5]).toEqual([{ items: [], nextCursor: null }]);
    expect(await listings(reopened)).toEqual(expected);
    // More actions: the first one starts the index at its own seq; old and new entries page together.
    twins.advance(500);
    await actions(reopened, now, 1, false);
    await actions(plain, now, 1, false);
    expect(await listings(reopened)).toEqual(await listings(plain));
    expect((await entriesOf(reopened, ids[0]!, 100))[0]!.items).toHaveLength(3);
    const marks = await Promise.all(
      [legacyEngine, plainEngine].map((engine) => engine.transact("readonly", async (tx) => (await tx.get<{ auditIndexedFrom?: number }>(["j", "usage", "m"]))!.auditIndexedFrom)),
    );
    expect(marks).toEqual([4, 1]);
    await twins.close();
  });

  it("refuses a request id that is not a UUIDv7 and a cursor it did not issue", async () => {
    const twins = await legacyTwins(capacity, t0 + 100, (journal, now) => actions(journal, now, 1), async () => {});
    await expect(twins.plain.listAudit({ requestId: "nope" })).rejects.toMatchObject({ code: "invalid_argument", argument: "requestId" });
    await expect(twins.plain.listAudit({ requestId: ids[0]!, after: "x" })).rejects.toMatchObject({ code: "invalid_argument", argument: "after" });
    await twins.close();
  });
});
