/**
 * What `HttpJournal` makes of the server's answers, beyond the journal's own
 * errors (which the conformance suite covers):
 * - a 2xx whose body is not the API's answer (a misrouted `baseUrl`, a
 *   proxy, a mock) fails typed, as `invalid_answer`, for every call; it never
 *   resolves, so an append is never taken for journaled on such an answer;
 * - batched appends: each request stays within the worker's body cap; a
 *   batch the worker refuses as a whole for one event's sake (413, 403) is
 *   sent again one by one, so each caller gets its own answer; and one
 *   client's requests go one after another, so an ordering key's events are
 *   journaled in call order; `appendBatch` splits a batch over the body cap
 *   into requests within it, sent one after another.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { HttpError, HttpJournal, type FetchLike, type HttpJournalOptions } from "../../src/http/index.js";
import type { JournalError} from "../../src/index.js";
import { BackendError, BILLING_GRADE, createJournal, createUsageEvent, MAX_EPOCH_MS, newRequestId, parseConsumerId, type AppendResult } from "../../src/index.js";
import { createApp, type Scope } from "../../src/worker/index.js";
import { rejection } from "./support/rejection.js";

const TOKEN = "answers-token-0123456789";
const billing = parseConsumerId("billing");

const event = (namespace = "acme", data: unknown = { tokens: 1 }) =>
  createUsageEvent({ record: { requestId: newRequestId(), namespace, subject: "user-1", data: data as never }, observedAt: 1_000 });

describe("HttpJournal: a 2xx answer that is not the API's", () => {
  /** A client whose every request is answered 200 with `body` as JSON; `requests` counts them. */
  function answering(body: unknown, options: Partial<HttpJournalOptions> = {}) {
    const requests: string[] = [];
    const fetch: FetchLike = async (url) => {
      requests.push(url);
      return { status: 200, headers: { get: () => null }, text: async () => JSON.stringify(body) };
    };
    const journal = new HttpJournal({ baseUrl: "http://isostore.test", journal: "usage", token: TOKEN, fetch, capacity: BILLING_GRADE, mode: "billing_grade", retry: { attempts: 3 }, batching: false, sleep: async () => {}, ...options });
    return { journal, requests };
  }

  function expectInvalidAnswer(error: JournalError): void {
    expect(error).toBeInstanceOf(BackendError);
    expect(error).toMatchObject({ code: "backend", retryable: false });
    expect(error.cause).toBeInstanceOf(HttpError);
    expect(error.cause).toMatchObject({ status: 200, code: "invalid_answer" });
  }

  const delivery = { consumer: billing, event: newRequestId(), attempt: 1 };
  const someEvent = event();
  const wellFormedDelivery = { id: delivery, event: { record: someEvent.record, observedAt: 1_000 }, leaseExpiresAt: 5_000 };
  const capacity = BILLING_GRADE;
  const attempt = { attempt: 1, claimedAt: 1, leaseExpiresAt: 2, outcome: null };
  const quarantined = { consumer: "billing", event: { record: someEvent.record, observedAt: 1_000 }, position: 1, reason: "rejected", quarantinedAt: 3, attempts: [attempt] };

  type Case = readonly [label: string, call: (journal: HttpJournal) => Promise<unknown>, bodies: readonly unknown[]];
  const cases: Case[] = [
    ["append", (journal) => journal.append(event()), [{}, null, [], { result: null }, { result: { status: "accepted" } }, { result: { status: "queued", position: 1 } }, { result: { status: "accepted", position: 1.5 } }, { result: { status: "accepted", position: "1" } }]],
    ["appendBatch", (journal) => journal.appendBatch([event()]), [{}, { results: [] }, { results: [null] }, { results: [{ status: "x" }] }, { results: [{ status: "rejected" }] }, { results: [{ status: "accepted", position: 1 }, { status: "accepted", position: 2 }] }]],
    ["ackBatch", (journal) => journal.ackBatch([delivery]), [{}, { results: [] }, { results: [null] }, { results: [{ ok: "yes" }] }, { results: [{ ok: false }] }]],
    ["ack", (journal) => journal.ack(delivery), [{ results: [null] }]],
    [
      "claim",
      (journal) => journal.claim(billing, { maxEvents: 1, leaseMs: 1_000, now: 0 }),
      [
        {},
        null,
        { deliveries: {} },
        { deliveries: [null] },
        { deliveries: [{ ...wellFormedDelivery, leaseExpiresAt: -1 }] },
        { deliveries: [{ ...wellFormedDelivery, id: { ...delivery, consumer: "" } }] }, // not a consumer id
        { deliveries: [{ ...wellFormedDelivery, event: { record: { ...someEvent.record, requestId: "nope" }, observedAt: 1 } }] }, // not an event
      ],
    ],
    ["extend", (journal) => journal.extend(delivery, { leaseMs: 1_000, now: 0 }), [{}, { leaseExpiresAt: "later" }]],
    ["quarantine", (journal) => journal.quarantine(delivery, "rejected"), [[], "ok", 1]],
    ["nack", (journal) => journal.nack(delivery, { retryAfterMs: 0, error: "x", now: 0 }), [[]]],
    ["release", (journal) => journal.release(billing, newRequestId(), { now: 0 }), [true]],
    ["stats", (journal) => journal.stats(billing), [{}, { pending: 0 }, { pending: 0, inFlight: 0, quarantined: 0, oldestPendingAgeMs: null, dropped: 0, capacity: { ...capacity, policy: "keep" } }]],
    ["attempts", (journal) => journal.attempts(billing, newRequestId()), [{}, { attempts: [{ ...attempt, outcome: { kind: "acked" } }] }, { attempts: [{ ...attempt, outcome: { kind: "quarantined", at: 1, reason: "bored" } }] }]],
    ["listQuarantined", (journal) => journal.listQuarantined(billing), [{}, { items: [] }, { items: [{ ...quarantined, reason: "x" }], nextCursor: null }, { items: [{ ...quarantined, consumer: "" }], nextCursor: null }]],
    ["listAudit", (journal) => journal.listAudit(), [{}, { items: [{ seq: 1 }], nextCursor: null }, { items: [], nextCursor: 5 }]],
    ["prune", (journal) => journal.prune({ now: 0 }), [{}, { pruned: -1 }]],
  ];

  for (const [label, call, bodies] of cases) {
    it(`${label}: a typed invalid_answer, not retried, never a result`, async () => {
      for (const body of bodies) {
        const { journal, requests } = answering(body);
        const error = await rejection(call(journal));
        expectInvalidAnswer(error);
        expect(requests, JSON.stringify(body)).toHaveLength(1);
      }
    });
  }

  it("batched appends: each caller gets invalid_answer (a lone one, and a batch answered with the wrong results)", async () => {
    for (const body of [{}, { result: {} }]) expectInvalidAnswer(await rejection(answering(body, { batching: {} }).journal.append(event())));
    const { journal, requests } = answering({ results: [{ status: "accepted", position: 1 }] }, { batching: {} });
    const errors = await Promise.all([journal.append(event()), journal.append(event())].map(rejection));
    for (const error of errors) expectInvalidAnswer(error);
    expect(requests).toHaveLength(1);
  });

  it("connect: a descriptor of the wrong shape is invalid_answer", async () => {
    const fetch: FetchLike = async () => ({ status: 200, headers: { get: () => null }, text: async () => JSON.stringify({ capacity: BILLING_GRADE, mode: "best_effort" }) });
    expectInvalidAnswer(await rejection(HttpJournal.connect({ baseUrl: "http://isostore.test", journal: "usage", token: TOKEN, fetch, retry: { attempts: 1 } })));
  });

  it("a well-formed answer with fields the client does not know still passes", async () => {
    const { journal } = answering({ result: { status: "accepted", position: 7, shard: 2 }, took: 3 });
    expect(await journal.append(event())).toMatchObject({ status: "accepted", position: 7 });
  });
});

