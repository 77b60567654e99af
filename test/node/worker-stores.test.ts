/**
 * The store routes of `isostore/worker` (`/v1/stores/{store}/...`) over
 * memory stores (`createStore(memoryEngine(), { name })`): every primitive,
 * the typed errors and their statuses, the `store:` scopes, the body gates
 * (base64 limits, blob content type), a multi-MiB blob streamed in and out,
 * the OpenAPI document, the wire codec of storage errors, and the OrderedIndex
 * conformance suite run through HTTP (an OrderedIndex client over the routes).
 */
import { validate } from "@readme/openapi-parser";
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import {
  AmbiguousError,
  BlobConflictError,
  ConflictError,
  InvalidDueError,
  InvalidNameError,
  InvalidRankError,
  KeyNotFoundError,
  OrderedRevisionConflictError,
  RevisionConflictError,
  StorageError,
  createStore,
  type Due,
  type OrderedId,
  type OrderedIndex,
  type OrderedRecord,
  type Rank,
  type Store,
} from "../../src/index.js";
import { MAX_ORDERED_CURSOR_CHARS } from "../../src/storage/ordered/cursor.js";
import { MAX_ORDERED_VALUE_BYTES, MAX_STABLE_KEY_BYTES } from "../../src/storage/ordered/validate.js";
import { checkTokens } from "../../src/worker/auth.js";
import { createApp, decodeBase64, decodeStorageError, encodeBase64, encodeStorageError, type AppOptions, type StorageWireError } from "../../src/worker/index.js";
import { orderedConformanceCases, type OrderedSubjectFactory, soakRequested } from "../../src/testing/index.js";

const ALL = "all-stores-token-0123456789";
const ACME = "acme-store-token-0123456789";
const JOURNAL = "journal-only-token-0123456";
const base = "http://isostore.test";
const text = (value: string) => new TextEncoder().encode(value);
const b64 = (value: string) => encodeBase64(text(value));
const seg = (name: string) => encodeURIComponent(name);

interface Answer {
  status: number;
  headers: Headers;
  json: Record<string, unknown> & { error?: { code: string; message: string; name?: string; retryable: boolean; fields?: Record<string, unknown> } };
}

function setup(extra: Partial<AppOptions> = {}) {
  const made = new Map<string, Store>();
  const stores = (name: string): Store | undefined => {
    if (name.startsWith("missing")) return undefined;
    let store = made.get(name);
    if (store === undefined) {
      store = createStore(memoryEngine(), { name });
      made.set(name, store);
    }
    return store;
  };
  const app = createApp({
    journals: {},
    stores,
    auth: {
      tokens: [
        { name: "all", token: ALL, scopes: ["store:*"] },
        { name: "acme", token: ACME, scopes: ["store:tenants/acme"] },
        { name: "journal", token: JOURNAL, scopes: ["operate", "consume", "append:*"] },
      ],
    },
    ...extra,
  });
  const raw = async (method: string, path: string, init: { token?: string; body?: RequestInit["body"]; headers?: Record<string, string>; duplex?: "half" } = {}) =>
    app.fetch(
      new Request(`${base}${path}`, {
        method,
        headers: { authorization: `Bearer ${init.token ?? ALL}`, ...init.headers },
        ...(init.body === undefined ? {} : { body: init.body }),
        ...(init.duplex === undefined ? {} : { duplex: init.duplex }),
      }),
    );
  const call = async (method: string, path: string, options: { token?: string; body?: unknown } = {}): Promise<Answer> => {
    const response = await raw(method, path, {
      ...(options.token === undefined ? {} : { token: options.token }),
      ...(options.body === undefined ? {} : { body: typeof options.body === "string" ? options.body : JSON.stringify(options.body), headers: { "content-type": "application/json" } }),
    });
    const body = await response.text();
    return { status: response.status, headers: response.headers, json: (body === "" ? {} : JSON.parse(body)) as Answer["json"] };
  };
  return { app, call, raw, stores };
}

const acme = `/v1/stores/${seg("tenants/acme")}`;

