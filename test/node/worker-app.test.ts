/**
 * The HTTP layer of `isostore/worker` over a memory journal: auth and scopes,
 * the error mapping, body and content-type gates, CORS, the operator routes
 * (filters, bulk with a dry run, NDJSON export, audit by event), the audit
 * actor, and the OpenAPI document (validated, and the validator shown to
 * refuse a broken one).
 */
import { validate } from "@readme/openapi-parser";
import { describe, expect, it, vi } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { HttpJournal, type FetchLike } from "../../src/http/index.js";
import { BackendError, createJournal, createUsageEvent, parseConsumerId, type Capacity, type DeliveryId, type UsageJournal } from "../../src/index.js";
import { encodeAcks, encodeBatch } from "../../src/journal/wire.js";
import { MAX_BULK, MAX_ITEM_TEXT, createApp, type AppOptions } from "../../src/worker/index.js";

const OPS = "operator-token-0123456789";
const CONSUME = "consumer-token-0123456789";
const ACME = "acme-producer-token-01234";
const STORES_ONLY = "stores-only-token-0123456789";
const t0 = 1_700_000_000_000;
const billing = parseConsumerId("billing");
const rid = (n: number) => `0190b000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`;
const CAPACITY: Capacity = { maxEvents: 50, maxDeliveryAttempts: 3, retainAcknowledgedMs: 60_000, policy: "refuse" };

function setup(extra: Partial<AppOptions> = {}, capacity: Capacity = CAPACITY) {
  let now = t0;
  const journal = createJournal(memoryEngine(), { name: "usage", capacity, clock: () => now });
  const app = createApp({
    journals: { usage: { journal, consumers: ["billing"] } },
    auth: {
      tokens: [
        { name: "ops", token: OPS, scopes: ["operate", "consume", "append:*"] },
        { name: "worker", token: CONSUME, scopes: ["consume"] },
        { name: "acme-producer", token: ACME, scopes: ["append:acme"] },
        { name: "stores-only", token: STORES_ONLY, scopes: ["store:*"] },
      ],
    },
    clock: () => now,
    ...extra,
  });
  const call = async (method: string, path: string, options: { token?: string | null; body?: unknown; headers?: Record<string, string> } = {}) => {
    const headers: Record<string, string> = { ...(options.token === null ? {} : { authorization: `Bearer ${options.token ?? OPS}` }) };
    if (options.body !== undefined) headers["content-type"] = "application/json";
    const response = await app.fetch(
      new Request(`http://isostore.test${path}`, {
        method,
        headers: { ...headers, ...options.headers },
        ...(options.body === undefined ? {} : { body: typeof options.body === "string" ? options.body : JSON.stringify(options.body) }),
      }),
    );
    const text = await response.text();
    let json: unknown = undefined;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: response.status, headers: response.headers, text, json: json as Record<string, unknown> & { error?: { code: string; message: string } } };
  };
  const fetch: FetchLike = async (url, init) => app.fetch(new Request(url, init));
  const client = new HttpJournal({ baseUrl: "http://isostore.test", journal: "usage", token: OPS, fetch, capacity, mode: journal.mode });
  return { app, journal, call, client, advance: (ms: number) => (now += ms) };
}

const event = (n: number, namespace = "acme", subject = `user-${n}`) => ({ record: { requestId: rid(n), namespace, subject, data: { tokens: n } }, observedAt: t0 });

/** Append `count` events, claim them all, quarantine them with the given reasons (cycled). */
async function quarantined(journal: UsageJournal, count: number, reasons: ("malformed" | "rejected" | "attempts_exhausted")[]) {
  for (let n = 1; n <= count; n++) await journal.append(createUsageEvent(event(n, n % 2 === 0 ? "acme" : "globex", `user-${n}`)));
  const deliveries = await journal.claim(billing, { maxEvents: count, leaseMs: 60_000, now: t0 });
  for (const [index, delivery] of deliveries.entries()) await journal.quarantine(delivery.id, reasons[index % reasons.length]!);
}

