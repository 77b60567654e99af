/**
 * The forwarder's totals while a batch stays open. A batch held for a
 * namespace the token may not append (403 `forbidden_namespace`) goes on for
 * as long as the token is wrong, while the other namespaces' events flow
 * through top-ups of that same batch: `progress.forwarded` (and
 * `quarantined`, `retried`) move as each send settles, with a `progress`
 * event, and the batch's end adds only what was not counted yet.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { HttpJournal, type FetchLike } from "../../src/http/index.js";
import { createJournal, createUsageEvent, newRequestId, parseConsumerId, type Capacity, type UsageEvent } from "../../src/index.js";
import { createForwarder, type BatchReport, type ForwarderProgress } from "../../src/sync/index.js";
import { virtualClock, virtualScheduler } from "../../src/testing/index.js";
import { createApp, type Scope } from "../../src/worker/index.js";

const START = 1_700_000_000_000;
const CAPACITY: Capacity = { maxEvents: 1_000, maxDeliveryAttempts: 4, retainAcknowledgedMs: 24 * 60 * 60 * 1000, policy: "refuse" };
const consumer = parseConsumerId("edge");
const TOKEN = "acme-only-token-0123456789";

/** A source forwarded to a worker whose token may append `acme` only, until `grant` fixes its scopes. */
function setup() {
  const time = virtualClock(START);
  const scheduler = virtualScheduler(time);
  const source = createJournal(memoryEngine(), { name: "local", capacity: CAPACITY, clock: time.clock });
  const edge = createJournal(memoryEngine(), { name: "usage", capacity: CAPACITY, clock: time.clock });
  const appWith = (scopes: Scope[]) => createApp({ journals: { usage: edge }, auth: { tokens: [{ name: "acme", token: TOKEN, scopes }] }, clock: time.clock });
  let app = appWith(["append:acme"]);
  const grant = (scopes: Scope[]) => {
    app = appWith(scopes);
  };
  const fetch: FetchLike = async (url, init) => app.fetch(new Request(url, init));
  const sink = new HttpJournal({ baseUrl: "http://edge.test", journal: "usage", token: TOKEN, fetch, capacity: CAPACITY, mode: "billing_grade", retry: { attempts: 1 } });
  let serial = 0;
  const make = (namespace: string, subject: string) =>
    createUsageEvent({ record: { requestId: newRequestId(time.now + serial), namespace, subject, data: { serial: serial++ } }, observedAt: time.now });
  const append = async (namespace: string, subject: string) => {
    const event = make(namespace, subject);
    expect((await source.append(event)).status).toBe("accepted");
    return event;
  };
  const forwarder = createForwarder({ source, consumer, sink, batchSize: 3, leaseMs: 10_000, backoff: { initialMs: 1_000, maxMs: 8_000, jitter: 0 }, clock: time.clock, scheduler, pollIntervalMs: 5_000 });
  const progress: ForwarderProgress[] = [];
  const batches: BatchReport[] = [];
  forwarder.addEventListener("progress", (event) => progress.push(event.detail));
  forwarder.addEventListener("batch", (event) => batches.push(event.detail));
  /** Step virtual time by `stepMs` until `done` (at most `steps` times): the worker's answers take real turns too. */
  const until = async (done: () => boolean, stepMs: number, steps = 40) => {
    for (let i = 0; i < steps && !done(); i++) await scheduler.advance(stepMs);
  };
  return { time, scheduler, source, edge, grant, make, append, forwarder, progress, batches, until };
}

