/**
 * The forwarder against a worker whose token may append some namespaces only.
 * The worker refuses a whole `append-batch` with 403 `forbidden_namespace`
 * when one event's namespace is not the token's: a refusal of the
 * credentials (a token with the wrong `append:` scope), as a token that may
 * not append at all (403 `forbidden`) is. The forwarder sends the batch again
 * one namespace at a time, forwards the namespaces the token covers, and
 * holds the others, uncharged and not quarantined, until the token may
 * append them: each event is charged one attempt whatever the wait.
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
  const appWith = (granted: Scope[]) => createApp({ journals: { usage: edge }, auth: { tokens: [{ name: "acme", token: TOKEN, scopes: granted }] } });
  let app = appWith(scopes);
  /** The operator fixes the token's scopes (the same token, the same journal). */
  const grant = (granted: Scope[]) => {
    app = appWith(granted);
  };
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
  /** What reached the edge since the last call (its reader claims and acknowledges it). */
  const edgeIds = async () => {
    const deliveries = await edge.claim(edgeReader, { maxEvents: 100, leaseMs: 1000, now: time.now });
    await edge.ackBatch(deliveries.map((delivery) => delivery.id));
    return deliveries.map((delivery) => delivery.event.id);
  };
  return { time, scheduler, source, append, forwarder, edgeIds, grant };
}

describe("forwarder and a token refused for one namespace", () => {
  it("events of the refused namespace filling the whole batch (one per subject) do not take its room: the namespaces the token covers still go", async () => {
    const { scheduler, source, append, forwarder, edgeIds, grant } = setup();
    const forbidden = [];
    for (const subject of ["x1", "x2", "x3"]) forbidden.push(await append("other", subject));
    const allowed = [];
    for (let i = 0; i < 5; i++) allowed.push(await append("acme", `a${i}`));
    forwarder.start();
    for (let i = 0; i < 60; i++) await scheduler.advance(5_000);
    expect((await edgeIds()).sort()).toEqual(allowed.map((event) => event.id).sort());
    expect(await source.stats(consumer)).toMatchObject({ pending: 0, inFlight: 3, quarantined: 0 });
    grant(["append:acme", "append:other"]);
    for (let i = 0; i < 12; i++) await scheduler.advance(5_000);
    await forwarder.stop();
    expect((await edgeIds()).sort()).toEqual(forbidden.map((event) => event.id).sort());
    expect(await source.stats(consumer)).toMatchObject({ pending: 0, inFlight: 0, quarantined: 0 });
  });

  it("forwards the rest of a batch and holds, uncharged, the event the token may not append; once it may, the event arrives (nothing quarantined)", async () => {
    const { scheduler, source, append, forwarder, edgeIds, grant } = setup();
    const allowed = [await append("acme", "a1")];
    const forbidden = await append("other", "x");
    allowed.push(await append("acme", "a2"));
    for (let i = 0; i < 4; i++) allowed.push(await append("acme", `later-${i}`));
    forwarder.start();
    for (let i = 0; i < 12; i++) await scheduler.advance(5_000);
    // The batch holding the refused event is still open, topped up with the others: `progress` counts what it forwarded.
    expect(forwarder.progress).toMatchObject({ forwarded: allowed.length, quarantined: 0, retried: 0, batches: 1, state: "backing_off" });
    expect(forwarder.progress.lastError?.message).toContain("forbidden_namespace");
    expect((await edgeIds()).sort()).toEqual(allowed.map((event) => event.id).sort());
    expect(await source.stats(consumer)).toMatchObject({ pending: 0, inFlight: 1, quarantined: 0 });
    grant(["append:acme", "append:other"]);
    for (let i = 0; i < 3; i++) await scheduler.advance(5_000);
    await forwarder.stop();
    expect(forwarder.progress).toMatchObject({ forwarded: 7, quarantined: 0 });
    expect(await edgeIds()).toEqual([forbidden.id]);
    expect((await source.attempts(consumer, forbidden.id)).map((attempt) => [attempt.attempt, attempt.outcome?.kind])).toEqual([[1, "acked"]]);
    expect(await source.stats(consumer)).toMatchObject({ pending: 0, inFlight: 0, quarantined: 0 });
  });

  it("holds a forbidden event claimed alone without charging it, forwards the other keys' events that come after it, and delivers it once the token may", async () => {
    const { scheduler, source, append, forwarder, edgeIds, grant } = setup();
    const forbidden = await append("other", "x");
    forwarder.start();
    await scheduler.advance(5_000);
    const later = [];
    for (let i = 0; i < 5; i++) later.push(await append("acme", `later-${i}`));
    for (let i = 0; i < 12; i++) await scheduler.advance(5_000);
    expect(forwarder.progress).toMatchObject({ quarantined: 0, retried: 0 });
    expect(forwarder.progress.lastError?.message).toContain("forbidden_namespace");
    expect((await edgeIds()).sort()).toEqual(later.map((event) => event.id).sort());
    expect((await source.listQuarantined(consumer, { limit: 10 })).items).toEqual([]);
    grant(["append:*"]);
    for (let i = 0; i < 3; i++) await scheduler.advance(5_000);
    await forwarder.stop();
    expect(await edgeIds()).toEqual([forbidden.id]);
    expect((await source.attempts(consumer, forbidden.id)).map((attempt) => [attempt.attempt, attempt.outcome?.kind])).toEqual([[1, "acked"]]);
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
