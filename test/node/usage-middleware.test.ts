/**
 * `usageJournal`, the edge usage middleware: billing-grade requests are
 * journaled before their response and fail (503, nothing journaled) when the
 * append fails; a retried request with the same `x-request-id` is journaled
 * once; telemetry-grade requests never wait for the journal, and a failed
 * append is counted as dropped.
 */
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { BackendError, BILLING_GRADE, createJournal, newRequestId, parseConsumerId, type UsageJournal } from "../../src/index.js";
import { usageJournal, type UsageVariables } from "../../src/worker/index.js";

const billing = parseConsumerId("billing");

function appWith(journal: UsageJournal, mode: "billing_grade" | "telemetry_grade", onDropped?: (error: unknown) => void) {
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
    const journal = createJournal(memoryEngine(), { name: "usage", capacity: BILLING_GRADE });
    const { app, counters } = appWith(journal, "billing_grade");
    const response = await app.request("/api/complete", { method: "POST", headers: { "x-user": "u1" } });
    expect(response.status).toBe(200);
    const id = response.headers.get("x-request-id");
    expect(await response.json()).toEqual({ ok: true, requestId: id });
    const [delivery] = await journal.claim(billing, { maxEvents: 10, leaseMs: 1000, now: Date.now() });
    expect(delivery?.event.record).toEqual({ requestId: id, namespace: "acme", subject: "u1", data: { tokens: 42 } });
    expect(counters).toEqual({ appended: 1, dropped: 0, refused: 0 });
    expect((await app.request("/api/free")).status).toBe(200);
    expect((await journal.stats(billing)).inFlight + (await journal.stats(billing)).pending).toBe(1);
  });

  it("billing_grade: a failed append fails the request with 503 + Retry-After and leaves no event; the retry is billed once", async () => {
    const journal = createJournal(memoryEngine(), { name: "usage", capacity: BILLING_GRADE });
    const behaviour = { fail: true };
    const { app, counters } = appWith(faulty(journal, behaviour), "billing_grade");
    const id = newRequestId();
    const failed = await app.request("/api/complete", { method: "POST", headers: { "x-request-id": id } });
    expect([failed.status, failed.headers.get("retry-after")]).toEqual([503, "1"]);
    expect(((await failed.json()) as { error: { code: string } }).error.code).toBe("backend");
    expect((await journal.stats(billing)).pending).toBe(0);
    behaviour.fail = false;
    for (let i = 0; i < 2; i++) {
      const retried = await app.request("/api/complete", { method: "POST", headers: { "x-request-id": id } });
      expect([retried.status, retried.headers.get("x-request-id")]).toEqual([200, id]);
    }
    expect((await journal.stats(billing)).pending).toBe(1);
    expect(counters).toEqual({ appended: 2, dropped: 0, refused: 1 });
  });

  it("ignores an x-request-id that is not a UUIDv7 and mints one", async () => {
    const journal = createJournal(memoryEngine(), { name: "usage", capacity: BILLING_GRADE });
    const { app } = appWith(journal, "billing_grade");
    const response = await app.request("/api/complete", { method: "POST", headers: { "x-request-id": "not-an-id" } });
    expect(response.headers.get("x-request-id")).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7/);
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
    expect(counters).toEqual({ appended: 1, dropped: 1, refused: 0 });
    expect(dropped).toHaveLength(1);
  });
});
