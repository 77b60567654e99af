/**
 * The Engine conformance suite against the IndexedDB engine in real Chromium
 * (strict durability, so `durable: true`). Every engine gets a database of
 * its own, deleted after the suite. "Reopen" closes the engine and opens a
 * new one on the same database name. The model-based case runs {@link RUNS}
 * random sequences (every transaction is a real strict commit).
 */
import { afterAll, describe, it } from "vitest";
import { indexedDbEngine } from "../../adapters/indexeddb/index.js";
import { IndexedDbEngine, platformFromGlobals } from "../../adapters/indexeddb/indexeddb-engine.js";
import type { Engine } from "../../src/engine.js";
import { engineConformanceCases } from "../../src/testing/index.js";

/** Random sequences of the model-based case in this lane. */
const RUNS = 100;

const run = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
let counter = 0;
/** The database name of each engine the suite holds, and every name opened. */
const names = new WeakMap<Engine, string>();
const opened: string[] = [];

function open(name: string): Engine {
  const engine = indexedDbEngine({ name });
  names.set(engine, name);
  return engine;
}

function deleteDatabase(name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = indexedDB.deleteDatabase(name);
    request.onsuccess = () => resolve();
    request.onerror = () => reject(request.error ?? new Error(`could not delete ${name}`));
  });
}

describe("engine conformance: IndexedDB (Chromium)", () => {
  const cases = engineConformanceCases({
    label: "indexeddb (Chromium)",
    durable: true,
    runs: RUNS,
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

describe("engine conformance: IndexedDB (Chromium, tiny pages and a 3-page cache)", () => {
  const tiny = new WeakMap<Engine, string>();
  const openTiny = (name: string): Engine => {
    const engine = new IndexedDbEngine({ name, durability: "strict", platform: platformFromGlobals, pageLimits: { maxRows: 4, maxBytes: 256 }, cachePages: 3 });
    tiny.set(engine, name);
    return engine;
  };
  const cases = engineConformanceCases({
    label: "indexeddb (Chromium, tiny pages)",
    durable: true,
    runs: RUNS / 2,
    createEngine: () => {
      const name = `engine-conformance-tiny-${run}-${++counter}`;
      opened.push(name);
      return openTiny(name);
    },
    reopen: async (engine) => {
      const name = tiny.get(engine);
      if (name === undefined) throw new Error("reopen of an engine this file did not open");
      await engine.close();
      return openTiny(name);
    },
  });
  for (const c of cases) it(c.name, c.run, c.timeoutMs);

  afterAll(async () => {
    for (const name of opened.splice(0)) await deleteDatabase(name);
  });
});