describe("HttpJournal: batched appends", () => {
  interface Request {
    readonly route: string;
    readonly bytes: number;
    readonly status: number;
  }

  /** A client over the app over a memory journal; `requests` records each request as answered. */
  function served(options: { maxBodyBytes?: number; scopes?: Scope[]; token?: string; slowFirstMs?: number; batching?: HttpJournalOptions["batching"] } = {}) {
    const journal = createJournal(memoryEngine(), { name: "usage", capacity: BILLING_GRADE });
    const app = createApp({
      journals: { usage: journal },
      auth: { tokens: [{ name: "t", token: TOKEN, scopes: options.scopes ?? ["append:*"] }] },
      ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes }),
    });
    const requests: Request[] = [];
    let inFlight = 0;
    let mostInFlight = 0;
    const fetch: FetchLike = async (url, init) => {
      const first = requests.length === 0 && inFlight === 0;
      inFlight++;
      mostInFlight = Math.max(mostInFlight, inFlight);
      try {
        if (first && options.slowFirstMs) await new Promise((resolve) => setTimeout(resolve, options.slowFirstMs));
        const response = await app.fetch(new Request(url, init));
        requests.push({ route: url.slice(url.lastIndexOf("/") + 1), bytes: new TextEncoder().encode(init.body ?? "").length, status: response.status });
        return response;
      } finally {
        inFlight--;
      }
    };
    const client = new HttpJournal({ baseUrl: "http://isostore.test", journal: "usage", token: options.token ?? TOKEN, fetch, capacity: BILLING_GRADE, mode: "billing_grade", retry: { attempts: 1 }, batching: options.batching ?? {} });
    return { client, journal, requests, mostInFlight: () => mostInFlight };
  }

  /** What each call came to: its status, or the HTTP status of its error. */
  const outcomes = (settled: PromiseSettledResult<AppendResult>[]) =>
    settled.map((outcome) => (outcome.status === "fulfilled" ? outcome.value.status : (((outcome.reason as JournalError).cause as HttpError | undefined)?.status ?? (outcome.reason as JournalError).code)));

  it("a request stays within the worker's 1 MiB body cap: 20 appends of 60 KB travel in two batches, none refused", async () => {
    const { client, journal, requests } = served();
    const settled = await Promise.allSettled(Array.from({ length: 20 }, () => client.append(event("acme", { pad: "x".repeat(60_000) }))));
    expect(outcomes(settled)).toEqual(Array.from({ length: 20 }, () => "accepted"));
    expect(requests.map((request) => [request.route, request.status])).toEqual([
      ["append-batch", 200],
      ["append-batch", 200],
    ]);
    for (const request of requests) expect(request.bytes).toBeLessThanOrEqual(1024 * 1024);
    expect((await journal.stats(billing)).pending).toBe(20);
  });

  it("a batch refused with 413 (a worker with a smaller cap) is sent again one by one: each caller gets its own answer", async () => {
    const { client, journal, requests } = served({ maxBodyBytes: 4096 });
    const events = [event("acme", { pad: "x".repeat(1_500) }), event("acme", { pad: "x".repeat(5_000) }), event("acme", { pad: "x".repeat(1_500) })];
    const settled = await Promise.allSettled(events.map((each) => client.append(each)));
    expect(outcomes(settled)).toEqual(["accepted", 413, "accepted"]);
    expect(requests.map((request) => [request.route, request.status])).toEqual([
      ["append-batch", 413],
      ["append", 200],
      ["append", 413],
      ["append", 200],
    ]);
    expect((await journal.stats(billing)).pending).toBe(2);
  });

  it("a batch refused with 403 for one event's namespace is sent again one by one: the others are appended", async () => {
    const { client, journal } = served({ scopes: ["append:acme"] });
    const settled = await Promise.allSettled([event("acme"), event("other"), event("acme")].map((each) => client.append(each)));
    expect(outcomes(settled)).toEqual(["accepted", 403, "accepted"]);
    const refused = (settled[1] as PromiseRejectedResult).reason as JournalError;
    expect(refused).toBeInstanceOf(BackendError);
    expect(refused.cause).toMatchObject({ status: 403, code: "forbidden_namespace" });
    expect((await journal.stats(billing)).pending).toBe(2);
  });

  it("a batch refused for every event's sake (401) fails each caller at once, with no request one by one", async () => {
    const { client, requests } = served({ token: "not-the-token-0123456789" });
    const settled = await Promise.allSettled([event(), event(), event()].map((each) => client.append(each)));
    expect(outcomes(settled)).toEqual([401, 401, 401]);
    expect(requests).toHaveLength(1);
  });

  it("a batch refused because the token may not append at all (403 forbidden) fails each caller at once, with no request one by one", async () => {
    const { client, requests } = served({ scopes: ["consume"] });
    const settled = await Promise.allSettled([event(), event(), event()].map((each) => client.append(each)));
    expect(outcomes(settled)).toEqual([403, 403, 403]);
    expect(requests).toHaveLength(1);
  });

  it("one request at a time: an ordering key's appends are journaled in call order, a slow first request notwithstanding", async () => {
    const { client, journal, requests, mostInFlight } = served({ slowFirstMs: 30, batching: { maxEvents: 2 } });
    const events = Array.from({ length: 5 }, (_, call) => event("acme", { call }));
    const results = await Promise.all(events.map((each) => client.append(each)));
    expect(results.map((result) => result.position)).toEqual([1, 2, 3, 4, 5]);
    expect(mostInFlight()).toBe(1);
    expect(requests.map((request) => request.route)).toEqual(["append-batch", "append-batch", "append"]);
    const delivered = await journal.claim(billing, { maxEvents: 5, leaseMs: 1_000, now: 2_000 });
    expect(delivered.map((delivery) => delivery.event.id)).toEqual([events[0]!.id]); // one per key in flight: the first call's
  });

  it("batching: false: an ordering key's appends are journaled in call order, a slow first request notwithstanding; other keys go alongside", async () => {
    const { client, requests, mostInFlight } = served({ slowFirstMs: 30, batching: false });
    const [first, second, other] = [event("acme", { call: 0 }), event("acme", { call: 1 }), event("globex", { call: 2 })];
    const [r1, r2, r3] = await Promise.all([client.append(first), client.append(second), client.append(other)]);
    expect(r1.position).toBeLessThan(r2.position); // the second waited for the first, slow, request
    expect(r3.position).toBe(1); // another key's request went while the first was in flight
    expect(mostInFlight()).toBe(2);
    expect(requests.map((request) => request.route)).toEqual(["append", "append", "append"]);
    // Idle again: no key is remembered.
    await expect.poll(() => (client as unknown as { keyTails: Map<string, unknown> }).keyTails.size).toBe(0);
  });

  it("appendBatch keeps call order with the appends of its keys, batching on or off", async () => {
    for (const batching of [{}, false] as const) {
      const { client, journal } = served({ batching, ...(batching === false ? { slowFirstMs: 30 } : {}) });
      const [e1, e2, e3, e4] = [0, 1, 2, 3].map((call) => event("acme", { call }));
      const results = await Promise.all([client.append(e1!), client.appendBatch([e2!, event("globex")]), client.append(e3!), client.appendBatch([e4!])]);
      const positions = [results[0].position, (results[1][0] as AppendResult).position, results[2].position, (results[3][0] as AppendResult).position];
      expect(positions, `batching ${JSON.stringify(batching)}`).toEqual([...positions].sort((a, b) => a - b));
      const delivered = await journal.claim(billing, { maxEvents: 10, leaseMs: 1_000, now: 2_000 });
      expect(delivered.map((delivery) => delivery.event.id)).toContain(e1!.id);
    }
  });

  it("an appendBatch abandoned while it waits for an earlier append of its key does not let a later append of that key overtake the earlier one", async () => {
    const { client, journal } = served({ slowFirstMs: 40, batching: false });
    const [e1, e2, e3] = [0, 1, 2].map((call) => event("acme", { call }));
    const first = client.append(e1!);
    const abandon = new AbortController();
    const batch = client.appendBatch([e2!], { signal: abandon.signal });
    const third = client.append(e3!);
    abandon.abort(new Error("the caller gave up"));
    await expect(batch).rejects.toMatchObject({ code: "backend" });
    const [r1, r3] = await Promise.all([first, third]);
    expect(r1.position).toBeLessThan(r3.position); // the third waited for the first, slow, request
    expect((await journal.stats(billing)).pending).toBe(2);
    await expect.poll(() => (client as unknown as { keyTails: Map<string, unknown> }).keyTails.size).toBe(0);
  });

  /** An event of about 191 KiB of UTF-8 JSON (CJK text: 3 bytes a character): five fit in 1 MiB, six do not. */
  const large = (namespace = "acme") => event(namespace, { text: "漢".repeat(65_000) });

  it("appendBatch over the 1 MiB body cap goes in several requests within it, one after another, results in input order", async () => {
    const { client, journal, requests, mostInFlight } = served();
    const events = Array.from({ length: 12 }, () => large());
    const results = await client.appendBatch([...events.slice(0, 6), { not: "an event" } as never, ...events.slice(6)]);
    expect(results.map((result) => result.status)).toEqual([...Array.from({ length: 6 }, () => "accepted"), "rejected", ...Array.from({ length: 6 }, () => "accepted")]);
    expect(results.filter((result) => result.status !== "rejected").map((result) => result.position)).toEqual(Array.from({ length: 12 }, (_, index) => index + 1));
    expect(requests.map((request) => [request.route, request.status, request.bytes <= 1024 * 1024])).toEqual([
      ["append-batch", 200, true],
      ["append-batch", 200, true],
      ["append-batch", 200, true],
    ]);
    expect(mostInFlight()).toBe(1);
    expect((await journal.stats(billing)).pending).toBe(12);
  });

  it("appendBatch over the cap: a part refused whole throws its error; the parts before it stay journaled, the ones after are not sent", async () => {
    const { client, journal, requests } = served({ scopes: ["append:acme"] });
    const events = Array.from({ length: 12 }, (_, index) => large(index === 7 ? "other" : "acme"));
    const error = await rejection(client.appendBatch(events));
    expect(error.cause).toMatchObject({ status: 403, code: "forbidden_namespace" });
    expect(requests.map((request) => [request.route, request.status])).toEqual([
      ["append-batch", 200],
      ["append-batch", 403],
    ]);
    expect((await journal.stats(billing)).pending).toBe(5);
  });

  it("appends issued while a request is in flight go in the next one, after it is answered", async () => {
    const { client, requests, mostInFlight } = served({ slowFirstMs: 30 });
    const first = [client.append(event("acme", { call: 0 })), client.append(event("acme", { call: 1 }))];
    await new Promise((resolve) => setTimeout(resolve, 5));
    const later = [client.append(event("acme", { call: 2 })), client.append(event("acme", { call: 3 }))];
    const positions = (await Promise.all([...first, ...later])).map((result) => result.position);
    expect(positions).toEqual([1, 2, 3, 4]);
    expect(mostInFlight()).toBe(1);
    expect(requests.map((request) => request.route)).toEqual(["append-batch", "append-batch"]);
  });
});

