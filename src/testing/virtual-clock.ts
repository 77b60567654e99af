/**
 * A clock the test moves by hand. The journal under test and the reference
 * model both read `clock()`, so lease expiry, retention windows and ages are
 * decided by the test, never by the wall clock.
 */

/** A hand-driven clock: `now` is the current reading, `clock` the function a journal takes. */
export interface VirtualClock {
  /** The current reading (epoch ms). May be set directly. */
  now: number;
  /** Move the clock forward by `ms` (may be 0) and return the new reading. */
  advance(ms: number): number;
  /** Pass this to a journal as its `clock`. */
  readonly clock: () => number;
}

/**
 * Create a hand-driven clock starting at `start` (epoch ms).
 *
 * @example
 * const time = virtualClock(1_700_000_000_000);
 * const journal = createJournal(engine, { name: "billing", capacity, clock: time.clock });
 * time.advance(30_000); // the journal now reads 1_700_000_030_000
 */
export function virtualClock(start: number = 1_700_000_000_000): VirtualClock {
  const state: VirtualClock = {
    now: start,
    advance(ms: number): number {
      state.now += ms;
      return state.now;
    },
    clock: () => state.now,
  };
  return state;
}
