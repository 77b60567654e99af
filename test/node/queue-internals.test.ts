/**
 * What the queue's state machine promises beyond the conformance suite
 * (white-box): eviction is exact however out of time order keys were
 * admitted (two producers whose clocks differ, a clock that went back), and
 * it costs work in proportion to the keys it evicts, not to the keys
 * remembered, also when a ledger-backed queue replays its ledger on reopen.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import type { DurableEventQueue } from "../../src/queue/durable.js";
import { MAX_QUEUE_PAYLOAD_BYTES } from "../../src/queue/checks.js";
import { EventQueue } from "../../src/queue/event-queue.js";
import { IDEM_WINDOW_MS, QueueState } from "../../src/queue/state.js";
import { createStore } from "../../src/storage/store.js";
import { QueueOracle } from "../../src/testing/index.js";

const T0 = 1_700_000_000_000;
const W = IDEM_WINDOW_MS;

function admitter(state: QueueState): (key: string, now: number) => void {
  return (key, now) => {
    state.applyEnqueue(state.decideEnqueue(key, now), key, new Uint8Array(), now);
  };
}

function drain(state: QueueState): void {
  for (let head = state.peek(); head !== undefined; head = state.peek()) state.applyConsume(head.id);
}

function entries(map: ReadonlyMap<string, number>): [string, number][] {
  return [...map].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** The eviction work of a ledger-backed queue's state (white-box). */
function stateOf(queue: DurableEventQueue<"signal">): QueueState {
  return (queue as unknown as { state: QueueState }).state;
}

