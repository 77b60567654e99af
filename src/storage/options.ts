/**
 * Per-call options of the storage primitives: Go's `context.Context` becomes
 * an optional `{ signal }` last argument.
 *
 * The promise: an aborted call rejects with the signal's `reason` and changes
 * nothing. Primitives check the signal before doing anything and again
 * inside the engine transaction just before it commits (a throw there rolls
 * the whole transaction back), so an abort either lands before the commit
 * and nothing happened, or after it and the call succeeded.
 *
 * The core compiles without DOM or Node typings, so the signal is typed by
 * the few members it uses; a real `AbortSignal` fits.
 */
import { InvalidArgumentError, StorageError } from "./errors.js";

/** The part of an `AbortSignal` the storage primitives use. */
export interface AbortSignalLike {
  readonly aborted: boolean;
  readonly reason?: unknown;
  addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: "abort", listener: () => void): void;
}

/**
 * The signal type handed out (`Lease.signal`): the platform's own
 * `AbortSignal` wherever its typings are loaded (DOM, Node, Workers), so it
 * can go straight to `fetch`; {@link AbortSignalLike} where they are not.
 */
export type PlatformAbortSignal = typeof globalThis extends { AbortSignal: { prototype: infer S } } ? S : AbortSignalLike;

/** The last, optional argument of every storage call. */
export interface CallOptions {
  /** Aborting it rejects the call with `signal.reason`; an aborted call changes nothing. */
  readonly signal?: AbortSignalLike | undefined;
}

/** Thrown for an aborted signal that carries no reason (older runtimes). */
export class AbortedError extends StorageError {
  declare readonly code: "aborted";
  constructor() {
    super("aborted", "the storage call was aborted");
    this.name = "AbortedError";
  }
}

/**
 * Check the options of a call: refuse a malformed signal, and throw the
 * signal's reason when it is already aborted. Call it first in every public
 * method and again just before a transaction commits.
 *
 * @example
 * ```ts
 * async function tip(name: string, options?: CallOptions) {
 *   throwIfAborted(options);
 *   return engine.transact("readonly", async (tx) => {
 *     const row = await tx.get(key(name));
 *     throwIfAborted(options); // nothing committed yet
 *     return row ?? 0;
 *   });
 * }
 * ```
 */
export function throwIfAborted(options: CallOptions | undefined): void {
  if (options === undefined || options === null) return;
  if (typeof options !== "object") throw new InvalidArgumentError("options", "must be an object");
  const signal = options.signal;
  if (signal === undefined || signal === null) return;
  if (typeof signal !== "object" || typeof signal.aborted !== "boolean") {
    throw new InvalidArgumentError("options.signal", "must be an AbortSignal");
  }
  // The spec's promise is "rejects with the signal's reason", whatever it is.
  // eslint-disable-next-line @typescript-eslint/only-throw-error
  if (signal.aborted) throw signal.reason ?? new AbortedError();
}

/**
 * Check an optional function-valued option of a factory (a clock, a
 * callback) when it is given, so a bad one is refused where it is passed,
 * before anything is created, rather than as an untyped `TypeError` in the
 * middle of a later call.
 *
 * @throws {InvalidArgumentError} naming `argument` when `value` is neither `undefined` nor a function.
 */
export function checkOptionalFunction<T>(argument: string, value: T | undefined): T | undefined {
  if (value !== undefined && typeof value !== "function") throw new InvalidArgumentError(argument, "must be a function");
  return value;
}
