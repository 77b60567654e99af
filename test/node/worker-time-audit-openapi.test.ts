/**
 * The worker's HTTP API over a memory journal, on four points:
 *
 * - times: every `now` and `observedAt` is an integer from 0 to 8.64e15 (the
 *   latest a `Date` holds), refused past it, and the OpenAPI document says so;
 * - prune: the route prunes at the earlier of the body's `now` and the
 *   server's clock, so a caller whose clock runs ahead does not forget request
 *   ids early (a retried append would be journaled and delivered twice);
 * - the OpenAPI document lists every status the routes answer: 405, 500, and
 *   504 for the store routes;
 * - bulk actions take an `actor`, recorded as the single routes record it.
 */
import { describe, expect, it, vi } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { AmbiguousError, createJournal, createStore, createUsageEvent, MAX_LEASE_MS, parseConsumerId, type Capacity, type UsageJournal } from "../../src/index.js";
import { MAX_EPOCH_MS } from "../../src/journal/journal.js";
import { createApp, type AppOptions } from "../../src/worker/index.js";

const OPS = "operator-token-0123456789";
const t0 = 1_700_000_000_000;
const billing = parseConsumerId("billing");
const rid = (n: number) => `0190e000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`;
const CAPACITY: Capacity = { maxEvents: 50, maxDeliveryAttempts: 3, retainAcknowledgedMs: 60_000, policy: "refuse" };
const event = (n: number, observedAt = t0) => ({ record: { requestId: rid(n), namespace: "acme", subject: `user-${n}`, data: { tokens: n } }, observedAt });

