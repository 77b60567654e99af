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
  /** What the promises timer callbacks returned rejected with (collected when the scheduler does not wait for them). */
  readonly rejections: unknown[];
  /** Every delay `setTimeout` was given, in call order. */
  readonly delays: number[];
}

/** Options of {@link virtualScheduler}. */
export interface VirtualSchedulerOptions {
  /**
   * Whether `advance` waits for the promise a timer callback returns (the
   * work it started, such as a renewal transaction) before the clock moves
   * on. Default true. False behaves as real timers do: a callback whose work
   * never settles holds nothing up, and what its promise rejects with is
   * kept in `rejections` (with real timers, an unhandled rejection).
   */
  readonly waitForCallbacks?: boolean;
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
export function virtualScheduler(time: VirtualClock, options: VirtualSchedulerOptions = {}): VirtualScheduler {
  const wait = options.waitForCallbacks !== false;
  let timers: Timer[] = [];
  let nextId = 1;
  const rejections: unknown[] = [];
  const delays: number[] = [];
  return {
    rejections,
    delays,
    setTimeout(callback, ms) {
      delays.push(ms);
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
        if (wait) {
          // Wait for the work the timer started (a renewal transaction), however
          // long the engine takes to commit, before the clock moves on.
          await due.callback();
        } else {
          Promise.resolve(due.callback()).catch((error: unknown) => rejections.push(error));
        }
        await settle();
      }
      time.now = target;
      await settle();
    },
    pending: () => timers.length,
  };
}
