/**
 * The engine over an injected factory in a process with no IndexedDB globals
 * at all (fake-indexeddb imported without `/auto`): it reads no platform
 * global when given `indexedDB` and `IDBKeyRange`, including when it creates
 * and upgrades the database.
 */
import { IDBFactory, IDBKeyRange } from "fake-indexeddb";
import { describe, expect, it } from "vitest";
import { indexedDbEngine } from "./index.js";

describe("indexedDbEngine over an injected factory, without IndexedDB globals", () => {
  it("creates the database, writes, scans and reopens", async () => {
    const host = globalThis as { indexedDB?: unknown; IDBRequest?: unknown; IDBKeyRange?: unknown };
    expect([host.indexedDB, host.IDBRequest, host.IDBKeyRange]).toEqual([undefined, undefined, undefined]);
    const factory = new IDBFactory();
    const engine = indexedDbEngine({ name: "injected", indexedDB: factory, IDBKeyRange });
    await engine.transact("readwrite", async (tx) => {
      tx.put(["a", 2], "two");
      tx.put(["a", 1], "one");
      tx.put(["b"], "other");
    });
    await engine.close();
    const again = indexedDbEngine({ name: "injected", indexedDB: factory, IDBKeyRange });
    expect(await again.transact("readonly", (tx) => tx.scan({ prefix: ["a"] }, { reverse: true }))).toEqual([
      { key: ["a", 2], value: "two" },
      { key: ["a", 1], value: "one" },
    ]);
    await again.close();
  });
});
