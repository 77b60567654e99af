/**
 * The forwarder against memory journals on virtual time: a source journal
 * drained into a sink that is a memory journal behind a scriptable fault
 * wrapper (retryable failures, network errors, permanent refusals, slow and
 * hanging calls, a sink that dies mid-batch, per-event conflicts, invalid
 * events, a full sink). Every example ends with the same audit: each source
 * event is acknowledged and in the sink exactly once, or quarantined in the
 * source with a reason; nothing pending; per-key order at the sink is the
 * source's append order. A fast-check property runs the same audit over
 * random fault schedules (`SOAK=1` for a long run).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import {
  AtCapacityError,
  BackendError,
  createJournal,
  createUsageEvent,
  InvalidArgumentError,
  InvalidEventError,
  newRequestId,
  parseConsumerId,
  type BatchAppendResult,
  type Capacity,
  type ConsumerId,
  type DeliveryId,
  type UsageEvent,
  type UsageJournal,
} from "../../src/index.js";
import {
  createForwarder,
  exponentialBackoff,
  type BatchReport,
  type ForwarderFailure,
  type ForwarderOptions,
  type ForwarderProgress,
  type ForwarderSink,
  type ForwarderState,
  type Scheduler,
} from "../../src/sync/index.js";
import { HttpError } from "../../src/http/index.js";
import { virtualClock, virtualScheduler, type VirtualClock, type VirtualScheduler } from "../../src/testing/index.js";

const START = 1_700_000_000_000;
const DAY_MS = 24 * 60 * 60 * 1000;
const SOURCE_CAPACITY: Capacity = { maxEvents: 10_000, maxDeliveryAttempts: 4, retainAcknowledgedMs: DAY_MS, policy: "refuse" };
const SINK_CAPACITY: Capacity = { maxEvents: 10_000, maxDeliveryAttempts: 4, retainAcknowledgedMs: DAY_MS, policy: "refuse" };
const consumer = parseConsumerId("edge");

// ------------------------------------------------------------------ fixtures

/** What one `appendBatch` call of the fake sink does. */
type Fault =
  | { readonly kind: "ok" }
  | { readonly kind: "throw"; readonly error: unknown }
  | { readonly kind: "slow"; readonly ms: number }
  | { readonly kind: "hang" }
  /** Store the first `stored` events, then throw `error` (the process died after a partial write). */
  | { readonly kind: "partial"; readonly stored: number; readonly error: unknown }
  | { readonly kind: "wrong_count" };

/** A sink: a memory journal behind a scriptable fault wrapper that records what it stored and what it was sent. */
class FakeSink implements ForwarderSink {
  /** One entry per call: the events sent. */
  readonly sent: UsageEvent[][] = [];
  /** Events the target answered `accepted` for, in the order they were stored. */
  readonly stored: UsageEvent[] = [];
  /** Faults for the next calls, in order; `ok` when empty. */
  readonly faults: Fault[] = [];
  /** Request ids refused per event as `at_capacity` (retryable) while listed. */
  readonly full = new Set<string>();
  /** Request ids refused per event as `invalid_event` (permanent). */
  readonly invalid = new Set<string>();

  constructor(
    readonly target: UsageJournal,
    readonly scheduler: Scheduler,
  ) {}

  /** Sink checks (calls of no events) made. */
  checks = 0;
  /** The signal of each call (the forwarder aborts it when it stops waiting). */
  readonly signals: (AbortSignal | undefined)[] = [];

  async appendBatch(events: readonly UsageEvent[], options?: { readonly signal?: unknown }): Promise<BatchAppendResult[]> {
    // The forwarder's sink check (no events, before a claim) is answered; it is not a send.
    if (events.length === 0) {
      this.checks += 1;
      return [];
    }
    this.sent.push([...events]);
    this.signals.push(options?.signal as AbortSignal | undefined);
    const fault = this.faults.shift() ?? { kind: "ok" };
    switch (fault.kind) {
      case "ok":
        return this.store(events);
      case "throw":
        throw fault.error;
      case "slow":
        await new Promise<void>((resolve) => this.scheduler.setTimeout(resolve, fault.ms));
        return this.store(events);
      case "hang":
        return new Promise<never>(() => undefined);
      case "partial":
        await this.store(events.slice(0, fault.stored));
        throw fault.error;
      case "wrong_count":
        await this.store(events);
        return [];
    }
  }

  private async store(events: readonly UsageEvent[]): Promise<BatchAppendResult[]> {
    const results: (BatchAppendResult | null)[] = events.map((event) => {
      if (this.invalid.has(event.id)) return { status: "rejected", error: new InvalidEventError(event.id, "data", "the edge refuses this record") };
      if (this.full.has(event.id)) return { status: "rejected", error: new AtCapacityError(1, SINK_CAPACITY) };
      return null;
    });
    const passing = events.filter((_, index) => results[index] === null);
    const answers = await this.target.appendBatch(passing);
    let next = 0;
    return results.map((result, index) => {
      if (result !== null) return result;
      const answer = answers[next++]!;
      if (answer.status === "accepted") this.stored.push(events[index]!);
      return answer;
    });
  }
}

interface Rig {
  readonly time: VirtualClock;
  readonly scheduler: VirtualScheduler;
  readonly source: UsageJournal;
  readonly target: UsageJournal;
  readonly sink: FakeSink;
  /** Source events in append order. */
  readonly appended: UsageEvent[];
  append(key: string, count?: number): Promise<UsageEvent[]>;
  forwarder(options?: Partial<ForwarderOptions>): ReturnType<typeof createForwarder>;
}

function rig(capacity: Capacity = SOURCE_CAPACITY): Rig {
  const time = virtualClock(START);
  const scheduler = virtualScheduler(time);
  const source = createJournal(memoryEngine(), { name: "local", capacity, clock: time.clock });
  const target = createJournal(memoryEngine(), { name: "edge", capacity: SINK_CAPACITY, clock: time.clock });
  const sink = new FakeSink(target, scheduler);
  const appended: UsageEvent[] = [];
  let serial = 0;
  return {
    time,
    scheduler,
    source,
    target,
    sink,
    appended,
    async append(key, count = 1) {
      const made: UsageEvent[] = [];
      for (let i = 0; i < count; i++) {
        const [namespace, subject] = key.split("/") as [string, string];
        const event = createUsageEvent({
          record: { requestId: newRequestId(time.now), namespace, subject, data: { serial: serial++ } },
          observedAt: time.now,
        });
        const result = await source.append(event);
        expect(result.status).toBe("accepted");
        appended.push(event);
        made.push(event);
      }
      return made;
    },
    forwarder(options = {}) {
      return createForwarder({
        source,
        consumer,
        sink,
        batchSize: 4,
        leaseMs: 10_000,
        backoff: { initialMs: 1_000, maxMs: 8_000, jitter: 0, random: () => 0 },
        clock: time.clock,
        scheduler,
        ...options,
      });
    },
  };
}