describe("remembered keys and the eviction sweep", () => {
  it("keys admitted out of time order are all freed once past the window", () => {
    const state = new QueueState("signal", 10);
    const admit = admitter(state);
    admit("a", T0 + 100);
    admit("b", T0 + 50); // the clock went back: out of order
    admit("a", T0 + 100); // a duplicate
    admit("c", T0 + 70); // older than a, admitted after it: out of order again
    drain(state);
    admit("d", T0 + 70 + W + 1); // b and c are past the window, a is not
    expect(entries(state.seen)).toEqual([
      ["a", T0 + 100],
      ["d", T0 + 70 + W + 1],
    ]);
  });

  it("each enqueue evicts exactly the remembered keys past the window whose item is not queued, unless its now is below the previous enqueue's", () => {
    // Readings either side of one window, 50 ms apart (two producers), so random calls interleave and jump back
    // and forth across it; and one far ahead.
    const readings = [0, 50, 10, 60, W + 5, W + 55, W + 25, W + 75, 2 * W + 20, 2 * W + 70, 1000 * W].map((offset) => T0 + offset);
    fc.assert(
      fc.property(fc.array(fc.record({ key: fc.nat({ max: 5 }), now: fc.constantFrom(...readings), consume: fc.boolean() }), { maxLength: 60 }), (calls) => {
        const state = new QueueState("signal", 3);
        const admit = admitter(state);
        let previous = Number.NEGATIVE_INFINITY;
        for (const { key, now, consume } of calls) {
          const before = new Map(state.seen);
          const queued = new Set(state.queued.keys());
          const expected = new Map([...before].filter(([k, at]) => now < previous || now - at <= W || queued.has(k)));
          const enqueuedBefore = state.enqueued;
          admit(`k${key}`, now);
          if (state.enqueued > enqueuedBefore) expected.set(`k${key}`, now);
          expect(entries(state.seen), `enqueue(k${key}, T0+${now - T0}) after T0+${previous - T0}`).toEqual(entries(expected));
          previous = now;
          if (consume) drain(state);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it("with two producers whose clocks are 50 ms apart, a sweep that evicts nothing looks at one key, and one that evicts k keys at k + 1", () => {
    const state = new QueueState("signal", 10);
    const admit = admitter(state);
    const N = 20_000;
    let t = T0;
    for (let i = 0; i < N; i++, t++) {
      admit(`k${i}`, t);
      drain(state);
    }
    const calls = 400;
    const start = state.sweepVisits;
    for (let i = 0; i < calls; i++, t++) {
      admit(`p${i}`, i % 2 === 0 ? t : t - 50); // every other call is 50 ms behind its predecessor
      drain(state);
    }
    expect(state.seen.size).toBe(N + calls);
    // Calls 50 ms behind evict nothing and sweep nothing; the others look at the oldest key only.
    expect(state.sweepVisits - start).toBeLessThanOrEqual(calls);
    // Past the window from the keys admitted first: those are evicted, and the sweep stops at the first young one.
    const evicting = state.sweepVisits;
    admit("late", T0 + 999 + W + 1);
    expect(state.seen.size).toBe(N + calls - 1000 + 1);
    expect(state.sweepVisits - evicting).toBe(1000 + 1);
    expect([state.seen.has("k999"), state.seen.has("k1000")]).toEqual([false, true]);
  });

  it("a ledger-backed queue written by two producers whose clocks are 50 ms apart replays on reopen with one sweep visit per record, to the same state", async () => {
    const engine = memoryEngine();
    try {
      const ledger = () => createStore(engine, { name: "queues" }).ledger;
      const queue = await EventQueue.fromLedger(ledger(), "q/skew", "signal", 5_000);
      const N = 2_000;
      let t = T0;
      for (let i = 0; i < N; i++, t++) await queue.enqueue(`k${i}`, new Uint8Array(), i % 2 === 0 ? t : t - 50);
      const again = await EventQueue.fromLedger(ledger(), "q/skew", "signal", 5_000);
      expect(stateOf(again).sweepVisits).toBeLessThanOrEqual(N);
      expect([again.len(), again.stats(), entries(stateOf(again).seen)]).toEqual([queue.len(), queue.stats(), entries(stateOf(queue).seen)]);
      expect(stateOf(again).previousNow).toBe(stateOf(queue).previousNow);
    } finally {
      await engine.close();
    }
  });
});

describe("handing out the head", () => {
  /** Counts the iterators started over `map` (V8 starts each at the table's first slot, deleted ones included). */
  function countIterators(map: Map<number, unknown>): { readonly started: number } {
    const counter = { started: 0 };
    for (const method of ["values", "keys", "entries", Symbol.iterator, "forEach"] as const) {
      const original = map[method].bind(map) as (...args: unknown[]) => unknown;
      Object.defineProperty(map, method, {
        value: (...args: unknown[]) => {
          counter.started++;
          return original(...args);
        },
      });
    }
    return counter;
  }

  it("draining a backlog of N looks at each id at most twice and starts no iterator over the queued items", () => {
    const N = 50_000;
    const state = new QueueState("signal", N);
    const admit = admitter(state);
    for (let i = 0; i < N; i++) admit(`k${i}`, T0);
    const iterators = countIterators(state.items);
    let handed = 0;
    let inOrder = true;
    for (let head = state.peek(); head !== undefined; head = state.peek()) {
      inOrder &&= head.id === ++handed;
      state.applyConsume(head.id);
    }
    expect([handed, inOrder]).toEqual([N, true]);
    // Each peek looks at the id it returns, and the one after it finds its predecessor consumed first.
    expect(state.headVisits).toBeLessThanOrEqual(2 * N + 1);
    expect(iterators.started).toBe(0);
  });

  it("peek is the queued item of the lowest id, whichever ids a replayed ledger consumes", () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.constant("enqueue" as const), fc.nat({ max: 12 })), { maxLength: 80 }), (calls) => {
        const state = new QueueState("signal", 8);
        const admit = admitter(state);
        let n = 0;
        for (const call of calls) {
          if (call === "enqueue") admit(`k${n++}`, T0);
          else state.applyConsume(call); // any id, queued or not
          const lowest = Math.min(...state.items.keys());
          expect(state.peek()?.id).toBe(Number.isFinite(lowest) ? lowest : undefined);
        }
        expect(state.headVisits).toBeLessThanOrEqual(calls.length + n);
      }),
      { numRuns: 500 },
    );
  });
});

describe("payloads from another realm", () => {
  it("a Uint8Array from a vm context is a payload to the queue, its ledger-backed variant and the reference model alike", async () => {
    const { runInNewContext } = await import("node:vm");
    const foreign = runInNewContext("new Uint8Array([1, 2, 3])") as Uint8Array;
    expect(foreign instanceof Uint8Array).toBe(false);
    const memory = new EventQueue("signal", 4);
    const oracle = new QueueOracle("signal", 4);
    const engine = memoryEngine();
    try {
      const durable = await EventQueue.fromLedger(createStore(engine, { name: "queues" }).ledger, "q/realm", "signal", 4);
      expect([memory.enqueue("k", foreign, T0), oracle.enqueue("k", foreign, T0), await durable.enqueue("k", foreign, T0)]).toEqual(["admit", "admit", "admit"]);
      const handed = [memory.consume(), oracle.consume(), await durable.consume()];
      expect(handed.map((item) => item && [item.key, Array.from(item.payload)])).toEqual([
        ["k", [1, 2, 3]],
        ["k", [1, 2, 3]],
        ["k", [1, 2, 3]],
      ]);
    } finally {
      await engine.close();
    }
  });
});

describe("the queue payload limit this implementation chose (the ledger's 1 MiB record less 8 KiB for the record header)", () => {
  it("is 1,040,384 bytes for both queue kinds: a payload of exactly that is queued whole, one byte more is InvalidArgumentError { argument: payload }", async () => {
    expect(MAX_QUEUE_PAYLOAD_BYTES).toBe(1_048_576 - 8192);
    const engine = memoryEngine();
    try {
      const memory = new EventQueue("signal", 10);
      const durable = await EventQueue.fromLedger(createStore(engine, { name: "queues" }).ledger, "q/limit", "signal", 10);
      for (const queue of [memory, durable]) {
        await expect(Promise.resolve().then(() => queue.enqueue("over", new Uint8Array(1_040_385), T0))).rejects.toMatchObject({ code: "invalid_argument", argument: "payload" });
        expect(await queue.enqueue("at-limit", new Uint8Array(1_040_384).fill(3), T0)).toBe("admit");
        const item = await queue.consume();
        expect([item?.key, item?.payload.length, item?.payload[1_040_383]]).toEqual(["at-limit", 1_040_384, 3]);
      }
      const replayed = await EventQueue.fromLedger(createStore(engine, { name: "queues" }).ledger, "q/limit", "signal", 10);
      expect(replayed.stats()).toEqual({ signal_enqueued: 1, signal_consumed: 1, signal_shed: 0, signal_duplicates: 0 });
    } finally {
      await engine.close();
    }
  });
});
