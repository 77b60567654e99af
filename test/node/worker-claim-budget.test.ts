/**
 * A claim over HTTP of more than 160 events goes in rounds of at most 160
 * (each a claim of the journal at the same `now`) and stops once its answer
 * holds MAX_CLAIM_ANSWER_BYTES: a claim of large events gets fewer than
 * `maxEvents`, never more than the budget and one round, and leases only what
 * its answer holds (the rest stays pending for the next claim). A round that
 * fails after others leased events does not fail the claim: it answers what
 * was leased.
 */
import { describe, expect, it, vi } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { BackendError, createJournal, createUsageEvent, MAX_ORDERING_PART_LENGTH, parseConsumerId, type Capacity, type UsageJournal } from "../../src/index.js";
import { createApp, MAX_CLAIM_ANSWER_BYTES } from "../../src/worker/index.js";

const TOKEN = "claim-budget-token-0123456789";
const t0 = 1_700_000_000_000;
const billing = parseConsumerId("billing");
const CAPACITY: Capacity = { maxEvents: 10_000, maxDeliveryAttempts: 3, retainAcknowledgedMs: 60_000, policy: "refuse" };
const rid = (n: number) => `0190f000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`;
/** The most one round can answer: 160 of the largest deliveries (64 Ki characters of 3 UTF-8 bytes, key parts of 6-byte escapes). */
const ROUND_BYTES = 160 * (64 * 1024 * 3 + 4 * MAX_ORDERING_PART_LENGTH * 6 + 1024);

function setup(wrap: (journal: UsageJournal) => UsageJournal = (journal) => journal) {
  const journal = createJournal(memoryEngine(), { name: "usage", capacity: CAPACITY, clock: () => t0 });
  const app = createApp({
    journals: { usage: { journal: wrap(journal), consumers: ["billing"] } },
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
    return { bytes: new TextEncoder().encode(text).byteLength, events: (JSON.parse(text) as { deliveries: { id: { event: string } }[] }).deliveries.map((d) => d.id.event) };
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
  return { journal, claim, fill };
}

const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => rid(from + i));

describe("a claim over HTTP answers a bounded number of bytes", () => {
  it("stops after the round that passes the budget, leases exactly what it answers, and the next claim gets the rest in position order", async () => {
    const { journal, claim, fill } = setup();
    await fill(1, 400, "x".repeat(30_000)); // 160 of them fill 4.8 MB: the second round passes 8 MiB
    const first = await claim(400);
    expect(first.events).toEqual(range(1, 320));
    expect(first.bytes).toBeGreaterThan(MAX_CLAIM_ANSWER_BYTES);
    expect(await journal.stats(billing)).toMatchObject({ inFlight: 320, pending: 80 });
    expect((await claim(400)).events).toEqual(range(321, 80));
  });

  it("does not size later rounds by the small events it saw first: large ones after them stop the claim within the budget and one round", async () => {
    const { claim, fill } = setup();
    await fill(1, 20, "");
    await fill(21, 400, "€".repeat(60_000)); // 180 KB each in UTF-8
    const answer = await claim(10_000);
    expect(answer.events).toEqual(range(1, 160));
    expect(answer.bytes).toBeLessThan(MAX_CLAIM_ANSWER_BYTES + ROUND_BYTES);
  });

  it("answers what earlier rounds leased when a later round fails, rather than failing with them leased", async () => {
    let calls = 0;
    const failingSecond = (journal: UsageJournal): UsageJournal =>
      new Proxy(journal, {
        get: (target, name, receiver) =>
          name === "claim"
            ? async (...args: Parameters<UsageJournal["claim"]>) => {
                if (++calls === 2) throw new BackendError("the storage object is overloaded", { retryable: true });
                return target.claim(...args);
              }
            : (Reflect.get(target, name, receiver) as unknown),
      });
    const { journal, claim, fill } = setup(failingSecond);
    await fill(1, 400, "x");
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    expect((await claim(400)).events).toEqual(range(1, 160));
    expect(logged).toHaveBeenCalledTimes(1);
    logged.mockRestore();
    expect(await journal.stats(billing)).toMatchObject({ inFlight: 160, pending: 240 });
    expect((await claim(400)).events).toEqual(range(161, 240));
  });

  it("answers maxEvents of small events in one answer, in position order", async () => {
    const { claim, fill } = setup();
    await fill(1, 2_000, "");
    const answer = await claim(2_000);
    expect(answer.events).toEqual(range(1, 2_000));
    expect(answer.bytes).toBeLessThan(MAX_CLAIM_ANSWER_BYTES);
  });
});