const keyOf = (event: UsageEvent) => `${event.orderingKey.namespace}/${event.orderingKey.subject}`;

function perKey(events: readonly UsageEvent[]): Map<string, string[]> {
  const byKey = new Map<string, string[]>();
  for (const event of events) byKey.set(keyOf(event), [...(byKey.get(keyOf(event)) ?? []), event.id]);
  return byKey;
}

async function quarantinedIn(source: UsageJournal): Promise<Map<string, string>> {
  const reasons = new Map<string, string>();
  let after: string | null = null;
  do {
    const page = await source.listQuarantined(consumer, { limit: 1000, after });
    for (const item of page.items) reasons.set(item.event.id, item.reason);
    after = page.nextCursor;
  } while (after !== null);
  return reasons;
}

/**
 * The audit every scenario ends with. Returns the quarantine reasons by request id.
 * `stuck` lists ids allowed to be still unfinished (none by default).
 */
async function audit(r: Rig): Promise<Map<string, string>> {
  const stats = await r.source.stats(consumer);
  expect(stats.pending + stats.inFlight, "nothing of the source is left undecided").toBe(0);
  const quarantined = await quarantinedIn(r.source);
  for (const reason of quarantined.values()) expect(["rejected", "attempts_exhausted"]).toContain(reason);

  // No duplicates in the sink: each request id was stored at most once.
  const storedIds = r.sink.stored.map((event) => event.id);
  expect(new Set(storedIds).size, "no request id stored twice").toBe(storedIds.length);

  // Every acknowledged event is in the sink, with the same record.
  const storedById = new Map(r.sink.stored.map((event) => [event.id, event]));
  for (const event of r.appended) {
    if (quarantined.has(event.id)) continue;
    const inSink = storedById.get(event.id);
    expect(inSink, `acknowledged event ${event.id} is in the sink`).toBeDefined();
    expect(inSink!.record).toEqual(event.record);
  }
  // Nothing in the sink that the source never had.
  const appendedIds = new Set(r.appended.map((event) => event.id));
  for (const id of storedIds) expect(appendedIds.has(id)).toBe(true);

  // Per-key order at the sink equals the source's per-key append order (restricted to what reached the sink).
  const sinkOrder = perKey(r.sink.stored);
  const sourceOrder = perKey(r.appended);
  for (const [key, ids] of sinkOrder) {
    const expected = (sourceOrder.get(key) ?? []).filter((id) => storedById.has(id));
    expect(ids, `order of ${key} at the sink`).toEqual(expected);
  }
  // A batch never held two events of one key.
  for (const batch of r.sink.sent) expect(new Set(batch.map(keyOf)).size).toBe(batch.length);
  return quarantined;
}

/** Drain, move time forward, drain again, until the source has nothing left. */
async function drainToEnd(r: Rig, forwarder: ReturnType<typeof createForwarder>, stepMs = 10_000, rounds = 50): Promise<void> {
  for (let i = 0; i < rounds; i++) {
    const draining = forwarder.drain();
    await r.scheduler.advance(0);
    await draining;
    const stats = await r.source.stats(consumer);
    if (stats.pending + stats.inFlight === 0) return;
    await r.scheduler.advance(stepMs);
  }
  throw new Error("the source did not drain");
}

async function attemptsOf(r: Rig, id: string) {
  return r.source.attempts(consumer, id);
}

/** A source wrapper whose settle calls can be made to fail. */
function flakySource(inner: UsageJournal, failures: { ack: number; nack: number; extend: number; claim: number }): UsageJournal {
  const boom = (what: string) => new BackendError(`${what} failed (injected)`, { retryable: true });
  return {
    ...inner,
    name: inner.name,
    capacity: inner.capacity,
    mode: inner.mode,
    append: (event) => inner.append(event),
    appendBatch: (events) => inner.appendBatch(events),
    claim: async (c: ConsumerId, options) => {
      if (failures.claim > 0) {
        failures.claim -= 1;
        throw boom("claim");
      }
      return inner.claim(c, options);
    },
    ack: async (id: DeliveryId) => {
      if (failures.ack > 0) {
        failures.ack -= 1;
        throw boom("ack");
      }
      return inner.ack(id);
    },
    ackBatch: async (ids: readonly DeliveryId[]) => {
      if (failures.ack > 0) {
        failures.ack -= 1;
        throw boom("ack");
      }
      return inner.ackBatch(ids);
    },
    nack: async (id, options) => {
      if (failures.nack > 0) {
        failures.nack -= 1;
        throw boom("nack");
      }
      return inner.nack(id, options);
    },
    extend: async (id, options) => {
      if (failures.extend > 0) {
        failures.extend -= 1;
        throw boom("extend");
      }
      return inner.extend(id, options);
    },
    quarantine: (id, reason) => inner.quarantine(id, reason),
    stats: (c) => inner.stats(c),
    attempts: (c, id) => inner.attempts(c, id),
    listQuarantined: (c, options) => inner.listQuarantined(c, options),
  };
}

// ------------------------------------------------------------------ examples

