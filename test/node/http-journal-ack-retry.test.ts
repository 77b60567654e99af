/**
 * `HttpJournal.ack` retried after a try whose reply was lost: ack is
 * idempotent only while the event is stored, and an event every consumer
 * finished is pruned as soon as its window has passed (a backlog older than
 * the window: at the next append or claim). A retry that finds the event gone
 * after a try that may have committed reports the ack done, not
 * `not_outstanding` (which reads as "the lease was lost"); a first try's
 * `not_outstanding` is still the journal's answer.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { HttpJournal, type FetchLike } from "../../src/http/index.js";
import { BILLING_GRADE, createJournal, createUsageEvent, newRequestId, NotOutstandingError, parseConsumerId } from "../../src/index.js";
import { createApp } from "../../src/worker/index.js";

const TOKEN = "ack-retry-token-0123456789";
const billing = parseConsumerId("billing");
const DAY = 86_400_000;

function setup() {
  const now = Date.now();
  const inner = createJournal(memoryEngine(), { name: "usage", capacity: BILLING_GRADE });
  const app = createApp({ journals: { usage: inner }, auth: { tokens: [{ name: "worker", token: TOKEN, scopes: ["append:*", "consume"] }] } });
  const behaviour = { loseAckReply: false };
  const fetch: FetchLike = async (url, init) => {
    const response = await app.fetch(new Request(url, init));
    if (url.endsWith("/ack") && behaviour.loseAckReply) {
      behaviour.loseAckReply = false;
      // Another producer appends meanwhile: its append prunes what every consumer finished.
      await inner.append(createUsageEvent({ record: { requestId: newRequestId(), namespace: "acme", subject: "other", data: 1 }, observedAt: now }));
      throw new TypeError("fetch failed: socket hang up");
    }
    return response;
  };
  const journal = new HttpJournal({ baseUrl: "http://isostore.test", journal: "usage", token: TOKEN, fetch, capacity: BILLING_GRADE, mode: "billing_grade", sleep: async () => undefined });
  const backlog = async () => {
    // Observed two days ago: past the 24 h window once acknowledged.
    await journal.append(createUsageEvent({ record: { requestId: newRequestId(), namespace: "acme", subject: "u1", data: 1 }, observedAt: now - 2 * DAY }));
    const [delivery] = await journal.claim(billing, { maxEvents: 1, leaseMs: 60_000, now });
    return delivery!;
  };
  return { inner, journal, behaviour, backlog };
}

describe("HttpJournal.ack retried after a lost reply", () => {
  it("reports the ack done when the retry finds the event pruned meanwhile (the first try committed it)", async () => {
    const { inner, journal, behaviour, backlog } = setup();
    const delivery = await backlog();
    behaviour.loseAckReply = true;
    await expect(journal.ack(delivery.id)).resolves.toBeUndefined();
    expect(await journal.ackBatch([delivery.id])).toEqual([{ ok: false, error: expect.any(NotOutstandingError) as unknown }]); // asked again: the journal's answer
    expect(await inner.attempts(billing, delivery.id.event)).toEqual([]); // pruned
  });

  it("a first try's not_outstanding is the journal's answer", async () => {
    const { journal, backlog } = setup();
    const delivery = await backlog();
    await journal.ack(delivery.id);
    await expect(journal.ack({ ...delivery.id, event: newRequestId() })).rejects.toBeInstanceOf(NotOutstandingError);
  });
});
