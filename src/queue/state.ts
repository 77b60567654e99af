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
 *   forgotten before admission. A call whose `now` is below the previous
 *   enqueue's `now` (the clock went backwards) evicts nothing; the next call
 *   whose `now` is not below its predecessor's evicts again, by its own `now`
 *   (so one far-future reading does not switch eviction off). A key whose
 *   item is still queued is never evicted (forgetting it could let the key
 *   reach the consumer twice; the spec's own reasoning is that remembering
 *   too long only skips a side effect once more).
 * - A remembered key is `"admit"` (the sender did its duty) and is counted
 *   as a duplicate, without enqueuing it again; its remembered time is not
 *   refreshed.
 * - A full lane (`len >= capacity`) is `"shed"`, and a shed key is not
 *   remembered, so its retry is not a duplicate.
 * - `consume` hands out items in admission order; a key is queued at most
 *   once, so it never reaches the consumer twice.
 */

import { AgeHeap } from "./age-heap.js";

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
  /** Queued items by id (ids are dense from 1: every id below {@link nextId} was queued once). */
  readonly items = new Map<number, QueueItem>();
  /** Key -> id of its queued item. */
  readonly queued = new Map<string, number>();
  /** Remembered key -> the `now` it was admitted at. */
  readonly seen = new Map<string, number>();
  nextId = 1;
  /**
   * No item below this id is queued: {@link peek} starts here and moves it
   * past consumed ids, so each id is passed once (a Map iterator would not
   * do: V8 starts every new one at the table's first slot and walks the
   * deleted ones, which made draining a backlog quadratic).
   */
  private head = 1;
  /** Internal, for tests: ids {@link peek} has looked at so far. */
  headVisits = 0;
  /** The `now` of the previous enqueue (whatever its outcome); -Infinity before the first. */
  previousNow = Number.NEGATIVE_INFINITY;
  /**
   * The remembered keys that are not parked, oldest first, whatever order
   * they were admitted in. An entry is stale (skipped when popped) once its
   * key is no longer remembered at that time or is parked.
   */
  private readonly byAge = new AgeHeap();
  /**
   * Remembered keys a sweep found past the window while their item was still
   * queued: taken out of {@link byAge} so later sweeps do not look at them
   * again, and put back when the item is consumed. At most one per queued item.
   */
  private readonly parked = new Set<string>();
  /** Internal, for tests: heap entries the eviction sweeps have looked at so far. */
  sweepVisits = 0;
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
    return now >= this.previousNow && now - admittedAt > IDEM_WINDOW_MS && !this.queued.has(key);
  }

  /**
   * Forget every remembered key past the window at `now` whose item is not
   * queued. Pops the oldest keys until one is young enough to stay, so a
   * sweep costs O((evicted + parked) log n), however out of order the keys
   * were admitted.
   */
  private evict(now: number): void {
    for (let oldest = this.byAge.peek(); oldest !== undefined; oldest = this.byAge.peek()) {
      this.sweepVisits++;
      if (now - oldest.at <= IDEM_WINDOW_MS) break;
      this.byAge.pop();
      const { key, at } = oldest;
      if (this.seen.get(key) !== at || this.parked.has(key)) continue; // stale
      if (this.queued.has(key)) this.parked.add(key);
      else this.seen.delete(key);
    }
  }

  /** The outcome `enqueue(key, _, now)` would have; changes nothing. */
  decideEnqueue(key: string, now: number): EnqueueOutcome {
    const admittedAt = this.seen.get(key);
    if (admittedAt !== undefined && !this.evictable(key, admittedAt, now)) return "duplicate";
    if (this.items.size >= this.capacity) return "shed";
    return "admitted";
  }

  /** Apply a decided enqueue: evict (unless `now` is below the previous enqueue's), then the outcome's effect. Returns the item when one was queued. */
  applyEnqueue(outcome: EnqueueOutcome, key: string, payload: Uint8Array | undefined, now: number): QueueItem | undefined {
    if (now >= this.previousNow) this.evict(now);
    this.previousNow = now;
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
    this.parked.delete(key);
    this.seen.set(key, now); // any older entry of the key in byAge is now stale
    this.byAge.push({ key, at: now });
    this.enqueued++;
    return item;
  }

  /** The item `consume` would hand out; changes nothing. */
  peek(): QueueItem | undefined {
    // Consumes take the head, but a replayed ledger may consume any queued id: skip every id no longer queued.
    for (; this.head < this.nextId; this.head++) {
      this.headVisits++;
      const item = this.items.get(this.head);
      if (item !== undefined) return item;
    }
    return undefined;
  }

  /** Remove item `id` (the head, when consuming). */
  applyConsume(id: number): QueueItem | undefined {
    const item = this.items.get(id);
    if (item === undefined) return undefined;
    this.items.delete(id);
    this.queued.delete(item.key);
    const at = this.seen.get(item.key);
    if (this.parked.delete(item.key) && at !== undefined) this.byAge.push({ key: item.key, at }); // evictable again
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
