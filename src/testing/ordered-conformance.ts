/**
 * The OrderedIndex conformance suite: what any `OrderedIndex` (the core over
 * an adapter's Engine, a remote provider) must do, as test cases that do not
 * depend on a test runner.
 *
 * Two kinds of case:
 * - the model-based case drives the index under test and the reference model
 *   ({@link OrderedOracle}) with the same random sequences of calls
 *   (`fc.commands`) and fails on the first call whose outcome differs (value,
 *   or error class, code and spec fields). It includes keyset "sweeps" whose
 *   pages are read while other commands change ranks, due times and
 *   tombstones in between, so the spec's skip / duplicate behaviour must
 *   match the model's exactly;
 * - readable example cases, one per rule (`./ordered-examples.ts`).
 */
import fc from "fast-check";
import type { Arbitrary, AsyncCommand } from "fast-check";
import type { CallOptions } from "../storage/options.js";
import type { Due, OrderedId, OrderedIndex, OrderedRecord, Rank } from "../storage/ordered/types.js";
import { MAX_ORDERED_VALUE_BYTES, MAX_STABLE_KEY_BYTES } from "../storage/ordered/validate.js";
import { comparable, describeOrderedError, OrderTranslation, plainEqual, renderPlain, settle, type Outcome } from "./ordered-compare.js";
import { orderedExampleCases } from "./ordered-examples.js";
import { OrderedOracle } from "./ordered-oracle.js";
import { commandsUpTo, soakRequested } from "./soak.js";

/** One index under test, over storage of its own. */
export interface OrderedSubject {
  readonly index: OrderedIndex;
  /** A new index over the same storage (a restart). Required when `canReopen`. */
  readonly reopen?: () => Promise<OrderedIndex>;
  /** Release the storage. */
  readonly close: () => Promise<void>;
}

/**
 * Creates an index under test over fresh, empty storage, every call.
 * `maxRevision` is set only when the options say `supportsMaxRevision`.
 */
export interface OrderedSubjectFactory {
  (options: { readonly maxRevision?: number }): Promise<OrderedSubject>;
}

/** What {@link orderedConformanceCases} needs to know about the index under test. */
export interface OrderedConformanceOptions {
  /** Names the implementation in failure messages, e.g. `"memory"`. */
  readonly label: string;
  readonly createSubject: OrderedSubjectFactory;
  /** Whether `subject.reopen` exists. */
  readonly canReopen?: boolean;
  /** Whether the factory honours `maxRevision` (then revision exhaustion is part of the random runs). */
  readonly supportsMaxRevision?: boolean;
  /** Random call sequences to try. Default 100, or 5000 at soak size (`soakRequested()`). */
  readonly runs?: number;
  /** Seed of the random sequences (fast-check prints the seed of a failing run). */
  readonly seed?: number;
}

/** One test case, for any runner: `it(c.name, c.run, c.timeoutMs)`. */
export interface OrderedConformanceCase {
  readonly name: string;
  readonly run: () => Promise<void>;
  readonly timeoutMs?: number;
}


/**
 * The conformance cases for one implementation: the model-based case first,
 * then one readable example per rule.
 *
 * @example
 * import { it } from "vitest";
 * import { createOrderedIndex } from "isostore";
 * import { memoryEngine } from "isostore/memory";
 * import { orderedConformanceCases } from "isostore/testing";
 *
 * const cases = orderedConformanceCases({
 *   label: "memory",
 *   canReopen: true,
 *   supportsMaxRevision: true,
 *   createSubject: async ({ maxRevision }) => {
 *     const engine = memoryEngine();
 *     const open = () => createOrderedIndex(engine, maxRevision === undefined ? { store: "t" } : { store: "t", maxRevision });
 *     return { index: open(), reopen: async () => open(), close: () => engine.close() };
 *   },
 * });
 * for (const c of cases) it(c.name, c.run, c.timeoutMs);
 */
export function orderedConformanceCases(options: OrderedConformanceOptions): OrderedConformanceCase[] {
  const runs = options.runs ?? (soakRequested() ? 5000 : 100);
  return [
    {
      name: "random operation sequences, with pages read while records change, agree with the reference model",
      run: () => runModelBased(options, runs),
      timeoutMs: 60_000 + runs * 300,
    },
    ...orderedExampleCases(options),
  ];
}

// ------------------------------------------------------------------ pools

const NAMESPACES = ["alpha", "beta"] as const;
const ORDERING_SCOPES = ["inbox", "archive"] as const;
const RANKING_SCOPES = ["hot", "cold"] as const;
/**
 * Stable keys chosen to catch ordering mistakes: U+E000 beside U+1F600
 * (UTF-16 code units order them the other way round from UTF-8 bytes), a
 * prefix pair, upper case, a slash. The first four are drawn most often.
 */
