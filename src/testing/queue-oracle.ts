/**
 * The reference model of the event queue (`event-queue.lean.txt`): arrays
 * and linear scans, the rules written out in the order the spec gives them.
 */
import { copyBytes } from "../storage/copy.js";
import { InvalidArgumentError } from "../storage/errors.js";
import { isBytes } from "../storage/web.js";
import { IDEM_WINDOW_MS, QUEUE_LANES, type Admission, type QueueItem, type QueueLane } from "../queue/state.js";
import { MAX_IDEM_KEY_LENGTH, MAX_QUEUE_PAYLOAD_BYTES } from "../queue/checks.js";

/** The reference event queue. */
export class QueueOracle {
  private items: QueueItem[] = [];
  private seen: { key: string; at: number }[] = [];
  private nextId = 1;
  /** The `now` of the previous enqueue; -Infinity before the first. */
  private previous = Number.NEGATIVE_INFINITY;
  private readonly counts = { enqueued: 0, consumed: 0, shed: 0, duplicates: 0 };

  constructor(
    readonly lane: QueueLane,
    public capacity: number,
  ) {
    if (!QUEUE_LANES.includes(lane)) throw new InvalidArgumentError("lane", "unknown lane");
    if (!Number.isSafeInteger(capacity) || capacity < 0) throw new InvalidArgumentError("capacity", "must be a safe integer >= 0");
  }

  enqueue(key: string, payload: Uint8Array, now: number): Admission {
    if (typeof key !== "string" || key.length === 0 || key.length > MAX_IDEM_KEY_LENGTH) throw new InvalidArgumentError("key", "bad key");
    if (!isBytes(payload) || payload.length > MAX_QUEUE_PAYLOAD_BYTES) throw new InvalidArgumentError("payload", "bad payload");
    if (!Number.isSafeInteger(now)) throw new InvalidArgumentError("now", "bad now");
    // 1. Evict keys older than the window, unless the clock went backwards (this `now` is below the
    //    previous enqueue's); keep keys still queued.
    if (now >= this.previous) {
      this.seen = this.seen.filter((entry) => now - entry.at <= IDEM_WINDOW_MS || this.items.some((item) => item.key === entry.key));
    }
    this.previous = now;
    // 2. A remembered key is admitted again, as a duplicate, and not queued.
    if (this.seen.some((entry) => entry.key === key)) {
      this.counts.duplicates++;
      return "admit";
    }
    // 3. A full lane sheds; the key is not remembered.
    if (this.items.length >= this.capacity) {
      this.counts.shed++;
      return "shed";
    }
    // 4. Queue it and remember it.
    this.items.push({ id: this.nextId++, key, payload: copyBytes(payload) });
    this.seen.push({ key, at: now });
    this.counts.enqueued++;
    return "admit";
  }

  consume(): QueueItem | undefined {
    const item = this.items.shift();
    if (item !== undefined) this.counts.consumed++;
    return item;
  }

  stats(): Record<string, number> {
    return {
      [`${this.lane}_enqueued`]: this.counts.enqueued,
      [`${this.lane}_consumed`]: this.counts.consumed,
      [`${this.lane}_shed`]: this.counts.shed,
      [`${this.lane}_duplicates`]: this.counts.duplicates,
    };
  }

  len(): number {
    return this.items.length;
  }

  isEmpty(): boolean {
    return this.items.length === 0;
  }
}
