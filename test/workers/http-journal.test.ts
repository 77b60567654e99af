/**
 * The journal conformance suite against `HttpJournal` -> `createApp` ->
 * `PartitionedJournal` -> `JournalPartition` objects, inside workerd.
 *
 * The client's fetch is the app's `fetch`, so every call crosses the real
 * HTTP layer (JSON, zod validation, auth, the error mapping, the client's
 * typed-error rebuild) and then Workers RPC to SQLite-backed objects. The
 * suite's virtual clock is the PartitionedJournal's clock; the client sends
 * the `now` of every call that takes one. Each subject's partitions are fresh
 * objects (a scope of their own); "reopen" is a new app and client over the
 * same objects.
 */
import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { PartitionedJournal } from "../../adapters/durable-objects/index.js";
import { HttpJournal, type FetchLike } from "../../src/http/index.js";
import { journalConformanceCases, soakRequested } from "../../src/testing/index.js";
import { MAX_EPOCH_MS } from "../../src/index.js";
import { createApp } from "../../src/worker/index.js";

const TOKEN = "workers-conformance-token-0123";
let scopes = 0;

describe("HttpJournal -> app -> partitioned journal (P = 1) in workerd", () => {
  const cases = journalConformanceCases({
    label: "http -> partitioned P=1",
    durable: true,
    canReopen: true,
    canChangeCapacity: true,
    runs: soakRequested() ? 1000 : 25,
    createSubject: async (options) => {
      const scope = `http-conformance-${scopes++}/`;
      const open = (changed: Partial<typeof options> = {}) => {
        const journal = new PartitionedJournal(env.PARTITIONS, { ...options, ...changed, partitions: 1, scope });
        const app = createApp({
          journals: { [options.name]: journal },
          auditActor: "caller",
          // The server's clock bounds `prune` (it prunes at the earlier of its `now` and this clock). The
          // suite prunes at times ahead of its own clock to check retention, as a local caller may, so
          // the server's clock here is later than all of them; a server clock behind the caller's `now`
          // is checked in test/node/worker-time-audit-openapi.test.ts.
          clock: () => MAX_EPOCH_MS,
          auth: { tokens: [{ name: "suite", token: TOKEN, scopes: ["append:*", "consume", "operate"] }] },
        });
        const fetch: FetchLike = async (url, init) => app.fetch(new Request(url, init));
        return new HttpJournal({ baseUrl: "http://isostore.test", journal: options.name, token: TOKEN, fetch, capacity: journal.capacity, mode: journal.mode, retry: { attempts: 1 } });
      };
      return { journal: open(), reopen: async (changed) => open(changed), close: async () => {} };
    },
  });
  for (const c of cases) it(c.name, c.run, c.timeoutMs);
});
