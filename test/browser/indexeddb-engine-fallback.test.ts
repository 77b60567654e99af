/**
 * The engine's behaviour tests in Chromium with `IDBObjectStore.getAllRecords`
 * removed (this test file's iframe only), so the scan fallback that browsers
 * without it take (`getAllKeys` + `getAll`, "prev" cursor) runs against a real
 * IndexedDB too.
 */
import { describeIndexedDbEngine } from "../../adapters/indexeddb/engine-behaviour.shared.test.js";
import { indexedDbEngine } from "../../adapters/indexeddb/index.js";

delete (IDBObjectStore.prototype as { getAllRecords?: unknown }).getAllRecords;

const run = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
let counter = 0;

describeIndexedDbEngine("Chromium, no getAllRecords", {
  engine: (options = {}) => indexedDbEngine({ name: `fallback-${run}-${++counter}`, ...options }),
  platform: () => ({ indexedDB, IDBKeyRange }),
});
