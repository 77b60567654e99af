/**
 * The `cause` chain of an error, for the modules that ask what lies under an
 * error (the forwarder's classification of sink failures, the worker's
 * mapping of storage failures to statuses). Internal: not exported from the
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
