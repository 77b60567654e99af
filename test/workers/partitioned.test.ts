/**
 * What a partitioned journal promises beyond the conformance suite, over
 * real `JournalPartition` objects: P is fixed at creation, a key has one
 * writer, per-key order and one in flight per key hold under concurrent
 * claimers across partitions, deliveries route without a hint, merged reads
 * page across partitions, capacity is per partition, a small claim still
 * reaches every partition (also from per-request instances), a merged
 * listing asks each partition for a share of its page, a claim's
 * `maxBytes` is split over the partitions (within it but for one delivery
 * per partition, nothing past the answer leased), a claiming
 * consumer is registered everywhere before anything is leased, platform
 * failures are typed, deliveries route past a failing partition and past an
 * evicted hint, an append does not wait on other ids' verification, registry
 * revisions are never reused and prunes rotate their start.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { DurableObjectEngineError, PartitionedJournal, PartitionedJournalMemory, type PartitionedJournalOptions, type PartitionNamespace } from "../../adapters/durable-objects/index.js";
import { ID_SETTLE_MS } from "../../adapters/durable-objects/partition.js";
import { BackendError, createUsageEvent, deliveryBytes, parseConsumerId, type Capacity, type Delivery, type JsonValue, type UsageEvent } from "../../src/index.js";
import { virtualClock } from "../../src/testing/index.js";
import { waitOutMarks } from "../../src/cause-chain.js";

const T0 = 1_700_000_000_000;
const billing = parseConsumerId("billing");
const warehouse = parseConsumerId("warehouse");
const ROOMY: Capacity = { maxEvents: 1000, maxDeliveryAttempts: 5, retainAcknowledgedMs: 60_000, policy: "refuse" };
let scopes = 0;

function rid(n: number): string {
  return `0190c000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`;
}

function usage(n: number, subject: string, observedAt = T0, data: JsonValue = { units: n }): UsageEvent {
  return createUsageEvent({ record: { requestId: rid(n), namespace: "acme", subject, data }, observedAt });
}

/** Matches an `EventConflictError` (for `key` when given). */
function conflictOf(key?: string): unknown {
  return expect.objectContaining(key === undefined ? { name: "EventConflictError", code: "conflict" } : { name: "EventConflictError", code: "conflict", key });
}

/** Matches a retryable `BackendError`. */
function retryableBackendError(): unknown {
  return expect.objectContaining({ name: "BackendError", code: "backend", retryable: true });
}

/** Partition `p` of `journal` as a raw stub, with the config a PartitionedJournal sends it. */
function partitionStub(journal: PartitionedJournal, p: number, capacity: Capacity = ROOMY) {
  const stub = env.PARTITIONS.get(env.PARTITIONS.idFromName(journal.objectName(p)));
  return { stub, config: { journal: journal.name, partitions: journal.partitions, partition: p, capacity } };
}

/** What every partition stores, as a consumer that never claims sees it (pending = stored events), plus its audit log. */
async function perPartition(journal: PartitionedJournal, now: number): Promise<unknown[]> {
  const auditor = parseConsumerId("auditor");
  return Promise.all(
    Array.from({ length: journal.partitions }, async (_, p) => {
      const { stub, config } = partitionStub(journal, p);
      return [await stub.stats(config, now, auditor), await stub.stats(config, now, billing)];
    }),
  );
}

/**
 * A journal on fresh objects, and a way to open more instances (other workers)
 * over the same ones: with another P, through another namespace, or with more options.
 */
function fresh(partitions: number, capacity: Capacity = ROOMY, clock: () => number = () => T0) {
  const scope = `partitioned-${scopes++}/`;
  const open = (p = partitions, namespace: PartitionNamespace = env.PARTITIONS, more: Partial<PartitionedJournalOptions> = {}) =>
    new PartitionedJournal(namespace, { name: "usage", partitions: p, capacity, clock, scope, ...more });
  return { journal: open(), open };
}

/**
 * The PARTITIONS namespace, with `before` told of every RPC (method, partition
 * object name, arguments) before it is sent; what `before` throws (or its
 * promise rejects with) fails that call, as a platform failure would, and a
 * promise it returns delays the call.
 */
/** `before` may return a promise, which the call waits for (a slow partition); any other value is ignored. */
function intercepted(before: (method: string, object: string, args: readonly unknown[]) => unknown): PartitionNamespace {
  return {
    idFromName: (name: string) => ({ name, id: env.PARTITIONS.idFromName(name) }),
    get: (handle: never) => {
      const { name, id } = handle as { name: string; id: DurableObjectId };
      const stub = env.PARTITIONS.get(id) as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
      return new Proxy(
        {},
        {
          get:
            (_, method: string) =>
            async (...args: unknown[]) => {
              await before(method, name, args);
              return stub[method]!(...args);
            },
        },
      );
    },
  };
}

/** What an overloaded object throws at its caller. */
function overloaded(): Error {
  return Object.assign(new Error("Durable Object is overloaded."), { retryable: true });
}

/** Subjects that hash to each partition (the first `perPartition` found for each). */
function subjectsByPartition(journal: PartitionedJournal, perPartition: number): string[][] {
  const found: string[][] = Array.from({ length: journal.partitions }, () => []);
  for (let i = 0; found.some((list) => list.length < perPartition); i++) {
    const subject = `user-${i}`;
    const list = found[journal.partitionOf("acme", subject)]!;
    if (list.length < perPartition) list.push(subject);
  }
  return found;
}

/**
 * How many items each merged listing page asks the partitions for: the
 * `limit` of every `listQuarantined` / `listAudit` call, per partition
 * object, in call order; `page()` starts the record of the next page.
 */
function listingAsks() {
  const pages: Map<string, number[]>[] = [];
  const namespace = intercepted((method, object, args) => {
    if (method !== "listQuarantined" && method !== "listAudit") return;
    const options = args[method === "listQuarantined" ? 3 : 2] as { limit: number };
    const page = pages[pages.length - 1]!;
    page.set(object, [...(page.get(object) ?? []), options.limit]);
  });
  return {
    namespace,
    pages,
    page: () => pages.push(new Map()),
    /** What the last page asked for in all. */
    total: () => [...pages[pages.length - 1]!.values()].flat().reduce((sum, limit) => sum + limit, 0),
  };
}

/** Append `events` (in order), claim them all for billing and quarantine them one by one, the clock advancing 1 ms before each. */
async function quarantineAll(journal: PartitionedJournal, events: readonly UsageEvent[], time: { advance(ms: number): void; readonly now: number }): Promise<void> {
  for (let i = 0; i < events.length; i += 100) await journal.appendBatch(events.slice(i, i + 100));
  const deliveries = await journal.claim(billing, { maxEvents: 1000, leaseMs: 600_000, now: time.now });
  const wanted = new Set(events.map((event) => event.id));
  const mine = deliveries.filter((delivery) => wanted.has(delivery.id.event));
  expect(mine).toHaveLength(events.length);
  for (const delivery of mine) {
    time.advance(1);
    await journal.quarantine(delivery.id, "malformed");
  }
}