describe("forwarder: what reaches the sink", () => {
  it("forwards every event once, in per-key order, one event per key per batch, and acknowledges it", async () => {
    const r = rig();
    await r.append("acme/alice", 5);
    await r.append("acme/bob", 3);
    await r.append("zeta/carol", 4);
    const forwarder = r.forwarder();
    const report = await forwarder.drain();
    expect(report).toMatchObject({ claimed: 12, forwarded: 12, alreadyPresent: 0, quarantined: 0, retried: 0, unsettled: 0, failed: false });
    expect(report.batches).toBeGreaterThanOrEqual(5); // alice's five events need five batches
    expect(forwarder.progress).toMatchObject({ forwarded: 12, pending: 0, lastError: null, state: "stopped" });
    const quarantined = await audit(r);
    expect(quarantined.size).toBe(0);
    for (const batch of r.sink.sent) expect(batch.length).toBeLessThanOrEqual(4);
  });

  it("an empty source is a batch that claims nothing", async () => {
    const r = rig();
    const report = await r.forwarder().runOnce();
    expect(report).toEqual({ claimed: 0, forwarded: 0, alreadyPresent: 0, quarantined: 0, retried: 0, unsettled: 0, resent: 0, failed: false });
    expect(r.sink.sent).toHaveLength(0);
  });

  it("a retryable sink failure nacks the whole batch with backoff and the error text, and the retry delivers", async () => {
    const r = rig();
    const [first] = await r.append("acme/alice", 2);
    await r.append("acme/bob", 1);
    r.sink.faults.push({ kind: "throw", error: new BackendError("edge unavailable", { retryable: true }) });
    const forwarder = r.forwarder();
    const failed = await forwarder.runOnce();
    expect(failed).toMatchObject({ claimed: 2, forwarded: 0, retried: 2, failed: true });
    const [attempt] = await attemptsOf(r, first!.id);
    expect(attempt?.outcome).toEqual({ kind: "nacked", at: START, error: "backend: usage journal backend: edge unavailable" });
    expect(forwarder.progress.lastError).toMatchObject({ phase: "append", code: "backend", retryable: true });
    // Not claimable before the backoff (1 s for attempt 1, no jitter) has passed.
    expect((await forwarder.runOnce()).claimed).toBe(0);
    await r.scheduler.advance(1_000);
    await drainToEnd(r, forwarder);
    expect(forwarder.progress.forwarded).toBe(3);
    expect((await attemptsOf(r, first!.id)).map((a) => a.outcome?.kind)).toEqual(["nacked", "acked"]);
    await audit(r);
  });

  it("a network error (a TypeError from fetch) counts as retryable", async () => {
    const r = rig();
    await r.append("acme/alice", 1);
    r.sink.faults.push({ kind: "throw", error: new TypeError("Failed to fetch") });
    const forwarder = r.forwarder();
    expect(await forwarder.runOnce()).toMatchObject({ retried: 1, failed: true });
    expect(forwarder.progress.lastError).toMatchObject({ phase: "append", code: null, retryable: true, message: "Failed to fetch" });
    await drainToEnd(r, forwarder);
    expect(r.sink.stored).toHaveLength(1);
    await audit(r);
  });

  it("a permanent whole-batch failure acknowledges nothing: it is nacked until the attempt budget quarantines it as attempts_exhausted", async () => {
    const r = rig();
    const events = await r.append("acme/alice", 2);
    const permanent = new InvalidArgumentError("events", "the edge refuses this batch");
    for (let i = 0; i < 10; i++) r.sink.faults.push({ kind: "throw", error: permanent });
    const forwarder = r.forwarder();
    const errors: ForwarderFailure[] = [];
    forwarder.addEventListener("error", (event) => errors.push(event.detail));
    await drainToEnd(r, forwarder);
    expect(r.sink.stored).toHaveLength(0);
    expect(forwarder.progress.forwarded).toBe(0);
    const quarantined = await audit(r);
    expect(quarantined.get(events[0]!.id)).toBe("attempts_exhausted");
    expect(errors.length).toBeGreaterThanOrEqual(SOURCE_CAPACITY.maxDeliveryAttempts);
    expect(errors[0]).toMatchObject({ phase: "append", code: "invalid_argument", retryable: false, requestIds: [events[0]!.id] });
  });

  it("a per-event conflict (409) is quarantined as rejected and the key moves on", async () => {
    const r = rig();
    const [clash, next] = await r.append("acme/alice", 2);
    await r.append("acme/bob", 1);
    // The edge already holds another fact under the same request id.
    await r.target.append(createUsageEvent({ record: { ...clash!.record, data: { other: true } }, observedAt: START }));
    const forwarder = r.forwarder();
    const first = await forwarder.runOnce();
    expect(first).toMatchObject({ claimed: 2, forwarded: 1, quarantined: 1, retried: 0, failed: false });
    expect(forwarder.progress.lastError).toMatchObject({ phase: "append", code: "conflict", retryable: false, requestIds: [clash!.id] });
    await forwarder.drain();
    const quarantined = await audit(r);
    expect(quarantined).toEqual(new Map([[clash!.id, "rejected"]]));
    expect(r.sink.stored.map((event) => event.id)).toContain(next!.id);
  });

  it("an event the sink calls invalid is quarantined as rejected", async () => {
    const r = rig();
    const [bad] = await r.append("acme/alice", 1);
    await r.append("acme/bob", 2);
    r.sink.invalid.add(bad!.id);
    const forwarder = r.forwarder();
    await forwarder.drain();
    expect(await audit(r)).toEqual(new Map([[bad!.id, "rejected"]]));
    expect(forwarder.progress).toMatchObject({ forwarded: 2, quarantined: 1 });
  });

  it("a full sink (per-event at_capacity) nacks that event with backoff and blocks its key until the retry", async () => {
    const r = rig();
    const [a1, a2] = await r.append("acme/alice", 2);
    await r.append("acme/bob", 2);
    r.sink.full.add(a1!.id);
    const forwarder = r.forwarder();
    const report = await forwarder.drain();
    expect(report).toMatchObject({ forwarded: 2, retried: 1, failed: true });
    // alice's second event waits behind her first.
    expect(r.sink.stored.map((event) => event.id)).not.toContain(a2!.id);
    expect((await attemptsOf(r, a1!.id))[0]?.outcome).toMatchObject({ kind: "nacked", error: expect.stringContaining("at_capacity") as string });
    r.sink.full.clear();
    await r.scheduler.advance(1_000);
    await forwarder.drain();
    await audit(r);
    expect(r.sink.stored.filter((event) => keyOf(event) === "acme/alice").map((event) => event.id)).toEqual([a1!.id, a2!.id]);
  });

  it("a sink that dies mid-batch (stores part, then throws) is replayed harmlessly: already_present is acknowledged, nothing stored twice", async () => {
    const r = rig();
    await r.append("acme/alice", 1);
    await r.append("acme/bob", 1);
    await r.append("acme/carol", 1);
    await r.append("acme/dave", 1);
    r.sink.faults.push({ kind: "partial", stored: 2, error: new TypeError("connection reset") });
    const forwarder = r.forwarder();
    expect(await forwarder.runOnce()).toMatchObject({ claimed: 4, forwarded: 0, retried: 4, failed: true });
    expect(r.sink.stored).toHaveLength(2);
    await r.scheduler.advance(1_000);
    const replay = await forwarder.runOnce();
    expect(replay).toMatchObject({ claimed: 4, forwarded: 4, alreadyPresent: 2, failed: false });
    await audit(r);
  });

  it("a sink answering the wrong number of results acknowledges nothing (sink_protocol) and the replay delivers", async () => {
    const r = rig();
    await r.append("acme/alice", 1);
    await r.append("acme/bob", 1);
    r.sink.faults.push({ kind: "wrong_count" });
    const forwarder = r.forwarder();
    expect(await forwarder.runOnce()).toMatchObject({ forwarded: 0, retried: 2, failed: true });
    expect(forwarder.progress.lastError).toMatchObject({ code: "sink_protocol", retryable: false });
    await drainToEnd(r, forwarder);
    expect((await forwarder.drain()).claimed).toBe(0);
    await audit(r);
  });
});

