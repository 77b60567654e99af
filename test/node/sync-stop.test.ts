/**
 * The forwarder stops promptly and hands over its lock, on virtual time: a
 * `stop()`, a lost lock or coming back online that lands while the held
 * batch is being settled (its `ackBatch` in flight, before any wait exists)
 * still cuts that batch's backoff short, and no virtual time needs to pass.
 * Also: a sink timeout is reported once, not again when the abandoned call
 * rejects because of the forwarder's own abort.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import {
  AtCapacityError,
  BackendError,
  BILLING_GRADE,
  createJournal,
  createUsageEvent,
  newRequestId,
  parseConsumerId,
  type BatchAppendResult,
  type Capacity,
  type DeliveryId,
  type UsageEvent,
  type UsageJournal,
} from "../../src/index.js";
import { HttpJournal, type FetchLike } from "../../src/http/index.js";
import {
  createForwarder,
  localLockManager,
  type ForwarderFailure,
  type ForwarderOptions,
  type ForwarderSink,
  type ForwarderState,
  type LockManagerLike,
  type OnlineSource,
} from "../../src/sync/index.js";
import { virtualClock, virtualScheduler, type VirtualClock, type VirtualScheduler } from "../../src/testing/index.js";

const START = 1_700_000_000_000;
const CAPACITY: Capacity = { maxEvents: 1_000, maxDeliveryAttempts: 4, retainAcknowledgedMs: 24 * 60 * 60 * 1000, policy: "refuse" };
const consumer = parseConsumerId("edge");
/** A backoff far longer than anything these tests let pass: a wait that is not cut short shows. */
const LONG_BACKOFF = { initialMs: 30_000, maxMs: 60_000, jitter: 0 } as const;

interface Rig {
  readonly time: VirtualClock;
  readonly scheduler: VirtualScheduler;
  /** The source, with `ackBatch` held back while `gate` is closed. */
  readonly source: UsageJournal;
  readonly target: UsageJournal;
  /** Request ids the sink refuses per event as `at_capacity` (retryable: the loop holds them). */
  readonly full: Set<string>;
  readonly sink: ForwarderSink;
  readonly gate: { closed: boolean; acking: boolean; open(): void };
  append(key: string): Promise<UsageEvent>;
  forwarder(options?: Partial<ForwarderOptions>): ReturnType<typeof createForwarder>;
}

function rig(): Rig {
  const time = virtualClock(START);
  const scheduler = virtualScheduler(time);
  const inner = createJournal(memoryEngine(), { name: "local", capacity: CAPACITY, clock: time.clock });
  const target = createJournal(memoryEngine(), { name: "edge", capacity: CAPACITY, clock: time.clock });
  const full = new Set<string>();
  let release: () => void = () => undefined;
  const gate = {
    closed: false,
    acking: false,
    open() {
      gate.closed = false;
      release();
    },
  };
  // Every member of the journal as is, but `ackBatch` waits while the gate is closed.
  const source = new Proxy(inner, {
    get(journal, property, receiver) {
      if (property === "ackBatch") {
        return async (ids: readonly DeliveryId[]) => {
          gate.acking = true;
          if (gate.closed) await new Promise<void>((resolve) => (release = resolve));
          gate.acking = false;
          return journal.ackBatch(ids);
        };
      }
      const value: unknown = Reflect.get(journal, property, receiver);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(journal) : value;
    },
  });
  const sink: ForwarderSink = {
    appendBatch: async (events) => {
      const results: BatchAppendResult[] = [];
      for (const event of events) results.push(full.has(event.id) ? { status: "rejected", error: new AtCapacityError(1, CAPACITY) } : await target.append(event));
      return results;
    },
  };
  let serial = 0;
  return {
    time,
    scheduler,
    source,
    target,
    full,
    sink,
    gate,
    async append(key) {
      const [namespace, subject] = key.split("/") as [string, string];
      const event = createUsageEvent({ record: { requestId: newRequestId(time.now), namespace, subject, data: { serial: serial++ } }, observedAt: time.now });
      expect((await inner.append(event)).status).toBe("accepted");
      return event;
    },
    forwarder(options = {}) {
      return createForwarder({ source, consumer, sink, leaseMs: 10_000, backoff: LONG_BACKOFF, clock: time.clock, scheduler, ...options });
    },
  };
}

/** A hand-driven online source. */
function manualOnline(): OnlineSource & { set(online: boolean): void } {
  const listeners = new Set<(online: boolean) => void>();
  let online = true;
  return {
    isOnline: () => online,
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    set(next) {
      online = next;
      for (const listener of [...listeners]) listener(next);
    },
  };
}

