/**
 * The readable half of the OrderedIndex conformance suite: one example per
 * rule of the spec, each on a fresh index from the factory, each asserting
 * concrete values so that a wrong implementation fails with a message naming
 * the rule it broke. Orders are only compared with each other (the spec lets
 * a provider allocate them sparsely), never to fixed numbers.
 */
import type { AbortSignalLike, CallOptions } from "../storage/options.js";
import type { Due, OrderedId, OrderedIndex, OrderedRecord, Rank } from "../storage/ordered/types.js";
import { MAX_ORDERED_LIMIT, MAX_ORDERED_VALUE_BYTES, MAX_STABLE_KEY_BYTES } from "../storage/ordered/validate.js";
import { describeOrderedError, plain, plainEqual, renderPlain, settle } from "./ordered-compare.js";
import type { OrderedConformanceCase, OrderedConformanceOptions, OrderedSubject } from "./ordered-conformance.js";
import { SharedSliceBytes } from "./storage-examples.js";

// --------------------------------------------------------------- assertions

function fail(what: string, expected: unknown, actual: unknown): never {
  throw new Error(`${what}\n  expected: ${renderPlain(expected)}\n  actual:   ${renderPlain(actual)}`);
}

function expectEqual(actual: unknown, expected: unknown, what: string): void {
  if (!plainEqual(plain(actual), plain(expected))) fail(what, expected, actual);
}

function expectTrue(condition: boolean, what: string, detail: unknown = undefined): void {
  if (!condition) fail(what, "true", detail ?? false);
}

/** Expect `call` to reject with an error of class `error` whose listed fields are as given; returns the error. */
async function expectRejects(call: () => Promise<unknown>, expected: { readonly error: string } & Record<string, unknown>, what: string): Promise<Error> {
  const outcome = await settle(call);
  if (outcome.ok) fail(`${what}: expected a rejection`, expected, { resolved: outcome.value });
  const actual = describeOrderedError(outcome.error);
  for (const [field, value] of Object.entries(expected)) {
    if (!plainEqual(actual[field], plain(value))) {
      const message = outcome.error instanceof Error ? ` (message: ${outcome.error.message})` : "";
      fail(`${what}: wrong ${field}${message}`, expected, actual);
    }
  }
  return outcome.error as Error;
}

// --------------------------------------------------------------- fixtures

const NOT_DUE: Due = { state: "not_due", unixMillis: 0 };
const UNRANKED: Rank = { ranked: false, value: 0 };
const rank = (value: number): Rank => ({ ranked: true, value });
const dueAt = (unixMillis: number): Due => ({ state: "due_at", unixMillis });
const bytes = (...values: number[]) => Uint8Array.from(values);

function id(stableKey: string, orderingScope = "inbox", namespace = "jobs"): OrderedId {
  return { namespace, orderingScope, stableKey };
}

function keys(records: readonly OrderedRecord[]): string[] {
  return records.map((record) => `${record.id.orderingScope}:${record.id.stableKey}`);
}

interface Example {
  readonly index: OrderedIndex;
  readonly subject: OrderedSubject;
  /** Create a live record, asserting it was created. */
  readonly add: (key: OrderedId | string, fields?: { scope?: string; value?: Uint8Array; rank?: Rank; due?: Due }) => Promise<OrderedRecord>;
}

type Body = (example: Example) => Promise<void>;

function example(options: OrderedConformanceOptions, name: string, body: Body, subjectOptions: { maxRevision?: number } = {}): OrderedConformanceCase {
  return {
    name,
    run: async () => {
      const subject = await options.createSubject(subjectOptions);
      try {
        const index = subject.index;
        const add: Example["add"] = async (key, fields = {}) => {
          const target = typeof key === "string" ? id(key) : key;
          const result = await index.create(target, fields.scope ?? "priority", fields.value ?? bytes(), fields.rank ?? UNRANKED, fields.due ?? NOT_DUE);
          expectEqual(result.created, true, `create(${renderPlain(target)}) created it`);
          return result.record;
        };
        await body({ index, subject, add });
      } catch (error) {
        if (error instanceof Error) error.message = `ordered conformance (${options.label}) — ${name}: ${error.message}`;
        throw error;
      } finally {
        await subject.close();
      }
    },
  };
}

/** Every page of a listing, following `nextCursor`. */
async function allPages(list: (cursor: string) => Promise<{ records: OrderedRecord[]; nextCursor: string }>): Promise<OrderedRecord[][]> {
  const pages: OrderedRecord[][] = [];
  let cursor = "";
  for (let n = 0; n < 100; n++) {
    const page = await list(cursor);
    pages.push(page.records);
    if (page.nextCursor === "") return pages;
    cursor = page.nextCursor;
  }
  throw new Error("a listing did not end in 100 pages");
}