describe("forwarder: slow sinks and leases", () => {
  it("a slow sink keeps its leases: the heartbeat extends them every leaseMs/2 and nothing is redelivered", async () => {
    const r = rig();
    const [event] = await r.append("acme/alice", 1);
    r.sink.faults.push({ kind: "slow", ms: 24_000 });
    const forwarder = r.forwarder({ leaseMs: 10_000 });
    const running = forwarder.runOnce();
    await r.scheduler.advance(0); // let the batch reach the sink before time moves
    await r.scheduler.advance(15_000); // past the original lease
    let stats = await r.source.stats(consumer);
    expect(stats).toMatchObject({ inFlight: 1, pending: 0 });
    await r.scheduler.advance(9_000);
    const report = await running;
    expect(report).toMatchObject({ claimed: 1, forwarded: 1, failed: false });
    const attempts = await attemptsOf(r, event!.id);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]!.leaseExpiresAt).toBe(START + 20_000 + 10_000); // last beat at 20 s
    expect(attempts[0]!.outcome).toEqual({ kind: "acked", at: START + 24_000 });
    stats = await r.source.stats(consumer);
    expect(stats).toMatchObject({ inFlight: 0, pending: 0 });
    expect(r.scheduler.pending()).toBe(0); // the heartbeat stopped
    await audit(r);
  });

  it("a sink that never answers times out (sink_timeout), the batch is nacked and the retry delivers", async () => {
    const r = rig();
    await r.append("acme/alice", 2);
    r.sink.faults.push({ kind: "hang" });
    const forwarder = r.forwarder({ sinkTimeoutMs: 30_000 });
    const running = forwarder.runOnce();
    await r.scheduler.advance(0); // let the batch reach the sink before time moves
    await r.scheduler.advance(30_000);
    expect(await running).toMatchObject({ claimed: 1, retried: 1, failed: true });
    expect(forwarder.progress.lastError).toMatchObject({ code: "sink_timeout", retryable: true, phase: "append" });
    // The abandoned call's signal aborted, with the timeout as its reason (an HttpJournal cancels its request).
    expect(r.sink.signals[0]?.aborted).toBe(true);
    expect(r.sink.signals[0]?.reason).toMatchObject({ code: "sink_timeout", timeoutMs: 30_000 });
    await drainToEnd(r, forwarder);
    await audit(r);
  });

  it("a failed heartbeat is reported and the next one still runs", async () => {
    const r = rig();
    const failures = { ack: 0, nack: 0, extend: 1, claim: 0 };
    const source = flakySource(r.source, failures);
    await r.append("acme/alice", 1);
    r.sink.faults.push({ kind: "slow", ms: 13_000 });
    const forwarder = r.forwarder({ source, leaseMs: 10_000, heartbeatMs: 4_000 });
    const phases: string[] = [];
    forwarder.addEventListener("error", (event) => phases.push(event.detail.phase));
    const running = forwarder.runOnce();
    await r.scheduler.advance(0); // let the batch reach the sink before time moves
    await r.scheduler.advance(13_000);
    expect(await running).toMatchObject({ forwarded: 1 });
    expect(phases).toEqual(["extend"]);
    await audit(r);
  });

  it("a source that fails to acknowledge is reported; the lapsed lease redelivers and the sink answers already_present", async () => {
    const r = rig();
    const failures = { ack: 1, nack: 0, extend: 0, claim: 0 };
    await r.append("acme/alice", 1);
    const forwarder = r.forwarder({ source: flakySource(r.source, failures) });
    expect(await forwarder.runOnce()).toMatchObject({ claimed: 1, forwarded: 0, unsettled: 1 });
    expect(forwarder.progress.lastError).toMatchObject({ phase: "ack", code: "backend" });
    await r.scheduler.advance(10_000); // the lease lapses
    expect(await forwarder.runOnce()).toMatchObject({ claimed: 1, forwarded: 1, alreadyPresent: 1 });
    await audit(r);
  });

  it("a claim that fails is reported and counts as a failure", async () => {
    const r = rig();
    await r.append("acme/alice", 1);
    const forwarder = r.forwarder({ source: flakySource(r.source, { ack: 0, nack: 0, extend: 0, claim: 1 }) });
    expect(await forwarder.runOnce()).toMatchObject({ claimed: 0, failed: true });
    expect(forwarder.progress.lastError).toMatchObject({ phase: "claim" });
    await forwarder.drain();
    await audit(r);
  });
});

