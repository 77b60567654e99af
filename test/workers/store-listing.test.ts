/**
 * Key listings of `StoreObject` over RPC are pages: `kvKeysPage` and
 * `blobListPage` answer keys after `after`, capped at `MAX_KEYS_PAGE` keys and
 * about `MAX_KEYS_PAGE_BYTES` of key text, and `StoreObjectClient` reads on
 * page by page. A listing whose whole reply is past the 32 MiB Workers RPC
 * limit (70,001 keys of ~505 characters: about 35 MB) comes back whole.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, it } from "vitest";
import { durableObjectEngine, StoreObjectClient } from "../../adapters/durable-objects/index.js";
import { MAX_KEYS_PAGE, MAX_KEYS_PAGE_BYTES } from "../../src/storage/kv.js";
import { storeLayout, type BlobMetaRow } from "../../src/storage/layout.js";

function ok<T>(outcome: { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown }): T {
  if (!outcome.ok) throw new Error(`expected success, got ${JSON.stringify(outcome.error)}`);
  return outcome.value;
}

/** Write `rows` straight into the object's engine (a KV put per key over RPC would take minutes). */
async function seed(stub: DurableObjectStub, store: string, rows: (layout: ReturnType<typeof storeLayout>, put: (key: readonly (string | number)[], value: unknown) => void) => void): Promise<void> {
  await runInDurableObject(stub, async (_instance, state) => {
    const engine = durableObjectEngine(state.storage);
    const layout = storeLayout({ store });
    await engine.transact("readwrite", async (tx) => {
      rows(layout, (key, value) => tx.put(key, value));
    });
  });
}

it("kv.keys of 70,001 keys of ~505 characters (a 35 MB listing) comes back whole, in byte-capped pages", async () => {
  const store = "listing-kv";
  const stub = env.STORES.get(env.STORES.idFromName(store));
  ok(await stub.kvPut(store, "a-first", 0, new Uint8Array([1]))); // binds the object to the store
  const pad = "x".repeat(500);
  const count = 70_000;
  await seed(stub, store, (layout, put) => {
    for (let i = 0; i < count; i++) put(layout.kv(`${pad}${String(i).padStart(5, "0")}`), { rev: 1, value: new Uint8Array([1]) });
  });
  const expected = ["a-first", ...Array.from({ length: count }, (_, i) => `${pad}${String(i).padStart(5, "0")}`)];

  // One page: capped in keys and bytes, and `more`.
  const first = ok(await stub.kvKeysPage(store, ""));
  expect(first.more).toBe(true);
  expect(first.keys.length).toBeLessThanOrEqual(MAX_KEYS_PAGE);
  expect(first.keys.reduce((n, key) => n + 2 * key.length, 0)).toBeLessThanOrEqual(MAX_KEYS_PAGE_BYTES);
  expect(first.keys).toEqual(expected.slice(0, first.keys.length));
  const next = ok(await stub.kvKeysPage(store, "", first.keys[first.keys.length - 1]));
  expect(next.keys[0]).toBe(expected[first.keys.length]);
  // The last page says there is no more; a prefix narrows the pages.
  expect(ok(await stub.kvKeysPage(store, "", expected[expected.length - 2]))).toEqual({ keys: [expected[expected.length - 1]], more: false });
  expect(ok(await stub.kvKeysPage(store, "a-"))).toEqual({ keys: ["a-first"], more: false });

  const client = new StoreObjectClient(env.STORES, store);
  const keys = await client.kv.keys("");
  expect(keys.length).toBe(expected.length);
  expect(keys).toEqual(expected);
  expect(await client.kv.keys(`${pad}6999`)).toEqual(Array.from({ length: 10 }, (_, i) => `${pad}6999${i}`));
}, 30_000);

it("blobs.list (blobs in SQLite) over more than a page of keys comes back whole, in order", async () => {
  const store = "listing-blobs";
  const stub = env.STORES_SQL.get(env.STORES_SQL.idFromName(store));
  ok(await stub.blobPut(store, "a-first", new Uint8Array([1])));
  const count = MAX_KEYS_PAGE * 2 + 10;
  const meta: BlobMetaRow = { size: 0, sha256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", chunks: 0 };
  await seed(stub, store, (layout, put) => {
    for (let i = 0; i < count; i++) put(layout.blobMeta(`b/${String(i).padStart(5, "0")}`), meta);
  });
  const client = new StoreObjectClient(env.STORES_SQL, store);
  const keys = await client.blobs.list("");
  expect(keys).toEqual(["a-first", ...Array.from({ length: count }, (_, i) => `b/${String(i).padStart(5, "0")}`)]);
  expect(await client.blobs.list("a")).toEqual(["a-first"]);
  const page = ok(await stub.blobListPage(store, "b/"));
  expect(page.more).toBe(true);
  expect(page.keys.length).toBe(MAX_KEYS_PAGE);
});

it("blobs.list (blobs in R2) reads on past a page of the bucket", async () => {
  const store = "listing-r2";
  const stub = env.STORES.get(env.STORES.idFromName(store));
  ok(await stub.blobPut(store, "a-first", new Uint8Array([1])));
  const client = new StoreObjectClient(env.STORES, store);
  const expected = ["a-first"];
  for (let i = 0; i < 12; i++) {
    const key = `c/${String(i).padStart(2, "0")}`;
    await client.blobs.put(key, new Uint8Array([i]));
    expected.push(key);
  }
  expect(await client.blobs.list("")).toEqual(expected);
  const page = ok(await stub.blobListPage(store, "c/", "c/05"));
  expect(page.keys).toEqual(expected.slice(7));
  expect(page.more).toBe(false);
});
