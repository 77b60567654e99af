/**
 * `usageJournal`, the edge usage middleware: billing-grade requests are
 * journaled before their response and fail when the append fails, with the
 * status of the error's code (503 + Retry-After only for what a retry may
 * fix); a retried request with the same `x-request-id` is journaled once; a
 * billing-grade middleware refuses a telemetry-grade journal; telemetry-grade
 * requests never wait for the journal, and a failed append is counted as
 * dropped. What a billing-grade answer promises (late reports, the request
 * id's form, unknown outcomes, timeouts, a failing toRecord) is in
 * usage-middleware-billing.test.ts.
 */
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { BackendError, BILLING_GRADE, createJournal, InvalidArgumentError, newRequestId, parseConsumerId, type Capacity, type UsageJournal } from "../../src/index.js";
import { createApp, usageJournal, type UsageVariables } from "../../src/worker/index.js";
import { HttpJournal, type FetchLike } from "../../src/http/index.js";

const billing = parseConsumerId("billing");

/**
 * A journal over the memory engine that says it is billing-grade, standing in
 * for a durable one (IndexedDB, Durable Objects): the middleware reads only
 * `mode`, and the memory engine is the one a Node test has.
 */
function billingJournal(capacity: Capacity = BILLING_GRADE): UsageJournal {
  const inner = createJournal(memoryEngine(), { name: "usage", capacity });
  return new Proxy(inner, { get: (target, property, receiver) => (property === "mode" ? "billing_grade" : (Reflect.get(target, property, receiver) as unknown)) });
}

function appWith(journal: UsageJournal | (() => UsageJournal), mode: "billing_grade" | "telemetry_grade", onDropped?: (error: unknown) => void) {
  const app = new Hono<{ Variables: UsageVariables<{ tokens: number }> }>();
  const middleware = usageJournal<{ tokens: number }>({
    journal,
    mode,
    toRecord: (usage, c) => ({ namespace: "acme", subject: c.req.header("x-user") ?? "anonymous", data: usage }),
    ...(onDropped ? { onDropped } : {}),
  });
  app.use("/api/*", middleware);
  app.post("/api/complete", (c) => {
    c.get("reportUsage")({ tokens: 42 });
    return c.json({ ok: true, requestId: c.get("requestId") });
  });
  app.get("/api/free", (c) => c.json({ ok: true }));
  return { app, counters: middleware.counters };
}

/** A journal whose appends fail (or hang) on demand. */
function faulty(inner: UsageJournal, behaviour: { fail?: boolean; hang?: Promise<void> }): UsageJournal {
  return new Proxy(inner, {
    get(target, property, receiver) {
      if (property === "append") {
        return async (...args: Parameters<UsageJournal["append"]>) => {
          if (behaviour.hang) await behaviour.hang;
          if (behaviour.fail) throw new BackendError("storage is down", { retryable: true });
          return target.append(...args);
        };
      }
      return Reflect.get(target, property, receiver) as unknown;
    },
  });
}