describe("auth and scopes", () => {
  it("health is the only open route; a missing, malformed or unknown token is 401", async () => {
    const { call } = setup();
    expect((await call("GET", "/v1/health", { token: null })).status).toBe(200);
    for (const path of ["/v1/journals", "/v1/openapi.json", "/v1/journals/usage/consumers/billing/stats"]) {
      expect((await call("GET", path, { token: null })).json.error?.code).toBe("unauthorized");
    }
    expect((await call("GET", "/v1/journals", { token: "not-a-token-of-ours-at-all" })).status).toBe(401);
    expect((await call("GET", "/v1/journals", { headers: { authorization: `Basic ${OPS}` }, token: null })).status).toBe(401);
    expect((await call("GET", "/v1/journals", { headers: { cookie: `token=${OPS}` }, token: null })).status).toBe(401);
  });

  it("append is scoped by namespace, for single appends and whole batches", async () => {
    const { call, journal } = setup();
    expect((await call("POST", "/v1/journals/usage/append", { token: ACME, body: { event: event(1, "acme") } })).status).toBe(200);
    const refused = await call("POST", "/v1/journals/usage/append", { token: ACME, body: { event: event(2, "globex") } });
    expect([refused.status, refused.json.error?.code]).toEqual([403, "forbidden_namespace"]);
    const batch = await call("POST", "/v1/journals/usage/append-batch", { token: ACME, body: { events: [event(3, "acme"), event(4, "globex")] } });
    expect(batch.status).toBe(403);
    expect((await journal.stats(billing)).pending).toBe(1);
  });

  it("consume cannot operate; append cannot consume", async () => {
    const { call } = setup();
    expect((await call("GET", "/v1/journals/usage/consumers/billing/quarantined", { token: CONSUME })).status).toBe(403);
    expect((await call("POST", "/v1/journals/usage/prune", { token: CONSUME, body: {} })).status).toBe(403);
    expect((await call("POST", "/v1/journals/usage/claim", { token: ACME, body: { consumer: "billing", maxEvents: 1, leaseMs: 1000 } })).status).toBe(403);
    expect((await call("GET", "/v1/journals/usage/consumers/billing/stats", { token: CONSUME })).status).toBe(200);
  });
});

