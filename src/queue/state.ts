/**
 * The state machine of the event queue (`event-queue.lean.txt`, §8-10),
 * shared by the in-memory {@link EventQueue} and its ledger-backed variant so
 * the two can never disagree.
 *
 * Every change is split in two: `decide*` computes the outcome of a call
 * without changing anything, `apply*` applies a decided outcome. The durable
 * queue journals the decision between the two, and replays a ledger by
 * applying the journaled outcomes, so the rebuilt state is the state the
 * queue had (even if it is reopened with a different capacity).
 *
 * The rules:
 * - Eviction first: remembered keys older than {@link IDEM_WINDOW_MS} are
 *   forgotten before admission; never when the clock went backwards (a `now`
 *   below the highest `now` seen), and never a key whose item is still
 *   queued (forgetting it could let the key reach the consumer twice; the
 *   spec's own reasoning is that remembering too long only skips a side
 *   effect once more).
 * - A remembered key is `"admit"` (the sender did its duty) and is counted
 *   as a duplicate, without enqueuing it again; its remembered time is not
 *   refreshed.
 * - A full lane (`len >= capacity`) is `"shed"`, and a shed key is not
 *   remembered, so its retry is not a duplicate.
 * - `consume` hands out items in admission order; a key is queued at most
 *   once, so it never reaches the consumer twice.
 */

/** The three lanes; they differ only in the names of their stats. */
export type QueueLane = "signal" | "approval" | "repair";

/** Every lane, in spec order. */
export const QUEUE_LANES: readonly QueueLane[] = ["signal", "approval", "repair"];

/** How long a key is remembered for deduplication: six hours. */
export const IDEM_WINDOW_MS = 6 * 60 * 60 * 1000;

/** The verdict of `enqueue`: admitted (new or duplicate) or shed. */
export type Admission = "admit" | "shed";

/** What `enqueue` decided, in the detail replay needs. */
export type EnqueueOutcome = "admitted" | "duplicate" | "shed";

/** An item handed to the consumer. `payload` belongs to the caller. */
export interface QueueItem {
  /** Admission order, from 1. */
  readonly id: number;
  readonly key: string;
  readonly payload: Uint8Array;
}

/** The counters of a lane, named after it: `signal_enqueued`, `signal_consumed`, `signal_shed`, `signal_duplicates`. */
export type QueueStats<L extends QueueLane = QueueLane> = {
  readonly [C in QueueCounter as `${L}_${C}`]: number;
};

/** The counters every lane keeps. */
export type QueueCounter = "enqueued" | "consumed" | "shed" | "duplicates";

export class QueueState {
  /** Queued items by id; a Map iterates in insertion (= id) order. */
  readonly items = new Map<number, QueueItem>();
  /** Key -> id of its queued item. */
  readonly queued = new Map<string, number>();
  /** Remembered key -> the `now` it was admitted at. */
  readonly seen = new Map<string, number>();
  nextId = 1;
  /** The highest `now` any enqueue carried; -Infinity before the first. */
  highWater = Number.NEGATIVE_INFINITY;
  /** Whether `seen` iterates in ascending admission time. */
  private seenSorted = true;
  /** What the next admission's time is compared with to tell whether `seen` stays sorted: the time of the last key put there (after a re-sort, the newest). */
  private lastAdmittedAt = Number.NEGATIVE_INFINITY;
  enqueued = 0;
  consumed = 0;
  shed = 0;
  duplicates = 0;

  constructor(
    readonly lane: QueueLane,
    readonly capacity: number,
  ) {}

  get length(): number {
    return this.items.size;
  }

  private evictable(key: string, admittedAt: number, now: number): boolean {
    return now >= this.highWater && now - admittedAt > IDEM_WINDOW_MS && !this.queued.has(key);
  }

  /**
   * Forget every evictable key. `seen` is kept in admission-time order, so
   * the sweep stops at the first key young enough to stay (skipping the
   * queued ones, at most `capacity`); after the clock went backwards the map
   * is re-sorted once.
   */
  private evict(now: number): void {
    if (!this.seenSorted) {
      const sorted = [...this.seen].sort((a, b) => a[1] - b[1]);
      this.seen.clear();
      for (const [key, at] of sorted) this.seen.set(key, at);
      this.seenSorted = true;
      // The order is now by time, so the next admission must be compared with the newest time
      // remembered, not with the last one admitted (which may be older).
      this.lastAdmittedAt = sorted.at(-1)?.[1] ?? Number.NEGATIVE_INFINITY;
    }
    for (const [key, admittedAt] of this.seen) {
      if (now - admittedAt <= IDEM_WINDOW_MS) break;
      if (!this.queued.has(key)) this.seen.delete(key);
    }
  }

  /** The outcome `enqueue(key, _, now)` would have; changes nothing. */
  decideEnqueue(key: string, now: number): EnqueueOutcome {
    const admittedAt = this.seen.get(key);
    if (admittedAt !== undefined && !this.evictable(key, admittedAt, now)) return "duplicate";
    if (this.items.size >= this.capacity) return "shed";
    return "admitted";
  }

  /** Apply a decided enqueue: evict, then the outcome's effect. Returns the item when one was queued. */
  applyEnqueue(outcome: EnqueueOutcome, key: string, payload: Uint8Array | undefined, now: number): QueueItem | undefined {
    if (now >= this.highWater) {
      this.evict(now);
      this.highWater = now;
    }
    if (outcome === "duplicate") {
      this.duplicates++;
      return undefined;
    }
    if (outcome === "shed") {
      this.shed++;
      return undefined;
    }
    const item: QueueItem = { id: this.nextId++, key, payload: payload ?? new Uint8Array() };
    this.items.set(item.id, item);
    this.queued.set(key, item.id);
    if (now < this.lastAdmittedAt) this.seenSorted = false;
    this.lastAdmittedAt = now;
    this.seen.delete(key); // re-admitted after eviction: move to the end
    this.seen.set(key, now);
    this.enqueued++;
    return item;
  }

  /** The item `consume` would hand out; changes nothing. */
  peek(): QueueItem | undefined {
    for (const item of this.items.values()) return item;
    return undefined;
  }

  /** Remove item `id` (the head, when consuming). */
  applyConsume(id: number): QueueItem | undefined {
    const item = this.items.get(id);
    if (item === undefined) return undefined;
    this.items.delete(id);
    this.queued.delete(item.key);
    this.consumed++;
    return item;
  }

  stats(): QueueStats {
    const lane = this.lane;
    return {
      [`${lane}_enqueued`]: this.enqueued,
      [`${lane}_consumed`]: this.consumed,
      [`${lane}_shed`]: this.shed,
      [`${lane}_duplicates`]: this.duplicates,
    } as QueueStats;
  }
}
