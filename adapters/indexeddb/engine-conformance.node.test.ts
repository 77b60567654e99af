/**
 * The Engine conformance suite against the IndexedDB engine in Node, over
 * fake-indexeddb (the fast lane; real Chromium runs it in
 * test/browser/engine-conformance.test.ts). Every engine gets a fresh
 * in-memory IDBFactory and database. "Reopen" closes the engine and opens a
 * new one on the same database name. A second lane runs the suite over tiny
 * pages (4 rows or 256 bytes) and a cache of 3 pages, so that nearly every
 * transaction splits, folds, misses and evicts pages.
 */
import "fake-indexeddb/auto";
import { IDBFactory, IDBKeyRange } from "fake-indexeddb";
import { describe, it } from "vitest";
import { engineConformanceCases } from "../../src/testing/index.js";
import type { Engine } from "../../src/engine.js";
import { IndexedDbEngine } from "./indexeddb-engine.js";
import type { LogLimits } from "./log.js";
import type { PageLimits } from "./pages.js";

/** The factory and name each engine the suite holds was opened on. */
const databases = new WeakMap<Engine, { readonly factory: IDBFactory; readonly name: string }>();

const lanes: { label: string; pageLimits?: PageLimits; cachePages?: number; logLimits?: LogLimits }[] = [
  { label: "default pages and log" },
  { label: "tiny pages, tiny cache, a 2-record log", pageLimits: { maxRows: 4, maxBytes: 256 }, cachePages: 3, logLimits: { records: 2, bytes: 1024 } },
  { label: "tiny pages, no log", pageLimits: { maxRows: 4, maxBytes: 256 }, cachePages: 3, logLimits: { records: 0, bytes: 0 } },
];

for (const lane of lanes) {
  const open = (factory: IDBFactory, name: string): Engine => {
    const engine = new IndexedDbEngine({
      name,
      durability: "strict",
      platform: () => ({ indexedDB: factory, IDBKeyRange }),
      ...(lane.pageLimits ? { pageLimits: lane.pageLimits } : {}),
      ...(lane.cachePages ? { cachePages: lane.cachePages } : {}),
      ...(lane.logLimits ? { logLimits: lane.logLimits } : {}),
    });
    databases.set(engine, { factory, name });
    return engine;
  };
  describe(`engine conformance: IndexedDB (fake-indexeddb, ${lane.label})`, () => {
    const cases = engineConformanceCases({
      label: `indexeddb (fake-indexeddb, ${lane.label})`,
      durable: true,
      createEngine: () => open(new IDBFactory(), "conformance"),
      reopen: async (engine) => {
        const database = databases.get(engine);
        if (database === undefined) throw new Error("reopen of an engine this file did not open");
        await engine.close();
        return open(database.factory, database.name);
      },
    });
    for (const c of cases) it(c.name, c.run, c.timeoutMs);
  });
}
