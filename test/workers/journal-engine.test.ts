/**
 * The journal conformance suite against `createJournal(durableObjectEngine(
 * ctx.storage))` inside a real SQLite-backed object. Each case runs whole
 * inside one object (`runInDurableObject`), so the suite's virtual clock is
 * the journal's clock. Every subject starts from empty storage (the object's
 * table is emptied), and "reopen" is a new engine and journal over the same
 * storage: what an evicted object does when it starts again.
 */
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, it } from "vitest";
import { durableObjectEngine } from "../../adapters/durable-objects/index.js";
import { createJournal } from "../../src/index.js";
import { journalConformanceCases, soakRequested } from "../../src/testing/index.js";

/** The storage of the object the running case is inside. */
let storage: DurableObjectStorage | null = null;

const cases = journalConformanceCases({
  label: "durable-objects engine",
  durable: true,
  canReopen: true,
  canChangeCapacity: true,
  runs: soakRequested() ? 5000 : 200,
  createSubject: async (options) => {
    if (storage === null) throw new Error("a conformance case ran outside its object");
    const host = storage;
    const engine = durableObjectEngine(host);
    host.sql.exec("DELETE FROM _isostore_kv");
    return {
      journal: createJournal(engine, options),
      reopen: async (changed) => createJournal(durableObjectEngine(host), { ...options, ...changed }),
      close: () => engine.close(),
    };
  },
});

describe("usage journal over the durable object engine", () => {
  cases.forEach((c, index) => {
    it(
      c.name,
      async () => {
        const stub = env.ENGINE_HOST.get(env.ENGINE_HOST.idFromName(`journal-engine-${index}`));
        await runInDurableObject(stub, async (_instance, state) => {
          storage = state.storage;
          try {
            await c.run();
          } finally {
            storage = null;
          }
        });
      },
      c.timeoutMs,
    );
  });
});