describe("forwarder: the loop", () => {
  it("start forwards, goes idle, polls for new events, and stop resolves once the batch in flight settled", async () => {
    const r = rig();
    await r.append("acme/alice", 3);
    const forwarder = r.forwarder({ pollIntervalMs: 5_000 });
    const states: ForwarderState[] = [];
    forwarder.addEventListener("state", (event) => states.push(event.detail.state));
    forwarder.start();
    await r.scheduler.advance(0);
    expect(r.sink.stored).toHaveLength(3);
    expect(forwarder.progress).toMatchObject({ state: "idle", forwarded: 3, pending: 0 });

    await r.append("acme/bob", 1);
    await r.scheduler.advance(4_999);
    expect(r.sink.stored).toHaveLength(3);
    await r.scheduler.advance(1);
    expect(r.sink.stored).toHaveLength(4);

    // A slow batch is in flight when stop is called: stop waits for it.
    await r.append("acme/carol", 1);
    r.sink.faults.push({ kind: "slow", ms: 2_000 });
    await r.scheduler.advance(5_000);
    expect(forwarder.progress.state).toBe("forwarding");
    let stopped = false;
    const stopping = forwarder.stop().then(() => {
      stopped = true;
    });
    await r.scheduler.advance(1_000);
    expect(stopped).toBe(false);
    await r.scheduler.advance(1_000);
    await stopping;
    expect(forwarder.progress.state).toBe("stopped");
    expect(r.sink.stored).toHaveLength(5);
    expect(r.scheduler.pending()).toBe(0);
    expect(states[0]).toBe("idle");
    expect(states).toContain("forwarding");
    expect(states.at(-1)).toBe("stopped");
    await audit(r);
  });

  it("after a failure the loop backs off exponentially with a cap, then recovers and resets", async () => {
    const r = rig();
    await r.append("acme/alice", 1);
    const error = new BackendError("down", { retryable: true });
    for (let i = 0; i < 3; i++) r.sink.faults.push({ kind: "throw", error });
    const forwarder = r.forwarder({ backoff: { initialMs: 1_000, maxMs: 3_000, jitter: 0, random: () => 0 }, pollIntervalMs: 60_000 });
    const retries: (number | null)[] = [];
    forwarder.addEventListener("progress", (event) => {
      if (event.detail.state === "backing_off") retries.push(event.detail.nextRetryAt);
    });
    forwarder.start();
    await r.scheduler.advance(0);
    expect(forwarder.progress).toMatchObject({ state: "backing_off", consecutiveFailures: 1, nextRetryAt: START + 1_000 });
    await r.scheduler.advance(1_000);
    expect(forwarder.progress).toMatchObject({ state: "backing_off", consecutiveFailures: 2, nextRetryAt: START + 1_000 + 2_000 });
    await r.scheduler.advance(2_000);
    expect(forwarder.progress).toMatchObject({ consecutiveFailures: 3, nextRetryAt: START + 3_000 + 3_000 }); // capped
    await r.scheduler.advance(3_000);
    expect(forwarder.progress).toMatchObject({ state: "idle", consecutiveFailures: 0, nextRetryAt: null, forwarded: 1 });
    expect(retries).toEqual([START + 1_000, START + 3_000, START + 6_000]);
    await forwarder.stop();
    await audit(r);
  });

  it("a listener that throws does not stop the loop; the exception goes to onListenerError", async () => {
    const r = rig();
    await r.append("acme/alice", 2);
    const listenerErrors: unknown[] = [];
    const forwarder = r.forwarder({ onListenerError: (error) => listenerErrors.push(error) });
    forwarder.addEventListener("progress", () => {
      throw new Error("listener bug");
    });
    // eslint-disable-next-line @typescript-eslint/no-misused-promises -- on purpose: an async listener's rejection must be reported too
    forwarder.addEventListener("state", { handleEvent: () => Promise.reject(new Error("async listener bug")) });
    const seen: ForwarderProgress[] = [];
    forwarder.addEventListener("progress", (event) => seen.push(event.detail));
    forwarder.start();
    await r.scheduler.advance(0);
    await forwarder.stop();
    expect(r.sink.stored).toHaveLength(2);
    expect(seen.length).toBeGreaterThan(0);
    expect(listenerErrors.some((error) => error instanceof Error && error.message === "listener bug")).toBe(true);
    expect(listenerErrors.some((error) => error instanceof Error && error.message === "async listener bug")).toBe(true);
    await audit(r);
  });

  it("progress events carry totals, pending and the last error; batch events carry each batch; once and removeEventListener work", async () => {
    const r = rig();
    await r.append("acme/alice", 2);
    await r.append("acme/bob", 1);
    r.sink.faults.push({ kind: "throw", error: new BackendError("down", { retryable: true }) });
    const forwarder = r.forwarder({ batchSize: 1 });
    const progress: ForwarderProgress[] = [];
    const batches: BatchReport[] = [];
    let onceCalls = 0;
    const onProgress = (event: { detail: ForwarderProgress }) => progress.push(event.detail);
    forwarder.addEventListener("progress", onProgress);
    forwarder.addEventListener("progress", onProgress); // registered once only
    forwarder.addEventListener("batch", (event) => {
      expect(event).toBeInstanceOf(CustomEvent); // the platform's CustomEvent where there is one
      batches.push(event.detail);
    });
    forwarder.addEventListener("error", () => (onceCalls += 1), { once: true });
    expect((await forwarder.runOnce()).failed).toBe(true);
    expect(progress.at(-1)).toMatchObject({ forwarded: 0, pending: 3, lastError: { code: "backend" } });
    await r.scheduler.advance(1_000);
    await forwarder.drain();
    expect(progress.at(-1)).toMatchObject({ forwarded: 3, pending: 0, batches: 4 });
    expect(batches.map((batch) => batch.forwarded)).toEqual([0, 1, 1, 1]);
    forwarder.removeEventListener("progress", onProgress);
    const count = progress.length;
    await forwarder.runOnce();
    expect(progress).toHaveLength(count);
    expect(onceCalls).toBe(1);
  });

  it("a policy object can stand in for backoff options, and its delay is what nack gets", async () => {
    const r = rig();
    const [event] = await r.append("acme/alice", 1);
    r.sink.faults.push({ kind: "throw", error: new TypeError("offline") });
    const forwarder = r.forwarder({ backoff: { delayMs: (failures) => failures * 7_000 } });
    await forwarder.runOnce();
    await r.scheduler.advance(6_999);
    expect((await forwarder.runOnce()).claimed).toBe(0);
    await r.scheduler.advance(1);
    expect((await forwarder.runOnce()).forwarded).toBe(1);
    expect((await attemptsOf(r, event!.id))[0]?.outcome?.kind).toBe("nacked");
  });
});

