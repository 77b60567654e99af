/**
 * The page of test/node/indexeddb-quota.test.ts: a journal over the
 * IndexedDB engine (strict) that appends large, incompressible events until
 * the origin's storage quota (lowered by the test through the DevTools
 * protocol) refuses one, and then reports what the journal answered.
 *
 * Without a {@link Reserve} the engine keeps none (`reserveBytes: 0`): the
 * browser itself refuses. With one, the engine refuses appends early, within
 * `reserveBytes` of the lowered quota. `navigator.storage.estimate()` does not
 * show a DevTools quota override (measured: it still reports the real quota,
 * 10 GiB here), so the engine is given a StorageManager whose estimate is the
 * browser's usage with the lowered quota.
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

/** The origin's usage in bytes as the page sees it (`estimate()` does not show a DevTools quota override; the test reads that). */
async function usage(): Promise<number> {
  return (await navigator.storage.estimate()).usage ?? -1;
}

/** One step of `drain`: its answer (`detail` when it succeeded, `refusal` when not) and the origin's usage after it. */
export interface DrainStep {
  readonly step: string;
  readonly ok: boolean;
  readonly detail: unknown;
  readonly refusal: Refusal | null;
  readonly usage: number;
}

/** What `drain` did: every step in order, the events its claims delivered, and what the journal holds after. */
export interface Drained {
  readonly steps: DrainStep[];
  /** Event ids the draining claims delivered, in order. */
  readonly claimed: string[];
  /** Stats after the final append (null if refused). */
  readonly after: { pending: number; inFlight: number; quarantined: number } | null;
  /** The event `drain` appended after pruning. */
  readonly appended: string;
  /** What the claim after the append delivered (null if refused). */
  readonly deliveredAfter: string[] | null;
}

const refused = new Map<string, UsageEvent>();

/** The lowered quota (the test's override) and the reserve the engine keeps below it. */
export interface Reserve {
  readonly quota: number;
  readonly reserveBytes: number;
}

/** The engine over `database`: keeping `reserve` below the lowered quota, or no reserve at all. */
function engineOver(database: string, reserve: Reserve | undefined) {
  if (reserve === undefined) return indexedDbEngine({ name: database, reserveBytes: 0 });
  const storage = {
    estimate: async () => ({ usage: (await navigator.storage.estimate()).usage ?? 0, quota: reserve.quota }),
  };
  return indexedDbEngine({ name: database, reserveBytes: reserve.reserveBytes, storage });
}

const api = {
  /** Append until the quota refuses an append, then try a batch; report the answers and the journal's count. */
  async fill(database: string, reserve?: Reserve): Promise<{ accepted: string[]; refusal: Refusal | null; batchRefusal: Refusal | null; pendingAfter: number }> {
    const engine = engineOver(database, reserve);
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

  /**
   * With the origin still at quota (nothing lifted after `fill`), do what a
   * forwarder does to free space, reporting every step: claim until nothing
   * is left (each round acks its first delivery with `ack` and the rest with
   * `ackBatch`), prune past the retention window, append a new event, then
   * read the stats and claim again (past the window too). Stops draining at
   * the first refusal; the later steps still run and report theirs.
   */
  async drain(database: string, reserve?: Reserve): Promise<Drained> {
    const engine = engineOver(database, reserve);
    const journal = createJournal(engine, { name: "usage", capacity });
    // Acks are stamped by the journal's clock (now); a minute and a second later they are past the window.
    const later = Date.now() + capacity.retainAcknowledgedMs + 1_000;
    const steps: DrainStep[] = [];
    const step = async <T>(name: string, run: () => Promise<T>, detail: (value: T) => unknown): Promise<{ value: T } | null> => {
      try {
        const value = await run();
        steps.push({ step: name, ok: true, detail: detail(value), refusal: null, usage: await usage() });
        return { value };
      } catch (error) {
        steps.push({ step: name, ok: false, detail: null, refusal: describeRefusal(error), usage: await usage() });
        return null;
      }
    };
    const claimed: string[] = [];
    for (let round = 0; round < 1000; round++) {
      const batch = await step("claim", () => journal.claim(consumer, { maxEvents: 1000, leaseMs: 60_000, now: Date.now() }), (deliveries) => deliveries.length);
      if (batch === null || batch.value.length === 0) break;
      const [first, ...rest] = batch.value;
      for (const delivery of batch.value) claimed.push(delivery.event.id);
      if ((await step("ack", () => journal.ack(first!.id), () => 1)) === null) break;
      if (rest.length === 0) continue;
      const acked = await step(
        "ackBatch",
        () => journal.ackBatch(rest.map((delivery) => delivery.id)),
        (results) => results.filter((result) => result.ok).length,
      );
      if (acked === null) break;
    }
    await step("prune", () => journal.prune({ now: later }), (result) => result.pruned);
    const event = bigEvent("user-0", 56);
    await step("append", () => journal.append(event), (result) => result.status);
    const after = await step("stats", () => journal.stats(consumer), (stats) => ({ pending: stats.pending, inFlight: stats.inFlight, quarantined: stats.quarantined }));
    const delivered = await step("claim after", () => journal.claim(consumer, { maxEvents: 100, leaseMs: 60_000, now: later }), (deliveries) => deliveries.length);
    await engine.close();
    return {
      steps,
      claimed,
      after: after === null ? null : { pending: after.value.pending, inFlight: after.value.inFlight, quarantined: after.value.quarantined },
      appended: event.id,
      deliveredAfter: delivered === null ? null : delivered.value.map((delivery) => delivery.event.id),
    };
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
