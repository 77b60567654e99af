/**
 * The journal conformance suite against `HttpJournal` -> `createApp` ->
 * a memory journal, in Node (the fast lane; the workers project runs the same
 * suite against Durable Objects). The client's fetch is the app's own
 * `fetch`, so every call crosses the real HTTP layer: JSON bodies, zod
 * validation, auth, the error mapping and the client's typed-error rebuild.
 */
import { describe, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { HttpJournal, type FetchLike } from "../../src/http/index.js";
import { createJournal, type Capacity, type UsageJournal } from "../../src/index.js";
import { journalConformanceCases, soakRequested } from "../../src/testing/index.js";
import { createApp } from "../../src/worker/index.js";

const TOKEN = "conformance-token-0123456789";

/** An HttpJournal over an app that serves `journal`. */
function overHttp(journal: UsageJournal, options: { name: string; capacity: Capacity }): HttpJournal {
  const app = createApp({
    journals: { [options.name]: journal },
    auditActor: "caller", // the contract's actor, as the caller reports it (the default records the token's name)
    auth: { tokens: [{ name: "suite", token: TOKEN, scopes: ["append:*", "consume", "operate"] }] },
  });
  const fetch: FetchLike = async (url, init) => app.fetch(new Request(url, init));
  return new HttpJournal({ baseUrl: "http://isostore.test", journal: options.name, token: TOKEN, fetch, capacity: journal.capacity, mode: journal.mode, retry: { attempts: 1 } });
}

describe("HttpJournal over the app over a memory journal", () => {
  const cases = journalConformanceCases({
    label: "http -> memory",
    durable: false,
    canReopen: true,
    canChangeCapacity: true,
    runs: soakRequested() ? 2000 : 60,
    createSubject: async (options) => {
      const engine = memoryEngine();
      return {
        journal: overHttp(createJournal(engine, options), options),
        reopen: async (changed) => overHttp(createJournal(engine, { ...options, ...changed }), { ...options, ...changed }),
        close: () => engine.close(),
      };
    },
  });
  for (const c of cases) it(c.name, c.run, c.timeoutMs);
});
