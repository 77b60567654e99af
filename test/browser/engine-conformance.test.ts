/**
 * The Engine conformance suite against the IndexedDB engine in real Chromium
 * (strict durability, so `durable: true`). Every engine gets a database of
 * its own, deleted after the suite. "Reopen" closes the engine and opens a
 * new one on the same database name. The model-based case runs {@link RUNS}
 * random sequences (every transaction is a real strict commit); a second lane
 * runs half as many over tiny pages and a 3-page cache, so that nearly every
 * transaction splits, folds, misses and evicts pages.
 */
import { afterAll, describe, it } from "vitest";
import { IndexedDbEngine, platformFromGlobals } from "../../adapters/indexeddb/indexeddb-engine.js";
import type { PageLimits } from "../../adapters/indexeddb/pages.js";
import type { LogLimits } from "../../adapters/indexeddb/log.js";
import type { Engine } from "../../src/engine.js";
import { engineConformanceCases } from "../../src/testing/index.js";

/** Random sequences of the model-based case in this lane. */
const RUNS = 100;

const run = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
let counter = 0;
/** The database name of each engine the suite holds, and every name opened. */
const names = new WeakMap<Engine, string>();
const opened: string[] = [];

function deleteDatabase(name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = indexedDB.deleteDatabase(name);
    request.onsuccess = () => resolve();
    request.onerror = () => reject(request.error ?? new Error(`could not delete ${name}`));
  });
}

/** The engine settings each lane runs the suite over: the defaults, then tiny pages, a 3-page cache and a 2-record log. */
const lanes: { label: string; settings: { pageLimits?: PageLimits; cachePages?: number; logLimits?: LogLimits }; runs: number }[] = [
  { label: "", settings: {}, runs: RUNS },
  {
    label: ", tiny pages, a 3-page cache and a 2-record log",
    settings: { pageLimits: { maxRows: 4, maxBytes: 256 }, cachePages: 3, logLimits: { records: 2, bytes: 1024 } },
    runs: RUNS / 2,
  },
];

for (const lane of lanes) {
  const open = (name: string): Engine => {
    const engine = new IndexedDbEngine({ name, durability: "strict", platform: platformFromGlobals, ...lane.settings });
    names.set(engine, name);
    return engine;
  };
  describe(`engine conformance: IndexedDB (Chromium${lane.label})`, () => {
    const cases = engineConformanceCases({
      label: `indexeddb (Chromium${lane.label})`,
      durable: true,
      runs: lane.runs,
      createEngine: () => {
        const name = `engine-conformance-${run}-${++counter}`;
        opened.push(name);
        return open(name);
      },
      reopen: async (engine) => {
        const name = names.get(engine);
        if (name === undefined) throw new Error("reopen of an engine this file did not open");
        await engine.close();
        return open(name);
      },
    });
    for (const c of cases) it(c.name, c.run, c.timeoutMs);

    afterAll(async () => {
      for (const name of opened.splice(0)) await deleteDatabase(name);
    });
  });
}