describe("store routes: ledger", () => {
  it("append, read pages, tip, a stale expected is 409 conflict, delete", async () => {
    const { call, stores } = setup();
    const log = `${acme}/ledgers/${seg("orders/2026")}`;
    expect((await call("POST", `${log}/append`, { body: { expected: 0, payload: b64("first") } })).json).toEqual({ seq: 1 });
    expect((await call("POST", `${log}/append`, { body: { expected: 1, payload: b64("second") } })).json).toEqual({ seq: 2 });
    expect((await call("POST", `${log}/append`, { body: { expected: 2, payload: "" } })).status).toBe(200);
    const stale = await call("POST", `${log}/append`, { body: { expected: 1, payload: b64("late") } });
    expect(stale.status).toBe(409);
    expect(stale.json.error).toMatchObject({ code: "conflict", name: "ConflictError", retryable: false, fields: { name: "orders/2026", expected: 1 } });
    expect((await call("GET", `${log}/tip`)).json).toEqual({ tip: 3 });
    // The same ledger through the store itself: the HTTP layer adds nothing.
    expect(await stores("tenants/acme")!.ledger.tip("orders/2026")).toBe(3);

    const first = await call("GET", `${log}/records?limit=2`);
    expect(first.json).toEqual({ records: [{ seq: 1, payload: b64("first") }, { seq: 2, payload: b64("second") }], next: 3, life: 0 });
    const rest = await call("GET", `${log}/records?from=3&limit=2&life=0`);
    expect(rest.json).toEqual({ records: [{ seq: 3, payload: "" }], next: null, life: 0 });
    expect((await call("GET", `${log}/records?from=9`)).json).toEqual({ records: [], next: null, life: 0 });
    expect((await call("GET", `${log}/records`)).json.records).toHaveLength(3);

    expect((await call("DELETE", log)).status).toBe(200);
    expect((await call("GET", `${log}/tip`)).json).toEqual({ tip: 0 });
    expect((await call("DELETE", log)).status).toBe(200);
    expect((await call("POST", `${log}/append`, { body: { expected: 0, payload: b64("again") } })).json).toEqual({ seq: 1 });
  });

  it("a reader paging with the page's life never gets records of a rewritten ledger (404 record_not_found)", async () => {
    const { call } = setup();
    const log = `${acme}/ledgers/audit`;
    for (const [expected, text] of ["a", "b", "c"].entries()) await call("POST", `${log}/append`, { body: { expected, payload: b64(text) } });
    const first = await call("GET", `${log}/records?limit=2`);
    expect(first.json).toEqual({ records: [{ seq: 1, payload: b64("a") }, { seq: 2, payload: b64("b") }], next: 3, life: 0 });
    // Deleted and written again between two pages.
    expect((await call("DELETE", log)).status).toBe(200);
    for (const [expected, text] of ["x", "y", "z"].entries()) await call("POST", `${log}/append`, { body: { expected, payload: b64(text) } });
    const stale = await call("GET", `${log}/records?from=3&life=0`);
    expect([stale.status, stale.json.error?.code, stale.json.error?.fields]).toEqual([404, "record_not_found", { name: "audit", seq: 3 }]);
    // Without a life the read is of the ledger as it is now, which says so.
    const fresh = await call("GET", `${log}/records?from=3`);
    expect(fresh.json).toEqual({ records: [{ seq: 3, payload: b64("z") }], next: null, life: 1 });
    expect((await call("GET", `${log}/records?from=1&limit=1&life=1`)).json).toEqual({ records: [{ seq: 1, payload: b64("x") }], next: 2, life: 1 });
  });

  it("refuses bad names (400 invalid_name with the rule), bad numbers and bad base64 (400), changing nothing", async () => {
    const { call, stores } = setup();
    const bad = await call("GET", `${acme}/ledgers/${seg("Orders")}/tip`);
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ code: "invalid_name", name: "InvalidNameError", fields: { name: "Orders", rule: "segment_start" } });
    const badStore = await call("GET", `/v1/stores/${seg("Tenants/acme")}/ledgers/x/tip`);
    expect([badStore.status, badStore.json.error?.code, badStore.json.error?.fields]).toEqual([400, "invalid_name", { name: "Tenants/acme", rule: "segment_start" }]);
    expect((await call("GET", `/v1/stores/${seg("a//b")}/ledgers/x/tip`)).json.error?.fields).toEqual({ name: "a//b", rule: "empty_segment" });
    // However long: the store's typed refusal with its rule, not the transport's invalid_request.
    for (const long of ["k".repeat(513), "k".repeat(5000)]) {
      for (const path of [`${acme}/kv/${seg(long)}`, `${acme}/kv?prefix=${seg(long)}`, `${acme}/ledgers/${seg(long)}/tip`]) {
        const refused = await call("GET", path);
        expect([refused.status, refused.json.error?.code, refused.json.error?.fields?.["rule"]]).toEqual([400, "invalid_name", "too_long"]);
      }
    }
    const longKey = await call("POST", `${acme}/ordered/get`, { body: { id: { namespace: "jobs", orderingScope: "inbox", stableKey: "k".repeat(5000) } } });
    expect([longKey.status, longKey.json.error?.code, longKey.json.error?.fields?.["rule"]]).toEqual([400, "invalid_stable_key", "too_long"]);
    const negative = await call("POST", `${acme}/ledgers/log/append`, { body: { expected: -1, payload: "" } });
    expect([negative.status, negative.json.error?.code, negative.json.error?.fields?.["argument"]]).toEqual([400, "invalid_argument", "expected"]);
    const notBase64 = await call("POST", `${acme}/ledgers/log/append`, { body: { expected: 0, payload: "not base64!" } });
    expect([notBase64.status, notBase64.json.error?.code]).toEqual([400, "invalid_request"]);
    const unknownField = await call("POST", `${acme}/ledgers/log/append`, { body: { expected: 0, payload: "", extra: 1 } });
    expect(unknownField.status).toBe(400);
    expect(await stores("tenants/acme")!.ledger.tip("log")).toBe(0);
  });

  it("takes a payload of exactly 1 MiB in base64; one byte more is the store's 400; far more is refused before the store", async () => {
    const { call, stores } = setup();
    const mib = new Uint8Array(1024 * 1024).map((_, i) => (i * 13) & 0xff);
    const okAnswer = await call("POST", `${acme}/ledgers/big/append`, { body: { expected: 0, payload: encodeBase64(mib) } });
    expect(okAnswer.status).toBe(200);
    const back = await call("GET", `${acme}/ledgers/big/records`);
    expect(decodeBase64((back.json.records as { payload: string }[])[0]!.payload)).toEqual(mib);

    const over = await call("POST", `${acme}/ledgers/big/append`, { body: { expected: 1, payload: encodeBase64(new Uint8Array(1024 * 1024 + 1)) } });
    expect([over.status, over.json.error?.code, over.json.error?.fields?.["argument"]]).toEqual([400, "invalid_argument", "payload"]);
    const kvOver = await call("PUT", `${acme}/kv/k`, { body: { expectedRev: 0, value: encodeBase64(new Uint8Array(1024 * 1024 + 1)) } });
    expect([kvOver.status, kvOver.json.error?.code]).toEqual([400, "invalid_argument"]);
    const tooLong = await call("POST", `${acme}/ledgers/big/append`, { body: { expected: 1, payload: encodeBase64(new Uint8Array(1024 * 1024 + 3)) } });
    expect([tooLong.status, tooLong.json.error?.code, tooLong.json.error?.fields?.["argument"]]).toEqual([400, "invalid_request", "payload"]);
    const huge = await call("POST", `${acme}/ledgers/big/append`, { body: { expected: 1, payload: encodeBase64(new Uint8Array(2 * 1024 * 1024)) } });
    expect([huge.status, huge.json.error?.code]).toEqual([413, "payload_too_large"]);
    expect(await stores("tenants/acme")!.ledger.tip("big")).toBe(1);
  });
});

