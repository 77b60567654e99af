/**
 * The usage journal conformance suite: what any `UsageJournal` (the core over
 * an adapter's Engine, the partitioned Durable Objects journal, the HTTP
 * client) must do, as test cases that do not depend on a test runner.
 *
 * Two kinds of case:
 * - the model-based case drives the journal under test and the reference model
 *   ({@link JournalOracle}) with the same random sequences of calls
 *   (`fc.commands`) on one virtual clock, and fails on the first call whose
 *   outcome differs (value, or error class, code and spec fields);
 * - readable example cases, one per guarantee, each asserting concrete values.
 */
import fc from "fast-check";
import type { Arbitrary, AsyncCommand } from "fast-check";
import { createUsageEvent, parseConsumerId } from "../journal/event.js";
import type {
  Capacity,
  CapacityPolicy,
  ConsumerId,
  Delivery,
  DeliveryId,
  ListAuditOptions,
  ListQuarantinedOptions,
  PoisonReason,
  UsageEvent,
  UsageJournal,
} from "../journal/types.js";
import { render, renderOutcome, sameOutcome, settle, deepEqual, type Outcome } from "./compare.js";
import { journalExampleCases } from "./journal-examples.js";
import { JournalOracle } from "./journal-oracle.js";
import { virtualClock, type VirtualClock } from "./virtual-clock.js";
import { commandsUpTo, soakRequested } from "./soak.js";

/** One journal under test, over storage of its own. */
export interface JournalSubject {
  readonly journal: UsageJournal;
  /**
   * A new journal over the same storage (a restart). Required when `canReopen`.
   * Without options it opens the journal as the factory was asked to; with
   * `capacity` (only asked for when `canChangeCapacity`) under that capacity,
   * as a caller configured with other bounds would (on Durable Objects each
   * caller sends its own).
   */
  readonly reopen?: (options?: { readonly capacity?: Capacity }) => Promise<UsageJournal>;
  /** Release the storage (every journal opened over it). */
  readonly close: () => Promise<void>;
}

/** Creates a journal under test over fresh, empty storage, every call. */
export interface JournalSubjectFactory {
  (options: { name: string; capacity: Capacity; clock: () => number }): Promise<JournalSubject>;
}

/** What {@link journalConformanceCases} needs to know about the journal under test. */
export interface JournalConformanceOptions {
  /** Names the implementation in failure messages, e.g. `"memory"`. */
  readonly label: string;
  /** Fresh, empty storage each call. */
  readonly createSubject: JournalSubjectFactory;
  /** Whether the storage outlives the process: the expected `mode` is `billing_grade` exactly when true. */
  readonly durable: boolean;
  /** Whether `subject.reopen` exists: a new journal over the same storage. */
  readonly canReopen?: boolean;
  /**
   * Whether `subject.reopen({ capacity })` opens the same storage under that
   * capacity (a smaller `maxEvents`, another policy). Adds the cases that
   * reopen stored data under other bounds. Implies `canReopen`.
   */
  readonly canChangeCapacity?: boolean;
  /** Random call sequences to try. Default 300, or 20000 at soak size (`soakRequested()`). */
  readonly runs?: number;
  /** Seed of the random sequences (fast-check prints the seed of a failing run). */
  readonly seed?: number;
}

/** One test case, for any runner: `it(c.name, c.run, c.timeoutMs)`. */
export interface ConformanceCase {
  readonly name: string;
  readonly run: () => Promise<void>;
  readonly timeoutMs?: number;
}

/** Where the virtual clock of every case starts. */
export const CONFORMANCE_CLOCK_START = 1_700_000_000_000;

const JOURNAL_NAME = "conformance";
const NAMESPACE = "ns";
/**
 * The namespaces of valid events: key `i` is subject `k-(i >> 1)` in namespace `i % 2`, so subjects repeat across namespaces.
 * The second is mixed-case, so a quarantine query must match the stored text case-insensitively.
 */
