/**
 * The Engine conformance suite against `durableObjectEngine(ctx.storage)`
 * inside a real SQLite-backed object. Each case runs whole inside one
 * EngineHost object (`runInDurableObject`). Every engine starts from empty
 * storage (the object's table is emptied), and "reopen" closes the engine and
 * builds a new one over the same storage: what an evicted object does when it
 * starts again.
 */
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, it } from "vitest";
import { durableObjectEngine } from "../../adapters/durable-objects/index.js";
import { engineConformanceCases } from "../../src/testing/index.js";

/** The storage of the object the running case is inside. */
let storage: DurableObjectStorage | null = null;

function host(): DurableObjectStorage {
  if (storage === null) throw new Error("an engine conformance case ran outside its object");
  return storage;
}

const cases = engineConformanceCases({
  label: "durable-objects engine",
  durable: true,
  createEngine: () => {
    const engine = durableObjectEngine(host());
    host().sql.exec("DELETE FROM _isostore_kv");
    return engine;
  },
  reopen: async (engine) => {
    await engine.close();
    return durableObjectEngine(host());
  },
});

describe("engine conformance: durable object engine", () => {
  cases.forEach((c, index) => {
    it(
      c.name,
      async () => {
        const stub = env.ENGINE_HOST.get(env.ENGINE_HOST.idFromName(`engine-conformance-${index}`));
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
