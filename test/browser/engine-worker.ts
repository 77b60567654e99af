/**
 * A dedicated Web Worker that journals through the IndexedDB engine: proof
 * that the adapter needs no `window` (see worker.test.ts). On a message
 * `{ db }` it appends three events, claims and acks them, and posts back what
 * it saw (or the error).
 */
import { indexedDbEngine, requestPersistentStorage } from "../../adapters/indexeddb/index.js";
import { createJournal, createUsageEvent, newRequestId, parseConsumerId } from "../../src/index.js";

addEventListener("message", (message: MessageEvent<{ db: string }>) => {
  void (async () => {
    try {
      const engine = indexedDbEngine({ name: message.data.db });
      const journal = createJournal(engine, { name: "usage" });
      const events = [0, 1, 2].map((i) =>
        createUsageEvent({ record: { requestId: newRequestId(), namespace: "acme", subject: `user-${i}`, data: { units: i } }, observedAt: Date.now() }),
      );
      await journal.appendBatch(events);
      const consumer = parseConsumerId("billing");
      const deliveries = await journal.claim(consumer, { maxEvents: 10, leaseMs: 60_000, now: Date.now() });
      for (const delivery of deliveries) await journal.ack(delivery.id);
      const storage = await requestPersistentStorage();
      await engine.close();
      postMessage({ ok: true, mode: journal.mode, delivered: deliveries.length, storageSupported: storage.supported, hasWindow: "window" in globalThis });
    } catch (error) {
      postMessage({ ok: false, error: String(error) });
    }
  })();
});