const NAMESPACES = [NAMESPACE, "Ns-B"] as const;
const CONSUMERS: readonly ConsumerId[] = ["c-a", "c-b", "c-c"].map(parseConsumerId);
/**
 * The request ids the random sequences use: enough to fill the largest
 * journal drawn, and drawn mostly from the first few so duplicates and
 * conflicts are common.
 */
const REQUEST_IDS: readonly string[] = Array.from({ length: 16 }, (_, index) => `0190a000-0000-7000-8000-${String(index).padStart(12, "0")}`);
const requestIdIndexArb: Arbitrary<number> = fc.oneof(fc.nat({ max: 3 }), fc.nat({ max: REQUEST_IDS.length - 1 }));
const REASONS: readonly PoisonReason[] = ["malformed", "rejected", "attempts_exhausted"];


function pick<T>(items: readonly T[], index: number): T {
  const item = items[index % items.length];
  if (item === undefined) throw new Error("pick from an empty list");
  return item;
}

/**
 * The conformance cases for one implementation: the model-based case first,
 * then one readable example per guarantee.
 *
 * @example
 * // adapters/memory/index.test.ts
 * import { it } from "vitest";
 * import { createJournal } from "isostore";
 * import { memoryEngine } from "isostore/memory";
 * import { journalConformanceCases, type JournalSubjectFactory } from "isostore/testing";
 *
 * const createSubject: JournalSubjectFactory = async (options) => {
 *   const engine = memoryEngine();
 *   return { journal: createJournal(engine, options), reopen: async () => createJournal(engine, options), close: () => engine.close() };
 * };
 * for (const c of journalConformanceCases({ label: "memory", durable: false, canReopen: true, createSubject })) it(c.name, c.run, c.timeoutMs);
 */
export function journalConformanceCases(options: JournalConformanceOptions): ConformanceCase[] {
  const runs = options.runs ?? (soakRequested() ? 20_000 : 300);
  return [
    {
      name: "random operation sequences agree with the reference model",
      run: () => runModelBased(options, runs),
      timeoutMs: 60_000 + runs * 200,
    },
    ...journalExampleCases(options),
  ];
}

// ------------------------------------------------------------------ model

/** Per-run parameters drawn before the commands. */
interface World {
  readonly capacity: Capacity;
  /** How many of `CONSUMERS` claim (the rest stay unregistered). */
  readonly consumers: number;
  /** How many ordering keys (subjects) events spread over. */
  readonly keys: number;
}

interface Model {
  readonly label: string;
  /** The reference model; replaced (same state) when the subject is reopened under other bounds. */
  oracle: JournalOracle;
  readonly time: VirtualClock;
  readonly world: World;
  /** Every delivery id handed out so far (as the model handed it out). */
  readonly deliveries: DeliveryId[];
  /** The delivery ids of each claim that handed out any, in claim order. */
  readonly batches: DeliveryId[][];
}

interface Real {
  readonly subject: JournalSubject;
  journal: UsageJournal;
}

type JournalCommand = AsyncCommand<Model, Real>;

function command(label: string, run: (model: Model, real: Real) => Promise<void>, check: (model: Readonly<Model>) => boolean = () => true): JournalCommand {
  return { check, run, toString: () => label };
}

/** A verdict on a delivery waits for a claim to have handed one out, unless it is a deliberate stray. */
function needsDelivery(stray: boolean): (model: Readonly<Model>) => boolean {
  return (model) => stray || model.deliveries.length > 0;
}

/**
 * Run one call against the model and the subject and require the same
 * outcome. Returns the model's outcome.
 */
async function agree(model: Model, real: Real, what: string, call: (journal: UsageJournal) => Promise<unknown>): Promise<Outcome> {
  const expected = await settle(() => call(model.oracle));
  const actual = await settle(() => call(real.journal));
  if (!sameOutcome(expected, actual)) {
    throw new Error(
      [
        `journal conformance (${model.label}): ${what} disagrees with the reference model`,
        `  clock:   ${model.time.now}`,
        `  model:   ${renderOutcome(expected)}`,
        `  subject: ${renderOutcome(actual)}`,
        `  model state after the call: ${render(model.oracle.snapshot())}`,
      ].join("\n"),
    );
  }
  return expected;
}