describe("usageJournal middleware", () => {
  it("billing_grade: the event is journaled before the response, with the request id on both", async () => {
    const journal = billingJournal();
    const { app, counters } = appWith(journal, "billing_grade");
    const response = await app.request("/api/complete", { method: "POST", headers: { "x-user": "u1" } });
    expect(response.status).toBe(200);
    const id = response.headers.get("x-request-id");
    expect(await response.json()).toEqual({ ok: true, requestId: id });
    const [delivery] = await journal.claim(billing, { maxEvents: 10, leaseMs: 1000, now: Date.now() });
    expect(delivery?.event.record).toEqual({ requestId: id, namespace: "acme", subject: "u1", data: { tokens: 42 } });
    expect(counters).toEqual({ appended: 1, dropped: 0, refused: 0, duplicates: 0, late: 0 });
    expect((await app.request("/api/free")).status).toBe(200);
    expect((await journal.stats(billing)).inFlight + (await journal.stats(billing)).pending).toBe(1);
  });

  it("billing_grade: a failed append fails the request with 503 + Retry-After and leaves no event; the retry is billed once", async () => {
    const journal = billingJournal();
    const behaviour = { fail: true };
    const { app, counters } = appWith(faulty(journal, behaviour), "billing_grade");
    const id = newRequestId();
    const failed = await app.request("/api/complete", { method: "POST", headers: { "x-request-id": id } });
    expect([failed.status, failed.headers.get("retry-after")]).toEqual([503, "1"]);
    expect(((await failed.json()) as { error: { code: string; retryable: boolean } }).error).toMatchObject({ code: "backend", retryable: true });
    expect((await journal.stats(billing)).pending).toBe(0);
    behaviour.fail = false;
    const retried = await app.request("/api/complete", { method: "POST", headers: { "x-request-id": id } });
    expect([retried.status, retried.headers.get("x-request-id")]).toEqual([200, id]);
    expect((await journal.stats(billing)).pending).toBe(1);
    expect(counters).toEqual({ appended: 1, dropped: 0, refused: 1, duplicates: 0, late: 0 });
  });

  it("billing_grade: a request id already served and billed is not served again (409 duplicate_request): one id cannot buy unlimited service", async () => {
    const journal = billingJournal();
    const { app, counters } = appWith(journal, "billing_grade");
    const id = newRequestId();
    const first = await app.request("/api/complete", { method: "POST", headers: { "x-request-id": id } });
    expect(first.status).toBe(200);
    for (let i = 0; i < 3; i++) {
      const again = await app.request("/api/complete", { method: "POST", headers: { "x-request-id": id } });
      expect([again.status, again.headers.get("retry-after"), again.headers.get("x-request-id")]).toEqual([409, null, id]);
      const body = (await again.json()) as { ok?: boolean; error: { code: string; retryable: boolean; requestId: string } };
      expect(body.ok).toBeUndefined(); // the handler's answer is dropped
      expect(body.error).toMatchObject({ code: "duplicate_request", retryable: false, requestId: id });
    }
    expect((await journal.stats(billing)).pending).toBe(1); // billed once, served once
    expect(counters).toEqual({ appended: 4, dropped: 0, refused: 0, duplicates: 3, late: 0 });
    // Without the header, each request is a new one: served and billed.
    expect((await app.request("/api/complete", { method: "POST" })).status).toBe(200);
    expect((await journal.stats(billing)).pending).toBe(2);
  });

  it("billing_grade: a refusal carries none of the dropped answer's headers (its cookies, its Location), only the outer middleware's", async () => {
    const journal = billingJournal();
    const app = new Hono<{ Variables: UsageVariables<{ tokens: number }> }>();
    app.use("*", async (c, next) => {
      c.header("x-outer", "kept"); // set before the usage middleware runs: part of every answer
      await next();
    });
    app.use("/api/*", usageJournal<{ tokens: number }>({ journal, mode: "billing_grade", toRecord: (usage) => ({ namespace: "acme", subject: "u1", data: usage }) }));
    app.post("/api/render", (c) => {
      c.get("reportUsage")({ tokens: Number(c.req.header("x-size") ?? 1) });
      c.header("location", "/downloads/paid-result");
      c.header("set-cookie", "grant=signed; Path=/");
      c.header("x-result", "the paid-for answer");
      return c.json({ ok: true });
    });
    const id = newRequestId();
    const served = await app.request("/api/render", { method: "POST", headers: { "x-request-id": id } });
    expect([served.status, served.headers.get("location"), served.headers.get("x-outer")]).toEqual([200, "/downloads/paid-result", "kept"]);
    // The same id again, with the same usage and with other usage (both a duplicate_request): the handler ran, its answer is dropped whole.
    for (const [size, code] of [["1", "duplicate_request"], ["5000", "duplicate_request"]] as const) {
      const refused = await app.request("/api/render", { method: "POST", headers: { "x-request-id": id, "x-size": size } });
      expect([refused.status, ((await refused.json()) as { error: { code: string } }).error.code]).toEqual([409, code]);
      expect([refused.headers.get("location"), refused.headers.get("set-cookie"), refused.headers.get("x-result")]).toEqual([null, null, null]);
      expect([refused.headers.get("x-outer"), refused.headers.get("x-request-id"), refused.headers.get("content-type")]).toEqual(["kept", id, "application/json; charset=utf-8"]);
    }
  });

  it("billing_grade: an append that committed but whose answer was lost is tried again and the request served, not refused as unjournaled", async () => {
    const inner = billingJournal();
    let lost = 1; // answers to lose after the commit
    const journal = new Proxy(inner, {
      get(target, property, receiver) {
        if (property !== "append") return Reflect.get(target, property, receiver) as unknown;
        return async (...args: Parameters<UsageJournal["append"]>) => {
          const result = await target.append(...args);
          if (lost-- > 0) throw new BackendError("the connection closed before the reply", { retryable: true });
          return result;
        };
      },
    });
    const { app, counters } = appWith(journal, "billing_grade");
    const id = newRequestId();
    const served = await app.request("/api/complete", { method: "POST", headers: { "x-request-id": id } });
    expect([served.status, ((await served.json()) as { ok: boolean }).ok]).toEqual([200, true]);
    expect((await inner.stats(billing)).pending).toBe(1); // billed once, and served
    expect(counters).toEqual({ appended: 1, dropped: 0, refused: 0, duplicates: 0, late: 0 });
    // Every try fails: refused, and the answer does not claim that nothing was journaled.
    lost = 3;
    const unconfirmed = await app.request("/api/complete", { method: "POST" });
    const body = (await unconfirmed.json()) as { error: { code: string; message: string; retryable: boolean } };
    expect([unconfirmed.status, body.error.code, body.error.retryable]).toEqual([503, "backend", true]);
    expect(body.error.message).toMatch(/may have been journaled/);
    expect(lost).toBe(0); // three tries
  });

  it("billing_grade over an HttpJournal that retried a lost reply itself: a request the middleware minted the id of is served, billed once", async () => {
    // The central journal commits the append, then its reply is lost (a Durable Object's reply, say): the
    // client's own retry answers already_present, which for a minted id can only be this request's commit.
    const central = billingJournal();
    let lose = 1;
    const lossy = new Proxy(central, {
      get(target, property, receiver) {
        if (property !== "append" && property !== "appendBatch") return Reflect.get(target, property, receiver) as unknown;
        return async (...args: unknown[]) => {
          const call = Reflect.get(target, property, receiver) as (...a: unknown[]) => Promise<unknown>;
          const results = await call.apply(target, args);
          if (lose-- > 0) throw new BackendError("rpc: Network connection lost", { retryable: true });
          return results;
        };
      },
    });
    const TOKEN = "middleware-over-http-0123456";
    const server = createApp({ journals: { usage: lossy }, auth: { tokens: [{ name: "edge", token: TOKEN, scopes: ["append:*"] }] } });
    const fetch: FetchLike = async (url, init) => server.fetch(new Request(url, init));
    const sink = new HttpJournal({ baseUrl: "http://central.test", journal: "usage", token: TOKEN, fetch, capacity: BILLING_GRADE, mode: "billing_grade", sleep: async () => undefined });
    const { app, counters } = appWith(sink, "billing_grade");
    const served = await app.request("/api/complete", { method: "POST" });
    expect([served.status, ((await served.json()) as { ok: boolean }).ok]).toEqual([200, true]);
    expect(lose).toBe(-1); // the client did retry
    expect((await central.stats(billing)).pending).toBe(1);
    expect(counters).toMatchObject({ appended: 1, duplicates: 0 });
  });

  it("billing_grade: a full journal is 503 + Retry-After, retryable", async () => {
    const { app } = appWith(billingJournal({ ...BILLING_GRADE, maxEvents: 1 }), "billing_grade");
    expect((await app.request("/api/complete", { method: "POST" })).status).toBe(200);
    const full = await app.request("/api/complete", { method: "POST" });
    expect([full.status, full.headers.get("retry-after")]).toEqual([503, "1"]);
    expect(((await full.json()) as { error: unknown }).error).toMatchObject({ code: "at_capacity", retryable: true });
  });

  it("billing_grade: a backend failure that a retry will not fix is 500, not retryable", async () => {
    const inner = billingJournal();
    const journal = new Proxy(inner, {
      get: (target, property, receiver) =>
        property === "append" ? async () => Promise.reject(new BackendError("disk is corrupt", { retryable: false })) : (Reflect.get(target, property, receiver) as unknown),
    });
    const { app } = appWith(journal, "billing_grade");
    const failed = await app.request("/api/complete", { method: "POST" });
    expect([failed.status, failed.headers.get("retry-after")]).toEqual([500, null]);
    expect(((await failed.json()) as { error: unknown }).error).toMatchObject({ code: "backend", retryable: false });
  });

  it("billing_grade over a telemetry_grade journal is refused: at construction, or per request when the journal comes from a function", async () => {
    const telemetry = createJournal(memoryEngine(), { name: "usage", capacity: BILLING_GRADE });
    expect(telemetry.mode).toBe("telemetry_grade");
    const construct = () => usageJournal({ journal: telemetry, mode: "billing_grade", toRecord: () => null });
    expect(construct).toThrow(InvalidArgumentError);
    expect(construct).toThrow(expect.objectContaining({ code: "invalid_argument", argument: "journal" }) as Error);
    expect(() => usageJournal({ journal: telemetry, mode: "telemetry_grade", toRecord: () => null })).not.toThrow();

    const { app, counters } = appWith(() => telemetry, "billing_grade");
    const answer = await app.request("/api/complete", { method: "POST" });
    expect([answer.status, answer.headers.get("retry-after")]).toEqual([500, null]); // a misconfigured server: not the client's fault, not retryable
    expect(((await answer.json()) as { error: unknown }).error).toMatchObject({ code: "backend", retryable: false });
    expect((await telemetry.stats(billing)).pending).toBe(0); // not journaled, and the handler's response was not served
    expect(counters).toEqual({ appended: 0, dropped: 0, refused: 1, duplicates: 0, late: 0 });
  });

  it("telemetry_grade: a slow journal does not delay the response; a failed append is counted as dropped", async () => {
    const journal = createJournal(memoryEngine(), { name: "usage", capacity: BILLING_GRADE });
    let release!: () => void;
    const hang = new Promise<void>((resolve) => (release = resolve));
    const behaviour: { fail?: boolean; hang?: Promise<void> } = { hang };
    const dropped: unknown[] = [];
    const { app, counters } = appWith(faulty(journal, behaviour), "telemetry_grade", (error) => dropped.push(error));
    const response = await app.request("/api/complete", { method: "POST" });
    expect(response.status).toBe(200); // answered while the append is still waiting
    expect((await journal.stats(billing)).pending).toBe(0);
    release();
    await new Promise((resolve) => setTimeout(resolve, 0));
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect((await journal.stats(billing)).pending).toBe(1);
    behaviour.fail = true;
    delete behaviour.hang;
    expect((await app.request("/api/complete", { method: "POST" })).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(counters).toEqual({ appended: 1, dropped: 1, refused: 0, duplicates: 0, late: 0 });
    expect(dropped).toHaveLength(1);
  });
});