describe("forwarder totals while a batch is held", () => {
  it("progress.forwarded moves as the top-ups of a batch held for a refused namespace are forwarded, and the batch's end does not count them again", async () => {
    const { source, grant, append, forwarder, progress, batches, until } = setup();
    const refused = await append("other", "x");
    forwarder.start();
    await until(() => forwarder.progress.state === "backing_off", 1_000);
    expect(forwarder.progress).toMatchObject({ state: "backing_off", forwarded: 0, batches: 1 });
    const allowed: UsageEvent[] = [];
    for (let i = 0; i < 5; i++) {
      allowed.push(await append("acme", `a${i}`));
      await until(() => forwarder.progress.forwarded > i, 1_000);
      // Taken into the held batch at its next resend and forwarded: counted now, while the batch is still open.
      // And `pending` with them, read after the send (the batch, held open, has not ended to read it).
      expect(forwarder.progress).toMatchObject({ state: "backing_off", forwarded: i + 1, quarantined: 0, retried: 0, batches: 1, pending: 0 });
      expect(progress.at(-1)).toMatchObject({ forwarded: i + 1, pending: 0 });
    }
    expect(batches).toEqual([]); // the one batch has not ended
    expect(await source.stats(consumer)).toMatchObject({ pending: 0, inFlight: 1, quarantined: 0 });
    // Each step of the total was told by a progress event.
    const seen = [...new Set(progress.map((p) => p.forwarded))];
    expect(seen).toEqual([0, 1, 2, 3, 4, 5]);

    grant(["append:*"]);
    await until(() => batches.length > 0, 1_000);
    await forwarder.stop();
    expect(batches).toHaveLength(1);
    expect(batches[0]).toMatchObject({ claimed: 6, forwarded: 6, quarantined: 0, retried: 0 });
    expect(forwarder.progress).toMatchObject({ forwarded: 6, quarantined: 0, retried: 0, batches: 1 });
    for (const event of [refused, ...allowed]) expect((await source.attempts(consumer, event.id)).map((a) => [a.attempt, a.outcome?.kind])).toEqual([[1, "acked"]]);
  });

  it("progress.quarantined moves as a top-up the sink refuses for good is quarantined, counted once", async () => {
    const { source, edge, grant, make, append, forwarder, batches, until } = setup();
    await append("other", "x");
    forwarder.start();
    await until(() => forwarder.progress.state === "backing_off", 1_000);
    // The edge holds another record under the request id of the next event: a permanent per-event conflict.
    const clash = make("acme", "a0");
    await edge.append(createUsageEvent({ record: { ...clash.record, data: { other: true } }, observedAt: clash.observedAt }));
    expect((await source.append(clash)).status).toBe("accepted");
    const good = await append("acme", "a1");
    await until(() => forwarder.progress.quarantined > 0 && forwarder.progress.forwarded > 0, 1_000);
    expect(forwarder.progress).toMatchObject({ state: "backing_off", forwarded: 1, quarantined: 1, batches: 1 });
    expect((await source.listQuarantined(consumer, {})).items.map((item) => [item.event.id, item.reason])).toEqual([[clash.id, "rejected"]]);
    grant(["append:*"]);
    await until(() => batches.length > 0, 1_000);
    await forwarder.stop();
    expect(batches).toMatchObject([{ claimed: 3, forwarded: 2, quarantined: 1 }]);
    expect(forwarder.progress).toMatchObject({ forwarded: 2, quarantined: 1, batches: 1 });
    expect((await source.attempts(consumer, good.id)).map((a) => a.outcome?.kind)).toEqual(["acked"]);
    expect(await source.stats(consumer)).toMatchObject({ pending: 0, inFlight: 0, quarantined: 1 });
  });

  it("a batch that is not held adds its counts once, when it ends, with no progress event of its own before", async () => {
    const { append, forwarder, progress, batches, until } = setup();
    for (let i = 0; i < 7; i++) await append("acme", `a${i}`);
    forwarder.start();
    await until(() => batches.length === 3, 0, 200); // no time passes: no idle poll after them
    await forwarder.stop();
    expect(batches.map((batch) => batch.forwarded)).toEqual([3, 3, 1]);
    expect(forwarder.progress).toMatchObject({ forwarded: 7, batches: 3 });
    // One progress event per batch, as it ended, with the total then (and one more for the claim that found nothing, if it ran).
    expect(progress.map((p) => p.forwarded).slice(0, 3)).toEqual([3, 6, 7]);
  });
});
