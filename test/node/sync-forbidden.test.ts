/**
 * The forwarder against a worker whose token may append some namespaces only.
 * The worker refuses a whole `append-batch` with 403 `forbidden_namespace`
 * when one event's namespace is not the token's: the forwarder splits the
 * batch, forwards the rest, and refuses for good (`rejected`) the event
 * refused alone. A token that may not append at all (403 `forbidden`) is a
 * refusal of the credentials: the batch waits, charged one attempt whatever
 * the wait.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { HttpJournal, type FetchLike } from "../../src/http/index.js";
import { BILLING_GRADE, createJournal, createUsageEvent, newRequestId, parseConsumerId, type Capacity } from "../../src/index.js";
import { createForwarder } from "../../src/sync/index.js";
import { virtualClock, virtualScheduler } from "../../src/testing/index.js";
import { createApp, type Scope } from "../../src/worker/index.js";

const START = 1_700_000_000_000;
const CAPACITY: Capacity = { maxEvents: 1_000, maxDeliveryAttempts: 4, retainAcknowledgedMs: 24 * 60 * 60 * 1000, policy: "refuse" };
const consumer = parseConsumerId("edge");
const TOKEN = "acme-only-token-0123456789";
const edgeReader = parseConsumerId("reader");

function setup(scopes: Scope[] = ["append:acme"]) {
  const time = virtualClock(START);
  const scheduler = virtualScheduler(time);
  const source = createJournal(memoryEngine(), { name: "local", capacity: CAPACITY, clock: time.clock });
  const edge = createJournal(memoryEngine(), { name: "usage", capacity: BILLING_GRADE });
  const app = createApp({ journals: { usage: edge }, auth: { tokens: [{ name: "acme", token: TOKEN, scopes }] } });
  const fetch: FetchLike = async (url, init) => app.fetch(new Request(url, init));
  const sink = new HttpJournal({ baseUrl: "http://edge.test", journal: "usage", token: TOKEN, fetch, capacity: BILLING_GRADE, mode: "billing_grade", retry: { attempts: 1 } });
  let serial = 0;
  const append = async (namespace: string, subject: string) => {
    const event = createUsageEvent({ record: { requestId: newRequestId(time.now + serial), namespace, subject, data: { serial: serial++ } }, observedAt: time.now });
    await source.append(event);
    return event;
  };
  const forwarder = createForwarder({
    source,
    consumer,
    sink,
    batchSize: 3,
    leaseMs: 10_000,
    backoff: { initialMs: 1000, maxMs: 8000, jitter: 0 },
    clock: time.clock,
    scheduler,
    pollIntervalMs: 5000,
  });
  const edgeIds = async () => (await edge.claim(edgeReader, { maxEvents: 100, leaseMs: 1000, now: time.now })).map((delivery) => delivery.event.id);
  return { time, scheduler, source, append, forwarder, edgeIds };
}

describe("forwarder and a token refused for one namespace", () => {
  it("forwards the rest of a batch and refuses for good the event the token may not append (the loop does not stop on it)", async () => {
    const { scheduler, source, append, forwarder, edgeIds } = setup();
    const allowed = [await append("acme", "a1")];
    const forbidden = await append("other", "x");
    allowed.push(await append("acme", "a2"));
    for (let i = 0; i < 4; i++) allowed.push(await append("acme", `later-${i}`));
    forwarder.start();
    for (let i = 0; i < 12; i++) await scheduler.advance(5_000);
    expect(forwarder.progress).toMatchObject({ forwarded: 6, quarantined: 1 });
    expect((await edgeIds()).sort()).toEqual(allowed.map((event) => event.id).sort());
    const quarantined = await source.listQuarantined(consumer, { limit: 10 });
    expect(quarantined.items.map((item) => [item.event.id, item.reason])).toEqual([[forbidden.id, "rejected"]]);
    await forwarder.stop();
  });

  it("refuses for good a forbidden event claimed alone, and forwards what comes after it", async () => {
    const { scheduler, source, append, forwarder, edgeIds } = setup();
    const forbidden = await append("other", "x");
    forwarder.start();
    await scheduler.advance(5_000);
    const later = [];
    for (let i = 0; i < 5; i++) later.push(await append("acme", `later-${i}`));
    for (let i = 0; i < 12; i++) await scheduler.advance(5_000);
    expect(forwarder.progress).toMatchObject({ forwarded: 5, quarantined: 1 });
    expect((await edgeIds()).sort()).toEqual(later.map((event) => event.id).sort());
    expect((await source.listQuarantined(consumer, { limit: 10 })).items.map((item) => [item.event.id, item.reason])).toEqual([[forbidden.id, "rejected"]]);
    await forwarder.stop();
  });

  it("claims nothing while the token may not append at all (403 forbidden): waiting charges no attempt", async () => {
    const { scheduler, source, append, forwarder, edgeIds } = setup(["operate"]);
    await append("acme", "a1");
    await append("acme", "a2");
    forwarder.start();
    for (let i = 0; i < 60; i++) await scheduler.advance(5_000);
    expect(forwarder.progress).toMatchObject({ forwarded: 0, quarantined: 0 });
    expect(forwarder.progress.lastError).toMatchObject({ code: "backend" });
    expect(await edgeIds()).toEqual([]);
    // The sink check before a claim (a call of no events) is refused too: nothing is claimed while it is.
    expect(await source.stats(consumer)).toMatchObject({ pending: 2, inFlight: 0, quarantined: 0 });
    await forwarder.stop();
    const attempts = await source.claim(consumer, { maxEvents: 10, leaseMs: 1000, now: START + 10 * 60_000 });
    expect(attempts.map((delivery) => delivery.id.attempt)).toEqual([1, 1]); // no attempt spent by the whole wait
  });
});