const STABLE_KEYS = ["\ue000", "a", "\u{1f600}", "ab", "B", "k/1", "é", "z"] as const;
const IDENTITIES: readonly OrderedId[] = NAMESPACES.flatMap((namespace) =>
  ORDERING_SCOPES.flatMap((orderingScope) => STABLE_KEYS.map((stableKey) => ({ namespace, orderingScope, stableKey }))),
);
const INVALID_IDS: readonly OrderedId[] = [
  { namespace: "Alpha", orderingScope: "inbox", stableKey: "a" },
  { namespace: "alpha", orderingScope: "", stableKey: "a" },
  { namespace: "alpha", orderingScope: "inbox", stableKey: "" },
  { namespace: "alpha", orderingScope: "inbox", stableKey: "\ud800x" },
  { namespace: "alpha", orderingScope: "inbox", stableKey: "x".repeat(MAX_STABLE_KEY_BYTES + 1) },
  { namespace: "alpha/", orderingScope: "in box", stableKey: "" },
];
const GARBAGE_CURSORS = ["x", "v1.r.", "v1.d.", "v9.r.AAAA", "v1.r.!!!!", "oracle-cursor:{}", "oracle-cursor:{\"version\":7}", "...", "v1.x.AAAA"];

function pick<T>(items: readonly T[], index: number): T {
  const item = items[index % items.length];
  if (item === undefined) throw new Error("pick from an empty list");
  return item;
}

function collidingIndex(max: number): Arbitrary<number> {
  // Mostly the first few, so calls collide on the same identities (revision chains, tombstones, ties).
  return fc.oneof({ arbitrary: fc.nat({ max: 1 }), weight: 3 }, { arbitrary: fc.nat({ max: 3 }), weight: 3 }, { arbitrary: fc.nat({ max }), weight: 2 });
}

const rankArb: Arbitrary<Rank> = fc.oneof(
  // Few distinct ranks, so ties (decided by stable key, then ordering scope) are common.
  { arbitrary: fc.integer({ min: -1, max: 1 }).map((value) => ({ ranked: true, value })), weight: 6 },
  { arbitrary: fc.constant({ ranked: false, value: 0 }), weight: 3 },
  { arbitrary: fc.constantFrom(Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER).map((value) => ({ ranked: true, value })), weight: 1 },
  {
    arbitrary: fc.constantFrom<Rank>({ ranked: false, value: 1 }, { ranked: true, value: 1.5 }, { ranked: true, value: Number.NaN }, { ranked: true, value: 2 ** 60 }),
    weight: 1,
  },
);

const dueArb: Arbitrary<Due> = fc.oneof(
  { arbitrary: fc.integer({ min: -1, max: 2 }).map((unixMillis) => ({ state: "due_at" as const, unixMillis })), weight: 6 },
  { arbitrary: fc.constant<Due>({ state: "not_due", unixMillis: 0 }), weight: 3 },
  { arbitrary: fc.constantFrom(Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER).map((unixMillis) => ({ state: "due_at" as const, unixMillis })), weight: 1 },
  {
    arbitrary: fc.constantFrom<Due>(
      { state: "not_due", unixMillis: 3 },
      { state: "later" as Due["state"], unixMillis: 1 },
      { state: "due_at", unixMillis: 0.5 },
      { state: "due_at", unixMillis: Number.POSITIVE_INFINITY },
    ),
    weight: 1,
  },
);

/** A value: a few bytes, or (rarely) one byte over the limit. */
type ValueSpec = { readonly bytes: number[] } | "oversize";
const valueArb: Arbitrary<ValueSpec> = fc.oneof(
  { arbitrary: fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 4 }).map((bytes) => ({ bytes })), weight: 30 },
  { arbitrary: fc.constant<ValueSpec>("oversize"), weight: 1 },
);

function buildValue(spec: ValueSpec): Uint8Array {
  return spec === "oversize" ? new Uint8Array(MAX_ORDERED_VALUE_BYTES + 1) : Uint8Array.from(spec.bytes);
}

const limitArb = fc.oneof({ arbitrary: fc.integer({ min: 1, max: 2 }), weight: 6 }, { arbitrary: fc.integer({ min: 3, max: 5 }), weight: 2 }, { arbitrary: fc.constantFrom(0, -1, 1.5, 1001), weight: 1 });
const boundArb = fc.oneof(
  { arbitrary: fc.integer({ min: -3, max: 5 }), weight: 8 },
  { arbitrary: fc.constantFrom(Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER), weight: 1 },
  { arbitrary: fc.constantFrom(0.5, Number.NaN), weight: 1 },
);

