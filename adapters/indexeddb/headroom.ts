/**
 * Headroom: the storage the IndexedDB engine keeps free so that a full
 * journal can still be drained.
 *
 * Why (measured in Chromium 156, test/node/indexeddb-quota.test.ts): on disk,
 * once an origin is at its quota, IndexedDB refuses every put, even 100
 * bytes, and a delete RAISES the usage (it is logged, and the space comes
 * back only when the storage compacts, which at that size it did not do for
 * minutes, nor after a restart). A journal whose appends filled the quota can
 * then never be drained: claims, acks and prunes are all refused. So the
 * transactions that grow the data without bound (the journal's appends, hint
 * `grows` of `Engine.transact`) are refused early, while the origin's usage
 * plus what they would write exceeds `quota - reserve`; every other
 * transaction may use the reserve.
 *
 * Usage and quota come from `navigator.storage.estimate()` (one IPC to the
 * browser: 0.3-0.6 ms in Chromium 156, against 1.4 ms or more for a strict
 * append), kept and refreshed only when stale: older than
 * {@link ESTIMATE_TTL_MS} (another tab, or other storage of the origin, may
 * have written), or when this engine wrote, since, a quarter of the room the
 * estimate left above the limit (nearly full, every growing transaction reads
 * a fresh one). Between two estimates the bytes this engine committed are
 * added to the estimated usage, and after a refusal the next growing
 * transaction reads a fresh estimate (the drain it calls for may have freed
 * space). Estimates asked for at once (the one transactions wait for, and
 * the one a refusal asks for) are numbered, and the newest answer wins:
 * the bytes committed since are counted from the estimate in use, never
 * taken off twice. Where there is no StorageManager (Node with
 * fake-indexeddb, old browsers), or its estimate fails, has no quota or
 * does not answer within {@link ESTIMATE_TIMEOUT_MS}, no transaction is
 * refused by this check (an answer that comes late is still taken).
 */
import { IndexedDbEngineError } from "./errors.js";
import type { StorageManagerLike } from "./persistent-storage.js";

/** The errors {@link Headroom.refusal} made (the engine tells them from a browser's refusal). */
const REFUSALS = new WeakSet<object>();

/** Whether `error` is a refusal for the reserve (not the browser's). */
export function isReserveRefusal(error: unknown): boolean {
  return typeof error === "object" && error !== null && REFUSALS.has(error);
}

/** How long an estimate is trusted (ms): other tabs and other storage of the origin write too. */
export const ESTIMATE_TTL_MS = 1_000;

/** The smallest default reserve: 64 MiB. */
export const MIN_DEFAULT_RESERVE_BYTES = 64 * 1024 * 1024;

/**
 * The reserve kept when `reserveBytes` is not given: a tenth of the quota,
 * at least {@link MIN_DEFAULT_RESERVE_BYTES}, and never more than half the
 * quota (a small quota still takes appends). See `reserveBytes` in
 * `./index.ts` for why.
 */
export function defaultReserveBytes(quota: number): number {
  return Math.min(quota / 2, Math.max(MIN_DEFAULT_RESERVE_BYTES, quota / 10));
}

/** What the engine needs of a StorageManager: its estimate. */
export type StorageEstimator = Pick<StorageManagerLike, "estimate">;

/** The platform's `navigator.storage`, looked up when first needed (undefined where there is none). */
export function storageFromGlobals(): StorageEstimator | undefined {
  return (globalThis as { navigator?: { storage?: StorageEstimator } }).navigator?.storage;
}

/**
 * How long a growing transaction waits for an estimate (ms) before the check
 * is taken as unavailable for it: `estimate()` is one IPC of well under a
 * millisecond, and one that never answers must not stall the engine (every
 * transaction called after a growing one waits with it). As long as an
 * estimate is trusted ({@link ESTIMATE_TTL_MS}); an answer that comes later
 * is still taken (see {@link Headroom.refresh}), so a slow estimate turns the
 * check off only until it answered.
 */
export const ESTIMATE_TIMEOUT_MS = ESTIMATE_TTL_MS;

/** The usage, quota and reserve of an estimate, and the bytes this engine had committed when it was asked for. */
interface Estimate {
  readonly usage: number;
  readonly quota: number;
  readonly reserve: number;
  /** {@link Headroom}'s `committed` when the estimate was asked for (the bytes after it are in no estimate yet). */
  readonly counted: number;
}

/**
 * The headroom an engine keeps (see the module comment): the last estimate,
 * the bytes committed since, and the verdict on a growing transaction.
 *
 * Estimates may be asked for while another one is pending (the engine asks
 * once for the transactions that wait, and once more after a refusal), and
 * may answer in any order: each is numbered when asked for, an answer older
 * than the one in use is dropped, and the bytes committed since an estimate
 * are counted from that estimate's own count ({@link Estimate.counted}), so
 * no byte is ever taken off twice.
 */
