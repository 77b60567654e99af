/**
 * One forwarder per origin: the forwarder holds an exclusive named lock while
 * it forwards, and a second forwarder (another tab) waits in standby until
 * the lock is granted to it, which the browser does when the holding tab
 * closes or crashes. The lock is the Web Locks API (`navigator.locks`) behind
 * the one member the forwarder uses, so Node tests inject their own manager
 * and the core compiles without DOM typings.
 *
 * Promise of a manager: `request(name, { signal }, callback)` calls `callback`
 * once the lock is granted and holds it until the promise `callback` returned
 * settles; at most one callback per name runs at a time; aborting `signal`
 * before the grant rejects the request with the signal's reason and never
 * calls `callback`.
 */
import type { AbortSignalLike } from "../storage/options.js";

/** The part of the Web Locks `LockManager` the forwarder uses; `navigator.locks` fits. */
export interface LockManagerLike {
  request(name: string, options: { readonly signal?: AbortSignalLike }, callback: (lock: unknown) => Promise<void>): Promise<unknown>;
}

/**
 * The platform's Web Locks manager (`globalThis.navigator.locks`), or `null`
 * where there is none (Node, Workers, old browsers). Looked up when called.
 *
 * @example
 * const manager = browserLocks();
 * if (manager === null) console.warn("no Web Locks: every tab forwards");
 */
export function browserLocks(host: unknown = globalThis): LockManagerLike | null {
  const locks = (host as { navigator?: { locks?: unknown } } | null | undefined)?.navigator?.locks;
  if (locks === null || typeof locks !== "object") return null;
  if (typeof (locks as { request?: unknown }).request !== "function") return null;
  return locks as LockManagerLike;
}

/** A rejection reason as an Error (an abort reason is usually one already, a `DOMException`). */
function asError(reason: unknown, fallback: string): Error {
  if (reason instanceof Error) return reason;
  return new Error(typeof reason === "string" ? reason : fallback, reason === undefined ? undefined : { cause: reason });
}

interface Waiter {
  readonly callback: (lock: unknown) => Promise<void>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (reason: unknown) => void;
  readonly signal: AbortSignalLike | undefined;
  readonly onAbort: () => void;
}

/**
 * An in-process lock manager with Web Locks semantics (exclusive mode only):
 * for Node processes that run several forwarders, and for tests.
 *
 * @example
 * const locks = localLockManager();
 * const a = createForwarder({ ...options, lock: { name: "usage-forwarder", manager: locks } });
 * const b = createForwarder({ ...options, lock: { name: "usage-forwarder", manager: locks } });
 * a.start(); b.start(); // b stands by until a stops
 */
export function localLockManager(): LockManagerLike & { held(name: string): boolean; waiting(name: string): number } {
  const holders = new Set<string>();
  const queues = new Map<string, Waiter[]>();

  function grantNext(name: string): void {
    const queue = queues.get(name);
    const next = queue?.shift();
    if (queue !== undefined && queue.length === 0) queues.delete(name);
    if (next === undefined) return;
    next.signal?.removeEventListener("abort", next.onAbort);
    holders.add(name);
    const lock = Object.freeze({ name, mode: "exclusive" });
    let held: Promise<void>;
    try {
      held = Promise.resolve(next.callback(lock));
    } catch (error) {
      held = Promise.reject(asError(error, "the lock callback threw"));
    }
    // As with Web Locks, the lock is released before the request settles.
    const release = () => {
      holders.delete(name);
      grantNext(name);
    };
    held.then(
      (value) => {
        release();
        next.resolve(value);
      },
      (error: unknown) => {
        release();
        next.reject(error);
      },
    );
  }

  return {
    request(name, options, callback) {
      return new Promise<unknown>((resolve, reject) => {
        const signal = options.signal;
        if (signal?.aborted) {
          reject(asError(signal.reason, "the lock request was aborted"));
          return;
        }
        const waiter: Waiter = {
          callback,
          resolve,
          reject,
          signal,
          onAbort: () => {
            const queue = queues.get(name) ?? [];
            const index = queue.indexOf(waiter);
            if (index < 0) return;
            queue.splice(index, 1);
            if (queue.length === 0) queues.delete(name);
            reject(asError(signal?.reason, "the lock request was aborted"));
          },
        };
        signal?.addEventListener("abort", waiter.onAbort, { once: true });
        const queue = queues.get(name) ?? [];
        queue.push(waiter);
        queues.set(name, queue);
        if (!holders.has(name)) grantNext(name);
      });
    },
    held: (name) => holders.has(name),
    waiting: (name) => queues.get(name)?.length ?? 0,
  };
}
