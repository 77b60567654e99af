/**
 * A virtual scheduler: `setTimeout` / `clearTimeout` over a {@link VirtualClock}
 * that run only when the test says so. Leases renew on it, so a test decides
 * when a holder renews and can also move the clock without running any timer
 * (a stalled holder).
 */
import type { Scheduler } from "../storage/leaser.js";
import type { VirtualClock } from "./virtual-clock.js";

/** A {@link Scheduler} driven by hand. */
export interface VirtualScheduler extends Scheduler {
  /** Move the clock forward by `ms`, running every timer that falls due, in time order (and letting each settle). */
  advance(ms: number): Promise<void>;
  /** Timers waiting to run. */
  pending(): number;
}

interface Timer {
  readonly id: number;
  readonly at: number;
  readonly callback: () => unknown;
}

/** Let promise chains started by a timer settle (engine calls included): a few macrotask turns. */
async function settle(): Promise<void> {
  const host = globalThis as unknown as { setTimeout: (callback: () => void, ms: number) => unknown };
  for (let i = 0; i < 3; i++) await new Promise<void>((resolve) => host.setTimeout(resolve, 0));
}

/**
 * Create a scheduler over `time`.
 *
 * @example
 * ```ts
 * const time = virtualClock();
 * const scheduler = virtualScheduler(time);
 * const store = createStore(engine, { name: "s", clock: time.clock, scheduler });
 * await scheduler.advance(10_000); // renewals due in the next 10 s run, in order
 * ```
 */
export function virtualScheduler(time: VirtualClock): VirtualScheduler {
  let timers: Timer[] = [];
  let nextId = 1;
  return {
    setTimeout(callback, ms) {
      const timer = { id: nextId++, at: time.now + Math.max(0, ms), callback };
      timers.push(timer);
      return timer.id;
    },
    clearTimeout(handle) {
      timers = timers.filter((timer) => timer.id !== handle);
    },
    async advance(ms) {
      const target = time.now + ms;
      for (;;) {
        const due = timers.filter((timer) => timer.at <= target).sort((a, b) => a.at - b.at || a.id - b.id)[0];
        if (due === undefined) break;
        timers = timers.filter((timer) => timer !== due);
        time.now = Math.max(time.now, due.at);
        // Wait for the work the timer started (a renewal transaction), however
        // long the engine takes to commit, before the clock moves on.
        await due.callback();
        await settle();
      }
      time.now = target;
      await settle();
    },
    pending: () => timers.length,
  };
}
