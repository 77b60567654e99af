/**
 * The readable half of the journal conformance suite: one example per
 * guarantee of `docs/journal-semantics.md`, each on a fresh journal from the
 * factory and a hand-driven clock, each asserting concrete values so that a
 * wrong implementation fails with a message naming the guarantee it broke.
 */
import { CLOCK_BACK_TOLERANCE_MS, deliveryBytes } from "../journal/arguments.js";
import { BILLING_GRADE, createUsageEvent, parseConsumerId } from "../journal/event.js";
import type { Attempt, Capacity, ConsumerId, Delivery, DeliveryId, JsonValue, UsageEvent, UsageJournal } from "../journal/types.js";
import { deepEqual, describeError, render, settle } from "./compare.js";
import type { ConformanceCase, JournalConformanceOptions, JournalSubject } from "./journal-conformance.js";
import { virtualClock, type VirtualClock } from "./virtual-clock.js";

const START = 1_700_000_000_000;
const JOURNAL_NAME = "examples";
const DAY_MS = 24 * 60 * 60 * 1000;
const billing = parseConsumerId("billing");
const warehouse = parseConsumerId("warehouse");

/** Capacity of an example unless it says otherwise: roomy, refuse, five attempts, one minute's retention. */
const ROOMY: Capacity = { maxEvents: 100, maxDeliveryAttempts: 5, retainAcknowledgedMs: 60_000, policy: "refuse" };

interface Example {
  readonly journal: UsageJournal;
  readonly time: VirtualClock;
  /** The clock reading the example started at. */
  readonly t0: number;
  readonly capacity: Capacity;
  readonly subject: JournalSubject;
}

// --------------------------------------------------------------- assertions

function fail(what: string, expected: unknown, actual: unknown): never {
  throw new Error(`${what}\n  expected: ${render(expected)}\n  actual:   ${render(actual)}`);
}

function expectEqual(actual: unknown, expected: unknown, what: string): void {
  if (!deepEqual(actual, expected)) fail(what, expected, actual);
}

/** Expect `call` to reject with an error of class `error` whose code and listed fields are as given. */
async function expectRejects(call: () => Promise<unknown>, expected: { readonly error: string; readonly code: string } & Record<string, unknown>, what: string): Promise<void> {
  const outcome = await settle(call);
  if (outcome.ok) fail(`${what}: expected a rejection`, expected, { resolved: outcome.value });
  const actual = describeError(outcome.error);
  for (const [field, value] of Object.entries(expected)) {
    if (!deepEqual(actual[field], value)) {
      const message = outcome.error instanceof Error ? ` (message: ${outcome.error.message})` : "";
      fail(`${what}: wrong ${field}${message}`, expected, actual);
    }
  }
}

function only<T>(items: readonly T[], what: string): T {
  if (items.length !== 1) fail(`${what}: expected exactly one`, "one item", items);
  return items[0] as T;
}

function nth<T>(items: readonly T[], index: number, what: string): T {
  const item = items[index];
  if (item === undefined) fail(`${what}: expected an item at index ${index}`, `index ${index}`, items);
  return item;
}

/** `requestId#attempt` of each delivery, in order: what most claim assertions compare. */
function handed(deliveries: readonly Delivery[]): string[] {
  return deliveries.map((delivery) => `${delivery.id.event}#${delivery.id.attempt}`);
}

// --------------------------------------------------------------- fixtures

/** A readable, fixed request id: `rid(3)` ends in `...000000000003`. */
function rid(n: number): string {
  return `0190b000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`;
}

function usage(n: number, subject: string, observedAt: number, data: JsonValue = { tokens: n * 10 }): UsageEvent {
  return createUsageEvent({ record: { requestId: rid(n), namespace: "acme", subject, data }, observedAt });
}

function delivery(consumer: ConsumerId, n: number, attempt: number): DeliveryId {
  return { consumer, event: rid(n), attempt };
}

/**
 * Events 1 and 2 on one key; event 1 claimed and quarantined, event 2
 * claimed (in flight), then event 1 released: it waits behind event 2.
 */
async function releaseBehindInFlight(journal: UsageJournal, time: VirtualClock, t0: number): Promise<void> {
  await journal.append(usage(1, "user-1", t0));
  await journal.append(usage(2, "user-1", t0));
  await journal.quarantine(only(await journal.claim(billing, lease(time)), "claim of event 1").id, "rejected");
  expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(2)}#1`], "event 2 goes while event 1 is quarantined");
  await journal.release(billing, rid(1), { now: time.now });
}

function lease(time: VirtualClock, leaseMs = 1000, maxEvents = 10) {
  return { maxEvents, leaseMs, now: time.now };
}

function stats(capacity: Capacity, counts: { pending: number; inFlight: number; quarantined: number; oldestPendingAgeMs: number | null; dropped?: number }) {
  return { dropped: 0, ...counts, capacity };
}

const notOutstanding = (d: DeliveryId) => ({ error: "NotOutstandingError", code: "not_outstanding", delivery: d });
const quarantinedError = (d: DeliveryId) => ({ error: "QuarantinedError", code: "quarantined", delivery: d });
const alreadyAcknowledged = (d: DeliveryId) => ({ error: "AlreadyAcknowledgedError", code: "already_acknowledged", delivery: d });
const notQuarantined = (consumer: string, requestId: string) => ({ error: "NotQuarantinedError", code: "not_quarantined", consumer, requestId });
const conflict = (key: string) => ({ error: "EventConflictError", code: "conflict", key });
const atCapacity = (pending: number, capacity: Capacity) => ({ error: "AtCapacityError", code: "at_capacity", pending, capacity });
const invalidArgument = (argument: string) => ({ error: "InvalidArgumentError", code: "invalid_argument", argument });
const invalidEvent = (requestId: string, rule: string) => ({ error: "InvalidEventError", code: "invalid_event", requestId, rule });
/** `max` comes with `too_long` only, `character` with `character` only (an absent field is expected absent). */
const invalidConsumer = (consumer: string, rule: "empty" | "too_long" | "character", character?: string) => ({
  error: "InvalidConsumerIdError",
  code: "invalid_consumer_id",
  consumer,
  rule,
  max: rule === "too_long" ? 63 : undefined,
  character,
});

// ------------------------------------------------------------------ cases

type ExampleBody = (example: Example) => Promise<void>;

