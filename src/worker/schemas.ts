/**
 * The zod schemas of the HTTP API: they validate every request at the
 * boundary and are the single source of the OpenAPI document
 * (`/v1/openapi.json`). Objects are strict (an unknown field is refused),
 * strings and arrays have limits, names follow the journal's grammar. The
 * journal validates again behind them (a UUIDv7 request id, JSON data depth
 * and size), so these schemas are the first gate, not the only one. The items
 * of the batch routes are the exception: there the fields the journal checks
 * itself are bounded by type and length only, so that the journal rejects a
 * bad item in place, as a local `appendBatch` / `ackBatch` does, instead of
 * the schema refusing the whole batch. The `requestIds` of a bulk action are
 * such items too.
 */
import { z } from "@hono/zod-openapi";
import { MAX_CONSUMER_ID_LENGTH, MAX_EPOCH_MS, MAX_ORDERING_PART_LENGTH } from "../journal/event.js";
import { MAX_BATCH_EVENTS, MAX_CLAIM_EVENTS, MAX_LEASE_MS } from "../journal/journal.js";
import { queryNumber } from "./store-schemas.js";
import { hasLoneSurrogate } from "../unicode.js";

/** Most delivery ids one ack request may carry. */
export const MAX_ACK_BATCH = 1000;
/** Most quarantined events one bulk action visits. */
export const MAX_BULK = 10_000;
/**
 * Longest string a batch item may carry in a field the journal checks itself
 * (request id, namespace, subject, consumer): well above every journal limit,
 * so the journal judges each item; the cap only keeps bodies bounded.
 */
export const MAX_ITEM_TEXT = 1024;

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const NAME = /^[a-z0-9_-]+$/;

/** A time in epoch ms as the journal takes it: an integer from 0 to `MAX_EPOCH_MS` (8.64e15, the latest a `Date` holds). */
const epochMs = z
  .number()
  .int()
  .min(0)
  .max(MAX_EPOCH_MS)
  .openapi({ description: `epoch milliseconds, an integer from 0 to ${MAX_EPOCH_MS} (the latest time a JavaScript Date holds)` });

/** A UUIDv7 request id in canonical form. */
export const RequestIdSchema = z.string().max(36).regex(UUID_V7, "a UUIDv7 in lowercase hyphenated form").openapi({ example: "01936f3e-7c1a-7d2b-8c3d-4e5f60718293" });

/** A journal name (the path segment). */
export const JournalNameSchema = z.string().min(1).max(63).regex(NAME, "lowercase letters, digits, `-` and `_`").openapi({ example: "usage" });

/** A consumer name. */
export const ConsumerSchema = z
  .string()
  .min(1)
  .max(MAX_CONSUMER_ID_LENGTH)
  .regex(NAME, "lowercase letters, digits, `-` and `_`")
  .openapi({ example: "billing" });

/**
 * Any JSON value (the record's `data`); the journal checks its depth and size.
 * The append routes also refuse an integer literal a double does not hold
 * exactly (`./exact-json.ts`), on every platform, from a scan of the text
 * for the literals' source text.
 */
const JsonSchema: z.ZodType<unknown> = z.unknown().openapi({
  description:
    "any JSON value, at most 32 levels deep and 64 KiB of canonical JSON. An integer beyond 2^53 - 1 must be written as JavaScript writes the number it reads as (as `JSON.stringify` does): any other such literal (a 64-bit counter such as 18446744073709551615) would be journaled as another number, so the event is refused (`invalid_event`, rule `data`; in place in a batch). Send such numbers as strings",
});

const OrderingPart = z.string().min(1).max(MAX_ORDERING_PART_LENGTH);

/** A usage record as sent. */
export const RecordSchema = z
  .strictObject({ requestId: RequestIdSchema, namespace: OrderingPart, subject: OrderingPart, data: JsonSchema })
  .openapi("UsageRecord");

/** An event sent to the API: a record and when it was observed. */
export const ObservedRecordSchema = z.strictObject({ record: RecordSchema, observedAt: epochMs }).openapi("ObservedRecord");

