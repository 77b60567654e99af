/**
 * A module Service Worker that journals through the IndexedDB engine: proof
 * that the adapter needs no `window` and no DOM in the most restricted
 * browser context it is meant for (see service-worker.test.ts). It has no
 * fetch handler and controls no page; the test talks to it with messages.
 *
 * On a message `{ db, subjects }` carrying a MessagePort, it appends one event
 * per subject (single strict `append`s), claims everything pending for
 * `billing` (the page's events too), acks each delivery, and answers on the
 * port with what it saw (or the error). The message event is kept alive with
 * `waitUntil` until the answer is sent, so the browser does not stop the
 * worker mid-transaction.
 *
 * Type notes: this folder compiles against the DOM library, which has no
 * ServiceWorkerGlobalScope types (the WebWorker library conflicts with it),
 * so the few service-worker members used here are declared locally.
 */
import { indexedDbEngine, requestPersistentStorage } from "../../adapters/indexeddb/index.js";
import { createJournal, createUsageEvent, newRequestId, parseConsumerId } from "../../src/index.js";

/** What the worker answers (service-worker.test.ts asserts it). */
export interface ServiceWorkerReport {
  readonly ok: boolean;
  readonly error?: string;
  readonly mode?: string;
  /** Subjects of the claimed deliveries, in the order the claim returned them. */
  readonly delivered?: string[];
  readonly acked?: number;
  readonly stats?: { readonly pending: number; readonly inFlight: number };
  readonly storageSupported?: boolean;
  readonly hasWindow?: boolean;
  readonly hasDocument?: boolean;
  readonly isServiceWorker?: boolean;
}

interface ExtendableEventLike extends Event {
  waitUntil(promise: Promise<unknown>): void;
}

interface ExtendableMessageEventLike extends ExtendableEventLike {
  readonly data: { readonly db: string; readonly subjects: readonly string[] };
  readonly ports: readonly MessagePort[];
}

interface ServiceWorkerScopeLike {
  addEventListener(type: "install" | "activate", listener: (event: ExtendableEventLike) => void): void;
  addEventListener(type: "message", listener: (event: ExtendableMessageEventLike) => void): void;
  skipWaiting(): Promise<void>;
}

const scope = globalThis as unknown as ServiceWorkerScopeLike;

// Activate at once: the test waits for "activated" before it sends anything.
scope.addEventListener("install", (event) => event.waitUntil(scope.skipWaiting()));

async function journalHere(db: string, subjects: readonly string[]): Promise<ServiceWorkerReport> {
  const engine = indexedDbEngine({ name: db });
  try {
    const journal = createJournal(engine, { name: "usage" });
    for (const subject of subjects) {
      await journal.append(
        createUsageEvent({ record: { requestId: newRequestId(), namespace: "acme", subject, data: { units: 1, from: "service-worker" } }, observedAt: Date.now() }),
      );
    }
    const consumer = parseConsumerId("billing");
    const deliveries = await journal.claim(consumer, { maxEvents: 100, leaseMs: 60_000, now: Date.now() });
    let acked = 0;
    for (const delivery of deliveries) {
      await journal.ack(delivery.id);
      acked++;
    }
    const stats = await journal.stats(consumer);
    const storage = await requestPersistentStorage();
    const ctor = (globalThis as { ServiceWorkerGlobalScope?: abstract new () => unknown }).ServiceWorkerGlobalScope;
    return {
      ok: true,
      mode: journal.mode,
      delivered: deliveries.map((delivery) => delivery.event.orderingKey.subject),
      acked,
      stats: { pending: stats.pending, inFlight: stats.inFlight },
      storageSupported: storage.supported,
      hasWindow: "window" in globalThis,
      hasDocument: "document" in globalThis,
      isServiceWorker: ctor !== undefined && globalThis instanceof ctor,
    };
  } finally {
    await engine.close();
  }
}

scope.addEventListener("message", (event) => {
  const port = event.ports[0];
  if (port === undefined) return;
  event.waitUntil(
    journalHere(event.data.db, event.data.subjects).then(
      (report) => port.postMessage(report),
      (error: unknown) => port.postMessage({ ok: false, error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) } satisfies ServiceWorkerReport),
    ),
  );
});
