/**
 * The HTTP store routes inside workerd, through `StoreObjectClient` over real
 * `StoreObject`s (a fresh store name per test): every primitive, typed
 * errors rebuilt with their class on the client and mapped to statuses by
 * the app, a multi-MiB blob streamed through RPC into R2 and back, the
 * isostore Worker's own wiring (`appFromEnv` with the `STORES` binding), and
 * platform failures of a call (ambiguous for an append, backend otherwise).
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { StoreObjectClient, type StoreObjectStub } from "../../adapters/durable-objects/index.js";
import { appFromEnv } from "../../adapters/durable-objects/worker-entry.js";
import {
  AmbiguousError,
  BlobNotFoundError,
  ConflictError,
  InvalidNameError,
  KeyNotFoundError,
  OrderedAmbiguousError,
  OrderedRevisionConflictError,
  RecordNotFoundError,
  RevisionConflictError,
  StorageBackendError,
} from "../../src/index.js";
import { createApp, decodeBase64, decodeStorageError, encodeBase64 } from "../../src/worker/index.js";
import { orderedConformanceCases, type OrderedSubjectFactory, soakRequested } from "../../src/testing/index.js";
import { InvalidDueError, InvalidRankError, type Due, type OrderedIndex, type OrderedRecord, type Rank } from "../../src/index.js";

const TOKEN = "store-test-token-0123456789";
const OTHER = "other-store-token-01234567";
const text = (value: string) => new TextEncoder().encode(value);
const b64 = (value: string) => encodeBase64(text(value));
const seg = encodeURIComponent;

/** A fresh store name (storage name grammar), so tests never share an object. */
const freshStore = () => `tests/${crypto.randomUUID()}`;

interface Answer {
  status: number;
  json: Record<string, unknown> & { error?: { code: string; name?: string; message: string; retryable: boolean; fields?: Record<string, unknown> } };
}

function setup() {
  const app = createApp({
    journals: {},
    stores: (name) => new StoreObjectClient(env.STORES, name),
    auth: {
      tokens: [
        { name: "stores", token: TOKEN, scopes: ["store:*"] },
        { name: "other", token: OTHER, scopes: ["store:somewhere/else"] },
      ],
    },
  });
  const raw = async (method: string, path: string, init: { token?: string; body?: RequestInit["body"]; headers?: Record<string, string> } = {}) =>
    app.fetch(
      new Request(`http://isostore.test${path}`, {
        method,
        headers: { authorization: `Bearer ${init.token ?? TOKEN}`, ...init.headers },
        ...(init.body === undefined ? {} : { body: init.body }),
      }),
    );
  const call = async (method: string, path: string, options: { token?: string; body?: unknown } = {}): Promise<Answer> => {
    const response = await raw(method, path, {
      ...(options.token === undefined ? {} : { token: options.token }),
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body), headers: { "content-type": "application/json" } }),
    });
    const body = await response.text();
    return { status: response.status, json: (body === "" ? {} : JSON.parse(body)) as Answer["json"] };
  };
  return { app, raw, call };
}

