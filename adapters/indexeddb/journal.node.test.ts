/**
 * The journal conformance suite against the IndexedDB engine in Node, over
 * fake-indexeddb (the fast lane; real Chromium runs it in test/browser/).
 * Every subject gets a fresh in-memory IDBFactory. "Reopen" closes the engine
 * and opens a new engine and a new journal on the same database name. A second
 * lane runs the suite over tiny pages (8 rows or 512 bytes) and a 4-page
 * cache, so that the journal's transactions split, fold and miss pages all the
 * time.
 */
import "fake-indexeddb/auto";
import { IDBFactory, IDBKeyRange } from "fake-indexeddb";
import { describe, it } from "vitest";
import { createJournal } from "../../src/index.js";
import { journalConformanceCases } from "../../src/testing/index.js";
import { IndexedDbEngine } from "./indexeddb-engine.js";
import type { LogLimits } from "./log.js";
import type { PageLimits } from "./pages.js";

/** The engine settings each lane runs the suite over (the defaults, then tiny pages, a tiny cache and a tiny log). */
const lanes: { label: string; settings: { pageLimits?: PageLimits; cachePages?: number; logLimits?: LogLimits } }[] = [
  { label: "", settings: {} },
  { label: ", tiny pages, a tiny cache and a 2-record log", settings: { pageLimits: { maxRows: 8, maxBytes: 512 }, cachePages: 4, logLimits: { records: 2, bytes: 4096 } } },
];

for (const lane of lanes) {
  const open = (factory: IDBFactory): IndexedDbEngine =>
    new IndexedDbEngine({ name: "conformance", durability: "strict", platform: () => ({ indexedDB: factory, IDBKeyRange }), ...lane.settings });
  describe(`usage journal over the IndexedDB engine (fake-indexeddb${lane.label})`, () => {
    const cases = journalConformanceCases({
      label: `indexeddb (fake-indexeddb${lane.label})`,
      durable: true,
      canReopen: true,
      canChangeCapacity: true,
      createSubject: async (options) => {
        const factory = new IDBFactory();
        let engine = open(factory);
        return {
          journal: createJournal(engine, options),
          reopen: async (changed) => {
            await engine.close();
            engine = open(factory);
            return createJournal(engine, { ...options, ...changed });
          },
          close: () => engine.close(),
        };
      },
    });
    for (const c of cases) it(c.name, c.run, c.timeoutMs);
  });
}
