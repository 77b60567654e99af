/**
 * Benchmarks of the usage journal over the memory engine.
 *
 * 1. Pipeline: append N events one by one, then claim 100 / ack each until
 *    drained, beside a bare baseline written here (a Map for dedup and one
 *    array per ordering key: the least code that gives the same deliveries:
 *    at most one in flight per key, oldest position first). Same events, same
 *    run; the figure is the ratio of events per second.
 * 2. Claim cost as the backlog grows: the time of one `claim 100 + ack 100`
 *    cycle over 1,000 and over 100,000 pending events spread over 1,000
 *    ordering keys (the backlog is topped up, untimed, after every cycle).
 */
import { memoryEngine } from "../adapters/memory/index.js";
import { createJournal, createUsageEvent, newRequestId, parseConsumerId, type UsageEvent } from "../src/index.js";

const consumer = parseConsumerId("billing");
const capacity = { maxEvents: 10_000_000, maxDeliveryAttempts: 8, retainAcknowledgedMs: 86_400_000, policy: "refuse" } as const;

function makeEvents(count: number, keys: number, start: number): UsageEvent[] {
  const events: UsageEvent[] = [];
  for (let i = 0; i < count; i++) {
    events.push(
      createUsageEvent({
        record: { requestId: newRequestId(start + i), namespace: "acme", subject: `user-${i % keys}`, data: { tokens: i % 97 } },
        observedAt: start + i,
      }),
    );
  }
  return events;
}

/** The bare baseline: dedup map, per-key FIFO, one in flight per key, oldest first. */
class BareJournal {
  private readonly byId = new Map<string, { position: number; event: UsageEvent }>();
  private readonly keys = new Map<string, { queue: { position: number; event: UsageEvent }[]; inFlight: boolean }>();
  private next = 1;
  append(event: UsageEvent): number {
    const known = this.byId.get(event.id);
    if (known) return known.position;
    const entry = { position: this.next++, event };
    this.byId.set(event.id, entry);
    const keyText = `${event.orderingKey.namespace}/${event.orderingKey.subject}`;
    let key = this.keys.get(keyText);
    if (!key) this.keys.set(keyText, (key = { queue: [], inFlight: false }));
    key.queue.push(entry);
    return entry.position;
  }
  claim(max: number): { position: number; event: UsageEvent }[] {
    const heads: { position: number; event: UsageEvent }[] = [];
    for (const key of this.keys.values()) {
      if (!key.inFlight && key.queue.length > 0) heads.push(key.queue[0]!);
    }
    heads.sort((a, b) => a.position - b.position);
    const chosen = heads.slice(0, max);
    for (const head of chosen) this.keys.get(`${head.event.orderingKey.namespace}/${head.event.orderingKey.subject}`)!.inFlight = true;
    return chosen;
  }
  ack(id: string): void {
    const entry = this.byId.get(id)!;
    const key = this.keys.get(`${entry.event.orderingKey.namespace}/${entry.event.orderingKey.subject}`)!;
    key.queue.shift();
    key.inFlight = false;
  }
}

export interface PipelineResult {
  events: number;
  journalPerSecond: number;
  baselinePerSecond: number;
  ratio: number;
}

export async function pipeline(count: number, keys: number): Promise<PipelineResult> {
  const events = makeEvents(count, keys, 1_700_000_000_000);
  // Baseline.
  const bare = new BareJournal();
  let t0 = performance.now();
  for (const event of events) bare.append(event);
  let drained = 0;
  while (drained < count) {
    const batch = bare.claim(100);
    for (const entry of batch) bare.ack(entry.event.id);
    drained += batch.length;
  }
  const baselineMs = performance.now() - t0;
  // Journal.
  let now = 1_700_000_000_000;
  const journal = createJournal(memoryEngine(), { name: "bench", capacity, clock: () => now });
  t0 = performance.now();
  for (const event of events) await journal.append(event);
  drained = 0;
  while (drained < count) {
    now += 1;
    const batch = await journal.claim(consumer, { maxEvents: 100, leaseMs: 30_000, now });
    for (const delivery of batch) await journal.ack(delivery.id);
    drained += batch.length;
  }
  const journalMs = performance.now() - t0;
  const journalPerSecond = (count / journalMs) * 1000;
  const baselinePerSecond = (count / baselineMs) * 1000;
  return { events: count, journalPerSecond, baselinePerSecond, ratio: journalPerSecond / baselinePerSecond };
}

export interface ClaimCostResult {
  backlog: number;
  cycles: number;
  /** Mean ms per cycle. */
  msPerCycle: number;
  /** Median ms per cycle (a collection pause lands on a few cycles, not on the median). */
  medianMsPerCycle: number;
}

export async function claimCost(backlog: number, keys: number, cycles: number): Promise<ClaimCostResult> {
  let now = 1_700_000_000_000;
  const journal = createJournal(memoryEngine(), { name: "bench", capacity, clock: () => now });
  let serial = 0;
  const topUp = async (count: number) => {
    for (let done = 0; done < count; done += 1000) {
      await journal.appendBatch(makeEvents(Math.min(1000, count - done), keys, 1_600_000_000_000 + (serial += 1000) * 10));
    }
  };
  await topUp(backlog);
  await journal.claim(consumer, { maxEvents: 1, leaseMs: 1, now }); // register outside the timing
  const times: number[] = [];
  for (let i = 0; i < cycles; i++) {
    now += 10;
    const t0 = performance.now();
    const batch = await journal.claim(consumer, { maxEvents: 100, leaseMs: 30_000, now });
    for (const delivery of batch) await journal.ack(delivery.id);
    times.push(performance.now() - t0);
    if (batch.length !== 100) throw new Error(`expected a full claim, got ${batch.length}`);
    await topUp(batch.length);
  }
  const sorted = [...times].sort((a, b) => a - b);
  return { backlog, cycles, msPerCycle: times.reduce((a, b) => a + b, 0) / cycles, medianMsPerCycle: sorted[Math.floor(cycles / 2)]! };
}
