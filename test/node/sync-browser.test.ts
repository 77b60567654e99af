/**
 * The forwarder's browser seams, driven from Node: online state (pause while
 * offline, wake on `online`), `browserOnline` over a fake `globalThis`, the
 * one-forwarder-per-origin lock with an in-process lock manager (standby,
 * takeover when the holder stops, takeover after the holder's tab dies
 * mid-batch), and `browserLocks` detection. The real multi-tab run in
 * Chromium is separate.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import {
  createJournal,
  createUsageEvent,
  newRequestId,
  parseConsumerId,
  type BatchAppendResult,
  type Capacity,
  type UsageEvent,
  type UsageJournal,
} from "../../src/index.js";
import {
  browserLocks,
  browserOnline,
  createForwarder,
  localLockManager,
  type ForwarderOptions,
  type ForwarderState,
  type LockManagerLike,
  type OnlineSource,
} from "../../src/sync/index.js";
import { virtualClock, virtualScheduler, type VirtualClock, type VirtualScheduler } from "../../src/testing/index.js";

const START = 1_700_000_000_000;
const CAPACITY: Capacity = { maxEvents: 1_000, maxDeliveryAttempts: 5, retainAcknowledgedMs: 24 * 60 * 60 * 1000, policy: "refuse" };
const consumer = parseConsumerId("edge");

/** A hand-driven online source, like a browser's `online` / `offline` events. */
function manualOnline(initial: boolean): OnlineSource & { set(online: boolean): void; listeners(): number } {
  let online = initial;
  const listeners = new Set<(online: boolean) => void>();
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
    listeners: () => listeners.size,
  };
}

interface Rig {
  readonly time: VirtualClock;
  readonly scheduler: VirtualScheduler;
  readonly source: UsageJournal;
  readonly target: UsageJournal;
  /** Calls the sink received. */
  readonly calls: UsageEvent[][];
  append(count: number, subject?: string): Promise<void>;
  forwarder(options?: Partial<ForwarderOptions>): ReturnType<typeof createForwarder>;
  sinkHeld(): Promise<number>;
}

/**
 * A lock manager whose latest request can be stolen, as Web Locks `steal: true`
 * elsewhere does: the holder's request rejects with an AbortError while its
 * callback still runs.
 */
function stealableLocks(): { locks: ReturnType<typeof localLockManager>; stealable: LockManagerLike; steal: () => void } {
  const locks = localLockManager();
  let stealLatest: () => void = () => undefined;
  const stealable: LockManagerLike = {
    request: (name, options, callback) =>
      new Promise((resolve, reject) => {
        stealLatest = () => reject(new Error("AbortError: the lock was stolen"));
        locks.request(name, options, callback).then(resolve, reject);
      }),
  };
  return { locks, stealable, steal: () => stealLatest() };
}

function rig(): Rig {
  const time = virtualClock(START);
  const scheduler = virtualScheduler(time);
  const source = createJournal(memoryEngine(), { name: "local", capacity: CAPACITY, clock: time.clock });
  const target = createJournal(memoryEngine(), { name: "edge", capacity: CAPACITY, clock: time.clock });
  const calls: UsageEvent[][] = [];
  const sink = {
    appendBatch(events: readonly UsageEvent[]): Promise<BatchAppendResult[]> {
      calls.push([...events]);
      return target.appendBatch(events);
    },
  };
  return {
    time,
    scheduler,
    source,
    target,
    calls,
    async append(count, subject = "alice") {
      for (let i = 0; i < count; i++) {
        await source.append(createUsageEvent({ record: { requestId: newRequestId(time.now), namespace: "acme", subject: `${subject}${i}`, data: i }, observedAt: time.now }));
      }
    },
    forwarder(options = {}) {
      return createForwarder({
        source,
        consumer,
        sink,
        batchSize: 10,
        leaseMs: 10_000,
        pollIntervalMs: 1_000,
        backoff: { initialMs: 1_000, maxMs: 4_000, jitter: 0 },
        clock: time.clock,
        scheduler,
        ...options,
      });
    },
    async sinkHeld() {
      return (await target.stats(parseConsumerId("nobody"))).pending;
    },
  };
}

