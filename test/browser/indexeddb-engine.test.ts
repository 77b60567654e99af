/**
 * The IndexedDB engine's behaviour tests (adapters/indexeddb/
 * engine-behaviour.shared.test.ts) against Chromium's real IndexedDB.
 */
import { describeIndexedDbEngine } from "../../adapters/indexeddb/engine-behaviour.shared.test.js";
import { indexedDbEngine } from "../../adapters/indexeddb/index.js";

const run = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
let counter = 0;

describeIndexedDbEngine("Chromium", {
  engine: (options = {}) => indexedDbEngine({ name: `behaviour-${run}-${++counter}`, ...options }),
  platform: () => ({ indexedDB, IDBKeyRange }),
});