/** The example cases of {@link journalConformanceCases}. */
export function journalExampleCases(options: JournalConformanceOptions): ConformanceCase[] {
  const cases: ConformanceCase[] = [];
  const example = (name: string, capacity: Partial<Capacity>, body: ExampleBody): void => {
    cases.push({
      name,
      run: async () => {
        const time = virtualClock(START);
        const full: Capacity = { ...ROOMY, ...capacity };
        const subject = await options.createSubject({ name: JOURNAL_NAME, capacity: full, clock: time.clock });
        try {
          await body({ journal: subject.journal, time, t0: time.now, capacity: full, subject });
        } catch (error) {
          if (error instanceof Error) error.message = `[${options.label}] ${name}: ${error.message}`;
          throw error;
        } finally {
          await subject.close();
        }
      },
    });
  };

  // ------------------------------------------------------------ append

  example("an accepted event is delivered", {}, async ({ journal, time, t0, capacity }) => {
    const event = usage(1, "user-1", t0 - 100);
    expectEqual(await journal.append(event), { status: "accepted", position: 1 }, "append of a new event");
    const deliveries = await journal.claim(billing, lease(time));
    expectEqual(deliveries, [{ id: delivery(billing, 1, 1), event, leaseExpiresAt: t0 + 1000 }], "claim hands the event out as attempt 1");
    await journal.ack(only(deliveries, "claim").id);
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 0, inFlight: 0, quarantined: 0, oldestPendingAgeMs: null }), "stats after the ack");
    expectEqual(await journal.claim(billing, lease(time)), [], "an acknowledged event is not handed out again");
  });

  example("re-appending the same event is already_present and does not create a second event", {}, async ({ journal, time, t0 }) => {
    const event = usage(1, "user-1", t0);
    expectEqual(await journal.append(event), { status: "accepted", position: 1 }, "first append");
    expectEqual(await journal.append(event), { status: "already_present", position: 1 }, "second append");
    expectEqual((await journal.stats(billing)).pending, 1, "one event is stored");
    expectEqual(await journal.appendBatch([event]), [{ status: "already_present", position: 1 }], "the same event in a batch");
    const deliveries = await journal.claim(billing, lease(time));
    expectEqual(handed(deliveries), [`${rid(1)}#1`], "one delivery");
    await journal.ack(only(deliveries, "claim").id);
    expectEqual(await journal.append(event), { status: "already_present", position: 1 }, "append after the ack, inside the retention window");
    expectEqual(await journal.claim(billing, lease(time)), [], "still nothing to deliver");
    expectEqual(await journal.append(usage(2, "user-1", t0)), { status: "accepted", position: 2 }, "the next new event takes the next position");
  });

  example("observedAt is not part of the fact: the first observation wins", {}, async ({ journal, time, t0 }) => {
    const first = usage(1, "user-1", t0 - 500);
    const retry = usage(1, "user-1", t0);
    await journal.append(first);
    expectEqual(await journal.append(retry), { status: "already_present", position: 1 }, "a retry observed later");
    const deliveries = await journal.claim(billing, lease(time));
    expectEqual(only(deliveries, "claim").event, first, "the delivered event is the first observation");
    expectEqual(only(deliveries, "claim").event.observedAt, t0 - 500, "observedAt of the first observation");
  });

  example("a different record under the same request id is a conflict and changes nothing", {}, async ({ journal, time, t0, capacity }) => {
    await journal.append(usage(1, "user-1", t0, { tokens: 42 }));
    await expectRejects(() => journal.append(usage(1, "user-1", t0, { tokens: 43 })), conflict(rid(1)), "different data");
    await expectRejects(() => journal.append(usage(1, "user-2", t0, { tokens: 42 })), conflict(rid(1)), "different subject");
    expectEqual(
      await journal.appendBatch([usage(1, "user-1", t0, { tokens: 43 })]),
      [{ status: "rejected", error: conflict(rid(1)) }],
      "different data in a batch",
    );
    expectEqual(
      await journal.append(usage(1, "user-1", t0 + 5, { tokens: 42 })),
      { status: "already_present", position: 1 },
      "the original fact is still recognised",
    );
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 1, inFlight: 0, quarantined: 0, oldestPendingAgeMs: 0 }), "one event stored");
    const deliveries = await journal.claim(billing, lease(time));
    expectEqual(only(deliveries, "claim").event.record, { requestId: rid(1), namespace: "acme", subject: "user-1", data: { tokens: 42 } }, "the stored record");
  });

  example("a different namespace under the same request id is a conflict, even with the same subject and data", {}, async ({ journal, time, t0, capacity }) => {
    const original = usage(1, "user-1", t0, { tokens: 42 });
    const elsewhere = createUsageEvent({ record: { requestId: rid(1), namespace: "globex", subject: "user-1", data: { tokens: 42 } }, observedAt: t0 });
    expectEqual(await journal.append(original), { status: "accepted", position: 1 }, "first append, in namespace acme");
    await expectRejects(() => journal.append(elsewhere), conflict(rid(1)), "the same request id, subject and data in namespace globex");
    expectEqual(await journal.appendBatch([elsewhere]), [{ status: "rejected", error: conflict(rid(1)) }], "the same in a batch");
    expectEqual(await journal.append(original), { status: "already_present", position: 1 }, "the original fact is still recognised");
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 1, inFlight: 0, quarantined: 0, oldestPendingAgeMs: 0 }), "one event stored");
    const deliveries = await journal.claim(billing, lease(time));
    expectEqual(only(deliveries, "claim").event.record, { requestId: rid(1), namespace: "acme", subject: "user-1", data: { tokens: 42 } }, "the stored record keeps its namespace");
  });

  example("key order and -0 in data are not part of the fact; a changed nested value is", {}, async ({ journal, time, t0 }) => {
    const withData = (data: JsonValue) => createUsageEvent({ record: { requestId: rid(1), namespace: "acme", subject: "user-1", data }, observedAt: t0 });
    expectEqual(
      await journal.append(withData({ model: "m-1", usage: { input: 10, output: 0, cached: [0, 1] } })),
      { status: "accepted", position: 1 },
      "first append",
    );
    expectEqual(
      await journal.append(withData({ usage: { cached: [-0, 1], output: -0, input: 10 }, model: "m-1" })),
      { status: "already_present", position: 1 },
      "keys reordered at both levels, 0 written as -0",
    );
    // The same, as a plain object that did not come from createUsageEvent (the journal canonicalises it itself).
    const plain = {
      id: rid(1),
      orderingKey: { namespace: "acme", subject: "user-1" },
      record: { subject: "user-1", data: { usage: { output: -0, input: 10, cached: [-0, 1] }, model: "m-1" }, namespace: "acme", requestId: rid(1) },
      observedAt: t0 + 1,
    } as unknown as UsageEvent;
    expectEqual(await journal.appendBatch([plain]), [{ status: "already_present", position: 1 }], "a plain object with its keys reordered, in a batch");
    await expectRejects(
      () => journal.append(withData({ model: "m-1", usage: { input: 10, output: 1, cached: [0, 1] } })),
      conflict(rid(1)),
      "a nested value changed (output 0 -> 1)",
    );
    await expectRejects(
      () => journal.append(withData({ model: "m-1", usage: { input: 10, output: 0, cached: [1, 0] } })),
      conflict(rid(1)),
      "array order is part of the fact",
    );
    const deliveries = await journal.claim(billing, lease(time));
    const claimed = only(deliveries, "claim").event;
    expectEqual(claimed.observedAt, t0, "the first observation is kept (the plain re-append said t0 + 1)");
    const stored = claimed.record.data as { usage: { output: number; cached: number[] } };
    // Exactly the first append's (as createUsageEvent made it), and +0: deep equality would tell neither key order nor -0 apart.
    const first = withData({ model: "m-1", usage: { input: 10, output: 0, cached: [0, 1] } }).record.data;
    expectEqual(JSON.stringify(stored), JSON.stringify(first), "the stored data is the first append's, keys in its order");
    expectEqual([Object.is(stored.usage.output, 0), Object.is(stored.usage.cached[0], 0)], [true, true], "its zeros are +0, not the later appends' -0");
  });

  example("a refused append changes nothing, not even the pruning it would have done", { retainAcknowledgedMs: 0 }, async ({ journal, time, t0 }) => {
    const auditor = parseConsumerId("auditor"); // never claims: its stats show what is stored
    await journal.append(usage(1, "user-1", t0));
    await journal.append(usage(2, "user-2", t0));
    await journal.ack(nth(await journal.claim(billing, lease(time)), 0, "claim").id); // event 1 is prunable now
    await expectRejects(() => journal.append(usage(2, "user-2", t0, { tokens: 0 })), conflict(rid(2)), "a conflicting append");
    expectEqual((await journal.stats(auditor)).pending, 2, "event 1 is still stored: the refused call was rolled back whole");
    expectEqual(await journal.prune({ now: t0 }), { pruned: 1 }, "an explicit prune finds it");
  });

  // ------------------------------------------------------------- claim

  example("claim hands at most one in-flight event per ordering key, in append order", {}, async ({ journal, time, t0 }) => {
    await journal.append(usage(1, "user-a", t0));
    await journal.append(usage(2, "user-a", t0));
    await journal.append(usage(3, "user-b", t0));
    await journal.append(usage(4, "user-a", t0));
    expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(1)}#1`, `${rid(3)}#1`], "the first event of each key");
    expectEqual(await journal.claim(billing, lease(time)), [], "both keys are in flight");
    await journal.ack(delivery(billing, 1, 1));
    expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(2)}#1`], "the next event of user-a");
    expectEqual(
      handed(await journal.claim(warehouse, lease(time))),
      [`${rid(1)}#1`, `${rid(3)}#1`],
      "another consumer has its own delivery state",
    );
    await journal.ack(delivery(billing, 3, 1));
    expectEqual(await journal.claim(billing, lease(time)), [], "user-a is still in flight, user-b is done");
    await journal.ack(delivery(billing, 2, 1));
    expectEqual(handed(await journal.claim(billing, lease(time, 1000, 1))), [`${rid(4)}#1`], "the last event of user-a");
  });

  example("maxBytes: a claim stops before the delivery that would take it over the bound, and always returns the first", {}, async ({ journal, time, t0 }) => {
    const events = [usage(1, "user-a", t0), usage(2, "user-b", t0, { text: "x".repeat(500) }), usage(3, "user-c", t0), usage(4, "user-d", t0, { text: "é".repeat(2000) })];
    for (const event of events) await journal.append(event);
    // What each first delivery will weigh (its JSON as UTF-8), built as a claim at this `now` builds it.
    const size = (n: number) => deliveryBytes({ id: { consumer: billing, event: rid(n), attempt: 1 }, event: nth(events, n - 1, "events"), leaseExpiresAt: time.now + 1000 });
    const claimWithin = (maxBytes: number) => journal.claim(billing, { ...lease(time), maxBytes });
    expectEqual(handed(await claimWithin(size(1) + size(2) - 1)), [`${rid(1)}#1`], "the second delivery would go over by one byte");
    expectEqual(handed(await claimWithin(size(2) + size(3))), [`${rid(2)}#1`, `${rid(3)}#1`], "exactly the bound; event 2 was not leased by the first claim");
    const big = await claimWithin(1);
    expectEqual(handed(big), [`${rid(4)}#1`], "an event larger than the bound is still delivered, alone");
    expectEqual(deliveryBytes(nth(big, 0, "claim")), size(4), "deliveryBytes sizes the delivery as the claim did");
    await expectRejects(() => journal.claim(billing, { ...lease(time), maxBytes: 0 }), invalidArgument("maxBytes"), "maxBytes 0");
    await expectRejects(() => journal.claim(billing, { ...lease(time), maxBytes: 1.5 }), invalidArgument("maxBytes"), "maxBytes 1.5");
  });

  example("the ordering key is the namespace and the subject: one subject in two namespaces is two keys", {}, async ({ journal, time, t0 }) => {
    const inGlobex = (n: number) => createUsageEvent({ record: { requestId: rid(n), namespace: "globex", subject: "user-1", data: { tokens: n } }, observedAt: t0 });
    await journal.append(usage(1, "user-1", t0));
    await journal.append(inGlobex(2));
    await journal.append(usage(3, "user-1", t0));
    expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(1)}#1`, `${rid(2)}#1`], "the first event of each namespace's user-1");
    await journal.ack(delivery(billing, 2, 1));
    expectEqual(await journal.claim(billing, lease(time)), [], "acme/user-1 is still in flight: its next event waits");
    await journal.ack(delivery(billing, 1, 1));
    expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(3)}#1`], "then acme/user-1 goes on");
  });

  example("consumer names may hold digits and `_`: each such name is a consumer of its own", {}, async ({ journal, time, t0 }) => {
    await journal.append(usage(1, "user-1", t0));
    const first = parseConsumerId("billing_v2");
    const second = parseConsumerId("2nd-region");
    expectEqual(handed(await journal.claim(first, lease(time))), [`${rid(1)}#1`], "billing_v2 claims");
    expectEqual(handed(await journal.claim(second, lease(time))), [`${rid(1)}#1`], "2nd-region has its own delivery state");
    await journal.ack({ consumer: first, event: rid(1), attempt: 1 });
    expectEqual((await journal.stats(first)).pending, 0, "billing_v2 is done");
    expectEqual((await journal.stats(second)).inFlight, 1, "2nd-region still holds it");
  });

  example("batches are ordered by position", {}, async ({ journal, time, t0 }) => {
    const events = [usage(1, "user-1", t0), usage(2, "user-1", t0 - 50), usage(3, "user-1", t0 - 100)];
    expectEqual(
      await journal.appendBatch([...events, usage(1, "user-1", t0 + 1)]),
      [
        { status: "accepted", position: 1 },
        { status: "accepted", position: 2 },
        { status: "accepted", position: 3 },
        { status: "already_present", position: 1 },
      ],
      "a batch takes consecutive positions; a repeated id inside it sees the first",
    );
    for (const n of [1, 2, 3]) {
      const deliveries = await journal.claim(billing, lease(time));
      expectEqual(handed(deliveries), [`${rid(n)}#1`], `delivery ${n} follows the batch order, not observedAt`);
      await journal.ack(only(deliveries, "claim").id);
    }
    expectEqual(await journal.appendBatch([usage(4, "user-1", t0)]), [{ status: "accepted", position: 4 }], "the next batch continues");
  });

  example(
    "a consumer registers by claiming, nothing else (a stray ack is not_outstanding and does not hold retention open)",
    { retainAcknowledgedMs: 0 },
    async ({ journal, time, t0, capacity }) => {
      await journal.append(usage(1, "user-1", t0));
      const d = only(await journal.claim(billing, lease(time)), "claim").id;
      await journal.ack(d);
      const stray = delivery(warehouse, 1, 1);
      await expectRejects(() => journal.ack(stray), notOutstanding(stray), "ack from a consumer that never claimed");
      await expectRejects(() => journal.quarantine(stray, "rejected"), notOutstanding(stray), "quarantine from a consumer that never claimed");
      await expectRejects(() => journal.extend(stray, { leaseMs: 1000, now: t0 }), notOutstanding(stray), "extend from a consumer that never claimed");
      await expectRejects(() => journal.nack(stray, { retryAfterMs: 0, error: "x", now: t0 }), notOutstanding(stray), "nack from a consumer that never claimed");
      expectEqual(await journal.attempts(warehouse, rid(1)), [], "no history for the stray consumer");
      expectEqual(
        await journal.stats(warehouse),
        stats(capacity, { pending: 1, inFlight: 0, quarantined: 0, oldestPendingAgeMs: 0 }),
        "stats of an unregistered consumer: the stored backlog",
      );
      expectEqual(await journal.prune({ now: t0 }), { pruned: 1 }, "only billing is registered, and it acknowledged");
      expectEqual(
        await journal.stats(warehouse),
        stats(capacity, { pending: 0, inFlight: 0, quarantined: 0, oldestPendingAgeMs: null }),
        "nothing stored any more",
      );
    },
  );

  // -------------------------------------------------------------- ack

  example("ack is idempotent", {}, async ({ journal, time, t0, capacity }) => {
    await journal.append(usage(1, "user-1", t0));
    const d = only(await journal.claim(billing, lease(time)), "claim").id;
    time.advance(10);
    await journal.ack(d);
    await journal.ack(d);
    const history = [{ attempt: 1, claimedAt: t0, leaseExpiresAt: t0 + 1000, outcome: { kind: "acked", at: t0 + 10 } }];
    expectEqual(await journal.attempts(billing, rid(1)), history, "one attempt, acknowledged once");
    time.advance(5000);
    await journal.ack(d);
    expectEqual(await journal.attempts(billing, rid(1)), history, "a repeated ack after the lease ran out changes nothing");
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 0, inFlight: 0, quarantined: 0, oldestPendingAgeMs: null }), "stats");
  });

  example("ackBatch acknowledges many deliveries at once, each exactly as ack, refusals in place", {}, async ({ journal, time, t0, capacity }) => {
    for (const n of [1, 2, 3]) await journal.append(usage(n, `user-${n}`, t0));
    await journal.append(usage(4, "user-1", t0)); // stored, waiting behind event 1: never handed out
    const [d1, d2, d3] = (await journal.claim(billing, lease(time))).map((delivery) => delivery.id);
    await journal.quarantine(d3!, "malformed");
    time.advance(10);
    const never = { consumer: billing, event: rid(9), attempt: 1 };
    const waiting = delivery(billing, 4, 1);
    const bad = { consumer: billing, event: "nope", attempt: 1 };
    expectEqual(
      await journal.ackBatch([d1!, d2!, d1!, d3!, never, waiting, bad]),
      [
        { ok: true },
        { ok: true },
        { ok: true },
        { ok: false, error: quarantinedError(d3!) },
        { ok: false, error: notOutstanding(never) },
        { ok: false, error: notOutstanding(waiting) },
        { ok: false, error: invalidArgument("delivery.event") },
      ],
      "acked twice is still ok; the quarantined, the never journaled, the stored but never delivered and the malformed are refused in place",
    );
    expectEqual(await journal.attempts(billing, rid(1)), [{ attempt: 1, claimedAt: t0, leaseExpiresAt: t0 + 1000, outcome: { kind: "acked", at: t0 + 10 } }], "acked once");
    expectEqual(await journal.attempts(billing, rid(4)), [], "event 4 was never delivered");
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 1, inFlight: 0, quarantined: 1, oldestPendingAgeMs: 10 }), "stats: event 4 still pending");
    expectEqual(await journal.ackBatch([]), [], "an empty batch");
    await expectRejects(() => journal.ackBatch("nope" as unknown as DeliveryId[]), invalidArgument("deliveries"), "not an array");
    await expectRejects(() => journal.ackBatch(new Array<DeliveryId>(1001).fill(d1!)), invalidArgument("deliveries"), "over 1000 deliveries");
  });

  example("ackBatch of part of a claim leaves the rest in flight: their leases still run out and they are redelivered", {}, async ({ journal, time, t0, capacity }) => {
    for (const n of [1, 2, 3, 4, 5]) await journal.append(usage(n, `user-${n}`, t0));
    const claimed = (await journal.claim(billing, lease(time))).map((delivery) => delivery.id);
    expectEqual(claimed.length, 5, "one claim of five keys");
    time.advance(10);
    // The first, third and fifth: the acked leases surround the others'.
    expectEqual(await journal.ackBatch([claimed[0]!, claimed[2]!, claimed[4]!]), [{ ok: true }, { ok: true }, { ok: true }], "acked");
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 0, inFlight: 2, quarantined: 0, oldestPendingAgeMs: null }), "two still in flight");
    time.advance(5000);
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 2, inFlight: 0, quarantined: 0, oldestPendingAgeMs: 5010 }), "their leases ran out");
    const again = await journal.claim(billing, lease(time));
    expectEqual(
      again.map((delivery) => [delivery.id.event, delivery.id.attempt]),
      [
        [rid(2), 2],
        [rid(4), 2],
      ],
      "the two not acknowledged are delivered again",
    );
  });

  example(
    "ack or quarantine of an event stored but never handed to this consumer is not_outstanding and changes nothing",
    {},
    async ({ journal, time, t0, capacity }) => {
      await journal.append(usage(1, "user-1", t0));
      await journal.append(usage(2, "user-1", t0));
      expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(1)}#1`], "event 1 in flight; event 2 waits behind it on the same key");
      const before = stats(capacity, { pending: 1, inFlight: 1, quarantined: 0, oldestPendingAgeMs: 0 });
      expectEqual(await journal.stats(billing), before, "stats before");
      const waiting = delivery(billing, 2, 1);
      await expectRejects(() => journal.ack(waiting), notOutstanding(waiting), "ack of event 2, never handed out");
      await expectRejects(() => journal.quarantine(waiting, "rejected"), notOutstanding(waiting), "quarantine of event 2, never handed out");
      expectEqual(await journal.stats(billing), before, "stats unchanged");
      expectEqual(await journal.attempts(billing, rid(2)), [], "event 2 has no attempts");
      expectEqual(await journal.listQuarantined(billing), { items: [], nextCursor: null }, "nothing quarantined");
      await journal.ack(delivery(billing, 1, 1));
      expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(2)}#1`], "after event 1's ack, event 2 is handed out as attempt 1");
    },
  );

  example("the recovery ack of an expired attempt is honoured after redelivery", { maxDeliveryAttempts: 3 }, async ({ journal, time, t0, capacity }) => {
    await journal.append(usage(1, "user-1", t0));
    const first = only(await journal.claim(billing, lease(time)), "first claim").id;
    time.advance(1500);
    const second = only(await journal.claim(billing, lease(time)), "redelivery");
    expectEqual(second.id, delivery(billing, 1, 2), "the redelivery is attempt 2");
    await journal.ack(first);
    expectEqual(
      await journal.attempts(billing, rid(1)),
      [
        { attempt: 1, claimedAt: t0, leaseExpiresAt: t0 + 1000, outcome: { kind: "expired", at: t0 + 1000 } },
        { attempt: 2, claimedAt: t0 + 1500, leaseExpiresAt: t0 + 2500, outcome: { kind: "acked", at: t0 + 1500 } },
      ],
      "the ack of attempt 1 finished attempt 2",
    );
    time.advance(5000);
    expectEqual(await journal.claim(billing, lease(time)), [], "not delivered again");
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 0, inFlight: 0, quarantined: 0, oldestPendingAgeMs: null }), "stats");

    // Acknowledged after its lease lapsed, before any redelivery: honoured, and the attempt still reads as expired.
    const t1 = time.now;
    await journal.append(usage(2, "user-2", t1));
    const lapsed = only(await journal.claim(billing, lease(time)), "claim of event 2").id;
    time.advance(1000);
    await journal.ack(lapsed);
    expectEqual(
      await journal.attempts(billing, rid(2)),
      [{ attempt: 1, claimedAt: t1, leaseExpiresAt: t1 + 1000, outcome: { kind: "expired", at: t1 + 1000 } }],
      "the lapsed attempt keeps reading as expired",
    );
    expectEqual(await journal.claim(billing, lease(time)), [], "acknowledged: not redelivered");
  });

  example("ack of a quarantined event is refused (quarantined)", {}, async ({ journal, time, t0, capacity }) => {
    await journal.append(usage(1, "user-1", t0));
    const d = only(await journal.claim(billing, lease(time)), "claim").id;
    await journal.quarantine(d, "malformed");
    await expectRejects(() => journal.ack(d), quarantinedError(d), "ack after quarantine");
    const later = delivery(billing, 1, 2);
    await expectRejects(() => journal.ack(later), quarantinedError(later), "the attempt number does not matter");
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 0, inFlight: 0, quarantined: 1, oldestPendingAgeMs: null }), "still quarantined");

    // Quarantined after its lease lapsed: the attempt still reads as expired.
    await journal.append(usage(2, "user-2", t0));
    const lapsed = only(await journal.claim(billing, lease(time)), "claim of event 2").id;
    time.advance(1000);
    await journal.quarantine(lapsed, "rejected");
    const item = nth((await journal.listQuarantined(billing)).items, 1, "quarantined events");
    expectEqual(
      { reason: item.reason, quarantinedAt: item.quarantinedAt, attempts: item.attempts },
      { reason: "rejected", quarantinedAt: t0 + 1000, attempts: [{ attempt: 1, claimedAt: t0, leaseExpiresAt: t0 + 1000, outcome: { kind: "expired", at: t0 + 1000 } }] },
      "the lapsed attempt keeps reading as expired",
    );
    await expectRejects(() => journal.ack(lapsed), quarantinedError(lapsed), "and the event is quarantined");
  });

  example("quarantine after ack is refused (already_acknowledged)", {}, async ({ journal, time, t0, capacity }) => {
    await journal.append(usage(1, "user-1", t0));
    const d = only(await journal.claim(billing, lease(time)), "claim").id;
    await journal.ack(d);
    await expectRejects(() => journal.quarantine(d, "rejected"), alreadyAcknowledged(d), "quarantine after ack");
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 0, inFlight: 0, quarantined: 0, oldestPendingAgeMs: null }), "nothing quarantined");
    expectEqual(await journal.listQuarantined(billing), { items: [], nextCursor: null }, "nothing listed");
  });

  example("quarantine is idempotent and keeps the first reason", {}, async ({ journal, time, t0 }) => {
    const event = usage(1, "user-1", t0);
    await journal.append(event);
    const d = only(await journal.claim(billing, lease(time)), "claim").id;
    time.advance(100);
    await journal.quarantine(d, "malformed");
    time.advance(100);
    await journal.quarantine(d, "rejected");
    expectEqual(
      await journal.listQuarantined(billing),
      {
        items: [
          {
            consumer: billing,
            event,
            position: 1,
            reason: "malformed",
            quarantinedAt: t0 + 100,
            attempts: [{ attempt: 1, claimedAt: t0, leaseExpiresAt: t0 + 1000, outcome: { kind: "quarantined", at: t0 + 100, reason: "malformed" } }],
          },
        ],
        nextCursor: null,
      },
      "the first verdict stands",
    );
  });

  example("a quarantined event stops blocking its key", {}, async ({ journal, time, t0 }) => {
    await journal.append(usage(1, "user-1", t0));
    await journal.append(usage(2, "user-1", t0));
    const d = only(await journal.claim(billing, lease(time)), "claim").id;
    expectEqual(await journal.claim(billing, lease(time)), [], "the key is blocked while event 1 is in flight");
    await journal.quarantine(d, "rejected");
    expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(2)}#1`], "event 2 is delivered");
  });

  example("attempts beyond maxDeliveryAttempts quarantine the event as attempts_exhausted", { maxDeliveryAttempts: 2 }, async ({ journal, time, t0, capacity }) => {
    await journal.append(usage(1, "user-1", t0));
    await journal.append(usage(2, "user-1", t0));
    expectEqual(handed(await journal.claim(billing, lease(time, 100))), [`${rid(1)}#1`], "attempt 1");
    time.advance(100);
    expectEqual(handed(await journal.claim(billing, lease(time, 100))), [`${rid(1)}#2`], "attempt 2");
    time.advance(100);
    expectEqual(handed(await journal.claim(billing, lease(time, 100))), [`${rid(2)}#1`], "event 1 is out of attempts; event 2 goes");
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 0, inFlight: 1, quarantined: 1, oldestPendingAgeMs: null }), "stats");
    const page = await journal.listQuarantined(billing);
    const item = only(page.items, "quarantined events");
    expectEqual(
      { position: item.position, reason: item.reason, quarantinedAt: item.quarantinedAt, attempts: item.attempts },
      {
        position: 1,
        reason: "attempts_exhausted",
        quarantinedAt: t0 + 200,
        attempts: [
          { attempt: 1, claimedAt: t0, leaseExpiresAt: t0 + 100, outcome: { kind: "expired", at: t0 + 100 } },
          { attempt: 2, claimedAt: t0 + 100, leaseExpiresAt: t0 + 200, outcome: { kind: "expired", at: t0 + 200 } },
        ],
      },
      "the quarantined event",
    );
    await expectRejects(() => journal.ack(delivery(billing, 1, 2)), quarantinedError(delivery(billing, 1, 2)), "a late ack");
  });

  example("an expired lease makes the event claimable again with attempt + 1", {}, async ({ journal, time, t0, capacity }) => {
    await journal.append(usage(1, "user-1", t0));
    await journal.claim(billing, lease(time));
    time.advance(999);
    expectEqual(await journal.claim(billing, lease(time)), [], "the lease still runs 1 ms before it expires");
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 0, inFlight: 1, quarantined: 0, oldestPendingAgeMs: null }), "in flight");
    time.advance(1);
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 1, inFlight: 0, quarantined: 0, oldestPendingAgeMs: 1000 }), "pending again at expiry");
    const redelivery = only(await journal.claim(billing, lease(time)), "claim at expiry");
    expectEqual({ id: redelivery.id, leaseExpiresAt: redelivery.leaseExpiresAt }, { id: delivery(billing, 1, 2), leaseExpiresAt: t0 + 2000 }, "attempt 2");
    expectEqual(
      await journal.attempts(billing, rid(1)),
      [
        { attempt: 1, claimedAt: t0, leaseExpiresAt: t0 + 1000, outcome: { kind: "expired", at: t0 + 1000 } },
        { attempt: 2, claimedAt: t0 + 1000, leaseExpiresAt: t0 + 2000, outcome: null },
      ],
      "the history",
    );
  });

  example("a claimer's clock that went back more than 5 minutes lapses the leases claimed after its now; less keeps them", {}, async ({ journal, t0 }) => {
    await journal.append(usage(1, "user-1", t0));
    await journal.append(usage(2, "user-2", t0));
    await journal.append(usage(3, "user-1", t0));
    const ahead = t0 + 2 * 3_600_000;
    const claim = (now: number) => journal.claim(billing, { maxEvents: 10, leaseMs: 30_000, now });
    expectEqual((await claim(ahead)).map((d) => d.id), [delivery(billing, 1, 1), delivery(billing, 2, 1)], "claimed with the clock 2 h ahead");
    expectEqual(await claim(ahead - CLOCK_BACK_TOLERANCE_MS), [], "a clock back by exactly the tolerance keeps the leases");
    // Set back 2 h: without the rule, both events would stay in flight until the clock reached the old lease ends.
    const again = await claim(t0);
    expectEqual(
      again.map((d) => ({ id: d.id, leaseExpiresAt: d.leaseExpiresAt })),
      [
        { id: delivery(billing, 1, 2), leaseExpiresAt: t0 + 30_000 },
        { id: delivery(billing, 2, 2), leaseExpiresAt: t0 + 30_000 },
      ],
      "the leases claimed after now lapsed: attempt 2 of each, event 3 still behind event 1",
    );
    expectEqual(
      await journal.attempts(billing, rid(1)),
      [
        { attempt: 1, claimedAt: ahead, leaseExpiresAt: ahead + 30_000, outcome: { kind: "expired", at: t0 } },
        { attempt: 2, claimedAt: t0, leaseExpiresAt: t0 + 30_000, outcome: null },
      ],
      "the lapsed attempt reads as expired when the clock went back",
    );
    expectEqual(await claim(t0 + 1000), [], "the new leases hold");
  });

  example("extend keeps a long delivery leased; a stale attempt cannot extend", {}, async ({ journal, time, t0 }) => {
    await journal.append(usage(1, "user-1", t0));
    await journal.append(usage(2, "user-2", t0));
    const d1 = only(await journal.claim(billing, lease(time, 1000, 1)), "claim of event 1").id;
    time.advance(800);
    expectEqual(await journal.extend(d1, { leaseMs: 1000, now: time.now }), { leaseExpiresAt: t0 + 1800 }, "extend");
    time.advance(700);
    expectEqual(handed(await journal.claim(billing, lease(time, 100))), [`${rid(2)}#1`], "event 1 is still leased at t0+1500; event 2 goes");
    await journal.ack(d1);
    await expectRejects(() => journal.extend(d1, { leaseMs: 1000, now: time.now }), alreadyAcknowledged(d1), "extend after ack");
    time.advance(100);
    const stale = delivery(billing, 2, 1);
    await expectRejects(() => journal.extend(stale, { leaseMs: 1000, now: time.now }), notOutstanding(stale), "extend after the lease ran out");
    expectEqual(handed(await journal.claim(billing, lease(time, 100))), [`${rid(2)}#2`], "redelivery of event 2");
    await expectRejects(() => journal.extend(stale, { leaseMs: 1000, now: time.now }), notOutstanding(stale), "extend of a stale attempt");
    expectEqual(await journal.extend(delivery(billing, 2, 2), { leaseMs: 500, now: time.now }), { leaseExpiresAt: t0 + 2100 }, "the current attempt extends");
  });

  example("the attempt history keeps the latest 32 attempts, also across a release", { maxDeliveryAttempts: 40 }, async ({ journal, time, t0 }) => {
    await journal.append(usage(1, "user-1", t0));
    const cycle = async (attempt: number): Promise<void> => {
      const id = only(await journal.claim(billing, lease(time, 1000)), `claim ${attempt}`).id;
      expectEqual(id.attempt, attempt, `attempt ${attempt}`);
      await journal.nack(id, { retryAfterMs: 0, error: `failure ${attempt}`, now: time.now });
      time.advance(1);
    };
    for (let attempt = 1; attempt <= 35; attempt++) await cycle(attempt);
    let history = await journal.attempts(billing, rid(1));
    expectEqual(
      history.map((a) => a.attempt),
      Array.from({ length: 32 }, (_, i) => i + 4),
      "attempts 4 to 35 kept",
    );
    expectEqual(nth(history, 31, "attempts").outcome, { kind: "nacked", at: t0 + 34, error: "failure 35" }, "the latest attempt kept whole");
    // A release keeps the history, and later attempts still push the oldest out.
    for (let attempt = 36; attempt <= 40; attempt++) await cycle(attempt);
    expectEqual(await journal.claim(billing, lease(time)), [], "40 attempts used up: quarantined");
    await journal.release(billing, rid(1), { now: time.now });
    await cycle(41);
    history = await journal.attempts(billing, rid(1));
    expectEqual([history.length, nth(history, 0, "attempts").attempt, nth(history, 31, "attempts").attempt], [32, 10, 41], "attempts 10 to 41 kept");
  });

  example("nack gives the event back after retryAfterMs and counts as an attempt", { maxDeliveryAttempts: 2 }, async ({ journal, time, t0, capacity }) => {
    await journal.append(usage(1, "user-1", t0));
    const first = only(await journal.claim(billing, lease(time, 10_000)), "claim").id;
    await journal.nack(first, { retryAfterMs: 500, error: "timeout", now: t0 });
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 1, inFlight: 0, quarantined: 0, oldestPendingAgeMs: 0 }), "pending, not in flight");
    time.advance(499);
    expectEqual(await journal.claim(billing, lease(time)), [], "not before retryAfterMs");
    time.advance(1);
    expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(1)}#2`], "attempt 2 at retryAfterMs");
    expectEqual(
      nth(await journal.attempts(billing, rid(1)), 0, "attempts"),
      { attempt: 1, claimedAt: t0, leaseExpiresAt: t0 + 10_000, outcome: { kind: "nacked", at: t0, error: "timeout" } },
      "attempt 1 was nacked",
    );
    await expectRejects(() => journal.nack(first, { retryAfterMs: 0, error: "late", now: time.now }), notOutstanding(first), "nack of a stale attempt");
    await journal.nack(delivery(billing, 1, 2), { retryAfterMs: 0, error: "again", now: time.now });
    expectEqual(await journal.claim(billing, lease(time)), [], "two attempts used up: quarantined instead of delivered");
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 0, inFlight: 0, quarantined: 1, oldestPendingAgeMs: null }), "quarantined");

    // A nacked attempt can still be acknowledged (the destination did get it); its history keeps the nack.
    await journal.append(usage(2, "user-2", time.now));
    const other = only(await journal.claim(billing, lease(time)), "claim of event 2").id;
    await journal.nack(other, { retryAfterMs: 60_000, error: "unsure", now: time.now });
    await journal.ack(other);
    expectEqual(
      await journal.attempts(billing, rid(2)),
      [{ attempt: 1, claimedAt: time.now, leaseExpiresAt: time.now + 1000, outcome: { kind: "nacked", at: time.now, error: "unsure" } }],
      "the ack does not rewrite a finished attempt",
    );
    time.advance(60_000);
    expectEqual(await journal.claim(billing, lease(time)), [], "acknowledged: not delivered again");
  });

  // ---------------------------------------------------------- operator

  example(
    "release puts a quarantined event back at its original position with a fresh attempt budget",
    { maxDeliveryAttempts: 1 },
    async ({ journal, time, t0, capacity }) => {
      for (const n of [1, 2, 3]) await journal.append(usage(n, "user-1", t0));
      const d1 = only(await journal.claim(billing, lease(time)), "claim").id;
      await journal.quarantine(d1, "rejected");
      expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(2)}#1`], "event 2 goes while 1 is quarantined");
      await journal.release(billing, rid(1), { now: t0, actor: "ops" });
      expectEqual(await journal.stats(billing), stats(capacity, { pending: 2, inFlight: 1, quarantined: 0, oldestPendingAgeMs: 0 }), "released");
      expectEqual(await journal.claim(billing, lease(time)), [], "the key is in flight (event 2)");
      await journal.ack(delivery(billing, 2, 1));
      expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(1)}#2`], "event 1 again, before event 3, with a new attempt");
      await journal.ack(delivery(billing, 1, 2));
      expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(3)}#1`], "then event 3");
      await expectRejects(() => journal.release(billing, rid(1), { now: t0 }), notQuarantined(billing, rid(1)), "release of an event that is not quarantined");
    },
  );

  example(
    "a release while the key's next event is in flight: when that lease runs out, the released event goes first",
    {},
    async ({ journal, time, t0 }) => {
      await releaseBehindInFlight(journal, time, t0);
      expectEqual(await journal.claim(billing, lease(time)), [], "the key is in flight (event 2)");
      time.advance(1000);
      expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(1)}#2`], "event 2's lease ran out: event 1, released and earlier, comes first");
      await journal.ack(delivery(billing, 1, 2));
      expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(2)}#2`], "then event 2 again");
    },
  );

  example(
    "a release while the key's next event is in flight: when that event is nacked, the released event goes first",
    {},
    async ({ journal, time, t0 }) => {
      await releaseBehindInFlight(journal, time, t0);
      await journal.nack(delivery(billing, 2, 1), { retryAfterMs: 0, error: "busy", now: time.now });
      expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(1)}#2`], "event 2 was given back: event 1, released and earlier, comes first");
      await journal.ack(delivery(billing, 1, 2));
      expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(2)}#2`], "then event 2 again");
    },
  );

  example("discard finishes a quarantined event and makes it prunable", { retainAcknowledgedMs: 1000 }, async ({ journal, time, t0, capacity }) => {
    await journal.append(usage(1, "user-1", t0));
    const d = only(await journal.claim(billing, lease(time)), "claim").id;
    await journal.quarantine(d, "malformed");
    expectEqual(await journal.prune({ now: t0 + 5000 }), { pruned: 0 }, "quarantined: not prunable");
    await journal.discard(billing, rid(1), { now: t0 + 10 });
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 0, inFlight: 0, quarantined: 0, oldestPendingAgeMs: null }), "discarded");
    await expectRejects(() => journal.discard(billing, rid(1), { now: t0 }), notQuarantined(billing, rid(1)), "discard twice");
    await expectRejects(() => journal.release(billing, rid(1), { now: t0 }), notQuarantined(billing, rid(1)), "release after discard");
    await expectRejects(() => journal.ack(d), notOutstanding(d), "ack after discard");
    expectEqual(await journal.prune({ now: t0 + 999 }), { pruned: 0 }, "inside the window");
    expectEqual(await journal.prune({ now: t0 + 1000 }), { pruned: 1 }, "at the end of the window");
    expectEqual(await journal.attempts(billing, rid(1)), [], "forgotten");
  });

  example("operator actions are in the audit log", {}, async ({ journal, time, t0 }) => {
    await journal.append(usage(1, "user-1", t0));
    await journal.append(usage(2, "user-2", t0));
    await journal.claim(billing, lease(time));
    await journal.quarantine(delivery(billing, 1, 1), "malformed");
    await journal.quarantine(delivery(billing, 2, 1), "rejected");
    await journal.release(billing, rid(1), { now: t0 + 10, actor: "alice" });
    await journal.discard(billing, rid(2), { now: t0 + 20 });
    const release = { seq: 1, at: t0 + 10, action: "release", consumer: billing, requestId: rid(1), reason: "malformed", actor: "alice" };
    const discard = { seq: 2, at: t0 + 20, action: "discard", consumer: billing, requestId: rid(2), reason: "rejected", actor: null };
    expectEqual(await journal.listAudit(), { items: [release, discard], nextCursor: null }, "the whole log");
    expectEqual(await journal.listAudit({ limit: 1 }), { items: [release], nextCursor: "a1.1" }, "first page");
    expectEqual(await journal.listAudit({ limit: 1, after: "a1.1" }), { items: [discard], nextCursor: null }, "second page");
    await expectRejects(() => journal.listAudit({ after: "q1.1" }), invalidArgument("after"), "a quarantine cursor");
  });

  example("listQuarantined pages with cursors and filters by request id, ordering key and reason", {}, async ({ journal, time, t0 }) => {
    const subjects = ["alpha", "beta", "gamma", "delta", "epsilon"];
    for (const [index, subject] of subjects.entries()) await journal.append(usage(index + 1, subject, t0));
    expectEqual((await journal.claim(billing, lease(time))).length, 5, "five keys, five deliveries");
    await journal.quarantine(delivery(billing, 1, 1), "malformed");
    await journal.quarantine(delivery(billing, 2, 1), "rejected");
    await journal.quarantine(delivery(billing, 3, 1), "malformed");
    await journal.quarantine(delivery(billing, 4, 1), "attempts_exhausted");
    await journal.ack(delivery(billing, 5, 1));
    const positions = (page: { items: readonly { position: number }[]; nextCursor: string | null }) => ({
      positions: page.items.map((item) => item.position),
      nextCursor: page.nextCursor,
    });
    expectEqual(positions(await journal.listQuarantined(billing, { limit: 2 })), { positions: [1, 2], nextCursor: "q1.2" }, "first page");
    expectEqual(positions(await journal.listQuarantined(billing, { limit: 2, after: "q1.2" })), { positions: [3, 4], nextCursor: null }, "last page");
    expectEqual(positions(await journal.listQuarantined(billing, { query: rid(3).toUpperCase() })), { positions: [3], nextCursor: null }, "by request id");
    expectEqual(positions(await journal.listQuarantined(billing, { query: "ACME/Beta" })), { positions: [2], nextCursor: null }, "by ordering key");
    expectEqual(positions(await journal.listQuarantined(billing, { query: "malformed" })), { positions: [1, 3], nextCursor: null }, "by reason");
    expectEqual(positions(await journal.listQuarantined(billing, { query: "exhausted" })), { positions: [4], nextCursor: null }, "by part of a reason");
    expectEqual(
      positions(await journal.listQuarantined(billing, { query: "malformed", limit: 1 })),
      { positions: [1], nextCursor: "q1.1" },
      "a filtered first page",
    );
    expectEqual(
      positions(await journal.listQuarantined(billing, { query: "malformed", limit: 1, after: "q1.1" })),
      { positions: [3], nextCursor: null },
      "no further match: no cursor",
    );
    expectEqual(await journal.listQuarantined(billing, { query: "nothing-like-this" }), { items: [], nextCursor: null }, "no match");
    expectEqual(await journal.listQuarantined(warehouse), { items: [], nextCursor: null }, "an unregistered consumer");
    const second = nth((await journal.listQuarantined(billing, { limit: 2 })).items, 1, "first page");
    expectEqual(
      second,
      {
        consumer: billing,
        event: usage(2, "beta", t0),
        position: 2,
        reason: "rejected",
        quarantinedAt: t0,
        attempts: [{ attempt: 1, claimedAt: t0, leaseExpiresAt: t0 + 1000, outcome: { kind: "quarantined", at: t0, reason: "rejected" } }],
      },
      "an item",
    );
    await expectRejects(() => journal.listQuarantined(billing, { after: "garbage" }), invalidArgument("after"), "a token that does not parse");
    await expectRejects(() => journal.listQuarantined(billing, { after: "a1.1" }), invalidArgument("after"), "an audit cursor");
    await expectRejects(() => journal.listQuarantined(billing, { after: "q1.0" }), invalidArgument("after"), "a position no journal issues");
  });

  example("listQuarantined lists newest first on request, with cursors of its own", {}, async ({ journal, time, t0 }) => {
    for (const [index, subject] of ["alpha", "beta", "gamma", "delta"].entries()) await journal.append(usage(index + 1, subject, t0));
    expectEqual((await journal.claim(billing, lease(time))).length, 4, "four keys, four deliveries");
    for (const n of [1, 2, 4]) await journal.quarantine(delivery(billing, n, 1), n === 2 ? "rejected" : "malformed");
    const positions = (page: { items: readonly { position: number }[]; nextCursor: string | null }) => ({
      positions: page.items.map((item) => item.position),
      nextCursor: page.nextCursor,
    });
    expectEqual(positions(await journal.listQuarantined(billing, { order: "newest", limit: 2 })), { positions: [4, 2], nextCursor: "qn1.2" }, "first page, newest first");
    expectEqual(positions(await journal.listQuarantined(billing, { order: "newest", limit: 2, after: "qn1.2" })), { positions: [1], nextCursor: null }, "last page");
    expectEqual(positions(await journal.listQuarantined(billing, { order: "newest", query: "malformed" })), { positions: [4, 1], nextCursor: null }, "filtered");
    expectEqual(positions(await journal.listQuarantined(billing, { order: "oldest" })), { positions: [1, 2, 4], nextCursor: null }, "oldest, said explicitly");
    await expectRejects(() => journal.listQuarantined(billing, { order: "newest", after: "q1.2" }), invalidArgument("after"), "an oldest-first cursor");
    await expectRejects(() => journal.listQuarantined(billing, { after: "qn1.2" }), invalidArgument("after"), "a newest-first cursor, oldest first");
    await expectRejects(() => journal.listQuarantined(billing, { order: "sideways" as "newest" }), invalidArgument("order"), "an unknown order");
  });

  example("listQuarantined matches its query case-insensitively against the stored text, a query of one character too", {}, async ({ journal, time, t0 }) => {
    const at = (n: number, namespace: string, subject: string) =>
      createUsageEvent({ record: { requestId: rid(n), namespace, subject, data: { tokens: n } }, observedAt: t0 });
    for (const event of [at(1, "Acme", "User-7"), at(2, "acme", "zed"), at(3, "acme", "alpha"), at(4, "Globex", "Zeta")]) await journal.append(event);
    expectEqual((await journal.claim(billing, lease(time))).length, 4, "four keys, four deliveries");
    for (const n of [1, 2, 3, 4]) await journal.quarantine(delivery(billing, n, 1), "malformed");
    // Request ids (hex digits) and the reason hold no `z`: only the ordering keys can match it.
    const found = async (query: string) => (await journal.listQuarantined(billing, { query })).items.map((item) => item.event.id).sort();
    expectEqual(await found("acme/user"), [rid(1)], "lowercase query, mixed-case stored key Acme/User-7");
    expectEqual(await found("ACME"), [rid(1), rid(2), rid(3)], "uppercase query: Acme and acme alike");
    expectEqual(await found("user-7"), [rid(1)], "the subject User-7 in lowercase");
    expectEqual(await found("z"), [rid(2), rid(4)], "one character: zed and Zeta, not the others");
    expectEqual(await found("Z"), [rid(2), rid(4)], "the same character in uppercase");
    expectEqual(await found("q"), [], "one character no stored text holds");
  });

  // ---------------------------------------------------------- capacity

  example("refuse: a full journal refuses with at_capacity and journals nothing", { maxEvents: 2 }, async ({ journal, time, t0, capacity }) => {
    await journal.append(usage(1, "user-1", t0));
    await journal.append(usage(2, "user-2", t0));
    await expectRejects(() => journal.append(usage(3, "user-3", t0)), atCapacity(2, capacity), "the third append");
    expectEqual(
      await journal.appendBatch([usage(3, "user-3", t0)]),
      [{ status: "rejected", error: atCapacity(2, capacity) }],
      "the third event in a batch",
    );
    expectEqual(await journal.append(usage(1, "user-1", t0)), { status: "already_present", position: 1 }, "a full journal still recognises a retry");
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 2, inFlight: 0, quarantined: 0, oldestPendingAgeMs: 0 }), "two events stored");
    expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(1)}#1`, `${rid(2)}#1`], "only the first two are delivered");
    expectEqual(await journal.attempts(billing, rid(3)), [], "the refused event is not journaled");
  });

  example(
    "a full journal reclaims delivered events inside their window before refusing",
    { maxEvents: 2, retainAcknowledgedMs: DAY_MS },
    async ({ journal, time, t0, capacity }) => {
      await journal.append(usage(1, "user-1", t0 - 100));
      await journal.append(usage(2, "user-2", t0));
      await journal.claim(billing, lease(time));
      await journal.ack(delivery(billing, 1, 1));
      expectEqual(await journal.append(usage(3, "user-3", t0)), { status: "accepted", position: 3 }, "event 1 (delivered, in its window) makes room");
      expectEqual(await journal.stats(billing), stats(capacity, { pending: 1, inFlight: 1, quarantined: 0, oldestPendingAgeMs: 0 }), "not counted as dropped");
      await expectRejects(() => journal.ack(delivery(billing, 1, 1)), notOutstanding(delivery(billing, 1, 1)), "the reclaimed event is gone");
      await expectRejects(() => journal.append(usage(4, "user-4", t0)), atCapacity(2, capacity), "nothing delivered left to reclaim");

      // Of two delivered events, the one observed first goes first; on a tie, the one appended first.
      await journal.ack(delivery(billing, 2, 1));
      expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(3)}#1`], "claim of event 3");
      await journal.ack(delivery(billing, 3, 1));
      // Stored and delivered: event 2 (observed t0, position 2) and event 3 (observed t0, position 3).
      expectEqual(await journal.append(usage(5, "user-5", t0 - 1000)), { status: "accepted", position: 4 }, "event 2 makes room");
      expectEqual(await journal.attempts(billing, rid(2)), [], "event 2 is gone");
      expectEqual(await journal.append(usage(3, "user-3", t0)), { status: "already_present", position: 3 }, "event 3 stays");
      expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(5)}#1`], "claim of event 5");
      await journal.ack(delivery(billing, 5, 1));
      // Stored and delivered: event 3 (observed t0, position 3) and event 5 (observed t0-1000, position 4).
      expectEqual(await journal.append(usage(6, "user-6", t0)), { status: "accepted", position: 5 }, "event 5 makes room");
      expectEqual(await journal.attempts(billing, rid(5)), [], "event 5, observed first though appended later, is gone");
      expectEqual(await journal.append(usage(3, "user-3", t0)), { status: "already_present", position: 3 }, "event 3 stays");
    },
  );

  example("drop_oldest drops the oldest unacknowledged event and counts dropped", { maxEvents: 2, policy: "drop_oldest" }, async ({ journal, time, t0, capacity }) => {
    await journal.append(usage(1, "user-1", t0));
    await journal.append(usage(2, "user-2", t0));
    expectEqual(await journal.append(usage(3, "user-3", t0)), { status: "accepted", position: 3 }, "the third append");
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 2, inFlight: 0, quarantined: 0, oldestPendingAgeMs: 0, dropped: 1 }), "one dropped");
    expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(2)}#1`, `${rid(3)}#1`], "event 1 was dropped");
    time.advance(1000);
    expectEqual(await journal.append(usage(1, "user-1", t0)), { status: "accepted", position: 4 }, "the dropped id is forgotten");
    expectEqual((await journal.stats(billing)).dropped, 2, "event 2 (unacknowledged, its lease run out) made room");
    await expectRejects(() => journal.ack(delivery(billing, 2, 1)), notOutstanding(delivery(billing, 2, 1)), "the dropped event is gone");
  });

  example(
    "drop_oldest drops the oldest event even in flight; its key waits until that lease would have run out",
    { maxEvents: 2, policy: "drop_oldest" },
    async ({ journal, time, t0 }) => {
      await journal.append(usage(1, "user-1", t0));
      await journal.append(usage(2, "user-1", t0));
      expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(1)}#1`], "event 1 in flight, event 2 waits behind it");
      expectEqual(await journal.append(usage(3, "user-2", t0)), { status: "accepted", position: 3 }, "event 1, the oldest, is dropped though in flight");
      await expectRejects(() => journal.ack(delivery(billing, 1, 1)), notOutstanding(delivery(billing, 1, 1)), "the dropped event is gone");
      expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(3)}#1`], "nothing more of user-1 while event 1's lease would still run");
      const held = await journal.stats(billing);
      expectEqual([held.pending, held.inFlight, held.dropped], [1, 1, 1], "event 2 pending, event 3 in flight, one dropped");
      time.advance(1000);
      expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(2)}#1`, `${rid(3)}#2`], "then event 2 goes (and event 3 again: its lease ran out)");
      expectEqual(await journal.append(usage(4, "user-3", t0)), { status: "accepted", position: 4 }, "never refused while an event is not quarantined");
      expectEqual((await journal.stats(billing)).dropped, 2, "dropped");
    },
  );

  example(
    "drop_oldest's hold on a key outlasts later drops of its events and the key running empty",
    { maxEvents: 3, policy: "drop_oldest" },
    async ({ journal, time, t0 }) => {
      for (const n of [1, 2, 3]) await journal.append(usage(n, "user-1", t0));
      expectEqual(handed(await journal.claim(billing, lease(time, 10_000))), [`${rid(1)}#1`], "event 1 in flight for 10 s");
      await journal.append(usage(4, "user-2", t0)); // drops event 1 (in flight): user-1 is held for 10 s
      await journal.append(usage(5, "user-3", t0)); // drops event 2 (waiting): the hold stays
      time.advance(100);
      expectEqual(handed(await journal.claim(billing, lease(time, 10_000))), [`${rid(4)}#1`, `${rid(5)}#1`], "event 3 of user-1 still waits");
      await journal.append(usage(6, "user-1", t0)); // drops event 3: user-1 has no event left, and a new one
      expectEqual(handed(await journal.claim(billing, lease(time, 10_000))), [], "the new event of user-1 waits too");
      expectEqual((await journal.stats(billing)).dropped, 3, "three dropped");
      time.advance(9_900);
      expectEqual(handed(await journal.claim(billing, lease(time, 10_000))), [`${rid(6)}#1`], "once event 1's lease would have run out");
    },
  );

  example(
    "drop_oldest drops the event waiting longest in the journal (appended first), whatever its observedAt",
    { maxEvents: 2, policy: "drop_oldest" },
    async ({ journal, time, t0, capacity }) => {
      await journal.append(usage(1, "user-1", t0));
      await journal.append(usage(2, "user-2", t0 - 5000)); // a late replay: observed first, appended second
      // The oldest pending event for stats is the one observed first: its age is how far behind the bill is.
      expectEqual(await journal.stats(billing), stats(capacity, { pending: 2, inFlight: 0, quarantined: 0, oldestPendingAgeMs: 5000 }), "before the drop");
      expectEqual(await journal.append(usage(3, "user-3", t0)), { status: "accepted", position: 3 }, "the third append");
      expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(2)}#1`, `${rid(3)}#1`], "event 1, appended first, was dropped");
      expectEqual(await journal.stats(billing), stats(capacity, { pending: 0, inFlight: 2, quarantined: 0, oldestPendingAgeMs: null, dropped: 1 }), "after the drop");
    },
  );

  example(
    "drop_oldest never drops a quarantined event; an all-poison journal refuses",
    { maxEvents: 2, policy: "drop_oldest" },
    async ({ journal, time, t0, capacity }) => {
      await journal.append(usage(1, "user-1", t0));
      await journal.append(usage(2, "user-2", t0));
      await journal.claim(billing, lease(time));
      await journal.quarantine(delivery(billing, 1, 1), "malformed");
      time.advance(1000); // event 2's lease runs out: in flight, it would not be dropped
      expectEqual(await journal.append(usage(3, "user-3", t0)), { status: "accepted", position: 3 }, "event 2 is dropped, not event 1");
      expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(3)}#1`], "event 3");
      await journal.quarantine(delivery(billing, 3, 1), "rejected");
      await expectRejects(() => journal.append(usage(4, "user-4", t0)), atCapacity(2, capacity), "everything stored is quarantined");
      expectEqual(await journal.stats(billing), stats(capacity, { pending: 0, inFlight: 0, quarantined: 2, oldestPendingAgeMs: null, dropped: 1 }), "stats");
      expectEqual(
        (await journal.listQuarantined(billing)).items.map((item) => item.position),
        [1, 3],
        "both quarantined events are kept",
      );
    },
  );

  if (options.canChangeCapacity === true) {
    example(
      "a refused append changes nothing, even when the journal holds more than its maxEvents (reopened with less room)",
      { maxEvents: 5, retainAcknowledgedMs: DAY_MS },
      async ({ journal, time, t0, subject, capacity }) => {
        const reopen = subject.reopen;
        if (reopen === undefined) throw new Error("canChangeCapacity is set but the subject has no reopen()");
        for (const n of [1, 2, 3, 4, 5]) await journal.append(usage(n, `user-${n}`, t0));
        expectEqual(handed(await journal.claim(billing, lease(time))), [1, 2, 3, 4, 5].map((n) => `${rid(n)}#1`), "claim of all five");
        await journal.ack(delivery(billing, 1, 1)); // delivered, inside its window: reclaimable
        for (const n of [3, 4, 5]) await journal.quarantine(delivery(billing, n, 1), "malformed"); // never drop candidates
        // Event 2 is given back for a minute (not in flight): a drop candidate. Five stored; two would make room, four are needed.
        await journal.nack(delivery(billing, 2, 1), { retryAfterMs: 60_000, error: "later", now: t0 });
        const unchanged = async (reopened: UsageJournal, bounds: Capacity, what: string): Promise<void> => {
          expectEqual(await reopened.stats(billing), stats(bounds, { pending: 1, inFlight: 0, quarantined: 3, oldestPendingAgeMs: 0 }), `${what}: stats, nothing dropped`);
          expectEqual(
            await settle(() => reopened.append(usage(1, "user-1", t0))),
            { ok: true, value: { status: "already_present", position: 1 } },
            `${what}: delivered event 1 was not reclaimed`,
          );
          expectEqual(handed(await reopened.claim(billing, lease(time))), [], `${what}: event 2 still waits out its minute`);
          expectEqual((await reopened.attempts(billing, rid(2))).length, 1, `${what}: event 2 was not dropped`);
          expectEqual((await reopened.listQuarantined(billing)).items.map((item) => item.position), [3, 4, 5], `${what}: the quarantined events stay`);
        };

        const refusing: Capacity = { ...capacity, maxEvents: 2 };
        const refuse = await reopen({ capacity: refusing });
        expectEqual(refuse.capacity, refusing, "reopened with maxEvents 2");
        // Refused even after reclaiming event 1: 4 retained, all undelivered.
        expectEqual(await refuse.appendBatch([usage(9, "user-9", t0)]), [{ status: "rejected", error: atCapacity(4, refusing) }], "refuse: the event in a batch");
        await expectRejects(() => refuse.append(usage(9, "user-9", t0)), atCapacity(4, refusing), "refuse: the event alone");
        await unchanged(refuse, refusing, "refuse");

        const dropping: Capacity = { ...refusing, policy: "drop_oldest" };
        const drop = await reopen({ capacity: dropping });
        // Refused even after reclaiming event 1 and dropping event 2: 3 retained, all quarantined.
        expectEqual(
          await drop.appendBatch([usage(9, "user-9", t0), usage(10, "user-10", t0)]),
          [
            { status: "rejected", error: atCapacity(3, dropping) },
            { status: "rejected", error: atCapacity(3, dropping) },
          ],
          "drop_oldest: the events in a batch",
        );
        await expectRejects(() => drop.append(usage(9, "user-9", t0)), atCapacity(3, dropping), "drop_oldest: the event alone");
        await unchanged(drop, dropping, "drop_oldest");

        // With room for one more once event 1 is reclaimed and event 2 dropped, the append is accepted and pays for it.
        const roomier: Capacity = { ...dropping, maxEvents: 4 };
        const accept = await reopen({ capacity: roomier });
        expectEqual(await accept.appendBatch([usage(9, "user-9", t0)]), [{ status: "accepted", position: 6 }], "drop_oldest with room for it");
        expectEqual(await accept.stats(billing), stats(roomier, { pending: 1, inFlight: 0, quarantined: 3, oldestPendingAgeMs: 0, dropped: 1 }), "event 2 dropped for it");
        expectEqual(await accept.attempts(billing, rid(2)), [], "event 2 is gone");
        expectEqual(await accept.attempts(billing, rid(1)), [], "event 1 was reclaimed");
        // `dropped` is the data's lifetime count: under refuse again, past drops stay visible.
        const refusingAgain = await reopen({ capacity: { ...roomier, policy: "refuse" } });
        expectEqual((await refusingAgain.stats(billing)).dropped, 1, "refuse after drop_oldest still reports the past drop");
      },
    );
  }

  if (options.canChangeCapacity === true) {
    example(
      "a refused append of an event past its window leaves that stored event in place (reopened with less room)",
      { maxEvents: 20, retainAcknowledgedMs: 1000 },
      async ({ journal, time, t0, subject, capacity }) => {
        const reopen = subject.reopen;
        if (reopen === undefined) throw new Error("canChangeCapacity is set but the subject has no reopen()");
        for (let n = 1; n <= 10; n++) await journal.append(usage(n, `user-${n}`, t0));
        for (const each of await journal.claim(billing, lease(time, 1000, 20))) await journal.ack(each.id);
        for (let n = 11; n <= 14; n++) await journal.append(usage(n, `user-${n}`, t0 + 60_000)); // unfinished, inside any window
        time.advance(1000); // events 1-10 are past their window: prunable, and their ids forgotten
        const refusing: Capacity = { ...capacity, maxEvents: 2 };
        const small = await reopen({ capacity: refusing });
        // The batch's pruning takes events 1-8 (and stays). Six stored, room for two: forgetting event 10 and
        // reclaiming event 9 leaves four unfinished.
        expectEqual(await small.appendBatch([usage(10, "user-10", t0)]), [{ status: "rejected", error: atCapacity(4, refusing) }], "refused in a batch");
        expectEqual((await small.attempts(billing, rid(10))).length, 1, "event 10 is still stored: the refused append changed nothing");
        expectEqual((await small.attempts(billing, rid(9))).length, 1, "and nothing was reclaimed for it");
        expectEqual(await small.attempts(billing, rid(8)), [], "the batch's own pruning stays");
        await expectRejects(() => small.append(usage(10, "user-10", t0)), atCapacity(4, refusing), "refused alone");
        expectEqual((await small.attempts(billing, rid(10))).length, 1, "event 10 is still stored");
      },
    );
  }

  // --------------------------------------------------------- retention

  example(
    "retention prunes only events every registered consumer finished, measured from observedAt",
    { retainAcknowledgedMs: 1000 },
    async ({ journal, time, t0 }) => {
      await journal.append(usage(1, "user-1", t0 - 500));
      await journal.claim(billing, lease(time));
      await journal.claim(warehouse, lease(time));
      await journal.ack(delivery(billing, 1, 1));
      expectEqual(await journal.prune({ now: t0 + 5000 }), { pruned: 0 }, "warehouse has not finished");
      await journal.ack(delivery(warehouse, 1, 1));
      expectEqual(await journal.prune({ now: t0 + 499 }), { pruned: 0 }, "observedAt + window is t0+500");
      expectEqual(await journal.prune({ now: t0 + 500 }), { pruned: 1 }, "pruned at observedAt + window");
      expectEqual(await journal.attempts(billing, rid(1)), [], "forgotten");
    },
  );

  example("prune with a limit forgets the events observed first", { retainAcknowledgedMs: 0 }, async ({ journal, time, t0 }) => {
    await journal.append(usage(1, "user-1", t0 - 10));
    await journal.append(usage(2, "user-2", t0 - 30));
    await journal.append(usage(3, "user-3", t0 - 20));
    for (const d of await journal.claim(billing, lease(time))) await journal.ack(d.id);
    expectEqual(await journal.prune({ now: t0, limit: 1 }), { pruned: 1 }, "one at a time");
    expectEqual(await journal.attempts(billing, rid(2)), [], "event 2 (observed first) is gone");
    expectEqual(await journal.prune({ now: t0, limit: 1 }), { pruned: 1 }, "the next one");
    expectEqual(await journal.attempts(billing, rid(3)), [], "then event 3");
    expectEqual((await journal.attempts(billing, rid(1))).length, 1, "event 1 (observed last) is still there");
  });

  example(
    "appending and claiming prune at most 8 finished events on the way, once per batch",
    { retainAcknowledgedMs: 0 },
    async ({ journal, time, t0 }) => {
      const auditor = parseConsumerId("auditor"); // never claims: its stats show what is stored
      for (let n = 1; n <= 17; n++) await journal.append(usage(n, `user-${n}`, t0 - 100 + n));
      for (const d of await journal.claim(billing, lease(time, 1000, 17))) await journal.ack(d.id);
      expectEqual((await journal.stats(auditor)).pending, 17, "17 finished events stored");
      await journal.appendBatch([usage(18, "user-18", t0), usage(19, "user-19", t0)]);
      expectEqual((await journal.stats(auditor)).pending, 9 + 2, "the batch pruned 8, once");
      await journal.append(usage(20, "user-20", t0));
      expectEqual((await journal.stats(auditor)).pending, 1 + 3, "the append pruned 8 more");
      expectEqual((await journal.attempts(billing, rid(17))).length, 1, "event 17 (observed last) is the one left");
      expectEqual(await journal.attempts(billing, rid(16)), [], "event 16 is gone");
      const handedOut = await journal.claim(billing, lease(time));
      expectEqual((await journal.stats(auditor)).pending, 3, "the claim pruned the last one");
      // A claim, too, prunes exactly 8 when more are due.
      await journal.ackBatch(handedOut.map((d) => d.id));
      await journal.appendBatch(Array.from({ length: 10 }, (_, i) => usage(21 + i, `user-${21 + i}`, t0))); // prunes events 18-20 on the way
      await journal.ackBatch((await journal.claim(billing, lease(time, 1000, 20))).map((d) => d.id));
      expectEqual((await journal.stats(auditor)).pending, 10, "10 finished events stored");
      expectEqual(await journal.claim(billing, lease(time)), [], "nothing left to claim");
      expectEqual((await journal.stats(auditor)).pending, 2, "the claim pruned 8 of the 10");
      expectEqual(await journal.prune({ now: t0 }), { pruned: 2 }, "an explicit prune finds the other 2");
    },
  );

  example("a consumer that registers after an event's window does not bring it back", { retainAcknowledgedMs: 1000 }, async ({ journal, time, t0 }) => {
    await journal.append(usage(1, "user-1", t0));
    await journal.ack(only(await journal.claim(billing, lease(time)), "claim").id);
    time.advance(1000);
    expectEqual(await journal.claim(warehouse, lease(time)), [], "claim prunes before it registers the new consumer");
    expectEqual(await journal.append(usage(1, "user-1", t0)), { status: "accepted", position: 2 }, "event 1 was pruned");
  });

  example(
    "a claim whose now runs ahead of the journal's clock prunes at the clock: an event inside its window by the clock keeps its request id",
    { retainAcknowledgedMs: 1000 },
    async ({ journal, time, t0 }) => {
      await journal.append(usage(1, "user-1", t0));
      await journal.ack(only(await journal.claim(billing, lease(time)), "claim").id);
      // A claimer whose clock is 10 s fast: by its now, event 1's window (t0 + 1000) has passed.
      expectEqual(await journal.claim(billing, { maxEvents: 10, leaseMs: 1000, now: t0 + 10_000 }), [], "nothing to claim");
      expectEqual(await journal.append(usage(1, "user-1", t0)), { status: "already_present", position: 1 }, "a retried append of event 1 is still known");
      time.advance(1000);
      expectEqual(await journal.claim(billing, lease(time)), [], "the clock reached the end of the window: the claim prunes event 1");
      expectEqual(await journal.append(usage(1, "user-1", t0)), { status: "accepted", position: 2 }, "now a new event");
    },
  );

  example("pruning forgets the idempotency key", { retainAcknowledgedMs: 0 }, async ({ journal, time, t0 }) => {
    await journal.append(usage(1, "user-1", t0));
    await journal.ack(only(await journal.claim(billing, lease(time)), "claim").id);
    expectEqual(await journal.prune({ now: t0 }), { pruned: 1 }, "prune");
    expectEqual(await journal.append(usage(1, "user-1", t0)), { status: "accepted", position: 2 }, "the same event is new again");
    expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(1)}#1`], "and delivered again, as attempt 1");
  });

  example("after its window an event's key is forgotten, however far pruning came: the same event is a new event", { retainAcknowledgedMs: 1000 }, async ({ journal, time, t0 }) => {
    // 12 events acked: more than one opportunistic prune (8) takes, and no explicit prune runs.
    for (let n = 1; n <= 12; n++) await journal.append(usage(n, `user-${n}`, t0));
    for (const delivery of await journal.claim(billing, lease(time, 1000, 20))) await journal.ack(delivery.id);
    time.advance(1000);
    expectEqual((await journal.append(usage(12, "user-12", t0))).status, "accepted", "the same event after its window is a new event");
    expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(12)}#1`], "delivered again, as attempt 1");
  });

  example("after its window an event's key is forgotten, however far pruning came: another record under its id is not a conflict", { retainAcknowledgedMs: 1000 }, async ({ journal, time, t0 }) => {
    for (let n = 1; n <= 12; n++) await journal.append(usage(n, `user-${n}`, t0));
    for (const delivery of await journal.claim(billing, lease(time, 1000, 20))) await journal.ack(delivery.id);
    time.advance(1000);
    expectEqual((await journal.append(usage(11, "user-11", t0, { tokens: 1 }))).status, "accepted", "another record under a forgotten id is a new event");
    expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(11)}#1`], "delivered as a new event");
  });

  example(
    "after its window an event's key is forgotten, however far pruning came: its room is free even when the journal is full",
    { maxEvents: 12, retainAcknowledgedMs: 1000 },
    async ({ journal, time, t0 }) => {
      const auditor = parseConsumerId("auditor"); // never claims: its stats show what is stored
      for (let n = 1; n <= 9; n++) await journal.append(usage(n, `user-${n}`, t0));
      for (const delivery of await journal.claim(billing, lease(time, 1000, 20))) await journal.ack(delivery.id);
      time.advance(1000); // events 1-9 are past their window
      // The batch prunes 8 of them (events 1-8) first; event 9 stays stored, past its window.
      const fresh = Array.from({ length: 11 }, (_, i) => usage(10 + i, `user-${10 + i}`, time.now));
      const results = await journal.appendBatch([...fresh, usage(9, "user-9", t0)]);
      expectEqual(
        results.map((result) => result.status),
        Array.from({ length: 12 }, () => "accepted"),
        "11 new events fill the journal to 12 with event 9; event 9 again takes its own room",
      );
      expectEqual((await journal.stats(auditor)).pending, 12, "12 events stored, event 9 once");
    },
  );

  example("a consumer registering after the window gets none of the events due for pruning, however many there are", { retainAcknowledgedMs: 1000 }, async ({ journal, time, t0 }) => {
    for (let n = 1; n <= 12; n++) await journal.append(usage(n, `user-${n}`, t0));
    for (const delivery of await journal.claim(billing, lease(time, 1000, 20))) await journal.ack(delivery.id);
    await journal.append(usage(13, "user-13", t0 + 5000)); // still inside its window
    time.advance(1000);
    expectEqual(handed(await journal.claim(warehouse, lease(time, 1000, 20))), [`${rid(13)}#1`], "only the event inside its window");
    expectEqual((await journal.stats(warehouse)).pending, 0, "nothing else in its backlog");
  });

  example("an event no consumer has registered for is not prunable", { retainAcknowledgedMs: 0 }, async ({ journal, time, t0, capacity }) => {
    await journal.append(usage(1, "user-1", t0 - 10_000));
    time.advance(100_000);
    expectEqual(await journal.prune({ now: time.now }), { pruned: 0 }, "no consumer registered");
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 1, inFlight: 0, quarantined: 0, oldestPendingAgeMs: 110_000 }), "still stored");
    expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(1)}#1`], "the first consumer gets it");
  });

  example("quarantined events are never pruned", { retainAcknowledgedMs: 0 }, async ({ journal, time, t0 }) => {
    await journal.append(usage(1, "user-1", t0));
    await journal.claim(billing, lease(time));
    await journal.claim(warehouse, lease(time));
    await journal.quarantine(delivery(billing, 1, 1), "rejected");
    await journal.ack(delivery(warehouse, 1, 1));
    time.advance(10 * DAY_MS);
    expectEqual(await journal.prune({ now: time.now }), { pruned: 0 }, "quarantined by billing");
    await journal.append(usage(2, "user-2", time.now));
    expectEqual(
      (await journal.listQuarantined(billing)).items.map((item) => item.event.id),
      [rid(1)],
      "still there after an append's own pruning",
    );
  });

  example("a new consumer sees the whole retained backlog as its own depth", { retainAcknowledgedMs: DAY_MS }, async ({ journal, time, t0, capacity }) => {
    for (const n of [1, 2, 3]) await journal.append(usage(n, `user-${n}`, t0 - n));
    for (const d of await journal.claim(billing, lease(time))) await journal.ack(d.id);
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 0, inFlight: 0, quarantined: 0, oldestPendingAgeMs: null }), "billing is done");
    expectEqual(await journal.stats(warehouse), stats(capacity, { pending: 3, inFlight: 0, quarantined: 0, oldestPendingAgeMs: 3 }), "warehouse sees three, the earliest observed 3 ms ago");
    expectEqual(handed(await journal.claim(warehouse, lease(time))), [`${rid(1)}#1`, `${rid(2)}#1`, `${rid(3)}#1`], "and gets all three");
    expectEqual(await journal.prune({ now: t0 + 2 * DAY_MS }), { pruned: 0 }, "warehouse holds retention open");
  });

  example("stats report pending, in flight, quarantined, oldest pending age and dropped", { maxEvents: 10 }, async ({ journal, time, t0, capacity }) => {
    await journal.append(usage(1, "alpha", t0 - 100));
    await journal.append(usage(2, "alpha", t0 - 50));
    await journal.append(usage(3, "beta", t0 - 20));
    await journal.append(usage(4, "gamma", t0 - 10));
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 4, inFlight: 0, quarantined: 0, oldestPendingAgeMs: 100 }), "before any claim");
    expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(1)}#1`, `${rid(3)}#1`, `${rid(4)}#1`], "claim");
    await journal.quarantine(delivery(billing, 4, 1), "malformed");
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 1, inFlight: 2, quarantined: 1, oldestPendingAgeMs: 50 }), "after the claim");
    time.advance(10);
    expectEqual((await journal.stats(billing)).oldestPendingAgeMs, 60, "the age grows with the clock");
    time.advance(1000);
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 3, inFlight: 0, quarantined: 1, oldestPendingAgeMs: 1110 }), "after the leases ran out");
  });

  example("the oldest pending age is that of the event observed earliest: a late replay counts from when it happened", {}, async ({ journal, time, t0, capacity }) => {
    await journal.append(usage(1, "alpha", t0 - 1_000));
    await journal.append(usage(2, "beta", t0 - 2 * DAY_MS)); // replayed two days late, appended after event 1
    await journal.append(usage(3, "gamma", t0 - 10));
    expectEqual((await journal.stats(billing)).oldestPendingAgeMs, 2 * DAY_MS, "not registered: the replay is the oldest stored event");
    const first = await journal.claim(billing, lease(time, 100, 1));
    expectEqual(handed(first), [`${rid(1)}#1`], "claims go by position");
    expectEqual((await journal.stats(billing)).oldestPendingAgeMs, 2 * DAY_MS, "the replay is still pending, and the oldest");
    const replay = await journal.claim(billing, lease(time, 100, 1));
    expectEqual(handed(replay), [`${rid(2)}#1`], "the replay is claimed next");
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 1, inFlight: 2, quarantined: 0, oldestPendingAgeMs: 10 }), "in flight does not count as pending");
    await journal.ack(replay[0]!.id);
    time.advance(200); // event 1's lease ran out: pending again
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 2, inFlight: 0, quarantined: 0, oldestPendingAgeMs: 1_200 }), "acked ones leave; expired leases are pending again");
    const again = await journal.claim(billing, lease(time, 100, 10));
    expectEqual(handed(again), [`${rid(1)}#2`, `${rid(3)}#1`], "both claimed");
    await journal.quarantine(again[0]!.id, "malformed");
    expectEqual((await journal.stats(billing)).oldestPendingAgeMs, null, "quarantined and in flight: nothing pending");
    await journal.release(billing, rid(1), { now: time.now });
    expectEqual((await journal.stats(billing)).oldestPendingAgeMs, 1_200, "released, it is pending again with its own age");
  });

  // -------------------------------------------------------------- input

  example("appendBatch is per-event: a bad event is rejected, the rest accepted", { maxEvents: 3 }, async ({ journal, time, t0, capacity }) => {
    const bad = {
      id: "not-a-uuid",
      orderingKey: { namespace: "acme", subject: "user-9" },
      record: { requestId: "not-a-uuid", namespace: "acme", subject: "user-9", data: { tokens: 1 } },
      observedAt: t0,
    };
    expectEqual(
      await journal.appendBatch([
        usage(1, "user-1", t0),
        bad,
        usage(2, "user-2", t0),
        usage(1, "user-1", t0, { tokens: 999 }),
        usage(3, "user-3", t0),
        usage(4, "user-4", t0),
      ]),
      [
        { status: "accepted", position: 1 },
        { status: "rejected", error: invalidEvent("not-a-uuid", "request_id") },
        { status: "accepted", position: 2 },
        { status: "rejected", error: conflict(rid(1)) },
        { status: "accepted", position: 3 },
        { status: "rejected", error: atCapacity(3, capacity) },
      ],
      "one result per event",
    );
    expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(1)}#1`, `${rid(2)}#1`, `${rid(3)}#1`], "the accepted ones are delivered");
    expectEqual(await journal.appendBatch([]), [], "an empty batch");
    await expectRejects(() => journal.appendBatch("nope" as unknown as UsageEvent[]), invalidArgument("events"), "not an array");
    const tooMany = Array.from({ length: 1001 }, (_, index) => usage(100 + index, "user-1", t0));
    await expectRejects(() => journal.appendBatch(tooMany), invalidArgument("events"), "over 1000 events");
  });

  example("bad input gets a typed error and changes nothing", { retainAcknowledgedMs: 0 }, async ({ journal, time, t0, capacity }) => {
    await journal.append(usage(1, "user-1", t0));
    const d = only(await journal.claim(billing, lease(time)), "claim").id;
    await journal.ack(d);
    const before = await journal.stats(billing);

    const consumer = (name: string) => name as ConsumerId;
    const long = "c".repeat(64);
    await expectRejects(() => journal.claim(consumer(""), lease(time)), invalidConsumer("", "empty"), "claim by an empty name");
    await expectRejects(() => journal.claim(consumer(long), lease(time)), invalidConsumer(long, "too_long"), "claim by a 64-character name");
    // The limit is 63 bytes of UTF-8, checked before the characters: 32 `é` are 64 bytes.
    const wide = "é".repeat(32);
    await expectRejects(() => journal.claim(consumer(wide), lease(time)), invalidConsumer(wide, "too_long"), "claim by 32 `é` (64 bytes)");
    const narrower = "é".repeat(31);
    await expectRejects(() => journal.stats(consumer(narrower)), invalidConsumer(narrower, "character", "é"), "stats by 31 `é` (62 bytes)");
    await expectRejects(() => journal.claim(consumer("Billing"), lease(time)), invalidConsumer("Billing", "character", "B"), "claim by an uppercase name");
    await expectRejects(() => journal.stats(consumer("billing team")), invalidConsumer("billing team", "character", " "), "stats by a name with a space");
    await expectRejects(() => journal.stats(consumer("bill😀ing")), invalidConsumer("bill😀ing", "character", "😀"), "stats by a name with an emoji (one character)");
    await expectRejects(() => journal.ack({ ...d, consumer: consumer("Billing") }), invalidConsumer("Billing", "character", "B"), "ack by an uppercase name");
    // 63 bytes is within the limit (stats does not register the consumer).
    expectEqual((await journal.stats(consumer("c".repeat(63)))).pending, 1, "stats by a 63-character name");

    const raw = (requestId: string, patch: Record<string, unknown> = {}, record: Record<string, unknown> = {}) =>
      ({
        id: requestId,
        orderingKey: { namespace: "acme", subject: "user-1" },
        record: { requestId, namespace: "acme", subject: "user-1", data: { tokens: 1 }, ...record },
        observedAt: t0,
        ...patch,
      }) as unknown as UsageEvent;
    const upper = rid(7).toUpperCase();
    const v4 = "0190b000-0000-4000-8000-000000000007";
    await expectRejects(() => journal.append(raw(upper)), invalidEvent(upper, "request_id"), "an uppercase id");
    await expectRejects(() => journal.append(raw(v4)), invalidEvent(v4, "request_id"), "a UUIDv4 id");
    await expectRejects(() => journal.append(raw(rid(7), { id: rid(8) })), invalidEvent(rid(8), "request_id"), "an id that is not the record's");
    await expectRejects(() => journal.append(raw(rid(7), {}, { data: { tokens: Number.NaN } })), invalidEvent(rid(7), "data"), "NaN in data");
    await expectRejects(() => journal.append(raw(rid(7), {}, { data: { when: new Date(0) } })), invalidEvent(rid(7), "data"), "a Date in data");
    await expectRejects(() => journal.append(raw(rid(7), {}, { data: undefined })), invalidEvent(rid(7), "data"), "no data");
    await expectRejects(() => journal.append(raw(rid(7), {}, { subject: "" })), invalidEvent(rid(7), "subject"), "an empty subject");
    // A lone surrogate cannot cross a URL or UTF-8 text intact: such a key could not be told from another one.
    await expectRejects(() => journal.append(raw(rid(7), {}, { namespace: "acme\ud800" })), invalidEvent(rid(7), "namespace"), "a lone high surrogate in the namespace");
    await expectRejects(() => journal.append(raw(rid(7), {}, { subject: "\udc00user" })), invalidEvent(rid(7), "subject"), "a lone low surrogate in the subject");
    await expectRejects(() => journal.append(raw(rid(7), { observedAt: -1 })), invalidEvent(rid(7), "observed_at"), "a negative observedAt");

    await expectRejects(() => journal.claim(warehouse, { maxEvents: 0, leaseMs: 1000, now: t0 }), invalidArgument("maxEvents"), "maxEvents 0");
    await expectRejects(() => journal.claim(warehouse, { maxEvents: 10_001, leaseMs: 1000, now: t0 }), invalidArgument("maxEvents"), "maxEvents 10001");
    await expectRejects(() => journal.claim(warehouse, { maxEvents: 1.5, leaseMs: 1000, now: t0 }), invalidArgument("maxEvents"), "maxEvents 1.5");
    await expectRejects(() => journal.claim(warehouse, { maxEvents: 1, leaseMs: 0, now: t0 }), invalidArgument("leaseMs"), "leaseMs 0");
    await expectRejects(() => journal.claim(warehouse, { maxEvents: 1, leaseMs: 43_200_001, now: t0 }), invalidArgument("leaseMs"), "leaseMs over 12 h");
    await expectRejects(() => journal.claim(warehouse, { maxEvents: 1, leaseMs: 1000, now: -1 }), invalidArgument("now"), "now -1");

    await expectRejects(() => journal.ack({ ...d, attempt: 0 }), invalidArgument("delivery.attempt"), "attempt 0");
    await expectRejects(() => journal.ack({ ...d, event: "nope" }), invalidArgument("delivery.event"), "an event that is not a request id");
    await expectRejects(() => journal.quarantine(d, "bogus" as "malformed"), invalidArgument("reason"), "an unknown reason");
    await expectRejects(() => journal.extend(d, { leaseMs: 0, now: t0 }), invalidArgument("leaseMs"), "extend by 0 ms");
    await expectRejects(() => journal.nack(d, { retryAfterMs: -1, error: "x", now: t0 }), invalidArgument("retryAfterMs"), "a negative retryAfterMs");
    await expectRejects(() => journal.nack(d, { retryAfterMs: 0, error: "x".repeat(2001), now: t0 }), invalidArgument("error"), "an error over 2000 characters");
    await expectRejects(() => journal.release(billing, "nope", { now: t0 }), invalidArgument("requestId"), "release of a bad request id");
    await expectRejects(() => journal.attempts(billing, upper), invalidArgument("requestId"), "attempts of a bad request id");
    await expectRejects(() => journal.discard(billing, rid(1), { now: t0, actor: "a".repeat(201) }), invalidArgument("actor"), "an actor over 200 characters");
    await expectRejects(() => journal.listQuarantined(billing, { limit: 0 }), invalidArgument("limit"), "listQuarantined limit 0");
    await expectRejects(() => journal.listQuarantined(billing, { limit: 1001 }), invalidArgument("limit"), "listQuarantined limit 1001");
    await expectRejects(() => journal.listQuarantined(billing, { query: "q".repeat(201) }), invalidArgument("query"), "a query over 200 characters");
    await expectRejects(() => journal.listAudit({ limit: 0 }), invalidArgument("limit"), "listAudit limit 0");
    await expectRejects(() => journal.prune({ now: -1 }), invalidArgument("now"), "prune now -1");
    await expectRejects(() => journal.prune({ now: t0, limit: 0 }), invalidArgument("limit"), "prune limit 0");

    expectEqual(await journal.stats(billing), before, "billing's stats are unchanged");
    // Had a refused claim registered warehouse, or a refused call pruned, this would not be 1.
    expectEqual(await journal.prune({ now: t0 }), { pruned: 1 }, "nothing was registered or pruned by a refused call");
    expectEqual(await journal.stats(billing), stats(capacity, { pending: 0, inFlight: 0, quarantined: 0, oldestPendingAgeMs: null }), "pruned");
    expectEqual(await journal.claim(billing, { maxEvents: 10_000, leaseMs: 1000, now: t0 }), [], "maxEvents 10000, the largest, is accepted");
  });

  example(
    "times are epoch ms a Date holds, 0 to 8.64e15: a later observedAt or now is refused like any bad value, and at the bound now + the longest lease is exact",
    {},
    async ({ journal, t0 }) => {
      const LAST = 8_640_000_000_000_000; // new Date(8.64e15) is the last valid Date
      const LONGEST = 43_200_000;
      const raw = (requestId: string, observedAt: number) =>
        ({ id: requestId, orderingKey: { namespace: "acme", subject: "user-1" }, record: { requestId, namespace: "acme", subject: "user-1", data: { tokens: 1 } }, observedAt }) as UsageEvent;
      for (const late of [LAST + 1, Number.MAX_SAFE_INTEGER]) {
        await expectRejects(() => journal.append(raw(rid(1), late)), invalidEvent(rid(1), "observed_at"), `observedAt ${late}`);
        expectEqual(await journal.appendBatch([raw(rid(1), late)]), [{ status: "rejected", error: invalidEvent(rid(1), "observed_at") }], `a batch's observedAt ${late}`);
      }
      expectEqual(await journal.append(usage(2, "user-2", LAST)), { status: "accepted", position: 1 }, "observedAt at the bound");
      for (const late of [LAST + 1, Number.MAX_SAFE_INTEGER]) {
        await expectRejects(() => journal.claim(billing, { maxEvents: 1, leaseMs: 1, now: late }), invalidArgument("now"), `claim now ${late}`);
      }
      const d = only(await journal.claim(billing, { maxEvents: 1, leaseMs: LONGEST, now: LAST }), "claim at the bound");
      expectEqual(d.leaseExpiresAt, LAST + LONGEST, "the lease of a claim at the bound");
      await expectRejects(() => journal.extend(d.id, { leaseMs: 1, now: LAST + 1 }), invalidArgument("now"), "extend now past the bound");
      await expectRejects(() => journal.nack(d.id, { retryAfterMs: 0, error: "x", now: LAST + 1 }), invalidArgument("now"), "nack now past the bound");
      await expectRejects(() => journal.release(billing, rid(2), { now: LAST + 1 }), invalidArgument("now"), "release now past the bound");
      await expectRejects(() => journal.discard(billing, rid(2), { now: LAST + 1 }), invalidArgument("now"), "discard now past the bound");
      await expectRejects(() => journal.prune({ now: LAST + 1 }), invalidArgument("now"), "prune now past the bound");
      expectEqual(await journal.extend(d.id, { leaseMs: LONGEST, now: LAST }), { leaseExpiresAt: LAST + LONGEST }, "extend at the bound");
      expectEqual(
        await journal.attempts(billing, rid(2)),
        [{ attempt: 1, claimedAt: LAST, leaseExpiresAt: LAST + LONGEST, outcome: null }],
        "nothing refused changed anything",
      );
      expectEqual(await journal.prune({ now: t0 }), { pruned: 0 }, "nothing to prune");
    },
  );

  // ------------------------------------------------------------ restart

  if (options.canReopen === true) {
    example("a new journal over the same storage continues where the old one stopped", {}, async ({ journal, time, t0, subject, capacity }) => {
      if (subject.reopen === undefined) throw new Error("canReopen is set but the subject has no reopen()");
      await journal.append(usage(1, "alpha", t0));
      await journal.append(usage(2, "alpha", t0));
      await journal.append(usage(3, "beta", t0));
      expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(1)}#1`, `${rid(3)}#1`], "claim before the restart");
      await journal.ack(delivery(billing, 1, 1));
      await journal.quarantine(delivery(billing, 3, 1), "malformed");
      expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(2)}#1`], "event 2 leased before the restart");

      const reopened = await subject.reopen();
      expectEqual({ name: reopened.name, mode: reopened.mode, capacity: reopened.capacity }, { name: journal.name, mode: journal.mode, capacity }, "same identity");
      expectEqual(await reopened.stats(billing), stats(capacity, { pending: 0, inFlight: 1, quarantined: 1, oldestPendingAgeMs: null }), "stats survive");
      expectEqual(await reopened.claim(billing, lease(time)), [], "the lease on event 2 survives");
      expectEqual(await reopened.append(usage(1, "alpha", t0)), { status: "already_present", position: 1 }, "idempotency survives");
      expectEqual(await reopened.append(usage(4, "gamma", t0)), { status: "accepted", position: 4 }, "positions continue");
      await reopened.ack(delivery(billing, 1, 1));
      expectEqual(
        (await reopened.listQuarantined(billing)).items.map((item) => item.event.id),
        [rid(3)],
        "the quarantine survives",
      );
      time.advance(1000);
      expectEqual(handed(await reopened.claim(billing, lease(time))), [`${rid(2)}#2`, `${rid(4)}#1`], "the expired lease is redelivered as attempt 2");
    });
  }

  example("what a journal hands out is the caller's: changing attempts, quarantine items or audit entries changes nothing stored", {}, async ({ journal, time, t0 }) => {
    await journal.appendBatch([usage(1, "user-1", t0), usage(2, "user-1", t0), usage(3, "user-2", t0)]);
    const [first, third] = await journal.claim(billing, lease(time));
    const scribble = (attempts: readonly Attempt[]) => {
      for (const attempt of attempts as Attempt[]) {
        Object.assign(attempt, { attempt: 99, claimedAt: 0, leaseExpiresAt: 0 });
        if (attempt.outcome) Object.assign(attempt.outcome, { kind: "acked", at: 0 });
        else Object.assign(attempt, { outcome: { kind: "acked", at: 0 } });
      }
    };
    scribble(await journal.attempts(billing, rid(1)));
    const running = [{ attempt: 1, claimedAt: t0, leaseExpiresAt: t0 + 1000, outcome: null }];
    expectEqual(await journal.attempts(billing, rid(1)), running, "the running attempt, after its copy was changed");
    expectEqual(await journal.extend(only([first!], "claim").id, { leaseMs: 1000, now: t0 }), { leaseExpiresAt: t0 + 1000 }, "the lease still runs: extend");
    await journal.ack(first!.id);
    await journal.quarantine(third!.id, "malformed");
    const item = only((await journal.listQuarantined(billing)).items, "quarantine listing");
    scribble(item.attempts);
    await journal.release(billing, rid(3), { now: t0, actor: "ops" });
    const entry = only((await journal.listAudit()).items, "audit log");
    Object.assign(entry, { actor: "mallory", action: "discard" });
    Object.assign(only((await journal.listAudit({ requestId: rid(3) })).items, "audit of event 3"), { actor: "mallory" });
    expectEqual(
      (await journal.listAudit()).items.map((audit) => [audit.action, audit.actor]),
      [["release", "ops"]],
      "the audit log, after its copies were changed",
    );
    expectEqual(handed(await journal.claim(billing, lease(time))), [`${rid(2)}#1`, `${rid(3)}#2`], "event 2 follows the ack; event 3 comes back");
  });

  example("BILLING_GRADE is the spec's default: 1,000,000 events, 8 attempts, 24 h retention, refuse", BILLING_GRADE, async ({ journal }) => {
    const spec = { maxEvents: 1_000_000, maxDeliveryAttempts: 8, retainAcknowledgedMs: 86_400_000, policy: "refuse" };
    expectEqual(BILLING_GRADE, spec, "the constant (Capacity::BILLING_GRADE: 1_000_000, 8, 24 * 60 * 60 s, Refuse)");
    expectEqual(journal.capacity, spec, "a journal opened with it reports it");
    expectEqual((await journal.stats(billing)).capacity, spec, "and so do its stats");
  });

  example("mode is billing_grade only for durable storage", {}, async ({ journal, capacity }) => {
    expectEqual(journal.mode, options.durable ? "billing_grade" : "telemetry_grade", "mode");
    expectEqual(journal.name, JOURNAL_NAME, "name");
    expectEqual(journal.capacity, capacity, "capacity");
  });

  return cases;
}
