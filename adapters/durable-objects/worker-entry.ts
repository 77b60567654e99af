/**
 * The isostore Worker (`wrangler.toml` `main`; `npm start` runs it with
 * `wrangler dev`): the HTTP API of `isostore/worker` over `PartitionedJournal`s
 * on the `PARTITIONS` Durable Object binding, its store routes
 * (`/v1/stores/{store}/...`) over `StoreObject`s on the `STORES` binding (one
 * object per store name, when bound), and the operator UI's static files
 * (`web/dist`, the `ASSETS` binding) under a strict CSP.
 *
 * Configuration (Worker vars and secrets; `.dev.vars` locally):
 * - `ISOSTORE_TOKENS` (secret): JSON array of `{ name, token, scopes }`
 *   (scopes `append:*`, `append:<namespace>`, `consume`, `operate`,
 *   `store:*`, `store:<store>`).
 * - `ISOSTORE_JOURNALS` (var, optional): JSON object of journal name ->
 *   `{ partitions?, consumers?, capacity? }` (default
 *   `{ "usage": { "partitions": 1, "consumers": ["billing"] } }`). P is fixed
 *   once a journal exists; opening it with another P is refused.
 * - `ISOSTORE_CORS_ORIGINS` (var, optional): comma-separated origins allowed
 *   to call the API from browsers (`*` for any).
 *
 * A configuration that does not parse answers every request with a 500
 * (the worker's log says which setting is wrong), rather than serving with a
 * half-read configuration.
 */
/// <reference types="@cloudflare/workers-types" />
import { BILLING_GRADE } from "../../src/journal/event.js";
import type { Capacity } from "../../src/journal/types.js";
import { createApp, type ServedJournal } from "../../src/worker/app.js";
import { checkTokens } from "../../src/worker/auth.js";
import { PartitionedJournal, PartitionedJournalMemory, type PartitionNamespace } from "./partitioned-journal.js";
import { StoreObjectClient, type StoreObjectNamespace } from "./store-client.js";

export { JournalPartition } from "./partition.js";
export { StoreObject } from "./store-object.js";

/** The bindings and settings the isostore Worker reads. */
export interface IsostoreWorkerEnv {
  readonly PARTITIONS: PartitionNamespace;
  /** Optional: the `StoreObject` namespace the store routes use (no store routes without it). */
  readonly STORES?: StoreObjectNamespace;
  readonly ASSETS?: { fetch(request: Request): Promise<Response> };
  readonly ISOSTORE_TOKENS?: string;
  readonly ISOSTORE_JOURNALS?: string;
  readonly ISOSTORE_CORS_ORIGINS?: string;
}

interface JournalSetting {
  readonly partitions?: number;
  readonly consumers?: readonly string[];
  readonly capacity?: Capacity;
}

const DEFAULT_JOURNALS: Record<string, JournalSetting> = { usage: { partitions: 1, consumers: ["billing"] } };

/**
 * Parse a JSON setting. For a `secret` one the parser's message is left out:
 * it quotes the text around the fault, which may be part of a token.
 */
function parseSetting<T>(name: string, text: string | undefined, fallback: T, secret = false): T {
  if (text === undefined || text.trim() === "") return fallback;
  try {
    return JSON.parse(text) as T;
  } catch (error) {
    const detail = secret ? " (the parser's message is not repeated: it may quote the secret)" : `: ${error instanceof Error ? error.message : String(error)}`;
    throw new Error(`${name} is not valid JSON${detail}`);
  }
}

/** Build the app from the Worker's env (once per isolate: bindings and settings do not change within one). */
export function appFromEnv(env: IsostoreWorkerEnv): { fetch(request: Request): Response | Promise<Response> } {
  const tokens = checkTokens(parseSetting<unknown>("ISOSTORE_TOKENS", env.ISOSTORE_TOKENS, [], true));
  const settings = parseSetting<Record<string, JournalSetting>>("ISOSTORE_JOURNALS", env.ISOSTORE_JOURNALS, DEFAULT_JOURNALS);
  if (settings === null || typeof settings !== "object" || Array.isArray(settings)) throw new Error("ISOSTORE_JOURNALS must be a JSON object of journal name -> settings");
  // Durable Object stubs belong to the request that made them, so each request gets its own
  // PartitionedJournal objects (cheap: a name, options and lazily made stubs); what they learn
  // (P checked, request id hints, registrations, where each consumer's next claim starts) is
  // kept for the isolate in `memory`.
  const memory = new PartitionedJournalMemory();
  const journals = (): Record<string, ServedJournal> =>
    Object.fromEntries(
      Object.entries(settings).map(([name, setting]) => [
        name,
        { journal: new PartitionedJournal(env.PARTITIONS, { name, partitions: setting.partitions ?? 1, capacity: setting.capacity ?? BILLING_GRADE, memory }), consumers: setting.consumers ?? [] },
      ]),
    );
  // Check the settings once, now, so a bad one is reported before any request is served.
  journals();
  const corsOrigins = (env.ISOSTORE_CORS_ORIGINS ?? "")
    .split(",")
    .map((origin) => origin.trim())
    .filter((origin) => origin !== "");
  const assets = env.ASSETS;
  const storeObjects = env.STORES;
  return createApp({
    journals,
    auth: { tokens },
    corsOrigins,
    ...(assets ? { assets: (request: Request) => assets.fetch(request) } : {}),
    // Asked per request (a client's stub belongs to the request that made it); any valid name is a store.
    ...(storeObjects ? { stores: (name: string) => new StoreObjectClient(storeObjects, name) } : {}),
  });
}

// Built on the first request of an isolate (bindings and settings are fixed for its lifetime).
let built: { app: ReturnType<typeof appFromEnv> } | { error: Error } | null = null;

export default {
  fetch(request: Request, env: IsostoreWorkerEnv): Response | Promise<Response> {
    if (built === null) {
      try {
        built = { app: appFromEnv(env) };
      } catch (error) {
        built = { error: error instanceof Error ? error : new Error(String(error)) };
        console.error("isostore worker configuration:", built.error.message);
      }
    }
    if ("error" in built) {
      // Answered before any authentication, so to anyone: the detail is in the worker's log only.
      const body = { error: { code: "misconfigured", message: "the worker is misconfigured; its log says how", retryable: false } };
      return new Response(JSON.stringify(body), { status: 500, headers: { "content-type": "application/json; charset=utf-8" } });
    }
    return built.app.fetch(request);
  },
} satisfies ExportedHandler<IsostoreWorkerEnv>;
