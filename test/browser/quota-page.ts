/**
 * The page of test/node/indexeddb-quota.test.ts: a journal over the
 * IndexedDB engine (strict) that appends large, incompressible events until
 * the origin's storage quota (lowered by the test through the DevTools
 * protocol) refuses one, and then reports what the journal answered.
 */
import { indexedDbEngine } from "../../adapters/indexeddb/index.js";
import { createJournal, createUsageEvent, newRequestId, parseConsumerId, type UsageEvent } from "../../src/index.js";

const capacity = { maxEvents: 100_000, maxDeliveryAttempts: 3, retainAcknowledgedMs: 60_000, policy: "refuse" } as const;
const consumer = parseConsumerId("billing");

/**
 * An event carrying `kib` KiB of random bytes as base64 text: at most 56 (an
 * event holds 64 KiB of JSON). Random, because IndexedDB compresses values and
 * repetitive data would barely use the quota.
 */
function bigEvent(subject: string, kib: number): UsageEvent {
  const bytes = new Uint8Array(kib * 768);
  for (let offset = 0; offset < bytes.length; offset += 65_536) crypto.getRandomValues(bytes.subarray(offset, offset + 65_536));
  let text = "";
  for (let i = 0; i < bytes.length; i += 8192) text += String.fromCharCode(...bytes.subarray(i, i + 8192));
  return createUsageEvent({ record: { requestId: newRequestId(), namespace: "acme", subject, data: { blob: btoa(text) } }, observedAt: Date.now() });
}

export interface Refusal {
  readonly name: string;
  readonly code: unknown;
  readonly retryable: unknown;
  readonly causeName: unknown;
  readonly causeCode: unknown;
  /** The DOMException's name, two levels down (journal error -> engine error -> DOMException). */
  readonly rootName: unknown;
  readonly rootIsDomException: boolean;
}

function describeRefusal(error: unknown): Refusal {
  const e = error as { name?: unknown; code?: unknown; retryable?: unknown; cause?: { name?: unknown; code?: unknown; cause?: unknown } };
  const root = e.cause?.cause;
  return {
    name: String(e.name),
    code: e.code,
    retryable: e.retryable,
    causeName: e.cause?.name,
    causeCode: e.cause?.code,
    rootName: (root as { name?: unknown } | undefined)?.name,
    rootIsDomException: root instanceof DOMException,
  };
}

const refused = new Map<string, UsageEvent>();

const api = {
  /** Append until the quota refuses an append, then try a batch; report the answers and the journal's count. */
  async fill(database: string): Promise<{ accepted: string[]; refusal: Refusal | null; batchRefusal: Refusal | null; pendingAfter: number }> {
    const engine = indexedDbEngine({ name: database });
    const journal = createJournal(engine, { name: "usage", capacity });
    const accepted: string[] = [];
    let refusal: Refusal | null = null;
    for (let i = 0; i < 400 && refusal === null; i++) {
      const event = bigEvent(`user-${i % 3}`, 56);
      try {
        await journal.append(event);
        accepted.push(event.id);
      } catch (error) {
        refusal = describeRefusal(error);
        refused.set("single", event);
      }
    }
    let batchRefusal: Refusal | null = null;
    const batch = [bigEvent("user-0", 56), bigEvent("user-1", 56)];
    try {
      await journal.appendBatch(batch);
    } catch (error) {
      batchRefusal = describeRefusal(error);
      refused.set("batch", batch[0]!);
    }
    const pendingAfter = (await journal.stats(consumer)).pending;
    await engine.close();
    return { accepted, refusal, batchRefusal, pendingAfter };
  },

  /** Reopen the database (quota lifted): every accepted event in order, and the refused ones appendable as new. */
  async verify(database: string): Promise<{ delivered: string[]; refusedAgain: string[] }> {
    const engine = indexedDbEngine({ name: database });
    const journal = createJournal(engine, { name: "usage", capacity });
    const delivered: string[] = [];
    for (;;) {
      const batch = await journal.claim(consumer, { maxEvents: 100, leaseMs: 60_000, now: Date.now() });
      if (batch.length === 0) break;
      for (const delivery of batch) delivered.push(delivery.event.id);
      await journal.ackBatch(batch.map((delivery) => delivery.id));
    }
    const refusedAgain: string[] = [];
    for (const event of refused.values()) refusedAgain.push((await journal.append(event)).status);
    await engine.close();
    return { delivered, refusedAgain };
  },
};

(globalThis as { isostoreQuota?: typeof api }).isostoreQuota = api;
export type QuotaPage = typeof api;