/** A lock manager whose latest request can be stolen (its request rejects while the callback still runs), as Web Locks `steal: true` elsewhere does. */
function stealableLocks(): { stealable: LockManagerLike; steal: () => void } {
  const locks = localLockManager();
  let stealLatest: () => void = () => undefined;
  const stealable: LockManagerLike = {
    request: (name, options, callback) =>
      new Promise((resolve, reject) => {
        stealLatest = () => reject(new Error("AbortError: the lock was stolen"));
        locks.request(name, options, callback).then(resolve, reject);
      }),
  };
  return { stealable, steal: () => stealLatest() };
}

/** A turn of the real event loop: lets lock-manager promise chains settle. */
const turn = () => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * Two events of two keys: the sink refuses alice's as `at_capacity` (the loop
 * holds it) and takes bob's, whose `ackBatch` is held at the gate. Returns
 * once the forwarder is in that settle.
 */
async function settling(r: Rig, forwarder: ReturnType<typeof createForwarder>): Promise<{ alice: UsageEvent; bob: UsageEvent }> {
  const alice = await r.append("acme/alice");
  const bob = await r.append("acme/bob");
  r.full.add(alice.id);
  r.gate.closed = true;
  forwarder.start();
  await r.scheduler.advance(0);
  await turn();
  await r.scheduler.advance(0);
  expect(r.gate.acking, "the batch is settling").toBe(true);
  expect(forwarder.progress.state).toBe("forwarding");
  return { alice, bob };
}

describe("forwarder: a stop, lost lock or online event during a settle cuts the held batch's backoff short", () => {
  it("stop() while the held batch settles resolves without the backoff passing, gives the batch back and frees the lock", async () => {
    const r = rig();
    const locks = localLockManager();
    const forwarder = r.forwarder({ lock: { name: "fw", manager: locks } });
    const { alice, bob } = await settling(r, forwarder);
    const states: ForwarderState[] = [];
    forwarder.addEventListener("state", (event) => states.push(event.detail.state));
    let stopped = false;
    const stopping = forwarder.stop().then(() => (stopped = true));
    r.gate.open();
    await r.scheduler.advance(0);
    expect(stopped, "stop() resolved with no virtual time passing").toBe(true);
    expect(r.time.now).toBe(START);
    expect(states).toEqual(["stopped"]); // never backing_off after the stop
    expect(locks.held("fw")).toBe(false); // a standby tab can take over now
    expect(r.scheduler.pending()).toBe(0);
    // Bob acknowledged; alice given back at once, claimable now, one attempt spent.
    expect((await r.source.attempts(consumer, bob.id)).map((a) => a.outcome?.kind)).toEqual(["acked"]);
    expect((await r.source.attempts(consumer, alice.id)).map((a) => a.outcome)).toEqual([expect.objectContaining({ kind: "nacked", error: expect.stringContaining("stopped") as string })]);
    expect(await r.source.stats(consumer)).toMatchObject({ pending: 1, inFlight: 0 });
    await stopping;
  });

  it("stop() while the first send is in flight gives back what the sink could not take at once, not after a backoff", async () => {
    const r = rig();
    const alice = await r.append("acme/alice");
    r.full.add(alice.id); // the sink is full for alice: not her fault, so a running loop would hold her
    let answer: () => void = () => undefined;
    const sending = new Promise<void>((resolve) => (answer = resolve));
    let sent = false;
    const forwarder = r.forwarder({
      sink: {
        appendBatch: async (events) => {
          sent = true;
          await sending;
          return r.sink.appendBatch(events);
        },
      },
    });
    forwarder.start();
    await r.scheduler.advance(0);
    expect(sent).toBe(true);
    const stopping = forwarder.stop();
    answer();
    await r.scheduler.advance(0);
    await stopping;
    expect(r.time.now).toBe(START);
    expect((await r.source.attempts(consumer, alice.id)).map((a) => a.outcome?.kind)).toEqual(["nacked"]);
    // Claimable at once by whoever forwards next (a standby tab), not after the 30 s backoff.
    expect((await r.source.claim(consumer, { maxEvents: 10, leaseMs: 1000, now: START })).map((d) => d.event.id)).toEqual([alice.id]);
  });

  it("stop() from a listener as the held batch starts backing off resolves at once (the interruption is not lost)", async () => {
    const r = rig();
    const alice = await r.append("acme/alice");
    r.full.add(alice.id);
    const forwarder = r.forwarder();
    const stop: { promise: Promise<void> | null } = { promise: null };
    forwarder.addEventListener("state", (event) => {
      if (event.detail.state === "backing_off" && stop.promise === null) stop.promise = forwarder.stop(); // before the wait exists
    });
    forwarder.start();
    await r.scheduler.advance(0);
    expect(stop.promise).not.toBeNull();
    expect(r.time.now).toBe(START);
    expect(forwarder.progress.state).toBe("stopped");
    expect(r.scheduler.pending()).toBe(0);
    expect(await r.source.stats(consumer)).toMatchObject({ pending: 1, inFlight: 0 });
    await stop.promise;
  });

  it("a lock lost while the held batch settles gives the batch back at once, without backing off", async () => {
    const r = rig();
    const { stealable, steal } = stealableLocks();
    const forwarder = r.forwarder({ lock: { name: "fw", manager: stealable } });
    const { alice } = await settling(r, forwarder);
    const states: ForwarderState[] = [];
    forwarder.addEventListener("state", (event) => states.push(event.detail.state));
    steal();
    await turn();
    r.gate.open();
    await r.scheduler.advance(0);
    expect(r.time.now).toBe(START);
    expect(states).not.toContain("backing_off");
    expect(forwarder.progress.state).toBe("standby");
    // Alice is claimable now by whoever holds the lock.
    expect((await r.source.attempts(consumer, alice.id)).map((a) => a.outcome?.kind)).toEqual(["nacked"]);
    expect(await r.source.stats(consumer)).toMatchObject({ pending: 1, inFlight: 0 });
    await forwarder.stop();
  });

  it("coming back online while the held batch settles sends it again at once", async () => {
    const r = rig();
    const online = manualOnline();
    const forwarder = r.forwarder({ online, pollIntervalMs: 60_000 });
    const { alice, bob } = await settling(r, forwarder);
    online.set(false);
    online.set(true);
    r.full.clear();
    r.gate.open();
    await r.scheduler.advance(0);
    expect(r.time.now).toBe(START);
    expect(forwarder.progress).toMatchObject({ forwarded: 2, retried: 0 });
    for (const event of [alice, bob]) expect((await r.source.attempts(consumer, event.id)).map((a) => [a.attempt, a.outcome?.kind])).toEqual([[1, "acked"]]);
    await forwarder.stop();
  });
});