describe("store routes: KV", () => {
  it("put, get, keys by prefix, a stale revision is 409 with both revisions, delete, then 404", async () => {
    const { call } = setup();
    const theme = `${acme}/kv/${seg("settings/theme")}`;
    const rev1 = (await call("PUT", theme, { body: { expectedRev: 0, value: b64("dark") } })).json["rev"] as number;
    expect(rev1).toBeGreaterThan(0);
    const stale = await call("PUT", theme, { body: { expectedRev: 0, value: b64("light") } });
    expect(stale.status).toBe(409);
    expect(stale.json.error).toMatchObject({ code: "revision_conflict", name: "RevisionConflictError", fields: { key: "settings/theme", expectedRev: 0, actualRev: rev1 } });
    const rev2 = (await call("PUT", theme, { body: { expectedRev: rev1, value: b64("light") } })).json["rev"] as number;
    expect(rev2).toBeGreaterThan(rev1);
    expect((await call("GET", theme)).json).toEqual({ value: b64("light"), rev: rev2 });
    await call("PUT", `${acme}/kv/${seg("settings/lang")}`, { body: { expectedRev: 0, value: b64("en") } });
    await call("PUT", `${acme}/kv/other`, { body: { expectedRev: 0, value: "" } });
    expect((await call("GET", `${acme}/kv?prefix=${seg("settings/")}`)).json).toEqual({ keys: ["settings/lang", "settings/theme"] });
    expect((await call("GET", `${acme}/kv`)).json).toEqual({ keys: ["other", "settings/lang", "settings/theme"] });
    expect((await call("GET", `${acme}/kv?prefix=${seg("BAD")}`)).json.error?.code).toBe("invalid_name");

    expect((await call("DELETE", theme)).status).toBe(200);
    const gone = await call("GET", theme);
    expect([gone.status, gone.json.error?.code, gone.json.error?.name, gone.json.error?.fields]).toEqual([404, "key_not_found", "KeyNotFoundError", { key: "settings/theme" }]);
    expect((await call("DELETE", theme)).status).toBe(200);
  });

  it("needs a JSON body for PUT (415 otherwise)", async () => {
    const { raw } = setup();
    const answer = await raw("PUT", `${acme}/kv/k`, { body: "expectedRev=0", headers: { "content-type": "text/plain" } });
    expect(answer.status).toBe(415);
  });
});

describe("store routes: blobs", () => {
  it("streams a blob of several MiB in and out byte-identical; same bytes again is a no-op; other bytes 409; list; delete; 404", async () => {
    const { raw, call, stores } = setup();
    const size = 5 * 1024 * 1024 + 12_345;
    const content = new Uint8Array(size);
    for (let i = 0; i < size; i++) content[i] = (i * 31 + (i >> 11)) & 0xff;
    // The request body is a stream of 64 KiB pieces, without a content-length.
    let offset = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (offset >= size) return controller.close();
        controller.enqueue(content.slice(offset, offset + 65_536));
        offset += 65_536;
      },
    });
    const key = `${acme}/blobs/${seg("snapshots/one")}`;
    const put = await raw("PUT", key, { body, duplex: "half", headers: { "content-type": "application/octet-stream" } });
    expect([put.status, await put.json()]).toEqual([200, {}]);

    const got = await raw("GET", key);
    expect(got.status).toBe(200);
    expect(got.headers.get("content-type")).toBe("application/octet-stream");
    expect(got.headers.get("x-content-type-options")).toBe("nosniff");
    expect(got.body).not.toBeNull();
    const back = new Uint8Array(await got.arrayBuffer());
    expect(back.length).toBe(size);
    expect(Buffer.compare(Buffer.from(back), Buffer.from(content))).toBe(0);

    expect((await raw("PUT", key, { body: content, headers: { "content-type": "application/octet-stream" } })).status).toBe(200);
    const conflict = await raw("PUT", key, { body: text("other"), headers: { "content-type": "application/octet-stream" } });
    expect(conflict.status).toBe(409);
    expect(((await conflict.json()) as Answer["json"]).error).toMatchObject({ code: "blob_conflict", name: "BlobConflictError", fields: { key: "snapshots/one" } });

    const empty = await raw("PUT", `${acme}/blobs/${seg("snapshots/empty")}`, { headers: { "content-type": "application/octet-stream" } });
    expect(empty.status).toBe(200);
    expect((await (await raw("GET", `${acme}/blobs/${seg("snapshots/empty")}`)).arrayBuffer()).byteLength).toBe(0);
    expect((await call("GET", `${acme}/blobs?prefix=${seg("snapshots/")}`)).json).toEqual({ keys: ["snapshots/empty", "snapshots/one"] });

    expect((await call("DELETE", key)).status).toBe(200);
    const missing = await call("GET", key);
    expect([missing.status, missing.json.error?.code, missing.json.error?.fields]).toEqual([404, "blob_not_found", { key: "snapshots/one" }]);
    expect(await stores("tenants/acme")!.blobs.list("")).toEqual(["snapshots/empty"]);
  });

  it("needs application/octet-stream for a blob (415), refuses a declared length over the maximum (413), and a bad key (400)", async () => {
    const { raw, stores } = setup();
    const json = await raw("PUT", `${acme}/blobs/a`, { body: "{}", headers: { "content-type": "application/json" } });
    expect([json.status, ((await json.json()) as Answer["json"]).error?.code]).toEqual([415, "unsupported_media_type"]);
    const none = await raw("PUT", `${acme}/blobs/a`, { body: text("x"), headers: { "content-type": "" } });
    expect(none.status).toBe(415);
    const long = await raw("PUT", `${acme}/blobs/a`, { body: text("x"), headers: { "content-type": "application/octet-stream", "content-length": String(300 * 1024 * 1024) } }).catch(() => null);
    // Some fetch implementations refuse a wrong content-length themselves; the app's own check is what is tested when they do not.
    if (long !== null) expect(long.status).toBe(413);
    const bad = await raw("PUT", `${acme}/blobs/${seg("Bad Key")}`, { body: text("x"), headers: { "content-type": "application/octet-stream" } });
    expect([bad.status, ((await bad.json()) as Answer["json"]).error?.code]).toEqual([400, "invalid_name"]);
    expect(await stores("tenants/acme")!.blobs.list("")).toEqual([]);
  });

  it("takes a blob body larger than the JSON body cap", async () => {
    const { raw } = setup({ maxBodyBytes: 1024 });
    const content = new Uint8Array(64 * 1024).fill(7);
    const put = await raw("PUT", `${acme}/blobs/big`, { body: content, headers: { "content-type": "application/octet-stream" } });
    expect(put.status).toBe(200);
    expect(new Uint8Array(await (await raw("GET", `${acme}/blobs/big`)).arrayBuffer())).toEqual(content);
  });
});

