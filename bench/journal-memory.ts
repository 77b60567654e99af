/**
 * Benchmarks of the usage journal over the memory engine.
 *
 * 1. Pipeline: append N events one by one, then claim 100 / ack each until
 *    drained, beside a bare baseline written here (a Map for dedup and one
 *    array per ordering key: the least code that gives the same deliveries:
 *    at most one in flight per key, oldest position first). Same events, same
 *    run; the figure is the ratio of events per second. The baseline takes a
 *    few ms, so it is timed {@link BASELINE_RUNS} times per run and its median
 *    is used. Every timed side's deliveries are checked afterwards (untimed):
 *    each event delivered exactly once, or the run throws.
 *    Beside both, the journal's storage floor: the engine transactions the
 *    journal ran (recorded in an untimed run) replayed on a fresh memory
 *    engine with no journal code, each read awaited as the journal awaits it.
 *    It splits the journal's time into the engine's share and the core's.
 *    And the least engine work this pipeline's answers need (no journal
 *    rules beyond dedup and leases), on the same engine: about the most a
 *    journal over this engine could reach. And the same least work done
 *    straight on the memory engine's ordered store, synchronously, with no
 *    transactions, undo log or promises inside: the most any journal whose
 *    rows live in that store could reach, even over an engine API with
 *    synchronous reads.
 * 2. Claim cost as the backlog grows: the time of one `claim 100 + ack 100`
 *    cycle over 1,000 and over 100,000 pending events spread over 1,000
 *    ordering keys (the backlog is topped up, untimed, after every cycle; the
 *    top-ups continue the round robin over the keys, so the backlog spans all
 *    of them throughout, checked after the run).
 */
import { memoryEngine } from "../adapters/memory/index.js";
import { createJournal, createUsageEvent, newRequestId, parseConsumerId, type Delivery, type UsageEvent, type UsageJournal } from "../src/index.js";
import { compareKeys, type Engine, type EngineTransaction, type Key, type KeyRange, type ScanOptions, type TransactOptions, type TransactionMode } from "../src/engine.js";
import { ABSENT, OrderedTrie } from "../adapters/memory/ordered-trie.js";
import { scanBounds } from "../src/ordered/scan-bounds.js";

const consumer = parseConsumerId("billing");
const capacity = { maxEvents: 10_000_000, maxDeliveryAttempts: 8, retainAcknowledgedMs: 86_400_000, policy: "refuse" } as const;

/** How many times {@link pipeline} times the baseline per run (it uses the median). */
export const BASELINE_RUNS = 5;

