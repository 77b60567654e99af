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
 * space). Where there is no StorageManager (Node with
 * fake-indexeddb, old browsers), or its estimate fails or has no quota, no
 * transaction is refused by this check.
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

/** The usage, quota and reserve of the last estimate. */
interface Estimate {
  readonly usage: number;
  readonly quota: number;
  readonly reserve: number;
}

/**
 * The headroom an engine keeps (see the module comment): the last estimate,
 * the bytes committed since, and the verdict on a growing transaction.
 */
export class Headroom {
  /** The last usable estimate (null: none yet, or the last one failed: nothing is refused). */
  private estimate: Estimate | null = null;
  /** When the last estimate was asked for, usable or not (the clock; -Infinity: never). */
  private askedAt = -Infinity;
  /** Bytes this engine committed since the last estimate was asked for (counted in no estimate yet). */
  private written = 0;
  /** False once no StorageManager was found: the check is off for good. */
  private enabled = true;
  private manager: StorageEstimator | null = null;

  constructor(
    /** The StorageManager, looked up on first use (undefined: none, the check is off). */
    private readonly storage: () => StorageEstimator | undefined,
    /** Bytes to keep free; undefined: {@link defaultReserveBytes} of each estimate's quota. */
    private readonly reserveBytes: number | undefined,
    private readonly clock: () => number,
  ) {
    if (reserveBytes === 0) this.enabled = false;
  }

  /** Count bytes a transaction of this engine committed. */
  wrote(bytes: number): void {
    this.written += bytes;
  }

  /** Whether a growing transaction must wait for a fresh estimate first ({@link refresh}). */
  get stale(): boolean {
    if (!this.enabled) return false;
    const now = this.clock();
    const age = now - this.askedAt;
    if (!(age >= 0 && age < ESTIMATE_TTL_MS)) return true;
    const estimate = this.estimate;
    if (estimate === null) return false;
    return this.written >= (estimate.quota - estimate.reserve - estimate.usage) / 4;
  }

  /**
   * Ask for a fresh estimate; never rejects (a failed estimate turns the
   * check off until the next one; a StorageManager lookup that throws, for
   * good).
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
    const at = this.clock();
    const before = this.written;
    this.askedAt = at;
    let answer: { usage?: number; quota?: number };
    try {
      answer = await this.manager.estimate!();
    } catch {
      this.estimate = null;
      return;
    }
    const { usage, quota } = answer;
    // Commits that completed while the estimate was asked for may be in it or not: keep counting them.
    this.written -= before;
    if (typeof usage !== "number" || typeof quota !== "number" || !Number.isFinite(usage) || !Number.isFinite(quota) || quota <= 0) {
      this.estimate = null;
      return;
    }
    this.estimate = { usage, quota, reserve: this.reserveBytes ?? defaultReserveBytes(quota) };
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
