/**
 * The zod schemas of the store routes (`/v1/stores/{store}/...`): they
 * validate each request's shape at the boundary and are part of the OpenAPI
 * document. They check shapes and transport limits only (types, strict
 * objects, base64 and its length); what a value means (a name's grammar, a
 * revision's range, a canonical rank or due state, a cursor) is checked by
 * the store itself, so a refusal carries the store's typed error
 * (`invalid_name`, `invalid_rank`, ...), exactly as a local call would; and
 * `create` of an existing identity stays free of candidate validation, as the
 * spec has it.
 */
import { z } from "@hono/zod-openapi";
import { MAX_KV_VALUE_BYTES } from "../storage/kv.js";
import { MAX_LEDGER_PAYLOAD_BYTES } from "../storage/ledger.js";
import { MAX_NAME_BYTES } from "../storage/names.js";
import { MAX_STABLE_KEY_BYTES, MAX_ORDERED_VALUE_BYTES } from "../storage/ordered/validate.js";
import { base64Length, isBase64 } from "./stores.js";

/** Most ledger records one `records` page holds. */
export const MAX_LEDGER_PAGE_RECORDS = 1000;
/** Payload bytes after which a `records` page stops (it always holds at least one record). */
export const MAX_LEDGER_PAGE_BYTES = 8 * 1024 * 1024;

/** Standard padded base64 of at most `maxBytes` bytes (the store checks the exact byte bound). */
const base64 = (maxBytes: number, description: string) =>
  z
    .string()
    .max(base64Length(maxBytes))
    .refine(isBase64, "standard base64 with padding")
    .openapi({ description: `${description}: standard base64 with padding, at most ${maxBytes} bytes`, format: "byte" });

/** A storage name inside a body or query (the store checks its grammar). */
const name = (description: string) => z.string().max(4 * MAX_NAME_BYTES).openapi({ description });
/**
 * A number the store checks (a safe integer in range), so that a refusal is
 * the store's typed error, in the store's order of checks. `null` is taken
 * too, because it is what JSON makes of `NaN` and `Infinity`: the store
 * refuses it with its typed error (or, where the spec says a field is not
 * looked at, does not look at it).
 */
const number = (description: string) => z.number().nullable().openapi({ description });
/** A number in a query string, read with `Number(text)` (so `NaN` and `Infinity` reach the store, which refuses them with its typed error). */
const queryNumber = (description: string) =>
  z
    .string()
    .max(64)
    .transform((value) => Number(value))
    .openapi({ description, type: "number" });

const segment = (what: string, example: string) =>
  z
    .string()
    .min(1)
    .max(4 * MAX_NAME_BYTES)
    .openapi({ description: `${what} (storage name grammar), as ONE path segment: \`encodeURIComponent(name)\`, so \`/\` is sent as \`%2F\``, example });

/** `{store}`. */
export const StoreParamsSchema = z.strictObject({ store: segment("the store's name", "tenants%2Facme") });
/** `{store}` and a ledger `{name}`. */
export const LedgerParamsSchema = StoreParamsSchema.extend({ name: segment("the ledger's name", "orders%2F2026") });
/** `{store}` and a KV or blob `{key}`. */
export const KeyParamsSchema = StoreParamsSchema.extend({ key: segment("the key", "settings%2Ftheme") });

export const LedgerAppendBodySchema = z
  .strictObject({
    expected: number("the tip the append expects (0: the ledger is empty); the record lands at expected + 1"),
    payload: base64(MAX_LEDGER_PAYLOAD_BYTES, "the record's bytes"),
  })
  .openapi("LedgerAppend");
export const LedgerAppendAnswerSchema = z.object({ seq: z.number().int().openapi({ description: "expected + 1, the committed record's sequence" }) });

export const LedgerRecordsQuerySchema = z.strictObject({
  from: queryNumber("first sequence to read (0 or 1: from the start)").optional(),
  limit: z.coerce.number().int().min(1).max(MAX_LEDGER_PAGE_RECORDS).optional().openapi({ description: `records per page (default 100, at most ${MAX_LEDGER_PAGE_RECORDS})` }),
});
export const LedgerRecordSchema = z.object({ seq: z.number().int(), payload: z.string().openapi({ format: "byte", description: "base64" }) }).openapi("LedgerRecord");
export const LedgerRecordsAnswerSchema = z
  .object({
    records: z.array(LedgerRecordSchema),
    next: z.number().int().nullable().openapi({ description: "`from` of the next page, or null when the ledger was read to the tip seen by this page" }),
  })
  .openapi("LedgerPage");