describe("store routes: ordered index", () => {
  const id: OrderedId = { namespace: "jobs", orderingScope: "inbox", stableKey: "Job #1 / ünïcode" };
  const rank: Rank = { ranked: true, value: 5 };
  const due: Due = { state: "due_at", unixMillis: 1_700_000_000_000 };

  it("get, create (and create again), update, delete, listOrdered, listRanked, listDue", async () => {
    const { call } = setup();
    const o = `${acme}/ordered`;
    const missing = await call("POST", `${o}/get`, { body: { id } });
    expect([missing.status, missing.json.error?.code, missing.json.error?.name]).toEqual([404, "ordered_record_not_found", "OrderedRecordNotFoundError"]);
    // A message never renders the stable key; the fields keep the identity.
    expect(missing.json.error?.message).not.toContain("Job #1");
    expect(missing.json.error?.fields?.["id"]).toEqual(id);

    const created = await call("POST", `${o}/create`, { body: { id, rankingScope: "priority", value: b64("payload"), rank, due } });
    expect(created.json).toMatchObject({ created: true, record: { id, rankingScope: "priority", revision: 1, due, rank, value: b64("payload"), deleted: false } });
    const order = (created.json["record"] as { order: number }).order;
    expect(order).toBeGreaterThan(0);
    const again = await call("POST", `${o}/create`, { body: { id, rankingScope: "other", value: "", rank: { ranked: false, value: 9 }, due } });
    expect(again.json).toMatchObject({ created: false, record: { rankingScope: "priority", revision: 1 } });
    const second = { ...id, stableKey: "job-2" };
    await call("POST", `${o}/create`, { body: { id: second, rankingScope: "priority", value: "", rank: { ranked: true, value: 9 }, due: { state: "due_at", unixMillis: 1_800_000_000_000 } } });

    const stale = await call("POST", `${o}/update`, { body: { id, expectedRevision: 7, value: b64("v2"), rank, due } });
    expect(stale.status).toBe(409);
    expect(stale.json.error).toMatchObject({ code: "ordered_revision_conflict", name: "OrderedRevisionConflictError", fields: { expectedRevision: 7, actualRevision: 1 } });
    const badRank = await call("POST", `${o}/update`, { body: { id, expectedRevision: 1, value: "", rank: { ranked: false, value: 3 }, due } });
    expect([badRank.status, badRank.json.error?.code, badRank.json.error?.fields?.["rule"]]).toEqual([400, "invalid_rank", "unranked_value"]);
    const badDue = await call("POST", `${o}/update`, { body: { id, expectedRevision: 1, value: "", rank, due: { state: "later", unixMillis: 0 } } });
    expect([badDue.status, badDue.json.error?.code]).toEqual([400, "invalid_due"]);
    const updated = await call("POST", `${o}/update`, { body: { id, expectedRevision: 1, value: b64("v2"), rank, due } });
    expect(updated.json).toMatchObject({ record: { revision: 2, value: b64("v2"), order } });
    expect((await call("POST", `${o}/get`, { body: { id } })).json).toMatchObject({ record: { revision: 2 } });

    const ordered = await call("GET", `${o}/list-ordered?namespace=jobs&orderingScope=inbox&limit=1`);
    expect(ordered.json).toMatchObject({ records: [{ id }], nextAfterOrder: order });
    const orderedRest = await call("GET", `${o}/list-ordered?namespace=jobs&orderingScope=inbox&afterOrder=${order}`);
    expect((orderedRest.json["records"] as OrderedRecord[]).map((r) => r.id.stableKey)).toEqual(["job-2"]);

    const ranked = await call("GET", `${o}/list-ranked?namespace=jobs&rankingScope=priority&limit=1`);
    expect((ranked.json["records"] as OrderedRecord[]).map((r) => r.id.stableKey)).toEqual(["job-2"]);
    const cursor = ranked.json["nextCursor"] as string;
    expect(cursor).not.toBe("");
    const rankedRest = await call("GET", `${o}/list-ranked?namespace=jobs&rankingScope=priority&limit=1&after=${encodeURIComponent(cursor)}`);
    expect((rankedRest.json["records"] as OrderedRecord[]).map((r) => r.id.stableKey)).toEqual([id.stableKey]);

    const dueList = await call("GET", `${o}/list-due?namespace=jobs&dueAtOrBefore=1750000000000`);
    expect(dueList.json).toMatchObject({ records: [{ id }], nextCursor: "" });
    const badCursor = await call("GET", `${o}/list-due?namespace=jobs&dueAtOrBefore=0&after=not-a-cursor`);
    expect([badCursor.status, badCursor.json.error?.code, badCursor.json.error?.fields?.["kind"]]).toEqual([400, "invalid_ordered_cursor", "due"]);
    // Longer than any token the index issues: the index's own refusal, not a schema's.
    const longCursor = await call("GET", `${o}/list-ranked?namespace=jobs&rankingScope=priority&after=${"x".repeat(16_385)}`);
    expect([longCursor.status, longCursor.json.error?.code, longCursor.json.error?.fields?.["kind"], longCursor.json.error?.fields?.["rule"]]).toEqual([400, "invalid_ordered_cursor", "ranked", "malformed"]);
    const badLimit = await call("GET", `${o}/list-due?namespace=jobs&dueAtOrBefore=0&limit=5000`);
    expect([badLimit.status, badLimit.json.error?.code, badLimit.json.error?.fields]).toEqual([400, "invalid_ordered_limit", { limit: 5000, max: 1000 }]);

    const staleDelete = await call("POST", `${o}/delete`, { body: { id, expectedRevision: 1 } });
    expect(staleDelete.status).toBe(409);
    const deleted = await call("POST", `${o}/delete`, { body: { id, expectedRevision: 2 } });
    expect(deleted.json).toMatchObject({ record: { revision: 3, deleted: true, rank: { ranked: false, value: 0 }, due: { state: "not_due", unixMillis: 0 } } });
    const resurrect = await call("POST", `${o}/update`, { body: { id, expectedRevision: 3, value: "", rank, due } });
    expect([resurrect.status, resurrect.json.error?.code]).toEqual([409, "ordered_deleted"]);
    const badKey = await call("POST", `${o}/get`, { body: { id: { ...id, stableKey: "" } } });
    expect([badKey.status, badKey.json.error?.code, badKey.json.error?.fields]).toEqual([400, "invalid_stable_key", { rule: "empty", stableKeyLength: 0 }]);
  });
});