describe("HTTP store routes over StoreObjects", () => {
  it("ledger: append, records, tip, a stale expected is 409 conflict, delete", async () => {
    const { call } = setup();
    const store = freshStore();
    const log = `/v1/stores/${seg(store)}/ledgers/${seg("orders/2026")}`;
    expect((await call("POST", `${log}/append`, { body: { expected: 0, payload: b64("first") } })).json).toEqual({ seq: 1 });
    expect((await call("POST", `${log}/append`, { body: { expected: 1, payload: b64("second") } })).json).toEqual({ seq: 2 });
    const stale = await call("POST", `${log}/append`, { body: { expected: 1, payload: b64("late") } });
    expect([stale.status, stale.json.error?.code, stale.json.error?.name, stale.json.error?.fields]).toEqual([409, "conflict", "ConflictError", { name: "orders/2026", expected: 1 }]);
    expect((await call("GET", `${log}/tip`)).json).toEqual({ tip: 2 });
    expect((await call("GET", `${log}/records?limit=1`)).json).toEqual({ records: [{ seq: 1, payload: b64("first") }], next: 2, life: 0 });
    expect((await call("GET", `${log}/records?from=2&life=0`)).json).toEqual({ records: [{ seq: 2, payload: b64("second") }], next: null, life: 0 });
    expect((await call("DELETE", log)).status).toBe(200);
    expect((await call("GET", `${log}/tip`)).json).toEqual({ tip: 0 });
    // A reader paging in the deleted life gets 404, never the rewritten ledger's records.
    expect((await call("POST", `${log}/append`, { body: { expected: 0, payload: b64("new") } })).json).toEqual({ seq: 1 });
    expect((await call("POST", `${log}/append`, { body: { expected: 1, payload: b64("newer") } })).json).toEqual({ seq: 2 });
    const gone = await call("GET", `${log}/records?from=2&life=0`);
    expect([gone.status, gone.json.error?.code, gone.json.error?.fields]).toEqual([404, "record_not_found", { name: "orders/2026", seq: 2 }]);
    expect((await call("GET", `${log}/records?from=2&life=1`)).json).toEqual({ records: [{ seq: 2, payload: b64("newer") }], next: null, life: 1 });
    const bad = await call("GET", `/v1/stores/${seg(store)}/ledgers/${seg("Bad Name")}/tip`);
    expect([bad.status, bad.json.error?.code, bad.json.error?.fields]).toEqual([400, "invalid_name", { name: "Bad Name", rule: "segment_start" }]);
  });

  it("KV: put, get, keys, a stale revision is 409, delete then 404; scopes are per store", async () => {
    const { call } = setup();
    const store = freshStore();
    const kv = `/v1/stores/${seg(store)}/kv`;
    const rev = (await call("PUT", `${kv}/${seg("settings/theme")}`, { body: { expectedRev: 0, value: b64("dark") } })).json["rev"] as number;
    expect(rev).toBeGreaterThan(0);
    const stale = await call("PUT", `${kv}/${seg("settings/theme")}`, { body: { expectedRev: 0, value: b64("light") } });
    expect([stale.status, stale.json.error?.code, stale.json.error?.fields]).toEqual([409, "revision_conflict", { key: "settings/theme", expectedRev: 0, actualRev: rev }]);
    expect((await call("GET", `${kv}/${seg("settings/theme")}`)).json).toEqual({ value: b64("dark"), rev });
    expect((await call("GET", `${kv}?prefix=${seg("settings/")}`)).json).toEqual({ keys: ["settings/theme"] });
    expect((await call("DELETE", `${kv}/${seg("settings/theme")}`)).status).toBe(200);
    const gone = await call("GET", `${kv}/${seg("settings/theme")}`);
    expect([gone.status, gone.json.error?.code, gone.json.error?.name]).toEqual([404, "key_not_found", "KeyNotFoundError"]);
    expect((await call("GET", kv, { token: OTHER })).status).toBe(403);
  });

  it("ordered index: create, update with a stale revision (409), list ranked and due, delete", async () => {
    const { call } = setup();
    const o = `/v1/stores/${seg(freshStore())}/ordered`;
    const id = { namespace: "jobs", orderingScope: "inbox", stableKey: "user@example.com" };
    const due = { state: "due_at", unixMillis: 1_700_000_000_000 };
    const created = await call("POST", `${o}/create`, { body: { id, rankingScope: "priority", value: b64("v1"), rank: { ranked: true, value: 3 }, due } });
    expect(created.json).toMatchObject({ created: true, record: { id, revision: 1, value: b64("v1") } });
    const stale = await call("POST", `${o}/update`, { body: { id, expectedRevision: 5, value: "", rank: { ranked: true, value: 1 }, due } });
    expect([stale.status, stale.json.error?.code, stale.json.error?.fields?.["actualRevision"]]).toEqual([409, "ordered_revision_conflict", 1]);
    expect((await call("POST", `${o}/update`, { body: { id, expectedRevision: 1, value: b64("v2"), rank: { ranked: true, value: 1 }, due } })).json).toMatchObject({ record: { revision: 2 } });
    expect((await call("GET", `${o}/list-ranked?namespace=jobs&rankingScope=priority`)).json).toMatchObject({ records: [{ id, value: b64("v2") }], nextCursor: "" });
    expect((await call("GET", `${o}/list-due?namespace=jobs&dueAtOrBefore=1800000000000`)).json).toMatchObject({ records: [{ id }] });
    expect((await call("GET", `${o}/list-ordered?namespace=jobs&orderingScope=inbox`)).json).toMatchObject({ records: [{ id }] });
    expect((await call("POST", `${o}/delete`, { body: { id, expectedRevision: 2 } })).json).toMatchObject({ record: { deleted: true, revision: 3 } });
    const missing = await call("POST", `${o}/get`, { body: { id: { ...id, stableKey: "nobody" } } });
    expect([missing.status, missing.json.error?.code]).toEqual([404, "ordered_record_not_found"]);
  });

  it("blobs: a multi-MiB body streamed into R2 and back byte-identical; conflict 409; list; delete then 404", async () => {
    const { raw, call } = setup();
    const store = freshStore();
    const size = 3 * 1024 * 1024 + 777;
    const content = new Uint8Array(size);
    for (let i = 0; i < size; i++) content[i] = (i * 131 + (i >> 9)) & 0xff;
    let offset = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (offset >= size) return controller.close();
        controller.enqueue(content.slice(offset, offset + 100_000));
        offset += 100_000;
      },
    });
    const key = `/v1/stores/${seg(store)}/blobs/${seg("snapshots/big")}`;
    const put = await raw("PUT", key, { body, headers: { "content-type": "application/octet-stream" } });
    expect([put.status, await put.text()]).toEqual([200, "{}"]);

    // In R2, under the store object's id.
    const objectKey = `${env.STORES.idFromName(store).toString()}/snapshots/big`;
    expect((await env.STORE_BLOBS.head(objectKey))?.size).toBe(size);

    const got = await raw("GET", key);
    expect([got.status, got.headers.get("content-type")]).toEqual([200, "application/octet-stream"]);
    const back = new Uint8Array(await got.arrayBuffer());
    expect(back.length).toBe(size);
    let same = true;
    for (let i = 0; i < size; i++) if (back[i] !== content[i]) same = false;
    expect(same).toBe(true);

    const conflict = await raw("PUT", key, { body: text("other"), headers: { "content-type": "application/octet-stream" } });
    expect(conflict.status).toBe(409);
    expect((await conflict.json<Answer["json"]>()).error).toMatchObject({ code: "blob_conflict", name: "BlobConflictError", fields: { key: "snapshots/big" } });
    expect((await call("GET", `/v1/stores/${seg(store)}/blobs`)).json).toEqual({ keys: ["snapshots/big"] });
    expect((await call("DELETE", key)).status).toBe(200);
    const missing = await call("GET", key);
    expect([missing.status, missing.json.error?.code]).toEqual([404, "blob_not_found"]);
    expect(await env.STORE_BLOBS.head(objectKey)).toBeNull();
  });

  it("the isostore Worker serves the store routes over its STORES binding", async () => {
    const app = appFromEnv({
      PARTITIONS: env.PARTITIONS,
      STORES: env.STORES,
      ISOSTORE_TOKENS: JSON.stringify([{ name: "stores", token: TOKEN, scopes: ["store:*"] }]),
    });
    const store = `/v1/stores/${seg(freshStore())}`;
    const put = await app.fetch(
      new Request(`http://isostore.test${store}/kv/k`, {
        method: "PUT",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ expectedRev: 0, value: b64("x") }),
      }),
    );
    expect(put.status).toBe(200);
    const get = await app.fetch(new Request(`http://isostore.test${store}/kv/k`, { headers: { authorization: `Bearer ${TOKEN}` } }));
    expect((await get.json<{ value: string }>()).value).toBe(b64("x"));
  });

  it("a token setting that is not valid JSON is refused without quoting any of it (the parser's message would)", () => {
    const secret = "prod-Zq8v3-do-not-echo";
    const broken = `[{"name":"ops","token":${secret},"scopes":["operate"]}]`; // the token left unquoted
    expect(() => JSON.parse(broken) as unknown).toThrow(/prod|Zq8v3|Unexpected/); // what the parser says could quote it
    let message = "";
    try {
      appFromEnv({ PARTITIONS: env.PARTITIONS, STORES: env.STORES, ISOSTORE_TOKENS: broken });
    } catch (error) {
      message = error instanceof Error ? error.message : String(error);
    }
    expect(message).toMatch(/^ISOSTORE_TOKENS is not valid JSON/);
    for (const fragment of ["prod", "Zq8v3", "echo", "ops"]) expect(message).not.toContain(fragment);
    // A setting that is no secret keeps the parser's message, for whoever reads the log.
    expect(() => appFromEnv({ PARTITIONS: env.PARTITIONS, STORES: env.STORES, ISOSTORE_JOURNALS: "{usage:" })).toThrow(/^ISOSTORE_JOURNALS is not valid JSON: ./);
  });
});

