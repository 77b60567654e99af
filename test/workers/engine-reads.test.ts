/**
 * What the Durable Objects engine reads from SQLite, counted by wrapping
 * `sql.exec` (rows and bytes of every row a statement hands back). Each case
 * writes large values, then checks that an operation that needs none of them
 * reads (next to) none: deleting a ledger (or a blob's chunks) is one range
 * `DELETE` (`deleteRange`), not a scan that decodes every record's payload
 * into the object's 128 MB of memory, and a key listing selects the keys
 * alone (`keysOnly`).
 */
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { expect, it } from "vitest";
import { durableObjectEngine, type DurableObjectStorageHandle } from "../../adapters/durable-objects/index.js";
import { listKeysPage } from "../../src/storage/kv.js";
import { storeLayout } from "../../src/storage/layout.js";
import { createStore } from "../../src/storage/store.js";

/** A storage handle over `storage` that counts what SQL reads hand back while `counting`. */
function countingStorage(storage: DurableObjectStorage) {
  const meter = { counting: false, rows: 0, bytes: 0 };
  const count = (row: unknown[]): void => {
    meter.rows++;
    for (const cell of row) meter.bytes += typeof cell === "string" ? cell.length : cell instanceof ArrayBuffer ? cell.byteLength : 0;
  };
  const handle: DurableObjectStorageHandle = {
    sql: {
      exec(query: string, ...bindings: unknown[]) {
        const cursor = storage.sql.exec(query, ...bindings);
        return {
          *raw() {
            for (const row of cursor.raw()) {
              if (meter.counting) count(row);
              yield row;
            }
          },
          toArray: () => {
            const rows = cursor.toArray();
            if (meter.counting) for (const row of rows) count(Object.values(row));
            return rows;
          },
        };
      },
    },
    transactionSync: (closure) => storage.transactionSync(closure),
  };
  return { handle, meter };
}

const RECORD = 512 * 1024;
const RECORDS = 40;

it("ledger.delete of 40 records of 512 KiB reads none of their payloads (one range DELETE), and the ledger is gone", async () => {
  const stub = env.ENGINE_HOST.get(env.ENGINE_HOST.idFromName("engine-reads-ledger-delete"));
  await runInDurableObject(stub, async (_instance, state) => {
    const { handle, meter } = countingStorage(state.storage);
    const store = createStore(durableObjectEngine(handle), { name: "reads" });
    const payload = new Uint8Array(RECORD).fill(7);
    for (let i = 0; i < RECORDS; i++) await store.ledger.append("big", i, payload);
    await store.ledger.append("other", 0, payload);
    meter.counting = true;
    await store.ledger.delete("big");
    meter.counting = false;
    // Before deleteRange: every record read and decoded, about 27 MiB over 40+ rows. Now
    // only the last record, which finding the tip reads (its payload is about 683 KiB as text).
    expect(meter.rows).toBeLessThan(5);
    expect(meter.bytes).toBeLessThan(2 * RECORD);
    expect(await store.ledger.tip("big")).toBe(0);
    expect(await store.ledger.tip("other")).toBe(1);
    const left = state.storage.sql.exec("SELECT COUNT(*) AS n, COALESCE(SUM(LENGTH(v)), 0) AS bytes FROM _isostore_kv").one();
    expect(Number(left["bytes"])).toBeLessThan(2 * RECORD); // only "other"'s one record holds a payload
    await store.ledger.append("big", 0, new Uint8Array([1]));
    expect(await store.ledger.tip("big")).toBe(1);
  });
});

it("kv.keys, a listing page and blobs.list over values of 512 KiB read only the keys (keysOnly scans), and blobs.delete reads no chunk", async () => {
  const stub = env.ENGINE_HOST.get(env.ENGINE_HOST.idFromName("engine-reads-keys"));
  await runInDurableObject(stub, async (_instance, state) => {
    const { handle, meter } = countingStorage(state.storage);
    const engine = durableObjectEngine(handle);
    const store = createStore(engine, { name: "reads" });
    const payload = new Uint8Array(RECORD).fill(7);
    const names = Array.from({ length: 20 }, (_, i) => `key-${String(i).padStart(2, "0")}`);
    for (const name of names) await store.kv.put(name, 0, payload);
    await store.blobs.put("big-blob", new Uint8Array(4 * RECORD).fill(3));
    const measure = async <T>(call: () => Promise<T>): Promise<T> => {
      meter.rows = 0;
      meter.bytes = 0;
      meter.counting = true;
      try {
        return await call();
      } finally {
        meter.counting = false;
      }
    };
    expect(await measure(() => store.kv.keys("key-"))).toEqual(names);
    expect(meter.bytes).toBeLessThan(4096); // before keysOnly: every value, about 13 MiB
    expect(await measure(() => listKeysPage(engine, storeLayout({ store: "reads" }), "kv", "key-", "key-09"))).toEqual({ keys: names.slice(10), more: false });
    expect(meter.bytes).toBeLessThan(4096);
    expect(await measure(() => store.blobs.list(""))).toEqual(["big-blob"]);
    expect(meter.bytes).toBeLessThan(4096);
    await measure(() => store.blobs.delete("big-blob"));
    expect(meter.bytes).toBeLessThan(4096); // before: its 8 chunks of 256 KiB read to delete them
    expect(await store.blobs.list("")).toEqual([]);
    const chunks = state.storage.sql.exec("SELECT COUNT(*) AS n FROM _isostore_kv WHERE LENGTH(v) > 100000").one();
    expect(Number(chunks["n"])).toBe(names.length); // only the KV values are left
  });
});
