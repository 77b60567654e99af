/**
 * The shapes the Chromium benchmark page (bench/browser/bench-main.ts) reports
 * to its Node driver (bench/indexeddb-browser.ts). Kept apart from the page so
 * the driver's type check does not pull in the DOM library.
 */
export interface PairResult {
  /** Journal operations (appends or batches) per second. */
  readonly journalPerSecond: number;
  /** Baseline operations per second. */
  readonly rawPerSecond: number;
  /** journal / raw throughput (median of the rounds' ratios). */
  readonly ratio: number;
  readonly rounds: number;
  readonly perRound: number;
}

export interface ClaimCostResult {
  readonly backlog: number;
  readonly cycles: number;
  readonly msPerCycle: number;
  /** Median of the cycles (less sensitive to a stray fsync stall than the mean). */
  readonly medianMsPerCycle: number;
}

export interface BenchOptions {
  readonly quick: boolean;
}

export interface BenchResults {
  readonly userAgent: string;
  readonly strict: PairResult;
  readonly relaxed: PairResult;
  readonly batch: PairResult;
  readonly pattern: PairResult;
  readonly small: ClaimCostResult;
  readonly large: ClaimCostResult;
}