// ------------------------------------------------------------------ model

/** An open keyset sweep: the next page of each side resumes from its own cursor. */
interface Sweep {
  readonly kind: "ranked" | "due";
  readonly namespace: string;
  /** Ranking scope (ranked) or due bound (due). */
  readonly query: string | number;
  readonly limit: number;
  oracleCursor: string;
  subjectCursor: string;
}

interface Model {
  readonly label: string;
  readonly oracle: OrderedOracle;
  readonly orders: OrderTranslation;
  readonly sweeps: Sweep[];
}

interface Real {
  readonly subject: OrderedSubject;
  index: OrderedIndex;
}

type OrderedCommand = AsyncCommand<Model, Real>;

function command(label: string, run: (model: Model, real: Real) => Promise<void>, check: (model: Readonly<Model>) => boolean = () => true): OrderedCommand {
  return { check, run, toString: () => label };
}

type Side = "model" | "subject";

interface AgreeOptions {
  /** Error fields not compared (a cursor's length when each side got its own token). */
  readonly ignore?: readonly string[];
  /** The order scope a page's `nextAfterOrder` belongs to. */
  readonly scope?: { namespace: string; orderingScope: string };
  /** Accept either of these cursor rules on both sides (garbage tokens are the provider's to classify). */
  readonly anyCursorRule?: readonly string[];
  /** Text no error message of the subject may contain (stable keys, cursor tokens). */
  readonly secrets?: readonly string[];
}

function failure(model: Model, what: string, expected: Outcome, actual: Outcome, detail = ""): Error {
  const show = (outcome: Outcome) =>
    outcome.ok
      ? `resolved ${renderPlain(outcome.value)}`
      : `rejected ${renderPlain(describeOrderedError(outcome.error))}${outcome.error instanceof Error ? ` (message: ${JSON.stringify(outcome.error.message)})` : ""}`;
  return new Error(
    [
      `ordered conformance (${model.label}): ${what} disagrees with the reference model${detail === "" ? "" : `: ${detail}`}`,
      `  model:   ${show(expected)}`,
      `  subject: ${show(actual)}`,
      `  model records after the call: ${renderPlain(model.oracle.records())}`,
    ].join("\n"),
  );
}

/**
 * Run one call against the model and the subject (`call` gets the side, so
 * arguments that are each side's own, like cursors and orders, can differ)
 * and require the same outcome. Returns both raw outcomes.
 */
async function agree(
  model: Model,
  real: Real,
  what: string,
  call: (index: OrderedIndex, side: Side) => Promise<unknown>,
  options: AgreeOptions = {},
): Promise<{ expected: Outcome; actual: Outcome }> {
  const expected = await settle(() => call(model.oracle, "model"));
  const actual = await settle(() => call(real.index, "subject"));
  // A create that made a record on both sides teaches the order pair first.
  if (expected.ok && actual.ok && isCreated(expected.value) && isCreated(actual.value)) {
    const problem = model.orders.learn(actual.value.record, expected.value.record.order);
    if (problem !== undefined) throw failure(model, what, expected, actual, problem);
  }
  if (expected.ok !== actual.ok) throw failure(model, what, expected, actual);
  if (expected.ok && actual.ok) {
    const left = comparable(expected.value);
    const right = comparable(actual.value, model.orders, options.scope);
    if (!plainEqual(left, right)) throw failure(model, what, expected, actual);
  } else if (!expected.ok && !actual.ok) {
    const ignore = [...(options.ignore ?? []), ...(options.anyCursorRule === undefined ? [] : ["rule"])];
    const left = describeOrderedError(expected.error, ignore);
    const right = describeOrderedError(actual.error, ignore);
    if (!plainEqual(left, right)) throw failure(model, what, expected, actual);
    if (options.anyCursorRule !== undefined) {
      for (const error of [expected.error, actual.error]) {
        const rule = (error as { rule?: unknown }).rule;
        if (!options.anyCursorRule.includes(String(rule))) throw failure(model, what, expected, actual, `rule ${String(rule)} is not one of ${options.anyCursorRule.join(", ")}`);
      }
    }
    // The spec forbids rendering cursors and stable keys in errors; this suite extends that to every error.
    const message = actual.error instanceof Error ? `${actual.error.message} ${String(actual.error)}` : "";
    const leaked = (options.secrets ?? []).find((secret) => message.includes(secret));
    if (leaked !== undefined) throw failure(model, what, expected, actual, `the error message renders a raw stable key or cursor (${leaked.length} chars)`);
  }
  return { expected, actual };
}