/** A string field of a batch item that the journal checks itself, per item (see {@link MAX_ITEM_TEXT}). */
const itemText = (rule: string) => z.string().max(MAX_ITEM_TEXT).openapi({ description: `${rule}; checked by the journal, which rejects a bad item in place` });
/** A number field of a batch item that the journal checks itself, per item. */
const itemNumber = (rule: string) => z.number().openapi({ description: `${rule}; checked by the journal, which rejects a bad item in place` });

/** An event of an append batch: {@link ObservedRecordSchema} with the journal's rules left to the journal. */
const BatchEventSchema = z
  .strictObject({
    record: z
      .strictObject({
        requestId: itemText("a UUIDv7 in lowercase hyphenated form"),
        namespace: itemText(`1 to ${MAX_ORDERING_PART_LENGTH} characters`),
        subject: itemText(`1 to ${MAX_ORDERING_PART_LENGTH} characters`),
        data: JsonSchema,
      })
      .openapi("BatchUsageRecord"),
    observedAt: itemNumber(`epoch milliseconds, an integer from 0 to ${MAX_EPOCH_MS}`),
  })
  .openapi("BatchObservedRecord");

/** An event as the API answers it. */
export const UsageEventSchema = z
  .object({
    id: RequestIdSchema,
    orderingKey: z.object({ namespace: z.string(), subject: z.string() }),
    record: RecordSchema,
    // Answers hold stored events, and events stored before times were bounded by MAX_EPOCH_MS may be later.
    observedAt: z
      .number()
      .int()
      .min(0)
      .max(Number.MAX_SAFE_INTEGER)
      .openapi({ description: `epoch ms; events appended now are at most ${MAX_EPOCH_MS}, but one stored before that bound may be later (up to 2^53 - 1)` }),
  })
  .openapi("UsageEvent");

/** A delivery id. */
export const DeliveryIdSchema = z
  .strictObject({ consumer: ConsumerSchema, event: RequestIdSchema, attempt: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER) })
  .openapi("DeliveryId");

/** A delivery id of an ack batch: {@link DeliveryIdSchema} with the journal's rules left to the journal. */
const AckDeliverySchema = z
  .strictObject({
    consumer: itemText(`a consumer name: 1 to ${MAX_CONSUMER_ID_LENGTH} lowercase letters, digits, \`-\` and \`_\``),
    event: itemText("the event's request id, a UUIDv7"),
    attempt: itemNumber("a positive integer"),
  })
  .openapi("AckDelivery");

/** Why an event was set aside. */
export const PoisonReasonSchema = z.enum(["malformed", "rejected", "attempts_exhausted"]).openapi("PoisonReason");

/** What a journal `backend` error's causes say waiting out fixes (`src/cause-chain.ts` `WaitOutMarks`). */
const WaitOutMarksSchema = z.object({ code: z.literal("storage_full").optional(), overloaded: z.literal(true).optional() });

/** The error body of every failed call. */
export const ErrorSchema = z
  .object({
    error: z.object({
      code: z.string().openapi({ example: "conflict" }),
      message: z.string(),
      retryable: z.boolean(),
      name: z.string().optional().openapi({ description: "the journal error's class, when it is one" }),
      fields: z.record(z.string(), z.unknown()).optional().openapi({ description: "the journal error's spec fields" }),
      cause: WaitOutMarksSchema.optional().openapi({
        description:
          "a journal `backend` error's storage object is full or overloaded (only then present): the call was refused before anything committed, and waiting out fixes it, so even a call that is not idempotent may be repeated",
      }),
    }),
  })
  .openapi("Error");

/** A journal error inside a batch answer. */
export const WireErrorSchema = z
  .object({
    name: z.string(),
    code: z.string(),
    message: z.string(),
    retryable: z.boolean(),
    fields: z.record(z.string(), z.unknown()),
    cause: WaitOutMarksSchema.optional().openapi({ description: "a backend error's storage object is full or overloaded: waiting out fixes it (only then present)" }),
  })
  .openapi("JournalError");

