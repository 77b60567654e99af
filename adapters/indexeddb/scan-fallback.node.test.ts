/**
 * Scans where the platform has no `IDBObjectStore.getAllRecords` (Firefox,
 * Safari and Chromium before 141 at the time of writing): the engine falls
 * back to `getAllKeys` + `getAll` forward and a "prev" cursor in reverse. The
 * method is removed from fake-indexeddb's object store for this file only
 * (vitest isolates test files), then the behaviour tests and the journal
 * conformance suite run over the fallback.
 */
import "fake-indexeddb/auto";
import { IDBFactory, IDBKeyRange, IDBObjectStore } from "fake-indexeddb";
import { describe, expect, it } from "vitest";
import { createJournal } from "../../src/index.js";
import { journalConformanceCases, soakRequested } from "../../src/testing/index.js";
import { describeIndexedDbEngine } from "./engine-behaviour.shared.test.js";
import { indexedDbEngine } from "./index.js";

delete (IDBObjectStore.prototype as { getAllRecords?: unknown }).getAllRecords;

it("runs without getAllRecords", () => {
  expect("getAllRecords" in IDBObjectStore.prototype).toBe(false);
});

let counter = 0;
const factory = new IDBFactory();

describeIndexedDbEngine("fake-indexeddb, no getAllRecords", {
  engine: (options = {}) => indexedDbEngine({ name: `fallback-${++counter}`, indexedDB: factory, IDBKeyRange, ...options }),
  platform: () => ({ indexedDB: factory, IDBKeyRange }),
});

describe("usage journal over the IndexedDB engine without getAllRecords (fake-indexeddb)", () => {
  const cases = journalConformanceCases({
    label: "indexeddb (fake-indexeddb, no getAllRecords)",
    durable: true,
    canReopen: true,
    runs: soakRequested() ? 2000 : 100,
    createSubject: async (options) => {
      const name = `conformance-${++counter}`;
      let engine = indexedDbEngine({ name, indexedDB: factory, IDBKeyRange });
      return {
        journal: createJournal(engine, options),
        reopen: async () => {
          await engine.close();
          engine = indexedDbEngine({ name, indexedDB: factory, IDBKeyRange });
          return createJournal(engine, options);
        },
        close: () => engine.close(),
      };
    },
  });
  for (const c of cases) it(c.name, c.run, c.timeoutMs);
});