describe("HttpJournal: events stored before times were bounded", () => {
  it("reads an answer holding an event observed after MAX_EPOCH_MS (stored before the bound), and still refuses to append it", async () => {
    const stored = { record: { requestId: "0190f100-0000-7000-8000-000000000001", namespace: "acme", subject: "user-1", data: { tokens: 1 } }, observedAt: MAX_EPOCH_MS + 1 };
    const delivery = { id: { consumer: "billing", event: stored.record.requestId, attempt: 1 }, event: { id: stored.record.requestId, orderingKey: { namespace: "acme", subject: "user-1" }, ...stored }, leaseExpiresAt: 5 };
    const fetch: FetchLike = async () => ({ status: 200, headers: { get: () => null }, text: async () => JSON.stringify({ deliveries: [delivery] }) });
    const journal = new HttpJournal({ baseUrl: "http://isostore.test", journal: "usage", token: TOKEN, fetch, capacity: BILLING_GRADE, mode: "billing_grade", batching: false });
    const [claimed] = await journal.claim(billing, { maxEvents: 1, leaseMs: 1000, now: 0 });
    expect(claimed!.event.observedAt).toBe(MAX_EPOCH_MS + 1);
    expect(await rejection(journal.append(claimed!.event))).toMatchObject({ code: "invalid_event", rule: "observed_at" });
  });
});