describe("StoreObjectClient", () => {
  it("passes an append's life to the object, which lands it only in that life (also back at the same tip)", async () => {
    const name = freshStore();
    const store = new StoreObjectClient(env.STORES, name);
    const other = new StoreObjectClient(env.STORES, name);
    await store.ledger.append("log", 0, text("a"));
    const opened = await store.ledger.read("log", 0);
    await opened.close();
    await other.ledger.append("log", 1, text("b"), { life: opened.life });
    await store.ledger.delete("log");
    await store.ledger.append("log", 0, text("x"));
    await store.ledger.append("log", 1, text("y"));
    const stale = await other.ledger.append("log", 2, text("c"), { life: opened.life }).catch((error: unknown) => error);
    expect(stale).toBeInstanceOf(RecordNotFoundError);
    expect(stale).toMatchObject({ code: "record_not_found", name: "log", seq: 3 });
    expect(await store.ledger.tip("log")).toBe(2);
    const bad = await other.ledger.append("log", 2, text("c"), { life: -1 }).catch((error: unknown) => error);
    expect(bad).toMatchObject({ code: "invalid_argument", argument: "life" });
    const renewed = await store.ledger.read("log", 0);
    await renewed.close();
    await other.ledger.append("log", 2, text("c"), { life: renewed.life });
    expect(await store.ledger.tip("log")).toBe(3);
  });

  it("rebuilds typed errors with their class, code and spec fields", async () => {
    const store = new StoreObjectClient(env.STORES, freshStore());
    await store.ledger.append("log", 0, text("a"));
    const conflict = await store.ledger.append("log", 0, text("b")).catch((error: unknown) => error);
    expect(conflict).toBeInstanceOf(ConflictError);
    expect(conflict).toMatchObject({ code: "conflict", name: "log", expected: 0 });
    const records = [];
    for await (const record of await store.ledger.read("log", 0)) records.push(record);
    expect(records.map((r) => [r.seq, new TextDecoder().decode(r.payload)])).toEqual([[1, "a"]]);

    const rev = await store.kv.put("k", 0, text("v"));
    const stale = await store.kv.put("k", 0, text("w")).catch((error: unknown) => error);
    expect(stale).toBeInstanceOf(RevisionConflictError);
    expect(stale).toMatchObject({ key: "k", expectedRev: 0, actualRev: rev });
    await expect(store.kv.get("nope")).rejects.toBeInstanceOf(KeyNotFoundError);
    await expect(store.blobs.get("nope")).rejects.toBeInstanceOf(BlobNotFoundError);
    const badName = await store.kv.get("Bad").catch((error: unknown) => error);
    expect(badName).toBeInstanceOf(InvalidNameError);
    expect(badName).toMatchObject({ code: "invalid_name", name: "Bad", rule: "segment_start" });

    const index = store.requireOrderedIndex();
    const id = { namespace: "n", orderingScope: "s", stableKey: "k" };
    await index.create(id, "r", text("v"), { ranked: false, value: 0 }, { state: "not_due", unixMillis: 0 });
    const revConflict = await index.update(id, 9, text("v"), { ranked: false, value: 0 }, { state: "not_due", unixMillis: 0 }).catch((error: unknown) => error);
    expect(revConflict).toBeInstanceOf(OrderedRevisionConflictError);
    expect(revConflict).toMatchObject({ id, expectedRevision: 9, actualRevision: 1 });
  });

  it("a platform failure is ambiguous for an append or an ordered mutation, and a backend error otherwise", async () => {
    const broken = new Proxy({} as StoreObjectStub, {
      get: () => () => Promise.reject(Object.assign(new Error("Network connection lost."), { retryable: true })),
    });
    const store = StoreObjectClient.fromStub(broken, "tenants/acme");
    const append = await store.ledger.append("log", 4, text("x")).catch((error: unknown) => error);
    expect(append).toBeInstanceOf(AmbiguousError);
    expect(append).toMatchObject({ code: "ambiguous", name: "log", expected: 4 });
    const create = await store
      .requireOrderedIndex()
      .create({ namespace: "n", orderingScope: "s", stableKey: "k" }, "r", text("v"), { ranked: false, value: 0 }, { state: "not_due", unixMillis: 0 })
      .catch((error: unknown) => error);
    expect(create).toBeInstanceOf(OrderedAmbiguousError);
    const get = await store.kv.get("k").catch((error: unknown) => error);
    expect(get).toBeInstanceOf(StorageBackendError);
    expect(get).toMatchObject({ code: "backend", operation: "kv.get" });
    expect(((get as StorageBackendError).cause as { retryable: boolean }).retryable).toBe(true);

    // Through the app: a retryable backend failure is a 503 with Retry-After.
    const app = createApp({ journals: {}, stores: () => store, auth: { tokens: [{ name: "s", token: TOKEN, scopes: ["store:*"] }] } });
    const answer = await app.fetch(new Request("http://isostore.test/v1/stores/tenants%2Facme/kv/k", { headers: { authorization: `Bearer ${TOKEN}` } }));
    expect([answer.status, answer.headers.get("retry-after")]).toEqual([503, "1"]);
    expect((await answer.json<Answer["json"]>()).error).toMatchObject({ code: "backend", retryable: true });
    const ambiguous = await app.fetch(
      new Request("http://isostore.test/v1/stores/tenants%2Facme/ledgers/log/append", {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ expected: 0, payload: "" }),
      }),
    );
    expect(ambiguous.status).toBe(504);
  });

  /** A stub whose calls run in the real object, then lose their reply (the platform's "Network connection lost."). */
  function replyLost(store: string): StoreObjectStub {
    const real = env.STORES.get(env.STORES.idFromName(store)) as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    return new Proxy({} as StoreObjectStub, {
      get: (_target, method: string) => async (...args: unknown[]) => {
        await real[method]!(...args);
        throw Object.assign(new Error("Network connection lost."), { retryable: true });
      },
    });
  }

  it("a write whose reply is lost after it ran is ambiguous, never a backend error that says nothing was written", async () => {
    const name = freshStore();
    const real = new StoreObjectClient(env.STORES, name);
    const lossy = StoreObjectClient.fromStub(replyLost(name), name);
    const outcome = async (call: () => Promise<unknown>) => call().then(() => "resolved", (error: unknown) => error);

    const put = await outcome(() => lossy.kv.put("settings/theme", 0, text("dark")));
    expect(put).toBeInstanceOf(AmbiguousError);
    expect(put).toMatchObject({ code: "ambiguous", operation: "kv.put", name: "settings/theme", expected: 0 });
    expect(((put as AmbiguousError).cause as { retryable: boolean }).retryable).toBe(true);
    const landed = await real.kv.get("settings/theme");
    expect(new TextDecoder().decode(landed.value)).toBe("dark"); // it did land

    const kvDelete = await outcome(() => lossy.kv.delete("settings/theme"));
    expect(kvDelete).toMatchObject({ code: "ambiguous", operation: "kv.delete", name: "settings/theme" });
    await expect(real.kv.get("settings/theme")).rejects.toBeInstanceOf(KeyNotFoundError);

    const append = await outcome(() => lossy.ledger.append("log", 0, text("a")));
    expect(append).toMatchObject({ code: "ambiguous", operation: "ledger.append", name: "log", expected: 0 });
    expect(await real.ledger.tip("log")).toBe(1);
    const ledgerDelete = await outcome(() => lossy.ledger.delete("log"));
    expect(ledgerDelete).toBeInstanceOf(AmbiguousError);
    expect(ledgerDelete).toMatchObject({ code: "ambiguous", operation: "ledger.delete", name: "log" });
    expect(await real.ledger.tip("log")).toBe(0);

    const blobPut = await outcome(() => lossy.blobs.put("snap/1", text("bytes")));
    expect(blobPut).toMatchObject({ code: "ambiguous", operation: "blobs.put", name: "snap/1" });
    expect(await real.blobs.list("snap/")).toEqual(["snap/1"]);
    const blobDelete = await outcome(() => lossy.blobs.delete("snap/1"));
    expect(blobDelete).toMatchObject({ code: "ambiguous", operation: "blobs.delete", name: "snap/1" });
    expect(await real.blobs.list("snap/")).toEqual([]);

    // A read has nothing to have written: still a backend error.
    const get = await outcome(() => lossy.kv.keys(""));
    expect(get).toBeInstanceOf(StorageBackendError);
    expect(get).toMatchObject({ code: "backend", operation: "kv.keys" });

    // A refusal the object answered as data stays definite, even through a stub whose replies are otherwise lost.
    const rev = await real.kv.put("k", 0, text("v"));
    const refused = StoreObjectClient.fromStub(
      new Proxy({} as StoreObjectStub, { get: (_target, method: string) => (...args: unknown[]) => (env.STORES.get(env.STORES.idFromName(name)) as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[method]!(...args) }),
      name,
    );
    const stale = await outcome(() => refused.kv.put("k", 0, text("w")));
    expect(stale).toBeInstanceOf(RevisionConflictError);
    expect(stale).toMatchObject({ key: "k", expectedRev: 0, actualRev: rev });

    // Through the app an ambiguous KV put is a 504 (outcome unknown), not a 503 (retry blindly).
    const app = createApp({ journals: {}, stores: () => lossy, auth: { tokens: [{ name: "s", token: TOKEN, scopes: ["store:*"] }] } });
    const answer = await app.fetch(
      new Request(`http://isostore.test/v1/stores/${seg(name)}/kv/${seg("other")}`, {
        method: "PUT",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ expectedRev: 0, value: b64("x") }),
      }),
    );
    expect(answer.status).toBe(504);
  });

  it("a cursor never reads on into a ledger deleted and written again under it (one life per cursor)", async () => {
    const store = new StoreObjectClient(env.STORES, freshStore());
    for (let i = 0; i < 300; i++) await store.ledger.append("log", i, text(`old${i + 1}`));
    const cursor = await store.ledger.read("log", 1);
    const seen = [(await cursor.next())!];
    await store.ledger.delete("log");
    for (let i = 0; i < 300; i++) await store.ledger.append("log", i, text(`new${i + 1}`));
    const end = await (async () => {
      try {
        for (let record = await cursor.next(); record !== undefined; record = await cursor.next()) seen.push(record);
        return "drained";
      } catch (error) {
        return error;
      }
    })();
    const payloads = seen.map((r) => `${r.seq}:${new TextDecoder().decode(r.payload)}`);
    expect(payloads.filter((p) => p.includes("new"))).toEqual([]);
    expect(payloads).toEqual(Array.from({ length: 256 }, (_, i) => `${i + 1}:old${i + 1}`)); // the first page, then nothing of the new life
    expect(end).toBeInstanceOf(RecordNotFoundError);
    expect(end).toMatchObject({ code: "record_not_found", name: "log", seq: 257 });
    await expect(cursor.next()).rejects.toBeInstanceOf(RecordNotFoundError); // sticky
  });
});

