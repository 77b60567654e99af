/**
 * A claim over HTTP answers about MAX_CLAIM_ANSWER_BYTES of deliveries at
 * most: a claim of large events gets fewer than `maxEvents`, and leases only
 * what its answer holds (the rest stays pending, claimable by the next claim).
 * Small events still come back as one answer of `maxEvents`.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { createJournal, createUsageEvent, parseConsumerId, type Capacity } from "../../src/index.js";
import { createApp, MAX_CLAIM_ANSWER_BYTES } from "../../src/worker/index.js";

const TOKEN = "claim-budget-token-0123456789";
const t0 = 1_700_000_000_000;
const billing = parseConsumerId("billing");
const CAPACITY: Capacity = { maxEvents: 10_000, maxDeliveryAttempts: 3, retainAcknowledgedMs: 60_000, policy: "refuse" };
const rid = (n: number) => `0190f000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`;

function setup() {
  const journal = createJournal(memoryEngine(), { name: "usage", capacity: CAPACITY, clock: () => t0 });
  const app = createApp({
    journals: { usage: { journal, consumers: ["billing"] } },
    auth: { tokens: [{ name: "consumer", token: TOKEN, scopes: ["consume"] }] },
    clock: () => t0,
  });
  const claim = async (maxEvents: number) => {
    const response = await app.fetch(
      new Request("http://isostore.test/v1/journals/usage/claim", {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ consumer: billing, maxEvents, leaseMs: 60_000, now: t0 }),
      }),
    );
    expect(response.status).toBe(200);
    const text = await response.text();
    return { bytes: new TextEncoder().encode(text).byteLength, deliveries: (JSON.parse(text) as { deliveries: { id: { event: string } }[] }).deliveries };
  };
  /** `count` events of about `size` characters of data each, one ordering key each. */
  const fill = async (count: number, size: number) => {
    for (let n = 1; n <= count; n += 500) {
      const batch = [];
      for (let k = n; k < Math.min(n + 500, count + 1); k++) {
        batch.push(createUsageEvent({ record: { requestId: rid(k), namespace: "acme", subject: `user-${k}`, data: { text: "x".repeat(size) } }, observedAt: t0 }));
      }
      await journal.appendBatch(batch);
    }
  };
  return { journal, claim, fill };
}

describe("a claim over HTTP answers a bounded number of bytes", () => {
  it("claims fewer than maxEvents of large events, leases exactly what it answers, and the next claim gets the rest in position order", async () => {
    const { journal, claim, fill } = setup();
    await fill(400, 60_000); // about 24 MB of deliveries
    const first = await claim(400);
    expect(first.deliveries.length).toBeGreaterThan(0);
    expect(first.deliveries.length).toBeLessThan(400);
    expect(first.bytes).toBeLessThanOrEqual(MAX_CLAIM_ANSWER_BYTES + 70_000);
    expect(first.deliveries.map((delivery) => delivery.id.event)).toEqual(Array.from({ length: first.deliveries.length }, (_, i) => rid(i + 1)));
    // Nothing leased beyond the answer: the rest is pending, not in flight.
    expect(await journal.stats(billing)).toMatchObject({ inFlight: first.deliveries.length, pending: 400 - first.deliveries.length });
    let claimed = first.deliveries.length;
    while (claimed < 400) {
      const next = await claim(400);
      expect(next.deliveries.length).toBeGreaterThan(0);
      expect(next.deliveries[0]!.id.event).toBe(rid(claimed + 1));
      claimed += next.deliveries.length;
    }
    expect(claimed).toBe(400);
  });

  it("still answers maxEvents of small events in one answer", async () => {
    const { claim, fill } = setup();
    await fill(2_000, 10);
    const small = await claim(2_000);
    expect(small.deliveries.map((delivery) => delivery.id.event)).toEqual(Array.from({ length: 2_000 }, (_, i) => rid(i + 1)));
    expect(small.bytes).toBeLessThan(MAX_CLAIM_ANSWER_BYTES);
  });
});
