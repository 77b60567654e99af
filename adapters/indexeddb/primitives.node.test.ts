/**
 * The storage primitives (ledger, leaser, KV, blobs), OrderedIndex and event
 * queue conformance suites against the IndexedDB engine in Node, over
 * fake-indexeddb (the fast lane; real Chromium runs them in
 * test/browser/primitives-indexeddb.test.ts).
 *
 * Every subject gets a database of its own (a fresh name on one in-memory
 * IDBFactory), deleted when the subject closes. "Reopen" closes the engine and
 * opens a new engine on the same database name; the suites then build a new
 * store / index / queue over it.
 */
import { IDBFactory, IDBKeyRange } from "fake-indexeddb";
import { describe, it } from "vitest";
import { createOrderedIndex } from "../../src/storage/ordered/index.js";
import { orderedConformanceCases, queueConformanceCases, storageConformanceCases, type OrderedSubjectFactory, type StorageSubjectFactory } from "../../src/testing/index.js";
import { indexedDbEngine, type IndexedDbEngineHandle } from "./index.js";

const factory = new IDBFactory();
let counter = 0;

function open(name: string): IndexedDbEngineHandle {
  return indexedDbEngine({ name, indexedDB: factory, IDBKeyRange });
}

function deleteDatabase(name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = factory.deleteDatabase(name);
    request.onsuccess = () => resolve();
    request.onerror = () => reject(request.error ?? new Error(`could not delete ${name}`));
  });
}

/** A fresh database; `reopen` closes the engine and opens a new one on the same name. */
const storageSubjects: StorageSubjectFactory = async () => {
  const name = `primitives-${++counter}`;
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
  const name = `ordered-${++counter}`;
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

describe("storage primitives over the IndexedDB engine (fake-indexeddb)", () => {
  for (const c of storageConformanceCases({ label: "indexeddb (fake-indexeddb)", createSubject: storageSubjects })) it(c.name, c.run, c.timeoutMs);
});

describe("OrderedIndex over the IndexedDB engine (fake-indexeddb)", () => {
  for (const c of orderedConformanceCases({ label: "indexeddb (fake-indexeddb)", canReopen: true, supportsMaxRevision: true, createSubject: orderedSubjects })) {
    it(c.name, c.run, c.timeoutMs);
  }
});

describe("event queue over the IndexedDB engine (fake-indexeddb)", () => {
  for (const c of queueConformanceCases({ label: "indexeddb (fake-indexeddb)", createSubject: storageSubjects })) it(c.name, c.run, c.timeoutMs);
});