function isCreated(value: unknown): value is { record: OrderedRecord; created: true } {
  return value !== null && typeof value === "object" && (value as { created?: unknown }).created === true;
}

/** A signal that is already aborted; its reason is the same object on both sides. */
const ABORT_REASON = new Error("ordered conformance: aborted on purpose");
const ABORTED: CallOptions = {
  signal: { aborted: true, reason: ABORT_REASON, addEventListener: () => {}, removeEventListener: () => {} },
};

/** Revision the caller names: the model's current one, one behind, zero, far ahead, or not a revision at all. */
type RevisionChoice = "current" | "stale" | "zero" | "ahead" | "invalid";
const revisionChoiceArb = fc.constantFrom<RevisionChoice>("current", "current", "current", "current", "stale", "zero", "ahead", "invalid");

function revisionFor(model: Model, id: OrderedId, choice: RevisionChoice): number {
  const current = model.oracle.records().find((r) => r.id.namespace === id.namespace && r.id.orderingScope === id.orderingScope && r.id.stableKey === id.stableKey)?.revision ?? 1;
  if (choice === "current") return current;
  if (choice === "stale") return current - 1;
  if (choice === "zero") return 0;
  if (choice === "ahead") return current + 7;
  return -1;
}

/** Mutate what a call handed in and handed back: the spec says neither side retains or shares caller bytes. */
function scribble(input: Uint8Array, outcome: Outcome): void {
  input.fill(0xee);
  if (!outcome.ok) return;
  const value = outcome.value as { record?: OrderedRecord; value?: Uint8Array };
  value.record?.value.fill(0xdd);
  value.value?.fill(0xdd);
}

/** The stable key of `id`, as text no error message may contain, when it is distinctive enough to look for. */
function keySecrets(id: OrderedId): string[] {
  return /[^a-zA-Z]/.test(id.stableKey) || id.stableKey.length > 16 ? [id.stableKey] : [];
}

/** Who an update or delete names: mostly a record the model holds (recent ones first), sometimes any pool identity. */
interface Target {
  readonly known: boolean;
  readonly index: number;
  readonly pool: OrderedId;
}

function resolveTarget(model: Model, target: Target): OrderedId {
  const records = model.oracle.records();
  if (!target.known || records.length === 0) return target.pool;
  const live = records.filter((record) => !record.deleted);
  const from = live.length > 0 && target.index % 4 !== 3 ? live : records;
  return { ...pick(from, from.length - 1 - (target.index % from.length)).id };
}

function targetText(target: Target): string {
  return target.known ? `known[${target.index}]` : idText(target.pool);
}

function idText(id: OrderedId): string {
  return renderPlain(id);
}