/** A signal already aborted, with `reason`. */
function abortedSignal(reason: unknown): AbortSignalLike {
  return { aborted: true, reason, addEventListener: () => {}, removeEventListener: () => {} };
}

/** A signal that reads "not aborted" the first time it is asked and "aborted" ever after: an abort during the call. */
function abortingSignal(reason: unknown): AbortSignalLike {
  let reads = 0;
  return {
    get aborted() {
      reads++;
      return reads > 1;
    },
    reason,
    addEventListener: () => {},
    removeEventListener: () => {},
  };
}

// --------------------------------------------------------------- cases

/** One readable case per rule, for {@link orderedConformanceCases}. */
export function orderedExampleCases(options: OrderedConformanceOptions): OrderedConformanceCase[] {
  const cases: OrderedConformanceCase[] = [
    // ------------------------------------------------------------ identity
    example(options, "every method validates the id first: an invalid namespace is refused before any other check", async ({ index, add }) => {
      await add("job-1");
      const bad = { namespace: "Jobs", orderingScope: "inbox", stableKey: "job-1" };
      const refused = { error: "InvalidNameError", code: "invalid_name", rule: "segment_start", name: "Jobs" };
      await expectRejects(() => index.get(bad), refused, "get");
      await expectRejects(() => index.create(bad, "Bad Scope", bytes(), { ranked: false, value: 3 }, { state: "not_due", unixMillis: 1 }), refused, "create");
      await expectRejects(() => index.update(bad, -1, bytes(), rank(0.5), NOT_DUE), refused, "update");
      await expectRejects(() => index.delete(bad, 0), refused, "delete");
      await expectRejects(() => index.get(id("job-1", "in//box")), { error: "InvalidNameError", rule: "empty_segment" }, "get with an invalid ordering scope");
    }),

    example(options, "a stable key is any valid UTF-8 from 1 through MAX_STABLE_KEY_BYTES bytes: slashes, uppercase, punctuation, Unicode", async ({ index, add }) => {
      for (const key of ["User/Ada Lovelace", "a b!?#%", "ünïcödé ✓", "\u{1f600}", "é".repeat(MAX_STABLE_KEY_BYTES / 2)]) {
        await add(key);
        expectEqual((await index.get(id(key))).id.stableKey, key, `the stable key of ${key.length} characters reads back`);
      }
    }),

    example(options, "an empty, too long or invalid UTF-8 stable key is refused with its byte length and never rendered", async ({ index }) => {
      const long = "é".repeat(MAX_STABLE_KEY_BYTES / 2) + "x";
      const cases: [string, string, number][] = [
        ["", "empty", 0],
        [long, "too_long", MAX_STABLE_KEY_BYTES + 1],
        ["secret\ud800key", "utf8", 12],
        ["secret\udc00", "utf8", 9],
      ];
      for (const [key, rule, length] of cases) {
        const error = await expectRejects(() => index.get(id(key)), { error: "InvalidStableKeyError", code: "invalid_stable_key", rule, stableKeyLength: length }, `stable key rule ${rule}`);
        expectTrue(!`${error.message} ${String(error)}`.includes("secret") && !(key.length > 0 && error.message.includes(key)), "the error does not render the key", error.message);
        expectTrue(!Object.values(error).some((field) => field === key && key !== ""), "the error does not keep the key", Object.keys(error));
      }
    }),

    // ------------------------------------------------------------ create
    example(options, "create assigns revision 1 and a nonzero order and reports created", async ({ index }) => {
      const result = await index.create(id("job-1"), "priority", bytes(1, 2), rank(5), dueAt(100));
      expectEqual(result.created, true, "created");
      expectEqual(
        { ...result.record, order: undefined },
        { id: id("job-1"), rankingScope: "priority", revision: 1, due: dueAt(100), rank: rank(5), value: bytes(1, 2), deleted: false },
        "the created record",
      );
      expectTrue(Number.isSafeInteger(result.record.order) && result.record.order > 0, "the order is a positive integer", result.record.order);
      expectEqual(await index.get(id("job-1")), result.record, "get returns what create returned");
    }),

    example(options, "create of an existing identity returns the stored record, created false, without validating the candidate fields", async ({ index, add }) => {
      const stored = await add("job-1", { rank: rank(1), value: bytes(7) });
      const again = await index.create(id("job-1"), "Not A Name", new Uint8Array(MAX_ORDERED_VALUE_BYTES + 1), { ranked: false, value: 9 }, { state: "not_due", unixMillis: 5 });
      expectEqual(again, { record: stored, created: false }, "the second create");
    }),

    example(options, "create of a tombstoned identity returns the tombstone with created false (no resurrection)", async ({ index, add }) => {
      const stored = await add("job-1", { rank: rank(1) });
      const tombstone = await index.delete(id("job-1"), stored.revision);
      expectEqual(await index.create(id("job-1"), "priority", bytes(1), rank(2), dueAt(1)), { record: tombstone, created: false }, "create over a tombstone");
    }),

    example(options, "create validates ranking scope, value, rank and due only when the identity is absent, and creates nothing when one is invalid", async ({ index }) => {
      const attempts: [() => Promise<unknown>, Record<string, unknown> & { error: string }][] = [
        [() => index.create(id("job-1"), "Priority", bytes(), UNRANKED, NOT_DUE), { error: "InvalidNameError", rule: "segment_start" }],
        [() => index.create(id("job-1"), "priority", new Uint8Array(MAX_ORDERED_VALUE_BYTES + 1), UNRANKED, NOT_DUE), { error: "OrderedValueTooLargeError", code: "ordered_value_too_large", size: MAX_ORDERED_VALUE_BYTES + 1, max: MAX_ORDERED_VALUE_BYTES }],
        [() => index.create(id("job-1"), "priority", bytes(), { ranked: false, value: 4 }, NOT_DUE), { error: "InvalidRankError", code: "invalid_rank", rule: "unranked_value" }],
        [() => index.create(id("job-1"), "priority", bytes(), UNRANKED, { state: "not_due", unixMillis: 4 }), { error: "InvalidDueError", code: "invalid_due", rule: "not_due_millis" }],
      ];
      for (const [call, expected] of attempts) await expectRejects(call, expected, `create refused with ${expected.error}`);
      await expectRejects(() => index.get(id("job-1")), { error: "OrderedRecordNotFoundError", code: "ordered_record_not_found", id: id("job-1") }, "nothing was created");
      expectEqual((await index.listOrdered("jobs", "inbox", 0, 10)).records, [], "no order was taken");
    }),

    example(options, "orders strictly increase within an order scope and are never reused, even after a tombstone", async ({ index, add }) => {
      const a = await add("a");
      const b = await add("b");
      await index.delete(id("b"), b.revision);
      const c = await add("c");
      const other = await add(id("a", "archive"));
      const elsewhere = await add(id("a", "inbox", "mail"));
      expectTrue(a.order < b.order && b.order < c.order, "a < b < c", [a.order, b.order, c.order]);
      expectTrue(other.order > 0 && elsewhere.order > 0, "other scopes allocate nonzero orders of their own", [other.order, elsewhere.order]);
      expectEqual(keys((await index.listOrdered("jobs", "inbox", 0, 10)).records), ["inbox:a", "inbox:b", "inbox:c"], "the inbox stream");
    }),

    // ------------------------------------------------------------ get
    example(options, "get of an identity never created is OrderedRecordNotFoundError, and a tombstone is not absent", async ({ index, add }) => {
      await expectRejects(() => index.get(id("nobody")), { error: "OrderedRecordNotFoundError", id: id("nobody") }, "never created");
      const stored = await add("job-1");
      const tombstone = await index.delete(id("job-1"), stored.revision);
      expectEqual(await index.get(id("job-1")), tombstone, "get returns the tombstone");
    }),

    // ------------------------------------------------------------ update
    example(options, "update of an absent record is OrderedRecordNotFoundError whatever the revision or fields", async ({ index }) => {
      await expectRejects(() => index.update(id("job-1"), 1, bytes(), rank(1), NOT_DUE), { error: "OrderedRecordNotFoundError", id: id("job-1") }, "revision 1");
      await expectRejects(() => index.update(id("job-1"), 0, bytes(), { ranked: false, value: 3 }, NOT_DUE), { error: "OrderedRecordNotFoundError" }, "invalid rank");
    }),

    example(options, "update of a tombstone is OrderedDeletedError whatever the revision or fields", async ({ index, add }) => {
      const stored = await add("job-1");
      const tombstone = await index.delete(id("job-1"), stored.revision);
      for (const revision of [tombstone.revision, stored.revision, 0, 99]) {
        await expectRejects(() => index.update(id("job-1"), revision, bytes(), rank(1), NOT_DUE), { error: "OrderedDeletedError", code: "ordered_deleted", id: id("job-1") }, `revision ${revision}`);
      }
      await expectRejects(() => index.update(id("job-1"), tombstone.revision, bytes(), rank(0.5), NOT_DUE), { error: "OrderedDeletedError" }, "invalid rank");
      expectEqual(await index.get(id("job-1")), tombstone, "the tombstone is unchanged");
    }),

    example(options, "update validates value, rank and due before it compares the revision", async ({ index, add }) => {
      await add("job-1");
      await expectRejects(() => index.update(id("job-1"), 7, bytes(), rank(1.5), NOT_DUE), { error: "InvalidRankError", rule: "value" }, "invalid rank, stale revision");
      await expectRejects(() => index.update(id("job-1"), 7, bytes(), rank(1), { state: "soon" as Due["state"], unixMillis: 1 }), { error: "InvalidDueError", rule: "state" }, "unknown due state, stale revision");
      await expectRejects(() => index.update(id("job-1"), 7, new Uint8Array(MAX_ORDERED_VALUE_BYTES + 1), rank(1), NOT_DUE), { error: "OrderedValueTooLargeError" }, "oversized value, stale revision");
    }),

    example(options, "update with a stale revision is OrderedRevisionConflictError with the actual revision and changes nothing", async ({ index, add }) => {
      const stored = await add("job-1", { rank: rank(3) });
      const updated = await index.update(id("job-1"), 1, bytes(1), rank(4), NOT_DUE);
      await expectRejects(
        () => index.update(id("job-1"), 1, bytes(2), rank(5), dueAt(1)),
        { error: "OrderedRevisionConflictError", code: "ordered_revision_conflict", id: id("job-1"), expectedRevision: 1, actualRevision: 2 },
        "stale revision",
      );
      expectEqual(await index.get(id("job-1")), updated, "unchanged");
      expectEqual(stored.revision, 1, "created at revision 1");
    }),

    example(options, "update replaces only value, rank and due and advances the revision exactly once", async ({ index, add }) => {
      const stored = await add("job-1", { scope: "priority", value: bytes(1), rank: rank(1), due: dueAt(10) });
      const updated = await index.update(id("job-1"), 1, bytes(9, 9), UNRANKED, dueAt(-5));
      expectEqual(updated, { ...stored, revision: 2, value: bytes(9, 9), rank: UNRANKED, due: dueAt(-5) }, "the updated record");
      const again = await index.update(id("job-1"), 2, bytes(), rank(-7), NOT_DUE);
      expectEqual(again.revision, 3, "one more update, one more revision");
    }),

    // ------------------------------------------------------------ delete
    example(options, "delete of an absent record is OrderedRecordNotFoundError", async ({ index }) => {
      await expectRejects(() => index.delete(id("job-1"), 1), { error: "OrderedRecordNotFoundError", id: id("job-1") }, "delete");
    }),

    example(options, "delete with a stale revision is OrderedRevisionConflictError and changes nothing", async ({ index, add }) => {
      const stored = await add("job-1", { rank: rank(1) });
      await expectRejects(() => index.delete(id("job-1"), 2), { error: "OrderedRevisionConflictError", expectedRevision: 2, actualRevision: 1 }, "stale");
      expectEqual(await index.get(id("job-1")), stored, "unchanged");
    }),

    example(options, "delete advances the revision once, clears rank and due, and keeps value, ranking scope, identity and order", async ({ index, add }) => {
      const stored = await add("job-1", { scope: "priority", value: bytes(4, 2), rank: rank(8), due: dueAt(3) });
      const tombstone = await index.delete(id("job-1"), 1);
      expectEqual(tombstone, { ...stored, revision: 2, rank: UNRANKED, due: NOT_DUE, deleted: true }, "the tombstone");
    }),

    example(options, "delete of a tombstone returns its state whatever the revision, including a retry with the pre-delete revision", async ({ index, add }) => {
      await add("job-1");
      const tombstone = await index.delete(id("job-1"), 1);
      for (const revision of [1, 2, 0, 1000]) expectEqual(await index.delete(id("job-1"), revision), tombstone, `delete again with revision ${revision}`);
      expectEqual(await index.get(id("job-1")), tombstone, "still the same tombstone");
    }),

    example(options, "a tombstone leaves the ranked and due views and stays in the acceptance stream", async ({ index, add }) => {
      await add("a", { rank: rank(1), due: dueAt(1) });
      await add("b", { rank: rank(2), due: dueAt(2) });
      await index.delete(id("a"), 1);
      expectEqual(keys((await index.listRanked("jobs", "priority", "", 10)).records), ["inbox:b"], "ranked");
      expectEqual(keys((await index.listDue("jobs", 10, "", 10)).records), ["inbox:b"], "due");
      const stream = (await index.listOrdered("jobs", "inbox", 0, 10)).records;
      expectEqual(stream.map((r) => [r.id.stableKey, r.deleted]), [["a", true], ["b", false]], "the acceptance stream");
    }),

    // ------------------------------------------------------------ values
    example(options, "values are copied in and out: the caller's arrays are never retained or shared", async ({ index }) => {
      const input = bytes(1, 2, 3);
      const { record } = await index.create(id("job-1"), "priority", input, UNRANKED, NOT_DUE);
      input.fill(0);
      record.value.fill(7);
      const read = await index.get(id("job-1"));
      expectEqual(read.value, bytes(1, 2, 3), "after mutating the input and the returned record");
      read.value.fill(9);
      const view = new Uint8Array([0, 5, 6, 0]).subarray(1, 3);
      const updated = await index.update(id("job-1"), 1, view, UNRANKED, NOT_DUE);
      view.fill(0);
      expectEqual([updated.value, (await index.get(id("job-1"))).value], [bytes(5, 6), bytes(5, 6)], "a subarray value is copied by its own bytes");
    }),

    example(options, "values are copied in and out also from a Uint8Array whose slice() shares memory (like Node's Buffer)", async ({ index }) => {
      const input = SharedSliceBytes.from([1, 2, 3]);
      const { record } = await index.create(id("job-1"), "priority", input, UNRANKED, NOT_DUE);
      input.fill(0);
      expectEqual(record.value, bytes(1, 2, 3), "create returns the value as written");
      record.value.fill(7);
      const read = await index.get(id("job-1"));
      expectEqual(read.value, bytes(1, 2, 3), "create: after mutating the input and the returned record");
      read.value.fill(9);
      expectEqual((await index.get(id("job-1"))).value, bytes(1, 2, 3), "get: after mutating the record read");
      const next = SharedSliceBytes.from([4, 5]);
      const updated = await index.update(id("job-1"), 1, next, UNRANKED, NOT_DUE);
      next.fill(0);
      expectEqual(updated.value, bytes(4, 5), "update returns the value as written");
      updated.value.fill(7);
      expectEqual((await index.get(id("job-1"))).value, bytes(4, 5), "update: after mutating the input and the returned record");
      const listed = (await index.listOrdered("jobs", "inbox", 0, 10)).records;
      for (const each of listed) each.value.fill(6);
      expectEqual((await index.get(id("job-1"))).value, bytes(4, 5), "list: after mutating the listed records");
    }),

    example(options, "a value of exactly MAX_ORDERED_VALUE_BYTES is accepted and one more byte is OrderedValueTooLargeError; empty values are fine", async ({ index, add }) => {
      await add("big", { value: new Uint8Array(MAX_ORDERED_VALUE_BYTES) });
      expectEqual((await index.get(id("big"))).value.byteLength, MAX_ORDERED_VALUE_BYTES, "the largest value");
      await expectRejects(() => index.update(id("big"), 1, new Uint8Array(MAX_ORDERED_VALUE_BYTES + 1), UNRANKED, NOT_DUE), { error: "OrderedValueTooLargeError", size: MAX_ORDERED_VALUE_BYTES + 1 }, "one byte over");
      await add("empty", { value: bytes() });
      expectEqual((await index.get(id("empty"))).value, bytes(), "the empty value");
    }),

    // ------------------------------------------------------------ rank and due
    example(options, "rank and due have canonical forms: unranked is value 0, not_due is unixMillis 0, values are safe integers", async ({ index }) => {
      const refusals: [Rank, Due, Record<string, unknown> & { error: string }][] = [
        [{ ranked: false, value: 1 }, NOT_DUE, { error: "InvalidRankError", rule: "unranked_value" }],
        [rank(0.5), NOT_DUE, { error: "InvalidRankError", rule: "value" }],
        [rank(2 ** 53), NOT_DUE, { error: "InvalidRankError", rule: "value" }],
        [UNRANKED, { state: "not_due", unixMillis: -1 }, { error: "InvalidDueError", rule: "not_due_millis" }],
        [UNRANKED, { state: "DueAt" as Due["state"], unixMillis: 1 }, { error: "InvalidDueError", rule: "state" }],
        [UNRANKED, dueAt(Number.NaN), { error: "InvalidDueError", rule: "millis" }],
      ];
      for (const [r, d, expected] of refusals) await expectRejects(() => index.create(id("job-1"), "priority", bytes(), r, d), expected, `create with ${renderPlain([r, d])}`);
      const { record } = await index.create(id("job-1"), "priority", bytes(), rank(-Number.MAX_SAFE_INTEGER), dueAt(-1));
      expectEqual([record.rank, record.due], [rank(-Number.MAX_SAFE_INTEGER), dueAt(-1)], "extreme and negative values are kept");
    }),

    // ------------------------------------------------------------ listOrdered
    example(options, "listOrdered returns the stream ascending after the exclusive afterOrder; nextAfterOrder is the last order, 0 on an empty page", async ({ index, add }) => {
      const a = await add("a");
      const b = await add("b");
      const c = await add("c");
      const first = await index.listOrdered("jobs", "inbox", 0, 2);
      expectEqual([keys(first.records), first.nextAfterOrder], [["inbox:a", "inbox:b"], b.order], "first page");
      const second = await index.listOrdered("jobs", "inbox", first.nextAfterOrder, 2);
      expectEqual([keys(second.records), second.nextAfterOrder], [["inbox:c"], c.order], "second page");
      const third = await index.listOrdered("jobs", "inbox", second.nextAfterOrder, 2);
      expectEqual([third.records, third.nextAfterOrder], [[], 0], "past the end");
      expectEqual(keys((await index.listOrdered("jobs", "inbox", a.order, 10)).records), ["inbox:b", "inbox:c"], "afterOrder is exclusive");
      expectEqual((await index.listOrdered("jobs", "archive", 0, 10)).nextAfterOrder, 0, "an empty scope");
    }),

    // ------------------------------------------------------------ listRanked
    example(options, "listRanked is descending by rank, then stable key by UTF-8 bytes, then ordering scope", async ({ index, add }) => {
      await add(id("m", "inbox"), { rank: rank(1) });
      await add(id("m", "archive"), { rank: rank(1) });
      await add("a", { rank: rank(1) });
      await add("ab", { rank: rank(1) });
      await add("top", { rank: rank(Number.MAX_SAFE_INTEGER) });
      await add("neg", { rank: rank(-3) });
      await add("bottom", { rank: rank(-Number.MAX_SAFE_INTEGER) });
      // U+E000 sorts before U+1F600 by code point (and UTF-8 bytes), after it by UTF-16 code units.
      await add("\ue000", { rank: rank(0) });
      await add("\u{1f600}", { rank: rank(0) });
      await add("unranked");
      await add("elsewhere", { rank: rank(5), scope: "other" });
      const { records, nextCursor } = await index.listRanked("jobs", "priority", "", 100);
      expectEqual(
        keys(records),
        ["inbox:top", "inbox:m", "archive:m", "inbox:ab", "inbox:a", "inbox:\u{1f600}", "inbox:\ue000", "inbox:neg", "inbox:bottom"],
        "ranked order",
      );
      expectEqual(nextCursor, "", "a single page is exhausted");
    }),

    example(options, "listRanked pages by keyset and an empty nextCursor means the result set is exhausted", async ({ index, add }) => {
      for (const [key, value] of [["a", 5], ["b", 4], ["c", 3], ["d", 2]] as const) await add(key, { rank: rank(value) });
      const pages = await allPages((cursor) => index.listRanked("jobs", "priority", cursor, 2));
      expectEqual(pages.map(keys), [["inbox:a", "inbox:b"], ["inbox:c", "inbox:d"]], "two full pages, the second one last");
      const three = await allPages((cursor) => index.listRanked("jobs", "priority", cursor, 3));
      expectEqual(three.map(keys), [["inbox:a", "inbox:b", "inbox:c"], ["inbox:d"]], "pages of three");
      expectEqual(await index.listRanked("jobs", "nothing", "", 3), { records: [], nextCursor: "" }, "an empty ranking scope");
    }),

    example(options, "a ranked page resumes from the frozen position: a record moved behind it is skipped, one moved ahead of it is returned twice", async ({ index, add }) => {
      for (const [key, value] of [["a", 50], ["b", 40], ["c", 30], ["d", 20], ["e", 10]] as const) await add(key, { rank: rank(value) });
      const first = await index.listRanked("jobs", "priority", "", 2);
      expectEqual(keys(first.records), ["inbox:a", "inbox:b"], "first page");
      // a moves below the position (it is returned again); d moves above it (it is skipped).
      await index.update(id("a"), 1, bytes(), rank(25), NOT_DUE);
      await index.update(id("d"), 1, bytes(), rank(45), NOT_DUE);
      const rest = await allPages((cursor) => index.listRanked("jobs", "priority", cursor === "" ? first.nextCursor : cursor, 2));
      expectEqual(rest.flat().map((r) => r.id.stableKey), ["c", "a", "e"], "the remaining pages");
    }),

    // ------------------------------------------------------------ listDue
    example(options, "listDue is ascending by due time, stable key and ordering scope, up to and including the bound", async ({ index, add }) => {
      await add(id("x", "inbox"), { due: dueAt(5) });
      await add(id("x", "archive"), { due: dueAt(5) });
      await add("early", { due: dueAt(-10) });
      await add("late", { due: dueAt(6) });
      await add("never");
      await add(id("other-ns", "inbox", "mail"), { due: dueAt(1) });
      const { records, nextCursor } = await index.listDue("jobs", 5, "", 10);
      expectEqual([keys(records), nextCursor], [["inbox:early", "archive:x", "inbox:x"], ""], "due at or before 5");
      expectEqual(keys((await index.listDue("jobs", Number.MAX_SAFE_INTEGER, "", 10)).records), ["inbox:early", "archive:x", "inbox:x", "inbox:late"], "everything due");
      expectEqual((await index.listDue("jobs", -11, "", 10)).records, [], "nothing due yet");
    }),

    example(options, "a due page resumes from the frozen position: a record moved behind it is skipped, one moved ahead of it is returned twice", async ({ index, add }) => {
      for (const [key, at] of [["a", 1], ["b", 2], ["c", 3], ["d", 4], ["e", 5]] as const) await add(key, { due: dueAt(at) });
      const first = await index.listDue("jobs", 10, "", 2);
      expectEqual(keys(first.records), ["inbox:a", "inbox:b"], "first page");
      await index.update(id("a"), 1, bytes(), UNRANKED, dueAt(4)); // moves past the position: returned again
      await index.update(id("d"), 1, bytes(), UNRANKED, dueAt(0)); // moves before it: skipped
      await index.update(id("e"), 1, bytes(), UNRANKED, dueAt(11)); // moves past the bound: gone
      const rest = await allPages((cursor) => index.listDue("jobs", 10, cursor === "" ? first.nextCursor : cursor, 2));
      expectEqual(rest.flat().map((r) => r.id.stableKey), ["c", "a"], "the remaining pages");
    }),

    // ------------------------------------------------------------ cursors
    example(options, "a cursor of the other listing is refused with wrong_kind and the listing's kind", async ({ index, add }) => {
      for (const key of ["a", "b", "c"]) await add(key, { rank: rank(1), due: dueAt(1) });
      const ranked = (await index.listRanked("jobs", "priority", "", 1)).nextCursor;
      const due = (await index.listDue("jobs", 1, "", 1)).nextCursor;
      expectTrue(ranked !== "" && due !== "", "both listings issued a cursor");
      await expectRejects(() => index.listDue("jobs", 1, ranked, 1), { error: "InvalidOrderedCursorError", code: "invalid_ordered_cursor", kind: "due", rule: "wrong_kind" }, "ranked cursor to listDue");
      await expectRejects(() => index.listRanked("jobs", "priority", due, 1), { error: "InvalidOrderedCursorError", kind: "ranked", rule: "wrong_kind" }, "due cursor to listRanked");
    }),

    example(options, "a cursor is bound to its exact query: another namespace, ranking scope or due bound is query_mismatch", async ({ index, add }) => {
      for (const key of ["a", "b", "c"]) await add(key, { rank: rank(1), due: dueAt(1) });
      const ranked = (await index.listRanked("jobs", "priority", "", 1)).nextCursor;
      const due = (await index.listDue("jobs", 1, "", 1)).nextCursor;
      const mismatch = (kind: string) => ({ error: "InvalidOrderedCursorError", kind, rule: "query_mismatch" });
      await expectRejects(() => index.listRanked("mail", "priority", ranked, 1), mismatch("ranked"), "another namespace");
      await expectRejects(() => index.listRanked("jobs", "other", ranked, 1), mismatch("ranked"), "another ranking scope");
      await expectRejects(() => index.listDue("mail", 1, due, 1), mismatch("due"), "another namespace");
      await expectRejects(() => index.listDue("jobs", 2, due, 1), mismatch("due"), "another due bound");
      expectEqual(keys((await index.listDue("jobs", 1, due, 5)).records), ["inbox:b", "inbox:c"], "the same query still resumes");
    }),

    example(options, "a malformed cursor is refused with the listing's kind, its byte length, and never rendered", async ({ index }) => {
      for (const token of ["not-a-cursor", "secret.secret.secret", "🙂🙂"]) {
        const length = [...token].reduce((n, ch) => n + (ch.codePointAt(0)! > 0xffff ? 4 : ch.codePointAt(0)! > 0x7f ? (ch.codePointAt(0)! > 0x7ff ? 3 : 2) : 1), 0);
        for (const kind of ["ranked", "due"] as const) {
          const list = () => (kind === "ranked" ? index.listRanked("jobs", "priority", token, 1) : index.listDue("jobs", 1, token, 1));
          const error = await expectRejects(list, { error: "InvalidOrderedCursorError", kind, cursorLength: length }, `${kind} with ${token}`);
          const rule = (error as unknown as { rule: string }).rule;
          expectTrue(rule === "malformed" || rule === "unknown_version", "a malformed token's rule", rule);
          expectTrue(!`${error.message} ${String(error)}`.includes(token) && !error.message.includes("secret"), "the message does not render the token", error.message);
        }
      }
    }),

    // ------------------------------------------------------------ limits and arguments
    example(options, "a listing limit must be an integer from 1 through MAX_ORDERED_LIMIT", async ({ index }) => {
      for (const limit of [0, -1, 1.5, MAX_ORDERED_LIMIT + 1]) {
        const expected = { error: "InvalidOrderedLimitError", code: "invalid_ordered_limit", limit, max: MAX_ORDERED_LIMIT };
        await expectRejects(() => index.listOrdered("jobs", "inbox", 0, limit), expected, `listOrdered limit ${limit}`);
        await expectRejects(() => index.listRanked("jobs", "priority", "", limit), expected, `listRanked limit ${limit}`);
        await expectRejects(() => index.listDue("jobs", 0, "", limit), expected, `listDue limit ${limit}`);
      }
      expectEqual((await index.listOrdered("jobs", "inbox", 0, MAX_ORDERED_LIMIT)).records, [], "the largest limit");
    }),

    // ------------------------------------------------------------ cancellation
    example(options, "an aborted call rejects with the signal's reason and changes nothing", async ({ index, add }) => {
      const reason = new Error("caller gave up");
      const options: CallOptions = { signal: abortedSignal(reason) };
      const stored = await add("job-1", { rank: rank(1) });
      const calls: [string, () => Promise<unknown>][] = [
        ["get", () => index.get(id("job-1"), options)],
        ["create", () => index.create(id("job-2"), "priority", bytes(), rank(1), NOT_DUE, options)],
        ["update", () => index.update(id("job-1"), 1, bytes(1), rank(2), NOT_DUE, options)],
        ["delete", () => index.delete(id("job-1"), 1, options)],
        ["listOrdered", () => index.listOrdered("jobs", "inbox", 0, 10, options)],
        ["listRanked", () => index.listRanked("jobs", "priority", "", 10, options)],
        ["listDue", () => index.listDue("jobs", 10, "", 10, options)],
      ];
      for (const [name, call] of calls) {
        const outcome = await settle(call);
        expectTrue(!outcome.ok && outcome.error === reason, `${name} rejects with the reason`, outcome);
      }
      expectEqual(await index.get(id("job-1")), stored, "job-1 unchanged");
      await expectRejects(() => index.get(id("job-2")), { error: "OrderedRecordNotFoundError" }, "job-2 never created");
    }),

    example(options, "an abort during a mutation either rejects with the reason and changes nothing, or resolves and the change is there", async ({ index, add }) => {
      const reason = new Error("caller gave up midway");
      const stored = await add("job-1", { rank: rank(1) });
      const create = await settle(() => index.create(id("job-2"), "priority", bytes(), rank(1), NOT_DUE, { signal: abortingSignal(reason) }));
      const created = await settle(() => index.get(id("job-2")));
      expectTrue(create.ok ? created.ok : create.error === reason && !created.ok, "create: all or nothing", { create, created });
      const update = await settle(() => index.update(id("job-1"), 1, bytes(1), rank(2), NOT_DUE, { signal: abortingSignal(reason) }));
      const after = await index.get(id("job-1"));
      expectTrue(update.ok ? after.revision === 2 : update.error === reason && plainEqual(plain(after), plain(stored)), "update: all or nothing", { update, after });
    }),
  ];

  if (options.supportsMaxRevision === true) {
    cases.push(
      example(
        options,
        "a revision at its ceiling cannot advance: update and delete return OrderedRevisionExhaustedError and change nothing",
        async ({ index, add }) => {
          await add("job-1", { rank: rank(1) });
          const second = await index.update(id("job-1"), 1, bytes(1), rank(2), NOT_DUE);
          const third = await index.update(id("job-1"), 2, bytes(2), rank(3), NOT_DUE);
          const exhausted = { error: "OrderedRevisionExhaustedError", code: "ordered_revision_exhausted", id: id("job-1"), revision: 3 };
          await expectRejects(() => index.update(id("job-1"), 3, bytes(3), rank(4), NOT_DUE), exhausted, "update at the ceiling");
          await expectRejects(() => index.delete(id("job-1"), 3), exhausted, "delete at the ceiling");
          await expectRejects(() => index.update(id("job-1"), 2, bytes(3), rank(4), NOT_DUE), { error: "OrderedRevisionConflictError", actualRevision: 3 }, "a stale revision is still a conflict");
          expectEqual(await index.get(id("job-1")), third, "unchanged at the ceiling");
          expectEqual(second.revision, 2, "revisions advanced one at a time");
        },
        { maxRevision: 3 },
      ),
    );
  }

  if (options.canReopen === true) {
    cases.push(
      example(options, "an index reopened over the same storage continues where the old one stopped", async ({ subject, add }) => {
        const a = await add("a", { rank: rank(1), due: dueAt(1) });
        const reopened = await subject.reopen!();
        expectEqual(await reopened.get(id("a")), a, "the record survives");
        const b = await reopened.create(id("b"), "priority", bytes(), rank(2), NOT_DUE);
        expectTrue(b.record.order > a.order, "orders keep increasing", [a.order, b.record.order]);
        expectEqual(keys((await reopened.listRanked("jobs", "priority", "", 10)).records), ["inbox:b", "inbox:a"], "the ranked view");
      }),
    );
  }
  return cases;
}