function setup(extra: Partial<AppOptions> = {}) {
  let now = t0;
  const journal = createJournal(memoryEngine(), { name: "usage", capacity: CAPACITY, clock: () => now });
  const app = createApp({
    journals: { usage: { journal, consumers: ["billing"] } },
    auth: { tokens: [{ name: "ops", token: OPS, scopes: ["operate", "consume", "append:*", "store:*"] }] },
    clock: () => now,
    ...extra,
  });
  const call = async (method: string, path: string, body?: unknown) => {
    const headers: Record<string, string> = { authorization: `Bearer ${OPS}`, ...(body === undefined ? {} : { "content-type": "application/json" }) };
    const response = await app.fetch(new Request(`http://isostore.test${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) }));
    return { status: response.status, json: (await response.json()) as Record<string, unknown> & { error?: { code: string; fields?: Record<string, unknown> } } };
  };
  return { journal, call, advance: (ms: number) => (now += ms) };
}

/** Append `count` events, claim them all for billing and quarantine them. */
async function quarantined(journal: UsageJournal, count: number): Promise<void> {
  for (let n = 1; n <= count; n++) await journal.append(createUsageEvent(event(n)));
  for (const delivery of await journal.claim(billing, { maxEvents: count, leaseMs: 60_000, now: t0 })) await journal.quarantine(delivery.id, "rejected");
}

describe("times over HTTP: integers from 0 to 8.64e15", () => {
  it("MAX_EPOCH_MS is the last instant a Date holds, and now + the longest lease stays a safe integer", () => {
    expect(MAX_EPOCH_MS).toBe(8.64e15);
    expect(new Date(MAX_EPOCH_MS).getTime()).toBe(MAX_EPOCH_MS);
    expect(Number.isNaN(new Date(MAX_EPOCH_MS + 1).getTime())).toBe(true);
    expect(Number.isSafeInteger(MAX_EPOCH_MS + MAX_LEASE_MS)).toBe(true);
  });

  it("a claim, extend, nack, release, discard, bulk or prune at a later now is refused (400, naming now), and leases nothing", async () => {
    const { journal, call } = setup();
    await journal.append(createUsageEvent(event(1)));
    for (const late of [MAX_EPOCH_MS + 1, Number.MAX_SAFE_INTEGER]) {
      const claim = await call("POST", "/v1/journals/usage/claim", { consumer: "billing", maxEvents: 1, leaseMs: 1, now: late });
      expect(claim.status).toBe(400);
      expect(claim.json.error).toMatchObject({ code: "invalid_request", fields: { argument: "now" } });
    }
    expect((await journal.stats(billing)).inFlight).toBe(0);
    const [delivery] = await journal.claim(billing, { maxEvents: 1, leaseMs: 1000, now: t0 });
    const late = MAX_EPOCH_MS + 1;
    const refusals = [
      ["/v1/journals/usage/extend", { delivery: delivery!.id, leaseMs: 1, now: late }],
      ["/v1/journals/usage/nack", { delivery: delivery!.id, retryAfterMs: 0, error: "x", now: late }],
      [`/v1/journals/usage/consumers/billing/quarantined/${rid(1)}/release`, { now: late }],
      [`/v1/journals/usage/consumers/billing/quarantined/${rid(1)}/discard`, { now: late }],
      ["/v1/journals/usage/consumers/billing/quarantined/bulk", { action: "release", dryRun: false, requestIds: [rid(1)], now: late }],
      ["/v1/journals/usage/prune", { now: late }],
    ] as const;
    for (const [path, body] of refusals) {
      const answer = await call("POST", path, body);
      expect(answer.status, path).toBe(400);
      expect(answer.json.error, path).toMatchObject({ code: "invalid_request", fields: { argument: "now" } });
    }
  });

  it("a claim at the bound leases until now + leaseMs, exactly", async () => {
    const { journal, call } = setup();
    await journal.append(createUsageEvent(event(1)));
    const claim = await call("POST", "/v1/journals/usage/claim", { consumer: "billing", maxEvents: 1, leaseMs: MAX_LEASE_MS, now: MAX_EPOCH_MS });
    expect(claim.status).toBe(200);
    expect((claim.json["deliveries"] as { leaseExpiresAt: number }[]).map((d) => d.leaseExpiresAt)).toEqual([MAX_EPOCH_MS + MAX_LEASE_MS]);
  });

  it("an event observed later is refused: append 400 naming observedAt, an append-batch item invalid_event in place", async () => {
    const { journal, call } = setup();
    const append = await call("POST", "/v1/journals/usage/append", { event: event(1, MAX_EPOCH_MS + 1) });
    expect(append.status).toBe(400);
    expect(append.json.error).toMatchObject({ code: "invalid_request", fields: { argument: "observedAt" } });
    const batch = await call("POST", "/v1/journals/usage/append-batch", { events: [event(2, Number.MAX_SAFE_INTEGER), event(3, MAX_EPOCH_MS)] });
    expect(batch.status).toBe(200);
    expect(batch.json["results"]).toMatchObject([
      { status: "rejected", error: { code: "invalid_event", fields: { requestId: rid(2), rule: "observed_at" } } },
      { status: "accepted", position: 1 },
    ]);
    expect((await journal.stats(billing)).pending).toBe(1);
  });

  it("the OpenAPI document states the range of every now and observedAt", async () => {
    const { call } = setup();
    const doc = (await call("GET", "/v1/openapi.json")).json as { components: { schemas: Record<string, { properties: Record<string, { maximum?: number; minimum?: number }> }> }; paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: { properties?: Record<string, { maximum?: number; minimum?: number }> } }> } }>> };
    expect(doc.components.schemas["ObservedRecord"]!.properties["observedAt"]).toMatchObject({ minimum: 0, maximum: MAX_EPOCH_MS });
    // Answers hold stored events, which may predate the bound: their schema takes any safe integer.
    expect(doc.components.schemas["UsageEvent"]!.properties["observedAt"]).toMatchObject({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER });
    const bodies = ["/v1/journals/{journal}/claim", "/v1/journals/{journal}/extend", "/v1/journals/{journal}/nack", "/v1/journals/{journal}/prune", "/v1/journals/{journal}/consumers/{consumer}/quarantined/bulk"];
    for (const path of bodies) {
      const schema = doc.paths[path]!["post"]!.requestBody!.content["application/json"]!.schema;
      expect(schema.properties?.["now"], path).toMatchObject({ minimum: 0, maximum: MAX_EPOCH_MS });
    }
  });
});

describe("prune over HTTP runs at the earlier of its now and the server's clock", () => {
  it("a caller whose clock runs ahead prunes nothing still inside its window by the server's clock: a retried append is already_present", async () => {
    const { journal, call } = setup();
    await journal.append(createUsageEvent(event(1)));
    for (const delivery of await journal.claim(billing, { maxEvents: 1, leaseMs: 1000, now: t0 })) await journal.ack(delivery.id);
    const ahead = await call("POST", "/v1/journals/usage/prune", { now: t0 + 10 * 86_400_000 });
    expect(ahead.json).toEqual({ pruned: 0 });
    const retried = await call("POST", "/v1/journals/usage/append", { event: event(1) });
    expect(retried.json).toEqual({ result: { status: "already_present", position: 1 } });
  });

  it("a now behind the server's clock prunes at that now; no now prunes at the server's clock", async () => {
    const { journal, call, advance } = setup();
    await journal.append(createUsageEvent(event(1)));
    await journal.append(createUsageEvent(event(2, t0 + 30_000)));
    for (const delivery of await journal.claim(billing, { maxEvents: 2, leaseMs: 1000, now: t0 })) await journal.ack(delivery.id);
    advance(120_000);
    expect((await call("POST", "/v1/journals/usage/prune", { now: t0 + 59_999 })).json).toEqual({ pruned: 0 });
    expect((await call("POST", "/v1/journals/usage/prune", { now: t0 + 60_000 })).json).toEqual({ pruned: 1 });
    expect((await call("POST", "/v1/journals/usage/prune", {})).json).toEqual({ pruned: 1 });
  });
});

describe("the OpenAPI document lists every status the routes answer", () => {
  it("405 and 500 on every route; 504 on the store routes, where an ambiguous outcome answers it", async () => {
    const { call } = setup({ stores: { "tenant-a": createStore(memoryEngine(), { name: "tenant-a" }) } });
    const doc = (await call("GET", "/v1/openapi.json")).json as { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: { $ref?: string } }> }> }>> };
    const operations = Object.entries(doc.paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, operation]) => ({ path, method, operation })));
    const described = operations.filter(({ path }) => path !== "/v1/health" && path !== "/v1/openapi.json");
    expect(described.length).toBeGreaterThan(30);
    for (const { path, method, operation } of described) {
      for (const status of ["405", "500"]) expect(operation.responses[status]?.content?.["application/json"]?.schema.$ref, `${method} ${path} ${status}`).toBe("#/components/schemas/Error");
      const store = path.startsWith("/v1/stores/");
      expect(operation.responses["504"]?.content?.["application/json"]?.schema.$ref, `${method} ${path} 504`).toBe(store ? "#/components/schemas/Error" : undefined);
    }
    // The statuses are real answers: a route's other method, and a store mutation whose acknowledgement was lost.
    expect((await call("DELETE", "/v1/journals/usage/claim")).status).toBe(405);
  });

  it("a store's ambiguous outcome is the 504 the document lists", async () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const store = createStore(memoryEngine(), { name: "tenant-a" });
    const lossy = new Proxy(store, {
      get(target, property, receiver) {
        if (property !== "kv") return Reflect.get(target, property, receiver) as unknown;
        const kv = target.kv;
        return new Proxy(kv, {
          get(inner, name, again) {
            if (name === "put") return () => Promise.reject(new AmbiguousError("theme", 0, new Error("reply lost"), "kv.put"));
            return Reflect.get(inner, name, again) as unknown;
          },
        });
      },
    });
    const { call } = setup({ stores: { "tenant-a": lossy } });
    const put = await call("PUT", "/v1/stores/tenant-a/kv/theme", { expectedRev: 0, value: btoa("dark") });
    expect(put.status).toBe(504);
    expect(put.json.error).toMatchObject({ code: "ambiguous" });
    vi.restoreAllMocks();
  });
});

describe("bulk actions record the actor as the single release and discard do", () => {
  it('with auditActor "caller": the body\'s actor, for every event acted on (null without one)', async () => {
    const { journal, call } = setup({ auditActor: "caller" });
    await quarantined(journal, 3);
    const bulk = await call("POST", "/v1/journals/usage/consumers/billing/quarantined/bulk", { action: "release", dryRun: false, requestIds: [rid(1), rid(2)], actor: "alice" });
    expect(bulk.status).toBe(200);
    expect(bulk.json).toMatchObject({ applied: 2, failed: [] });
    const bare = await call("POST", "/v1/journals/usage/consumers/billing/quarantined/bulk", { action: "discard", dryRun: false, requestIds: [rid(3)] });
    expect(bare.json).toMatchObject({ applied: 1 });
    const audit = await journal.listAudit({});
    expect(audit.items.map((entry) => [entry.action, entry.requestId, entry.actor])).toEqual([
      ["release", rid(1), "alice"],
      ["release", rid(2), "alice"],
      ["discard", rid(3), null],
    ]);
  });

  it('with auditActor "token" (the default): the token\'s name, whatever the body says', async () => {
    const { journal, call } = setup();
    await quarantined(journal, 1);
    const bulk = await call("POST", "/v1/journals/usage/consumers/billing/quarantined/bulk", { action: "release", dryRun: false, requestIds: [rid(1)], actor: "mallory" });
    expect(bulk.json).toMatchObject({ applied: 1 });
    expect((await journal.listAudit({})).items.map((entry) => entry.actor)).toEqual(["ops"]);
  });

  it("an actor over 200 characters is refused before anything is done", async () => {
    const { journal, call } = setup({ auditActor: "caller" });
    await quarantined(journal, 1);
    const bulk = await call("POST", "/v1/journals/usage/consumers/billing/quarantined/bulk", { action: "release", dryRun: false, requestIds: [rid(1)], actor: "a".repeat(201) });
    expect(bulk.status).toBe(400);
    expect(bulk.json.error).toMatchObject({ code: "invalid_request", fields: { argument: "actor" } });
    expect((await journal.listAudit({})).items).toEqual([]);
  });
});