describe("gates and the error mapping", () => {
  it("refuses a form POST (415), an oversize body (413), a wrong method (405), unknown routes and journals (404)", async () => {
    const { call, journal } = setup({ maxBodyBytes: 4096 });
    const form = await call("POST", "/v1/journals/usage/consumers/billing/quarantined/" + rid(1) + "/release", {
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "now=1",
    });
    expect([form.status, form.json.error?.code]).toEqual([415, "unsupported_media_type"]);
    const big = await call("POST", "/v1/journals/usage/append", { body: { event: { ...event(1), record: { ...event(1).record, data: "x".repeat(5000) } } } });
    expect([big.status, big.json.error?.code]).toEqual([413, "payload_too_large"]);
    expect((await call("DELETE", "/v1/journals/usage/append")).json.error?.code).toBe("method_not_allowed");
    expect((await call("GET", "/v1/nothing-here")).json.error?.code).toBe("not_found");
    expect((await call("GET", "/v1/journals/other/consumers/billing/stats")).json.error?.code).toBe("unknown_journal");
    expect((await journal.stats(billing)).pending).toBe(0);
  });

  it("maps journal errors to statuses, with the typed fields; at_capacity is 503 with Retry-After", async () => {
    const { call } = setup({}, { ...CAPACITY, maxEvents: 1 });
    expect((await call("POST", "/v1/journals/usage/append", { body: { event: event(1) } })).status).toBe(200);
    const conflict = await call("POST", "/v1/journals/usage/append", { body: { event: { ...event(1), record: { ...event(1).record, data: 2 } } } });
    expect([conflict.status, conflict.json.error?.code]).toEqual([409, "conflict"]);
    const full = await call("POST", "/v1/journals/usage/append", { body: { event: event(2) } });
    expect([full.status, full.json.error?.code, full.headers.get("retry-after")]).toEqual([503, "at_capacity", "1"]);
    expect((full.json.error as unknown as { fields: { pending: number } }).fields.pending).toBe(1);
    const stray = await call("POST", "/v1/journals/usage/ack", { body: { deliveries: [{ consumer: "billing", event: rid(9), attempt: 1 }] } });
    expect(stray.status).toBe(200);
    expect((stray.json["results"] as { ok: boolean; error: { code: string } }[])[0]!.error.code).toBe("not_outstanding");
    const invalid = await call("POST", "/v1/journals/usage/claim", { body: { consumer: "billing", maxEvents: 0, leaseMs: 1000 } });
    expect([invalid.status, invalid.json.error?.code]).toEqual([400, "invalid_request"]);
  });

  it("answers a bad event or consumer name with the journal's own error (code and rule), as a local call would", async () => {
    const { call, journal } = setup();
    const noSubject = await call("POST", "/v1/journals/usage/append", { body: { event: event(1, "acme", "") } });
    expect([noSubject.status, noSubject.json.error?.code, (noSubject.json.error as unknown as { fields: { rule: string } }).fields.rule]).toEqual([400, "invalid_event", "subject"]);
    const badId = await call("POST", "/v1/journals/usage/append", { body: { event: { ...event(1), record: { ...event(1).record, requestId: "not-a-uuid" } } } });
    expect([badId.status, badId.json.error?.code]).toEqual([400, "invalid_event"]);
    const upper = await call("POST", "/v1/journals/usage/claim", { body: { consumer: "Billing", maxEvents: 1, leaseMs: 1000 } });
    expect([upper.status, upper.json.error?.code, (upper.json.error as unknown as { fields: { rule: string } }).fields.rule]).toEqual([400, "invalid_consumer_id", "character"]);
    const inPath = await call("GET", "/v1/journals/usage/consumers/Bad%20Name/stats");
    expect([inPath.status, inPath.json.error?.code]).toEqual([400, "invalid_consumer_id"]);
    // In a batch, a bad consumer is the journal's to reject in place (see the next test).
    const inAck = await call("POST", "/v1/journals/usage/ack", { body: { deliveries: [{ consumer: "", event: rid(1), attempt: 1 }] } });
    expect([inAck.status, inAck.json["results"]]).toMatchObject([200, [{ ok: false, error: { code: "invalid_consumer_id", fields: { consumer: "", rule: "empty" } } }]]);
    // A field the journal does not check itself stays a schema error.
    const badLimit = await call("POST", "/v1/journals/usage/claim", { body: { consumer: "billing", maxEvents: 0, leaseMs: 1000 } });
    expect([badLimit.status, badLimit.json.error?.code]).toEqual([400, "invalid_request"]);
    expect((await journal.stats(billing)).pending).toBe(0);
  });

  it("rejects a bad event or delivery of a batch in place and handles the rest, as a local journal does with the same batch", async () => {
    const local = createJournal(memoryEngine(), { name: "local", capacity: CAPACITY, clock: () => t0 });
    /** The batch as a caller hands it to a journal: built events, and the invalid ones as sent. */
    const asEvents = (wires: readonly ReturnType<typeof event>[]) =>
      wires.map((wire) => {
        try {
          return createUsageEvent(wire);
        } catch {
          return wire as never;
        }
      });
    const withRecord = (n: number, change: Record<string, unknown>) => ({ ...event(n), record: { ...event(n).record, ...change } });
    const events = [event(1), withRecord(2, { requestId: "not-a-uuid" }), event(3, "acme", ""), withRecord(4, { namespace: "n".repeat(257) }), { ...event(5), observedAt: -1 }, event(6)];
    const expected = encodeBatch(await local.appendBatch(asEvents(events)));
    expect(expected.map((result) => (result.status === "rejected" ? result.error.fields["rule"] : result.status))).toEqual(["accepted", "request_id", "subject", "namespace", "observed_at", "accepted"]);

    // Over HTTP, with a token scoped to `acme`: the invalid `n…` namespace is rejected in place, never appended.
    const { call, journal, client } = setup();
    const appended = await call("POST", "/v1/journals/usage/append-batch", { token: ACME, body: { events } });
    expect([appended.status, appended.json["results"]]).toEqual([200, expected]);
    expect(encodeBatch(await setup().client.appendBatch(asEvents(events)))).toEqual(expected);

    // Both journals hold events 1 and 6; ack a batch of their deliveries with bad ones between them.
    const claimed = await call("POST", "/v1/journals/usage/claim", { body: { consumer: "billing", maxEvents: 10, leaseMs: 60_000 } });
    const ids = (claimed.json["deliveries"] as { id: DeliveryId }[]).map((delivery) => delivery.id);
    expect(ids.map((id) => id.event)).toEqual([rid(1), rid(6)]);
    expect((await local.claim(billing, { maxEvents: 10, leaseMs: 60_000, now: t0 })).map((delivery) => delivery.id)).toEqual(ids);
    const deliveries = [
      ids[0]!,
      { consumer: "", event: rid(1), attempt: 1 },
      { consumer: "Billing", event: rid(1), attempt: 1 },
      { consumer: "b".repeat(64), event: rid(1), attempt: 1 },
      { consumer: "billing", event: "not-a-uuid", attempt: 1 },
      { consumer: "billing", event: rid(6), attempt: 0 },
      ids[1]!,
    ] as DeliveryId[];
    const acks = encodeAcks(await local.ackBatch(deliveries));
    expect(acks.map((result) => (result.ok ? "ok" : `${result.error.code} ${String(result.error.fields["rule"] ?? result.error.fields["argument"])}`))).toEqual([
      "ok",
      "invalid_consumer_id empty",
      "invalid_consumer_id character",
      "invalid_consumer_id too_long",
      "invalid_argument delivery.event",
      "invalid_argument delivery.attempt",
      "ok",
    ]);
    const acked = await call("POST", "/v1/journals/usage/ack", { token: CONSUME, body: { deliveries } });
    expect([acked.status, acked.json["results"]]).toEqual([200, acks]);
    expect(await journal.stats(billing)).toEqual(await local.stats(billing));
    expect((await journal.stats(billing)).inFlight).toBe(0);
    // The client checks the same rules before sending, and answers the same (the acks are idempotent).
    expect(encodeAcks(await client.ackBatch(deliveries))).toEqual(encodeAcks(await local.ackBatch(deliveries)));
  });

  it("the client rebuilds typed errors from answers", async () => {
    const { client } = setup({}, { ...CAPACITY, maxEvents: 1 });
    await client.append(createUsageEvent(event(1)));
    await expect(client.append(createUsageEvent(event(2)))).rejects.toMatchObject({ name: "AtCapacityError", code: "at_capacity", pending: 1 });
    await expect(client.ack({ consumer: billing, event: rid(1), attempt: 1 })).rejects.toMatchObject({ name: "NotOutstandingError", code: "not_outstanding" });
  });

  it("takes the auth scheme in any case, and `append` alone as `append:*`", async () => {
    const { call } = setup();
    for (const scheme of ["bearer", "BEARER", "Bearer  "]) {
      const answer = await call("GET", "/v1/journals/usage/consumers/billing/stats", { token: null, headers: { authorization: `${scheme} ${OPS}` } });
      expect([scheme, answer.status]).toEqual([scheme, 200]);
    }
    const PRODUCER = "any-producer-token-012345";
    const { call: callWide } = setup({ auth: { tokens: [{ name: "producer", token: PRODUCER, scopes: ["append"] }] } });
    const appended = await callWide("POST", "/v1/journals/usage/append", { token: PRODUCER, body: { event: event(1) } });
    expect(appended.status).toBe(200);
    expect((await callWide("GET", "/v1/journals/usage/consumers/billing/stats", { token: PRODUCER })).status).toBe(403);
  });

  it("refuses bad options at construction with the field named, instead of falling back to a default", () => {
    const bad: [Partial<AppOptions>, string][] = [
      [{ maxBodyBytes: -1 }, "maxBodyBytes"],
      [{ maxBodyBytes: Number.NaN }, "maxBodyBytes"],
      [{ maxBodyBytes: "4096" as unknown as number }, "maxBodyBytes"],
      [{ auditActor: "callr" as unknown as "caller" }, "auditActor"],
      [{ corsOrigins: ["app.example"] }, "corsOrigins"],
      [{ corsOrigins: "*" as unknown as string[] }, "corsOrigins"],
      [{ clock: 5 as unknown as () => number }, "clock"],
      [{ assets: {} as unknown as NonNullable<AppOptions["assets"]> }, "assets"],
      [{ journals: null as unknown as AppOptions["journals"] }, "journals"],
    ];
    for (const [extra, field] of bad) expect(() => setup(extra), field).toThrow(expect.objectContaining({ code: "invalid_argument", argument: field }) as Error);
    expect(() => setup({ maxBodyBytes: 1, corsOrigins: ["*", "http://localhost:8787"], auditActor: "caller" })).not.toThrow();
  });

  it("refuses journal names no route can address: a record's at construction, a journals() function's as the server's fault (500)", async () => {
    const journal = createJournal(memoryEngine(), { name: "usage" });
    for (const name of ["Usage.v2", "", "a".repeat(64), "usage/x"]) {
      expect(() => setup({ journals: { ok: journal, [name]: journal } }), name).toThrow(expect.objectContaining({ code: "invalid_argument", argument: "journals" }) as Error);
    }
    const logged = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const { call } = setup({ journals: () => ({ usage: journal, "Usage.v2": journal }) });
      for (const path of ["/v1/journals", "/v1/journals/Usage.v2", "/v1/journals/usage"]) {
        const answer = await call("GET", path);
        expect(answer.status, path).toBe(500);
        expect(answer.json.error?.code).toBe("internal");
      }
      expect((logged.mock.calls[0]?.[1] as Error).message).toContain('"Usage.v2"');
    } finally {
      logged.mockRestore();
    }
    expect((await setup({ journals: () => ({ usage: journal }) }).call("GET", "/v1/journals/usage")).status).toBe(200);
  });

  it("dates every answer with its own clock (ok, refused, no token), exposed to cross-origin pages, so a client can read the server's time", async () => {
    const { call, client, advance } = setup({ corsOrigins: ["https://app.example"] });
    advance(86_400_000 + 1234);
    const dated = (response: { headers: Headers }) => Date.parse(response.headers.get("date") ?? "");
    const second = Math.floor((t0 + 86_400_000 + 1234) / 1000) * 1000;
    expect(dated(await call("GET", "/v1/journals"))).toBe(second);
    expect(dated(await call("GET", "/v1/journals/nope"))).toBe(second);
    expect(dated(await call("GET", "/v1/journals", { token: null }))).toBe(second);
    expect(dated(await call("GET", "/v1/health", { token: null }))).toBe(second);
    const cross = await call("GET", "/v1/journals", { headers: { origin: "https://app.example" } });
    expect(cross.headers.get("access-control-expose-headers")?.split(",").map((name) => name.trim().toLowerCase())).toContain("date");
    await client.stats(billing);
    expect(client.serverNow()).toBeGreaterThanOrEqual(second);
  });

  it("answers CORS preflights only for configured origins", async () => {
    const { call } = setup({ corsOrigins: ["https://app.example"] });
    const allowed = await call("OPTIONS", "/v1/journals/usage/append", { token: null, headers: { origin: "https://app.example", "access-control-request-method": "POST" } });
    expect(allowed.headers.get("access-control-allow-origin")).toBe("https://app.example");
    const other = await call("OPTIONS", "/v1/journals/usage/append", { token: null, headers: { origin: "https://evil.example", "access-control-request-method": "POST" } });
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("operator routes", () => {
  it("filter by reason and key; newest first; bulk dry run then apply; export NDJSON; audit by event with the token's name", async () => {
    const { call, journal } = setup();
    await quarantined(journal, 6, ["malformed", "rejected"]);
    const list = await call("GET", "/v1/journals/usage/consumers/billing/quarantined?reason=rejected&order=newest");
    expect((list.json["items"] as { position: number }[]).map((item) => item.position)).toEqual([6, 4, 2]);
    const byKey = await call("GET", "/v1/journals/usage/consumers/billing/quarantined?key=acme%2Fuser-4");
    expect((byKey.json["items"] as { event: { id: string } }[]).map((item) => item.event.id)).toEqual([rid(4)]);

    const dry = await call("POST", "/v1/journals/usage/consumers/billing/quarantined/bulk", { body: { action: "release", dryRun: true, reason: "malformed" } });
    expect(dry.json).toMatchObject({ matched: 3, requestIds: [rid(1), rid(3), rid(5)], applied: 0, more: false });
    expect((await journal.stats(billing)).quarantined).toBe(6);
    // The body's `actor` is recorded only with `auditActor: "caller"`: here the token names the actor.
    const done = await call("POST", "/v1/journals/usage/consumers/billing/quarantined/bulk", { body: { action: "release", dryRun: false, reason: "malformed", actor: "mallory" } });
    expect(done.json).toMatchObject({ matched: 3, applied: 3, failed: [] });
    expect((await journal.stats(billing)).quarantined).toBe(3);
    expect((await call("GET", `/v1/journals/usage/audit?requestId=${rid(1)}`)).json["items"]).toMatchObject([{ action: "release", requestId: rid(1), actor: "ops" }]);

    const discard = await call("POST", `/v1/journals/usage/consumers/billing/quarantined/${rid(2)}/discard`, { body: { actor: "mallory" } });
    expect(discard.status).toBe(200);
    const audit = await call("GET", `/v1/journals/usage/audit?requestId=${rid(2)}`);
    expect(audit.json["items"]).toMatchObject([{ action: "discard", requestId: rid(2), actor: "ops" }]);

    const exported = await call("GET", "/v1/journals/usage/consumers/billing/quarantined/export?reason=rejected");
    expect(exported.headers.get("content-type")).toContain("application/x-ndjson");
    const lines = exported.text.trim().split("\n").map((line) => JSON.parse(line) as { event: { id: string }; attempts: unknown[] });
    expect(lines.map((line) => line.event.id)).toEqual([rid(4), rid(6)]);
    expect(lines.every((line) => line.attempts.length === 1)).toBe(true);
  });

  it("a bulk filter holding a lone surrogate is refused (the same filter in the list's query string arrives as U+FFFD), and an event cannot be keyed by one", async () => {
    const { call, journal } = setup();
    const bulk = "/v1/journals/usage/consumers/billing/quarantined/bulk";
    for (const filter of [{ namespace: "lone\ud800" }, { subject: "\udc00" }, { query: "a\ud800" }, { key: "a/\ud800" }]) {
      const refused = await call("POST", bulk, { body: { action: "discard", dryRun: true, ...filter } });
      expect([refused.status, refused.json.error?.code], JSON.stringify(filter)).toEqual([400, "invalid_request"]);
    }
    const appended = await call("POST", "/v1/journals/usage/append", { body: { event: { ...event(1), record: { ...event(1).record, namespace: "lone\ud800" } } } });
    const refusal = appended.json.error as { code: string; fields?: Record<string, unknown> } | undefined;
    expect([appended.status, refusal?.code, refusal?.fields?.["rule"]]).toEqual([400, "invalid_event", "namespace"]);
    expect((await journal.stats(billing)).pending).toBe(0);
  });

  it("a bulk confirmation with the dry run's requestIds acts on those only: an event resolved elsewhere is reported, never replaced by a newer one", async () => {
    const { call, journal } = setup();
    const bulk = "/v1/journals/usage/consumers/billing/quarantined/bulk";
    await quarantined(journal, 3, ["rejected"]);
    const dry = await call("POST", bulk, { body: { action: "discard", dryRun: true, reason: "rejected" } });
    expect(dry.json).toEqual({ matched: 3, more: false, requestIds: [rid(1), rid(2), rid(3)], applied: 0, failed: [] });

    // Before the operator confirms, another operator releases 1 and 2, and 4 and 5 get quarantined.
    for (const n of [1, 2]) expect((await call("POST", `/v1/journals/usage/consumers/billing/quarantined/${rid(n)}/release`, { body: {} })).status).toBe(200);
    for (const n of [4, 5]) await journal.append(createUsageEvent(event(n)));
    const claimed = await journal.claim(billing, { maxEvents: 10, leaseMs: 60_000, now: t0 });
    for (const delivery of claimed) if (delivery.id.event === rid(4) || delivery.id.event === rid(5)) await journal.quarantine(delivery.id, "rejected");
    // The filter now selects 3, 4, 5: a filter-based run bounded by `max: 3` would discard 4 and 5.
    expect((await call("POST", bulk, { body: { action: "discard", dryRun: true, reason: "rejected" } })).json["requestIds"]).toEqual([rid(3), rid(4), rid(5)]);

    const done = await call("POST", bulk, { body: { action: "discard", dryRun: false, requestIds: dry.json["requestIds"] } });
    expect(done.status).toBe(200);
    const left = await call("GET", "/v1/journals/usage/consumers/billing/quarantined");
    expect((left.json["items"] as { event: { id: string } }[]).map((item) => item.event.id)).toEqual([rid(4), rid(5)]);
    const audit = await call("GET", "/v1/journals/usage/audit");
    expect((audit.json["items"] as { action: string; requestId: string }[]).map((entry) => `${entry.action} ${entry.requestId}`)).toEqual([
      `release ${rid(1)}`,
      `release ${rid(2)}`,
      `discard ${rid(3)}`,
    ]);
    // The answer says what happened to each event sent: 3 discarded, 1 and 2 skipped as no longer quarantined.
    expect(done.json).toMatchObject({ matched: 3, more: false, requestIds: [rid(1), rid(2), rid(3)], applied: 1 });
    expect(done.json["failed"]).toMatchObject([
      { requestId: rid(1), error: { code: "not_quarantined", name: "NotQuarantinedError" } },
      { requestId: rid(2), error: { code: "not_quarantined", name: "NotQuarantinedError" } },
    ]);
  });

  it("takes requestIds only to confirm: not with a dry run or a filter, at most MAX_BULK; a bad id fails alone, with the journal's error", async () => {
    const { call, journal } = setup();
    const bulk = "/v1/journals/usage/consumers/billing/quarantined/bulk";
    await quarantined(journal, 2, ["malformed"]);
    const refused = [
      { action: "release", dryRun: true, requestIds: [rid(1)] },
      { action: "release", dryRun: false, requestIds: [rid(1)], reason: "malformed" },
      { action: "release", dryRun: false, requestIds: [rid(1)], query: "acme" },
      { action: "release", dryRun: false, requestIds: [rid(1)], key: "acme/user-2" },
      { action: "release", dryRun: false, requestIds: [rid(1)], max: 1 },
      { action: "release", dryRun: false, requestIds: Array.from({ length: MAX_BULK + 1 }, (_, n) => rid(n + 1)) },
      { action: "release", dryRun: false, requestIds: ["x".repeat(MAX_ITEM_TEXT + 1)] },
    ];
    for (const body of refused) {
      const answer = await call("POST", bulk, { body });
      expect([answer.status, answer.json.error?.code], JSON.stringify(body).slice(0, 120)).toEqual([400, "invalid_request"]);
    }
    expect((await journal.stats(billing)).quarantined).toBe(2);

    // As the journal checks a request id: `Not-A-Uuid` fails in place, the others are acted on, in the order sent.
    const done = await call("POST", bulk, { body: { action: "release", dryRun: false, requestIds: [rid(2), "Not-A-Uuid", rid(1)] } });
    expect(done.json).toMatchObject({ matched: 3, requestIds: [rid(2), "Not-A-Uuid", rid(1)], applied: 2 });
    expect(done.json["failed"]).toMatchObject([{ requestId: "Not-A-Uuid", error: { code: "invalid_argument", fields: { argument: "requestId" } } }]);
    expect((await journal.stats(billing)).quarantined).toBe(0);
    // An empty confirmation acts on nothing.
    expect((await call("POST", bulk, { body: { action: "discard", dryRun: false, requestIds: [] } })).json).toEqual({ matched: 0, more: false, requestIds: [], applied: 0, failed: [] });
  });

  it("exports to the end when a later page of the journal's query holds nothing the exact filter keeps", async () => {
    const { call, journal } = setup({}, { ...CAPACITY, maxEvents: 1000 });
    // 200 events set aside as malformed (the export's first journal page), then 5 as rejected: the query
    // `acme` matches all 205, the exact reason filter keeps none of the second page.
    for (let n = 1; n <= 205; n++) await journal.append(createUsageEvent(event(n, "acme")));
    const deliveries = await journal.claim(billing, { maxEvents: 1000, leaseMs: 60_000, now: t0 });
    for (const [i, delivery] of deliveries.entries()) await journal.quarantine(delivery.id, i < 200 ? "malformed" : "rejected");
    // The stream used to answer its headers, then never close: a pull that enqueued nothing was the last one.
    const exported = await Promise.race([
      call("GET", "/v1/journals/usage/consumers/billing/quarantined/export?query=acme&reason=malformed"),
      new Promise<"hung">((resolve) => setTimeout(() => resolve("hung"), 5_000)),
    ]);
    expect(exported).not.toBe("hung");
    if (exported === "hung") return;
    const ids = exported.text.trim().split("\n").map((line) => (JSON.parse(line) as { event: { id: string } }).event.id);
    expect(ids).toEqual(Array.from({ length: 200 }, (_, i) => rid(i + 1)));
  });

  it("describes the journals to journal tokens only, and their consumers to those who consume or operate", async () => {
    const { call } = setup();
    for (const path of ["/v1/journals", "/v1/journals/usage"]) {
      const refused = await call("GET", path, { token: STORES_ONLY });
      expect([refused.status, refused.json.error?.code]).toEqual([403, "forbidden"]);
    }
    expect((await call("GET", "/v1/journals")).json["journals"]).toMatchObject([{ name: "usage", consumers: ["billing"] }]);
    expect((await call("GET", "/v1/journals/usage", { token: CONSUME })).json).toMatchObject({ name: "usage", consumers: ["billing"] });
    // A producer learns what HttpJournal needs (capacity and mode), not who consumes.
    const producer = await call("GET", "/v1/journals/usage", { token: ACME });
    expect(producer.json).toMatchObject({ name: "usage", capacity: CAPACITY, mode: "telemetry_grade", consumers: [] });
    expect((await call("GET", "/v1/journals", { token: ACME })).json["journals"]).toMatchObject([{ name: "usage", consumers: [] }]);
  });

  it("filters, bulk-selects and exports by an exact key longer than the journal's query (a valid key of up to 513 characters)", async () => {
    const { call, journal } = setup();
    const [namespace, subject] = ["n".repeat(150), "s".repeat(150)];
    await journal.append(createUsageEvent(event(1, namespace, subject)));
    await journal.append(createUsageEvent(event(2, namespace, "other")));
    for (const delivery of await journal.claim(billing, { maxEvents: 5, leaseMs: 1000, now: t0 })) await journal.quarantine(delivery.id, "rejected");
    const key = encodeURIComponent(`${namespace}/${subject}`);
    const listed = await call("GET", `/v1/journals/usage/consumers/billing/quarantined?key=${key}`);
    expect([listed.status, (listed.json["items"] as { event: { id: string } }[] | undefined)?.map((item) => item.event.id)]).toEqual([200, [rid(1)]]);
    const dry = await call("POST", "/v1/journals/usage/consumers/billing/quarantined/bulk", { body: { action: "discard", dryRun: true, key: `${namespace}/${subject}` } });
    expect([dry.status, dry.json["requestIds"]]).toEqual([200, [rid(1)]]);
    const exported = await call("GET", `/v1/journals/usage/consumers/billing/quarantined/export?key=${key}`);
    expect([exported.status, exported.text.trim().split("\n").length]).toEqual([200, 1]);
  });

  it("filters by namespace and subject exactly, where a key text holding '/' is ambiguous", async () => {
    const { call, journal } = setup();
    await journal.append(createUsageEvent(event(1, "acme/eu", "u1")));
    await journal.append(createUsageEvent(event(2, "acme", "eu/u1")));
    for (const delivery of await journal.claim(billing, { maxEvents: 5, leaseMs: 1000, now: t0 })) await journal.quarantine(delivery.id, "rejected");
    const base = "/v1/journals/usage/consumers/billing/quarantined";
    const ids = (answer: { json: Record<string, unknown> }) => (answer.json["items"] as { event: { id: string } }[]).map((item) => item.event.id);
    expect(ids(await call("GET", `${base}?key=${encodeURIComponent("acme/eu/u1")}`))).toEqual([rid(1), rid(2)]);
    expect(ids(await call("GET", `${base}?namespace=${encodeURIComponent("acme/eu")}&subject=u1`))).toEqual([rid(1)]);
    expect(ids(await call("GET", `${base}?namespace=acme&subject=${encodeURIComponent("eu/u1")}`))).toEqual([rid(2)]);
    expect(ids(await call("GET", `${base}?namespace=acme`))).toEqual([rid(2)]);
    const dry = await call("POST", `${base}/bulk`, { body: { action: "discard", dryRun: true, namespace: "acme/eu", subject: "u1" } });
    expect(dry.json["requestIds"]).toEqual([rid(1)]);
    const exported = await call("GET", `${base}/export?namespace=acme&subject=${encodeURIComponent("eu/u1")}`);
    expect(exported.text.trim().split("\n").map((line) => (JSON.parse(line) as { event: { id: string } }).event.id)).toEqual([rid(2)]);
    const mixed = await call("POST", `${base}/bulk`, { body: { action: "discard", dryRun: false, requestIds: [rid(1)], namespace: "acme" } });
    expect([mixed.status, mixed.json.error?.code]).toEqual([400, "invalid_request"]);
    expect(await journal.stats(billing)).toMatchObject({ quarantined: 2 }); // nothing acted on
  });

  it("answers an export that fails at its first page with the typed error, and bulk failures without a server fault's internals", async () => {
    const secret = "SQLITE_ERROR: no such table q_v3 at /srv/partition.ts:412";
    const inner = createJournal(memoryEngine(), { name: "usage", capacity: CAPACITY, clock: () => t0 });
    await quarantined(inner, 2, ["rejected"]);
    const broken = new Set<PropertyKey>();
    const journal = new Proxy(inner, {
      get(target, property, receiver) {
        if (broken.has(property)) return () => Promise.reject(new BackendError(secret, { retryable: true }));
        return Reflect.get(target, property, receiver) as unknown;
      },
    });
    const app = createApp({ journals: { usage: { journal, consumers: ["billing"] } }, auth: { tokens: [{ name: "ops", token: OPS, scopes: ["operate"] }] } });
    const call = (method: string, path: string, body?: unknown) =>
      app.fetch(
        new Request(`http://isostore.test${path}`, {
          method,
          headers: { authorization: `Bearer ${OPS}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        }),
      );
    const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
    try {
      broken.add("listQuarantined");
      const exported = await call("GET", "/v1/journals/usage/consumers/billing/quarantined/export");
      const text = await exported.text();
      expect([exported.status, exported.headers.get("content-type"), (JSON.parse(text) as { error: { code: string } }).error.code]).toEqual([
        503,
        "application/json; charset=utf-8",
        "backend",
      ]);
      expect(text).not.toContain("SQLITE");
      broken.clear();
      broken.add("release");
      const bulk = await call("POST", "/v1/journals/usage/consumers/billing/quarantined/bulk", { action: "release", dryRun: false, requestIds: [rid(1)] });
      const answer = (await bulk.json()) as { failed: { requestId: string; error: { code: string; message: string; retryable: boolean } }[] };
      expect([bulk.status, answer.failed.map((failure) => [failure.requestId, failure.error.code, failure.error.retryable])]).toEqual([200, [[rid(1), "backend", true]]]);
      expect(JSON.stringify(answer)).not.toContain("SQLITE");
      expect(errors).toHaveBeenCalledTimes(2); // both server faults are logged, each with its id
    } finally {
      errors.mockRestore();
    }
  });

  it("with the UI's assets, an unknown API path is the API's 404 or 405, never a page of the UI", async () => {
    const assets = async (request: Request) => new Response(`<html>asset for ${new URL(request.url).pathname}</html>`, { headers: { "content-type": "text/html" } });
    const { call } = setup({ assets });
    for (const [path, status, code] of [
      ["/v1/nothing-here", 404, "not_found"],
      ["/v1", 404, "not_found"],
      ["/v1/journals/usage/append", 405, "method_not_allowed"],
    ] as const) {
      const answer = await call("GET", path);
      expect([path, answer.status, answer.json.error?.code]).toEqual([path, status, code]);
    }
    const page = await call("GET", "/quarantine");
    expect([page.status, page.text]).toEqual([200, "<html>asset for /quarantine</html>"]);
  });

  it("releases an event to the next claim in its key's order", async () => {
    const { call, journal } = setup();
    await journal.append(createUsageEvent(event(1, "acme", "same")));
    await journal.append(createUsageEvent(event(2, "acme", "same")));
    const [first] = await journal.claim(billing, { maxEvents: 5, leaseMs: 1000, now: t0 });
    await journal.quarantine(first!.id, "rejected");
    expect((await call("POST", `/v1/journals/usage/consumers/billing/quarantined/${rid(1)}/release`, { body: {} })).status).toBe(200);
    const claimed = await call("POST", "/v1/journals/usage/claim", { body: { consumer: "billing", maxEvents: 5, leaseMs: 1000, now: t0 + 1 } });
    expect((claimed.json["deliveries"] as { event: { id: string } }[]).map((d) => d.event.id)).toEqual([rid(1)]);
  });
});

describe("the OpenAPI document", () => {
  it("validates as OpenAPI 3.1, covers every route, and the validator refuses a broken copy", async () => {
    const { call } = setup();
    const doc = (await call("GET", "/v1/openapi.json")).json as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toBe("3.1.0");
    await expect(validate(structuredClone(doc) as never)).resolves.toMatchObject({ valid: true });
    expect(Object.keys(doc.paths)).toHaveLength(19);
    const broken = structuredClone(doc) as unknown as { info?: unknown; paths: Record<string, Record<string, { parameters?: unknown }>> };
    delete broken.info;
    broken.paths["/v1/journals/{journal}/claim"]!["post"]!.parameters = "not a list";
    const verdict = await validate(broken as never);
    expect(verdict.valid).toBe(false);
  });

  it("says health needs no token; the journal routes' ?limit is decimal digits only, as the store routes' query numbers", async () => {
    const { call, journal } = setup();
    const doc = (await call("GET", "/v1/openapi.json")).json as { security: unknown; paths: Record<string, Record<string, { security?: unknown }>> };
    expect(doc.security).toEqual([{ bearer: [] }]);
    expect(doc.paths["/v1/health"]!["get"]!.security).toEqual([]);
    await quarantined(journal, 2, ["rejected"]);
    for (const path of ["/v1/journals/usage/consumers/billing/quarantined", "/v1/journals/usage/audit"]) {
      expect((await call("GET", `${path}?limit=7`)).status, path).toBe(200);
      for (const limit of ["1e2", "0x10", " 7", "7.0", "+7", "", "1.5", "0", "1001"]) {
        const answer = await call("GET", `${path}?limit=${encodeURIComponent(limit)}`);
        expect(answer.status, `${path} limit=${JSON.stringify(limit)}`).toBe(400);
        expect(answer.json.error).toMatchObject({ code: "invalid_request", fields: { argument: "limit" } });
      }
    }
  });
});
