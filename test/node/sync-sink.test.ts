/**
 * The forwarder against an `HttpJournal` sink whose fetch is scripted: what
 * the sink answers decides whether the events are charged a delivery
 * attempt, whether the sink is trusted at all, and whether a resend is
 * reported as a possible duplicate.
 *
 * - A whole call that fails for anything but a typed refusal of its input (a
 *   captive portal's 200 HTML page, 404 `unknown_journal` or a 404 page, 408,
 *   any 5xx with or without the API's JSON, 52x) is waited out by the loop:
 *   the batch is held, each failure reported, the backoff capped, and no
 *   event is quarantined however long it lasts. A 400 `invalid_request`
 *   still charges the events (the attempt budget decides).
 * - A `billing_grade` source is not forwarded into a `telemetry_grade` sink
 *   (as `HttpJournal.connect` reports it) unless `allowTelemetrySink`.
 * - A resend answered `accepted` for an event older than the sink's
 *   `retainAcknowledgedMs` is reported as `possible_duplicate`.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { HttpJournal, type FetchLike } from "../../src/http/index.js";
import { BackendError, BILLING_GRADE, createJournal, createUsageEvent, InvalidArgumentError, newRequestId, parseConsumerId, type Capacity, type UsageEvent, type UsageJournal } from "../../src/index.js";
import { createForwarder, PossibleDuplicateError, type ForwarderFailure, type ForwarderOptions } from "../../src/sync/index.js";
import { virtualClock, virtualScheduler } from "../../src/testing/index.js";
import { createApp } from "../../src/worker/index.js";

const START = 1_700_000_000_000;
const HOUR_MS = 60 * 60 * 1000;
const CAPACITY: Capacity = { maxEvents: 1_000, maxDeliveryAttempts: 4, retainAcknowledgedMs: 24 * HOUR_MS, policy: "refuse" };
const consumer = parseConsumerId("edge");
const billing = parseConsumerId("billing");
const TOKEN = "sink-test-token-0123456789";
const MAX_BACKOFF_MS = 8_000;

/** `journal`, reporting `mode` instead of its own (a memory journal is telemetry_grade; a durable one is not needed here). */
function withMode<J extends object>(journal: J, mode: "billing_grade" | "telemetry_grade"): J {
  return new Proxy(journal, {
    get(target, property) {
      if (property === "mode") return mode;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** Whether a request body is the forwarder's sink check: an append-batch of no events. */
const isSinkCheck = (body: unknown): boolean => typeof body === "string" && /"events":\[\]/.test(body);

/** A source, an edge journal behind the worker, and a fetch that answers `broken` while set, else the worker. */
function setup(options: { edgeMode?: "billing_grade" | "telemetry_grade" } = {}) {
  const time = virtualClock(START);
  const scheduler = virtualScheduler(time);
  const source = createJournal(memoryEngine(), { name: "local", capacity: CAPACITY, clock: time.clock });
  const memoryEdge = createJournal(memoryEngine(), { name: "usage", capacity: BILLING_GRADE, clock: time.clock });
  const edge: UsageJournal = options.edgeMode === undefined ? memoryEdge : withMode(memoryEdge, options.edgeMode);
  const app = createApp({ journals: { usage: { journal: edge, consumers: ["billing"] } }, auth: { tokens: [{ name: "t", token: TOKEN, scopes: ["append:*", "consume"] }] }, clock: time.clock });
  // `broken` answers an append-batch call while set; returning undefined lets that call through to the worker.
  // The forwarder's sink checks (an append-batch of no events) are answered by `broken` only once a send of events
  // has been made, or with `checksBroken`: the outage of a test begins after the first claim. `calls` counts the
  // sends of events only.
  const state: { broken: (() => Response | undefined) | null; checksBroken: boolean; dropReply: boolean; calls: number } = { broken: null, checksBroken: false, dropReply: false, calls: 0 };
  const fetch: FetchLike = async (url, init) => {
    if (url.endsWith("/append-batch") && isSinkCheck(init.body)) {
      const checkAnswer = state.broken !== null && (state.checksBroken || state.calls > 0) ? state.broken() : undefined;
      return checkAnswer ?? app.fetch(new Request(url, init));
    }
    if (url.endsWith("/append-batch")) state.calls += 1;
    const scripted = state.broken !== null && url.endsWith("/append-batch") ? state.broken() : undefined;
    if (scripted !== undefined) return scripted;
    const response = await app.fetch(new Request(url, init));
    if (state.dropReply && url.endsWith("/append-batch")) {
      state.dropReply = false;
      await response.text();
      throw new TypeError("network connection lost (reply dropped)");
    }
    return response;
  };
  const sinkOptions = { baseUrl: "http://edge.test", journal: "usage", token: TOKEN, fetch, retry: { attempts: 1 } } as const;
  const connect = () => HttpJournal.connect(sinkOptions);
  let serial = 0;
  const append = async (subject: string, observedAt = time.now): Promise<UsageEvent> => {
    const event = createUsageEvent({ record: { requestId: newRequestId(observedAt + serial), namespace: "acme", subject, data: { serial: serial++ } }, observedAt });
    expect((await source.append(event)).status).toBe("accepted");
    return event;
  };
  const forwarder = (sink: HttpJournal, more: Partial<ForwarderOptions> = {}) =>
    createForwarder({
      source,
      consumer,
      sink,
      batchSize: 3,
      leaseMs: 10_000,
      backoff: { initialMs: 1_000, maxMs: MAX_BACKOFF_MS, jitter: 0 },
      clock: time.clock,
      scheduler,
      pollIntervalMs: 60_000,
      ...more,
    });
  return { time, scheduler, source, edge, state, connect, append, forwarder };
}

const html = (status: number, text: string) => () => new Response(`<!doctype html><html><body>${text}</body></html>`, { status, headers: { "content-type": "text/html" } });
const json = (status: number, code: string) => () => new Response(JSON.stringify({ error: { code, message: `${code} (scripted)`, retryable: false } }), { status, headers: { "content-type": "application/json" } });

/** Nothing left in the source, and every event of `events` forwarded on its first attempt (none charged). */
async function expectEachForwardedOnce(source: UsageJournal, events: readonly UsageEvent[]): Promise<void> {
  const stats = await source.stats(consumer);
  expect({ pending: stats.pending, inFlight: stats.inFlight, quarantined: stats.quarantined }).toEqual({ pending: 0, inFlight: 0, quarantined: 0 });
  for (const event of events) expect((await source.attempts(consumer, event.id)).map((attempt) => attempt.attempt)).toEqual([1]);
}

describe("forwarder: a storage fault the API reports is an outage, however it comes and goes", () => {
  it("a local sink's storage failing (a non-retryable BackendError) on 3 calls of 4: no event is charged either", async () => {
    const s = setup();
    const events: UsageEvent[] = [];
    for (let i = 0; i < 9; i++) events.push(await s.append(`user-${i}`));
    let call = 0;
    const sink = new Proxy(s.edge, {
      get(target, property) {
        if (property === "appendBatch") {
          return (batch: readonly UsageEvent[]) => {
            if (++call % 4 !== 0) return Promise.reject(new BackendError("the engine failed", { retryable: false, cause: new Error("disk I/O error") }));
            return target.appendBatch(batch);
          };
        }
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    const forwarder = createForwarder({ source: s.source, consumer, sink, batchSize: 3, leaseMs: 10_000, backoff: { initialMs: 1_000, maxMs: MAX_BACKOFF_MS, jitter: 0 }, clock: s.time.clock, scheduler: s.scheduler, pollIntervalMs: 60_000 });
    forwarder.start();
    await s.scheduler.advance(10 * 60_000);
    await forwarder.stop();
    await expectEachForwardedOnce(s.source, events);
  });

  it("500 backend on 3 calls of 4: no batch is split and no event is charged, and every event arrives on its first attempt", async () => {
    const s = setup();
    const sink = await s.connect();
    const events: UsageEvent[] = [];
    for (let i = 0; i < 9; i++) events.push(await s.append(`user-${i}`));
    let call = 0;
    const fault = json(500, "backend");
    s.state.broken = () => (++call % 4 === 0 ? undefined : fault()); // every fourth call reaches the worker
    const forwarder = s.forwarder(sink);
    forwarder.start();
    await s.scheduler.advance(10 * 60_000);
    await forwarder.stop();
    await expectEachForwardedOnce(s.source, events);
  });
});

describe("forwarder: a sink that is down or misconfigured is waited out, not charged to the events", () => {
  const cases: [string, () => Response][] = [
    ["a captive portal's 200 HTML page (invalid_answer)", html(200, "Please log in to Hotel WiFi")],
    ["a 2xx JSON body that is not the API's answer (invalid_answer)", () => new Response("{}", { status: 200, headers: { "content-type": "application/json" } })],
    ["404 unknown_journal (a misconfigured journal name)", json(404, "unknown_journal")],
    ["a 404 HTML page (a misrouted baseUrl)", html(404, "Not Found")],
    ["408 Request Timeout", html(408, "Request Timeout")],
    ["500 internal (the API's JSON)", json(500, "internal")],
    ["500 journal backend, not retryable (the API's JSON)", json(500, "backend")],
    ["Cloudflare's 500 HTML page", html(500, "Internal Server Error - cloudflare")],
    ["520 (a Cloudflare origin error page)", html(520, "Web server is returning an unknown error")],
    ["502 Bad Gateway", html(502, "Bad Gateway")],
    ["a 400 page without the API's JSON (a proxy's)", html(400, "Bad Request")],
  ];
  for (const [what, answer] of cases) {
    it(`holds the batch through ${what}: reported at each send, backoff capped, nothing quarantined, one attempt each`, async () => {
      const s = setup();
      const sink = await s.connect();
      const events = [await s.append("a"), await s.append("b")];
      s.state.broken = answer;
      const forwarder = s.forwarder(sink);
      const errors: ForwarderFailure[] = [];
      forwarder.addEventListener("error", (event) => errors.push(event.detail));
      const waits: number[] = [];
      forwarder.addEventListener("progress", (event) => {
        if (event.detail.nextRetryAt !== null) waits.push(event.detail.nextRetryAt - s.time.now);
      });
      forwarder.start();
      await s.scheduler.advance(0);
      // Ten minutes of it: far more sends than the attempt budget of 4.
      for (let i = 0; i < 60; i++) await s.scheduler.advance(10_000);
      expect(s.state.calls).toBeGreaterThan(CAPACITY.maxDeliveryAttempts * 4);
      expect(await s.source.stats(consumer)).toMatchObject({ pending: 0, inFlight: 2, quarantined: 0 });
      expect(forwarder.progress).toMatchObject({ state: "backing_off", forwarded: 0, retried: 0, quarantined: 0 });
      // The operator sees it: every failed send is an error event naming the events.
      const appendErrors = errors.filter((error) => error.phase === "append" && error.requestIds.length > 0);
      expect(appendErrors.length).toBe(s.state.calls);
      expect(appendErrors[0]!.requestIds).toEqual(events.map((event) => event.id));
      expect(forwarder.progress.lastError).toMatchObject({ phase: "append", code: "backend" });
      expect(Math.max(...waits)).toBeLessThanOrEqual(MAX_BACKOFF_MS);
      expect(waits.at(-1)).toBe(MAX_BACKOFF_MS);

      s.state.broken = null;
      await s.scheduler.advance(MAX_BACKOFF_MS);
      await s.scheduler.advance(0);
      await forwarder.stop();
      expect(forwarder.progress).toMatchObject({ forwarded: 2, quarantined: 0 });
      for (const event of events) expect((await s.source.attempts(consumer, event.id)).map((a) => [a.attempt, a.outcome?.kind])).toEqual([[1, "acked"]]);
    });
  }

  it("still charges the events for a typed refusal of the request's input (400 invalid_request): nacked, the attempt budget decides", async () => {
    const s = setup();
    const sink = await s.connect();
    const event = await s.append("a");
    s.state.broken = json(400, "invalid_request");
    const forwarder = s.forwarder(sink);
    forwarder.start();
    await s.scheduler.advance(0);
    for (let i = 0; i < 60; i++) await s.scheduler.advance(10_000);
    await forwarder.stop();
    expect(forwarder.progress.lastError).toMatchObject({ phase: "append", code: "invalid_argument", retryable: false });
    const page = await s.source.listQuarantined(consumer);
    expect(page.items.map((item) => [item.event.id, item.reason])).toEqual([[event.id, "attempts_exhausted"]]);
  });
});

describe("forwarder: a billing_grade source is not forwarded into a telemetry_grade sink", () => {
  it("refuses the sink HttpJournal.connect reports as telemetry_grade (a worker over a memory journal), naming it", async () => {
    const s = setup(); // the edge is a memory journal: telemetry_grade
    const sink = await s.connect();
    expect(sink.mode).toBe("telemetry_grade");
    const source = withMode(s.source, "billing_grade");
    let refusal: unknown = null;
    try {
      s.forwarder(sink, { source });
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toBeInstanceOf(InvalidArgumentError);
    expect(refusal).toMatchObject({ code: "invalid_argument", argument: "sink" });
    expect((refusal as Error).message).toContain("`usage`");
    expect((refusal as Error).message).toContain("allowTelemetrySink");
  });

  it("forwards into it with allowTelemetrySink: true, into a billing_grade sink, and from a telemetry_grade source", async () => {
    const telemetry = setup();
    const telemetrySink = await telemetry.connect();
    await telemetry.append("a");
    const optedIn = telemetry.forwarder(telemetrySink, { source: withMode(telemetry.source, "billing_grade"), allowTelemetrySink: true });
    expect(await optedIn.runOnce()).toMatchObject({ forwarded: 1 });
    expect(() => telemetry.forwarder(telemetrySink)).not.toThrow(); // the memory source is telemetry_grade itself

    const durable = setup({ edgeMode: "billing_grade" });
    const durableSink = await durable.connect();
    expect(durableSink.mode).toBe("billing_grade");
    await durable.append("a");
    expect(await durable.forwarder(durableSink, { source: withMode(durable.source, "billing_grade") }).runOnce()).toMatchObject({ forwarded: 1 });
  });
});

describe("forwarder: a resend the sink takes as new after its retention window is reported", () => {
  /** An event observed 25 h ago (a device offline for a day): past the edge's 24 h window. */
  const OLD_MS = 25 * HOUR_MS;

  it("runOnce: a lost reply, the edge delivers and prunes the first copy, the resend (attempt 2) is accepted: possible_duplicate with the request id", async () => {
    const s = setup();
    const sink = await s.connect();
    expect(sink.capacity.retainAcknowledgedMs).toBe(BILLING_GRADE.retainAcknowledgedMs);
    const event = await s.append("a", s.time.now - OLD_MS);
    const forwarder = s.forwarder(sink);
    const errors: ForwarderFailure[] = [];
    forwarder.addEventListener("error", (e) => errors.push(e.detail));
    s.state.dropReply = true;
    expect(await forwarder.runOnce()).toMatchObject({ claimed: 1, retried: 1 });
    const first = await s.edge.claim(billing, { maxEvents: 10, leaseMs: 30_000, now: s.time.now });
    await s.edge.ackBatch(first.map((delivery) => delivery.id));
    await s.scheduler.advance(1_000); // the nack's backoff
    expect(await forwarder.runOnce()).toMatchObject({ claimed: 1, forwarded: 1, alreadyPresent: 0 });
    const duplicate = errors.find((error) => error.code === "possible_duplicate");
    expect(duplicate).toMatchObject({ phase: "append", retryable: false, requestIds: [event.id] });
    expect(duplicate!.error).toBeInstanceOf(PossibleDuplicateError);
    expect(duplicate!.error).toMatchObject({ requestId: event.id, attempt: 2, observedAt: event.observedAt, retainAcknowledgedMs: BILLING_GRADE.retainAcknowledgedMs });
    expect(forwarder.progress.lastError).toMatchObject({ code: "possible_duplicate" });
    // The edge's billing consumer does see it twice: what the report warns of.
    expect((await s.edge.claim(billing, { maxEvents: 10, leaseMs: 30_000, now: s.time.now })).map((delivery) => delivery.event.id)).toEqual([event.id]);
  });

  it("the loop: a held batch's resend (same attempt) accepted past the window is reported too", async () => {
    const s = setup();
    const sink = await s.connect();
    const event = await s.append("a", s.time.now - OLD_MS);
    const forwarder = s.forwarder(sink);
    const errors: ForwarderFailure[] = [];
    forwarder.addEventListener("error", (e) => errors.push(e.detail));
    s.state.dropReply = true;
    forwarder.start();
    await s.scheduler.advance(0);
    expect(await s.source.stats(consumer)).toMatchObject({ inFlight: 1 });
    const first = await s.edge.claim(billing, { maxEvents: 10, leaseMs: 30_000, now: s.time.now });
    await s.edge.ackBatch(first.map((delivery) => delivery.id));
    await s.scheduler.advance(1_000);
    await forwarder.stop();
    expect(forwarder.progress.forwarded).toBe(1);
    expect(errors.filter((error) => error.code === "possible_duplicate")).toMatchObject([{ requestIds: [event.id], error: { attempt: 1 } }]);
  });

  it("reports nothing for a first send of an old event, nor for a resend the edge still recognises (already_present)", async () => {
    const s = setup();
    const sink = await s.connect();
    await s.append("old", s.time.now - OLD_MS); // sent once, accepted: no sign of a duplicate
    await s.append("recent", s.time.now - HOUR_MS); // its reply is lost; the resend finds it
    const forwarder = s.forwarder(sink, { batchSize: 1 });
    const errors: ForwarderFailure[] = [];
    forwarder.addEventListener("error", (e) => errors.push(e.detail));
    expect(await forwarder.runOnce()).toMatchObject({ forwarded: 1 });
    s.state.dropReply = true;
    expect(await forwarder.runOnce()).toMatchObject({ retried: 1 });
    await s.scheduler.advance(1_000);
    expect(await forwarder.runOnce()).toMatchObject({ forwarded: 1, alreadyPresent: 1 });
    expect(errors.map((error) => error.code)).toEqual(["backend"]);
  });
});

describe("forwarder: a resend is aged by the sink's clock too, when the sink tells it (a device clock behind the worker's)", () => {
  /** The worker's clock is this far ahead of the device's: past the edge's 24 h window. */
  const SKEW_MS = 25 * HOUR_MS;

  it("an HttpJournal sink whose answers are dated 25 h ahead: a resend the edge took as new is reported as possible_duplicate", async () => {
    // Virtual time starting at the real clock's reading, so that the device's clock is the one HttpJournal compares the Date header with.
    const time = virtualClock(Date.now());
    const scheduler = virtualScheduler(time);
    const edgeClock = () => time.now + SKEW_MS;
    const source = createJournal(memoryEngine(), { name: "local", capacity: CAPACITY, clock: time.clock });
    const edge = createJournal(memoryEngine(), { name: "usage", capacity: BILLING_GRADE, clock: edgeClock });
    const app = createApp({ journals: { usage: { journal: edge, consumers: ["billing"] } }, auth: { tokens: [{ name: "t", token: TOKEN, scopes: ["append:*", "consume"] }] }, clock: edgeClock });
    let dropReply = false;
    // The worker's answers, dated by its clock (as the Workers runtime dates every answer).
    const fetch: FetchLike = async (url, init) => {
      const response = await app.fetch(new Request(url, init));
      if (dropReply && url.endsWith("/append-batch") && !isSinkCheck(init.body)) {
        dropReply = false;
        await response.text();
        throw new TypeError("network connection lost (reply dropped)");
      }
      const date = new Date(edgeClock()).toUTCString();
      return { status: response.status, headers: { get: (name: string) => (name.toLowerCase() === "date" ? date : response.headers.get(name)) }, text: () => response.text() };
    };
    const sink = await HttpJournal.connect({ baseUrl: "http://edge.test", journal: "usage", token: TOKEN, fetch, retry: { attempts: 1 } });
    expect(sink.serverNow()! - Date.now()).toBeGreaterThan(SKEW_MS - 5_000);
    // Observed an hour ago by the device's clock: 26 h ago by the worker's.
    const event = createUsageEvent({ record: { requestId: newRequestId(), namespace: "acme", subject: "a", data: {} }, observedAt: time.now - HOUR_MS });
    expect((await source.append(event)).status).toBe("accepted");
    const forwarder = createForwarder({ source, consumer, sink, batchSize: 3, leaseMs: 10_000, backoff: { initialMs: 1_000, maxMs: MAX_BACKOFF_MS, jitter: 0 }, clock: time.clock, scheduler });
    const errors: ForwarderFailure[] = [];
    forwarder.addEventListener("error", (e) => errors.push(e.detail));
    dropReply = true;
    expect(await forwarder.runOnce()).toMatchObject({ claimed: 1, retried: 1 });
    // The worker's consumer takes and acknowledges the first copy; the worker prunes it (past the window by its clock).
    const first = await edge.claim(billing, { maxEvents: 10, leaseMs: 30_000, now: edgeClock() });
    await edge.ackBatch(first.map((delivery) => delivery.id));
    await scheduler.advance(1_000); // the nack's backoff
    expect(await forwarder.runOnce()).toMatchObject({ claimed: 1, forwarded: 1, alreadyPresent: 0 });
    // Stored twice at the worker...
    expect((await edge.claim(billing, { maxEvents: 10, leaseMs: 30_000, now: edgeClock() })).map((delivery) => delivery.event.id)).toEqual([event.id]);
    // ... and reported, though by the device's clock the event is an hour old.
    const duplicates = errors.filter((error) => error.code === "possible_duplicate");
    expect(duplicates).toMatchObject([{ phase: "append", requestIds: [event.id] }]);
    const duplicate = duplicates[0]!.error as PossibleDuplicateError;
    expect(duplicate).toMatchObject({ requestId: event.id, attempt: 2, observedAt: event.observedAt, answeredAt: time.now });
    expect(duplicate.sinkNow! - event.observedAt).toBeGreaterThan(SKEW_MS);
    expect(duplicate.message).toContain("by the sink's clock");
  });

  /** A resend (attempt 2) of an event observed an hour ago by the forwarder's clock, accepted by a sink telling `serverNow`. */
  async function resendTo(serverNow: ((observedAt: number) => number | null) | undefined): Promise<ForwarderFailure[]> {
    const time = virtualClock(START);
    const scheduler = virtualScheduler(time);
    const source = createJournal(memoryEngine(), { name: "local", capacity: CAPACITY, clock: time.clock });
    const event = createUsageEvent({ record: { requestId: newRequestId(), namespace: "acme", subject: "a", data: {} }, observedAt: time.now - HOUR_MS });
    await source.append(event);
    let calls = 0;
    const sink = {
      capacity: { retainAcknowledgedMs: 24 * HOUR_MS, policy: "refuse" as const },
      appendBatch: async (events: readonly UsageEvent[]) => {
        if (events.length > 0 && calls++ === 0) throw new TypeError("reply lost");
        return events.map((_, index) => ({ status: "accepted" as const, position: index + 1 }));
      },
      ...(serverNow === undefined ? {} : { serverNow: () => serverNow(event.observedAt) }),
    };
    const forwarder = createForwarder({ source, consumer, sink, leaseMs: 10_000, backoff: { initialMs: 1_000, maxMs: MAX_BACKOFF_MS, jitter: 0 }, clock: time.clock, scheduler });
    const errors: ForwarderFailure[] = [];
    forwarder.addEventListener("error", (e) => errors.push(e.detail));
    await forwarder.runOnce();
    await scheduler.advance(1_000);
    expect(await forwarder.runOnce()).toMatchObject({ forwarded: 1 });
    return errors.filter((error) => error.code === "possible_duplicate");
  }

  it("reports when the sink's clock, allowing a second for a Date header's resolution, may be past the window; not otherwise", async () => {
    const DAY_MS = 24 * HOUR_MS;
    // Half a second short of the window by the sink's estimate, which may be up to a second behind its clock: reported.
    expect(await resendTo((observedAt) => observedAt + DAY_MS - 500)).toHaveLength(1);
    // A second and a half short: not past the window by either clock.
    expect(await resendTo((observedAt) => observedAt + DAY_MS - 1_500)).toEqual([]);
    // A sink that does not know its clock (null), or tells none, or whose clock is behind: the forwarder's clock alone.
    expect(await resendTo(() => null)).toEqual([]);
    expect(await resendTo(undefined)).toEqual([]);
    expect(await resendTo((observedAt) => observedAt)).toEqual([]);
  });
});

describe("forwarder: one event the sink always fails does not hold the batches behind it", () => {
  for (const [what, answer] of [
    ["a WAF's 500 HTML page", html(500, "blocked")],
    ["a proxy's 400 HTML page", html(400, "blocked")],
    ["an internal error (the API's JSON: a server bug on that event)", json(500, "internal")],
  ] as const) {
    it(`${what} on one event: after 3 failures the batch is split, the others go, the poison event is charged until attempts_exhausted`, async () => {
      const s = setup();
      const app = s.state;
      const calls: string[][] = [];
      let poisonCalls = 0;
      const base = await s.connect();
      // A request carrying the poison event gets the scripted answer (a WAF or a server bug on its content).
      const sink = new Proxy(base, {
        get(target, property) {
          if (property === "appendBatch") {
            return async (events: readonly UsageEvent[], options?: { signal?: AbortSignal }) => {
              if (events.length > 0) calls.push(events.map((event) => event.record.subject));
              if (events.some((event) => event.record.subject === "poison")) {
                poisonCalls += 1;
                app.broken = answer;
                try {
                  return await target.appendBatch(events, options);
                } finally {
                  app.broken = null;
                }
              }
              return target.appendBatch(events, options);
            };
          }
          const value: unknown = Reflect.get(target, property, target);
          return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
        },
      });
      const poison = await s.append("poison");
      const others: UsageEvent[] = [];
      for (let i = 0; i < 11; i++) others.push(await s.append(`s${i}`));
      const forwarder = s.forwarder(sink);
      forwarder.start();
      await s.scheduler.advance(0);
      for (let i = 0; i < 60; i++) await s.scheduler.advance(10_000);
      await forwarder.stop();
      // Every other event reached the edge, each with one attempt.
      const atEdge = await s.edge.claim(billing, { maxEvents: 100, leaseMs: 30_000, now: s.time.now });
      expect(atEdge.map((delivery) => delivery.event.id).sort()).toEqual(others.map((event) => event.id).sort());
      for (const event of others) expect((await s.source.attempts(consumer, event.id)).map((a) => a.attempt)).toEqual([1]);
      // The poison event was charged each time its batch was split and another part accepted, until the budget ended it.
      expect(poisonCalls).toBeGreaterThan(3);
      const page = await s.source.listQuarantined(consumer);
      expect(page.items.map((item) => [item.event.id, item.reason])).toEqual([[poison.id, "attempts_exhausted"]]);
      // The first split came after 3 whole failures of the first batch, not before.
      expect(calls.slice(0, 4)).toEqual([["poison", "s0", "s1"], ["poison", "s0", "s1"], ["poison", "s0", "s1"], ["poison", "s0"]]);
    });
  }

  it("an outage answering every call the same way (a 500 page) is split, but nothing is charged and the batch stays held", async () => {
    const s = setup();
    const sink = await s.connect();
    const events = [await s.append("a"), await s.append("b"), await s.append("c")];
    s.state.broken = html(500, "Internal Server Error");
    const forwarder = s.forwarder(sink);
    forwarder.start();
    await s.scheduler.advance(0);
    for (let i = 0; i < 60; i++) await s.scheduler.advance(10_000);
    expect(await s.source.stats(consumer)).toMatchObject({ pending: 0, inFlight: 3, quarantined: 0 });
    s.state.broken = null;
    await s.scheduler.advance(MAX_BACKOFF_MS);
    await s.scheduler.advance(0);
    await forwarder.stop();
    for (const event of events) expect((await s.source.attempts(consumer, event.id)).map((a) => [a.attempt, a.outcome?.kind])).toEqual([[1, "acked"]]);
  });

  for (const [what, answer] of [
    ["a network failure", () => { throw new TypeError("offline"); }],
    ["429", json(429, "rate_limited")],
    ["503", json(503, "unavailable")],
    ["401", json(401, "unauthorized")],
    ["403 forbidden", json(403, "forbidden")],
  ] as const) {
    it(`${what} is held without splitting`, async () => {
      const s = setup();
      const sink = await s.connect();
      await s.append("a");
      await s.append("b");
      s.state.broken = answer;
      const sizes: number[] = [];
      const spy = new Proxy(sink, {
        get(target, property) {
          if (property === "appendBatch") return (events: readonly UsageEvent[], options?: { signal?: AbortSignal }) => (events.length > 0 && sizes.push(events.length), target.appendBatch(events, options));
          const value: unknown = Reflect.get(target, property, target);
          return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
        },
      });
      const forwarder = s.forwarder(spy);
      forwarder.start();
      await s.scheduler.advance(0);
      for (let i = 0; i < 12; i++) await s.scheduler.advance(10_000);
      await forwarder.stop();
      expect(sizes.length).toBeGreaterThan(5);
      expect(new Set(sizes)).toEqual(new Set([2]));
    });
  }
});

describe("forwarder: typed 4xx refusals of the input other than 400 charge the events", () => {
  for (const [what, answer, code] of [
    ["409 conflict (the journal's error)", json(409, "conflict"), "conflict"],
    ["415 with the API's JSON", json(415, "unsupported_media_type"), "backend"],
    ["422 with the API's JSON", json(422, "unprocessable_entity"), "backend"],
  ] as const) {
    it(`a lone event refused as a whole with ${what} is nacked until attempts_exhausted, not held for ever`, async () => {
      const s = setup();
      const sink = await s.connect();
      const event = await s.append("a");
      s.state.broken = answer;
      const forwarder = s.forwarder(sink);
      forwarder.start();
      await s.scheduler.advance(0);
      for (let i = 0; i < 60; i++) await s.scheduler.advance(10_000);
      await forwarder.stop();
      expect(forwarder.progress.lastError).toMatchObject({ phase: "append", code, retryable: false });
      const page = await s.source.listQuarantined(consumer);
      expect(page.items.map((item) => [item.event.id, item.reason])).toEqual([[event.id, "attempts_exhausted"]]);
      expect(s.state.calls).toBe(CAPACITY.maxDeliveryAttempts);
    });
  }
});

describe("forwarder: possible_duplicate only after a send whose outcome is unknown", () => {
  const OLD_MS = 25 * HOUR_MS;
  const atCapacity = () => new Response(JSON.stringify({ error: { code: "at_capacity", message: "full", retryable: true } }), { status: 503, headers: { "content-type": "application/json" } });
  const retryableBackend = () => new Response(JSON.stringify({ error: { code: "backend", message: "busy", retryable: true } }), { status: 503, headers: { "content-type": "application/json" } });
  const offline = (): Response => {
    throw new TypeError("offline");
  };
  const cases: [string, () => Response, boolean][] = [
    ["a network failure (the request may have arrived)", offline, true],
    ["a captive portal's 200 HTML page", html(200, "Hotel WiFi"), false],
    ["401", json(401, "unauthorized"), false],
    ["403 forbidden", json(403, "forbidden"), false],
    ["404 unknown_journal", json(404, "unknown_journal"), false],
    ["408", html(408, "Request Timeout"), false],
    ["503 at_capacity", atCapacity, false],
    ["a retryable backend error (the API's JSON: the storage may have committed before its reply was lost)", retryableBackend, true],
    ["502 Bad Gateway", html(502, "Bad Gateway"), true],
    ["504 Gateway Timeout", html(504, "Gateway Timeout"), true],
    ["Cloudflare's 522", html(522, "Connection timed out"), true],
    ["a 500 page without the API's JSON", html(500, "Internal Server Error"), true],
  ];
  for (const [what, answer, unknown] of cases) {
    it(`${unknown ? "reports" : "does not report"} the resend of an old event whose first send got ${what}`, async () => {
      const s = setup();
      const sink = await s.connect();
      const event = await s.append("a", s.time.now - OLD_MS);
      s.state.broken = answer;
      const forwarder = s.forwarder(sink);
      const errors: ForwarderFailure[] = [];
      forwarder.addEventListener("error", (e) => errors.push(e.detail));
      forwarder.start();
      await s.scheduler.advance(0);
      s.state.broken = null;
      await s.scheduler.advance(10_000);
      await forwarder.stop();
      expect(forwarder.progress.forwarded).toBe(1);
      const reports = errors.filter((error) => error.code === "possible_duplicate");
      if (unknown) expect(reports).toMatchObject([{ requestIds: [event.id] }]);
      else expect(reports).toEqual([]);
    });
  }
});