export const CapacitySchema = z
  .object({
    maxEvents: z.number().int(),
    maxDeliveryAttempts: z.number().int(),
    retainAcknowledgedMs: z.number().int(),
    policy: z.enum(["refuse", "drop_oldest"]),
  })
  .openapi("Capacity");

export const JournalInfoSchema = z
  .object({
    name: z.string(),
    capacity: CapacitySchema,
    mode: z.enum(["telemetry_grade", "billing_grade"]),
    consumers: z.array(z.string()).openapi({ description: "consumers the worker is configured to know (the UI offers them)" }),
  })
  .openapi("JournalInfo");

export const HealthSchema = z.object({ ok: z.literal(true) });
export const JournalListSchema = z.object({ journals: z.array(JournalInfoSchema) });

const AppendResultSchema = z.object({ status: z.enum(["accepted", "already_present"]), position: z.number().int() });

export const AppendBodySchema = z.strictObject({ event: ObservedRecordSchema });
export const AppendAnswerSchema = z.object({ result: AppendResultSchema });

export const AppendBatchBodySchema = z.strictObject({ events: z.array(BatchEventSchema).max(MAX_BATCH_EVENTS) });
export const AppendBatchAnswerSchema = z.object({
  results: z.array(z.union([AppendResultSchema, z.object({ status: z.literal("rejected"), error: WireErrorSchema })])),
});

/**
 * The most bytes of deliveries (their JSON as UTF-8) a claim over HTTP
 * answers: the `maxBytes` of every claim the worker makes, whatever the
 * request asks (a request may ask for less). A claim of large events answers
 * fewer than `maxEvents` rather than an answer a Worker cannot hold (10,000
 * events of 64 KiB would be over 600 MiB); it holds at least one delivery
 * when any is due.
 */
export const MAX_CLAIM_ANSWER_BYTES = 8 * 1024 * 1024;

export const ClaimBodySchema = z.strictObject({
  consumer: ConsumerSchema,
  maxEvents: z.number().int().min(1).max(MAX_CLAIM_EVENTS),
  leaseMs: z.number().int().min(1).max(MAX_LEASE_MS),
  now: epochMs.optional(),
  maxBytes: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).optional(),
});
export const ClaimAnswerSchema = z.object({
  deliveries: z.array(z.object({ id: DeliveryIdSchema, event: UsageEventSchema, leaseExpiresAt: z.number().int() }).openapi("Delivery")),
});

export const AckBodySchema = z.strictObject({ deliveries: z.array(AckDeliverySchema).min(1).max(MAX_ACK_BATCH) });
export const AckAnswerSchema = z.object({
  results: z.array(z.union([z.object({ ok: z.literal(true) }), z.object({ ok: z.literal(false), error: WireErrorSchema })])),
});

export const NackBodySchema = z.strictObject({
  delivery: DeliveryIdSchema,
  retryAfterMs: z.number().int().min(0).max(MAX_LEASE_MS),
  error: z.string().max(2000),
  now: epochMs.optional(),
});
export const ExtendBodySchema = z.strictObject({ delivery: DeliveryIdSchema, leaseMs: z.number().int().min(1).max(MAX_LEASE_MS), now: epochMs.optional() });
export const ExtendAnswerSchema = z.object({ leaseExpiresAt: z.number().int() });
export const QuarantineBodySchema = z.strictObject({ delivery: DeliveryIdSchema, reason: PoisonReasonSchema });
export const EmptyAnswerSchema = z.object({});

export const StatsSchema = z
  .object({
    pending: z.number().int(),
    inFlight: z.number().int(),
    quarantined: z.number().int(),
    oldestPendingAgeMs: z.number().int().nullable(),
    dropped: z.number().int(),
    capacity: CapacitySchema,
  })
  .openapi("JournalStats");

