/**
 * `npm run demo`: journal a few usage events, consume them as a billing
 * consumer, quarantine a poison one, and print the stats an operator watches.
 * Runs on the memory engine in this process.
 */
import { memoryEngine } from "../adapters/memory/index.js";
import { createJournal, createUsageEvent, newRequestId, parseConsumerId, BILLING_GRADE } from "../src/index.js";

const journal = createJournal(memoryEngine(), { name: "usage", capacity: BILLING_GRADE });
const billing = parseConsumerId("billing");

for (let i = 0; i < 5; i++) {
  const event = createUsageEvent({
    record: { requestId: newRequestId(), namespace: "acme", subject: `user-${i % 2}`, data: { tokens: 10 * i } },
    observedAt: Date.now(),
  });
  console.log("append", event.id, await journal.append(event));
}

for (let round = 1; round <= 4; round++) {
  const deliveries = await journal.claim(billing, { maxEvents: 10, leaseMs: 30_000, now: Date.now() });
  if (deliveries.length === 0) break;
  for (const delivery of deliveries) {
    const { tokens } = delivery.event.record.data as { tokens: number };
    if (tokens === 20) {
      await journal.quarantine(delivery.id, "rejected");
      console.log(`round ${round}: quarantined ${delivery.event.id} (${delivery.event.orderingKey.subject})`);
    } else {
      await journal.ack(delivery.id);
      console.log(`round ${round}: billed ${tokens} tokens for ${delivery.event.orderingKey.subject}`);
    }
  }
}

console.log("stats", await journal.stats(billing));
console.log("quarantine", (await journal.listQuarantined(billing)).items.map((q) => [q.event.id, q.reason]));