describe("forwarder: the loop waits out a failing sink without spending attempts", () => {
  /**
   * A sink that answers 503 (retryable) while `down`, then stores. The outage begins after the loop's first
   * claim: the forwarder's sink check (a call of no events) is answered until a send of events has failed.
   */
  function outage(r: Rig, error: unknown = new BackendError("edge unavailable (503)", { retryable: true })) {
    const state = { down: true, calls: 0 };
    const sink: ForwarderSink = {
      appendBatch: async (events) => {
        if (events.length === 0 && state.calls === 0) return [];
        if (events.length > 0) state.calls += 1;
        if (state.down) throw error;
        return r.sink.appendBatch(events);
      },
    };
    return { state, sink };
  }

  it("an outage longer than the backoff schedule quarantines nothing: the loop holds the batch, extends its leases, and sends it again", async () => {
    const r = rig(); // maxDeliveryAttempts 4
    const first = await r.append("acme/alice", 2);
    await r.append("acme/bob", 1);
    const { state, sink } = outage(r);
    const forwarder = r.forwarder({ sink, leaseMs: 10_000, pollIntervalMs: 60_000 });
    const batches: BatchReport[] = [];
    forwarder.addEventListener("batch", (event) => batches.push(event.detail));
    forwarder.start();
    await r.scheduler.advance(0);
    // Ten minutes down: far more sends than the attempt budget, each after the backoff (1, 2, 4, then 8 s).
    for (let i = 0; i < 60; i++) await r.scheduler.advance(10_000);
    expect(state.calls).toBeGreaterThan(SOURCE_CAPACITY.maxDeliveryAttempts * 4);
    expect(forwarder.progress).toMatchObject({ state: "backing_off", forwarded: 0, retried: 0, lastError: { phase: "append", code: "backend", retryable: true } });
    expect(forwarder.progress.consecutiveFailures).toBe(state.calls);
    // Held, not nacked: still in flight under the one claim, its lease kept alive.
    expect(await r.source.stats(consumer)).toMatchObject({ pending: 1, inFlight: 2, quarantined: 0 });
    const [held] = await attemptsOf(r, first[0]!.id);
    expect(held).toMatchObject({ attempt: 1, outcome: null });
    expect(held!.leaseExpiresAt).toBeGreaterThan(r.time.now);

    state.down = false;
    await r.scheduler.advance(8_000);
    await r.scheduler.advance(0);
    expect(forwarder.progress).toMatchObject({ forwarded: 3, retried: 0, consecutiveFailures: 0, quarantinedInSource: 0 });
    await forwarder.stop();
    // Each event was claimed once (alice's second after her first): one attempt each, acknowledged.
    for (const event of r.appended) expect((await attemptsOf(r, event.id)).map((a) => [a.attempt, a.outcome?.kind])).toEqual([[1, "acked"]]);
    expect(batches[0]).toMatchObject({ claimed: 2, forwarded: 2, retried: 0, failed: false });
    expect(batches[0]!.resent).toBe(state.calls - 2); // every send but the held batch's first and the one of alice's second event
    expect(await audit(r)).toEqual(new Map());
  });

  it("a sink refusing the credentials (401 / 403) holds the batch too: a rotated token costs no attempt", async () => {
    for (const [status, code] of [
      [401, "unauthorized"],
      [403, "forbidden"],
    ] as const) {
      const r = rig();
      await r.append("acme/alice", 1);
      const refusal = new BackendError(`HTTP ${status} ${code}: no`, { retryable: false, cause: new HttpError(status, code, "no") });
      const { state, sink } = outage(r, refusal);
      const forwarder = r.forwarder({ sink });
      forwarder.start();
      for (let i = 0; i < 30; i++) await r.scheduler.advance(10_000);
      expect(forwarder.progress).toMatchObject({ state: "backing_off", retried: 0, lastError: { code: "backend", retryable: false } });
      expect(await r.source.stats(consumer)).toMatchObject({ inFlight: 1, quarantined: 0 });
      state.down = false;
      await r.scheduler.advance(8_000);
      await forwarder.stop();
      expect(forwarder.progress.forwarded).toBe(1);
      expect((await attemptsOf(r, r.appended[0]!.id)).map((a) => a.outcome?.kind)).toEqual(["acked"]);
      await audit(r);
    }
  });

  it("a sink refusing one namespace (403 forbidden_namespace: the token's append scope misses it) holds its events, uncharged, until fixed: every event arrives, none quarantined", async () => {
    const r = rig();
    const refused = [...(await r.append("other/x", 2)), ...(await r.append("other/y", 1))];
    const allowed = await r.append("acme/alice", 2);
    const state = { fixed: false, refusals: 0 };
    const forbidden = () =>
      new BackendError("HTTP 403 forbidden_namespace: this token may not append to namespace `other`", {
        retryable: false,
        cause: new HttpError(403, "forbidden_namespace", "this token may not append to namespace `other`"),
      });
    // The worker's rule: a call holding an event of a namespace the token may not append is refused whole.
    const sink: ForwarderSink = {
      appendBatch: async (events) => {
        if (!state.fixed && events.some((event) => event.orderingKey.namespace === "other")) {
          state.refusals += 1;
          throw forbidden();
        }
        return r.sink.appendBatch(events);
      },
    };
    const forwarder = r.forwarder({ sink, pollIntervalMs: 60_000 });
    const errors: ForwarderFailure[] = [];
    forwarder.addEventListener("error", (event) => errors.push(event.detail));
    forwarder.start();
    for (let i = 0; i < 30; i++) await r.scheduler.advance(10_000);
    // The namespace the token covers goes; the refused one waits, held (in flight, its attempt 1), and is reported.
    expect(r.sink.stored.map((event) => event.id)).toEqual(allowed.map((event) => event.id));
    expect(state.refusals).toBeGreaterThan(SOURCE_CAPACITY.maxDeliveryAttempts);
    expect(forwarder.progress).toMatchObject({ state: "backing_off", quarantined: 0, retried: 0, lastError: { phase: "append", retryable: false } });
    expect(forwarder.progress.lastError?.message).toContain("forbidden_namespace");
    expect(errors.filter((error) => error.message.includes("forbidden_namespace")).length).toBeGreaterThan(SOURCE_CAPACITY.maxDeliveryAttempts);
    expect(await r.source.stats(consumer)).toMatchObject({ pending: 1, inFlight: 2, quarantined: 0 });

    state.fixed = true; // the right token
    for (let i = 0; i < 5; i++) await r.scheduler.advance(10_000);
    await forwarder.stop();
    expect(forwarder.progress).toMatchObject({ forwarded: 5, quarantined: 0, retried: 0 });
    for (const event of [...refused, ...allowed]) expect((await attemptsOf(r, event.id)).map((a) => [a.attempt, a.outcome?.kind])).toEqual([[1, "acked"]]);
    expect(await audit(r)).toEqual(new Map());
  });

  it("a sink breaking the appendBatch contract (the wrong number of results) is the sink's fault too: held, not charged", async () => {
    const r = rig();
    await r.append("acme/alice", 1);
    for (let i = 0; i < 100; i++) r.sink.faults.push({ kind: "wrong_count" });
    const forwarder = r.forwarder({ pollIntervalMs: 60_000 });
    forwarder.start();
    // The sink answers its calls of no events all along: that shows nothing about the events, so none is charged.
    for (let i = 0; i < 30; i++) await r.scheduler.advance(10_000);
    expect(r.sink.sent.length).toBeGreaterThan(SOURCE_CAPACITY.maxDeliveryAttempts);
    expect(r.sink.checks).toBeGreaterThan(0);
    expect(forwarder.progress).toMatchObject({ retried: 0, lastError: { phase: "append", code: "sink_protocol" } });
    expect(await r.source.stats(consumer)).toMatchObject({ inFlight: 1, quarantined: 0 });
    r.sink.faults.length = 0;
    await r.scheduler.advance(8_000);
    await forwarder.stop();
    expect((await attemptsOf(r, r.appended[0]!.id)).map((a) => [a.attempt, a.outcome?.kind])).toEqual([[1, "acked"]]);
    await audit(r);
  });

  it("a full sink (per-event at_capacity) holds that event in the loop while the others go on", async () => {
    const r = rig();
    const [a1, a2] = await r.append("acme/alice", 2);
    const [b1] = await r.append("acme/bob", 1);
    r.sink.full.add(a1!.id);
    const forwarder = r.forwarder({ pollIntervalMs: 60_000 });
    forwarder.start();
    await r.scheduler.advance(0);
    expect(r.sink.stored.map((event) => event.id)).toEqual([b1!.id]);
    for (let i = 0; i < 30; i++) await r.scheduler.advance(10_000);
    expect(r.sink.stored.map((event) => event.id)).toEqual([b1!.id]); // alice's second waits behind her first
    r.sink.full.clear();
    await r.scheduler.advance(8_000);
    await r.scheduler.advance(0);
    await forwarder.stop();
    expect(r.sink.stored.map((event) => event.id)).toEqual([b1!.id, a1!.id, a2!.id]);
    expect((await attemptsOf(r, a1!.id)).map((a) => [a.attempt, a.outcome?.kind])).toEqual([[1, "acked"]]);
    await audit(r);
  });

  it("stop() while the loop holds a batch gives it back at once (nacked, claimable now) and resolves", async () => {
    const r = rig();
    const [event] = await r.append("acme/alice", 1);
    const { state, sink } = outage(r);
    const forwarder = r.forwarder({ sink });
    forwarder.start();
    await r.scheduler.advance(0);
    await r.scheduler.advance(1_000);
    expect(forwarder.progress.state).toBe("backing_off");
    await forwarder.stop(); // no time needs to pass: the wait is cut short
    expect(forwarder.progress).toMatchObject({ state: "stopped", retried: 1 });
    expect(r.scheduler.pending()).toBe(0);
    expect((await attemptsOf(r, event!.id))[0]?.outcome).toMatchObject({ kind: "nacked", error: expect.stringContaining("stopped") as string });
    expect(await r.source.stats(consumer)).toMatchObject({ pending: 1, inFlight: 0 });
    state.down = false;
    expect(await r.forwarder({ sink }).runOnce()).toMatchObject({ claimed: 1, forwarded: 1 }); // claimable at once
    await audit(r);
  });

  it("runOnce does not wait out an outage: it nacks with backoff (the loop is what holds)", async () => {
    const r = rig();
    await r.append("acme/alice", 1);
    const { sink } = outage(r);
    expect(await r.forwarder({ sink }).runOnce()).toMatchObject({ claimed: 1, retried: 1, resent: 0, failed: true });
  });

  it("a batch too large for the sink (413) is split until it passes; an event too large on its own is quarantined as rejected", async () => {
    const r = rig();
    const events = [...(await r.append("a/1")), ...(await r.append("a/2")), ...(await r.append("a/3")), ...(await r.append("a/4"))];
    const big = events[2]!;
    const tooLarge = () => new BackendError("HTTP 413 payload_too_large: the body is over 1048576 bytes", { retryable: false, cause: new HttpError(413, "payload_too_large", "too large") });
    const sizes: number[] = [];
    const sink: ForwarderSink = {
      appendBatch: async (batch) => {
        sizes.push(batch.length);
        if (batch.length > 2 || batch.some((event) => event.id === big.id)) throw tooLarge();
        return r.sink.appendBatch(batch);
      },
    };
    const forwarder = r.forwarder({ sink, batchSize: 4 });
    const report = await forwarder.runOnce();
    expect(sizes).toEqual([4, 2, 2, 1, 1]);
    expect(report).toMatchObject({ claimed: 4, forwarded: 3, quarantined: 1, retried: 0, failed: false });
    expect(await audit(r)).toEqual(new Map([[big.id, "rejected"]]));
    expect(forwarder.progress.lastError).toMatchObject({ phase: "append", requestIds: [big.id] });
  });

  it("stop() without awaiting it, then start(): the loop runs again", async () => {
    const r = rig();
    await r.append("acme/alice", 1);
    r.sink.faults.push({ kind: "slow", ms: 2_000 });
    const forwarder = r.forwarder({ pollIntervalMs: 5_000 });
    forwarder.start();
    await r.scheduler.advance(0); // a batch is at the (slow) sink
    const stopping = forwarder.stop();
    forwarder.start();
    await r.scheduler.advance(2_000);
    await stopping;
    expect(forwarder.progress.state).not.toBe("stopped");
    await r.append("acme/bob", 2);
    await r.scheduler.advance(5_000);
    await r.scheduler.advance(5_000);
    expect(forwarder.progress).toMatchObject({ forwarded: 3, state: "idle" });
    await forwarder.stop();
    expect(forwarder.progress.state).toBe("stopped");
    await audit(r);
  });
});

