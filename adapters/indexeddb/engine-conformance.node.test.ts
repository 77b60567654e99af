/**
 * The Engine conformance suite against the IndexedDB engine in Node, over
 * fake-indexeddb (the fast lane; real Chromium runs it in
 * test/browser/engine-conformance.test.ts). Every engine gets a fresh
 * in-memory IDBFactory and database. "Reopen" closes the engine and opens a
 * new one on the same database name.
 */
import "fake-indexeddb/auto";
import { IDBFactory, IDBKeyRange } from "fake-indexeddb";
import { describe, it } from "vitest";
import { engineConformanceCases } from "../../src/testing/index.js";
import type { Engine } from "../../src/engine.js";
import { indexedDbEngine } from "./index.js";

/** The factory and name each engine the suite holds was opened on. */
const databases = new WeakMap<Engine, { readonly factory: IDBFactory; readonly name: string }>();

function open(factory: IDBFactory, name: string): Engine {
  const engine = indexedDbEngine({ name, indexedDB: factory, IDBKeyRange });
  databases.set(engine, { factory, name });
  return engine;
}

describe("engine conformance: IndexedDB (fake-indexeddb)", () => {
  const cases = engineConformanceCases({
    label: "indexeddb (fake-indexeddb)",
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
