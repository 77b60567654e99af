/**
 * The forwarder's event target: `addEventListener` / `removeEventListener`
 * with the signatures of the DOM's `EventTarget`, dispatching `CustomEvent`s
 * where the platform has them (browsers, Node 19+, Workers) and plain
 * `{ type, detail }` objects elsewhere.
 *
 * Why not the platform `EventTarget` itself: a listener that throws inside
 * Node's `EventTarget` becomes an uncaught exception of the process, and the
 * forwarder promises that a throwing listener never stops it. Here every
 * listener runs inside a `try`; what it throws goes to `onListenerError`
 * (by default the platform's `reportError`, else `console.error`), never
 * nowhere, and the remaining listeners still run.
 */
import type { AbortSignalLike } from "../storage/options.js";

/** What a listener receives: a `CustomEvent` where the platform has one. */
export interface ForwarderEvent<Detail> {
  readonly type: string;
  readonly detail: Detail;
}

/** A listener: a function or an object with `handleEvent`, as for `EventTarget`. */
export type ForwarderListener<Detail> = ((event: ForwarderEvent<Detail>) => void) | { handleEvent(event: ForwarderEvent<Detail>): void };

/** Options of `addEventListener` (the subset of `AddEventListenerOptions` that applies). */
export interface ForwarderListenerOptions {
  /** Remove the listener after its first call. */
  readonly once?: boolean;
  /** Remove the listener when this signal aborts. */
  readonly signal?: AbortSignalLike;
}

interface Registration {
  readonly listener: ForwarderListener<never>;
  readonly once: boolean;
  readonly cleanup: (() => void) | null;
}

type CustomEventConstructor = new (type: string, init: { detail: unknown }) => ForwarderEvent<unknown>;

function makeEvent<Detail>(type: string, detail: Detail): ForwarderEvent<Detail> {
  const Ctor = (globalThis as Record<string, unknown>)["CustomEvent"];
  if (typeof Ctor === "function") return new (Ctor as CustomEventConstructor)(type, { detail }) as ForwarderEvent<Detail>;
  return Object.freeze({ type, detail });
}

/** The default home of a listener's exception: `reportError`, else `console.error`. */
export function reportListenerError(error: unknown): void {
  const host = globalThis as { reportError?: (error: unknown) => void; console?: { error?: (...data: unknown[]) => void } };
  if (typeof host.reportError === "function") host.reportError(error);
  else host.console?.error?.("isostore forwarder: an event listener threw", error);
}

/** A typed event target over an event map (`type` -> detail type). */
export class ForwarderEvents<EventMap extends object> {
  readonly #registrations = new Map<string, Registration[]>();
  readonly #onListenerError: (error: unknown, event: ForwarderEvent<unknown>) => void;

  constructor(onListenerError: (error: unknown, event: ForwarderEvent<unknown>) => void) {
    this.#onListenerError = onListenerError;
  }

  /** Add `listener` for `type` (a listener already registered for `type` is not added twice). */
  addEventListener<K extends keyof EventMap & string>(type: K, listener: ForwarderListener<EventMap[K]>, options?: ForwarderListenerOptions): void {
    if (typeof listener !== "function" && (listener === null || typeof listener !== "object")) return;
    const list = this.#registrations.get(type) ?? [];
    if (list.some((registration) => registration.listener === listener)) return;
    const signal = options?.signal;
    if (signal?.aborted) return;
    let cleanup: (() => void) | null = null;
    if (signal !== undefined) {
      const onAbort = () => this.removeEventListener(type, listener);
      signal.addEventListener("abort", onAbort, { once: true });
      cleanup = () => signal.removeEventListener("abort", onAbort);
    }
    list.push({ listener: listener, once: options?.once === true, cleanup });
    this.#registrations.set(type, list);
  }

  /** Remove `listener` from `type`. */
  removeEventListener<K extends keyof EventMap & string>(type: K, listener: ForwarderListener<EventMap[K]>): void {
    const list = this.#registrations.get(type);
    if (list === undefined) return;
    const index = list.findIndex((registration) => registration.listener === listener);
    if (index < 0) return;
    list[index]?.cleanup?.();
    list.splice(index, 1);
    if (list.length === 0) this.#registrations.delete(type);
  }

  /** Call every listener of `type` with a new event carrying `detail`; a throwing listener is reported, not propagated. */
  dispatch<K extends keyof EventMap & string>(type: K, detail: EventMap[K]): void {
    const list = this.#registrations.get(type);
    if (list === undefined || list.length === 0) return;
    const event = makeEvent(type, detail);
    for (const registration of [...list]) {
      if (registration.once) this.removeEventListener(type, registration.listener as ForwarderListener<EventMap[K]>);
      const listener = registration.listener as ForwarderListener<EventMap[K]>;
      try {
        const result: unknown = typeof listener === "function" ? listener(event) : listener.handleEvent(event);
        // An async listener's rejection is reported like a throw, never left unhandled.
        if (result !== null && typeof result === "object" && typeof (result as { then?: unknown }).then === "function") {
          (result as PromiseLike<unknown>).then(undefined, (error: unknown) => this.#report(error, event));
        }
      } catch (error) {
        this.#report(error, event);
      }
    }
  }

  #report(error: unknown, event: ForwarderEvent<unknown>): void {
    try {
      this.#onListenerError(error, event);
    } catch (secondary) {
      // The error hook itself failed: fall back to the platform's report rather than lose both.
      reportListenerError(secondary);
      reportListenerError(error);
    }
  }
}