export const LedgerTipAnswerSchema = z.object({ tip: z.number().int().openapi({ description: "the last sequence, 0 for an empty (or absent) ledger" }) });

export const KvPutBodySchema = z
  .strictObject({
    expectedRev: number("the key's current revision (0: the key must be absent)"),
    value: base64(MAX_KV_VALUE_BYTES, "the value"),
  })
  .openapi("KvPut");
export const KvPutAnswerSchema = z.object({ rev: z.number().int().openapi({ description: "the new revision" }) });
export const KvEntrySchema = z.object({ value: z.string().openapi({ format: "byte", description: "base64" }), rev: z.number().int() }).openapi("KvEntry");

export const PrefixQuerySchema = z.strictObject({
  prefix: z.string().max(MAX_NAME_BYTES).optional().openapi({ description: "list the keys that start with it (default: all)" }),
});
export const KeysAnswerSchema = z.object({ keys: z.array(z.string()).openapi({ description: "ascending and duplicate-free" }) });
export const StoreEmptyAnswerSchema = z.object({});

/** A blob's bytes (request and answer). */
export const BlobBodySchema = z.string().openapi({ format: "binary", description: "the blob's raw bytes (streamed)" });

export const OrderedIdSchema = z
  .strictObject({
    namespace: name("storage name grammar"),
    orderingScope: name("storage name grammar"),
    stableKey: z.string().max(4 * MAX_STABLE_KEY_BYTES).openapi({ description: `opaque, 1..${MAX_STABLE_KEY_BYTES} bytes of UTF-8` }),
  })
  .openapi("OrderedId");
export const RankSchema = z
  .strictObject({ ranked: z.boolean(), value: number("a safe integer; 0 when not ranked") })
  .openapi("Rank");
export const DueSchema = z
  .strictObject({
    state: z.string().openapi({ description: '"not_due" or "due_at"', example: "due_at" }),
    unixMillis: number("UTC Unix time in ms (a safe integer); 0 when not due"),
  })
  .openapi("Due");

const orderedValue = base64(MAX_ORDERED_VALUE_BYTES, "the record's value");

export const OrderedRecordSchema = z
  .object({
    id: OrderedIdSchema,
    rankingScope: z.string(),
    revision: z.number().int(),
    order: z.number().int(),
    due: DueSchema,
    rank: RankSchema,
    value: z.string().openapi({ format: "byte", description: "base64" }),
    deleted: z.boolean(),
  })
  .openapi("OrderedRecord");

export const OrderedGetBodySchema = z.strictObject({ id: OrderedIdSchema });
export const OrderedCreateBodySchema = z
  .strictObject({ id: OrderedIdSchema, rankingScope: name("storage name grammar"), value: orderedValue, rank: RankSchema, due: DueSchema })
  .openapi("OrderedCreate");
export const OrderedUpdateBodySchema = z
  .strictObject({ id: OrderedIdSchema, expectedRevision: number("the record's current revision"), value: orderedValue, rank: RankSchema, due: DueSchema })
  .openapi("OrderedUpdate");
export const OrderedDeleteBodySchema = z.strictObject({ id: OrderedIdSchema, expectedRevision: number("the record's current revision") }).openapi("OrderedDelete");

export const OrderedRecordAnswerSchema = z.object({ record: OrderedRecordSchema });
export const OrderedCreateAnswerSchema = z.object({ record: OrderedRecordSchema, created: z.boolean().openapi({ description: "false: the identity existed; `record` is what is stored" }) });

const listLimit = queryNumber("page size, 1..1000 (default 100)").optional();
const after = z.string().max(4096).optional().openapi({ description: "the previous page's `nextCursor` (default: from the start)" });

export const ListOrderedQuerySchema = z.strictObject({
  namespace: name("storage name grammar"),
  orderingScope: name("storage name grammar"),
  afterOrder: queryNumber("exclusive order to resume after (default 0: from the start)").optional(),
  limit: listLimit,
});
export const ListRankedQuerySchema = z.strictObject({ namespace: name("storage name grammar"), rankingScope: name("storage name grammar"), after, limit: listLimit });
export const ListDueQuerySchema = z.strictObject({
  namespace: name("storage name grammar"),
  dueAtOrBefore: queryNumber("inclusive due bound, UTC Unix ms"),
  after,
  limit: listLimit,
});
export const OrderedPageSchema = z.object({ records: z.array(OrderedRecordSchema), nextAfterOrder: z.number().int() }).openapi("OrderedPage");
export const CursorPageSchema = z
  .object({ records: z.array(OrderedRecordSchema), nextCursor: z.string().openapi({ description: "empty when the result set is exhausted" }) })
  .openapi("OrderedCursorPage");
