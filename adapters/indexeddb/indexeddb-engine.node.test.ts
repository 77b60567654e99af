/**
 * The IndexedDB engine in Node over fake-indexeddb (the fast lane): the
 * shared behaviour tests, plus what is easier to stage here than in a browser:
 * a blocked upgrade, another connection upgrading or deleting the database,
 * a database newer than the code, error mapping, the persistent-storage helper
 * and the promise to read no platform global before first use.
 */
import "fake-indexeddb/auto";
import { IDBFactory, IDBKeyRange } from "fake-indexeddb";
import { describe, expect, it } from "vitest";
import { describeIndexedDbEngine } from "./engine-behaviour.shared.test.js";
import { transactionAbortError } from "./errors.js";
import { IndexedDbEngineError, indexedDbEngine, requestPersistentStorage, SCHEMA_VERSION } from "./index.js";
import { IndexedDbEngine } from "./indexeddb-engine.js";
import { MIGRATIONS, openEngineDatabase } from "./schema.js";
import { retryWhileBlocked } from "../../test/node/support/retry-blocked.js";

let counter = 0;
const factory = new IDBFactory();

describeIndexedDbEngine("fake-indexeddb", {
  engine: (options = {}) => indexedDbEngine({ name: `behaviour-${++counter}`, indexedDB: factory, IDBKeyRange, ...options }),
  platform: () => ({ indexedDB: factory, IDBKeyRange }),
});

/**
 * Open `name` at `version` with a raw connection that ignores versionchange
 * (an old tab's code): the real migrations, then empty ones up to `version`.
 */
function rawOpen(idb: IDBFactory, name: string, version: number): Promise<IDBDatabase> {
  const steps = MIGRATIONS.slice(0, version);
  while (steps.length < version) steps.push(() => undefined);
  return openEngineDatabase(idb, IDBKeyRange, name, steps);
}

describe("indexedDbEngine (fake-indexeddb): opening, upgrades and other connections", () => {
  it("rejects a blocked upgrade at once with a retryable `blocked` error, and opens once the old connection closes", async () => {
    const idb = new IDBFactory();
    const old = await rawOpen(idb, "db", SCHEMA_VERSION);
    // Newer code: one more (empty) migration.
    const newer = new IndexedDbEngine({
      name: "db",
      durability: "strict",
      platform: () => ({ indexedDB: idb, IDBKeyRange }),
      migrations: [...MIGRATIONS, () => undefined],
    });
    const error: unknown = await newer.open().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(IndexedDbEngineError);
    expect(error).toMatchObject({ code: "blocked", retryable: true });
    old.close();
    // The blocked open was still pending: it upgrades now, and a retry goes through once it ended.
    await retryWhileBlocked(() => newer.open());
    await newer.transact("readwrite", async (tx) => tx.put(["after"], 1));
    expect(await newer.transact("readonly", (tx) => tx.get(["after"]))).toBe(1);
    await newer.close();
  });

  it("steps aside when another connection upgrades the database, and then reports the newer schema as `version`", async () => {
    const idb = new IDBFactory();
    const engine = indexedDbEngine({ name: "db", indexedDB: idb, IDBKeyRange });
    await engine.transact("readwrite", async (tx) => tx.put(["a"], 1));
    // Not blocked: the engine closes its connection on versionchange.
    const upgraded = await rawOpen(idb, "db", SCHEMA_VERSION + 1);
    upgraded.close();
    await expect(engine.transact("readonly", (tx) => tx.get(["a"]))).rejects.toMatchObject({ code: "version", retryable: false });
    await engine.close();
  });

  it("lets another connection delete the database, then starts over on a fresh one", async () => {
    const idb = new IDBFactory();
    const engine = indexedDbEngine({ name: "db", indexedDB: idb, IDBKeyRange });
    await engine.transact("readwrite", async (tx) => tx.put(["a"], 1));
    await new Promise<void>((resolve, reject) => {
      const request = idb.deleteDatabase("db");
      request.onsuccess = () => resolve();
      request.onerror = () => reject(request.error ?? new Error("delete failed"));
      request.onblocked = () => reject(new Error("the engine blocked the delete"));
    });
    expect(await engine.transact("readonly", (tx) => tx.scan({}))).toEqual([]);
    await engine.close();
  });

  it("reads no platform global before first use, and says so clearly where there is no IndexedDB", async () => {
    const host = globalThis as { indexedDB?: unknown };
    const saved = host.indexedDB;
    host.indexedDB = undefined;
    try {
      const engine = indexedDbEngine({ name: "nowhere" });
      await expect(engine.transact("readonly", async () => 1)).rejects.toMatchObject({ code: "open_failed" });
      await engine.close();
    } finally {
      host.indexedDB = saved;
    }
  });

  it("validates its options", () => {
    expect(() => indexedDbEngine({ name: "" })).toThrow(TypeError);
    expect(() => indexedDbEngine({ name: "x", durability: "fast" as never })).toThrow(TypeError);
  });
});

describe("indexedDbEngine: error mapping", () => {
  it("maps QuotaExceededError to a non-retryable `quota_exceeded` and other aborts to a retryable `aborted`, keeping the DOMException as cause", () => {
    const quota = new DOMException("full", "QuotaExceededError");
    expect(transactionAbortError(quota)).toMatchObject({ code: "quota_exceeded", retryable: false, cause: quota });
    const io = new DOMException("disk", "UnknownError");
    expect(transactionAbortError(io)).toMatchObject({ code: "aborted", retryable: true, cause: io });
    expect(transactionAbortError(null)).toMatchObject({ code: "aborted", retryable: true });
  });
});

describe("requestPersistentStorage", () => {
  it("asks for persistence and reports the estimate", async () => {
    const report = await requestPersistentStorage({
      persist: async () => true,
      estimate: async () => ({ usage: 10, quota: 100 }),
    });
    expect(report).toEqual({ supported: true, persisted: true, usage: 10, quota: 100 });
  });

  it("reports the current state where persist() is missing (workers)", async () => {
    expect(await requestPersistentStorage({ persisted: async () => false })).toEqual({ supported: true, persisted: false, usage: null, quota: null });
  });

  it("reports unsupported where there is no StorageManager", async () => {
    const host = globalThis as { navigator?: unknown };
    if (host.navigator !== undefined && (host.navigator as { storage?: unknown }).storage !== undefined) return;
    expect(await requestPersistentStorage()).toEqual({ supported: false, persisted: false, usage: null, quota: null });
  });
});