describe("store routes: ordered listings and query numbers", () => {
  it("pages through ranked and due listings whose cursor is longer than 4096 characters (the index issues up to MAX_ORDERED_CURSOR_CHARS)", async () => {
    const { call, stores } = setup();
    const index = stores("tenants/acme")!.requireOrderedIndex();
    // The longest position a token names: 511-byte names and a 1024-byte stable key of characters JSON escapes.
    const name = Array.from({ length: 256 }, () => "a").join("/").slice(0, 511);
    const keys = ["\u0001".repeat(MAX_STABLE_KEY_BYTES), "\u0002".repeat(MAX_STABLE_KEY_BYTES), "\u0003".repeat(MAX_STABLE_KEY_BYTES)];
    for (const stableKey of keys) {
      const { created } = await index.create({ namespace: name, orderingScope: name, stableKey }, name, new Uint8Array(), { ranked: true, value: -1 }, { state: "due_at", unixMillis: 7 });
      expect(created).toBe(true);
    }
    const o = `${acme}/ordered`;
    for (const list of [`list-ranked?namespace=${name}&rankingScope=${name}`, `list-due?namespace=${name}&dueAtOrBefore=7`]) {
      const seen: string[] = [];
      let after = "";
      for (let page = 0; page < 5; page++) {
        const answer = await call("GET", `${o}/${list}&limit=1${after === "" ? "" : `&after=${encodeURIComponent(after)}`}`);
        expect([answer.status, answer.json.error?.code]).toEqual([200, undefined]);
        seen.push(...(answer.json["records"] as OrderedRecord[]).map((record) => record.id.stableKey));
        after = answer.json["nextCursor"] as string;
        if (after === "") break;
        expect(after.length).toBeGreaterThan(4096);
        expect(after.length).toBeLessThanOrEqual(MAX_ORDERED_CURSOR_CHARS);
      }
      expect(seen.sort()).toEqual(keys);
    }
    const tooLong = await call("GET", `${o}/list-due?namespace=jobs&dueAtOrBefore=0&after=${"A".repeat(MAX_ORDERED_CURSOR_CHARS + 1)}`);
    // The spec's answer to a token no index issued: InvalidOrderedCursorError of the listing's kind.
    expect([tooLong.status, tooLong.json.error?.code, tooLong.json.error?.fields?.["kind"], tooLong.json.error?.fields?.["rule"]]).toEqual([400, "invalid_ordered_cursor", "due", "malformed"]);
  });

  it("reads query numbers as plain decimals: empty, hex, exponent, signs and spaces are 400 invalid_request, not 0, 16 or 1000", async () => {
    const { call, stores } = setup();
    const index = stores("tenants/acme")!.requireOrderedIndex();
    for (const [stableKey, unixMillis] of [["at-0", 0], ["at-16", 16], ["at-1000", 1000]] as const) {
      await index.create({ namespace: "jobs", orderingScope: "inbox", stableKey }, "priority", new Uint8Array(), { ranked: false, value: 0 }, { state: "due_at", unixMillis });
    }
    await stores("tenants/acme")!.ledger.append("log", 0, new Uint8Array([1]));
    const o = `${acme}/ordered`;
    const refused = async (path: string, argument: string) => {
      const answer = await call("GET", path);
      expect([answer.status, answer.json.error?.code, answer.json.error?.fields?.["argument"]], path).toEqual([400, "invalid_request", argument]);
    };
    for (const text of ["", "0x10", "1e3", "1E3", "+16", " 16", "16 ", "0b1", "1.", ".5", "1_000"]) {
      const q = encodeURIComponent(text);
      await refused(`${o}/list-due?namespace=jobs&dueAtOrBefore=${q}`, "dueAtOrBefore");
      await refused(`${o}/list-due?namespace=jobs&dueAtOrBefore=1000&limit=${q}`, "limit");
      await refused(`${o}/list-ordered?namespace=jobs&orderingScope=inbox&afterOrder=${q}`, "afterOrder");
      await refused(`${o}/list-ranked?namespace=jobs&rankingScope=priority&limit=${q}`, "limit");
      await refused(`${acme}/ledgers/log/records?from=${q}`, "from");
      await refused(`${acme}/ledgers/log/records?limit=${q}`, "limit");
      await refused(`${acme}/ledgers/log/records?life=${q}`, "life");
    }
    const negativeLife = await call("GET", `${acme}/ledgers/log/records?life=-1`);
    expect([negativeLife.status, negativeLife.json.error?.code, negativeLife.json.error?.fields?.["argument"]]).toEqual([400, "invalid_argument", "life"]);
    // An integer past 2^53 - 1 is a number the store refuses with its own typed error, as a local call's.
    const huge = await call("GET", `${o}/list-due?namespace=jobs&dueAtOrBefore=9007199254740993`);
    expect([huge.status, huge.json.error?.code, huge.json.error?.fields?.["argument"]]).toEqual([400, "invalid_argument", "dueAtOrBefore"]);
    // Plain decimals are read as written; what the store refuses is its typed error, as for a local call.
    const due = await call("GET", `${o}/list-due?namespace=jobs&dueAtOrBefore=16`);
    expect((due.json["records"] as OrderedRecord[]).map((record) => record.id.stableKey)).toEqual(["at-0", "at-16"]);
    const ordered = await call("GET", `${o}/list-ordered?namespace=jobs&orderingScope=inbox&afterOrder=-0&limit=007`);
    expect((ordered.json["records"] as OrderedRecord[]).map((record) => record.id.stableKey)).toEqual(["at-0", "at-16", "at-1000"]);
    const fraction = await call("GET", `${o}/list-due?namespace=jobs&dueAtOrBefore=0&limit=1.5`);
    expect([fraction.status, fraction.json.error?.code, fraction.json.error?.fields]).toEqual([400, "invalid_ordered_limit", { limit: 1.5, max: 1000 }]);
    const negative = await call("GET", `${o}/list-ordered?namespace=jobs&orderingScope=inbox&afterOrder=-1`);
    expect([negative.status, negative.json.error?.code, negative.json.error?.fields?.["argument"]]).toEqual([400, "invalid_argument", "afterOrder"]);
    expect((await call("GET", `${acme}/ledgers/log/records?from=1&limit=10`)).json).toEqual({ records: [{ seq: 1, payload: "AQ==" }], next: null, life: 0 });
  });
});

