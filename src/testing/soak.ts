/**
 * Whether the conformance suites run at soak size (many more random
 * sequences). Asked for by `SOAK=1` in the environment (`process.env.SOAK`
 * where the runtime has one) or, in runtimes without a process environment
 * (a browser page), by setting `globalThis.ISOSTORE_SOAK = true` before the
 * suites are built; the repository's test setups do both from `SOAK=1 npm test`.
 */
export function soakRequested(): boolean {
  const host = globalThis as { process?: { env?: Record<string, string | undefined> }; ISOSTORE_SOAK?: unknown };
  return host.process?.env?.["SOAK"] === "1" || host.ISOSTORE_SOAK === true;
}

/**
 * The constraints of a model-based run's `fc.commands`: sequences of up to
 * `maxCommands` calls. `size: "max"` is what lets them get that long:
 * without it fast-check's default size stops a command list at about ten,
 * whatever `maxCommands` says.
 *
 * @example
 * ```ts
 * fc.asyncProperty(fc.commands(arbitraries, commandsUpTo(40)), async (commands) => { ... });
 * ```
 */
export function commandsUpTo(maxCommands: number): { readonly maxCommands: number; readonly size: "max" } {
  return { maxCommands, size: "max" };
}