/** `count` events over `keys` subjects, round robin from subject `firstKey` (mod `keys`). */
function makeEvents(count: number, keys: number, start: number, firstKey = 0): UsageEvent[] {
  const events: UsageEvent[] = [];
  for (let i = 0; i < count; i++) {
    events.push(
      createUsageEvent({
        record: { requestId: newRequestId(start + i), namespace: "acme", subject: `user-${(firstKey + i) % keys}`, data: { tokens: i % 97 } },
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

/** One engine call of a recorded transaction. */
type Call =
  | { readonly op: "get"; readonly key: Key }
  | { readonly op: "put"; readonly key: Key; readonly value: unknown }
  | { readonly op: "delete"; readonly key: Key }
  | { readonly op: "scan"; readonly range: KeyRange; readonly options: ScanOptions | undefined }
  | { readonly op: "deleteRange"; readonly range: KeyRange };

/** One committed transaction of a recorded run: its mode, options and calls in order. */
interface Recorded {
  readonly mode: TransactionMode;
  readonly options: TransactOptions | undefined;
  readonly calls: Call[];
}

/**
 * `inner`, recording every committed transaction's calls (keys and values by
 * reference: the journal never changes them after the call). A transaction
 * that rolled back is not recorded: the journal's pipeline has none.
 */
function recording(inner: Engine, log: (Recorded | undefined)[]): Engine {
  return {
    durable: inner.durable,
    ...(inner.localReads === undefined ? {} : { localReads: inner.localReads }),
    close: () => inner.close(),
    async transact<T>(mode: TransactionMode, fn: (tx: EngineTransaction) => Promise<T>, options?: TransactOptions): Promise<T> {
      const calls: Call[] = [];
      const result = await inner.transact(
        mode,
        (tx) =>
          fn({
            get: <V>(key: Key) => (calls.push({ op: "get", key }), tx.get<V>(key)),
            put: (key, value) => (calls.push({ op: "put", key, value }), tx.put(key, value)),
            delete: (key) => (calls.push({ op: "delete", key }), tx.delete(key)),
            scan: <V>(range: KeyRange, scanOptions?: ScanOptions) => (calls.push({ op: "scan", range, options: scanOptions }), tx.scan<V>(range, scanOptions)),
            ...(tx.deleteRange ? { deleteRange: (range: KeyRange) => (calls.push({ op: "deleteRange", range }), tx.deleteRange!(range)) } : {}),
          }),
        options,
      );
      log.push({ mode, options, calls });
      return result;
    },
  };
}

/**
 * Run the recorded transactions again on `engine`, in order, awaiting each
 * read. Empties `log` as it goes, so that the calls it no longer needs do not
 * stay in memory (the journal's own run keeps nothing of the sort).
 */
async function replay(engine: Engine, log: (Recorded | undefined)[]): Promise<void> {
  for (let i = 0; i < log.length; i++) {
    const { mode, options, calls } = log[i]!;
    log[i] = undefined;
    await engine.transact(
      mode,
      async (tx) => {
        for (const call of calls) {
          switch (call.op) {
            case "get":
              await tx.get(call.key);
              break;
            case "put":
              tx.put(call.key, call.value);
              break;
            case "delete":
              tx.delete(call.key);
              break;
            case "scan":
              await tx.scan(call.range, call.options);
              break;
            case "deleteRange":
              tx.deleteRange!(call.range);
              break;
          }
        }
      },
      options,
    );
  }
}

/** Throw unless both engines hold the same keys with the same values (the replay rebuilt the journal's data). */
async function assertSameData(a: Engine, b: Engine): Promise<void> {
  const all = (engine: Engine) => engine.transact("readonly", (tx) => tx.scan({}));
  const [left, right] = [await all(a), await all(b)];
  const same = left.length === right.length && left.every((entry, i) => compareKeys(entry.key, right[i]!.key) === 0 && entry.value === right[i]!.value);
  if (!same) throw new Error(`the replay did not rebuild the journal's data (${left.length} entries recorded, ${right.length} replayed)`);
}

/**
 * The least engine work we can see for this pipeline's answers, on `engine`:
 * per event an append transaction that reads its request id and writes the
 * event, the id and an ordering-key entry; a claim transaction per 100 that
 * scans 100 events and writes a lease each; an ack transaction per event that
 * reads its lease, deletes it and writes a finished mark. It keeps no attempt
 * history, retention or age index, no counters and no per-key turn (it hands
 * events out in position order, which this pipeline's answers allow): we know
 * of no layout that keeps the journal's rules and does much less. Its rate
 * over the baseline's is about the most a journal over this engine could
 * reach, its layout cut to the bone and its own code free.
 */
async function leastEngineWork(engine: Engine, events: readonly UsageEvent[]): Promise<{ key: Key; value: unknown }[][]> {
  const delivered: { key: Key; value: unknown }[][] = [];
  let position = 0;
  for (const event of events) {
    await engine.transact("readwrite", async (tx) => {
      if ((await tx.get(["j", "least", "i", event.id])) !== undefined) return;
      position += 1;
      tx.put(["j", "least", "e", position], event);
      tx.put(["j", "least", "i", event.id], position);
      tx.put(["j", "least", "k", event.orderingKey.namespace, event.orderingKey.subject, position], 0);
    });
  }
  let next = 1;
  while (next <= position) {
    const from = next;
    const batch = await engine.transact("readwrite", async (tx) => {
      const ready = await tx.scan({ prefix: ["j", "least", "e"], lower: ["j", "least", "e", from] }, { limit: 100 });
      for (const entry of ready) tx.put(["j", "least", "l", "billing", entry.key[3] as number], 1);
      return ready;
    });
    if (batch.length === 0) throw new Error(`least engine work: an empty claim with ${position - next + 1} events left`);
    delivered.push(batch); // kept for the check after the timing (one push per claim)
    for (const entry of batch) {
      const at = entry.key[3] as number;
      await engine.transact("readwrite", async (tx) => {
        await tx.get(["j", "least", "l", "billing", at]);
        tx.delete(["j", "least", "l", "billing", at]);
        tx.put(["j", "least", "f", "billing", at], 1);
      });
    }
    next += batch.length;
  }
  return delivered;
}

/**
 * {@link leastEngineWork}'s steps done straight on the memory engine's
 * ordered store ({@link OrderedTrie}), synchronously: the same rows, reads
 * and writes, but no Engine API, no transaction, no undo log and no promise
 * inside a step. Each step (an append, a claim, an ack) is awaited once, as
 * a caller of an asynchronous journal awaits each call. Its rate over the
 * baseline's bounds every journal that keeps rows like these in that store,
 * whatever its engine API (synchronous reads included) and however little
 * code it runs.
 */
async function leastStoreWork(events: readonly UsageEvent[]): Promise<{ key: Key; value: unknown }[][]> {
  const store = new OrderedTrie();
  const put = (key: Key, value: unknown) => {
    const node = store.node(key);
    if (node.value === ABSENT) {
      node.key = [...key];
      store.size++;
    }
    node.value = value;
  };
  const step = Promise.resolve();
  const delivered: { key: Key; value: unknown }[][] = [];
  let position = 0;
  for (const event of events) {
    await step;
    if (store.find(["j", "least", "i", event.id]) !== undefined) continue;
    position += 1;
    put(["j", "least", "e", position], event);
    put(["j", "least", "i", event.id], position);
    put(["j", "least", "k", event.orderingKey.namespace, event.orderingKey.subject, position], 0);
  }
  let next = 1;
  while (next <= position) {
    await step;
    const batch: { key: Key; value: unknown }[] = [];
    store.scan(scanBounds({ prefix: ["j", "least", "e"], lower: ["j", "least", "e", next] }), false, 100, (node) => {
      batch.push({ key: node.key!, value: node.value });
    });
    for (const entry of batch) put(["j", "least", "l", "billing", entry.key[3] as number], 1);
    if (batch.length === 0) throw new Error(`least store work: an empty claim with ${position - next + 1} events left`);
    delivered.push(batch);
    for (const entry of batch) {
      await step;
      const at = entry.key[3] as number;
      if (store.find(["j", "least", "l", "billing", at]) === undefined) throw new Error(`least store work: no lease for position ${at}`);
      store.delete(["j", "least", "l", "billing", at]);
      put(["j", "least", "f", "billing", at], 1);
    }
    next += batch.length;
  }
  return delivered;
}

/**
 * The journal's pipeline: append every event one by one, then claim 100 and
 * ack each until drained. Answers the claimed batches (one push per claim)
 * and the journal, for the checks after the timing ({@link assertJournalDelivered}).
 */
async function journalPipeline(engine: Engine, events: readonly UsageEvent[]): Promise<{ delivered: Delivery[][]; journal: UsageJournal }> {
  let now = 1_700_000_000_000;
  const journal = createJournal(engine, { name: "bench", capacity, clock: () => now });
  for (const event of events) await journal.append(event);
  const delivered: Delivery[][] = [];
  let drained = 0;
  while (drained < events.length) {
    now += 1;
    const batch = await journal.claim(consumer, { maxEvents: 100, leaseMs: 30_000, now });
    if (batch.length === 0) throw new Error(`journal: an empty claim with ${events.length - drained} events left`);
    delivered.push(batch);
    for (const delivery of batch) await journal.ack(delivery.id);
    drained += batch.length;
  }
  return { delivered, journal };
}

/** Throw unless the journal's run delivered every event exactly once and left nothing pending, in flight or quarantined. */
async function assertJournalDelivered(who: string, events: readonly UsageEvent[], run: { delivered: Delivery[][]; journal: UsageJournal }): Promise<void> {
  assertDeliveredOnce(who, events, run.delivered.flatMap((batch) => batch.map((delivery) => delivery.event.id)));
  const stats = await run.journal.stats(consumer);
  if (stats.pending !== 0 || stats.inFlight !== 0 || stats.quarantined !== 0) {
    throw new Error(`${who}: drained, but its stats say ${JSON.stringify({ pending: stats.pending, inFlight: stats.inFlight, quarantined: stats.quarantined })}`);
  }
}

/** The bare baseline's pipeline: the same steps over {@link BareJournal}. Answers the claimed batches. */
function barePipeline(events: readonly UsageEvent[]): { event: UsageEvent }[][] {
  const bare = new BareJournal();
  for (const event of events) bare.append(event);
  const delivered: { event: UsageEvent }[][] = [];
  let drained = 0;
  while (drained < events.length) {
    const batch = bare.claim(100);
    if (batch.length === 0) throw new Error(`baseline: an empty claim with ${events.length - drained} events left`);
    delivered.push(batch);
    for (const entry of batch) bare.ack(entry.event.id);
    drained += batch.length;
  }
  return delivered;
}

/** Throw unless `delivered` (request ids, in delivery order) holds every one of `events` exactly once. */
function assertDeliveredOnce(who: string, events: readonly UsageEvent[], delivered: readonly string[]): void {
  const expected = new Set(events.map((event) => event.id));
  const seen = new Set<string>();
  for (const id of delivered) {
    if (!expected.has(id)) throw new Error(`${who} delivered ${id}, which is not one of the ${events.length} events`);
    if (seen.has(id)) throw new Error(`${who} delivered ${id} twice`);
    seen.add(id);
  }
  if (seen.size !== expected.size) throw new Error(`${who} delivered ${seen.size} of the ${expected.size} events`);
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

export interface PipelineResult {
  events: number;
  journalPerSecond: number;
  /** From the median of the baseline's {@link BASELINE_RUNS} timings. */
  baselinePerSecond: number;
  /** The baseline's fastest and slowest of its runs, events/s. */
  baselineRange: { min: number; max: number };
  /** baselineMs (median) / journalMs. */
  ratio: number;
  /** The journal's engine transactions replayed alone (see the module comment). */
  replayPerSecond: number;
  /** {@link leastEngineWork} on a fresh memory engine, events/s. */
  leastPerSecond: number;
  /** {@link leastStoreWork}, events/s. */
  leastStorePerSecond: number;
  /** Engine calls per event in the journal's run. */
  callsPerEvent: number;
  /** Transactions per event in the journal's run. */
  transactionsPerEvent: number;
  /** Engine calls per event of {@link leastEngineWork}, counted as the journal's are (a recorded, untimed run). */
  leastCallsPerEvent: number;
  /** Transactions per event of {@link leastEngineWork}, counted likewise. */
  leastTransactionsPerEvent: number;
}

export async function pipeline(count: number, keys: number): Promise<PipelineResult> {
  const events = makeEvents(count, keys, 1_700_000_000_000);
  // Baseline: a few ms, so timed several times (fresh each time); the median is used.
  const baselineTimes: number[] = [];
  for (let run = 0; run < BASELINE_RUNS; run++) {
    const t0 = performance.now();
    const delivered = barePipeline(events);
    baselineTimes.push(performance.now() - t0);
    assertDeliveredOnce("the baseline", events, delivered.flatMap((batch) => batch.map((entry) => entry.event.id)));
  }
  const baselineMs = median(baselineTimes);
  // Journal.
  let t0 = performance.now();
  const journalRun = await journalPipeline(memoryEngine(), events);
  const journalMs = performance.now() - t0;
  await assertJournalDelivered("the journal", events, journalRun);
  // The same run recorded (untimed), then its transactions replayed alone.
  const log: (Recorded | undefined)[] = [];
  const recorded = memoryEngine();
  await assertJournalDelivered("the journal (recorded run)", events, await journalPipeline(recording(recorded, log), events));
  const calls = log.reduce((sum, tx) => sum + tx!.calls.length, 0);
  const transactions = log.length;
  const target = memoryEngine();
  t0 = performance.now();
  await replay(target, log);
  const replayMs = performance.now() - t0;
  await assertSameData(recorded, target);
  t0 = performance.now();
  const leastDelivered = await leastEngineWork(memoryEngine(), events);
  const leastMs = performance.now() - t0;
  assertDeliveredOnce("least engine work", events, leastDelivered.flatMap((batch) => batch.map((entry) => (entry.value as UsageEvent).id)));
  t0 = performance.now();
  const storeDelivered = await leastStoreWork(events);
  const leastStoreMs = performance.now() - t0;
  assertDeliveredOnce("least store work", events, storeDelivered.flatMap((batch) => batch.map((entry) => (entry.value as UsageEvent).id)));
  // Least engine work's calls and transactions, counted as the journal's are: a recorded run, untimed.
  const leastLog: (Recorded | undefined)[] = [];
  await leastEngineWork(recording(memoryEngine(), leastLog), events);
  const leastCalls = leastLog.reduce((sum, tx) => sum + tx!.calls.length, 0);
  const perSecond = (ms: number) => (count / ms) * 1000;
  return {
    events: count,
    journalPerSecond: perSecond(journalMs),
    baselinePerSecond: perSecond(baselineMs),
    baselineRange: { min: perSecond(Math.max(...baselineTimes)), max: perSecond(Math.min(...baselineTimes)) },
    ratio: baselineMs / journalMs,
    replayPerSecond: perSecond(replayMs),
    leastPerSecond: perSecond(leastMs),
    leastStorePerSecond: perSecond(leastStoreMs),
    callsPerEvent: calls / count,
    transactionsPerEvent: transactions / count,
    leastCallsPerEvent: leastCalls / count,
    leastTransactionsPerEvent: leastLog.length / count,
  };
}

export interface ClaimCostResult {
  backlog: number;
  cycles: number;
  /** Ordering keys the backlog spans (checked after the cycles). */
  keys: number;
  /** Mean ms per cycle. */
  msPerCycle: number;
  /** Median ms per cycle (a collection pause lands on a few cycles, not on the median). */
  medianMsPerCycle: number;
}

export async function claimCost(backlog: number, keys: number, cycles: number): Promise<ClaimCostResult> {
  let now = 1_700_000_000_000;
  const engine = memoryEngine();
  const journal = createJournal(engine, { name: "bench", capacity, clock: () => now });
  let serial = 0;
  // The subjects continue round robin across top-ups, so a top-up of 100 goes to the next 100 keys
  // (the keys the last claim emptied, at backlog = keys), not always to the first 100.
  let nextKey = 0;
  const topUp = async (count: number) => {
    for (let done = 0; done < count; done += 1000) {
      const size = Math.min(1000, count - done);
      await journal.appendBatch(makeEvents(size, keys, 1_600_000_000_000 + (serial += 1000) * 10, nextKey));
      nextKey = (nextKey + size) % keys;
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
  // Untimed: the backlog still spans every key (the consumer's head rows: one per key with unfinished events).
  const pendingKeys = (await engine.transact("readonly", (tx) => tx.scan({ prefix: ["j", "bench", "h", consumer] }))).length;
  if (pendingKeys !== Math.min(keys, backlog)) throw new Error(`after the cycles the backlog spans ${pendingKeys} ordering keys, not ${Math.min(keys, backlog)}`);
  return { backlog, cycles, keys, msPerCycle: times.reduce((a, b) => a + b, 0) / cycles, medianMsPerCycle: median(times) };
}