describe("partitioned journal", () => {
  it("refuses to open a journal with a partition count other than the one it was created with", async () => {
    const { journal, open } = fresh(4);
    await journal.append(usage(1, "user-1"));
    for (const other of [2, 8]) {
      await expect(open(other).append(usage(2, "user-2"))).rejects.toMatchObject({ code: "invalid_argument", argument: "partitions" });
    }
    expect(await open(4).append(usage(2, "user-2"))).toMatchObject({ status: "accepted" });
  });

  it("gives each partition the spec's default capacity (BILLING_GRADE) when none is given, and reports it in stats", async () => {
    const journal = new PartitionedJournal(env.PARTITIONS, { name: "usage", partitions: 2, clock: () => T0, scope: `partitioned-${scopes++}/` });
    const expected = { maxEvents: 1_000_000, maxDeliveryAttempts: 8, retainAcknowledgedMs: 86_400_000, policy: "refuse" };
    expect(journal.capacity).toEqual(expected);
    await journal.append(usage(1, "user-1"));
    expect((await journal.stats(parseConsumerId("billing"))).capacity).toEqual(expected);
  });

  it("stores every event in the partition its ordering key hashes to", async () => {
    const { journal } = fresh(4);
    const subjects = Array.from({ length: 24 }, (_, i) => `user-${i}`);
    await journal.appendBatch(subjects.map((subject, i) => usage(i + 1, subject)));
    const perPartition = [0, 0, 0, 0];
    for (const subject of subjects) perPartition[journal.partitionOf("acme", subject)]! += 1;
    for (let p = 0; p < 4; p++) {
      const stub = env.PARTITIONS.get(env.PARTITIONS.idFromName(journal.objectName(p)));
      const config = { journal: "usage", partitions: 4, partition: p, capacity: ROOMY };
      const stats = await stub.stats(config, T0, billing);
      expect(stats).toMatchObject({ ok: true, value: { pending: perPartition[p] } });
    }
    expect((await journal.stats(billing)).pending).toBe(24);
  });

  it("keeps per-key order and one event in flight per key under 4 concurrent claimers, and loses nothing", async () => {
    const { journal, open } = fresh(4);
    const keys = subjectsByPartition(journal, 2).flat(); // 8 keys, 2 per partition
    const events = Array.from({ length: 64 }, (_, i) => usage(i + 1, keys[i % keys.length]!, T0 + i));
    for (let i = 0; i < events.length; i += 16) await journal.appendBatch(events.slice(i, i + 16));
    const inFlight = new Set<string>();
    const delivered = new Map<string, string[]>();
    const acked = new Set<string>();
    const claimer = async (worker: PartitionedJournal): Promise<void> => {
      for (let idle = 0; idle < 3 && acked.size < events.length; ) {
        const deliveries = await worker.claim(billing, { maxEvents: 3, leaseMs: 600_000, now: T0 });
        if (deliveries.length === 0) {
          idle++;
          await new Promise((resolve) => setTimeout(resolve, 5));
          continue;
        }
        idle = 0;
        for (const delivery of deliveries) {
          const key = delivery.event.orderingKey.subject;
          expect(inFlight.has(key), `two events of ${key} in flight at once`).toBe(false);
          inFlight.add(key);
          delivered.set(key, [...(delivered.get(key) ?? []), delivery.event.id]);
        }
        for (const delivery of deliveries) {
          inFlight.delete(delivery.event.orderingKey.subject); // before the ack: the journal may hand the next one once it commits
          await worker.ack(delivery.id);
          expect(acked.has(delivery.event.id)).toBe(false);
          acked.add(delivery.event.id);
        }
      }
    };
    await Promise.all([journal, open(), open(), open()].map(claimer));
    expect(acked.size).toBe(events.length);
    for (const key of keys) {
      expect(delivered.get(key)).toEqual(events.filter((event) => event.orderingKey.subject === key).map((event) => event.id));
    }
    expect(await journal.stats(billing)).toMatchObject({ pending: 0, inFlight: 0, quarantined: 0 });
  });

  it("routes ack, nack, extend, attempts and operator actions from an instance that never saw the event", async () => {
    const { journal, open } = fresh(4);
    const [a, b] = subjectsByPartition(journal, 1).slice(1, 3).flat();
    await journal.append(usage(1, a!));
    await journal.append(usage(2, b!));
    const deliveries = await journal.claim(billing, { maxEvents: 10, leaseMs: 1000, now: T0 });
    expect(deliveries.map((d) => d.id.event).sort()).toEqual([rid(1), rid(2)]);
    const other = open();
    const first = deliveries.find((d) => d.id.event === rid(1))!.id;
    const second = deliveries.find((d) => d.id.event === rid(2))!.id;
    expect(await other.extend(first, { leaseMs: 5000, now: T0 })).toEqual({ leaseExpiresAt: T0 + 5000 });
    await other.ack(first);
    await open().quarantine(second, "rejected");
    expect((await open().attempts(billing, rid(1)))[0]?.outcome).toMatchObject({ kind: "acked" });
    await open().release(billing, rid(2), { now: T0, actor: "ops" });
    expect((await open().listAudit()).items).toMatchObject([{ action: "release", requestId: rid(2), actor: "ops" }]);
    const stray = { consumer: billing, event: rid(99), attempt: 1 };
    await expect(open().ack(stray)).rejects.toMatchObject({ code: "not_outstanding", delivery: stray });
    await expect(open().discard(billing, rid(99), { now: T0 })).rejects.toMatchObject({ code: "not_quarantined" });
    expect(await open().attempts(billing, rid(99))).toEqual([]);
  });

  it("merges stats and pages listQuarantined across partitions", async () => {
    const { journal } = fresh(4);
    const subjects = subjectsByPartition(journal, 2).flat();
    await journal.appendBatch(subjects.map((subject, i) => usage(i + 1, subject, T0 - i)));
    const deliveries = await journal.claim(billing, { maxEvents: 100, leaseMs: 1000, now: T0 });
    expect(deliveries.length).toBe(8);
    for (const delivery of deliveries.slice(0, 5)) await journal.quarantine(delivery.id, "malformed");
    expect(await journal.stats(billing)).toMatchObject({ pending: 0, inFlight: 3, quarantined: 5, oldestPendingAgeMs: null });
    const seen: string[] = [];
    let after: string | null = null;
    let pages = 0;
    do {
      const page = await journal.listQuarantined(billing, { limit: 2, after });
      seen.push(...page.items.map((item) => item.event.id));
      after = page.nextCursor;
      pages++;
    } while (after !== null && pages < 10);
    expect(seen.sort()).toEqual(deliveries.slice(0, 5).map((d) => d.id.event).sort());
    expect(pages).toBe(3);
    const one = deliveries[0]!.event;
    const found = await journal.listQuarantined(billing, { query: `acme/${one.orderingKey.subject}` });
    expect(found.items.map((item) => item.event.id)).toEqual([one.id]);
    await expect(journal.listQuarantined(billing, { after: "q1.3" })).rejects.toMatchObject({ code: "invalid_argument", argument: "after" });
  });

  it("P>1: a bad argument of a call on a delivery or an operator action is refused as the core refuses it (not as not_outstanding), and as a rejection", async () => {
    const { journal } = fresh(4);
    const unknown = { consumer: billing, event: rid(999), attempt: 1 };
    const refused = (call: () => Promise<unknown>, argument: string) => expect(call()).rejects.toMatchObject({ code: "invalid_argument", argument });
    await refused(() => journal.nack(unknown, { retryAfterMs: -1, error: "x", now: T0 }), "retryAfterMs");
    await refused(() => journal.nack(unknown, { retryAfterMs: 0, error: "x".repeat(5000), now: T0 }), "error");
    await refused(() => journal.nack(unknown, null as never), "options");
    await refused(() => journal.extend(unknown, { leaseMs: 0, now: T0 }), "leaseMs");
    await refused(() => journal.quarantine(unknown, "bogus" as never), "reason");
    // Refusals before any partition is asked are rejections too, never throws from the call itself.
    const bad = { consumer: "Bad Consumer", event: rid(999), attempt: 1 } as never;
    for (const call of [() => journal.ack(bad), () => journal.quarantine(bad, "malformed"), () => journal.release("Bad Consumer" as never, rid(999), { now: T0 }), () => journal.discard(billing, "not-an-id", { now: T0 })]) {
      let promise: Promise<unknown> | undefined;
      expect(() => (promise = call())).not.toThrow();
      await expect(promise).rejects.toBeInstanceOf(Error);
    }
    // The same calls on an unknown event with good arguments: not outstanding.
    await expect(journal.nack(unknown, { retryAfterMs: 0, error: "x", now: T0 })).rejects.toMatchObject({ code: "not_outstanding" });
  });

  it("pages listQuarantined newest first across partitions, with cursors of that order", async () => {
    const time = virtualClock(T0);
    const { journal } = fresh(4, ROOMY, time.clock);
    const subjects = subjectsByPartition(journal, 1).flat();
    await journal.appendBatch(subjects.map((subject, i) => usage(i + 1, subject)));
    const deliveries = await journal.claim(billing, { maxEvents: 100, leaseMs: 60_000, now: time.now });
    const order: string[] = [];
    for (const delivery of deliveries) {
      time.advance(10);
      await journal.quarantine(delivery.id, "malformed");
      order.push(delivery.id.event);
    }
    const seen: string[] = [];
    let after: string | null = null;
    do {
      const page: Awaited<ReturnType<PartitionedJournal["listQuarantined"]>> = await journal.listQuarantined(billing, { order: "newest", limit: 3, after });
      seen.push(...page.items.map((item) => item.event.id));
      after = page.nextCursor;
      if (after !== null) expect(after.startsWith("qpn1.")).toBe(true);
    } while (after !== null && seen.length < 10);
    expect(seen).toEqual([...order].reverse());
    expect((await journal.listQuarantined(billing, { order: "oldest" })).items.map((item) => item.event.id)).toEqual(order);
    const oldestCursor = (await journal.listQuarantined(billing, { limit: 1 })).nextCursor;
    await expect(journal.listQuarantined(billing, { order: "newest", after: oldestCursor })).rejects.toMatchObject({ code: "invalid_argument", argument: "after" });
    await expect(journal.listQuarantined(billing, { order: "sideways" as "newest" })).rejects.toMatchObject({ code: "invalid_argument", argument: "order" });
  });

  it("lists quarantined events in observedAt order partition by partition, whatever order they were quarantined in", async () => {
    const time = virtualClock(T0);
    const { journal } = fresh(4, ROOMY, time.clock);
    const [inA, inB] = subjectsByPartition(journal, 3);
    const a1 = usage(1, inA![0]!, T0 + 100);
    const a2 = usage(2, inA![1]!, T0 + 300);
    const b1 = usage(3, inB![0]!, T0 + 200);
    const late = usage(4, inA![2]!, T0 + 50); // a late replay: appended after a2, observed before everything
    await journal.appendBatch([a1, a2, b1]);
    await journal.append(late);
    const deliveries = await journal.claim(billing, { maxEvents: 10, leaseMs: 600_000, now: time.now });
    // Quarantined in an order of their own: quarantinedAt orders neither the partitions' lists nor the merge.
    for (const event of [a2, b1, a1, late]) {
      time.advance(100);
      await journal.quarantine(deliveries.find((delivery) => delivery.id.event === event.id)!.id, "malformed");
    }
    const oldest = [a1, b1, a2, late].map((event) => event.id);
    const newest = [b1, late, a2, a1].map((event) => event.id);
    const list = async (order: "oldest" | "newest", limit: number): Promise<string[]> => {
      const seen: string[] = [];
      let after: string | null = null;
      do {
        const page: Awaited<ReturnType<PartitionedJournal["listQuarantined"]>> = await journal.listQuarantined(billing, { order, limit, after });
        seen.push(...page.items.map((item) => item.event.id));
        after = page.nextCursor;
      } while (after !== null && seen.length < 10);
      return seen;
    };
    for (const limit of [1, 2, 3, 100]) {
      // Partition A in position order (a1, a2, late), interleaved with B by observedAt:
      // in observedAt order except the late replay, which stays at its position in A.
      expect(await list("oldest", limit)).toEqual(oldest);
      // Newest first: A from its last position down (late, a2, a1); B's b1 was observed after the late replay.
      expect(await list("newest", limit)).toEqual(newest);
    }
  });

  it("asks each partition for a share of a quarantine page, not the whole page, and still fills the page", async () => {
    const time = virtualClock(T0);
    const { journal, open } = fresh(8, ROOMY, time.clock);
    const subjects = subjectsByPartition(journal, 6);
    const limit = 16;
    const walk = async (lister: PartitionedJournal, asks: ReturnType<typeof listingAsks>): Promise<{ seen: string[]; sizes: number[] }> => {
      const seen: string[] = [];
      const sizes: number[] = [];
      let after: string | null = null;
      do {
        asks.page();
        const page: Awaited<ReturnType<PartitionedJournal["listQuarantined"]>> = await lister.listQuarantined(billing, { limit, after });
        seen.push(...page.items.map((item) => item.event.id));
        sizes.push(page.items.length);
        after = page.nextCursor;
        // A page reads about its limit plus a little per partition, where asking every partition for the page would read P x limit.
        expect(asks.total()).toBeLessThanOrEqual(2 * limit + 2 * lister.partitions);
        for (const limits of asks.pages[asks.pages.length - 1]!.values()) for (const asked of limits) expect(asked).toBeLessThanOrEqual(limit);
      } while (after !== null && sizes.length < 20);
      return { seen, sizes };
    };

    // Spread evenly (6 per partition, observed round-robin): one round of calls, each partition asked for a share.
    const spread = Array.from({ length: 6 }, (_, k) => subjects.map((list, p) => usage(k * 8 + p + 1, list[k]!, T0 + k * 8 + p))).flat();
    await quarantineAll(journal, spread, time);
    const even = listingAsks();
    const result = await walk(open(8, even.namespace), even);
    expect(result.sizes).toEqual([16, 16, 16]);
    expect(result.seen).toEqual(spread.map((event) => event.id));
    for (const page of even.pages) {
      expect(page.size).toBe(8);
      for (const limits of page.values()) {
        expect(limits).toHaveLength(1);
        expect(limits[0]).toBeLessThan(limit / 2);
      }
    }

    // All in one partition: only that partition is asked again (for more each time), the others once per page.
    const { journal: skewed, open: reopen } = fresh(8, ROOMY, time.clock);
    const hot = subjectsByPartition(skewed, 20)[5]!;
    const crowded = hot.map((subject, i) => usage(100 + i, subject, T0 + i));
    await quarantineAll(skewed, crowded, time);
    const uneven = listingAsks();
    const walked = await walk(reopen(8, uneven.namespace), uneven);
    expect(walked.sizes).toEqual([16, 4]);
    expect(walked.seen).toEqual(crowded.map((event) => event.id));
    for (const page of uneven.pages) {
      for (const [object, limits] of page) if (object !== skewed.objectName(5)) expect(limits).toHaveLength(1);
    }
    expect(uneven.pages[0]!.get(skewed.objectName(5))!.length).toBeGreaterThan(1);
  });

  it("pages quarantine listings and the audit log with events quarantined and released between pages: every event once, nothing skipped", async () => {
    for (const order of ["oldest", "newest"] as const) {
      const time = virtualClock(T0);
      const { journal, open } = fresh(4, ROOMY, time.clock);
      const subjects = subjectsByPartition(journal, 10);
      const initial = subjects.flatMap((list, p) => list.slice(0, 6).map((subject, k) => usage(1 + p * 10 + k, subject, T0 + k * 4 + p)));
      await quarantineAll(journal, initial, time);
      const asks = listingAsks();
      const lister = open(4, asks.namespace);
      const limit = 5;
      const seen: string[] = [];
      const sizes: number[] = [];
      const releasedUnseen = new Set<string>();
      const added = new Set<string>();
      const releases: string[] = [];
      let quarantined = new Set(initial.map((event) => event.id));
      let after: string | null = null;
      let fresher = 0;
      do {
        asks.page();
        const page: Awaited<ReturnType<PartitionedJournal["listQuarantined"]>> = await lister.listQuarantined(billing, { order, limit, after });
        expect(asks.total()).toBeLessThanOrEqual(2 * limit + 2 * 4);
        seen.push(...page.items.map((item) => item.event.id));
        sizes.push(page.items.length);
        after = page.nextCursor;
        if (after === null) break;
        // Between pages: an operator releases one event not listed yet and one listed already,
        const unseen = [...quarantined].filter((id) => !seen.includes(id));
        const listed = [...quarantined].filter((id) => seen.includes(id));
        for (const id of [unseen[unseen.length - 1], listed[0]]) {
          if (id === undefined) continue;
          time.advance(1);
          await journal.release(billing, id, { now: time.now, actor: "ops" });
          releases.push(id);
          quarantined.delete(id);
          if (!seen.includes(id)) releasedUnseen.add(id);
        }
        // and another event is quarantined, in a partition of its own turn (a new key, so after that partition's cursor in oldest order).
        const p = fresher % 4;
        const event = usage(100 + fresher, subjects[p]![6 + Math.floor(fresher / 4)]!, time.now);
        fresher++;
        await journal.append(event);
        const delivery = (await journal.claim(billing, { maxEvents: 100, leaseMs: 600_000, now: time.now })).find((d) => d.id.event === event.id)!;
        time.advance(1);
        await journal.quarantine(delivery.id, "rejected");
        quarantined = new Set([...quarantined, event.id]);
        added.add(event.id);
      } while (sizes.length < 40);
      expect(new Set(seen).size, "an event listed twice").toBe(seen.length);
      expect(sizes.slice(0, -1).every((size) => size === limit)).toBe(true);
      expect(sizes[sizes.length - 1]!).toBeLessThanOrEqual(limit);
      for (const event of initial) {
        if (releasedUnseen.has(event.id)) expect(seen, `${event.id} was released before it was listed`).not.toContain(event.id);
        else expect(seen, `${event.id} stayed quarantined`).toContain(event.id);
      }
      // Oldest first, an event quarantined meanwhile comes after its partition's cursor: listed, once.
      if (order === "oldest") for (const id of added) if (!releasedUnseen.has(id)) expect(seen).toContain(id);
      expect(releasedUnseen.size).toBeGreaterThan(0);

      // The audit log of those releases, in pages of 3: each entry once, in `at` order (the clock advanced before each).
      const audit: string[] = [];
      let cursor: string | null = null;
      do {
        asks.page();
        const page: Awaited<ReturnType<PartitionedJournal["listAudit"]>> = await lister.listAudit({ limit: 3, after: cursor });
        expect(page.items.length).toBeLessThanOrEqual(3);
        expect(asks.total()).toBeLessThanOrEqual(2 * 3 + 2 * 4);
        audit.push(...page.items.map((entry) => entry.requestId));
        cursor = page.nextCursor;
      } while (cursor !== null && audit.length <= releases.length);
      expect(audit).toEqual(releases);
    }
  });

  it("applies capacity per partition", async () => {
    const { journal } = fresh(4, { ...ROOMY, maxEvents: 1 });
    const byPartition = subjectsByPartition(journal, 2);
    const [a1, a2] = byPartition[0]!;
    const [b1] = byPartition[1]!;
    expect(await journal.append(usage(1, a1!))).toEqual({ status: "accepted", position: 1 });
    expect(await journal.append(usage(2, b1!))).toEqual({ status: "accepted", position: 1 });
    await expect(journal.append(usage(3, a2!))).rejects.toMatchObject({ code: "at_capacity", pending: 1 });
    // The depths are summed, the capacity is each partition's: two pending, one per partition, at maxEvents 1.
    expect(await journal.stats(billing)).toMatchObject({ pending: 2, capacity: { maxEvents: 1 } });
    expect(journal.capacity.maxEvents).toBe(1);
  });

  it("a claim smaller than P still reaches every partition in turn", async () => {
    const { journal } = fresh(4);
    const subjects = subjectsByPartition(journal, 1).flat();
    await journal.appendBatch(subjects.map((subject, i) => usage(i + 1, subject)));
    const handed: string[] = [];
    for (let i = 0; i < 4; i++) {
      const [delivery] = await journal.claim(billing, { maxEvents: 1, leaseMs: 1000, now: T0 });
      expect(delivery).toBeDefined();
      handed.push(delivery!.event.orderingKey.subject);
    }
    expect(handed.sort()).toEqual([...subjects].sort());
  });

  it("a partition refuses a clock reading that is not a valid time, before it prunes or writes anything", async () => {
    const time = virtualClock(T0);
    const { journal, open } = fresh(2, { ...ROOMY, retainAcknowledgedMs: 86_400_000 }, time.clock);
    await journal.append(usage(1, "user-1"));
    await journal.ack((await journal.claim(billing, { maxEvents: 1, leaseMs: 1000, now: time.now }))[0]!.id);
    for (const bad of [Number.NaN, 1e300, -1, 1.5]) {
      const skewed = open(2, env.PARTITIONS, { clock: () => bad });
      await expect(skewed.append(usage(2, "user-1"))).rejects.toMatchObject({ code: "invalid_argument", argument: "now" });
      await expect(skewed.prune({ now: time.now + 1 })).rejects.toMatchObject({ code: "invalid_argument", argument: "now" });
    }
    // Event 1 was acknowledged inside its window: still stored, so its retry is already_present (not appended again).
    expect(await journal.append(usage(1, "user-1"))).toMatchObject({ status: "already_present" });
    expect(await journal.stats(billing)).toMatchObject({ pending: 0, inFlight: 0 });
  });

  it("a claim smaller than P asks every partition once, read-only, and claims only where events are due", async () => {
    const time = virtualClock(T0);
    const calls: string[] = [];
    const { journal, open } = fresh(8, ROOMY, time.clock);
    const counted = open(8, intercepted((method, object) => calls.push(`${method}@${object.slice(object.lastIndexOf("#") + 1)}`)));
    const bySubject = subjectsByPartition(journal, 1).flat();
    const claimOne = async (maxEvents = 1) => {
      calls.length = 0;
      const deliveries = await counted.claim(billing, { maxEvents, leaseMs: 1000, now: time.now });
      return { deliveries, claims: calls.filter((call) => call.startsWith("claim@")), probes: calls.filter((call) => call.startsWith("claimable@")).length };
    };
    // Idle: one read of each partition, no claim at all (it was 8 claims, one round each).
    expect(await claimOne()).toEqual({ deliveries: [], claims: [], probes: 8 });
    // One event in partition 5: claimed there, and nowhere else.
    await journal.append(usage(1, bySubject[5]!));
    const first = await claimOne();
    expect(first).toMatchObject({ claims: ["claim@5"], probes: 8 });
    expect(first.deliveries.map((delivery) => delivery.id)).toEqual([{ consumer: billing, event: rid(1), attempt: 1 }]);
    // In flight until its lease runs out: nothing claimable anywhere.
    expect(await claimOne()).toEqual({ deliveries: [], claims: [], probes: 8 });
    // A lease that ran out counts as claimable: the event comes back, attempt 2.
    time.advance(1000);
    const again = await claimOne();
    expect(again).toMatchObject({ claims: ["claim@5"] });
    expect(again.deliveries.map((delivery) => delivery.id.attempt)).toEqual([2]);
    // A nack's wait that ended counts too.
    await counted.nack(again.deliveries[0]!.id, { retryAfterMs: 500, error: "later", now: time.now });
    expect((await claimOne()).claims).toEqual([]);
    time.advance(500);
    expect((await claimOne()).deliveries.map((delivery) => delivery.id.attempt)).toEqual([3]);
    // Three of eight partitions with events, a claim of 2: claims of one in two of them, none elsewhere.
    await journal.appendBatch([usage(2, bySubject[0]!), usage(3, bySubject[3]!), usage(4, bySubject[7]!)]);
    const two = await claimOne(2);
    expect(two.deliveries).toHaveLength(2);
    expect(two.claims).toHaveLength(2);
    expect(two.claims.every((call) => ["claim@0", "claim@3", "claim@7"].includes(call))).toBe(true);
  });

  it("splits a claim's maxBytes over the partitions with its events: within it but for one delivery per partition, nothing past the answer leased, no change without it", async () => {
    const leaseMs = 600_000;
    /** A fresh P = 4 journal with three events in each partition (some 375 bytes a delivery), its claim RPCs recorded as [partition, options, ...more]. */
    const loaded = async () => {
      const asked: unknown[][] = [];
      const { journal, open } = fresh(4);
      const counted = open(
        4,
        intercepted((method, object, args) => {
          if (method === "claim") asked.push([Number(object.slice(object.lastIndexOf("#") + 1)), ...args.slice(3)]);
        }),
      );
      const events = subjectsByPartition(journal, 3).flatMap((list, p) => list.map((subject, k) => usage(10 * p + k + 1, subject, T0 + k)));
      await journal.appendBatch(events);
      const claim = async (options: { maxEvents: number; maxBytes?: number }) => {
        asked.length = 0;
        const deliveries = await counted.claim(billing, { leaseMs, now: T0, ...options });
        return { deliveries, asked: [...asked].sort((a, b) => (a[0] as number) - (b[0] as number)) };
      };
      /** Event `k` (0..2, in append order) of each partition in `ks`. */
      const nth = (ks: readonly number[]) => events.filter((_, i) => ks.includes(i % 3));
      return { journal: counted, events, claim, nth };
    };
    const ask = (p: number, maxEvents: number, maxBytes?: number) => [p, { maxEvents, leaseMs, now: T0, ...(maxBytes === undefined ? {} : { maxBytes }) }];
    const ids = (deliveries: readonly Delivery[]) => deliveries.map((delivery) => delivery.id.event).sort();
    const eventIds = (events: readonly UsageEvent[]) => events.map((event) => event.id).sort();
    const byEvent = (a: { event: string }, b: { event: string }) => (a.event < b.event ? -1 : 1);
    const firstAttempts = (events: readonly UsageEvent[]) => events.map((event) => ({ consumer: billing, event: event.id, attempt: 1 })).sort(byEvent);
    /** The answer weighs at most maxBytes plus the largest delivery of each partition in it. */
    const withinButOnePerPartition = (journal: PartitionedJournal, deliveries: readonly Delivery[], maxBytes: number) => {
      const largest = new Map<number, number>();
      for (const delivery of deliveries) {
        const p = journal.partitionOf("acme", delivery.event.orderingKey.subject);
        largest.set(p, Math.max(largest.get(p) ?? 0, deliveryBytes(delivery)));
      }
      const weight = deliveries.reduce((sum, delivery) => sum + deliveryBytes(delivery), 0);
      expect(weight - [...largest.values()].reduce((sum, size) => sum + size, 0)).toBeLessThanOrEqual(maxBytes);
      return weight;
    };
    /** Nothing past the answer was leased: a claim without maxBytes gets `rest`, first attempts. */
    const restIs = async (claim: (options: { maxEvents: number }) => Promise<{ deliveries: Delivery[] }>, rest: readonly UsageEvent[]) => {
      const { deliveries } = await claim({ maxEvents: 100 });
      expect(deliveries.map((delivery) => delivery.id).sort(byEvent)).toEqual(firstAttempts(rest));
    };

    // 1000 bytes for 12 events: each partition's share is 3 events and 250 bytes, less than one delivery. Each call
    // hands out its first delivery all the same, and leaves the rounds (short): over maxBytes by one delivery per partition.
    {
      const { journal, claim, nth } = await loaded();
      const { deliveries, asked } = await claim({ maxEvents: 12, maxBytes: 1000 });
      expect(asked).toEqual([0, 1, 2, 3].map((p) => ask(p, 3, 250)));
      expect(ids(deliveries)).toEqual(eventIds(nth([0])));
      expect(withinButOnePerPartition(journal, deliveries, 1000)).toBeGreaterThan(1000);
      await restIs(claim, nth([1, 2]));
    }

    // 1000 bytes for 5 events: shares of 2, 1, 1, 1 events and 400, 200, 200, 200 bytes. Partitions 1 to 3 hand out
    // their one event (over their bytes) and stay in the rounds, but the bytes are spent: no second round.
    {
      const { journal, claim, nth } = await loaded();
      const { deliveries, asked } = await claim({ maxEvents: 5, maxBytes: 1000 });
      expect(asked).toEqual([ask(0, 2, 400), ask(1, 1, 200), ask(2, 1, 200), ask(3, 1, 200)]);
      expect(ids(deliveries)).toEqual(eventIds(nth([0])));
      withinButOnePerPartition(journal, deliveries, 1000);
      await restIs(claim, nth([1, 2]));
    }

    // 3200 bytes for 12 events: 800 a partition, two deliveries each (a third would pass its share); within maxBytes.
    {
      const { claim, nth } = await loaded();
      const { deliveries, asked } = await claim({ maxEvents: 12, maxBytes: 3200 });
      expect(asked).toEqual([0, 1, 2, 3].map((p) => ask(p, 3, 800)));
      expect(ids(deliveries)).toEqual(eventIds(nth([0, 1])));
      expect(deliveries.reduce((sum, delivery) => sum + deliveryBytes(delivery), 0)).toBeLessThanOrEqual(3200);
      await restIs(claim, nth([2]));
    }

    // Without maxBytes: the same calls as ever (no maxBytes, no further argument), and every event.
    {
      const { events, claim } = await loaded();
      const { deliveries, asked } = await claim({ maxEvents: 12 });
      expect(asked).toEqual([0, 1, 2, 3].map((p) => ask(p, 3)));
      expect(deliveries.map((delivery) => delivery.id).sort(byEvent)).toEqual(firstAttempts(events));
    }
  });

  it("rotates each consumer's claim start across per-request instances sharing a memory: a busy partition 0 does not starve the others", async () => {
    const { journal, open } = fresh(4);
    const memory = new PartitionedJournalMemory();
    const subjects = subjectsByPartition(journal, 8);
    // The oldest events, one in each of partitions 1..3; partition 0 has 8 newer ones, more than it is asked for.
    await journal.appendBatch(subjects.slice(1).map((list, i) => usage(100 + i, list[0]!, T0 - 1000)));
    await journal.appendBatch(subjects[0]!.map((subject, i) => usage(i + 1, subject)));
    const served: Record<string, number[]> = { billing: [], warehouse: [] };
    for (let i = 0; i < 4; i++) {
      // Claims of another consumer in between do not move a consumer's turn.
      for (const consumer of [billing, warehouse]) {
        const [delivery] = await open(4, env.PARTITIONS, { memory }).claim(consumer, { maxEvents: 1, leaseMs: 600_000, now: T0 });
        served[consumer]!.push(journal.partitionOf("acme", delivery!.event.orderingKey.subject));
      }
    }
    expect(served).toEqual({ billing: [0, 1, 2, 3], warehouse: [0, 1, 2, 3] });
  });

  it("registers a new consumer at the earlier of the claim's now and its own clock: a claimer whose clock runs ahead does not prune away ids still inside their window", async () => {
    const capacity: Capacity = { ...ROOMY, retainAcknowledgedMs: 1000 };
    const { journal } = fresh(2, capacity);
    const events = Array.from({ length: 12 }, (_, i) => usage(i + 1, `user-${i}`));
    await journal.appendBatch(events);
    for (const delivery of await journal.claim(billing, { maxEvents: 20, leaseMs: 1000, now: T0 })) await journal.ack(delivery.id);
    // warehouse's clock is 10 s fast: by it, every window (T0 + 1000) has passed; by the journal's (T0), none.
    const handed = await journal.claim(warehouse, { maxEvents: 20, leaseMs: 1000, now: T0 + 10_000 });
    expect(handed.map((delivery) => delivery.id.event).sort()).toEqual(events.map((event) => event.id).sort());
    for (const event of events) expect((await journal.append(event)).status).toBe("already_present");
  });

  it("registers a claiming consumer in every partition before leasing: a failed registration rejects the claim with nothing leased", async () => {
    const { journal, open } = fresh(4);
    await journal.append(usage(1, subjectsByPartition(journal, 1)[0]![0]!));
    let failing = true;
    const flaky = open(
      4,
      intercepted((method, object) => {
        if (failing && method === "register" && object === journal.objectName(3)) throw overloaded();
      }),
    );
    await expect(flaky.claim(billing, { maxEvents: 1, leaseMs: 600_000, now: T0 })).rejects.toMatchObject({ code: "backend", retryable: true });
    expect(await journal.stats(billing)).toMatchObject({ pending: 1, inFlight: 0 });
    failing = false;
    const deliveries = await flaky.claim(billing, { maxEvents: 1, leaseMs: 600_000, now: T0 });
    expect(deliveries.map((delivery) => delivery.id)).toEqual([{ consumer: billing, event: rid(1), attempt: 1 }]);
  });

  it("keeps a new consumer's backlog in a partition whose claim call failed: the consumer was registered there first", async () => {
    const time = virtualClock(T0);
    const capacity: Capacity = { ...ROOMY, retainAcknowledgedMs: 1000 };
    const { journal, open } = fresh(2, capacity, time.clock);
    const [s0, s1] = subjectsByPartition(journal, 1).flat();
    await journal.append(usage(1, s1!));
    await journal.ack((await journal.claim(billing, { maxEvents: 10, leaseMs: 1000, now: time.now }))[0]!.id);
    await journal.append(usage(2, s0!));
    const ignored: unknown[] = [];
    const flaky = open(
      2,
      intercepted((method, object) => {
        if (method === "claim" && object === journal.objectName(1)) throw overloaded();
      }),
      { onIgnoredError: (error) => ignored.push(error) },
    );
    // The new consumer's first claim: partition 1 fails, partition 0 delivers.
    expect((await flaky.claim(warehouse, { maxEvents: 10, leaseMs: 600_000, now: time.now })).map((delivery) => delivery.id.event)).toEqual([rid(2)]);
    expect(ignored).toEqual([expect.objectContaining({ code: "backend" })]);
    // Billing acknowledged event 1 long ago, but warehouse has not seen it: it stays, and is warehouse's next.
    time.advance(2000);
    expect(await journal.prune({ now: time.now })).toEqual({ pruned: 0 });
    expect((await journal.claim(warehouse, { maxEvents: 10, leaseMs: 1000, now: time.now })).map((delivery) => delivery.id.event)).toEqual([rid(1)]);
  });

  it("fails a claim that leased nothing with a failure that says nothing committed only when every partition's failure says so", async () => {
    const { journal, open } = fresh(2);
    for (const [p, subject] of subjectsByPartition(journal, 1).flat().entries()) await journal.append(usage(p + 1, subject));
    await journal.claim(billing, { maxEvents: 1, leaseMs: 1, now: T0 }); // registered in both partitions
    const platform = {
      overloaded: () => Object.assign(new Error("Durable Object is overloaded."), { overloaded: true, retryable: true }),
      lost: () => Object.assign(new Error("Network connection lost."), { retryable: true }),
    };
    const failingWith = (first: keyof typeof platform, second: keyof typeof platform) =>
      open(
        2,
        intercepted((method, object) => {
          if (method === "claim") throw platform[object === journal.objectName(0) ? first : second]();
        }),
      );
    const marksOf = async (claiming: PartitionedJournal) => {
      const error = await claiming.claim(billing, { maxEvents: 10, leaseMs: 1000, now: T0 + 10 }).then(
        () => expect.unreachable("the claim should fail"),
        (failure: unknown) => failure,
      );
      return waitOutMarks(error);
    };
    // One partition overloaded (nothing committed there), the other's reply lost (it may have leased): the claim's outcome is unknown.
    expect(await marksOf(failingWith("overloaded", "lost"))).toBeUndefined();
    expect(await marksOf(failingWith("lost", "overloaded"))).toBeUndefined();
    expect(await marksOf(failingWith("overloaded", "overloaded"))).toEqual({ overloaded: true });
  });

  describe("a request id is one event across partitions", () => {
    /** Two subjects in different partitions, the id's home being neither's partition when possible. */
    function twoSubjects(journal: PartitionedJournal): [string, string] {
      const [a, b] = subjectsByPartition(journal, 1).slice(0, 2).flat();
      return [a!, b!];
    }

    it("refuses a different record under a known id in another partition, and changes nothing", async () => {
      const { journal, open } = fresh(4);
      const [s1, s2] = twoSubjects(journal);
      expect(journal.partitionOf("acme", s1)).not.toBe(journal.partitionOf("acme", s2));
      expect(await journal.append(usage(1, s1))).toEqual({ status: "accepted", position: 1 });
      const before = await perPartition(journal, T0);
      await expect(journal.append(usage(1, s2))).rejects.toMatchObject({ name: "EventConflictError", code: "conflict", key: rid(1) });
      await expect(journal.append(usage(1, s2, T0 + 9, { units: 999 }))).rejects.toMatchObject({ code: "conflict", key: rid(1) });
      await expect(open().append(usage(1, s2))).rejects.toMatchObject({ code: "conflict", key: rid(1) });
      expect(await perPartition(journal, T0)).toEqual(before);
      expect(await journal.append(usage(1, s1, T0 + 5))).toEqual({ status: "already_present", position: 1 });
      expect(await open().append(usage(1, s1))).toEqual({ status: "already_present", position: 1 });
      expect(await journal.stats(billing)).toMatchObject({ pending: 1 });
      const [only] = await journal.claim(billing, { maxEvents: 10, leaseMs: 1000, now: T0 });
      expect(only?.event).toEqual(usage(1, s1));
    });

    it("refuses it within a batch and between batches, keeping the input order of the outcomes", async () => {
      const { journal } = fresh(4);
      const [s1, s2] = twoSubjects(journal);
      expect(await journal.appendBatch([usage(1, s1), usage(1, s2), usage(2, s2), usage(1, s1), usage(2, s1)])).toEqual([
        { status: "accepted", position: 1 },
        { status: "rejected", error: conflictOf(rid(1)) },
        { status: "accepted", position: 1 },
        { status: "already_present", position: 1 },
        { status: "rejected", error: conflictOf(rid(2)) },
      ]);
      const before = await perPartition(journal, T0);
      expect(await journal.appendBatch([usage(2, s1), usage(3, s1), usage(1, s2), usage(2, s2)])).toEqual([
        { status: "rejected", error: conflictOf(rid(2)) },
        { status: "accepted", position: 2 },
        { status: "rejected", error: conflictOf(rid(1)) },
        { status: "already_present", position: 1 },
      ]);
      const after = (await perPartition(journal, T0)) as [{ value: { pending: number } }][];
      expect(after.reduce((sum, [auditor]) => sum + auditor.value.pending, 0)).toBe(3);
      expect((before as [{ value: { pending: number } }][]).reduce((sum, [auditor]) => sum + auditor.value.pending, 0)).toBe(2);
      await expect(journal.append(usage(3, s2))).rejects.toMatchObject({ code: "conflict", key: rid(3) });
    });

    it("still refuses it from a new instance over the same objects (the registry is stored)", async () => {
      const { journal, open } = fresh(4);
      const [s1, s2] = twoSubjects(journal);
      await journal.appendBatch([usage(1, s1), usage(2, s2)]);
      const reopened = open();
      await expect(reopened.append(usage(1, s2))).rejects.toMatchObject({ code: "conflict", key: rid(1) });
      expect(await reopened.appendBatch([usage(2, s1), usage(2, s2)])).toEqual([
        { status: "rejected", error: conflictOf() },
        { status: "already_present", position: 1 },
      ]);
    });

    it("forgets an id only once its event is gone: an unacknowledged event keeps it, a pruned one frees it", async () => {
      const time = virtualClock(T0);
      const capacity: Capacity = { ...ROOMY, retainAcknowledgedMs: 1000 };
      const { journal } = fresh(4, capacity, time.clock);
      const [s1, s2] = twoSubjects(journal);
      await journal.append(usage(1, s1));
      await journal.append(usage(2, s1));
      const [first] = await journal.claim(billing, { maxEvents: 1, leaseMs: 1000, now: time.now });
      expect(first?.id.event).toBe(rid(1));
      await journal.ack(first!.id);
      time.advance(ID_SETTLE_MS + 1000);
      expect(await journal.prune({ now: time.now })).toEqual({ pruned: 1 });
      await expect(journal.append(usage(2, s2))).rejects.toMatchObject({ code: "conflict", key: rid(2) });
      expect(await journal.append(usage(1, s2))).toMatchObject({ status: "accepted" });
      await expect(journal.append(usage(1, s1))).rejects.toMatchObject({ code: "conflict", key: rid(1) });
      // What the registries hold now: the new reservation of 1 and the one of 2 (event 2 still stored).
      const held = await Promise.all(
        Array.from({ length: 4 }, async (_, p) => {
          const { stub, config } = partitionStub(journal, p, capacity);
          const due = await stub.registryDue(config, time.now + 1_000_000_000, 1000);
          return due.ok ? due.value.map((entry) => `${entry.requestId}@${entry.subject}`) : [];
        }),
      );
      expect(held.flat().sort()).toEqual([`${rid(1)}@${s2}`, `${rid(2)}@${s1}`]);
    });

    it("an append verifies due entries of its id home on the way (no prune call needed)", async () => {
      const time = virtualClock(T0);
      const capacity: Capacity = { ...ROOMY, retainAcknowledgedMs: 0 };
      const { journal } = fresh(4, capacity, time.clock);
      const [s1] = twoSubjects(journal);
      await journal.append(usage(1, s1));
      await journal.ack((await journal.claim(billing, { maxEvents: 1, leaseMs: 1000, now: time.now }))[0]!.id);
      const keyPartition = partitionStub(journal, journal.partitionOf("acme", s1), capacity);
      expect(await keyPartition.stub.prune(keyPartition.config, time.now, { now: time.now })).toEqual({ ok: true, value: { pruned: 1 } });
      const home = partitionStub(journal, journal.idHomeOf(rid(1)), capacity);
      const registered = async () => {
        const due = await home.stub.registryDue(home.config, time.now + 1_000_000_000, 1000);
        return due.ok ? due.value.map((entry) => entry.requestId) : [];
      };
      expect(await registered()).toEqual([rid(1)]);
      time.advance(ID_SETTLE_MS);
      let other = 2;
      while (journal.idHomeOf(rid(other)) !== journal.idHomeOf(rid(1))) other++;
      expect(await journal.append(usage(other, s1))).toMatchObject({ status: "accepted" });
      expect(await registered()).toEqual([rid(other)]);
    });

    it("takes over a settled reservation whose event its partition no longer holds (without a registry sweep)", async () => {
      const time = virtualClock(T0);
      const capacity: Capacity = { ...ROOMY, retainAcknowledgedMs: 0 };
      const { journal } = fresh(4, capacity, time.clock);
      const [s1, s2] = twoSubjects(journal);
      await journal.append(usage(1, s1));
      await journal.ack((await journal.claim(billing, { maxEvents: 1, leaseMs: 1000, now: time.now }))[0]!.id);
      const { stub, config } = partitionStub(journal, journal.partitionOf("acme", s1), capacity);
      expect(await stub.prune(config, time.now, { now: time.now })).toEqual({ ok: true, value: { pruned: 1 } });
      await expect(journal.append(usage(1, s2))).rejects.toMatchObject({ code: "conflict" }); // not settled yet
      time.advance(ID_SETTLE_MS);
      expect(await journal.append(usage(1, s2))).toMatchObject({ status: "accepted" });
      await expect(journal.appendBatch([usage(1, s1)])).resolves.toEqual([{ status: "rejected", error: conflictOf() }]);
    });

    it("keeps the reservation of an append its partition refused (at_capacity): the same record goes through later, another is a conflict", async () => {
      const time = virtualClock(T0);
      const capacity: Capacity = { ...ROOMY, maxEvents: 1 };
      const { journal } = fresh(4, capacity, time.clock);
      const byPartition = subjectsByPartition(journal, 2);
      const [a1, a2] = byPartition[0]!;
      const [b1] = byPartition[1]!;
      await journal.append(usage(1, a1!));
      await expect(journal.append(usage(2, a2!))).rejects.toMatchObject({ code: "at_capacity" });
      await expect(journal.append(usage(2, b1!))).rejects.toMatchObject({ code: "conflict", key: rid(2) });
      await journal.ack((await journal.claim(billing, { maxEvents: 1, leaseMs: 1000, now: time.now }))[0]!.id);
      expect(await journal.append(usage(2, a2!))).toEqual({ status: "accepted", position: 2 });
    });
  });

  it("reports a failing object as a typed, retryable backend error and recreates the stub", async () => {
    let gets = 0;
    const failing: PartitionNamespace = {
      idFromName: (name: string) => name,
      get: () => {
        gets++;
        return {
          append: () => Promise.reject(Object.assign(new Error("Durable Object reset because its code was updated."), { retryable: true })),
          stats: () => Promise.reject(Object.assign(new Error("Durable Object is overloaded."), { overloaded: true, retryable: true })),
        };
      },
    };
    const journal = new PartitionedJournal(failing, { name: "usage", partitions: 1 });
    const error: unknown = await journal.append(usage(1, "user-1")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BackendError);
    expect(error).toMatchObject({ code: "backend", retryable: true });
    expect((error as BackendError).cause).toBeInstanceOf(DurableObjectEngineError);
    await expect(journal.stats(billing)).rejects.toMatchObject({ code: "backend", retryable: false });
    expect(gets).toBe(2);
  });
});