describe("forwarder: online and offline", () => {
  it("starting offline forwards nothing and schedules nothing; coming online wakes it at once", async () => {
    const r = rig();
    await r.append(3);
    const online = manualOnline(false);
    const forwarder = r.forwarder({ online });
    forwarder.start();
    await r.scheduler.advance(60_000);
    expect(forwarder.progress.state).toBe("offline");
    expect(r.calls).toHaveLength(0);
    expect(r.scheduler.pending()).toBe(0);
    online.set(true);
    await r.scheduler.advance(0);
    expect(await r.sinkHeld()).toBe(3);
    expect(forwarder.progress.state).toBe("idle");
    await forwarder.stop();
    expect(online.listeners()).toBe(0);
  });

  it("going offline pauses polling; going online during a backoff retries at once", async () => {
    const r = rig();
    const online = manualOnline(true);
    let failNext = true;
    const forwarder = r.forwarder({
      online,
      backoff: { initialMs: 30_000, maxMs: 30_000, jitter: 0 },
      sink: {
        appendBatch: async (events) => {
          if (events.length === 0) return []; // the forwarder's sink check before a claim: answered
          r.calls.push([...events]);
          if (failNext) {
            failNext = false;
            throw new TypeError("Failed to fetch");
          }
          return r.target.appendBatch(events);
        },
      },
    });
    const states: ForwarderState[] = [];
    forwarder.addEventListener("state", (event) => states.push(event.detail.state));
    forwarder.start();
    await r.scheduler.advance(0);
    expect(forwarder.progress.state).toBe("idle");

    online.set(false);
    expect(forwarder.progress.state).toBe("offline");
    await r.append(2);
    await r.scheduler.advance(10_000);
    expect(r.calls).toHaveLength(0);

    online.set(true);
    await r.scheduler.advance(0);
    // The first try failed (the network was not really back): back off 30 s...
    expect(forwarder.progress.state).toBe("backing_off");
    expect(forwarder.progress.nextRetryAt).toBe(r.time.now + 30_000);
    // ...holding the batch (not nacked: no attempt spent); the next `online` sends it again at once.
    expect(await r.sinkHeld()).toBe(0);
    online.set(false);
    online.set(true);
    await r.scheduler.advance(0);
    expect(await r.sinkHeld()).toBe(2);
    expect(r.calls).toHaveLength(2);
    expect(r.time.now).toBe(START + 10_000); // no time passed: the online event cut the wait short
    await r.scheduler.advance(0);
    expect(forwarder.progress).toMatchObject({ state: "idle", consecutiveFailures: 0, nextRetryAt: null });
    await forwarder.stop();
    expect(states).toEqual(expect.arrayContaining(["idle", "offline", "forwarding", "backing_off", "stopped"]));
  });

  it("browserOnline reads navigator.onLine and the online/offline events of a global, and unsubscribes", () => {
    const host = new EventTarget() as EventTarget & { navigator: { onLine: boolean } };
    host.navigator = { onLine: false };
    const online = browserOnline(host);
    expect(online.isOnline()).toBe(false);
    const seen: boolean[] = [];
    const unsubscribe = online.subscribe((flag) => seen.push(flag));
    host.navigator.onLine = true;
    host.dispatchEvent(new Event("online"));
    host.dispatchEvent(new Event("offline"));
    unsubscribe();
    host.dispatchEvent(new Event("online"));
    expect(seen).toEqual([true, false]);
    expect(online.isOnline()).toBe(true);
  });

  it("browserOnline without navigator or events counts as online and never calls back", () => {
    const online = browserOnline({});
    expect(online.isOnline()).toBe(true);
    const unsubscribe = online.subscribe(() => {
      throw new Error("never");
    });
    unsubscribe();
    expect(browserOnline({ navigator: { onLine: "yes" } }).isOnline()).toBe(true);
  });
});

