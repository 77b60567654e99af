/**
 * The forwarder's guards against spending or losing events for the sink's faults: a billing-grade source is not
 * drained into a sink that drops accepted events when full; a poison event alone does not hold the loop for ever;
 * restarts and lapsed leases through an outage do not spend the events' delivery attempts.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { HttpJournal, type FetchLike } from "../../src/http/index.js";
import { BILLING_GRADE, createJournal, createUsageEvent, InvalidArgumentError, newRequestId, parseConsumerId } from "../../src/index.js";
import { createForwarder } from "../../src/sync/index.js";
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

  it("a poison event claimed alone is charged once the sink answers a call of no events, and the events behind it go", async () => {
    const POISON = newRequestId(1_700_000_000_000);
    const s = setup((body) => (body.includes(POISON) ? new Response(JSON.stringify({ error: { code: "internal", message: "the server failed" } }), { status: 500, headers: { "content-type": "application/json" } }) : undefined));
    await s.add(POISON, "u0");
    const f = createForwarder({ source: s.source, consumer, sink: await s.sink(), scheduler: s.scheduler, clock: s.time.clock });
    f.start();
    await s.scheduler.advance(1_000);
    for (let i = 1; i <= 5; i++) await s.add(newRequestId(s.time.now + i), `u${i}`);
    await s.scheduler.advance(60 * 60 * 1000);
    await f.stop();
    expect(await s.source.stats(consumer)).toMatchObject({ pending: 0, inFlight: 0, quarantined: 1 });
    expect((await s.source.listQuarantined(consumer, {})).items.map((item) => [item.event.id, item.reason])).toEqual([[POISON, "attempts_exhausted"]]);
    expect((await s.edge.stats(parseConsumerId("billing"))).pending).toBe(5);
  });

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