/** After a verdict on a delivery, its event's history must agree too (it is what the verdict wrote). */
async function agreeOnHistory(model: Model, real: Real, delivery: DeliveryId): Promise<void> {
  await agree(model, real, `attempts(${delivery.consumer}, ${delivery.event})`, (journal) => journal.attempts(delivery.consumer, delivery.event));
}

function checkIdentity(journal: UsageJournal, name: string, capacity: Capacity, durable: boolean, label: string): void {
  const mode = durable ? "billing_grade" : "telemetry_grade";
  if (journal.mode !== mode) throw new Error(`journal conformance (${label}): mode is ${render(journal.mode)}, expected ${render(mode)}`);
  if (journal.name !== name) throw new Error(`journal conformance (${label}): name is ${render(journal.name)}, expected ${render(name)}`);
  if (!deepEqual(journal.capacity, capacity)) {
    throw new Error(`journal conformance (${label}): capacity is ${render(journal.capacity)}, expected ${render(capacity)}`);
  }
}

// ------------------------------------------------------------------ events

/** An append in a random sequence: which pool id, which version of its record, when observed. */
interface EventSpec {
  readonly id: number;
  /** 0: the id's usual record; 1: different data (a conflict); 2: different subject (a conflict). */
  readonly variant: 0 | 1 | 2;
  /** observedAt = clock + offset. */
  readonly offset: number;
  /** Write `data` with its keys in the other order (still the same fact). */
  readonly reorder: boolean;
}

type InvalidKind = "not_uuid" | "uppercase" | "uuid_v4" | "id_mismatch" | "empty_subject" | "negative_observed_at";

const eventSpecArb: Arbitrary<EventSpec> = fc.record({
  id: requestIdIndexArb,
  variant: fc.constantFrom<0 | 1 | 2>(0, 0, 0, 0, 1, 2),
  // Mostly just now (so retention windows of up to 5 s are still open), sometimes well before or after.
  offset: fc.oneof(fc.integer({ min: -50, max: 10 }), fc.integer({ min: -6000, max: 1000 })),
  reorder: fc.boolean(),
});

const invalidKindArb: Arbitrary<InvalidKind> = fc.constantFrom("not_uuid", "uppercase", "uuid_v4", "id_mismatch", "empty_subject", "negative_observed_at");

function describeSpec(spec: EventSpec): string {
  const variant = ["", " conflicting-data", " conflicting-subject"][spec.variant] ?? "";
  return `id${spec.id}${variant} observedAt=now${spec.offset >= 0 ? "+" : ""}${spec.offset}${spec.reorder ? " reordered" : ""}`;
}

function buildEvent(spec: EventSpec, world: World, now: number): UsageEvent {
  const keyIndex = (spec.id + (spec.variant === 2 ? 1 : 0)) % world.keys;
  const units = spec.variant === 1 ? spec.id + 100 : spec.id + 1;
  const data = spec.reorder ? { unit: "token", units } : { units, unit: "token" };
  return createUsageEvent({
    record: { requestId: pick(REQUEST_IDS, spec.id), namespace: NAMESPACES[keyIndex % 2]!, subject: `k-${keyIndex >> 1}`, data },
    observedAt: Math.max(0, now + spec.offset),
  });
}

/** An event object no journal may accept (built by hand: `createUsageEvent` would refuse it). */
function buildInvalidEvent(kind: InvalidKind, now: number): UsageEvent {
  let requestId = pick(REQUEST_IDS, 0);
  let id = requestId;
  let subject = "k-0";
  let observedAt = now;
  if (kind === "not_uuid") requestId = id = "not-a-uuid";
  if (kind === "uppercase") requestId = id = "0190A000-0000-7000-8000-00000000000A";
  if (kind === "uuid_v4") requestId = id = "0190a000-0000-4000-8000-000000000001";
  if (kind === "id_mismatch") id = pick(REQUEST_IDS, 1);
  if (kind === "empty_subject") subject = "";
  if (kind === "negative_observed_at") observedAt = -1;
  const record = { requestId, namespace: NAMESPACE, subject, data: { units: 1 } };
  return { id, orderingKey: { namespace: NAMESPACE, subject }, record, observedAt };
}