export class Headroom {
  /** The estimate in use (null: none yet, or the newest answer failed or timed out: nothing is refused). */
  private estimate: Estimate | null = null;
  /** When the last estimate was asked for, usable or not (the clock; -Infinity: never). */
  private askedAt = -Infinity;
  /** Bytes this engine committed, all told (only ever grows). */
  private committed = 0;
  /** Estimates asked for so far (the number of the newest one). */
  private asked = 0;
  /** The number of the estimate whose answer is in use (an older answer is dropped). */
  private answered = 0;
  /** Estimates that timed out and have not answered yet: while there is one, no other is asked for. */
  private hung = 0;
  /** False once no StorageManager was found: the check is off for good. */
  private enabled = true;
  private manager: StorageEstimator | null = null;

  constructor(
    /** The StorageManager, looked up on first use (undefined: none, the check is off). */
    private readonly storage: () => StorageEstimator | undefined,
    /** Bytes to keep free; undefined: {@link defaultReserveBytes} of each estimate's quota. */
    private readonly reserveBytes: number | undefined,
    private readonly clock: () => number,
    /** How long {@link refresh} waits for an answer (ms); tests shorten it. */
    private readonly timeoutMs: number = ESTIMATE_TIMEOUT_MS,
  ) {
    if (reserveBytes === 0) this.enabled = false;
  }

  /** Count bytes a transaction of this engine committed. */
  wrote(bytes: number): void {
    this.committed += bytes;
  }

  /** Bytes this engine committed since the estimate in use was asked for (0 without one). */
  get written(): number {
    return this.estimate === null ? 0 : this.committed - this.estimate.counted;
  }

  /** Whether a growing transaction must wait for a fresh estimate first ({@link refresh}); never while one that timed out has not answered. */
  get stale(): boolean {
    if (!this.enabled || this.hung > 0) return false;
    const now = this.clock();
    const age = now - this.askedAt;
    if (!(age >= 0 && age < ESTIMATE_TTL_MS)) return true;
    const estimate = this.estimate;
    if (estimate === null) return false;
    return this.written >= (estimate.quota - estimate.reserve - estimate.usage) / 4;
  }

  /**
   * Ask for a fresh estimate; never rejects, and settles within
   * {@link timeoutMs} (a failed estimate turns the check off until the next
   * one; a StorageManager lookup that throws, for good; one that does not
   * answer in time counts as failed, and its answer is still taken when it
   * comes, unless a newer one was meanwhile). While an estimate that timed
   * out has not answered, no other is asked for: this returns at once.
   */
  async refresh(): Promise<void> {
    if (this.manager === null) {
      let manager: StorageEstimator | undefined;
      try {
        manager = this.enabled ? this.storage() : undefined;
      } catch {
        manager = undefined;
      }
      if (manager === undefined || manager === null || typeof manager.estimate !== "function") {
        this.enabled = false;
        return;
      }
      this.manager = manager;
    }
    if (this.hung > 0) return;
    const manager = this.manager;
    const number = ++this.asked;
    // Commits that complete while the estimate is asked for may be in it or not: keep counting them.
    const counted = this.committed;
    this.askedAt = this.clock();
    await new Promise<void>((resolve) => {
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        this.hung++;
        this.take(number, undefined, counted);
        resolve();
      }, this.timeoutMs);
      const answer = (value: { usage?: number; quota?: number } | undefined): void => {
        if (timedOut) this.hung--;
        else clearTimeout(timer);
        this.take(number, value, counted);
        resolve();
      };
      let asking: Promise<{ usage?: number; quota?: number }>;
      try {
        asking = Promise.resolve(manager.estimate!());
      } catch {
        answer(undefined);
        return;
      }
      asking.then(answer, () => answer(undefined));
    });
  }

  /**
   * Use the answer to estimate `number` (`undefined`: it failed or timed out),
   * asked for when this engine had committed `counted` bytes, unless a newer
   * estimate already answered.
   */
  private take(number: number, answer: { usage?: number; quota?: number } | undefined, counted: number): void {
    if (number < this.answered) return;
    this.answered = number;
    const usage = answer?.usage;
    const quota = answer?.quota;
    if (typeof usage !== "number" || typeof quota !== "number" || !Number.isFinite(usage) || !Number.isFinite(quota) || quota <= 0) {
      this.estimate = null;
      return;
    }
    this.estimate = { usage, quota, reserve: this.reserveBytes ?? defaultReserveBytes(quota), counted };
  }

  /**
   * The refusal of a growing transaction that would write `bytes`, or null
   * when it fits: the estimated usage, plus what this engine committed
   * since, plus `bytes`, must stay within `quota - reserve`.
   */
  refusal(bytes: number): IndexedDbEngineError | null {
    const estimate = this.estimate;
    if (!this.enabled || estimate === null) return null;
    const limit = estimate.quota - estimate.reserve;
    const usage = estimate.usage + this.written;
    if (usage + bytes <= limit) return null;
    // The next growing transaction reads a fresh estimate: the drain this refusal calls for may free space.
    this.askedAt = -Infinity;
    const refusal = new IndexedDbEngineError(
      "quota_exceeded",
      `storage is nearly full: a transaction that grows the data (${bytes} bytes) is refused while the origin's usage (about ${Math.round(usage)} bytes) would exceed its quota (${Math.round(estimate.quota)}) less the reserve kept for draining (${Math.round(estimate.reserve)}); nothing was written`,
      { retryable: false },
    );
    REFUSALS.add(refusal);
    return refusal;
  }
}
