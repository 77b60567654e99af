/**
 * The IndexedDB engine in a dedicated Web Worker (no `window`, no DOM):
 * opens, journals, claims and acks there, and the page sees the result in
 * the same database.
 */
import { describe, expect, it } from "vitest";
import { indexedDbEngine } from "../../adapters/indexeddb/index.js";
import { createJournal, parseConsumerId } from "../../src/index.js";

interface WorkerReport {
  readonly ok: boolean;
  readonly error?: string;
  readonly mode?: string;
  readonly delivered?: number;
  readonly storageSupported?: boolean;
  readonly hasWindow?: boolean;
}

describe("the IndexedDB engine in a Web Worker (Chromium)", () => {
  it("journals, claims and acks in a worker, with no window, into the page's database", async () => {
    const db = `worker-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
    const worker = new Worker(new URL("./engine-worker.ts", import.meta.url), { type: "module" });
    try {
      const report = await new Promise<WorkerReport>((resolve, reject) => {
        worker.onmessage = (message: MessageEvent<WorkerReport>) => resolve(message.data);
        worker.onerror = (event) => reject(new Error(`worker failed: ${event.message}`));
        worker.postMessage({ db });
      });
      expect(report).toEqual({ ok: true, mode: "billing_grade", delivered: 3, storageSupported: true, hasWindow: false });
    } finally {
      worker.terminate();
    }
    const engine = indexedDbEngine({ name: db });
    const stats = await createJournal(engine, { name: "usage" }).stats(parseConsumerId("billing"));
    expect(stats).toMatchObject({ pending: 0, inFlight: 0 });
    await engine.close();
  });
});
