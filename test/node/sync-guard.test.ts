/**
 * The forwarder's guards against spending or losing events for the sink's faults: a billing-grade source is not
 * drained into a sink that drops accepted events when full; a poison event is charged only when other events are
 * accepted with it (a held batch is topped up for that), never because the sink answers a call of no events;
 * restarts and lapsed leases through an outage do not spend the events' delivery attempts; a custom sink that refuses
 * a call of no events its own way does not stop the loop.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { HttpJournal, type FetchLike } from "../../src/http/index.js";
import { BILLING_GRADE, createJournal, createUsageEvent, InvalidArgumentError, newRequestId, parseConsumerId } from "../../src/index.js";
import { createForwarder, type ForwarderSink } from "../../src/sync/index.js";
import { virtualClock, virtualScheduler } from "../../src/testing/index.js";
import { createApp } from "../../src/worker/index.js";

const consumer = parseConsumerId("edge");
const TOKEN = "test-token-0123456789abcdef";

/** A source, an edge behind the worker, and a fetch that calls `intercept` first for every append-batch request. */
function setup(intercept: (body: string) => Response | "throw" | undefined) {
  const time = virtualClock(1_700_000_000_000);
  const scheduler = virtualScheduler(time);
  const source = createJournal(memoryEngine(), { name: "local", capacity: BILLING_GRADE, clock: time.clock });
  const edge = createJournal(memoryEngine(), { name: "usage", capacity: BILLING_GRADE, clock: time.clock });
  const app = createApp({ journals: { usage: { journal: edge, consumers: ["billing"] } }, auth: { tokens: [{ name: "t", token: TOKEN, scopes: ["append:*", "consume"] }] }, clock: time.clock });
  const fetch: FetchLike = async (url, init) => {
    if (url.endsWith("/append-batch")) {
      const answer = intercept(String(init.body));
      if (answer === "throw") throw new TypeError("fetch failed (edge unreachable)");
      if (answer !== undefined) return answer;
    }
    return app.fetch(new Request(url, init));
  };
  const sink = () => HttpJournal.connect({ baseUrl: "http://edge.test", journal: "usage", token: TOKEN, fetch, retry: { attempts: 1 } });
  const add = (id: string, subject: string) => source.append(createUsageEvent({ record: { requestId: id, namespace: "acme", subject, data: { subject } }, observedAt: time.now }));
  return { time, scheduler, source, edge, sink, add };
}

/**
 * Two events of two keys, a sink that answers its first call of no events and then goes down, a forwarder whose
 * heartbeat is slower than its backoff (after a sleep, the resend's wait ends before the heartbeat finds the lapse),
 * run 3 s, then asleep for 2 min (timers do not run, the leases lapse) and woken. `sends`: the ids of each append
 * with events; `sink.down` brings the sink back.
 */
async function asleepThroughOutage() {
  let checks = 0;
  const sink = { down: true };
  const sends: string[][] = [];
  const s = setup((body) => {
    const sent = (JSON.parse(body) as { events: { record: { requestId: string } }[] }).events.map((event) => event.record.requestId);
    if (sent.length === 0 && ++checks === 1) return undefined;
    if (sent.length > 0) sends.push(sent);
    return sink.down ? "throw" : undefined;
  });
  const ids = [0, 1].map((i) => newRequestId(s.time.now + i));
  for (const [i, id] of ids.entries()) await s.add(id, `u${i}`);
  const f = createForwarder({ source: s.source, consumer, sink: await s.sink(), scheduler: s.scheduler, clock: s.time.clock, leaseMs: 60_000, heartbeatMs: 50_000, backoff: { initialMs: 1_000, maxMs: 1_000, jitter: 0 } });
  f.start();
  await s.scheduler.advance(3_000);
  s.time.advance(120_000);
  await s.scheduler.advance(1);
  return { s, ids, f, sends, sink };
}

