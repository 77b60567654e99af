/**
 * The storage primitives (ledger, leaser, KV, blobs), OrderedIndex and event
 * queue conformance suites against the IndexedDB engine in real Chromium
 * (strict durability), at the suites' default run counts (storage 60, ordered
 * 100, queue 100 random sequences): the whole file takes
 * about 14 s on the 2-core CI box, the OrderedIndex model-based case about 7 s
 * of it. The Node lane over fake-indexeddb is
 * adapters/indexeddb/primitives.node.test.ts.
 *
 * Every subject gets a database of its own, deleted when the subject closes.
 * "Reopen" closes the engine and opens a new engine on the same database; the
 * suites then build a new store / index / queue over it.
 */
import { describe, it } from "vitest";
import { indexedDbEngine, type IndexedDbEngineHandle } from "../../adapters/indexeddb/index.js";
import { createOrderedIndex } from "../../src/storage/ordered/index.js";
import { orderedConformanceCases, queueConformanceCases, storageConformanceCases, type OrderedSubjectFactory, type StorageSubjectFactory } from "../../src/testing/index.js";


const run = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
let counter = 0;

function open(name: string): IndexedDbEngineHandle {
  return indexedDbEngine({ name });
}

function deleteDatabase(name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = indexedDB.deleteDatabase(name);
    request.onsuccess = () => resolve();
    request.onerror = () => reject(request.error ?? new Error(`could not delete ${name}`));
  });
}

/** A fresh database; `reopen` closes the engine and opens a new one on the same name. */
const storageSubjects: StorageSubjectFactory = async () => {
  const name = `primitives-${run}-${++counter}`;
  let engine = open(name);
  return {
    engine,
    reopen: async () => {
      await engine.close();
      engine = open(name);
      return engine;
    },
    close: async () => {
      await engine.close();
      await deleteDatabase(name);
    },
  };
};

const orderedSubjects: OrderedSubjectFactory = async ({ maxRevision }) => {
  const name = `ordered-${run}-${++counter}`;
  let engine = open(name);
  const index = () => createOrderedIndex(engine, maxRevision === undefined ? { store: "conformance" } : { store: "conformance", maxRevision });
  return {
    index: index(),
    reopen: async () => {
      await engine.close();
      engine = open(name);
      return index();
    },
    close: async () => {
      await engine.close();
      await deleteDatabase(name);
    },
  };
};

describe("storage primitives over the IndexedDB engine (Chromium)", () => {
  const cases = storageConformanceCases({ label: "indexeddb (Chromium)", createSubject: storageSubjects });
  for (const c of cases) it(c.name, c.run, c.timeoutMs);
});

describe("OrderedIndex over the IndexedDB engine (Chromium)", () => {
  for (const c of orderedConformanceCases({ label: "indexeddb (Chromium)", canReopen: true, supportsMaxRevision: true, createSubject: orderedSubjects })) {
    it(c.name, c.run, c.timeoutMs);
  }
});

describe("event queue over the IndexedDB engine (Chromium)", () => {
  for (const c of queueConformanceCases({ label: "indexeddb (Chromium)", createSubject: storageSubjects })) it(c.name, c.run, c.timeoutMs);
});