const OutcomeSchema = z.union([
  z.object({ kind: z.literal("acked"), at: z.number().int() }),
  z.object({ kind: z.literal("nacked"), at: z.number().int(), error: z.string() }),
  z.object({ kind: z.literal("quarantined"), at: z.number().int(), reason: PoisonReasonSchema }),
  z.object({ kind: z.literal("expired"), at: z.number().int() }),
]);
export const AttemptSchema = z
  .object({ attempt: z.number().int(), claimedAt: z.number().int(), leaseExpiresAt: z.number().int(), outcome: OutcomeSchema.nullable() })
  .openapi("Attempt");
export const AttemptsAnswerSchema = z.object({ attempts: z.array(AttemptSchema) });

export const QuarantinedEventSchema = z
  .object({
    consumer: z.string(),
    event: UsageEventSchema,
    position: z.number().int(),
    reason: PoisonReasonSchema,
    quarantinedAt: z.number().int(),
    attempts: z.array(AttemptSchema),
  })
  .openapi("QuarantinedEvent");
export const QuarantinePageSchema = z.object({ items: z.array(QuarantinedEventSchema), nextCursor: z.string().nullable() }).openapi("QuarantinePage");

const cursor = z.string().min(1).max(4096);
/**
 * A page size in a query string: read as the store routes read numbers
 * ({@link queryNumber}: decimal digits only, not `Number(text)`, which would
 * take `1e2`, `0x10`, ` 7`, `7.0` or empty text as some number the caller
 * did not write), then an integer from 1 to 1000.
 */
const limit = queryNumber("page size")
  .pipe(z.number().int().min(1).max(1000))
  .openapi({ type: "integer", minimum: 1, maximum: 1000 });

/**
 * A filter text of a JSON body, refused when it holds a lone surrogate: the
 * same filter in a query string (the list, the export) reaches the server as
 * U+FFFD, so a dry run in a body would select other events than the list
 * shows (and no ordering key holds one: the journal refuses them).
 */
function wellFormed(schema: z.ZodString): z.ZodType<string> {
  return schema.refine((text) => !hasLoneSurrogate(text), { message: "holds a lone surrogate (not well-formed UTF-16), which a query string cannot carry" });
}

/** Filters of the quarantine routes (query string). */
export const QuarantineFilterSchema = z.strictObject({
  query: z.string().max(200).optional(),
  reason: PoisonReasonSchema.optional(),
  key: z
    .string()
    .min(3)
    .max(2 * MAX_ORDERING_PART_LENGTH + 1)
    .optional()
    .openapi({ description: "an ordering key `namespace/subject`, exact (a namespace or subject holding `/` makes it ambiguous: use `namespace` and `subject`)" }),
  namespace: z.string().min(1).max(MAX_ORDERING_PART_LENGTH).optional().openapi({ description: "the ordering key's namespace, exact" }),
  subject: z.string().min(1).max(MAX_ORDERING_PART_LENGTH).optional().openapi({ description: "the ordering key's subject, exact" }),
});
export const QuarantineListQuerySchema = QuarantineFilterSchema.extend({
  limit: limit.optional(),
  after: cursor.optional(),
  order: z.enum(["oldest", "newest"]).optional().openapi({ description: "`newest` lists the newest position first; cursors continue in their own order" }),
});

/** The `actor` of an operator action. */
const ActorSchema = z.string().max(200).openapi({ description: "who acts; recorded only when the worker trusts callers to say (`auditActor: \"caller\"`), else the token's name is" });

export const OperatorBodySchema = z.strictObject({
  now: epochMs.optional(),
  actor: ActorSchema.optional(),
});
/**
 * The body of the bulk route. A dry run selects by the filter (up to `max`)
 * and answers the selected ids; the confirmation sends those ids back as
 * `requestIds`, so the real run acts on exactly the events the operator was
 * shown and never on events that arrived since. A real run may still select by
 * the filter instead (the older form), racing whatever changed since its dry
 * run. The ids are a batch's items: each is checked by the journal, which
 * rejects a bad one in place (see {@link MAX_ITEM_TEXT}).
 */