describe("store routes: the ordered index checks candidate fields in its own order", () => {
  const id: OrderedId = { namespace: "jobs", orderingScope: "inbox", stableKey: "k" };
  const UNRANKED: Rank = { ranked: false, value: 0 };
  const NOT_DUE: Due = { state: "not_due", unixMillis: 0 };
  const oversized = encodeBase64(new Uint8Array(MAX_ORDERED_VALUE_BYTES + 3));

  it("create of an existing identity answers the stored record without looking at the candidate (oversized value, badly shaped rank, due, scope)", async () => {
    const { call } = setup();
    const o = `${acme}/ordered`;
    const first = await call("POST", `${o}/create`, { body: { id, rankingScope: "hot", value: b64("one"), rank: UNRANKED, due: NOT_DUE } });
    expect(first.json).toMatchObject({ created: true });
    const stored = first.json["record"];
    const candidates: Record<string, unknown>[] = [
      { rankingScope: "hot", value: oversized, rank: UNRANKED, due: NOT_DUE },
      { rankingScope: "hot", value: "", rank: { ranked: "yes", value: 0 }, due: NOT_DUE },
      { rankingScope: "hot", value: "", rank: "high", due: { state: "soon" } },
      { rankingScope: 42, value: "", rank: null, due: [] },
    ];
    for (const candidate of candidates) {
      const again = await call("POST", `${o}/create`, { body: { id, ...candidate } });
      expect([again.status, again.json]).toEqual([200, { record: stored, created: false }]);
    }
  });

  it("a new identity's candidate is the index's typed error: ordered_value_too_large { size, max }, invalid_rank, invalid_due, invalid_name", async () => {
    const { call, stores } = setup();
    const o = `${acme}/ordered`;
    const fresh = { ...id, stableKey: "new" };
    const big = await call("POST", `${o}/create`, { body: { id: fresh, rankingScope: "hot", value: oversized, rank: UNRANKED, due: NOT_DUE } });
    expect([big.status, big.json.error?.code, big.json.error?.fields]).toEqual([400, "ordered_value_too_large", { size: MAX_ORDERED_VALUE_BYTES + 3, max: MAX_ORDERED_VALUE_BYTES }]);
    const rank = await call("POST", `${o}/create`, { body: { id: fresh, rankingScope: "hot", value: "", rank: { ranked: "yes", value: 0 }, due: NOT_DUE } });
    expect([rank.status, rank.json.error?.code, rank.json.error?.fields?.["rule"]]).toEqual([400, "invalid_rank", "ranked"]);
    const due = await call("POST", `${o}/create`, { body: { id: fresh, rankingScope: "hot", value: "", rank: UNRANKED, due: "later" } });
    expect([due.status, due.json.error?.code, due.json.error?.fields?.["rule"]]).toEqual([400, "invalid_due", "type"]);
    const scope = await call("POST", `${o}/create`, { body: { id: fresh, rankingScope: "Hot", value: "", rank: UNRANKED, due: NOT_DUE } });
    expect([scope.status, scope.json.error?.code]).toEqual([400, "invalid_name"]);
    // The id is checked first, then the base64 (a transport error), then the index's own checks.
    const badId = await call("POST", `${o}/create`, { body: { id: { ...fresh, stableKey: "" }, rankingScope: "hot", value: "not base64!", rank: UNRANKED, due: NOT_DUE } });
    expect([badId.status, badId.json.error?.code]).toEqual([400, "invalid_stable_key"]);
    const badBase64 = await call("POST", `${o}/create`, { body: { id: fresh, rankingScope: "hot", value: "not base64!", rank: UNRANKED, due: NOT_DUE } });
    expect([badBase64.status, badBase64.json.error?.code, badBase64.json.error?.fields?.["argument"]]).toEqual([400, "invalid_request", "value"]);
    const missing = await call("POST", `${o}/create`, { body: { id: fresh, rankingScope: "hot", value: "", due: NOT_DUE } });
    expect([missing.status, missing.json.error?.code, missing.json.error?.fields?.["argument"]]).toEqual([400, "invalid_request", "rank"]);
    expect((await stores("tenants/acme")!.requireOrderedIndex().listOrdered("jobs", "inbox", 0, 10)).records).toEqual([]);
  });

  it("update answers not found and ordered_deleted whatever the candidate and revision; a live record's oversized value is ordered_value_too_large", async () => {
    const { call } = setup();
    const o = `${acme}/ordered`;
    const absent = await call("POST", `${o}/update`, { body: { id, expectedRevision: "one", value: oversized, rank: { ranked: "yes" }, due: null } });
    expect([absent.status, absent.json.error?.code]).toEqual([404, "ordered_record_not_found"]);
    await call("POST", `${o}/create`, { body: { id, rankingScope: "hot", value: b64("one"), rank: UNRANKED, due: NOT_DUE } });
    const live = await call("POST", `${o}/update`, { body: { id, expectedRevision: 1, value: oversized, rank: UNRANKED, due: NOT_DUE } });
    expect([live.status, live.json.error?.code, live.json.error?.fields]).toEqual([400, "ordered_value_too_large", { size: MAX_ORDERED_VALUE_BYTES + 3, max: MAX_ORDERED_VALUE_BYTES }]);
    const stale = await call("POST", `${o}/update`, { body: { id, expectedRevision: "1", value: "", rank: UNRANKED, due: NOT_DUE } });
    expect([stale.status, stale.json.error?.code, stale.json.error?.fields?.["argument"]]).toEqual([400, "invalid_argument", "expectedRevision"]);
    const deleted = await call("POST", `${o}/delete`, { body: { id, expectedRevision: 1 } });
    expect(deleted.json).toMatchObject({ record: { revision: 2, deleted: true } });
    for (const candidate of [
      { expectedRevision: 2, value: oversized, rank: UNRANKED, due: NOT_DUE },
      { expectedRevision: 2, value: "", rank: { ranked: "yes", value: 0 }, due: { state: "soon" } },
      { expectedRevision: "two", value: "", rank: UNRANKED, due: NOT_DUE },
    ]) {
      const update = await call("POST", `${o}/update`, { body: { id, ...candidate } });
      expect([update.status, update.json.error?.code]).toEqual([409, "ordered_deleted"]);
    }
    const again = await call("POST", `${o}/delete`, { body: { id, expectedRevision: "any" } });
    expect([again.status, again.json]).toEqual([200, deleted.json]);
  });
});