describe("PartitionedJournalMemory: what instances learn outlives a request", () => {
  /** The PARTITIONS namespace, counting the RPC methods called through it. */
  function counting(calls: Map<string, number>): PartitionNamespace {
    return intercepted((method) => calls.set(method, (calls.get(method) ?? 0) + 1));
  }

  it("a second instance sharing the memory neither re-checks P nor looks up where a delivery lives", async () => {
    const memory = new PartitionedJournalMemory();
    const scope = `memory-${scopes++}/`;
    const calls = new Map<string, number>();
    const open = () => new PartitionedJournal(counting(calls), { name: "usage", partitions: 4, capacity: ROOMY, scope, memory, clock: () => T0 });
    const first = open();
    for (const n of [1, 2, 3, 4, 5, 6]) await first.append(usage(n, `user-${n}`));
    const deliveries = await first.claim(billing, { maxEvents: 10, leaseMs: 60_000, now: T0 });
    expect(deliveries).toHaveLength(6);
    expect(calls.get("hello")).toBe(1);

    calls.clear();
    const second = open(); // as the next request of the same isolate would
    const results = await second.ackBatch(deliveries.map((delivery) => delivery.id));
    expect(results.every((result) => result.ok)).toBe(true);
    expect(calls.get("hello")).toBeUndefined();
    expect(calls.get("holdsMany")).toBeUndefined();
    expect(calls.get("holds")).toBeUndefined();

    calls.clear();
    const stranger = new PartitionedJournal(counting(calls), { name: "usage", partitions: 4, capacity: ROOMY, scope, clock: () => T0 });
    expect((await stranger.ackBatch(deliveries.map((delivery) => delivery.id))).every((result) => result.ok)).toBe(true);
    expect(calls.get("hello")).toBe(1); // without the memory: checks P and locates every delivery
    expect(calls.get("holdsMany")).toBe(4);
  });
});