// --------------------------------------------------------------- deliveries

type Mutation = "none" | "attempt+1" | "attempt-1" | "other_consumer";

const mutationArb: Arbitrary<Mutation> = fc.constantFrom<Mutation>("none", "none", "none", "none", "none", "none", "attempt+1", "attempt-1", "other_consumer");

/**
 * A delivery id drawn from those handed out so far, counting back from the
 * latest (small indexes, which fast-check favours, are the recent deliveries
 * most likely still outstanding), or a never-handed one when none was.
 */
function pickDelivery(model: Model, index: number, mutation: Mutation): DeliveryId {
  const handed = model.deliveries;
  const base: DeliveryId =
    handed.length === 0 ? { consumer: pick(CONSUMERS, 0), event: pick(REQUEST_IDS, 0), attempt: 1 } : pick(handed, handed.length - 1 - (index % handed.length));
  if (mutation === "attempt+1") return { ...base, attempt: base.attempt + 1 };
  if (mutation === "attempt-1") return { ...base, attempt: base.attempt - 1 };
  if (mutation === "other_consumer") {
    return { ...base, consumer: pick(CONSUMERS, CONSUMERS.indexOf(base.consumer) + 1) };
  }
  return { ...base };
}

function deliveryText(index: number, mutation: Mutation): string {
  return `delivery[latest-${index}]${mutation === "none" ? "" : ` ${mutation}`}`;
}

// ----------------------------------------------------------------- commands

