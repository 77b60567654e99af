/**
 * Restart: every partition object is aborted in the middle of a sequence
 * (`abortAllDurableObjects`: the instances are thrown away, their storage is
 * kept) and the sequence continues. Leases held at the abort run out and
 * their events are redelivered with the next attempt number; what was acked
 * stays acked; nothing accepted is lost.
 */
import { env } from "cloudflare:workers";
import { abortAllDurableObjects } from "cloudflare:test";
import { expect, it } from "vitest";
import { PartitionedJournal } from "../../adapters/durable-objects/index.js";
import { BackendError, createUsageEvent, parseConsumerId } from "../../src/index.js";
import { virtualClock } from "../../src/testing/index.js";

const billing = parseConsumerId("billing");

/**
 * A stub whose object was aborted throws once (a typed BackendError; the
 * journal drops that stub); the caller's retry goes through a new stub.
 */
let backendErrors = 0;
async function retrying<T>(call: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (error) {
      if (!(error instanceof BackendError) || attempt === 3) throw error;
      backendErrors++;
    }
  }
}

it("nothing accepted is lost when every partition is aborted mid-sequence", async () => {
  const time = virtualClock(1_700_000_000_000);
  const journal = new PartitionedJournal(env.PARTITIONS, { name: "usage", partitions: 2, clock: time.clock, scope: "restart/" });
  const events = Array.from({ length: 20 }, (_, i) =>
    createUsageEvent({
      record: { requestId: `0190d000-0000-7000-8000-${String(i + 1).padStart(12, "0")}`, namespace: "acme", subject: `user-${i % 4}`, data: { units: i } },
      observedAt: time.now,
    }),
  );
  expect((await journal.appendBatch(events)).every((result) => result.status === "accepted")).toBe(true);
  const first = await journal.claim(billing, { maxEvents: 4, leaseMs: 1000, now: time.now });
  expect(first.length).toBe(4);
  await journal.ack(first[0]!.id);
  await journal.ack(first[1]!.id);

  await abortAllDurableObjects();

  // The same worker instance goes on; the held leases (first[2], first[3]) run out.
  time.advance(1000);
  const acked = new Set([first[0]!.event.id, first[1]!.event.id]);
  const redelivered = new Map<string, number>();
  for (let round = 0; round < 20 && acked.size < events.length; round++) {
    const deliveries = await retrying(() => journal.claim(billing, { maxEvents: 5, leaseMs: 1000, now: time.now }));
    for (const delivery of deliveries) {
      expect(acked.has(delivery.event.id), "an acked event was delivered again").toBe(false);
      if (delivery.id.attempt > 1) redelivered.set(delivery.event.id, delivery.id.attempt);
      await retrying(() => journal.ack(delivery.id));
      acked.add(delivery.event.id);
    }
  }
  expect(acked.size).toBe(events.length);
  expect(backendErrors).toBeLessThanOrEqual(2); // at most once per partition: each broken stub is replaced
  expect(redelivered).toEqual(new Map([[first[2]!.event.id, 2], [first[3]!.event.id, 2]]));
  expect(await journal.stats(billing)).toMatchObject({ pending: 0, inFlight: 0, quarantined: 0 });
});
