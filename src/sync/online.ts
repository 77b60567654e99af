/**
 * Online state behind a two-member interface, so the forwarder pauses while
 * the device is offline and wakes the moment it is back, and tests drive it by
 * hand. {@link browserOnline} builds one on `navigator.onLine` and the
 * `online` / `offline` events of `globalThis` (a window, a worker or a
 * service worker alike), looked up when called and feature-detected, so this
 * module loads in Node and in Workers and compiles without DOM typings.
 */

/** A source of online state. */
export interface OnlineSource {
  /** Whether the network is believed reachable now. */
  isOnline(): boolean;
  /** Call `listener` whenever the state may have changed; returns the unsubscribe function. */
  subscribe(listener: (online: boolean) => void): () => void;
}

/** The `globalThis` members {@link browserOnline} uses, typed structurally. */
interface OnlineHost {
  readonly navigator?: { readonly onLine?: unknown };
  addEventListener?(type: string, listener: () => void): void;
  removeEventListener?(type: string, listener: () => void): void;
}

/**
 * A source that is always online: the forwarder's default, and the right one
 * in Node and in Workers.
 *
 * @example
 * createForwarder({ source, consumer: "edge", sink, online: alwaysOnline() });
 */
export function alwaysOnline(): OnlineSource {
  return { isOnline: () => true, subscribe: () => () => undefined };
}

/**
 * Online state from the platform: `navigator.onLine` (online when it is
 * missing or not a boolean: a runtime that cannot tell is not treated as
 * offline forever) and the `online` / `offline` events of `globalThis` (no
 * subscription when `globalThis` has no `addEventListener`).
 *
 * `navigator.onLine === true` only means "some network": a failed request is
 * still handled by backoff.
 *
 * @example
 * const forwarder = createForwarder({ source, consumer: "edge", sink, online: browserOnline() });
 */
export function browserOnline(host: unknown = globalThis): OnlineSource {
  const target = host as OnlineHost;
  return {
    isOnline(): boolean {
      const flag = target.navigator?.onLine;
      return typeof flag === "boolean" ? flag : true;
    },
    subscribe(listener: (online: boolean) => void): () => void {
      if (typeof target.addEventListener !== "function" || typeof target.removeEventListener !== "function") return () => undefined;
      const onOnline = () => listener(true);
      const onOffline = () => listener(false);
      target.addEventListener("online", onOnline);
      target.addEventListener("offline", onOffline);
      return () => {
        target.removeEventListener?.("online", onOnline);
        target.removeEventListener?.("offline", onOffline);
      };
    },
  };
}