describe("routing by request id and the id registry, under load and failures", () => {
  /** How many events each partition of `journal` stores (pending for a consumer that never claims). */
  async function storedPerPartition(journal: PartitionedJournal, now: number, capacity: Capacity = ROOMY): Promise<number[]> {
    const auditor = parseConsumerId("auditor");
    return Promise.all(
      Array.from({ length: journal.partitions }, async (_, p) => {
        const { stub, config } = partitionStub(journal, p, capacity);
        const stats = await stub.stats(config, now, auditor);
        return stats.ok ? stats.value.pending : -1;
      }),
    );
  }

  it("ackBatch routes each delivery by the hint it had when called, even when the hints its lookups add evict it from a full hint map", async () => {
    const memory = new PartitionedJournalMemory();
    const scope = `hints-${scopes++}/`;
    const open = () => new PartitionedJournal(env.PARTITIONS, { name: "usage", partitions: 2, capacity: ROOMY, scope, memory, clock: () => T0 });
    const journal = open();
    await journal.appendBatch(Array.from({ length: 20 }, (_, k) => usage(k + 1, `user-${k}`, T0 + k)));
    const deliveries = await journal.claim(billing, { maxEvents: 20, leaseMs: 600_000, now: T0 });
    expect(deliveries).toHaveLength(20);
    // Half the deliveries without a hint (as if claimed in another isolate); the other half the oldest hints of a full map.
    const hints = memory.for(`${scope}usage#2`).hints;
    const unhinted = deliveries.filter((_, i) => i % 2 === 0).map((delivery) => delivery.id.event);
    for (const event of unhinted) hints.delete(event);
    for (let n = 1_000_000; hints.size < 10_000; n++) hints.set(rid(n), 0);
    const results = await open().ackBatch(deliveries.map((delivery) => delivery.id));
    // Locating the unhinted half evicted the hinted half from the map ...
    expect(deliveries.map((delivery) => delivery.id.event).filter((event) => hints.has(event))).toEqual(unhinted);
    // ... and every delivery was acked all the same.
    expect(results).toEqual(deliveries.map(() => ({ ok: true })));
    expect(await journal.stats(billing)).toMatchObject({ pending: 0, inFlight: 0 });
  });

  it("routes deliveries stored in healthy partitions while another partition fails; one no partition could place gets the failure, retryable", async () => {
    let down: string | null = null;
    const failing = intercepted((_, object) => {
      if (object === down) throw overloaded();
    });
    const { journal, open } = fresh(4);
    const subjects = subjectsByPartition(journal, 5)[0]!;
    await journal.appendBatch(subjects.map((subject, k) => usage(k + 1, subject, T0 + k)));
    const deliveries = await journal.claim(billing, { maxEvents: 10, leaseMs: 60_000, now: T0 });
    const [d1, d2, d3, d4, d5] = [1, 2, 3, 4, 5].map((n) => deliveries.find((delivery) => delivery.id.event === rid(n))!.id);
    down = journal.objectName(3);
    // Each call from a new instance (no hints): the event is located while partition 3 fails.
    const unplaced = retryableBackendError();
    const stray = { consumer: billing, event: rid(99), attempt: 1 };
    await open(4, failing).ack(d1!);
    expect(await open(4, failing).ackBatch([d2!, stray])).toEqual([{ ok: true }, { ok: false, error: unplaced }]);
    expect(await open(4, failing).extend(d3!, { leaseMs: 1000, now: T0 })).toEqual({ leaseExpiresAt: T0 + 1000 });
    await open(4, failing).nack(d4!, { retryAfterMs: 0, error: "later", now: T0 });
    await open(4, failing).quarantine(d5!, "rejected");
    expect((await open(4, failing).attempts(billing, rid(1)))[0]?.outcome).toMatchObject({ kind: "acked" });
    // Not found anywhere that answered: it may be in partition 3, so not `not_outstanding` / `[]` but partition 3's failure.
    const error: unknown = await open(4, failing).ack(stray).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: "BackendError", retryable: true });
    expect((error as BackendError).message).toContain("holds on partition 3");
    await expect(open(4, failing).attempts(billing, rid(99))).rejects.toMatchObject({ code: "backend", retryable: true });
    expect(await journal.stats(billing)).toMatchObject({ pending: 1, inFlight: 1, quarantined: 1 });
  });

  it("ackBatch answers a failed partition's deliveries with its failure, in place, and acks the others", async () => {
    let down: string | null = null;
    const failing = intercepted((method, object) => {
      if (method === "ackBatch" && object === down) throw overloaded();
    });
    const memory = new PartitionedJournalMemory();
    const { journal, open } = fresh(4);
    const [inZero, inOne] = subjectsByPartition(journal, 1).flat();
    const hinted = open(4, failing, { memory });
    await hinted.appendBatch([usage(1, inZero!), usage(2, inOne!)]);
    const deliveries = await hinted.claim(billing, { maxEvents: 10, leaseMs: 60_000, now: T0 });
    down = journal.objectName(1);
    const ids = [rid(1), rid(2)].map((event) => deliveries.find((delivery) => delivery.id.event === event)!.id);
    expect(await open(4, failing, { memory }).ackBatch(ids)).toEqual([{ ok: true }, { ok: false, error: retryableBackendError() }]);
    expect(await journal.stats(billing)).toMatchObject({ pending: 0, inFlight: 1 });
  });

  it("answers an append without waiting for the verification of other ids' registry entries on a slow partition; the verification goes on in the background", async () => {
    const time = virtualClock(T0);
    const capacity: Capacity = { ...ROOMY, retainAcknowledgedMs: 0 };
    let slow: string | null = null;
    const slowed = intercepted(async (method, object) => {
      if (method === "holdsMany" && object === slow) await new Promise((resolve) => setTimeout(resolve, 2000));
    });
    const { journal, open } = fresh(4, capacity, time.clock);
    const byPartition = subjectsByPartition(journal, 1);
    await journal.append(usage(1, byPartition[3]![0]!)); // its registry entry is verified at partition 3
    time.advance(ID_SETTLE_MS);
    let other = 2;
    while (journal.idHomeOf(rid(other)) !== journal.idHomeOf(rid(1))) other++;
    const home = partitionStub(journal, journal.idHomeOf(rid(1)), capacity);
    const due = async () => {
      const answer = await home.stub.registryDue(home.config, time.now, 1000);
      return answer.ok ? answer.value.map((entry) => entry.requestId) : [];
    };
    expect(await due()).toEqual([rid(1)]);
    slow = journal.objectName(3);
    const ignored: unknown[] = [];
    const started = Date.now();
    expect(await open(4, slowed, { onIgnoredError: (error) => ignored.push(error) }).append(usage(other, byPartition[0]![0]!))).toMatchObject({ status: "accepted" });
    expect(Date.now() - started).toBeLessThan(1000);
    // The entry of 1 (its event still stored) is verified all the same, once partition 3 answers: it is due again later.
    for (const deadline = Date.now() + 10_000; (await due()).length > 0 && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await due()).toEqual([]);
    expect(ignored).toEqual([]);
  });

  it("never reuses a registry revision: a late verdict about a forgotten entry does not forget the entry that took its id over", async () => {
    const time = virtualClock(T0);
    const capacity: Capacity = { ...ROOMY, retainAcknowledgedMs: 0 };
    const { journal } = fresh(4, capacity, time.clock);
    const [s1, s2] = subjectsByPartition(journal, 1).flat();
    await journal.append(usage(1, s1!));
    await journal.ack((await journal.claim(billing, { maxEvents: 1, leaseMs: 1000, now: time.now }))[0]!.id);
    const keyPartition = partitionStub(journal, journal.partitionOf("acme", s1!), capacity);
    expect(await keyPartition.stub.prune(keyPartition.config, time.now, { now: time.now })).toEqual({ ok: true, value: { pruned: 1 } });
    time.advance(ID_SETTLE_MS);
    // A verifier reads the due entry of 1 and is delayed before it settles it ...
    const home = partitionStub(journal, journal.idHomeOf(rid(1)), capacity);
    const read = await home.stub.registryDue(home.config, time.now, 1000);
    const old = read.ok ? read.value.find((entry) => entry.requestId === rid(1))! : undefined;
    expect(old).toMatchObject({ requestId: rid(1), subject: s1 });
    // ... meanwhile the id is taken over by another record (its event stored in another partition) ...
    expect(await journal.append(usage(1, s2!))).toMatchObject({ status: "accepted" });
    time.advance(ID_SETTLE_MS);
    // ... and the late verdict ("not held" by the old entry's partition) arrives after the new entry settled.
    expect(await home.stub.settleRegistry(home.config, time.now, [{ requestId: rid(1), rev: old!.rev, held: false }])).toEqual({ ok: true, value: { forgotten: 0 } });
    await expect(journal.append(usage(1, s1!))).rejects.toMatchObject({ code: "conflict", key: rid(1) });
    expect(await storedPerPartition(journal, time.now, capacity)).toEqual([0, 1, 0, 0]); // s2's partition holds 1, nobody another

  });

  it("starts each prune at the next partition: with a small limit, a busy partition 0 does not take every prune", async () => {
    const time = virtualClock(T0);
    const { journal } = fresh(2, ROOMY, time.clock);
    const [inZero, inOne] = subjectsByPartition(journal, 3);
    await journal.appendBatch([...inZero!.map((subject, k) => usage(k + 1, subject)), usage(10, inOne![0]!)]);
    const deliveries = await journal.claim(billing, { maxEvents: 10, leaseMs: 1000, now: time.now });
    expect(await journal.ackBatch(deliveries.map((delivery) => delivery.id))).toEqual(deliveries.map(() => ({ ok: true })));
    time.advance(ROOMY.retainAcknowledgedMs + 1);
    expect(await storedPerPartition(journal, time.now)).toEqual([3, 1]);
    expect(await journal.prune({ now: time.now, limit: 1 })).toEqual({ pruned: 1 });
    expect(await journal.prune({ now: time.now, limit: 1 })).toEqual({ pruned: 1 });
    expect(await storedPerPartition(journal, time.now)).toEqual([2, 0]);
  });

  it("answers an extend or nack of an expired lease from the hinted partition without asking every partition; a hint to a partition without the event is still looked past", async () => {
    const time = virtualClock(T0);
    const calls = new Map<string, number>();
    const memory = new PartitionedJournalMemory();
    const { journal, open } = fresh(4, ROOMY, time.clock);
    const counted = () => open(4, intercepted((method) => calls.set(method, (calls.get(method) ?? 0) + 1)), { memory });
    const [s0, s1] = subjectsByPartition(journal, 1).flat();
    await counted().append(usage(1, s1!));
    const [delivery] = await counted().claim(billing, { maxEvents: 1, leaseMs: 1000, now: time.now });
    time.advance(2000);
    calls.clear();
    await expect(counted().extend(delivery!.id, { leaseMs: 1000, now: time.now })).rejects.toMatchObject({ code: "not_outstanding", delivery: delivery!.id });
    await expect(counted().nack(delivery!.id, { retryAfterMs: 0, error: "late", now: time.now })).rejects.toMatchObject({ code: "not_outstanding" });
    expect(Object.fromEntries(calls)).toEqual({ extend: 1, nack: 1 });
    // A hint naming a partition that does not store the event ("not journaled" there): found by asking every partition.
    const [again] = await counted().claim(billing, { maxEvents: 1, leaseMs: 1000, now: time.now });
    memory.for(`${journal.objectName(0).slice(0, -2)}#4`).hints.set(rid(1), journal.partitionOf("acme", s0!));
    calls.clear();
    expect(await counted().extend(again!.id, { leaseMs: 5000, now: time.now })).toEqual({ leaseExpiresAt: time.now + 5000 });
    expect(Object.fromEntries(calls)).toEqual({ extend: 2, holds: 4 });
  });
});