describe("forwarder: one forwarder per origin (lock)", () => {
  it("the second forwarder stands by and takes over when the first stops", async () => {
    const r = rig();
    const locks = localLockManager();
    const lock = { name: "isostore-forwarder/local/edge", manager: locks };
    const tabA = r.forwarder({ lock });
    const tabB = r.forwarder({ lock });
    tabA.start();
    tabB.start();
    await r.scheduler.advance(0);
    expect(tabA.progress.state).toBe("idle");
    expect(tabB.progress.state).toBe("standby");
    expect(locks.waiting(lock.name)).toBe(1);

    await r.append(3, "a");
    await r.scheduler.advance(1_000);
    expect(tabA.progress.forwarded).toBe(3);
    expect(tabB.progress.forwarded).toBe(0);

    await tabA.stop(); // the tab closes: its lock goes to B
    await r.scheduler.advance(0);
    expect(tabB.progress.state).toBe("idle");
    await r.append(2, "b");
    await r.scheduler.advance(1_000);
    expect(tabB.progress.forwarded).toBe(2);
    expect(await r.sinkHeld()).toBe(5);
    await tabB.stop();
    expect(locks.held(lock.name)).toBe(false);
  });

  it("stop() without awaiting it, then start(), with a lock: the new run waits for the old run's lock, then forwards, and releases it on stop", async () => {
    const r = rig();
    const locks = localLockManager();
    const lock = { name: "fw-restart", manager: locks };
    const tab = r.forwarder({ lock });
    tab.start();
    await r.scheduler.advance(0);
    expect(tab.progress.state).toBe("idle");
    const stopping = tab.stop();
    tab.start(); // asks for a lock of its own while the old run still lets go of its one
    await stopping;
    await r.scheduler.advance(0);
    expect(tab.progress.state).toBe("idle");
    expect(locks.held(lock.name)).toBe(true);
    await r.append(2, "a");
    await r.scheduler.advance(1_000);
    expect(tab.progress.forwarded).toBe(2);
    await tab.stop();
    expect(tab.progress.state).toBe("stopped");
    expect(locks.held(lock.name)).toBe(false);
    expect(locks.waiting(lock.name)).toBe(0);
  });

  it("a standby forwarder that stops withdraws its lock request", async () => {
    const r = rig();
    const locks = localLockManager();
    const lock = { name: "fw", manager: locks };
    const tabA = r.forwarder({ lock });
    const tabB = r.forwarder({ lock });
    tabA.start();
    tabB.start();
    expect(locks.waiting("fw")).toBe(1);
    await tabB.stop();
    expect(locks.waiting("fw")).toBe(0);
    expect(tabB.progress.state).toBe("stopped");
    await tabA.stop();
    expect(locks.held("fw")).toBe(false);
  });

  it("when the holder's tab dies mid-batch, the standby forwarder takes over after the lease lapses and nothing is lost or doubled", async () => {
    const r = rig();
    await r.append(4, "k");
    const locks = localLockManager();
    // A tab's death: its lock callback is abandoned (the browser releases the lock) and its timers never run again.
    let killA: () => void = () => undefined;
    const dyingManager: LockManagerLike = {
      request: (name, options, callback) =>
        locks.request(name, options, (lock) => Promise.race([callback(lock), new Promise<void>((resolve) => (killA = resolve))])),
    };
    const schedulerA = virtualScheduler(r.time); // tab A's own timers, shared clock
    let answerA: () => void = () => undefined;
    const tabA = createForwarder({
      source: r.source,
      consumer,
      // Tab A's request stores the batch at the edge but the tab dies before the answer arrives.
      sink: {
        appendBatch: async (events) => {
          const results = await r.target.appendBatch(events);
          if (events.length === 0) return results; // the forwarder's sink check before a claim
          await new Promise<void>((resolve) => (answerA = resolve));
          return results;
        },
      },
      leaseMs: 10_000,
      clock: r.time.clock,
      scheduler: schedulerA,
      lock: { name: "fw", manager: dyingManager },
    });
    const tabB = r.forwarder({ lock: { name: "fw", manager: locks } });
    tabA.start();
    await schedulerA.advance(0);
    expect(tabA.progress.state).toBe("forwarding");
    tabB.start();
    await r.scheduler.advance(0);
    expect(tabB.progress.state).toBe("standby");

    killA(); // tab A closes; its scheduler is never advanced again
    await new Promise((resolve) => setTimeout(resolve, 0)); // the lock manager hands the lock to B
    await r.scheduler.advance(0);
    expect(tabB.progress.state).toBe("idle");
    expect(tabB.progress.forwarded).toBe(0); // A's leases still run
    await r.scheduler.advance(10_000);
    expect(tabB.progress.forwarded).toBe(4);
    expect(tabB.progress.pending).toBe(0);
    expect(await r.sinkHeld()).toBe(4);
    await tabB.stop();
    void answerA;
  });

  it("a lock request that fails is reported and retried after backoff", async () => {
    const r = rig();
    const locks = localLockManager();
    let failures = 1;
    const flaky: LockManagerLike = {
      request: (name, options, callback) => {
        if (failures-- > 0) return Promise.reject(new Error("SecurityError: locks are not allowed here"));
        return locks.request(name, options, callback);
      },
    };
    await r.append(1);
    const forwarder = r.forwarder({ lock: { name: "fw", manager: flaky } });
    forwarder.start();
    await r.scheduler.advance(0);
    expect(forwarder.progress.lastError).toMatchObject({ phase: "lock", message: "SecurityError: locks are not allowed here" });
    expect(forwarder.progress.state).toBe("standby");
    await r.scheduler.advance(1_000);
    expect(forwarder.progress.forwarded).toBe(1);
    await forwarder.stop();
  });

  it("a forwarder whose lock is stolen stops forwarding, reports it, and asks for the lock again", async () => {
    const r = rig();
    const { locks, stealable, steal } = stealableLocks();
    const forwarder = r.forwarder({ lock: { name: "fw", manager: stealable }, backoff: { initialMs: 5_000, jitter: 0 } });
    forwarder.start();
    await r.scheduler.advance(0);
    expect(forwarder.progress.state).toBe("idle");
    steal();
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(forwarder.progress.state).toBe("standby");
    expect(forwarder.progress.lastError).toMatchObject({ phase: "lock", message: "AbortError: the lock was stolen" });
    expect(locks.held("fw")).toBe(false); // the forwarder let go of its callback too
    await r.append(2);
    await r.scheduler.advance(4_999);
    expect(await r.sinkHeld()).toBe(0);
    await r.scheduler.advance(1);
    await r.scheduler.advance(0);
    expect(await r.sinkHeld()).toBe(2);
    await forwarder.stop();
    expect(r.scheduler.pending()).toBe(0);
  });

  it("a forwarder whose lock is stolen while it holds a batch through a sink outage gives the batch back at once", async () => {
    const r = rig();
    const { stealable, steal } = stealableLocks();
    const forwarder = r.forwarder({
      lock: { name: "fw-held", manager: stealable },
      backoff: { initialMs: 5_000, jitter: 0 },
      sink: {
        appendBatch: async (events) => {
          // The outage begins after the claim: the forwarder's first sink check (a call of no events) is answered.
          if (events.length === 0 && r.calls.length === 0) return [];
          if (events.length > 0) r.calls.push([...events]);
          throw new TypeError("Failed to fetch");
        },
      },
    });
    await r.append(2);
    forwarder.start();
    await r.scheduler.advance(0);
    await r.scheduler.advance(0);
    expect(forwarder.progress.state).toBe("backing_off");
    expect(await r.source.stats(consumer)).toMatchObject({ inFlight: 2, pending: 0 }); // held, not nacked
    steal();
    await new Promise((resolve) => setTimeout(resolve, 0));
    await r.scheduler.advance(0);
    // No time passed: the held event was nacked, claimable now by whoever holds the lock.
    expect(await r.source.stats(consumer)).toMatchObject({ inFlight: 0, pending: 2 });
    expect(forwarder.progress).toMatchObject({ state: "standby", retried: 2 });
    await forwarder.stop();
    expect(r.scheduler.pending()).toBe(0);
  });

  it("browserLocks finds navigator.locks when present and nothing otherwise", () => {
    const manager = localLockManager();
    expect(browserLocks({ navigator: { locks: manager } })).toBe(manager);
    expect(browserLocks({ navigator: {} })).toBeNull();
    expect(browserLocks({})).toBeNull();
    expect(browserLocks(null)).toBeNull();
  });

  it("localLockManager grants in request order and rejects an aborted waiter", async () => {
    const locks = localLockManager();
    const order: string[] = [];
    let releaseFirst: () => void = () => undefined;
    const first = locks.request("x", {}, () => new Promise<void>((resolve) => ((releaseFirst = resolve), order.push("first"))));
    const controller = new AbortController();
    const aborted = locks.request("x", { signal: controller.signal }, async () => void order.push("aborted"));
    const third = locks.request("x", {}, async () => void order.push("third"));
    controller.abort(new Error("gone"));
    await expect(aborted).rejects.toThrow("gone");
    releaseFirst();
    await first;
    await third;
    expect(order).toEqual(["first", "third"]);
    expect(locks.held("x")).toBe(false);
  });
});
