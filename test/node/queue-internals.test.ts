/**
 * What the queue's state machine promises beyond the conformance suite
 * (white-box): the remembered keys are kept sorted by admission time, also
 * across clock jumps, so the eviction sweep frees every key it may.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { IDEM_WINDOW_MS, QueueState } from "../../src/queue/state.js";

const T0 = 1_700_000_000_000;

function admitter(state: QueueState): (key: string, now: number) => void {
  return (key, now) => {
    state.applyEnqueue(state.decideEnqueue(key, now), key, new Uint8Array(), now);
  };
}

function drain(state: QueueState): void {
  for (let head = state.peek(); head !== undefined; head = state.peek()) state.applyConsume(head.id);
}

describe("remembered keys and the eviction sweep", () => {
  it("after a re-sort, a later out-of-order admission is noticed, so the sweep frees every expired key", () => {
    const state = new QueueState("signal", 10);
    const admit = admitter(state);
    admit("a", T0 + 100);
    admit("b", T0 + 50); // the clock went back: out of order
    admit("a", T0 + 100); // a duplicate at the latest reading: the sweep re-sorts (b, a)
    admit("c", T0 + 70); // older than a, admitted after it: out of order again
    drain(state);
    admit("d", T0 + 70 + IDEM_WINDOW_MS + 1); // b and c are past the window, a is not
    expect([...state.seen.keys()].sort()).toEqual(["a", "d"]);
    expect(state.seen.size).toBe(2);
  });

  it("after any enqueue at or past the latest reading, no remembered key is still evictable", () => {
    // A few readings either side of one window, so random calls jump back and forth across it.
    const W = IDEM_WINDOW_MS;
    const readings = [0, 10, 20, 30, W + 5, W + 15, W + 25, W + 35, 2 * W + 20].map((offset) => T0 + offset);
    fc.assert(
      fc.property(fc.array(fc.record({ key: fc.nat({ max: 5 }), now: fc.constantFrom(...readings), consume: fc.boolean() }), { maxLength: 40 }), (calls) => {
        const state = new QueueState("signal", 3);
        const admit = admitter(state);
        let latest = Number.NEGATIVE_INFINITY;
        for (const { key, now, consume } of calls) {
          admit(`k${key}`, now);
          if (now >= latest) {
            latest = now;
            for (const [remembered, at] of state.seen) {
              expect(now - at <= W || state.queued.has(remembered), `${remembered} admitted at T0+${at - T0} is still remembered at T0+${now - T0}`).toBe(true);
            }
          }
          if (consume) drain(state);
        }
      }),
      { numRuns: 2000 },
    );
  });
});
