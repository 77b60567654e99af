/**
 * EventQueue: one implementation, three lanes; admission before enqueue,
 * deduplication before side effects (`event-queue.lean.txt`, §8-10).
 *
 * The in-memory queue is synchronous, like the spec's. Its durable variant,
 * {@link EventQueue.fromLedger}, journals every call to a ledger and rebuilds
 * by replay (see `./durable.ts`). The rules themselves live in `./state.ts`.
 */
import { copyBytes } from "../storage/copy.js";
import type { Ledger } from "../storage/ledger.js";
import type { CallOptions } from "../storage/options.js";
import { checkCapacity, checkKey, checkLane, checkNow, checkPayload } from "./checks.js";
import { DurableEventQueue } from "./durable.js";
import { QueueState, type Admission, type QueueItem, type QueueLane, type QueueStats } from "./state.js";

/**
 * A bounded, deduplicating queue for one lane.
 *
 * @example
 * ```ts
 * const queue = new EventQueue("signal", 1000);
 * queue.enqueue("evt-1", payload, Date.now()); // "admit"
 * queue.enqueue("evt-1", payload, Date.now()); // "admit" again (a duplicate: not queued twice)
 * const item = queue.consume();                 // { id: 1, key: "evt-1", payload }
 * queue.stats();                                // { signal_enqueued: 1, signal_consumed: 1, signal_shed: 0, signal_duplicates: 1 }
 * ```
 */
export class EventQueue<L extends QueueLane = QueueLane> {
  private readonly state: QueueState;

  /**
   * @param lane `"signal" | "approval" | "repair"`: names the stats.
   * @param capacity Items the lane holds before it sheds (a safe integer >= 0).
   */
  constructor(lane: L, capacity: number) {
    this.state = new QueueState(checkLane(lane), checkCapacity(capacity));
  }

  /**
   * The ledger-backed queue over ledger `name`: its state is rebuilt by
   * replaying the ledger, and every later call is journaled there before it
   * takes effect.
   *
   * @example
   * ```ts
   * const queue = await EventQueue.fromLedger(store.ledger, "queues/approval", "approval", 100);
   * await queue.enqueue("req-7", payload, Date.now());
   * // after a restart, the same call rebuilds the same queue:
   * const again = await EventQueue.fromLedger(store.ledger, "queues/approval", "approval", 100);
   * ```
   */
  static async fromLedger<L extends QueueLane>(ledger: Ledger, name: string, lane: L, capacity: number, options?: CallOptions): Promise<DurableEventQueue<L>> {
    return DurableEventQueue.open(ledger, name, lane, capacity, options);
  }

  get lane(): L {
    return this.state.lane as L;
  }

  get capacity(): number {
    return this.state.capacity;
  }

  /**
   * Offer an item. Evicts remembered keys older than the window first (not
   * when the clock went backwards: a `now` below the previous enqueue's
   * evicts nothing; the next call whose `now` is not below its
   * predecessor's evicts again), then: a remembered key is `"admit"`
   * without queuing it again (a duplicate); a full lane is `"shed"` and the
   * key is not remembered; otherwise the item is queued and `"admit"`.
   *
   * @throws {InvalidArgumentError} for a bad key or `now`, or a payload that is not a `Uint8Array` or is over
   *   `MAX_QUEUE_PAYLOAD_BYTES` (whatever the lane holds; nothing changes).
   */
  enqueue(key: string, payload: Uint8Array, now: number): Admission {
    checkKey(key);
    const bytes = copyBytes(checkPayload(payload));
    checkNow(now);
    const outcome = this.state.decideEnqueue(key, now);
    this.state.applyEnqueue(outcome, key, bytes, now);
    return outcome === "shed" ? "shed" : "admit";
  }

  /** The oldest queued item, or `undefined` when empty. A key is never handed out twice. */
  consume(): QueueItem | undefined {
    const head = this.state.peek();
    if (head === undefined) return undefined;
    const item = this.state.applyConsume(head.id);
    return item && { id: item.id, key: item.key, payload: copyBytes(item.payload) };
  }

  /** The lane's counters (`<lane>_enqueued`, `_consumed`, `_shed`, `_duplicates`). */
  stats(): QueueStats<L> {
    return this.state.stats() as QueueStats<L>;
  }

  /** Items queued now. */
  len(): number {
    return this.state.length;
  }

  isEmpty(): boolean {
    return this.state.length === 0;
  }
}
