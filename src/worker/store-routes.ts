/**
 * The store routes of the HTTP API (`/v1/stores/{store}/...`, docs/http-api.md):
 * ledger, KV, blobs and the ordered index of a {@link RemoteStore}, each call
 * one store call. Registered by `createApp` when it is given `stores`.
 *
 * - Names in paths (the store, a ledger, a KV or blob key) are ONE path
 *   segment each: `encodeURIComponent(name)`, so `tenants/acme` is sent as
 *   `tenants%2Facme`. Names in bodies and queries are plain.
 * - Order of checks: body gates (size, content type), auth, route, the token's
 *   `store:<store>` or `store:*` scope (403, before anything is validated, so
 *   a token lacking it learns no field and no store name), zod shape
 *   (400 `invalid_request`), the store name's grammar (400 `invalid_name`),
 *   the store's existence (404 `unknown_store`), then the store call, whose
 *   typed errors become statuses in `./errors.ts`.
 * - Byte payloads of JSON bodies and answers are standard base64; blobs are
 *   raw `application/octet-stream` bodies, streamed in and out.
 * - No leases and no fences: they need heartbeats and the holder's timers.
 */
import { createRoute, type OpenAPIHono, type z } from "@hono/zod-openapi";
import type { MiddlewareHandler } from "hono";
import { MAX_BLOB_BYTES } from "../storage/blobs.js";
import { validateName } from "../storage/names.js";
import type { Due, OrderedId, OrderedRecord, Rank } from "../storage/ordered/types.js";
import { validateOrderedId } from "../storage/ordered/validate.js";
import type { ByteStream } from "../storage/web.js";
import type { AppEnv } from "./app.js";
import { mayUseStore } from "./auth.js";
import { ApiError } from "./errors.js";
import * as s from "./store-schemas.js";
import { decodeBase64, encodeBase64, isBase64, resolveStore, type RemoteStore, type StoreTable } from "./stores.js";

/**
 * A request body as the core's blob input: the platform's `ReadableStream` is
 * a `ByteStream` (the core types it by the members it uses; which platform
 * typings are loaded differs between the build and the test programs).
 */
function byteStream(body: unknown): ByteStream | Uint8Array {
  return body as ByteStream | Uint8Array;
}

/** The largest JSON body of a store route: a 1 MiB payload in base64 plus room for the rest of the body. */
export const MAX_STORE_BODY_BYTES = Math.ceil((1024 * 1024) / 3) * 4 + 64 * 1024;

const BLOB_PATH = /^\/v1\/stores\/[^/]+\/blobs\/[^/]+$/;
const STORE_PATH = /^\/v1\/stores\/[^/]+\//;

/**
 * What body a request may carry: `"blob"` for a blob upload (raw
 * `application/octet-stream`, streamed, no JSON body cap), `"store"` for the
 * other store routes (JSON, up to {@link MAX_STORE_BODY_BYTES}), `undefined`
 * for every other route.
 */
export function storeBodyKind(method: string, path: string): "blob" | "store" | undefined {
  if (method === "PUT" && BLOB_PATH.test(path)) return "blob";
  return STORE_PATH.test(path) ? "store" : undefined;
}

/** What {@link registerStoreRoutes} needs from `createApp`. */
export interface StoreRouteContext {
  readonly stores: StoreTable;
  /** Remember a route's path for 405 answers. */
  readonly remember: (method: string, path: string) => void;
  /** The error answers of every route (OpenAPI). */
  readonly errors: Readonly<Record<number, { readonly description: string; readonly content: Readonly<Record<string, { readonly schema: z.ZodType }>> }>>;
  readonly security: { bearer: never[] }[];
}

/**
 * The bytes of an ordered write's base64 `value`, decoded only after `id` is
 * checked (the index checks the id before anything else; the decoded bytes,
 * of any length, then go to the index, which checks them in its own order).
 *
 * @throws {ApiError} `invalid_request` (argument `value`) when `value` is not standard base64.
 */
function orderedValueBytes(id: OrderedId, value: unknown): Uint8Array {
  validateOrderedId(id);
  if (typeof value !== "string" || !isBase64(value)) throw new ApiError("invalid_request", "value: must be standard base64 with padding", "value");
  return decodeBase64(value, "value");
}