function commandArbitraries(canReopen: boolean, canChangeCapacity: boolean): Arbitrary<JournalCommand>[] {
  // Mostly the first consumer, so events are often finished by every registered consumer.
  const consumerIndex = fc.oneof({ arbitrary: fc.constant(0), weight: 3 }, { arbitrary: fc.nat({ max: CONSUMERS.length - 1 }), weight: 1 });
  const claimer = (model: Model, index: number) => pick(CONSUMERS, index % model.world.consumers);

  const append = eventSpecArb.map((spec) =>
    command(`append(${describeSpec(spec)})`, async (model, real) => {
      const event = buildEvent(spec, model.world, model.time.now);
      await agree(model, real, `append(${render(event)})`, (journal) => journal.append(event));
    }),
  );

  const appendBatch = fc
    .array(fc.oneof({ arbitrary: eventSpecArb, weight: 4 }, { arbitrary: invalidKindArb, weight: 1 }), { maxLength: 5 })
    .map((items) =>
      command(`appendBatch([${items.map((item) => (typeof item === "string" ? `invalid:${item}` : describeSpec(item))).join(", ")}])`, async (model, real) => {
        const events = items.map((item) => (typeof item === "string" ? buildInvalidEvent(item, model.time.now) : buildEvent(item, model.world, model.time.now)));
        await agree(model, real, `appendBatch(${render(events)})`, (journal) => journal.appendBatch(events));
      }),
    );

  // maxBytes: mostly absent; else from 0 (refused) to about four deliveries of this suite's events (about 330 bytes each).
  const maxBytesArb = fc.oneof({ arbitrary: fc.constant(undefined), weight: 2 }, { arbitrary: fc.integer({ min: 0, max: 1500 }), weight: 1 });
  const claim = fc
    .record({ consumer: consumerIndex, maxEvents: fc.integer({ min: 1, max: 4 }), leaseMs: fc.integer({ min: 1, max: 3000 }), maxBytes: maxBytesArb })
    .map(({ consumer, maxEvents, leaseMs, maxBytes }) =>
      command(`claim(consumer[${consumer}], maxEvents=${maxEvents}, leaseMs=${leaseMs}${maxBytes === undefined ? "" : `, maxBytes=${maxBytes}`})`, async (model, real) => {
        const c = claimer(model, consumer);
        const now = model.time.now;
        const options = { maxEvents, leaseMs, now, ...(maxBytes === undefined ? {} : { maxBytes }) };
        const outcome = await agree(model, real, `claim(${c}, ${render(options)})`, (journal) => journal.claim(c, options));
        if (outcome.ok && (outcome.value as Delivery[]).length > 0) {
          const ids = (outcome.value as Delivery[]).map((delivery) => ({ ...delivery.id }));
          model.deliveries.push(...ids);
          model.batches.push(ids);
        }
      }),
    );

  // Mostly one of the latest deliveries (likely still outstanding), sometimes any.
  // `stray`: may run before any delivery was handed out (then it names one that never was).
  const deliveryArb = fc.record({
    index: fc.oneof(fc.nat({ max: 2 }), fc.nat({ max: 1000 })),
    mutation: mutationArb,
    stray: fc.constantFrom(false, false, false, false, false, false, false, true),
  });

  const ack = deliveryArb.map(({ index, mutation, stray }) =>
    command(
      `ack(${deliveryText(index, mutation)})`,
      async (model, real) => {
        const delivery = pickDelivery(model, index, mutation);
        await agree(model, real, `ack(${render(delivery)})`, (journal) => journal.ack({ ...delivery }));
        await agreeOnHistory(model, real, delivery);
      },
      needsDelivery(stray),
    ),
  );

  // A worker that finished a claimed batch acknowledges all of it: one by one, or in one
  // `ackBatch` (sometimes with a delivery that was never handed out, refused in its place);
  // or it finished part of it ("part": every other delivery, in one `ackBatch`).
  const ackBatch = fc.record({ index: fc.nat({ max: 2 }), way: fc.constantFrom("each", "batch", "batch+stray", "part") }).map(({ index, way }) =>
    command(
      `ackBatch(claim[latest-${index}], ${way})`,
      async (model, real) => {
        const batch = pick(model.batches, model.batches.length - 1 - (index % model.batches.length));
        if (way === "each") {
          for (const delivery of batch) await agree(model, real, `ack(${render(delivery)})`, (journal) => journal.ack({ ...delivery }));
        } else {
          const stray = way === "batch+stray" && batch[0] ? [{ ...batch[0], attempt: batch[0].attempt }, { ...batch[0], event: pick(REQUEST_IDS, REQUEST_IDS.length - 1) }] : [];
          const deliveries = way === "part" ? batch.filter((_, i) => i % 2 === 0) : [...batch, ...stray];
          await agree(model, real, `ackBatch(${render(deliveries)})`, (journal) => journal.ackBatch(deliveries.map((delivery) => ({ ...delivery }))));
        }
        for (const delivery of batch) await agreeOnHistory(model, real, delivery);
      },
      (model) => model.batches.length > 0,
    ),
  );

  const quarantine = fc.record({ delivery: deliveryArb, reason: fc.constantFrom(...REASONS) }).map(({ delivery: { index, mutation, stray }, reason }) =>
    command(
      `quarantine(${deliveryText(index, mutation)}, ${reason})`,
      async (model, real) => {
        const delivery = pickDelivery(model, index, mutation);
        await agree(model, real, `quarantine(${render(delivery)}, ${reason})`, (journal) => journal.quarantine({ ...delivery }, reason));
        await agreeOnHistory(model, real, delivery);
      },
      needsDelivery(stray),
    ),
  );

  const extend = fc.record({ delivery: deliveryArb, leaseMs: fc.integer({ min: 1, max: 3000 }) }).map(({ delivery: { index, mutation, stray }, leaseMs }) =>
    command(
      `extend(${deliveryText(index, mutation)}, leaseMs=${leaseMs})`,
      async (model, real) => {
        const delivery = pickDelivery(model, index, mutation);
        const now = model.time.now;
        await agree(model, real, `extend(${render(delivery)}, ${render({ leaseMs, now })})`, (journal) => journal.extend({ ...delivery }, { leaseMs, now }));
        await agreeOnHistory(model, real, delivery);
      },
      needsDelivery(stray),
    ),
  );

  const nack = fc
    .record({ delivery: deliveryArb, retryAfterMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3000 })) })
    .map(({ delivery: { index, mutation, stray }, retryAfterMs }) =>
      command(
        `nack(${deliveryText(index, mutation)}, retryAfterMs=${retryAfterMs})`,
        async (model, real) => {
          const delivery = pickDelivery(model, index, mutation);
          const options = { retryAfterMs, error: "destination timed out", now: model.time.now };
          await agree(model, real, `nack(${render(delivery)}, ${render(options)})`, (journal) => journal.nack({ ...delivery }, { ...options }));
          await agreeOnHistory(model, real, delivery);
        },
        needsDelivery(stray),
      ),
    );

  const operator = fc
    .record({
      action: fc.constantFrom<"release" | "discard">("release", "discard"),
      target: fc.constantFrom<"quarantined" | "any">("quarantined", "quarantined", "any"),
      index: fc.nat({ max: 1000 }),
      consumer: consumerIndex,
      actor: fc.option(fc.constantFrom("ops", "alice"), { nil: undefined }),
    })
    .map(({ action, target, index, consumer, actor }) =>
      command(`${action}(${target}[${index}]${actor === undefined ? "" : `, actor=${actor}`})`, async (model, real) => {
        // "quarantined": one of the (consumer, event) pairs the model holds quarantined, so the action mostly succeeds.
        const quarantined = model.oracle
          .snapshot()
          .consumers.flatMap((entry) => entry.statuses.filter((status) => status.state === "quarantined").map((status) => ({ consumer: entry.consumer, requestId: status.requestId })));
        const chosen =
          target === "quarantined" && quarantined.length > 0
            ? pick(quarantined, index)
            : { consumer: pick(CONSUMERS, consumer), requestId: pick(REQUEST_IDS, index) };
        const options = actor === undefined ? { now: model.time.now } : { now: model.time.now, actor };
        await agree(model, real, `${action}(${chosen.consumer}, ${chosen.requestId}, ${render(options)})`, (journal) =>
          journal[action](chosen.consumer, chosen.requestId, { ...options }),
        );
      }),
    );

  const stats = fc.constant(
    command("stats(every consumer)", async (model, real) => {
      for (const consumer of CONSUMERS) await agree(model, real, `stats(${consumer})`, (journal) => journal.stats(consumer));
    }),
  );

  // Mostly the event of a recent delivery (so its history is not empty), for every consumer.
  const attempts = fc.record({ index: fc.nat({ max: 2 }), id: fc.option(requestIdIndexArb, { nil: undefined, freq: 4 }) }).map(({ index, id }) =>
    command(`attempts(every consumer, ${id === undefined ? `event of delivery[latest-${index}]` : `id${id}`})`, async (model, real) => {
      const handed = model.deliveries;
      const requestId =
        id === undefined && handed.length > 0 ? pick(handed, handed.length - 1 - (index % handed.length)).event : pick(REQUEST_IDS, id ?? 0);
      for (const consumer of CONSUMERS) await agree(model, real, `attempts(${consumer}, ${requestId})`, (journal) => journal.attempts(consumer, requestId));
    }),
  );

  // "b" (one character) and "ns-b" match only the events of namespace Ns-B (no request id here holds a `b`).
  const queries = ["", pick(REQUEST_IDS, 3).slice(-2), pick(REQUEST_IDS, 5).toUpperCase(), "NS/K-1", "k-0", "rejected", "ATTEMPTS", "zzz", "b", "ns-b"];
  const listQuarantined = fc
    .record({
      limit: fc.integer({ min: 1, max: 3 }),
      query: fc.option(fc.constantFrom(...queries), { nil: undefined, freq: 2 }),
      order: fc.constantFrom(undefined, "oldest" as const, "newest" as const),
    })
    .map(({ limit, query, order }) =>
      command(`listQuarantined(every consumer, limit=${limit}${query === undefined ? "" : `, query=${JSON.stringify(query)}`}${order === undefined ? "" : `, order=${order}`})`, async (model, real) => {
        for (const consumer of CONSUMERS) {
          let after: string | null = null;
          for (let page = 0; after !== null || page === 0; page++) {
            if (page === 100) throw new Error(`journal conformance (${model.label}): listQuarantined did not reach its last page in 100 pages`);
            const options: ListQuarantinedOptions = { limit, after, ...(query === undefined ? {} : { query }), ...(order === undefined ? {} : { order }) };
            const outcome = await agree(model, real, `listQuarantined(${consumer}, ${render(options)})`, (journal) =>
              journal.listQuarantined(consumer, { ...options }),
            );
            after = outcome.ok ? (outcome.value as { nextCursor: string | null }).nextCursor : null;
          }
        }
      }),
    );

  // The whole log, or one event's entries (mostly of an event an operator acted on: the first ids are appended most).
  const listAudit = fc
    .record({ limit: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }), id: fc.option(fc.nat({ max: 3 }), { nil: undefined, freq: 2 }) })
    .map(({ limit, id }) =>
      command(`listAudit(${limit === undefined ? "" : `limit=${limit}`}${id === undefined ? "" : ` id${id}`})`, async (model, real) => {
        const requestId = id === undefined ? undefined : pick(REQUEST_IDS, id);
        let after: string | null = null;
        for (let page = 0; after !== null || page === 0; page++) {
          if (page === 100) throw new Error(`journal conformance (${model.label}): listAudit did not reach its last page in 100 pages`);
          const options: ListAuditOptions = { after, ...(limit === undefined ? {} : { limit }), ...(requestId === undefined ? {} : { requestId }) };
          const outcome = await agree(model, real, `listAudit(${render(options)})`, (journal) => journal.listAudit({ ...options }));
          after = outcome.ok ? (outcome.value as { nextCursor: string | null }).nextCursor : null;
        }
      }),
    );

  const prune = fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }).map((limit) =>
    command(`prune(${limit === undefined ? "" : `limit=${limit}`})`, async (model, real) => {
      const options = limit === undefined ? { now: model.time.now } : { now: model.time.now, limit };
      await agree(model, real, `prune(${render(options)})`, (journal) => journal.prune({ ...options }));
    }),
  );

  // Mostly small steps, so retention windows (up to 5 s) are often still open when the journal fills up.
  const advance = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 300 }), fc.integer({ min: 1, max: 4000 })).map((ms) =>
    command(`advance(${ms}ms)`, async (model) => {
      model.time.advance(ms);
    }),
  );

  // Time boundaries are where off-by-one bugs live: move the clock exactly onto (or 1 ms before)
  // an upcoming lease expiry, retry time or end of a retention window the model knows of.
  const advanceToDeadline = fc.record({ index: fc.nat({ max: 1000 }), early: fc.boolean() }).map(({ index, early }) =>
    command(`advanceTo(deadline[${index}]${early ? " - 1ms" : ""})`, async (model) => {
      const now = model.time.now;
      const snapshot = model.oracle.snapshot();
      const deadlines = new Set<number>();
      for (const { event } of snapshot.events) deadlines.add(event.observedAt + snapshot.capacity.retainAcknowledgedMs);
      for (const { statuses } of snapshot.consumers) {
        for (const status of statuses) {
          deadlines.add(status.availableAt);
          for (const attempt of status.history) deadlines.add(attempt.leaseExpiresAt);
        }
      }
      const upcoming = [...deadlines].map((deadline) => deadline - (early ? 1 : 0)).filter((target) => target > now).sort((a, b) => a - b);
      if (upcoming.length > 0) model.time.now = pick(upcoming, index);
    }),
  );

  const reopen = fc.constant(
    command("reopen()", async (model, real) => {
      if (real.subject.reopen === undefined) throw new Error(`journal conformance (${model.label}): canReopen is set but the subject has no reopen()`);
      real.journal = await real.subject.reopen();
      // Opened as the subject was created: under the world's capacity again.
      if (!deepEqual(model.oracle.capacity, model.world.capacity)) model.oracle = model.oracle.withCapacity(model.world.capacity);
      checkIdentity(real.journal, JOURNAL_NAME, model.world.capacity, model.oracle.mode === "billing_grade", model.label);
    }),
  );

  // The same storage under other bounds (a caller configured with a smaller maxEvents or another
  // policy): the journal may then hold more than its maxEvents, and an append must decide whether
  // room can be made before it reclaims or drops anything (a refused one changes nothing).
  // `below`: maxEvents is that many under the number of events stored then (at least 1).
  const reopenWithCapacity = fc
    .record({ below: fc.integer({ min: 0, max: 3 }), policy: fc.constantFrom<CapacityPolicy>("refuse", "drop_oldest") })
    .map(({ below, policy }) =>
      command(`reopen(maxEvents=stored-${below}, policy=${policy})`, async (model, real) => {
        if (real.subject.reopen === undefined) throw new Error(`journal conformance (${model.label}): canChangeCapacity is set but the subject has no reopen()`);
        const maxEvents = Math.max(1, model.oracle.snapshot().events.length - below);
        const capacity: Capacity = { ...model.world.capacity, maxEvents, policy };
        real.journal = await real.subject.reopen({ capacity });
        model.oracle = model.oracle.withCapacity(capacity);
        checkIdentity(real.journal, JOURNAL_NAME, capacity, model.oracle.mode === "billing_grade", model.label);
      }),
    );

  // Repeats weight the draw towards the calls that change state.
  return [
    append,
    append,
    append,
    appendBatch,
    claim,
    claim,
    claim,
    claim,
    ack,
    ack,
    ackBatch,
    ackBatch,
    quarantine,
    quarantine,
    extend,
    nack,
    operator,
    stats,
    attempts,
    listQuarantined,
    listAudit,
    prune,
    advance,
    advance,
    advanceToDeadline,
    advanceToDeadline,
    ...(canReopen ? [reopen] : []),
    ...(canChangeCapacity ? [reopenWithCapacity, reopenWithCapacity] : []),
  ];
}

