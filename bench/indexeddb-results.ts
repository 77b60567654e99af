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
  /** Ordering keys the backlog spans (checked after the cycles). */
  readonly keys: number;
  readonly msPerCycle: number;
  /** Median of the cycles (less sensitive to a stray fsync stall than the mean). */
  readonly medianMsPerCycle: number;
  /** Median ms of the claim alone, and of the ackBatch alone. */
  readonly medianClaimMs: number;
  readonly medianAckMs: number;
}

/** append + claim + ack beside workbox-background-sync's Queue (pushRequest + shiftRequest). */
export interface QueuePairResult {
  /** Events appended, claimed and acked per second. */
  readonly journalPerSecond: number;
  /** Requests pushed and shifted per second. */
  readonly workboxPerSecond: number;
  /** journal / workbox throughput (median of the rounds' ratios). */
  readonly ratio: number;
  readonly rounds: number;
  /** Events (requests) per round. */
  readonly perRound: number;
  /** The journal engine's durability (workbox's own writes are relaxed). */
  readonly durability: "strict" | "relaxed";
  /**
   * How the N events arrive: "sequential" awaits each append (push) before
   * the next; "concurrent" issues all N and then awaits them (events arriving
   * faster than they are stored: the journal groups them into shared commits).
   */
  readonly arrival: "sequential" | "concurrent";
  /** Where each side's time goes: median ms per event of its two phases. */
  readonly msPerEvent: {
    readonly journalAppend: number;
    readonly journalClaimAck: number;
    readonly workboxPush: number;
    readonly workboxShift: number;
  };
}

/** The cost of one IndexedDB request of a kind (raw IndexedDB, no journal). */
export interface RequestCost {
  readonly what: string;
  /** What one unit is: a request, a row read by a range read, an event's writes. */
  readonly per: string;
  /** Median microseconds per unit. */
  readonly microseconds: number;
  readonly perRound: number;
  readonly rounds: number;
}

export interface BenchOptions {
  readonly quick: boolean;
}

export interface BenchResults {
  readonly userAgent: string;
  readonly strict: PairResult;
  readonly relaxed: PairResult;
  /** appendBatch with no consumer registered yet. */
  readonly batch: PairResult;
  /** appendBatch with one consumer registered. */
  readonly batchRegistered: PairResult;
  readonly pattern: PairResult;
  readonly small: ClaimCostResult;
  readonly large: ClaimCostResult;
  /** Sequential then concurrent arrivals, each strict then relaxed. */
  readonly workbox: readonly QueuePairResult[];
  /** What one request of each kind costs (section 6 of the page). */
  readonly requests: readonly RequestCost[];
}