describe("HttpJournal: the server's clock from the Date header of its answers", () => {
  const HOUR_MS = 60 * 60 * 1000;
  /** A client answered by `answer(path)`: status, JSON body and Date header (null: none). */
  function dated(answer: (url: string) => { status: number; body: unknown; date: string | null }) {
    const fetch: FetchLike = async (url) => {
      const { status, body, date } = answer(url);
      return { status, headers: { get: (name: string) => (name.toLowerCase() === "date" ? date : null) }, text: async () => (typeof body === "string" ? body : JSON.stringify(body)) };
    };
    return new HttpJournal({ baseUrl: "http://isostore.test", journal: "usage", token: TOKEN, fetch, capacity: BILLING_GRADE, mode: "billing_grade", batching: false, retry: { attempts: 1 } });
  }
  const stats = { pending: 0, inFlight: 0, quarantined: 0, oldestPendingAgeMs: null, dropped: 0, capacity: BILLING_GRADE };

  it("is null before any dated answer, then the answer's date plus the time since, to the second", async () => {
    let date: string | null = null;
    const journal = dated(() => ({ status: 200, body: stats, date }));
    expect(journal.serverNow()).toBeNull();
    await journal.stats(billing);
    expect(journal.serverNow()).toBeNull(); // an answer without a Date header tells nothing
    date = new Date(Date.now() + 25 * HOUR_MS).toUTCString(); // a server clock 25 h ahead of this one
    await journal.stats(billing);
    const ahead = journal.serverNow()! - Date.now();
    expect(ahead).toBeGreaterThan(25 * HOUR_MS - 2_000);
    expect(ahead).toBeLessThanOrEqual(25 * HOUR_MS);
    date = "not a date"; // an unreadable header leaves the estimate as it was
    await journal.stats(billing);
    expect(journal.serverNow()! - Date.now()).toBeGreaterThan(25 * HOUR_MS - 2_000);
  });

  it("takes the API's error answers too, but not a page that is not the API's (a proxy's, a portal's)", async () => {
    let answer: { status: number; body: unknown; date: string | null } = { status: 502, body: "<html>Bad Gateway</html>", date: new Date(Date.now() + 10 * HOUR_MS).toUTCString() };
    const journal = dated(() => answer);
    await expect(journal.stats(billing)).rejects.toMatchObject({ code: "backend" });
    expect(journal.serverNow()).toBeNull();
    answer = { status: 200, body: "<html>Hotel WiFi</html>", date: new Date(Date.now() + 10 * HOUR_MS).toUTCString() };
    await expect(journal.stats(billing)).rejects.toMatchObject({ code: "backend" });
    expect(journal.serverNow()).toBeNull();
    answer = { status: 401, body: { error: { code: "unauthorized", message: "no", retryable: false } }, date: new Date(Date.now() - 3 * HOUR_MS).toUTCString() };
    await expect(journal.stats(billing)).rejects.toMatchObject({ code: "backend" });
    expect(journal.serverNow()! - (Date.now() - 3 * HOUR_MS)).toBeLessThan(2_000);
  });

  it("connect keeps what its descriptor's answer told", async () => {
    const date = new Date(Date.now() + 2 * HOUR_MS).toUTCString();
    const fetch: FetchLike = async () => ({ status: 200, headers: { get: (name: string) => (name.toLowerCase() === "date" ? date : null) }, text: async () => JSON.stringify({ name: "usage", capacity: BILLING_GRADE, mode: "billing_grade" }) });
    const journal = await HttpJournal.connect({ baseUrl: "http://isostore.test", journal: "usage", token: TOKEN, fetch });
    expect(journal.serverNow()! - Date.now()).toBeGreaterThan(2 * HOUR_MS - 2_000);
  });
});