describe("forwarder guards", () => {
  it("refuses a billing_grade source into a sink whose capacity policy is drop_oldest, unless allowTelemetrySink", () => {
    // A memory engine that says it is durable (as Durable Objects or IndexedDB storage does): a billing_grade source.
    const engine = memoryEngine();
    const durable = new Proxy(engine, { get: (target, property) => (property === "durable" ? true : (Reflect.get(target, property, target) as unknown)) });
    const source = createJournal(durable, { name: "outbox", capacity: BILLING_GRADE });
    expect(source.mode).toBe("billing_grade");
    const edge = createJournal(memoryEngine(), { name: "usage", capacity: { ...BILLING_GRADE, maxEvents: 3, policy: "drop_oldest" } });
    // The mode a durable engine reports: billing_grade, with a policy that drops accepted events when full.
    const sink = { appendBatch: edge.appendBatch.bind(edge), mode: "billing_grade" as const, capacity: edge.capacity, name: "usage" };
    expect(() => createForwarder({ source, consumer, sink })).toThrow(InvalidArgumentError);
    expect(() => createForwarder({ source, consumer, sink })).toThrow(/capacity policy drop_oldest/);
    expect(() => createForwarder({ source, consumer, sink, allowTelemetrySink: true })).not.toThrow();
    expect(() => createForwarder({ source, consumer, sink: { ...sink, capacity: BILLING_GRADE } })).not.toThrow();
  });

  it("a poison event is charged only once other keys' events are accepted in the same sends; held alone it is not", async () => {
    const POISON = newRequestId(1_700_000_000_000);
    const internal = () => new Response(JSON.stringify({ error: { code: "internal", message: "the server failed" } }), { status: 500, headers: { "content-type": "application/json" } });
    // Every append-batch request with events: the ids it carried and whether the edge took them.
    const sends: { ids: string[]; ok: boolean }[] = [];
    const s = setup((body) => {
      const ids = (JSON.parse(body) as { events: { record: { requestId: string } }[] }).events.map((event) => event.record.requestId);
      if (ids.length === 0) return undefined; // the sink check answers
      const ok = !ids.includes(POISON);
      sends.push({ ids, ok });
      return ok ? undefined : internal();
    });
    await s.add(POISON, "u0");
    const f = createForwarder({ source: s.source, consumer, sink: await s.sink(), scheduler: s.scheduler, clock: s.time.clock });
    f.start();
    // Alone, with the sink answering a call of no events: held, never charged (nothing shows the sink takes events).
    await s.scheduler.advance(60 * 60 * 1000);
    expect(sends.length).toBeGreaterThan(10);
    expect((await s.source.attempts(consumer, POISON)).map((a) => a.attempt)).toEqual([1]);
    expect(await s.source.stats(consumer)).toMatchObject({ inFlight: 1, quarantined: 0 });
    // Events come, one a minute, of other keys, and one of the poison event's own key, which waits behind it.
    const BEHIND = newRequestId(s.time.now);
    await s.add(BEHIND, "u0");
    const good = [BEHIND];
    for (let i = 1; i <= 50; i++) {
      const id = newRequestId(s.time.now + i);
      good.push(id);
      await s.add(id, `u${i}`);
      await s.scheduler.advance(60_000);
    }
    await s.scheduler.advance(10 * 60_000);
    await f.stop();
    const poison = await s.source.attempts(consumer, POISON);
    expect((await s.source.listQuarantined(consumer, {})).items.map((item) => [item.event.id, item.reason])).toEqual([[POISON, "attempts_exhausted"]]);
    expect(await s.source.stats(consumer)).toMatchObject({ pending: 0, inFlight: 0, quarantined: 1 });
    // Each charge came from a split send where other keys' events were accepted: the poison event's lone call
    // next to an accepted call of the same split, at least once per attempt.
    expect(poison.map((a) => a.outcome?.kind)).toEqual(Array.from({ length: BILLING_GRADE.maxDeliveryAttempts }, () => "nacked"));
    const aloneThenTaken = sends.filter((send, index) => send.ids.length === 1 && send.ids[0] === POISON && (sends[index - 1]?.ok === true || sends[index + 1]?.ok === true));
    expect(aloneThenTaken.length).toBeGreaterThanOrEqual(BILLING_GRADE.maxDeliveryAttempts);
    // Every good event reached the edge, each with one attempt; the one of the poison event's key only after it was quarantined.
    expect((await s.edge.stats(parseConsumerId("billing"))).pending).toBe(good.length);
    for (const id of good) expect((await s.source.attempts(consumer, id)).map((a) => [a.attempt, a.outcome?.kind])).toEqual([[1, "acked"]]);
    const firstBehind = sends.findIndex((send) => send.ids.includes(BEHIND));
    expect(sends.slice(firstBehind).some((send) => send.ids.includes(POISON))).toBe(false);
  });

  it("a sink that answers a call of no events but fails every call with events (a broken deploy) charges nothing", async () => {
    const internal = () => new Response(JSON.stringify({ error: { code: "internal", message: "Cannot read properties of undefined (reading 'put')" } }), { status: 500, headers: { "content-type": "application/json" } });
    let broken = true;
    let calls = 0;
    const s = setup((body) => {
      if (body.includes('"events":[]')) return undefined;
      calls += 1;
      return broken ? internal() : undefined;
    });
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      ids.push(newRequestId(s.time.now + i));
      await s.add(ids[i]!, `u${i}`);
    }
    const f = createForwarder({ source: s.source, consumer, sink: await s.sink(), scheduler: s.scheduler, clock: s.time.clock });
    f.start();
    await s.scheduler.advance(2 * 60 * 60 * 1000);
    expect(calls).toBeGreaterThan(100); // split again and again, each event alone too
    expect(await s.source.stats(consumer)).toMatchObject({ inFlight: 6, quarantined: 0 });
    broken = false;
    await s.scheduler.advance(2 * 60_000);
    await f.stop();
    for (const id of ids) expect((await s.source.attempts(consumer, id)).map((a) => [a.attempt, a.outcome?.kind])).toEqual([[1, "acked"]]);
  });

  it("a held batch is topped up with other keys' events, whose leases the heartbeat keeps through the outage", async () => {
    // The edge goes down after the first claim: the first check answers, every later call fails (network).
    let down = true;
    let checks = 0;
    const sizes: number[] = [];
    const s = setup((body) => {
      const n = (JSON.parse(body) as { events: unknown[] }).events.length;
      if (n === 0 && ++checks === 1) return undefined;
      if (n > 0) sizes.push(n);
      return down ? "throw" : undefined;
    });
    const first = newRequestId(s.time.now);
    await s.add(first, "u0");
    const f = createForwarder({ source: s.source, consumer, sink: await s.sink(), scheduler: s.scheduler, clock: s.time.clock, batchSize: 3, leaseMs: 30_000 });
    f.start();
    await s.scheduler.advance(1_000);
    const later = [1, 2, 3].map((i) => newRequestId(s.time.now + i));
    for (const [i, id] of later.entries()) await s.add(id, `u${i + 1}`);
    // Ten minutes down, twenty leases long: the held batch fills up to batchSize and keeps every lease.
    await s.scheduler.advance(10 * 60_000);
    expect(Math.max(...sizes)).toBe(3);
    expect(await s.source.stats(consumer)).toMatchObject({ pending: 1, inFlight: 3, quarantined: 0 });
    down = false;
    await s.scheduler.advance(2 * 60_000);
    await f.stop();
    for (const id of [first, ...later]) expect((await s.source.attempts(consumer, id)).map((a) => [a.attempt, a.outcome?.kind])).toEqual([[1, "acked"]]);
  });

  it("a held event whose lease lapsed unseen (asleep) and is handed out again by a top-up is replaced, not sent twice", async () => {
    const { s, ids, f, sends, sink } = await asleepThroughOutage();
    await s.scheduler.advance(3_000);
    sink.down = false;
    await s.scheduler.advance(2 * 60_000);
    await f.stop();
    expect(sends.length).toBeGreaterThan(2);
    for (const send of sends) expect(new Set(send).size).toBe(send.length);
    expect(await s.source.stats(consumer)).toMatchObject({ pending: 0, inFlight: 0, quarantined: 0 });
    for (const id of ids) expect((await s.source.attempts(consumer, id)).map((a) => a.outcome?.kind).at(-1)).toBe("acked");
  });

  it("a held batch whose leases lapsed unseen does not top up (claiming them again) while the sink is still down", async () => {
    const { s, ids, f, sink } = await asleepThroughOutage();
    await s.scheduler.advance(5 * 60_000); // awake, the sink still down
    const attempts = async () => Promise.all(ids.map(async (id) => (await s.source.attempts(consumer, id)).map((a) => [a.attempt, a.outcome?.kind ?? null])));
    expect(await attempts()).toEqual([[[1, "expired"]], [[1, "expired"]]]);
    sink.down = false;
    await s.scheduler.advance(2 * 60_000);
    await f.stop();
    expect(await attempts()).toEqual([
      [
        [1, "expired"],
        [2, "acked"],
      ],
      [
        [1, "expired"],
        [2, "acked"],
      ],
    ]);
  });

  it("a topped-up event is not taken for a resend of the held ones (possible_duplicate)", async () => {
    let down = true;
    let checks = 0;
    const s = setup((body) => {
      if (body.includes('"events":[]') && ++checks === 1) return undefined;
      return down ? "throw" : undefined; // a network failure: the outcome of the held batch's sends is unknown
    });
    const DAY = 24 * 60 * 60 * 1000;
    const old = (id: string, subject: string) => s.source.append(createUsageEvent({ record: { requestId: id, namespace: "acme", subject, data: {} }, observedAt: s.time.now - 2 * DAY }));
    const HELD = newRequestId(s.time.now);
    const TOPPED = newRequestId(s.time.now + 1);
    await old(HELD, "u0");
    const sink = await s.sink();
    expect(sink.capacity?.retainAcknowledgedMs).toBeLessThan(2 * DAY);
    const f = createForwarder({ source: s.source, consumer, sink, scheduler: s.scheduler, clock: s.time.clock });
    const duplicates: string[] = [];
    f.addEventListener("error", (event) => {
      if (event.detail.code === "possible_duplicate") duplicates.push(...event.detail.requestIds);
    });
    f.start();
    await s.scheduler.advance(30_000);
    expect(await s.source.stats(consumer)).toMatchObject({ inFlight: 1 });
    // A new event comes as the edge comes back: the next resend of the held batch takes it along, its first send.
    await old(TOPPED, "u1");
    down = false;
    await s.scheduler.advance(2 * 60_000);
    await f.stop();
    expect(await s.source.stats(consumer)).toMatchObject({ pending: 0, inFlight: 0 });
    expect(f.progress.batches).toBe(1);
    // The held event was sent before with its outcome unknown (a resend may be stored twice); the topped-up one was not.
    expect(duplicates).toEqual([HELD]);
  });

  it("an idle outbox asks the sink nothing: the check before claiming runs only when events are pending", async () => {
    let requests = 0;
    const s = setup(() => {
      requests += 1;
      return undefined;
    });
    const f = createForwarder({ source: s.source, consumer, sink: await s.sink(), scheduler: s.scheduler, clock: s.time.clock });
    f.start();
    await s.scheduler.advance(60_000);
    expect(requests).toBe(0);
    const id = newRequestId(s.time.now);
    await s.add(id, "u0");
    await s.scheduler.advance(60_000);
    await f.stop();
    expect(requests).toBe(2); // the check, then the batch
    expect(await s.source.attempts(consumer, id)).toMatchObject([{ attempt: 1, outcome: { kind: "acked" } }]);
  });

  it("events left in flight by an earlier run whose clock was ahead (the device clock set back 2 h since) are forwarded, not left idle until the clock catches up", async () => {
    const s = setup(() => undefined);
    const ids = [0, 1, 2].map((i) => newRequestId(s.time.now + i));
    for (const [i, id] of ids.entries()) await s.add(id, `u${i}`);
    // An earlier page claimed them with the clock 2 h ahead, then closed mid-send.
    expect(await s.source.claim(consumer, { maxEvents: 10, leaseMs: 30_000, now: s.time.now + 2 * 3_600_000 })).toHaveLength(3);
    const edge = await s.sink();
    const f = createForwarder({ source: s.source, consumer, sink: edge, scheduler: s.scheduler, clock: s.time.clock });
    f.start();
    await s.scheduler.advance(60_000);
    await f.stop();
    expect(await s.source.stats(consumer)).toMatchObject({ pending: 0, inFlight: 0, quarantined: 0 });
    expect(f.progress.forwarded).toBe(3);
    expect(await s.source.attempts(consumer, ids[0]!)).toMatchObject([{ attempt: 1, outcome: { kind: "expired", at: 1_700_000_000_000 } }, { attempt: 2, outcome: { kind: "acked" } }]);
  });

  it("a second forwarder whose outbox events are all leased by another asks the sink nothing while those leases run, and forwards them once given back", async () => {
    let requests = 0;
    const s = setup(() => {
      requests += 1;
      return undefined;
    });
    const ids = [0, 1, 2].map((i) => newRequestId(s.time.now + i));
    for (const [i, id] of ids.entries()) await s.add(id, `u${i}`);
    // The other forwarder (a tab without the lock option) holds them through its own sink's outage, its heartbeat keeping the leases.
    const down: ForwarderSink = {
      appendBatch: async (events) => {
        if (events.length === 0) return [];
        throw Object.assign(new Error("Service Unavailable"), { status: 503 });
      },
    };
    const other = createForwarder({ source: s.source, consumer, sink: down, scheduler: s.scheduler, clock: s.time.clock });
    other.start();
    await s.scheduler.advance(1_000);
    expect(await s.source.stats(consumer)).toMatchObject({ pending: 0, inFlight: 3 });
    const f = createForwarder({ source: s.source, consumer, sink: await s.sink(), scheduler: s.scheduler, clock: s.time.clock });
    f.start();
    // Ten minutes at a 5 s poll: no call of no events (it asked one a poll, 120 of them).
    await s.scheduler.advance(10 * 60_000);
    expect(requests).toBe(0);
    expect(f.progress).toMatchObject({ state: "idle", batches: 0, lastError: null });
    // The other forwarder stops: it gives the events back, claimable at once; this one checks the sink, then forwards them.
    await other.stop();
    await s.scheduler.advance(5_000);
    await f.stop();
    expect(requests).toBe(2); // the check, then the batch
    expect(f.progress.forwarded).toBe(3);
    for (const id of ids) expect((await s.source.attempts(consumer, id)).map((a) => [a.attempt, a.outcome?.kind])).toEqual([[1, "nacked"], [2, "acked"]]);
  });

  it("a second forwarder whose pending events wait behind another's leases (of their ordering key) checks the sink once, not at every poll", async () => {
    let requests = 0;
    const s = setup(() => {
      requests += 1;
      return undefined;
    });
    const first = newRequestId(s.time.now);
    const behind = newRequestId(s.time.now + 1);
    await s.add(first, "u0");
    await s.add(behind, "u0");
    // Another forwarder's batch, its lease kept alive by its heartbeat.
    const [held] = await s.source.claim(consumer, { maxEvents: 10, leaseMs: 30_000, now: s.time.now });
    expect(held?.event.id).toBe(first);
    const heartbeat = async () => {
      for (let i = 0; i < 40; i++) {
        await s.scheduler.advance(15_000);
        await s.source.extend(held!.id, { leaseMs: 30_000, now: s.time.now });
      }
    };
    const f = createForwarder({ source: s.source, consumer, sink: await s.sink(), scheduler: s.scheduler, clock: s.time.clock });
    f.start();
    await heartbeat(); // ten minutes
    expect(await s.source.stats(consumer)).toMatchObject({ pending: 1, inFlight: 1 });
    // The sink answered the first check; the claims after it found nothing and asked the sink nothing (one check a poll: 120).
    expect(requests).toBe(1);
    expect(f.progress).toMatchObject({ state: "idle", batches: 0, lastError: null });
    await s.source.ack(held!.id);
    await s.scheduler.advance(5_000);
    await f.stop();
    expect(requests).toBe(2);
    expect(await s.source.attempts(consumer, behind)).toMatchObject([{ attempt: 1, outcome: { kind: "acked" } }]);
  });

  it("leases an earlier run left (a reloaded page) are claimed once they run out, and only after the sink answers: nothing is asked before, nothing spent through the outage", async () => {
    let down = true;
    let requests = 0;
    const s = setup(() => {
      requests += 1;
      return down ? "throw" : undefined;
    });
    const ids = [0, 1].map((i) => newRequestId(s.time.now + i));
    for (const [i, id] of ids.entries()) await s.add(id, `u${i}`);
    // The earlier page claimed them (a 30 s lease), then was reloaded mid-send.
    expect(await s.source.claim(consumer, { maxEvents: 10, leaseMs: 30_000, now: s.time.now })).toHaveLength(2);
    const f = createForwarder({ source: s.source, consumer, sink: await s.sink(), scheduler: s.scheduler, clock: s.time.clock });
    f.start();
    await s.scheduler.advance(29_000);
    expect(requests).toBe(0); // nothing claimable while the leases run: the sink is not asked
    await s.scheduler.advance(5 * 60_000);
    // They ran out: the loop asks the sink before claiming, and it is down, so nothing is claimed.
    expect(requests).toBeGreaterThan(0);
    expect(f.progress.lastError).toMatchObject({ phase: "append", requestIds: [] });
    expect(await s.source.stats(consumer)).toMatchObject({ pending: 2, inFlight: 0 });
    for (const id of ids) expect((await s.source.attempts(consumer, id)).map((a) => a.attempt)).toEqual([1]);
    down = false;
    await s.scheduler.advance(2 * 60_000);
    await f.stop();
    for (const id of ids) expect((await s.source.attempts(consumer, id)).map((a) => [a.attempt, a.outcome?.kind])).toEqual([[1, "expired"], [2, "acked"]]);
  });

  it("a custom sink that refuses a call of no events with a plain Error is taken as answering: the loop claims and forwards", async () => {
    const s = setup(() => undefined);
    const delivered: string[] = [];
    let checks = 0;
    // A webhook wrapper refusing an empty batch its own way (the ForwarderSink contract says it must resolve []).
    const sink: ForwarderSink = {
      appendBatch: async (events) => {
        if (events.length === 0) {
          checks += 1;
          throw new Error("400: batch must contain at least one event");
        }
        delivered.push(...events.map((event) => event.id));
        return events.map((_, position) => ({ status: "accepted" as const, position }));
      },
    };
    const ids = [0, 1, 2].map((i) => newRequestId(s.time.now + i));
    for (const [i, id] of ids.entries()) await s.add(id, `u${i}`);
    const f = createForwarder({ source: s.source, consumer, sink, scheduler: s.scheduler, clock: s.time.clock });
    f.start();
    await s.scheduler.advance(60_000);
    await f.stop();
    expect(checks).toBeGreaterThan(0);
    expect(delivered.sort()).toEqual([...ids].sort());
    expect(f.progress).toMatchObject({ forwarded: 3, lastError: null });
  });

  it("a custom sink on an HTTP client whose server refuses a call of no events with a 400 is taken as answering", async () => {
    const s = setup(() => undefined);
    const delivered: string[] = [];
    const sink: ForwarderSink = {
      appendBatch: async (events) => {
        // What a fetch wrapper throws for a 400: the status alone.
        if (events.length === 0) throw Object.assign(new Error("Bad Request"), { status: 400 });
        delivered.push(...events.map((event) => event.id));
        return events.map((_, position) => ({ status: "accepted" as const, position }));
      },
    };
    const id = newRequestId(s.time.now);
    await s.add(id, "u0");
    const f = createForwarder({ source: s.source, consumer, sink, scheduler: s.scheduler, clock: s.time.clock });
    f.start();
    await s.scheduler.advance(60_000);
    await f.stop();
    expect(delivered).toEqual([id]);
  });

  for (const [what, error] of [
    ["a network failure (TypeError)", () => new TypeError("Failed to fetch")],
    ["an HTTP client's 404 (a wrong URL)", () => Object.assign(new Error("Request failed with status code 404"), { status: 404, code: "ERR_BAD_REQUEST" })],
    ["an error with an HTTP status", () => Object.assign(new Error("Service Unavailable"), { status: 503 })],
    ["a retryable error", () => Object.assign(new Error("try later"), { retryable: true })],
    ["a plain Error caused by a network failure", () => new Error("the webhook failed", { cause: new TypeError("fetch failed") })],
  ] as const) {
    it(`a custom sink whose call of no events fails with ${what} is down: nothing is claimed`, async () => {
      const s = setup(() => undefined);
      let sends = 0;
      const sink: ForwarderSink = {
        appendBatch: async (events) => {
          if (events.length > 0) sends += 1;
          throw error();
        },
      };
      const id = newRequestId(s.time.now);
      await s.add(id, "u0");
      const f = createForwarder({ source: s.source, consumer, sink, scheduler: s.scheduler, clock: s.time.clock });
      f.start();
      await s.scheduler.advance(10 * 60_000);
      await f.stop();
      expect(sends).toBe(0);
      expect(await s.source.attempts(consumer, id)).toEqual([]);
      expect(f.progress.lastError).toMatchObject({ phase: "append", requestIds: [] });
    });
  }

  it("restarts through an outage claim nothing, so they spend no delivery attempt", async () => {
    let down = false;
    const s = setup(() => (down ? "throw" : undefined));
    const sink = await s.sink();
    const ids = [0, 1, 2].map((i) => newRequestId(s.time.now + i));
    for (const [i, id] of ids.entries()) await s.add(id, `u${i}`);
    down = true;
    for (let reload = 1; reload <= 9; reload++) {
      const f = createForwarder({ source: s.source, consumer, sink, scheduler: s.scheduler, clock: s.time.clock });
      f.start();
      await s.scheduler.advance(5_000);
      await f.stop();
    }
    expect(await s.source.stats(consumer)).toMatchObject({ pending: 3, inFlight: 0, quarantined: 0 });
    down = false;
    const f = createForwarder({ source: s.source, consumer, sink, scheduler: s.scheduler, clock: s.time.clock });
    f.start();
    await s.scheduler.advance(1_000);
    await f.stop();
    for (const id of ids) expect((await s.source.attempts(consumer, id)).map((a) => [a.attempt, a.outcome?.kind])).toEqual([[1, "acked"]]);
  });

  it("a held batch whose leases lapse in a sleep through an outage is not claimed again until the sink answers", async () => {
    // The edge goes down after the claim: the first check answers, every later call fails.
    let checks = 0;
    let down = true;
    const s = setup((body) => {
      if (body.includes('"events":[]') && ++checks === 1) return undefined;
      return down ? "throw" : undefined;
    });
    const ID = newRequestId(s.time.now);
    await s.add(ID, "u1");
    const f = createForwarder({ source: s.source, consumer, sink: await s.sink(), scheduler: s.scheduler, clock: s.time.clock, backoff: { jitter: 0 } });
    f.start();
    for (let sleep = 1; sleep <= 14; sleep++) {
      await s.scheduler.advance(10_000); // awake, the batch held
      s.time.advance(120_000); // asleep: timers do not run, the lease lapses
      await s.scheduler.advance(1);
      await s.scheduler.advance(5_000);
    }
    expect((await s.source.attempts(consumer, ID)).length).toBe(1);
    expect(await s.source.stats(consumer)).toMatchObject({ pending: 1, quarantined: 0 });
    down = false;
    await s.scheduler.advance(120_000);
    await f.stop();
    // The lapse cost one attempt more (the claim after the sink answered again), not one per sleep.
    expect((await s.source.attempts(consumer, ID)).map((a) => a.attempt)).toEqual([1, 2]);
    expect(await s.source.stats(consumer)).toMatchObject({ pending: 0, inFlight: 0, quarantined: 0 });
  });
});