describe("exponentialBackoff", () => {
  it("grows by the multiplier, stops at the cap, and jitters down by at most the jitter fraction", () => {
    const plain = exponentialBackoff({ initialMs: 100, maxMs: 1_000, multiplier: 3, jitter: 0 });
    expect([1, 2, 3, 4, 5, 1_000_000].map((n) => plain.delayMs(n))).toEqual([100, 300, 900, 1_000, 1_000, 1_000]);
    const low = exponentialBackoff({ initialMs: 1_000, jitter: 0.5, random: () => 0.999999 });
    const high = exponentialBackoff({ initialMs: 1_000, jitter: 0.5, random: () => 0 });
    expect(low.delayMs(1)).toBe(500);
    expect(high.delayMs(1)).toBe(1_000);
    expect(exponentialBackoff({ jitter: 1, random: () => 0.5 }).delayMs(1)).toBe(500);
    expect(exponentialBackoff().delayMs(0)).toBeGreaterThanOrEqual(500); // counts below 1 read as 1
  });
});

// ------------------------------------------------------------------ property

const faultArbitrary: fc.Arbitrary<Fault> = fc.oneof(
  { weight: 6, arbitrary: fc.constant<Fault>({ kind: "ok" }) },
  { weight: 1, arbitrary: fc.constant<Fault>({ kind: "throw", error: new BackendError("down", { retryable: true }) }) },
  { weight: 1, arbitrary: fc.constant<Fault>({ kind: "throw", error: new TypeError("Failed to fetch") }) },
  { weight: 1, arbitrary: fc.constant<Fault>({ kind: "throw", error: new InvalidArgumentError("events", "refused") }) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 25_000 }).map<Fault>((ms) => ({ kind: "slow", ms })) },
  { weight: 1, arbitrary: fc.constant<Fault>({ kind: "hang" }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 5 }).map<Fault>((stored) => ({ kind: "partial", stored, error: new TypeError("reset") })) },
  { weight: 1, arbitrary: fc.constant<Fault>({ kind: "wrong_count" }) },
);