function commandArbitraries(canReopen: boolean): Arbitrary<OrderedCommand>[] {
  // Mostly the namespace of the most drawn identities.
  const namespaceIndex = fc.oneof({ arbitrary: fc.constant(0), weight: 3 }, { arbitrary: fc.nat({ max: NAMESPACES.length - 1 }), weight: 1 });
  const identity = collidingIndex(IDENTITIES.length - 1).map((i) => pick(IDENTITIES, i));
  const rankingScope = fc.oneof(
    { arbitrary: fc.constant<string>(RANKING_SCOPES[0]), weight: 8 },
    { arbitrary: fc.constant<string>(RANKING_SCOPES[1]), weight: 4 },
    { arbitrary: fc.constant("Hot"), weight: 1 },
  );

  // Spread over every stable key, mostly in the first namespace: many distinct records in the same views.
  const spreadIdentity = fc
    .record({ ns: namespaceIndex, scope: fc.nat({ max: ORDERING_SCOPES.length - 1 }), key: fc.nat({ max: STABLE_KEYS.length - 1 }) })
    .map(({ ns, scope, key }) => ({ namespace: pick(NAMESPACES, ns), orderingScope: pick(ORDERING_SCOPES, scope), stableKey: pick(STABLE_KEYS, key) }));
  const target: Arbitrary<Target> = fc.record({ known: fc.constantFrom(true, true, true, true, false), index: fc.nat({ max: 1000 }), pool: identity });
  const validRank = rankArb.filter((r) => r.ranked ? Number.isSafeInteger(r.value) : r.value === 0);
  const validDue = dueArb.filter((d) => (d.state === "due_at" ? Number.isSafeInteger(d.unixMillis) : d.state === "not_due" && d.unixMillis === 0));

  // Several valid creates in a row: the views fill up, so pages and sweeps have something to page through.
  const createMany = fc
    .array(fc.record({ id: spreadIdentity, rankingScope: fc.constantFrom<string>("hot", "hot", "hot", "cold"), rank: validRank, due: validDue }), { minLength: 2, maxLength: 8 })
    .map((items) =>
      command(`createMany(${items.map((item) => `${idText(item.id)} ${item.rankingScope} ${renderPlain(item.rank)} ${renderPlain(item.due)}`).join("; ")})`, async (model, real) => {
        for (const item of items) {
          await agree(model, real, `create(${idText(item.id)})`, (index) => index.create({ ...item.id }, item.rankingScope, new Uint8Array([item.id.stableKey.length]), { ...item.rank }, { ...item.due }), {
            secrets: keySecrets(item.id),
          });
        }
      }),
    );

  const create = fc.record({ id: identity, rankingScope, value: valueArb, rank: rankArb, due: dueArb }).map(({ id, rankingScope: scope, value, rank, due }) =>
    command(`create(${idText(id)}, ${scope}, ${renderPlain(value)}, ${renderPlain(rank)}, ${renderPlain(due)})`, async (model, real) => {
      const inputs = { model: buildValue(value), subject: buildValue(value) };
      const { expected, actual } = await agree(model, real, `create(${idText(id)})`, (index, side) => index.create({ ...id }, scope, inputs[side], { ...rank }, { ...due }), {
        secrets: keySecrets(id),
      });
      scribble(inputs.model, expected);
      scribble(inputs.subject, actual);
    }),
  );

  const update = fc
    .record({ who: target, revision: revisionChoiceArb, value: valueArb, rank: rankArb, due: dueArb })
    .map(({ who, revision, value, rank, due }) =>
      command(`update(${targetText(who)}, ${revision}, ${renderPlain(value)}, ${renderPlain(rank)}, ${renderPlain(due)})`, async (model, real) => {
        const id = resolveTarget(model, who);
        const expectedRevision = revisionFor(model, id, revision);
        const inputs = { model: buildValue(value), subject: buildValue(value) };
        const { expected, actual } = await agree(model, real, `update(${idText(id)}, ${expectedRevision})`, (index, side) =>
          index.update({ ...id }, expectedRevision, inputs[side], { ...rank }, { ...due }),
          { secrets: keySecrets(id) },
        );
        scribble(inputs.model, expected);
        scribble(inputs.subject, actual);
      }),
    );

  const remove = fc.record({ who: target, revision: revisionChoiceArb }).map(({ who, revision }) =>
    command(`delete(${targetText(who)}, ${revision})`, async (model, real) => {
      const id = resolveTarget(model, who);
      const expectedRevision = revisionFor(model, id, revision);
      await agree(model, real, `delete(${idText(id)}, ${expectedRevision})`, (index) => index.delete({ ...id }, expectedRevision), { secrets: keySecrets(id) });
    }),
  );

  const get = identity.map((id) =>
    command(`get(${idText(id)})`, async (model, real) => {
      const { expected, actual } = await agree(model, real, `get(${idText(id)})`, (index) => index.get({ ...id }), { secrets: keySecrets(id) });
      const dummy = new Uint8Array(0);
      scribble(dummy, expected);
      scribble(dummy, actual);
    }),
  );

  const invalidId = fc.record({ id: fc.constantFrom(...INVALID_IDS), op: fc.constantFrom("get", "create", "update", "delete") }).map(({ id, op }) =>
    command(`${op}(invalid id ${renderPlain({ ...id, stableKey: `<${id.stableKey.length} chars>` })})`, async (model, real) => {
      await agree(model, real, `${op}(invalid id)`, (index) => {
        if (op === "get") return index.get({ ...id });
        if (op === "create") return index.create({ ...id }, "Bad Scope", new Uint8Array(), { ranked: true, value: 0.5 }, { state: "not_due", unixMillis: 9 });
        if (op === "update") return index.update({ ...id }, -1, new Uint8Array(), { ranked: true, value: 1 }, { state: "not_due", unixMillis: 0 });
        return index.delete({ ...id }, 1);
      }, { secrets: keySecrets(id) });
    }),
  );

  // The whole acceptance stream of a scope, page by page, from 0 or from a known record's order.
  const listOrdered = fc
    .record({ ns: fc.nat({ max: 1 }), scope: fc.nat({ max: 1 }), limit: limitArb, start: fc.option(fc.nat({ max: 20 }), { nil: undefined }) })
    .map(({ ns, scope, limit, start }) =>
      command(`listOrdered(ns[${ns}], scope[${scope}], ${start === undefined ? "from 0" : `after record[${start}]`}, limit=${limit})`, async (model, real) => {
        const namespace = pick(NAMESPACES, ns);
        const orderingScope = pick(ORDERING_SCOPES, scope);
        const inScope = model.oracle.records().filter((r) => r.id.namespace === namespace && r.id.orderingScope === orderingScope);
        const startOrder = start === undefined || inScope.length === 0 ? 0 : pick(inScope, start).order;
        let after = { model: startOrder, subject: model.orders.subjectOrder(namespace, orderingScope, startOrder) };
        for (let page = 0; page < 50; page++) {
          const { expected, actual } = await agree(
            model,
            real,
            `listOrdered(${namespace}, ${orderingScope}, after=${after.model}, limit=${limit})`,
            (index, side) => index.listOrdered(namespace, orderingScope, after[side], limit),
            { scope: { namespace, orderingScope } },
          );
          if (!expected.ok || !actual.ok) return;
          const next = { model: (expected.value as { nextAfterOrder: number }).nextAfterOrder, subject: (actual.value as { nextAfterOrder: number }).nextAfterOrder };
          if (next.model === 0) return;
          after = next;
        }
        throw new Error(`ordered conformance (${model.label}): listOrdered did not end in 50 pages`);
      }),
    );

  const rankedQuery = fc.record({ ns: namespaceIndex, scope: rankingScope, limit: limitArb });
  const dueQuery = fc.record({ ns: namespaceIndex, bound: boundArb, limit: limitArb });

  /** One page of a sweep, or of a fresh query; returns the cursors each side issued. */
  async function page(model: Model, real: Real, sweep: Omit<Sweep, "oracleCursor" | "subjectCursor">, cursors: { model: string; subject: string }) {
    const what =
      sweep.kind === "ranked"
        ? `listRanked(${sweep.namespace}, ${String(sweep.query)}, ${cursors.model === "" ? "start" : "cursor"}, ${sweep.limit})`
        : `listDue(${sweep.namespace}, ${String(sweep.query)}, ${cursors.model === "" ? "start" : "cursor"}, ${sweep.limit})`;
    const { expected, actual } = await agree(model, real, what, (index, side) =>
      sweep.kind === "ranked"
        ? index.listRanked(sweep.namespace, sweep.query as string, cursors[side], sweep.limit)
        : index.listDue(sweep.namespace, sweep.query as number, cursors[side], sweep.limit),
    );
    if (!expected.ok || !actual.ok) return undefined;
    return { model: (expected.value as { nextCursor: string }).nextCursor, subject: (actual.value as { nextCursor: string }).nextCursor };
  }

  async function walk(model: Model, real: Real, sweep: Omit<Sweep, "oracleCursor" | "subjectCursor">): Promise<void> {
    let cursors = { model: "", subject: "" };
    for (let n = 0; n < 50; n++) {
      const next = await page(model, real, sweep, cursors);
      if (next === undefined || next.model === "") return;
      cursors = next;
    }
    throw new Error(`ordered conformance (${model.label}): a ${sweep.kind} listing did not end in 50 pages`);
  }

  const listRanked = rankedQuery.map(({ ns, scope, limit }) =>
    command(`listRanked(ns[${ns}], ${scope}, every page, limit=${limit})`, (model, real) => walk(model, real, { kind: "ranked", namespace: pick(NAMESPACES, ns), query: scope, limit })),
  );

  const listDue = dueQuery.map(({ ns, bound, limit }) =>
    command(`listDue(ns[${ns}], ${bound}, every page, limit=${limit})`, (model, real) => walk(model, real, { kind: "due", namespace: pick(NAMESPACES, ns), query: bound, limit })),
  );

  // A sweep reads its first page now and its later pages in later commands, with mutations in between.
  const startSweep = fc
    .oneof(
      rankedQuery.map(({ ns, scope, limit }): Omit<Sweep, "oracleCursor" | "subjectCursor"> => ({ kind: "ranked", namespace: pick(NAMESPACES, ns), query: scope, limit })),
      dueQuery.map(({ ns, bound, limit }): Omit<Sweep, "oracleCursor" | "subjectCursor"> => ({ kind: "due", namespace: pick(NAMESPACES, ns), query: bound, limit })),
    )
    .map((query) =>
      command(`startSweep(${query.kind}, ${query.namespace}, ${String(query.query)}, limit=${query.limit})`, async (model, real) => {
        const next = await page(model, real, query, { model: "", subject: "" });
        if (next !== undefined && next.model !== "") model.sweeps.push({ ...query, oracleCursor: next.model, subjectCursor: next.subject });
      }),
    );

  const continueSweep = fc.nat({ max: 5 }).map((i) =>
    command(
      `continueSweep(${i})`,
      async (model, real) => {
        const at = i % model.sweeps.length;
        const sweep = model.sweeps[at]!;
        const next = await page(model, real, sweep, { model: sweep.oracleCursor, subject: sweep.subjectCursor });
        if (next === undefined || next.model === "") model.sweeps.splice(at, 1);
        else {
          sweep.oracleCursor = next.model;
          sweep.subjectCursor = next.subject;
        }
      },
      (model) => model.sweeps.length > 0,
    ),
  );

  // Cursors that must be refused: garbage, the other listing's, another query's.
  const badCursor = fc
    .record({ variant: fc.constantFrom("garbage", "wrong_kind", "query_mismatch"), i: fc.nat({ max: 20 }), kind: fc.constantFrom<"ranked" | "due">("ranked", "due") })
    .map(({ variant, i, kind }) =>
      command(`badCursor(${variant}, ${i}, ${kind})`, async (model, real) => {
        const sweep = model.sweeps.length === 0 ? undefined : pick(model.sweeps, i);
        if (variant === "garbage" || sweep === undefined) {
          const token = pick(GARBAGE_CURSORS, i);
          await agree(
            model,
            real,
            `${kind} listing with garbage cursor ${JSON.stringify(token)}`,
            (index) => (kind === "ranked" ? index.listRanked("alpha", "hot", token, 2) : index.listDue("alpha", 3, token, 2)),
            { anyCursorRule: ["malformed", "unknown_version", "wrong_kind"], secrets: token.length >= 5 ? [token] : [] },
          );
          return;
        }
        const tokens = { model: sweep.oracleCursor, subject: sweep.subjectCursor };
        const otherNamespace = sweep.namespace === "alpha" ? "beta" : "alpha";
        if (variant === "wrong_kind") {
          await agree(
            model,
            real,
            `a ${sweep.kind} cursor passed to the other listing`,
            (index, side) => (sweep.kind === "ranked" ? index.listDue(sweep.namespace, 3, tokens[side], 2) : index.listRanked(sweep.namespace, "hot", tokens[side], 2)),
            { ignore: ["cursorLength"], secrets: [tokens.subject] },
          );
          return;
        }
        const otherQuery = i % 2 === 0 ? { namespace: otherNamespace, query: sweep.query } : { namespace: sweep.namespace, query: sweep.kind === "ranked" ? (sweep.query === "hot" ? "cold" : "hot") : (sweep.query as number) + 1 };
        await agree(
          model,
          real,
          `a ${sweep.kind} cursor passed to another ${sweep.kind} query ${renderPlain(otherQuery)}`,
          (index, side) =>
            sweep.kind === "ranked"
              ? index.listRanked(otherQuery.namespace, otherQuery.query as string, tokens[side], sweep.limit)
              : index.listDue(otherQuery.namespace, otherQuery.query as number, tokens[side], sweep.limit),
          { ignore: ["cursorLength"], secrets: [tokens.subject] },
        );
      }),
    );

  // An aborted call rejects with the signal's reason and changes nothing (later commands compare state).
  const aborted = fc.record({ id: identity, op: fc.constantFrom("get", "create", "update", "delete", "listOrdered", "listRanked", "listDue") }).map(({ id, op }) =>
    command(`aborted ${op}(${idText(id)})`, async (model, real) => {
      await agree(model, real, `aborted ${op}`, (index) => {
        const value = new Uint8Array([9]);
        const rank = { ranked: true, value: 9 };
        const due: Due = { state: "due_at", unixMillis: 0 };
        if (op === "get") return index.get({ ...id }, ABORTED);
        if (op === "create") return index.create({ ...id }, "hot", value, rank, due, ABORTED);
        if (op === "update") return index.update({ ...id }, revisionFor(model, id, "current"), value, rank, due, ABORTED);
        if (op === "delete") return index.delete({ ...id }, revisionFor(model, id, "current"), ABORTED);
        if (op === "listOrdered") return index.listOrdered(id.namespace, id.orderingScope, 0, 5, ABORTED);
        if (op === "listRanked") return index.listRanked(id.namespace, "hot", "", 5, ABORTED);
        return index.listDue(id.namespace, 5, "", 5, ABORTED);
      });
    }),
  );

  // Two identical calls in flight at once: one create makes the record and the other sees it
  // (created: false); one update wins the revision and the other gets a conflict. Whichever wins,
  // the pair of outcomes (in either order) and the state after must be the model's for two calls in a row.
  const race = fc
    .record({ op: fc.constantFrom<"create" | "update" | "delete">("create", "update", "delete"), who: target, rank: validRank, due: validDue })
    .map(({ op, who, rank, due }) =>
      command(`race(2 x ${op}(${targetText(who)}, ${renderPlain(rank)}, ${renderPlain(due)}))`, async (model, real) => {
        const id = op === "create" ? who.pool : resolveTarget(model, who);
        const revision = revisionFor(model, id, "current");
        const call = (index: OrderedIndex) => {
          if (op === "create") return index.create({ ...id }, "hot", new Uint8Array([7]), { ...rank }, { ...due });
          if (op === "update") return index.update({ ...id }, revision, new Uint8Array([8]), { ...rank }, { ...due });
          return index.delete({ ...id }, revision);
        };
        const expected = [await settle(() => call(model.oracle)), await settle(() => call(model.oracle))];
        const actual = await Promise.all([settle(() => call(real.index)), settle(() => call(real.index))]);
        for (const [i, outcome] of expected.entries()) {
          if (outcome.ok && actual.some((a) => a.ok && isCreated(a.value)) && isCreated(outcome.value)) {
            const created = actual.find((a) => a.ok && isCreated(a.value)) as { ok: true; value: { record: OrderedRecord; created: true } };
            const problem = model.orders.learn(created.value.record, outcome.value.record.order);
            if (problem !== undefined) throw failure(model, `race ${op} #${i}`, outcome, created, problem);
          }
        }
        const describe = (outcome: Outcome, orders?: OrderTranslation) =>
          renderPlain(outcome.ok ? { ok: comparable(outcome.value, orders) } : { error: describeOrderedError(outcome.error) });
        const left = expected.map((o) => describe(o)).sort();
        const right = actual.map((o) => describe(o, model.orders)).sort();
        if (left.join("\n") !== right.join("\n")) {
          throw new Error(`ordered conformance (${model.label}): two concurrent ${op} calls disagree with two calls in a row\n  model:   ${left.join(" | ")}\n  subject: ${right.join(" | ")}`);
        }
      }),
    );

  // Everything the model holds, read back: every identity, every acceptance stream, every whole view.
  const readAll = fc.constant(
    command("readAll()", async (model, real) => {
      for (const id of IDENTITIES) await agree(model, real, `get(${idText(id)})`, (index) => index.get({ ...id }));
      for (const namespace of NAMESPACES) {
        await agree(model, real, `listDue(${namespace}, MAX_SAFE_INTEGER, start, 1000)`, (index) => index.listDue(namespace, Number.MAX_SAFE_INTEGER, "", 1000));
        for (const scope of RANKING_SCOPES) {
          await agree(model, real, `listRanked(${namespace}, ${scope}, start, 1000)`, (index) => index.listRanked(namespace, scope, "", 1000));
        }
        for (const orderingScope of ORDERING_SCOPES) {
          await agree(model, real, `listOrdered(${namespace}, ${orderingScope}, 0, 1000)`, (index) => index.listOrdered(namespace, orderingScope, 0, 1000), {
            scope: { namespace, orderingScope },
          });
        }
      }
    }),
  );

  const reopen = fc.constant(
    command("reopen()", async (model, real) => {
      if (real.subject.reopen === undefined) throw new Error(`ordered conformance (${model.label}): canReopen is set but the subject has no reopen()`);
      real.index = await real.subject.reopen();
    }),
  );

  // Repeats weight the draw towards the calls that change state and the sweeps.
  return [
    createMany,
    createMany,
    create,
    create,
    create,
    update,
    update,
    update,
    update,
    remove,
    remove,
    get,
    invalidId,
    listOrdered,
    listRanked,
    listDue,
    startSweep,
    startSweep,
    continueSweep,
    continueSweep,
    continueSweep,
    badCursor,
    aborted,
    race,
    readAll,
    ...(canReopen ? [reopen] : []),
  ];
}

async function runModelBased(options: OrderedConformanceOptions, runs: number): Promise<void> {
  const maxRevisionArb: Arbitrary<number | undefined> = options.supportsMaxRevision === true ? fc.constantFrom(undefined, undefined, 2, 3, 5) : fc.constant(undefined);
  const property = fc.asyncProperty(maxRevisionArb, fc.commands(commandArbitraries(options.canReopen === true), commandsUpTo(40)), async (maxRevision, commands) => {
    const oracle = new OrderedOracle(maxRevision === undefined ? {} : { maxRevision });
    const subject = await options.createSubject(maxRevision === undefined ? {} : { maxRevision });
    try {
      const model: Model = { label: options.label, oracle, orders: new OrderTranslation(), sweeps: [] };
      const real: Real = { subject, index: subject.index };
      await fc.asyncModelRun(() => ({ model, real }), commands);
    } finally {
      await subject.close();
    }
  });
  await fc.assert(property, options.seed === undefined ? { numRuns: runs } : { numRuns: runs, seed: options.seed });
}
