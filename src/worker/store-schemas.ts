/**
 * The zod schemas of the store routes (`/v1/stores/{store}/...`): they
 * validate each request's shape at the boundary and are part of the OpenAPI
 * document. They check shapes and transport limits only (types, strict
 * objects, base64 and its length); what a value means (a name's grammar, a
 * revision's range, a canonical rank or due state, a cursor) is checked by
 * the store itself, so a refusal carries the store's typed error
 * (`invalid_name`, `invalid_rank`, ...), exactly as a local call would; and
 * `create` of an existing identity stays free of candidate validation, as the
 * spec has it: the candidate fields of ordered writes are taken as any JSON
 * value here and checked by the ordered index alone, in its own order.
 */
import { z } from "@hono/zod-openapi";
import { MAX_KV_VALUE_BYTES } from "../storage/kv.js";
import { MAX_LEDGER_PAYLOAD_BYTES } from "../storage/ledger.js";
import { MAX_NAME_BYTES } from "../storage/names.js";
import { MAX_ORDERED_CURSOR_CHARS } from "../storage/ordered/cursor.js";
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

/**
 * A storage name inside a body or query. The store checks its grammar, its
 * length included, so that every refusal is the store's typed `invalid_name`
 * with its rule (the body cap bounds the text).
 */
const name = (description: string) => z.string().openapi({ description });
/**
 * A number the store checks (a safe integer in range), so that a refusal is
 * the store's typed error, in the store's order of checks. `null` is taken
 * too, because it is what JSON makes of `NaN` and `Infinity`: the store
 * refuses it with its typed error (or, where the spec says a field is not
 * looked at, does not look at it).
 */
const number = (description: string) => z.number().nullable().openapi({ description });

const INTEGER_TEXT = /^-?\d+$/;
const FRACTION_TEXT = /^-?\d+\.\d+$/;
const NON_FINITE_TEXT: ReadonlySet<string> = new Set(["NaN", "Infinity", "-Infinity"]);

/**
 * The number query `text` spells, or `undefined` when it spells none exactly.
 *
 * Read: a decimal integer (`-?\d+`); and, so that the store refuses them with
 * its typed error as it would a local call's, the other numbers JavaScript's
 * `String(number)` writes in plain decimals: a decimal fraction (`1.5`; not
 * one that rounds to an integer, like `9007199254740991.4`) and `NaN`,
 * `Infinity`, `-Infinity`. An integer beyond 2^53 - 1 is read too (rounded:
 * still beyond, so the store refuses it as it refuses that number from a local
 * call). Not read, though `Number(text)` would take them as some other number
 * than the caller wrote: empty text (0), `0x10` (16), `1e3` (1000), `0b1`,
 * `+7`, ` 7`, `1.`.
 */
export function readQueryNumber(text: string): number | undefined {
  // Beyond the safe range it is still a number: the store refuses it with its own typed error,
  // exactly as a local call with that number would be refused.
  if (INTEGER_TEXT.test(text)) return Number(text);
  if (NON_FINITE_TEXT.has(text)) return Number(text);
  if (FRACTION_TEXT.test(text)) {
    const value = Number(text);
    return Number.isInteger(value) ? undefined : value;
  }
  return undefined;
}

/** A number in a query string, read with {@link readQueryNumber}; other text is 400 `invalid_request`. */
export const queryNumber = (description: string) =>
  z
    .string()
    .max(64)
    .transform((text, ctx) => {
      const value = readQueryNumber(text);
      if (value !== undefined) return value;
      ctx.addIssue({ code: "custom", message: "must be a decimal integer (digits, optionally after a '-')" });
      return z.NEVER;
    })
    .openapi({ description, type: "integer" });

/**
 * A candidate field of an ordered write: any JSON value (but present), handed
 * to the ordered index as it is. The index checks it in the spec's order
 * (`create` of an existing identity looks at no candidate field, `update` of
 * a tombstone at none, a new identity's value is `ordered_value_too_large`
 * with its size), so a refusal is the index's typed error, never a 400
 * `invalid_request` for a field the spec says is not looked at. `documented`
 * is its OpenAPI description (the shape the index accepts).
 */
const candidate = (documented: Record<string, unknown>) => z.custom<unknown>((value) => value !== undefined, "required").openapi(documented as never);

