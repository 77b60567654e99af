/// <reference lib="dom" />
/**
 * Asking the browser to keep this origin's data: without it, IndexedDB is
 * "best-effort" storage that the browser may evict under storage pressure,
 * which no durability setting can protect against.
 *
 * Works in pages and workers (`navigator.storage` exists in both; `persist()`
 * only in pages, so a worker reports the current state without asking), and
 * reports `supported: false` where there is no StorageManager at all (Node).
 */

/** What {@link requestPersistentStorage} found out. */
export interface PersistentStorageReport {
  /** Whether the platform has a StorageManager (`navigator.storage`). */
  readonly supported: boolean;
  /** Whether the origin's storage is now persistent (not evicted under pressure). */
  readonly persisted: boolean;
  /** Bytes the origin uses, as the browser estimates them (null when unknown). */
  readonly usage: number | null;
  /** Bytes the origin may use, as the browser estimates them (null when unknown). */
  readonly quota: number | null;
}

/** The part of `StorageManager` this helper uses. */
export interface StorageManagerLike {
  persist?(): Promise<boolean>;
  persisted?(): Promise<boolean>;
  estimate?(): Promise<{ usage?: number; quota?: number }>;
}

/**
 * Ask for persistent storage (`navigator.storage.persist()`) and report the
 * outcome with the browser's usage and quota estimate. Browsers may grant it
 * silently (Chromium decides from engagement, installed apps, bookmarks),
 * prompt the user (Firefox), or refuse; it never throws for a refusal.
 *
 * @param storage The StorageManager to use; defaults to `navigator.storage`,
 * looked up when called.
 *
 * @example
 * ```ts
 * import { requestPersistentStorage } from "isostore/indexeddb";
 *
 * const { persisted, usage, quota } = await requestPersistentStorage();
 * if (!persisted) console.warn("usage events may be evicted under storage pressure");
 * if (usage !== null && quota !== null && usage > quota * 0.8) console.warn("storage nearly full");
 * ```
 */
export async function requestPersistentStorage(storage?: StorageManagerLike): Promise<PersistentStorageReport> {
  const manager = storage ?? (globalThis as { navigator?: { storage?: StorageManagerLike } }).navigator?.storage;
  if (manager === undefined) return { supported: false, persisted: false, usage: null, quota: null };
  let persisted = false;
  if (typeof manager.persist === "function") persisted = await manager.persist();
  else if (typeof manager.persisted === "function") persisted = await manager.persisted();
  let usage: number | null = null;
  let quota: number | null = null;
  if (typeof manager.estimate === "function") {
    const estimate = await manager.estimate();
    usage = estimate.usage ?? null;
    quota = estimate.quota ?? null;
  }
  return { supported: true, persisted, usage, quota };
}