// ------------------------------------------------------------------ the OrderedIndex suite: HTTP -> StoreObjectClient -> StoreObject

/** An OrderedIndex over the store routes of `app` (a remote client of the HTTP API), for the conformance suite. */
function httpOrderedIndex(app: ReturnType<typeof createApp>, store: string): OrderedIndex {
  const prefix = `http://isostore.test/v1/stores/${seg(store)}/ordered`;
  const fromJson = (record: unknown): OrderedRecord => {
    const json = record as Record<string, unknown>;
    return { ...(json as unknown as OrderedRecord), value: decodeBase64(json["value"] as string) };
  };
  async function send(method: string, path: string, body?: { rank?: Rank; due?: Due } & Record<string, unknown>, signal?: { aborted: boolean; reason?: unknown }) {
    if (signal?.aborted) throw signal.reason;
    const response = await app.fetch(
      new Request(`${prefix}/${path}`, {
        method,
        headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }),
    );
    const json = await response.json<Record<string, unknown> & { error?: { code: string; name: string; message: string; fields: Record<string, unknown> } }>();
    if (json.error !== undefined) {
      const error = decodeStorageError({ code: json.error.code, type: json.error.name, message: json.error.message, fields: json.error.fields ?? {} });
      // JSON carries NaN and Infinity as null: a refused rank or due is reported as the caller's own value.
      if (error instanceof InvalidRankError && body?.rank !== undefined) Object.defineProperty(error, "rank", { value: { ...body.rank } });
      if (error instanceof InvalidDueError && body?.due !== undefined) Object.defineProperty(error, "due", { value: { ...body.due } });
      throw error;
    }
    return json;
  }
  const query = (params: Record<string, string | number>) => new URLSearchParams(Object.entries(params).map(([k, v]): [string, string] => [k, String(v)])).toString();
  const page = (json: Record<string, unknown>) => (json["records"] as unknown[]).map(fromJson);
  return {
    get: async (id, options) => fromJson((await send("POST", "get", { id }, options?.signal))["record"]),
    create: async (id, rankingScope, value, rank, due, options) => {
      const answer = await send("POST", "create", { id, rankingScope, value: encodeBase64(value), rank, due }, options?.signal);
      return { record: fromJson(answer["record"]), created: answer["created"] as boolean };
    },
    update: async (id, expectedRevision, value, rank, due, options) =>
      fromJson((await send("POST", "update", { id, expectedRevision, value: encodeBase64(value), rank, due }, options?.signal))["record"]),
    delete: async (id, expectedRevision, options) => fromJson((await send("POST", "delete", { id, expectedRevision }, options?.signal))["record"]),
    listOrdered: async (namespace, orderingScope, afterOrder, limit, options) => {
      const json = await send("GET", `list-ordered?${query({ namespace, orderingScope, afterOrder, limit })}`, undefined, options?.signal);
      return { records: page(json), nextAfterOrder: json["nextAfterOrder"] as number };
    },
    listRanked: async (namespace, rankingScope, after, limit, options) => {
      const json = await send("GET", `list-ranked?${query({ namespace, rankingScope, after, limit })}`, undefined, options?.signal);
      return { records: page(json), nextCursor: json["nextCursor"] as string };
    },
    listDue: async (namespace, dueAtOrBefore, after, limit, options) => {
      const json = await send("GET", `list-due?${query({ namespace, dueAtOrBefore, after, limit })}`, undefined, options?.signal);
      return { records: page(json), nextCursor: json["nextCursor"] as string };
    },
  };
}

describe("OrderedIndex conformance through HTTP, StoreObjectClient and a StoreObject", () => {
  const subjects: OrderedSubjectFactory = async () => {
    const { app } = setup();
    // A fresh object per subject; "reopen" is the same remote index (its state is the object's).
    const index = httpOrderedIndex(app, freshStore());
    return { index, reopen: async () => index, close: async () => {} };
  };
  for (const c of orderedConformanceCases({ label: "http+durable-objects", canReopen: true, runs: soakRequested() ? 500 : 10, createSubject: subjects })) {
    it(c.name, c.run, c.timeoutMs);
  }
});