export const BulkBodySchema = z
  .strictObject({
    action: z.enum(["release", "discard"]),
    dryRun: z.boolean(),
    query: wellFormed(z.string().max(200)).optional(),
    reason: PoisonReasonSchema.optional(),
    key: wellFormed(z.string().min(3).max(2 * MAX_ORDERING_PART_LENGTH + 1)).optional(),
    namespace: wellFormed(z.string().min(1).max(MAX_ORDERING_PART_LENGTH)).optional(),
    subject: wellFormed(z.string().min(1).max(MAX_ORDERING_PART_LENGTH)).optional(),
    max: z.number().int().min(1).max(MAX_BULK).optional(),
    requestIds: z
      .array(itemText("a UUIDv7 request id, as a dry run answered it"))
      .max(MAX_BULK)
      .optional()
      .openapi({
        description: `the events to act on, as the dry run answered them (at most ${MAX_BULK}): only these are acted on, in this order, and one no longer quarantined for the consumer is reported in \`failed\` (\`not_quarantined\`), never replaced by another. Only with \`dryRun: false\` and without \`query\`, \`reason\`, \`key\`, \`namespace\`, \`subject\` and \`max\``,
      }),
    now: epochMs.optional(),
    actor: ActorSchema.optional().openapi({
      description:
        "who acts, recorded in the audit log for every event acted on, as the single release and discard routes do: only when the worker trusts callers to say (`auditActor: \"caller\"`), else the token's name is. Ignored by a dry run",
    }),
  })
  .superRefine((body, context) => {
    if (body.requestIds === undefined) return;
    if (body.dryRun) context.addIssue({ code: "custom", path: ["dryRun"], message: "`requestIds` confirms a dry run, so it needs `dryRun: false`" });
    // The ids replace the filter: with both, it would be unclear which one selects.
    for (const field of ["query", "reason", "key", "namespace", "subject", "max"] as const) {
      if (body[field] !== undefined) context.addIssue({ code: "custom", path: [field], message: "selects by filter, and `requestIds` selects the events itself: send one or the other" });
    }
  });
export const BulkAnswerSchema = z.object({
  matched: z.number().int().openapi({ description: "how many events the filter selected (up to `max`), or how many `requestIds` were sent" }),
  more: z.boolean().openapi({ description: "the filter selects more than `max` (always false with `requestIds`)" }),
  requestIds: z.array(z.string()).openapi({
    description: "the selected events, in the order the action visits them: after a dry run, what its confirmation sends as `requestIds`; with `requestIds`, those sent",
  }),
  applied: z.number().int(),
  failed: z
    .array(z.object({ requestId: z.string(), error: WireErrorSchema }))
    .openapi({ description: "the events not acted on, each with the journal's error (`not_quarantined`: released or discarded since, by someone else)" }),
});

export const AuditQuerySchema = z.strictObject({ limit: limit.optional(), after: cursor.optional(), requestId: RequestIdSchema.optional() });
export const AuditPageSchema = z
  .object({
    items: z.array(
      z
        .object({
          seq: z.number().int(),
          at: z.number().int(),
          action: z.enum(["release", "discard"]),
          consumer: z.string(),
          requestId: z.string(),
          reason: PoisonReasonSchema,
          actor: z.string().nullable(),
        })
        .openapi("AuditEntry"),
    ),
    nextCursor: z.string().nullable(),
  })
  .openapi("AuditPage");

export const PruneBodySchema = z.strictObject({ now: epochMs.optional(), limit: z.number().int().min(1).max(100_000).optional() });
export const PruneAnswerSchema = z.object({ pruned: z.number().int() });

export const JournalParamsSchema = z.strictObject({ journal: JournalNameSchema });
export const ConsumerParamsSchema = JournalParamsSchema.extend({ consumer: ConsumerSchema });
export const EventParamsSchema = ConsumerParamsSchema.extend({ requestId: RequestIdSchema });
