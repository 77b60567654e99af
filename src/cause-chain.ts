/**
 * The `cause` chain of an error, for the modules that ask what lies under an
 * error (the forwarder's classification of sink failures, the worker's
 * mapping of storage failures to statuses, and the wire codecs that carry
 * what that mapping needs across RPC). Internal: not exported from the
 * package.
 */

/** The error and the `cause`s under it, outermost first (at most 8 links: a cycle or a long chain ends the walk). */
export function causeChain(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let current = error; current !== null && typeof current === "object" && chain.length < 8 && !chain.includes(current); current = (current as { cause?: unknown }).cause) {
    chain.push(current);
  }
  return chain;
}

/**
 * What a failure's causes say that waiting fixes, as plain data (so it can
 * cross a process boundary): `code` `"storage_full"` when a cause under the
 * error has it (a full storage object), `overloaded: true` when one is
 * overloaded. Only these two marks: no message, nothing else of the cause.
 */
export interface WaitOutMarks {
  readonly code?: "storage_full";
  readonly overloaded?: true;
}

/**
 * The {@link WaitOutMarks} of the causes under `error` (the error itself not
 * included), or `undefined` when none has one.
 */
export function waitOutMarks(error: unknown): WaitOutMarks | undefined {
  let full = false;
  let overloaded = false;
  for (const link of causeChain(error).slice(1)) {
    const marks = link as { overloaded?: unknown; code?: unknown };
    if (marks.code === "storage_full") full = true;
    if (marks.overloaded === true) overloaded = true;
  }
  if (!full && !overloaded) return undefined;
  return { ...(full ? { code: "storage_full" as const } : {}), ...(overloaded ? { overloaded: true as const } : {}) };
}

/**
 * A stand-in for a remote cause that carried {@link WaitOutMarks}: an `Error`
 * with the marks that are well formed in `marks` (anything else in it is
 * ignored) and a message naming them, or `undefined` when there are none.
 */
export function waitOutCause(marks: unknown): Error | undefined {
  if (typeof marks !== "object" || marks === null) return undefined;
  const { code, overloaded } = marks as { code?: unknown; overloaded?: unknown };
  const full = code === "storage_full";
  if (!full && overloaded !== true) return undefined;
  const cause = new Error(`the remote storage object is ${[full ? "full" : "", overloaded === true ? "overloaded" : ""].filter(Boolean).join(" and ")}`);
  if (full) Object.defineProperty(cause, "code", { value: code, enumerable: true });
  if (overloaded === true) Object.defineProperty(cause, "overloaded", { value: true, enumerable: true });
  return cause;
}
