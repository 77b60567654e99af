/**
 * A claim over HTTP is one claim of the journal with a byte bound: the
 * request's `maxBytes`, capped at MAX_CLAIM_ANSWER_BYTES (also when absent).
 * A claim of large events gets fewer than `maxEvents`, never more than the
 * cap of deliveries, and leases only what its answer holds (the rest stays
 * pending, in place, for the next claim).
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { createJournal, createUsageEvent, deliveryBytes, parseConsumerId, type Capacity, type Delivery, type UsageJournal } from "../../src/index.js";
import { createApp, MAX_CLAIM_ANSWER_BYTES } from "../../src/worker/index.js";

const TOKEN = "claim-budget-token-0123456789";
const t0 = 1_700_000_000_000;
const billing = parseConsumerId("billing");
const CAPACITY: Capacity = { maxEvents: 10_000, maxDeliveryAttempts: 3, retainAcknowledgedMs: 60_000, policy: "refuse" };
const rid = (n: number) => `0190f000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`;
/** The answer's JSON around its deliveries: `{"deliveries":[` and `]}`, and a comma between two deliveries. */
const framing = (count: number) => '{"deliveries":[]}'.length + Math.max(0, count - 1);

function setup() {
  const journal = createJournal(memoryEngine(), { name: "usage", capacity: CAPACITY, clock: () => t0 });
  const claims: unknown[] = [];
  // Counts the journal claims each HTTP claim makes, and what they asked.
  const counted: UsageJournal = new Proxy(journal, {
    get: (target, name, receiver) =>
      name === "claim"
        ? (...args: Parameters<UsageJournal["claim"]>) => (claims.push(args[1]), target.claim(...args))
        : (Reflect.get(target, name, receiver) as unknown),
  });
  const app = createApp({
    journals: { usage: { journal: counted, consumers: ["billing"] } },
    auth: { tokens: [{ name: "consumer", token: TOKEN, scopes: ["consume"] }] },
    clock: () => t0,
  });
  const post = (body: object) =>
    app.fetch(
      new Request("http://isostore.test/v1/journals/usage/claim", {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ consumer: billing, leaseMs: 60_000, now: t0, ...body }),
      }),
    );
  const claim = async (maxEvents: number, maxBytes?: number) => {
    const response = await post({ maxEvents, ...(maxBytes === undefined ? {} : { maxBytes }) });
    expect(response.status).toBe(200);
    const text = await response.text();
    const deliveries = (JSON.parse(text) as { deliveries: Delivery[] }).deliveries;
    return {
      bytes: new TextEncoder().encode(text).byteLength,
      deliveryBytes: deliveries.reduce((sum, delivery) => sum + deliveryBytes(delivery), 0),
      events: deliveries.map((d) => d.id.event),
    };
  };
  /** Events `from`..`to`, each with `text` as its data, one ordering key each. */
  const fill = async (from: number, to: number, text: string) => {
    for (let n = from; n <= to; n += 500) {
      const batch = [];
      for (let k = n; k <= Math.min(n + 499, to); k++) {
        batch.push(createUsageEvent({ record: { requestId: rid(k), namespace: "acme", subject: `user-${k}`, data: { text } }, observedAt: t0 }));
      }
      await journal.appendBatch(batch);
    }
  };
  return { journal, claim, post, fill, claims };
}

const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => rid(from + i));

/** The size of the delivery of event `n` (attempt 1) as the claims of these tests build it. */
function sizeOf(n: number, text: string): number {
  const event = createUsageEvent({ record: { requestId: rid(n), namespace: "acme", subject: `user-${n}`, data: { text } }, observedAt: t0 });
  return deliveryBytes({ id: { consumer: billing, event: rid(n), attempt: 1 }, event, leaseExpiresAt: t0 + 60_000 });
}

/** How many of events `from`.. fit `budget` bytes of deliveries, taken in order. */
function fitting(from: number, text: string, budget: number): number {
  let count = 0;
  for (let bytes = 0; bytes + sizeOf(from + count, text) <= budget; count++) bytes += sizeOf(from + count, text);
  return count;
}

describe("a claim over HTTP answers a bounded number of bytes", () => {
  it("stops before the delivery that would pass the cap, in one journal claim, leases exactly what it answers, and the next claim gets the rest in position order", async () => {
    const { journal, claim, fill, claims } = setup();
    const text = "x".repeat(30_000);
    await fill(1, 400, text);
    const fit = fitting(1, text, MAX_CLAIM_ANSWER_BYTES);
    expect(fit).toBeGreaterThan(200);
    expect(fit).toBeLessThan(400);
    const first = await claim(400);
    expect(first.events).toEqual(range(1, fit));
    expect(first.deliveryBytes).toBeLessThanOrEqual(MAX_CLAIM_ANSWER_BYTES);
    expect(first.bytes).toBe(first.deliveryBytes + framing(fit));
    expect(claims).toEqual([expect.objectContaining({ maxEvents: 400, maxBytes: MAX_CLAIM_ANSWER_BYTES })]);
    expect(await journal.stats(billing)).toMatchObject({ inFlight: fit, pending: 400 - fit });
    expect((await claim(400)).events).toEqual(range(fit + 1, 400 - fit));
  });

  it("takes the request's maxBytes when it is smaller, and the cap when it is larger", async () => {
    const { journal, claim, fill } = setup();
    const text = "€".repeat(10_000); // 30 KB each in UTF-8
    await fill(1, 400, text);
    const budget = sizeOf(1, text) + sizeOf(2, text) + sizeOf(3, text);
    expect((await claim(400, budget)).events).toEqual(range(1, 3));
    expect((await claim(400, budget - 1)).events).toEqual(range(4, 2));
    const capped = await claim(400, Number.MAX_SAFE_INTEGER);
    expect(capped.events).toEqual(range(6, fitting(6, text, MAX_CLAIM_ANSWER_BYTES)));
    expect(await journal.stats(billing)).toMatchObject({ inFlight: 5 + capped.events.length });
  });

  it("answers one delivery larger than the request's maxBytes", async () => {
    const { claim, fill } = setup();
    await fill(1, 3, "x".repeat(1000));
    expect((await claim(3, 1)).events).toEqual(range(1, 1));
  });

  it("refuses a maxBytes that is not a positive integer, naming it, and leases nothing", async () => {
    const { journal, post, fill, claims } = setup();
    await fill(1, 3, "");
    for (const maxBytes of [0, -1, 1.5, "100", null]) {
      const response = await post({ maxEvents: 3, maxBytes });
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({ error: { code: "invalid_request", fields: { argument: "maxBytes" } } });
    }
    expect(claims).toEqual([]);
    expect(await journal.stats(billing)).toMatchObject({ inFlight: 0 });
  });

  it("answers maxEvents of small events in one answer and one journal claim, in position order", async () => {
    const { claim, fill, claims } = setup();
    await fill(1, 2_000, "");
    const answer = await claim(2_000);
    expect(answer.events).toEqual(range(1, 2_000));
    expect(answer.bytes).toBeLessThan(MAX_CLAIM_ANSWER_BYTES);
    expect(claims).toHaveLength(1);
  });
});
