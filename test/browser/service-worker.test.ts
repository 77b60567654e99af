/**
 * The IndexedDB engine in a real Service Worker (no `window`, no `document`):
 * the test page journals two events, registers engine-service-worker.ts as
 * a module service worker, and asks it (over a MessageChannel) to append
 * three more, claim everything pending and ack it; the page then sees the
 * result in the same database.
 *
 * Serving: vitest browser mode serves every file through Vite, so the worker
 * script is the TypeScript module itself, transformed on request (imports
 * rewritten to served URLs; `idb` from Vite's optimized deps, which the page's
 * own import of the adapter below has already discovered, so the optimizer
 * never reloads the page while the worker starts). Service workers need a
 * secure context (localhost is one) and a scope at or below the script's
 * folder (here the served root, test/browser/, so the script is
 * /engine-service-worker.ts); the test registers the narrower scope
 * /service-worker-scope/, which no page ever navigates to, so the worker
 * controls no page (not the test runner's), and unregisters it at the end.
 */
import { describe, expect, it } from "vitest";
import { indexedDbEngine } from "../../adapters/indexeddb/index.js";
import { createJournal, createUsageEvent, newRequestId, parseConsumerId } from "../../src/index.js";
import type { ServiceWorkerReport } from "./engine-service-worker.js";

/** Resolves once `registration`'s worker is activated; rejects if it turns redundant. */
async function activeWorker(registration: ServiceWorkerRegistration): Promise<ServiceWorker> {
  const worker = registration.installing ?? registration.waiting ?? registration.active;
  if (worker === null) throw new Error("the registration has no worker");
  if (worker.state === "activated") return worker;
  await new Promise<void>((resolve, reject) => {
    const check = () => {
      if (worker.state === "activated") resolve();
      else if (worker.state === "redundant") reject(new Error("the service worker became redundant before activating"));
    };
    worker.addEventListener("statechange", check);
    check();
  });
  return worker;
}

/** Sends `message` to `worker` with a reply port; resolves with the reply. */
function ask(worker: ServiceWorker, message: unknown, timeoutMs: number): Promise<ServiceWorkerReport> {
  const channel = new MessageChannel();
  return new Promise<ServiceWorkerReport>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer from the service worker within ${timeoutMs} ms`)), timeoutMs);
    channel.port1.onmessage = (reply: MessageEvent<ServiceWorkerReport>) => {
      clearTimeout(timer);
      channel.port1.close();
      resolve(reply.data);
    };
    worker.postMessage(message, [channel.port2]);
  });
}

describe("the IndexedDB engine in a Service Worker (Chromium)", () => {
  it("journals, claims and acks in a module service worker, with no window, over the page's database", async () => {
    expect("serviceWorker" in navigator).toBe(true);
    const db = `service-worker-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
    const consumer = parseConsumerId("billing");

    // The page journals first (and creates the database); the worker opens it as a second connection.
    const pageEngine = indexedDbEngine({ name: db });
    const pageJournal = createJournal(pageEngine, { name: "usage" });
    for (const subject of ["page-0", "page-1"]) {
      await pageJournal.append(
        createUsageEvent({ record: { requestId: newRequestId(), namespace: "acme", subject, data: { units: 1 } }, observedAt: Date.now() }),
      );
    }

    const script = new URL("./engine-service-worker.ts", import.meta.url);
    const scope = new URL("./service-worker-scope/", script);
    const registration = await navigator.serviceWorker.register(script, { type: "module", scope: scope.href });
    try {
      expect(registration.scope).toBe(scope.href);
      const worker = await activeWorker(registration);
      expect(worker.scriptURL).toBe(script.href);
      const report = await ask(worker, { db, subjects: ["sw-0", "sw-1", "sw-2"] }, 30_000);
      expect(report).toEqual({
        ok: true,
        mode: "billing_grade",
        delivered: expect.any(Array) as unknown,
        acked: 5,
        stats: { pending: 0, inFlight: 0 },
        storageSupported: true,
        hasWindow: false,
        hasDocument: false,
        isServiceWorker: true,
      });
      // Every event of both contexts was handed out exactly once (one ordering key each).
      expect([...report.delivered!].sort()).toEqual(["page-0", "page-1", "sw-0", "sw-1", "sw-2"]);
    } finally {
      await registration.unregister();
    }

    // The page's own connection, still open, sees the worker's acks.
    expect(await pageJournal.stats(consumer)).toMatchObject({ pending: 0, inFlight: 0 });
    await pageEngine.close();
    // And so does a fresh engine on the same name.
    const reopened = indexedDbEngine({ name: db });
    expect(await createJournal(reopened, { name: "usage" }).stats(consumer)).toMatchObject({ pending: 0, inFlight: 0 });
    await reopened.close();
  });
});