describe("store routes: auth, scopes, routing", () => {
  it("needs `store:<store>` or `store:*` (403), a token (401), a known store (404); other stores stay untouched", async () => {
    const { call, raw, stores } = setup();
    expect((await call("GET", `${acme}/ledgers/log/tip`, { token: ACME })).status).toBe(200);
    const other = `/v1/stores/${seg("tenants/other")}`;
    const forbidden = await call("PUT", `${other}/kv/k`, { token: ACME, body: { expectedRev: 0, value: "" } });
    expect([forbidden.status, forbidden.json.error?.code]).toEqual([403, "forbidden"]);
    expect(forbidden.json.error?.message).toContain("store:tenants/other");
    expect((await call("GET", `${acme}/kv`, { token: JOURNAL })).status).toBe(403);
    const blob = await raw("PUT", `${other}/blobs/b`, { token: ACME, body: text("x"), headers: { "content-type": "application/octet-stream" } });
    expect(blob.status).toBe(403);
    expect(await stores("tenants/other")!.kv.keys("")).toEqual([]);
    expect(await stores("tenants/other")!.blobs.list("")).toEqual([]);
    expect((await raw("GET", `${acme}/kv`, { token: "not-a-configured-token-000" })).status).toBe(401);
    const unknown = await call("GET", `/v1/stores/missing/kv`);
    expect([unknown.status, unknown.json.error?.code]).toEqual([404, "unknown_store"]);
    // A store name that is not one path segment does not route.
    expect((await call("GET", `/v1/stores/tenants/acme/kv`)).status).toBe(404);
    expect((await call("POST", `${acme}/kv/k`, { body: {} })).json.error?.code).toBe("method_not_allowed");
  });

  it("accepts `store:*` and `store:<name>` scopes and refuses malformed ones", () => {
    expect(() => checkTokens([{ name: "a", token: ALL, scopes: ["store:*", "store:tenants/acme", "store:a.b_c-d"] }])).not.toThrow();
    for (const scope of ["store:", "store:Tenants", "store:a//b", "store:/a", "store:a/", `store:${"a".repeat(513)}`]) {
      expect(() => checkTokens([{ name: "a", token: ALL, scopes: [scope] }]), scope).toThrow(/scopes/);
    }
  });

  it("serves no store routes without `stores`, and documents them in the OpenAPI document when it has them", async () => {
    const plain = createApp({ journals: {}, auth: { tokens: [{ name: "all", token: ALL, scopes: ["store:*"] }] } });
    const answer = await plain.fetch(new Request(`${base}${acme}/kv`, { headers: { authorization: `Bearer ${ALL}` } }));
    expect(answer.status).toBe(404);

    const { call } = setup();
    const doc = (await call("GET", "/v1/openapi.json")).json as { paths: Record<string, Record<string, unknown>> };
    expect(Object.keys(doc.paths).filter((path) => path.startsWith("/v1/stores/")).sort()).toEqual([
      "/v1/stores/{store}/blobs",
      "/v1/stores/{store}/blobs/{key}",
      "/v1/stores/{store}/kv",
      "/v1/stores/{store}/kv/{key}",
      "/v1/stores/{store}/ledgers/{name}",
      "/v1/stores/{store}/ledgers/{name}/append",
      "/v1/stores/{store}/ledgers/{name}/records",
      "/v1/stores/{store}/ledgers/{name}/tip",
      "/v1/stores/{store}/ordered/create",
      "/v1/stores/{store}/ordered/delete",
      "/v1/stores/{store}/ordered/get",
      "/v1/stores/{store}/ordered/list-due",
      "/v1/stores/{store}/ordered/list-ordered",
      "/v1/stores/{store}/ordered/list-ranked",
      "/v1/stores/{store}/ordered/update",
    ]);
    expect(Object.keys(doc.paths["/v1/stores/{store}/blobs/{key}"]!).sort()).toEqual(["delete", "get", "put"]);
    await expect(validate(structuredClone(doc) as never)).resolves.toMatchObject({ valid: true });
  });
});