const segment = (what: string, example: string) =>
  z
    .string()
    .min(1)
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
  life: queryNumber(
    "the `life` of an earlier page: read on in that life of the ledger only (404 `record_not_found` once the ledger was deleted since); absent reads the life it is in now",
  ).optional(),
  limit: queryNumber(`records per page (default 100, at most ${MAX_LEDGER_PAGE_RECORDS})`)
    .refine((limit) => Number.isInteger(limit) && limit >= 1 && limit <= MAX_LEDGER_PAGE_RECORDS, `must be an integer from 1 through ${MAX_LEDGER_PAGE_RECORDS}`)
    .optional()
    .openapi({ type: "integer", minimum: 1, maximum: MAX_LEDGER_PAGE_RECORDS }),
});
export const LedgerRecordSchema = z.object({ seq: z.number().int(), payload: z.string().openapi({ format: "byte", description: "base64" }) }).openapi("LedgerRecord");
export const LedgerRecordsAnswerSchema = z
  .object({
    records: z.array(LedgerRecordSchema),
    next: z.number().int().nullable().openapi({ description: "`from` of the next page, or null when the ledger was read to the tip seen by this page" }),
    life: z.number().int().openapi({
      description: "the life of the ledger this page was read from (a delete that removed records starts a new one): pass it as `life` with `from = next` so the next page never comes from a rewritten ledger",
    }),
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
  prefix: z.string().optional().openapi({ description: `list the keys that start with it (default: all); at most ${MAX_NAME_BYTES} bytes of UTF-8, as a name` }),
});
export const KeysAnswerSchema = z.object({ keys: z.array(z.string()).openapi({ description: "ascending and duplicate-free" }) });
export const StoreEmptyAnswerSchema = z.object({});

/** A blob's bytes (request and answer). */
export const BlobBodySchema = z.string().openapi({ format: "binary", description: "the blob's raw bytes (streamed)" });

export const OrderedIdSchema = z
  .strictObject({
    namespace: name("storage name grammar"),
    orderingScope: name("storage name grammar"),
    stableKey: z.string().openapi({ description: `opaque, 1..${MAX_STABLE_KEY_BYTES} bytes of UTF-8 (the index refuses others as \`invalid_stable_key\`)` }),
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

/** The candidate fields of `create` and `update`, as documented (the index checks them). */
const candidateScope = candidate({ type: "string", description: "the ranking scope (storage name grammar); checked by the index" });
const candidateValue = candidate({
  type: "string",
  format: "byte",
  description: `the record's value: standard base64 with padding (else 400 \`invalid_request\`, after the id is checked), at most ${MAX_ORDERED_VALUE_BYTES} bytes (checked by the index: \`ordered_value_too_large\`)`,
});
const candidateRank = candidate({
  type: "object",
  description: "a Rank `{ ranked, value }`: value a safe integer, 0 when not ranked; checked by the index (`invalid_rank`)",
  properties: { ranked: { type: "boolean" }, value: { type: "integer" } },
});
const candidateDue = candidate({
  type: "object",
  description: 'a Due `{ state, unixMillis }`: state "not_due" (unixMillis 0) or "due_at" (UTC Unix ms, a safe integer); checked by the index (`invalid_due`)',
  properties: { state: { type: "string" }, unixMillis: { type: "integer" } },
});
const candidateRevision = candidate({ type: "integer", description: "the record's current revision; checked by the index, and not looked at for a tombstone" });

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
  .strictObject({ id: OrderedIdSchema, rankingScope: candidateScope, value: candidateValue, rank: candidateRank, due: candidateDue })
  .openapi("OrderedCreate");
export const OrderedUpdateBodySchema = z
  .strictObject({ id: OrderedIdSchema, expectedRevision: candidateRevision, value: candidateValue, rank: candidateRank, due: candidateDue })
  .openapi("OrderedUpdate");
export const OrderedDeleteBodySchema = z.strictObject({ id: OrderedIdSchema, expectedRevision: candidateRevision }).openapi("OrderedDelete");

export const OrderedRecordAnswerSchema = z.object({ record: OrderedRecordSchema });
export const OrderedCreateAnswerSchema = z.object({ record: OrderedRecordSchema, created: z.boolean().openapi({ description: "false: the identity existed; `record` is what is stored" }) });

const listLimit = queryNumber("page size, 1..1000 (default 100)").optional();
// Not length-capped here: the index refuses an over-long token itself, as the spec's
// InvalidOrderedCursorError (malformed) of the listing's kind, and the URL's cap bounds it.
const after = z
  .string()
  .optional()
  .openapi({ description: `the previous page's \`nextCursor\` (default: from the start); the index issues tokens of up to ${MAX_ORDERED_CURSOR_CHARS} characters, and refuses a longer one as \`invalid_ordered_cursor\`` });

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