describe("forwarder: a sink timeout is reported once", () => {
  it("an HttpJournal sink's abandoned request ('abandoned by the caller') is not reported again after the timeout", async () => {
    const r = rig();
    await r.append("acme/alice");
    // A request that never answers, and rejects with the signal's reason when aborted, as fetch does.
    const fetch: FetchLike = (_url, init) =>
      new Promise((_resolve, reject) => init.signal?.addEventListener("abort", () => reject(init.signal?.reason as Error), { once: true }));
    const sink = new HttpJournal({ baseUrl: "http://edge.test", journal: "usage", token: "tok-0123456789", fetch, capacity: BILLING_GRADE, mode: "billing_grade", timeoutMs: 0, retry: { attempts: 1 } });
    const forwarder = r.forwarder({ sink, sinkTimeoutMs: 5_000 });
    const errors: ForwarderFailure[] = [];
    forwarder.addEventListener("error", (event) => errors.push(event.detail));
    const running = forwarder.runOnce();
    await r.scheduler.advance(0);
    await r.scheduler.advance(5_000);
    expect(await running).toMatchObject({ claimed: 1, retried: 1, failed: true });
    await turn();
    expect(errors.map((error) => [error.phase, error.code])).toEqual([["append", "sink_timeout"]]);
    expect(forwarder.progress.lastError).toMatchObject({ phase: "append", code: "sink_timeout", retryable: true });
  });

  it("a sink that ignores the signal and later fails for its own reason is still reported", async () => {
    const r = rig();
    await r.append("acme/alice");
    const sink: ForwarderSink = {
      appendBatch: () => new Promise((_resolve, reject) => r.scheduler.setTimeout(() => reject(new BackendError("disk full", { retryable: true })), 10_000)),
    };
    const forwarder = r.forwarder({ sink, sinkTimeoutMs: 5_000 });
    const errors: ForwarderFailure[] = [];
    forwarder.addEventListener("error", (event) => errors.push(event.detail));
    const running = forwarder.runOnce();
    await r.scheduler.advance(0);
    await r.scheduler.advance(5_000);
    await running;
    await r.scheduler.advance(5_000);
    expect(errors.map((error) => [error.phase, error.code, error.message])).toEqual([
      ["append", "sink_timeout", expect.stringContaining("5000 ms") as string],
      ["append", "backend", expect.stringContaining("disk full") as string],
    ]);
  });
});