function recordJson(record: OrderedRecord) {
  return {
    id: { namespace: record.id.namespace, orderingScope: record.id.orderingScope, stableKey: record.id.stableKey },
    rankingScope: record.rankingScope,
    revision: record.revision,
    order: record.order,
    due: { state: record.due.state, unixMillis: record.due.unixMillis },
    rank: { ranked: record.rank.ranked, value: record.rank.value },
    value: encodeBase64(record.value),
    deleted: record.deleted,
  };
}

/**
 * Register the store routes on `app`.
 *
 * @example
 * ```ts
 * // inside createApp, when options.stores is set:
 * registerStoreRoutes(app, { stores: options.stores, remember, errors, security });
 * ```
 */
export function registerStoreRoutes(app: OpenAPIHono<AppEnv>, context: StoreRouteContext): void {
  const { stores, remember, errors, security } = context;
  const ok = <T extends z.ZodType>(schema: T, description: string) => ({ 200: { description, content: { "application/json": { schema } } }, ...errors });
  const body = <T extends z.ZodType>(schema: T) => ({ body: { required: true, content: { "application/json": { schema } } } });
  const tags = ["stores"];

  /**
   * The scope check of every store route (403), the route's `middleware`: @hono/zod-openapi runs it
   * before the route's validators. It reads the `store` path parameter unvalidated (decoded, as the
   * validators see it): a `store:<store>` scope names a valid store only, so a malformed name is
   * 403 to such a token, and 400 (after this check) to a `store:*` one.
   */
  const scoped: MiddlewareHandler<AppEnv> = async (c, next) => {
    const name = c.req.param("store") ?? "";
    if (!mayUseStore(c.get("principal"), name)) throw new ApiError("forbidden", `this token lacks the scope \`store:${name}\` or \`store:*\``);
    await next();
  };

  /** The store of a request (its scope already checked by {@link scoped}): grammar (400), existence (404). */
  function storeOf(name: string): RemoteStore {
    validateName(name);
    const store = resolveStore(stores, name);
    if (store === undefined) throw new ApiError("unknown_store", `no store \`${name}\``);
    return store;
  }

  const route = <R extends Parameters<typeof createRoute>[0]>(config: R) => {
    remember(config.method, config.path);
    return createRoute({ ...config, tags, security, middleware: scoped });
  };

  // --- ledger -------------------------------------------------------------------------------------

  app.openapi(
    route({
      method: "post",
      path: "/v1/stores/{store}/ledgers/{name}/append",
      summary: "Ledger: append a record at expected + 1 (compare-and-swap on the tip)",
      description: "409 `conflict` when the tip is not `expected` (nothing landed). Needs `store:<store>` or `store:*`.",
      request: { params: s.LedgerParamsSchema, ...body(s.LedgerAppendBodySchema) },
      responses: ok(s.LedgerAppendAnswerSchema, "committed"),
    }),
    async (c) => {
      const { store, name } = c.req.valid("param");
      const { expected, payload } = c.req.valid("json");
      const target = storeOf(store);
      // `null` (JSON's NaN) goes on as it is: the store refuses it with its typed error.
      await target.ledger.append(name, expected as number, decodeBase64(payload, "payload"));
      return c.json({ seq: (expected as number) + 1 } as never, 200);
    },
  );

  app.openapi(
    route({
      method: "get",
      path: "/v1/stores/{store}/ledgers/{name}/records",
      summary: "Ledger: one page of records from `from`",
      description: `Up to \`limit\` records and about ${s.MAX_LEDGER_PAGE_BYTES} payload bytes (at least one record). Continue with \`from = next\` and \`life\` (the page's) until \`next\` is null; 404 \`record_not_found\` when the ledger was deleted since the life given.`,
      request: { params: s.LedgerParamsSchema, query: s.LedgerRecordsQuerySchema },
      responses: ok(s.LedgerRecordsAnswerSchema, "one page"),
    }),
    async (c) => {
      const { store, name } = c.req.valid("param");
      const { from = 0, life, limit = 100 } = c.req.valid("query");
      const target = storeOf(store);
      const cursor = await target.ledger.read(name, from, { life });
      const records: { seq: number; payload: string }[] = [];
      let next: number | null = null;
      try {
        let bytes = 0;
        for (;;) {
          if (records.length >= limit || bytes >= s.MAX_LEDGER_PAGE_BYTES) {
            next = records[records.length - 1]!.seq + 1;
            break;
          }
          const record = await cursor.next();
          if (record === undefined) break;
          records.push({ seq: record.seq, payload: encodeBase64(record.payload) });
          bytes += record.payload.length;
        }
      } finally {
        await cursor.close();
      }
      return c.json({ records, next, life: cursor.life } as never, 200);
    },
  );

  app.openapi(
    route({
      method: "get",
      path: "/v1/stores/{store}/ledgers/{name}/tip",
      summary: "Ledger: the last sequence (0 when empty or absent)",
      request: { params: s.LedgerParamsSchema },
      responses: ok(s.LedgerTipAnswerSchema, "the tip"),
    }),
    async (c) => {
      const { store, name } = c.req.valid("param");
      return c.json({ tip: await storeOf(store).ledger.tip(name) } as never, 200);
    },
  );

  app.openapi(
    route({
      method: "delete",
      path: "/v1/stores/{store}/ledgers/{name}",
      summary: "Ledger: delete (absent is a no-op); a later append starts again at expected 0",
      request: { params: s.LedgerParamsSchema },
      responses: ok(s.StoreEmptyAnswerSchema, "deleted"),
    }),
    async (c) => {
      const { store, name } = c.req.valid("param");
      await storeOf(store).ledger.delete(name);
      return c.json({} as never, 200);
    },
  );

  // --- KV -----------------------------------------------------------------------------------------

  app.openapi(
    route({
      method: "get",
      path: "/v1/stores/{store}/kv",
      summary: "KV: the keys that start with `prefix`, ascending",
      request: { params: s.StoreParamsSchema, query: s.PrefixQuerySchema },
      responses: ok(s.KeysAnswerSchema, "the keys"),
    }),
    async (c) => {
      const { store } = c.req.valid("param");
      const { prefix = "" } = c.req.valid("query");
      return c.json({ keys: await storeOf(store).kv.keys(prefix) } as never, 200);
    },
  );

  app.openapi(
    route({
      method: "get",
      path: "/v1/stores/{store}/kv/{key}",
      summary: "KV: a value and its revision",
      description: "404 `key_not_found` when absent.",
      request: { params: s.KeyParamsSchema },
      responses: ok(s.KvEntrySchema, "the entry"),
    }),
    async (c) => {
      const { store, key } = c.req.valid("param");
      const entry = await storeOf(store).kv.get(key);
      return c.json({ value: encodeBase64(entry.value), rev: entry.rev } as never, 200);
    },
  );

  app.openapi(
    route({
      method: "put",
      path: "/v1/stores/{store}/kv/{key}",
      summary: "KV: write iff the current revision is `expectedRev` (0: absent)",
      description: "409 `revision_conflict` (with `expectedRev` and `actualRev`) otherwise; nothing changes.",
      request: { params: s.KeyParamsSchema, ...body(s.KvPutBodySchema) },
      responses: ok(s.KvPutAnswerSchema, "the new revision"),
    }),
    async (c) => {
      const { store, key } = c.req.valid("param");
      const { expectedRev, value } = c.req.valid("json");
      const target = storeOf(store);
      return c.json({ rev: await target.kv.put(key, expectedRev as number, decodeBase64(value, "value")) } as never, 200);
    },
  );

  app.openapi(
    route({
      method: "delete",
      path: "/v1/stores/{store}/kv/{key}",
      summary: "KV: delete (absent is a no-op)",
      request: { params: s.KeyParamsSchema },
      responses: ok(s.StoreEmptyAnswerSchema, "deleted"),
    }),
    async (c) => {
      const { store, key } = c.req.valid("param");
      await storeOf(store).kv.delete(key);
      return c.json({} as never, 200);
    },
  );

  // --- blobs --------------------------------------------------------------------------------------

  app.openapi(
    route({
      method: "get",
      path: "/v1/stores/{store}/blobs",
      summary: "Blobs: the keys that start with `prefix`, ascending",
      request: { params: s.StoreParamsSchema, query: s.PrefixQuerySchema },
      responses: ok(s.KeysAnswerSchema, "the keys"),
    }),
    async (c) => {
      const { store } = c.req.valid("param");
      const { prefix = "" } = c.req.valid("query");
      return c.json({ keys: await storeOf(store).blobs.list(prefix) } as never, 200);
    },
  );

  app.openapi(
    route({
      method: "put",
      path: "/v1/stores/{store}/blobs/{key}",
      summary: "Blobs: store the request body (raw bytes, streamed) at `key`",
      description: `The body is \`application/octet-stream\`, at most ${MAX_BLOB_BYTES} bytes, streamed to the store. The same bytes again is a no-op; other bytes are 409 \`blob_conflict\` (the original is kept).`,
      request: { params: s.KeyParamsSchema, body: { required: true, content: { "application/octet-stream": { schema: s.BlobBodySchema } } } },
      responses: ok(s.StoreEmptyAnswerSchema, "stored (or already there)"),
    }),
    async (c) => {
      const { store, key } = c.req.valid("param");
      const target = storeOf(store);
      const length = c.req.header("content-length");
      if (length !== undefined && Number(length) > MAX_BLOB_BYTES) throw new ApiError("payload_too_large", `a blob is at most ${MAX_BLOB_BYTES} bytes`);
      await target.blobs.put(key, byteStream(c.req.raw.body ?? new Uint8Array()));
      return c.json({} as never, 200);
    },
  );

  app.openapi(
    route({
      method: "get",
      path: "/v1/stores/{store}/blobs/{key}",
      summary: "Blobs: the bytes at `key`, streamed as the response body",
      description: "404 `blob_not_found` when absent.",
      request: { params: s.KeyParamsSchema },
      responses: { 200: { description: "the blob", content: { "application/octet-stream": { schema: s.BlobBodySchema } } }, ...errors },
    }),
    async (c) => {
      const { store, key } = c.req.valid("param");
      // The store's stream is the response body, unread here (typed `unknown` first: its type depends on the platform typings loaded).
      const stream: unknown = await storeOf(store).blobs.get(key);
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- needed where the Workers typings are loaded
      return new Response(stream as ReadableStream<Uint8Array>, { status: 200, headers: { "content-type": "application/octet-stream" } }) as never;
    },
  );

  app.openapi(
    route({
      method: "delete",
      path: "/v1/stores/{store}/blobs/{key}",
      summary: "Blobs: delete (absent is a no-op)",
      request: { params: s.KeyParamsSchema },
      responses: ok(s.StoreEmptyAnswerSchema, "deleted"),
    }),
    async (c) => {
      const { store, key } = c.req.valid("param");
      await storeOf(store).blobs.delete(key);
      return c.json({} as never, 200);
    },
  );

  // --- ordered index ------------------------------------------------------------------------------
  // Identities travel in bodies, not paths or queries: stable keys are opaque and often personal
  // (user ids, e-mail addresses), and URLs end up in logs.

  app.openapi(
    route({
      method: "post",
      path: "/v1/stores/{store}/ordered/get",
      summary: "Ordered index: the current record of an identity (tombstones included)",
      description: "404 `ordered_record_not_found` when never created.",
      request: { params: s.StoreParamsSchema, ...body(s.OrderedGetBodySchema) },
      responses: ok(s.OrderedRecordAnswerSchema, "the record"),
    }),
    async (c) => {
      const { store } = c.req.valid("param");
      const { id } = c.req.valid("json");
      const record = await storeOf(store).requireOrderedIndex().get(id);
      return c.json({ record: recordJson(record) } as never, 200);
    },
  );

  app.openapi(
    route({
      method: "post",
      path: "/v1/stores/{store}/ordered/create",
      summary: "Ordered index: create unless the identity exists (then answer what is stored, created: false)",
      request: { params: s.StoreParamsSchema, ...body(s.OrderedCreateBodySchema) },
      responses: ok(s.OrderedCreateAnswerSchema, "the stored record"),
    }),
    async (c) => {
      const { store } = c.req.valid("param");
      const { id, rankingScope, value, rank, due } = c.req.valid("json");
      const index = storeOf(store).requireOrderedIndex();
      // rankingScope, rank and due go on as sent: the index checks them, and only for a new identity.
      const result = await index.create(id, rankingScope as string, orderedValueBytes(id, value), rank as Rank, due as Due);
      return c.json({ record: recordJson(result.record), created: result.created } as never, 200);
    },
  );

  app.openapi(
    route({
      method: "post",
      path: "/v1/stores/{store}/ordered/update",
      summary: "Ordered index: replace value, rank and due of a live record at `expectedRevision`",
      description: "404 `ordered_record_not_found`, 409 `ordered_deleted` (a tombstone), 409 `ordered_revision_conflict`, 409 `ordered_revision_exhausted`.",
      request: { params: s.StoreParamsSchema, ...body(s.OrderedUpdateBodySchema) },
      responses: ok(s.OrderedRecordAnswerSchema, "the updated record"),
    }),
    async (c) => {
      const { store } = c.req.valid("param");
      const { id, expectedRevision, value, rank, due } = c.req.valid("json");
      const index = storeOf(store).requireOrderedIndex();
      // expectedRevision, rank and due go on as sent: the index checks them, and only for a live record.
      const record = await index.update(id, expectedRevision as number, orderedValueBytes(id, value), rank as Rank, due as Due);
      return c.json({ record: recordJson(record) } as never, 200);
    },
  );

  app.openapi(
    route({
      method: "post",
      path: "/v1/stores/{store}/ordered/delete",
      summary: "Ordered index: tombstone a live record at `expectedRevision` (a tombstone answers its stored state)",
      request: { params: s.StoreParamsSchema, ...body(s.OrderedDeleteBodySchema) },
      responses: ok(s.OrderedRecordAnswerSchema, "the tombstone"),
    }),
    async (c) => {
      const { store } = c.req.valid("param");
      const { id, expectedRevision } = c.req.valid("json");
      const record = await storeOf(store).requireOrderedIndex().delete(id, expectedRevision as number);
      return c.json({ record: recordJson(record) } as never, 200);
    },
  );

  app.openapi(
    route({
      method: "get",
      path: "/v1/stores/{store}/ordered/list-ordered",
      summary: "Ordered index: the acceptance-order stream of one (namespace, orderingScope), after `afterOrder`",
      request: { params: s.StoreParamsSchema, query: s.ListOrderedQuerySchema },
      responses: ok(s.OrderedPageSchema, "one page"),
    }),
    async (c) => {
      const { store } = c.req.valid("param");
      const { namespace, orderingScope, afterOrder = 0, limit = 100 } = c.req.valid("query");
      const page = await storeOf(store).requireOrderedIndex().listOrdered(namespace, orderingScope, afterOrder, limit);
      return c.json({ records: page.records.map(recordJson), nextAfterOrder: page.nextAfterOrder } as never, 200);
    },
  );

  app.openapi(
    route({
      method: "get",
      path: "/v1/stores/{store}/ordered/list-ranked",
      summary: "Ordered index: live ranked records of one ranking scope, highest rank first",
      request: { params: s.StoreParamsSchema, query: s.ListRankedQuerySchema },
      responses: ok(s.CursorPageSchema, "one page"),
    }),
    async (c) => {
      const { store } = c.req.valid("param");
      const { namespace, rankingScope, after = "", limit = 100 } = c.req.valid("query");
      const page = await storeOf(store).requireOrderedIndex().listRanked(namespace, rankingScope, after, limit);
      return c.json({ records: page.records.map(recordJson), nextCursor: page.nextCursor } as never, 200);
    },
  );

  app.openapi(
    route({
      method: "get",
      path: "/v1/stores/{store}/ordered/list-due",
      summary: "Ordered index: live records due at or before `dueAtOrBefore`, earliest first",
      request: { params: s.StoreParamsSchema, query: s.ListDueQuerySchema },
      responses: ok(s.CursorPageSchema, "one page"),
    }),
    async (c) => {
      const { store } = c.req.valid("param");
      const { namespace, dueAtOrBefore, after = "", limit = 100 } = c.req.valid("query");
      const page = await storeOf(store).requireOrderedIndex().listDue(namespace, dueAtOrBefore, after, limit);
      return c.json({ records: page.records.map(recordJson), nextCursor: page.nextCursor } as never, 200);
    },
  );
}