const worldArb: Arbitrary<World> = fc.record({
  capacity: fc.record({
    // Small journals more often than not, so capacity pressure (reclaim, refuse, drop) is common.
    maxEvents: fc.oneof(fc.integer({ min: 3, max: 6 }), fc.integer({ min: 3, max: 12 })),
    maxDeliveryAttempts: fc.integer({ min: 1, max: 3 }),
    retainAcknowledgedMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 5000 }), fc.constant(5000)),
    policy: fc.constantFrom<CapacityPolicy>("refuse", "drop_oldest"),
  }),
  consumers: fc.integer({ min: 2, max: 3 }),
  keys: fc.integer({ min: 2, max: 3 }),
});

async function runModelBased(options: JournalConformanceOptions, runs: number): Promise<void> {
  const canChangeCapacity = options.canChangeCapacity === true;
  const canReopen = options.canReopen === true || canChangeCapacity;
  const property = fc.asyncProperty(worldArb, fc.commands(commandArbitraries(canReopen, canChangeCapacity), commandsUpTo(40)), async (world, commands) => {
    // A fresh model, clock and subject for every run (and every shrink attempt).
    const time = virtualClock(CONFORMANCE_CLOCK_START);
    const oracle = new JournalOracle({ name: JOURNAL_NAME, capacity: world.capacity, clock: time.clock, durable: options.durable });
    const subject = await options.createSubject({ name: JOURNAL_NAME, capacity: world.capacity, clock: time.clock });
    try {
      checkIdentity(subject.journal, JOURNAL_NAME, world.capacity, options.durable, options.label);
      const model: Model = { label: options.label, oracle, time, world, deliveries: [], batches: [] };
      const real: Real = { subject, journal: subject.journal };
      await fc.asyncModelRun(() => ({ model, real }), commands);
    } finally {
      await subject.close();
    }
  });
  await fc.assert(property, options.seed === undefined ? { numRuns: runs } : { numRuns: runs, seed: options.seed });
}