describe("storage errors as data", () => {
  it("rebuild the same class, code, message and spec fields", () => {
    const samples: StorageError[] = [
      new ConflictError("orders", 3),
      new RevisionConflictError("a/b", 1, 2),
      new KeyNotFoundError("k"),
      new BlobConflictError("snap"),
      new InvalidNameError("Bad", "segment_start"),
      // A spec Name spelled like the class: still the field, kept on the wire.
      new InvalidNameError("InvalidNameError", "segment_start"),
      new ConflictError("ConflictError", 1),
      new OrderedRevisionConflictError({ namespace: "n", orderingScope: "s", stableKey: "k" }, 1, 4),
      new AmbiguousError("log", 3),
      new AmbiguousError("settings/theme", 0, undefined, "kv.put"),
      new AmbiguousError("snap/1", 0, undefined, "blobs.delete"),
    ];
    for (const error of samples) {
      const wire = JSON.parse(JSON.stringify(encodeStorageError(error))) as StorageWireError;
      const back = decodeStorageError(wire);
      expect(back).toBeInstanceOf(error.constructor);
      expect(back.code).toBe(error.code);
      expect(back.message).toBe(error.message);
      expect(back.name).toBe(error.name);
      expect(encodeStorageError(back)).toEqual(wire);
    }
    const unknown = decodeStorageError({ code: "future_code", type: "FutureError", message: "later", fields: { extra: 1 } });
    expect([unknown instanceof StorageError, unknown.code, unknown.message, (unknown as unknown as { extra: number }).extra]).toEqual([true, "future_code", "later", 1]);
  });

  it("base64 round-trips every length", () => {
    for (let n = 0; n < 70; n++) {
      const bytes = new Uint8Array(n).map((_, i) => (i * 97 + n) & 0xff);
      const encoded = encodeBase64(bytes);
      expect(encoded).toBe(Buffer.from(bytes).toString("base64"));
      expect(decodeBase64(encoded)).toEqual(bytes);
    }
    expect(() => decodeBase64("abc")).toThrow(/base64/);
  });
});

// ------------------------------------------------------------------ the OrderedIndex suite over HTTP

/** An OrderedIndex over the store routes (what a remote client of the HTTP API does), for the conformance suite. */
function httpOrderedIndex(app: ReturnType<typeof createApp>, store: string): OrderedIndex {
  const prefix = `${base}/v1/stores/${seg(store)}/ordered`;
  const fromJson = (record: Record<string, unknown>): OrderedRecord => ({ ...(record as unknown as OrderedRecord), value: decodeBase64(record["value"] as string) });
  async function send(
    method: string,
    path: string,
    body?: { rank?: Rank; due?: Due } & Record<string, unknown>,
    signal?: { aborted: boolean; reason?: unknown },
  ): Promise<Record<string, unknown>> {
    if (signal?.aborted) throw signal.reason;
    const response = await app.fetch(
      new Request(`${prefix}/${path}`, {
        method,
        headers: { authorization: `Bearer ${ALL}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }),
    );
    const json = (await response.json()) as Record<string, unknown> & { error?: { code: string; name: string; message: string; fields: Record<string, unknown> } };
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
  return {
    get: async (id, options) => fromJson((await send("POST", "get", { id }, options?.signal)).record as Record<string, unknown>),
    create: async (id, rankingScope, value, rank, due, options) => {
      const answer = await send("POST", "create", { id, rankingScope, value: encodeBase64(value), rank, due }, options?.signal);
      return { record: fromJson(answer["record"] as Record<string, unknown>), created: answer["created"] as boolean };
    },
    update: async (id, expectedRevision, value, rank, due, options) =>
      fromJson((await send("POST", "update", { id, expectedRevision, value: encodeBase64(value), rank, due }, options?.signal)).record as Record<string, unknown>),
    delete: async (id, expectedRevision, options) => fromJson((await send("POST", "delete", { id, expectedRevision }, options?.signal)).record as Record<string, unknown>),
    listOrdered: async (namespace, orderingScope, afterOrder, limit, options) => {
      const page = await send("GET", `list-ordered?${query({ namespace, orderingScope, afterOrder, limit })}`, undefined, options?.signal);
      return { records: (page["records"] as Record<string, unknown>[]).map(fromJson), nextAfterOrder: page["nextAfterOrder"] as number };
    },
    listRanked: async (namespace, rankingScope, after, limit, options) => {
      const page = await send("GET", `list-ranked?${query({ namespace, rankingScope, after, limit })}`, undefined, options?.signal);
      return { records: (page["records"] as Record<string, unknown>[]).map(fromJson), nextCursor: page["nextCursor"] as string };
    },
    listDue: async (namespace, dueAtOrBefore, after, limit, options) => {
      const page = await send("GET", `list-due?${query({ namespace, dueAtOrBefore, after, limit })}`, undefined, options?.signal);
      return { records: (page["records"] as Record<string, unknown>[]).map(fromJson), nextCursor: page["nextCursor"] as string };
    },
  };
}

describe("OrderedIndex conformance through the HTTP store routes (memory store behind)", () => {
  const subjects: OrderedSubjectFactory = async () => {
    const engine = memoryEngine();
    const store = createStore(engine, { name: "conformance" });
    const app = createApp({ journals: {}, stores: { conformance: store }, auth: { tokens: [{ name: "all", token: ALL, scopes: ["store:*"] }] } });
    const index = httpOrderedIndex(app, "conformance");
    return { index, reopen: async () => index, close: () => engine.close() };
  };
  for (const c of orderedConformanceCases({ label: "http", canReopen: true, runs: soakRequested() ? 1000 : 25, createSubject: subjects })) {
    it(c.name, c.run, c.timeoutMs);
  }
});
