/**
 * How long the forwarder waits after a failure: exponential in the number of
 * failures so far, capped, with jitter from an injectable random source (so
 * many browser tabs coming back online do not hit the edge in lock step, and
 * tests stay deterministic).
 *
 * A policy is a pure function of the failure count; it keeps no state. The
 * forwarder asks it twice: for the `retryAfterMs` of a nacked event (the
 * count is the event's delivery attempt) and for the loop's own pause after a
 * failed batch (the count is the number of consecutive failed batches).
 */
import { InvalidArgumentError } from "../journal/errors.js";
import { MAX_LEASE_MS } from "../journal/journal.js";

/** A backoff policy: the delay (ms) before the next try after `failures` failures (1 for the first). */
export interface BackoffPolicy {
  delayMs(failures: number): number;
}

/** Options of {@link exponentialBackoff}. Every field is optional. */
export interface ExponentialBackoffOptions {
  /** Delay after the first failure (ms, >= 1). Default 1000. */
  readonly initialMs?: number;
  /** The cap (ms, >= `initialMs`, at most 12 hours). Default 60_000. */
  readonly maxMs?: number;
  /** Growth per failure (finite, >= 1). Default 2. */
  readonly multiplier?: number;
  /**
   * Fraction of the delay that is randomised (0..1): the delay is drawn from
   * `[d * (1 - jitter), d]`. 0 is no jitter, 1 is "full jitter". Default 0.5.
   */
  readonly jitter?: number;
  /** A uniform random number in [0, 1). Default `Math.random`. */
  readonly random?: () => number;
}

/** Defaults of {@link exponentialBackoff}. */
export const DEFAULT_BACKOFF = Object.freeze({ initialMs: 1000, maxMs: 60_000, multiplier: 2, jitter: 0.5 });

function checkFinite(argument: string, value: unknown, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < min || value > max) {
    throw new InvalidArgumentError(argument, `must be a number from ${min} to ${max}, got ${String(value)}`);
  }
  return value;
}

/**
 * An exponential backoff policy: `min(maxMs, initialMs * multiplier^(failures - 1))`,
 * then jittered down by up to `jitter` of itself, rounded to whole milliseconds.
 *
 * @throws InvalidArgumentError naming the option (`backoff.initialMs`, `backoff.maxMs`,
 *   `backoff.multiplier`, `backoff.jitter`, `backoff.random`) that is out of range.
 * @example
 * const backoff = exponentialBackoff({ initialMs: 500, maxMs: 30_000, random: () => 0.5 });
 * backoff.delayMs(1); // 375: 500 jittered by a quarter
 * backoff.delayMs(20); // 22_500: capped at 30_000, jittered
 */
export function exponentialBackoff(options: ExponentialBackoffOptions = {}): BackoffPolicy {
  if (options === null || typeof options !== "object") throw new InvalidArgumentError("backoff", "must be an object");
  const initialMs = checkFinite("backoff.initialMs", options.initialMs ?? DEFAULT_BACKOFF.initialMs, 1, MAX_LEASE_MS);
  const maxMs = checkFinite("backoff.maxMs", options.maxMs ?? Math.max(DEFAULT_BACKOFF.maxMs, initialMs), initialMs, MAX_LEASE_MS);
  const multiplier = checkFinite("backoff.multiplier", options.multiplier ?? DEFAULT_BACKOFF.multiplier, 1, 1000);
  const jitter = checkFinite("backoff.jitter", options.jitter ?? DEFAULT_BACKOFF.jitter, 0, 1);
  const random = options.random ?? Math.random;
  if (typeof random !== "function") throw new InvalidArgumentError("backoff.random", "must be a function returning a number in [0, 1)");
  return {
    delayMs(failures: number): number {
      const n = Number.isFinite(failures) ? Math.max(1, Math.floor(failures)) : 1;
      // Grow step by step and stop at the cap, so a huge count never overflows to Infinity.
      let delay = initialMs;
      for (let i = 1; i < n && delay < maxMs; i++) delay *= multiplier;
      delay = Math.min(maxMs, delay);
      const draw = random();
      const unit = Number.isFinite(draw) ? Math.min(1, Math.max(0, draw)) : 0.5;
      return Math.max(0, Math.round(delay * (1 - jitter * unit)));
    },
  };
}

/** Whether `value` is already a policy (has a `delayMs` function) rather than options. */
export function isBackoffPolicy(value: unknown): value is BackoffPolicy {
  return value !== null && typeof value === "object" && typeof (value as { delayMs?: unknown }).delayMs === "function";
}
