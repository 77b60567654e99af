/**
 * Bearer-token auth of the HTTP API.
 *
 * A token has a name (the `actor` recorded in the audit log) and scopes:
 * - `append:*` or `append:<namespace>`: append events of any / that namespace
 *   (`append` alone is `append:*`);
 * - `consume`: claim, ack, nack, extend, quarantine, stats, attempts;
 * - `operate`: review and resolve quarantined events, audit, prune (and stats, attempts);
 * - `store:*` or `store:<store>`: every store route of any / that store (ledger,
 *   KV, blobs, ordered index; `<store>` in the storage name grammar).
 *
 * Presented tokens are compared in constant time: both sides are hashed with
 * SHA-256 first (so lengths never leak), and every configured token is
 * compared in full, with no early exit, whichever matches.
 */
import { InvalidArgumentError } from "../journal/errors.js";
import { sha256 } from "../storage/web.js";

/** A scope a token may hold (`append` is short for `append:*`). */
export type Scope = "consume" | "operate" | "append" | `append:${string}` | `store:${string}`;

/** One configured token. */
export interface TokenConfig {
  /** Who holds it (1..64 printable characters): the `actor` of operator actions. */
  readonly name: string;
  /** The secret itself, at least 16 characters. */
  readonly token: string;
  readonly scopes: readonly Scope[];
}

/** Who is calling: the matched token's name and scopes. */
export interface Principal {
  readonly name: string;
  readonly scopes: ReadonlySet<string>;
}

/** `store:<store>` takes a storage name (at most 512 bytes: segments `[a-z0-9][a-z0-9_.-]*` joined by `/`). */
const SCOPE = /^(consume|operate|append|append:(\*|[^\s]{1,256})|store:(\*|(?=[a-z0-9_./-]{1,512}$)[a-z0-9][a-z0-9_.-]*(\/[a-z0-9][a-z0-9_.-]*)*))$/;

/**
 * Check token configuration (e.g. parsed from the `ISOSTORE_TOKENS` secret)
 * and return a frozen copy.
 *
 * @throws InvalidArgumentError naming the first problem.
 */
export function checkTokens(tokens: unknown): readonly TokenConfig[] {
  if (!Array.isArray(tokens)) throw new InvalidArgumentError("tokens", "must be an array of { name, token, scopes }");
  const seen = new Set<string>();
  return Object.freeze(
    tokens.map((entry: unknown, index) => {
      const where = `tokens[${index}]`;
      if (entry === null || typeof entry !== "object") throw new InvalidArgumentError(where, "must be an object { name, token, scopes }");
      const { name, token, scopes } = entry as Record<string, unknown>;
      if (typeof name !== "string" || !/^[\x21-\x7e]{1,64}$/.test(name)) throw new InvalidArgumentError(`${where}.name`, "must be 1 to 64 printable ASCII characters");
      if (typeof token !== "string" || token.length < 16 || token.length > 512 || !/^[\x21-\x7e]+$/.test(token)) {
        throw new InvalidArgumentError(`${where}.token`, "must be 16 to 512 printable ASCII characters");
      }
      if (seen.has(token)) throw new InvalidArgumentError(`${where}.token`, "is configured twice");
      seen.add(token);
      if (!Array.isArray(scopes) || !scopes.every((scope) => typeof scope === "string" && SCOPE.test(scope))) {
        throw new InvalidArgumentError(`${where}.scopes`, "must list scopes among `consume`, `operate`, `append`, `append:*`, `append:<namespace>`, `store:*`, `store:<store>`");
      }
      const normalised = (scopes as string[]).map((scope) => (scope === "append" ? "append:*" : scope)) as Scope[];
      return Object.freeze({ name, token, scopes: Object.freeze(normalised) });
    }),
  );
}

/** Constant-time matcher of presented bearer tokens against the configured ones. */
export class TokenMatcher {
  private readonly digests: Promise<{ digest: Uint8Array; principal: Principal }[]>;

  constructor(tokens: readonly TokenConfig[]) {
    const checked = checkTokens(tokens);
    this.digests = Promise.all(
      checked.map(async (config) => ({
        digest: await sha256(new TextEncoder().encode(config.token)),
        principal: Object.freeze({ name: config.name, scopes: new Set<string>(config.scopes) }),
      })),
    );
  }

  /** The principal whose token is `presented`, or null. */
  async match(presented: string): Promise<Principal | null> {
    const digest = await sha256(new TextEncoder().encode(presented));
    let found: Principal | null = null;
    for (const entry of await this.digests) {
      let difference = 0;
      for (let i = 0; i < digest.length; i++) difference |= digest[i]! ^ entry.digest[i]!;
      if (difference === 0) found = entry.principal;
    }
    return found;
  }
}

/** Whether `principal` may use the store routes of store `store` (`store:*` or `store:<store>`). */
export function mayUseStore(principal: Principal, store: string): boolean {
  return principal.scopes.has("store:*") || principal.scopes.has(`store:${store}`);
}

/**
 * Whether `principal` holds any journal scope (`consume`, `operate`, or an
 * `append` one): what describing the journals needs (a token for the store
 * routes only does not learn which journals and consumers a worker serves).
 */
export function usesJournals(principal: Principal): boolean {
  for (const scope of principal.scopes) if (scope === "consume" || scope === "operate" || scope === "append" || scope.startsWith("append:")) return true;
  return false;
}

/** Whether `principal` may append events of `namespace`. */
export function mayAppend(principal: Principal, namespace: string): boolean {
  return principal.scopes.has("append:*") || principal.scopes.has(`append:${namespace}`);
}

/**
 * Whether `principal` may append events of some namespace (an `append` scope):
 * what the append routes check before the body is read.
 */
export function appendsAny(principal: Principal): boolean {
  for (const scope of principal.scopes) if (scope.startsWith("append:")) return true;
  return false;
}