const scenarioArbitrary = fc.record({
  events: fc.array(fc.constantFrom("a/1", "a/2", "b/1", "c/9"), { minLength: 1, maxLength: 24 }),
  faults: fc.array(faultArbitrary, { maxLength: 16 }),
  conflicts: fc.array(fc.nat(), { maxLength: 3 }),
  invalid: fc.array(fc.nat(), { maxLength: 3 }),
  full: fc.array(fc.nat(), { maxLength: 3 }),
  /** Source calls that fail (retryable backend errors), counted down as they happen. */
  sourceFailures: fc.record({ ack: fc.nat({ max: 3 }), nack: fc.nat({ max: 3 }), extend: fc.nat({ max: 3 }), claim: fc.nat({ max: 3 }) }),
  batchSize: fc.integer({ min: 1, max: 6 }),
  /** Events appended while the loop already runs. */
  lateEvents: fc.array(fc.constantFrom("a/1", "b/1", "d/4"), { maxLength: 6 }),
});

describe("forwarder property: random fault schedules lose nothing and keep per-key order", () => {
  const soak = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.["SOAK"] === "1";
  const numRuns = soak ? 1000 : 25;

  it(`every event ends acknowledged in the sink exactly once or quarantined with a reason (${numRuns} runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArbitrary, async (scenario) => {
        // Room for every redelivery the source's own failures can cause (a failed ack, nack or extension lets a lease lapse: 3 + 3 + 3).
        const r = rig({ ...SOURCE_CAPACITY, maxDeliveryAttempts: 11 });
        for (const key of scenario.events) await r.append(key);
        const initial = [...r.appended];
        const pick = (indexes: number[]) => new Set(indexes.map((i) => initial[i % initial.length]!.id));
        for (const id of pick(scenario.conflicts)) {
          const original = r.appended.find((event) => event.id === id)!;
          await r.target.append(createUsageEvent({ record: { ...original.record, data: { clash: true } }, observedAt: START }));
        }
        for (const id of pick(scenario.invalid)) r.sink.invalid.add(id);
        for (const id of pick(scenario.full)) r.sink.full.add(id);
        r.sink.faults.push(...scenario.faults);
        const failures = { ...scenario.sourceFailures };
        const forwarder = r.forwarder({
          source: flakySource(r.source, failures),
          batchSize: scenario.batchSize,
          sinkTimeoutMs: 20_000,
          pollIntervalMs: 2_000,
          backoff: { initialMs: 500, maxMs: 4_000, jitter: 0.5, random: () => 0.37 },
        });
        forwarder.start();
        await r.scheduler.advance(0);
        for (const key of scenario.lateEvents) {
          await r.append(key);
          await r.scheduler.advance(700);
        }
        // The sink's per-event capacity problem clears up after a while.
        await r.scheduler.advance(5_000);
        r.sink.full.clear();
        for (let i = 0; i < 200; i++) {
          const stats = await r.source.stats(consumer);
          if (stats.pending + stats.inFlight === 0) break;
          await r.scheduler.advance(5_000);
        }
        const stopping = forwarder.stop();
        await r.scheduler.advance(30_000); // a batch still at the sink times out
        await stopping;
        const quarantined = await audit(r);
        const progress = forwarder.progress;
        expect(progress.forwarded + quarantined.size, "each event acknowledged once or quarantined").toBe(r.appended.length);
        // A refused event is quarantined: as `rejected`, or as `attempts_exhausted` when whole-batch failures used its budget first.
        const storedIds = new Set(r.sink.stored.map((event) => event.id));
        const refused = new Set([...pick(scenario.conflicts), ...pick(scenario.invalid)]);
        for (const id of refused) {
          expect(quarantined.has(id)).toBe(true);
          expect(storedIds.has(id)).toBe(false);
        }
        // Failures that are not the events' fault (an unavailable, slow, hanging, half-dead, full or contract-breaking
        // sink) cost no attempts: with no refusal of a whole batch's input in the schedule, only the refused events are quarantined.
        const permanent = scenario.faults.some((fault) => fault.kind === "throw" && fault.error instanceof InvalidArgumentError);
        if (!permanent) expect(quarantined).toEqual(new Map([...refused].map((id) => [id, "rejected"])));
        expect(r.scheduler.pending()).toBe(0);
      }),
      { numRuns },
    );
  }, soak ? 30 * 60_000 : 240_000); // ~3 s on an idle machine; generous for a loaded CI box
});
