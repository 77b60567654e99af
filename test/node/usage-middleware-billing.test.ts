/**
 * `usageJournal`, what a billing-grade answer promises: usage reported after
 * the response throws (never dropped without a word; telemetry grade counts
 * it dropped); a journal that drops events when full is refused like a
 * telemetry-grade one; the client's `x-request-id` is a UUIDv7 in any letter
 * case, anything else a 400 (telemetry grade mints one instead); a
 * failed append says whether the usage may have been journaled; a request id
 * already used is a `duplicate_request` even when its usage differs; a stuck
 * journal is waited for `appendTimeoutMs` at most; a failing `toRecord` is a
 * logged server fault (500 `internal`), not the client's.
 */
import { streamText } from "hono/streaming";
import { Hono } from "hono";
import { afterEach, describe, expect, it, vi } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import {
  BackendError,
  BILLING_GRADE,
  createJournal,
  EventConflictError,
  InvalidArgumentError,
  newRequestId,
  parseConsumerId,
  type Capacity,
  type UsageJournal,
} from "../../src/index.js";
import { usageJournal, UsageReportedLateError, type UsageJournalOptions, type UsageVariables } from "../../src/worker/index.js";
import { virtualClock, virtualScheduler } from "../../src/testing/index.js";

const billing = parseConsumerId("billing");
type Usage = { tokens: number };
type ErrorAnswer = { error: { code: string; message: string; retryable: boolean; requestId?: string; fields?: Record<string, unknown>; cause?: unknown } };

/** A journal over the memory engine that says it is billing-grade (the middleware reads `mode`), as in usage-middleware.test.ts. */
function billingJournal(capacity: Capacity = BILLING_GRADE): UsageJournal {
  const inner = createJournal(memoryEngine(), { name: "usage", capacity });
  return new Proxy(inner, { get: (target, property, receiver) => (property === "mode" ? "billing_grade" : (Reflect.get(target, property, receiver) as unknown)) });
}

/** `inner` with its `append` replaced. */
function withAppend(inner: UsageJournal, append: (event: Parameters<UsageJournal["append"]>[0], target: UsageJournal) => ReturnType<UsageJournal["append"]>): UsageJournal {
  return new Proxy(inner, {
    get: (target, property, receiver) => (property === "append" ? (event: Parameters<UsageJournal["append"]>[0]) => append(event, target) : (Reflect.get(target, property, receiver) as unknown)),
  });
}

async function pending(journal: UsageJournal): Promise<number> {
  const stats = await journal.stats(billing);
  return stats.pending + stats.inFlight;
}

/** An app whose `/api/complete` reports `{ tokens }` (from `x-tokens`, default 42) and counts its runs. */
function appWith(options: Partial<UsageJournalOptions<Usage>> & Pick<UsageJournalOptions<Usage>, "journal">) {
  const app = new Hono<{ Variables: UsageVariables<Usage> }>();
  const middleware = usageJournal<Usage>({ mode: "billing_grade", toRecord: (usage) => ({ namespace: "acme", subject: "u1", data: usage }), ...options });
  const runs = { count: 0 };
  app.use("/api/*", middleware);
  app.post("/api/complete", (c) => {
    runs.count += 1;
    c.get("reportUsage")({ tokens: Number(c.req.header("x-tokens") ?? 42) });
    return c.json({ ok: true });
  });
  return { app, counters: middleware.counters, runs };
}

const post = (app: Hono<{ Variables: UsageVariables<Usage> }>, headers: Record<string, string> = {}) => app.request("/api/complete", { method: "POST", headers });

afterEach(() => {
  vi.restoreAllMocks();
  vi.useRealTimers();
});

describe("usageJournal: usage reported after the response was settled", () => {
  /** A streamed handler that writes, reports its usage, then writes more; what the report threw, if anything. */
  function streaming(mode: "billing_grade" | "telemetry_grade", onDropped?: (error: unknown) => void) {
    const journal = billingJournal();
    const app = new Hono<{ Variables: UsageVariables<Usage> }>();
    const middleware = usageJournal<Usage>({ journal, mode, toRecord: (usage) => ({ namespace: "acme", subject: "u1", data: usage }), ...(onDropped ? { onDropped } : {}) });
    app.use("/api/*", middleware);
    const thrown: { error: unknown } = { error: null };
    app.post("/api/stream", (c) =>
      streamText(c, async (stream) => {
        await stream.write("hello");
        try {
          c.get("reportUsage")({ tokens: 1 });
        } catch (error) {
          thrown.error = error;
        }
        await stream.write(" world");
      }),
    );
    return { journal, middleware, thrown, request: () => app.request("/api/stream", { method: "POST" }) };
  }

  it("billing_grade: a streamed handler reporting at the end of its stream gets a UsageReportedLateError, counted in late, and nothing is journaled", async () => {
    const { journal, middleware, thrown, request } = streaming("billing_grade");
    const response = await request();
    expect([response.status, await response.text()]).toEqual([200, "hello world"]);
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(thrown.error).toBeInstanceOf(UsageReportedLateError);
    expect(thrown.error).toMatchObject({ code: "usage_reported_late", requestId: response.headers.get("x-request-id") });
    expect((thrown.error as Error).message).toMatch(/^usage reported after the response was settled: report it before returning the response/);
    expect(middleware.counters).toMatchObject({ appended: 0, late: 1 });
    expect(await pending(journal)).toBe(0);
  });

  it("telemetry_grade: a late report does not throw into the stream (it goes on to its end); the event is counted late and dropped, and onDropped is told", async () => {
    const dropped: unknown[] = [];
    const { journal, middleware, thrown, request } = streaming("telemetry_grade", (error) => dropped.push(error));
    const response = await request();
    expect([response.status, await response.text()]).toEqual([200, "hello world"]);
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(thrown.error).toBeNull();
    expect(dropped).toEqual([expect.any(UsageReportedLateError)]);
    expect(middleware.counters).toMatchObject({ appended: 0, late: 1, dropped: 1 });
    expect(await pending(journal)).toBe(0);
  });

  it("a report before the handler returns is journaled as before (and late stays 0)", async () => {
    const journal = billingJournal();
    const { app, counters } = appWith({ journal });
    expect((await post(app)).status).toBe(200);
    expect(await pending(journal)).toBe(1);
    expect(counters).toEqual({ appended: 1, dropped: 0, refused: 0, duplicates: 0, late: 0 });
  });
});

describe("usageJournal: telemetry grade and misbehaving callbacks", () => {
  it("telemetry_grade: an x-request-id it cannot use (a proxy's v4) is replaced by a minted id, and the request is served", async () => {
    const journal = billingJournal();
    const { app, counters } = appWith({ journal, mode: "telemetry_grade" });
    const answer = await post(app, { "x-request-id": crypto.randomUUID() });
    expect(answer.status).toBe(200);
    expect(answer.headers.get("x-request-id")).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7/);
    await vi.waitFor(() => expect(counters.appended).toBe(1));
  });

  it("billing_grade: a journal function that returns no journal (a missing binding) is the documented JSON 500 backend, counted refused", async () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const { app, counters, runs } = appWith({ journal: (() => undefined) as never });
    const answer = await post(app);
    expect([answer.status, answer.headers.get("content-type")?.split(";")[0]]).toEqual([500, "application/json"]);
    expect(((await answer.json()) as ErrorAnswer).error).toMatchObject({ code: "backend", retryable: false });
    expect(runs.count).toBe(1);
    expect(counters).toMatchObject({ refused: 1, appended: 0 });
  });

  it("telemetry_grade: an onDropped that throws never fails the response nor leaves a rejection unhandled", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      const throwing = () => {
        throw new Error("the callback broke");
      };
      const badRecord = appWith({ journal: billingJournal(), mode: "telemetry_grade", toRecord: () => ({ namespace: "", subject: "u1", data: {} }), onDropped: throwing });
      expect((await post(badRecord.app)).status).toBe(200);
      const failingAppend = appWith({ journal: withAppend(billingJournal(), () => Promise.reject(new Error("down"))), mode: "telemetry_grade", onDropped: throwing });
      expect((await post(failingAppend.app)).status).toBe(200);
      await vi.waitFor(() => expect(failingAppend.counters.dropped).toBe(1));
      await new Promise((resolve) => setTimeout(resolve, 10));
      expect(unhandled).toEqual([]);
      expect(logged).toHaveBeenCalledTimes(2);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });
});

describe("usageJournal: a billing-grade journal must refuse when full", () => {
  const dropping = () => billingJournal({ ...BILLING_GRADE, policy: "drop_oldest" });

  it("refuses a journal whose capacity policy is drop_oldest at construction (InvalidArgumentError, argument journal)", () => {
    const construct = () => usageJournal({ journal: dropping(), mode: "billing_grade", toRecord: () => null });
    expect(construct).toThrow(InvalidArgumentError);
    expect(construct).toThrow(expect.objectContaining({ code: "invalid_argument", argument: "journal", message: expect.stringMatching(/capacity policy is "refuse".*drop_oldest/) as string }) as Error);
    expect(() => usageJournal({ journal: dropping(), mode: "telemetry_grade", toRecord: () => null })).not.toThrow();
  });

  it("refuses it per request when the journal comes from a function: 500 backend, not retryable, not served, nothing journaled", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    const journal = dropping();
    const { app, counters } = appWith({ journal: () => journal });
    const answer = await post(app);
    expect([answer.status, answer.headers.get("retry-after")]).toEqual([500, null]);
    const body = (await answer.json()) as ErrorAnswer & { ok?: boolean };
    expect(body.ok).toBeUndefined();
    expect(body.error).toMatchObject({ code: "backend", retryable: false });
    expect(body.error.message).toMatch(/could not be journaled/);
    expect(await pending(journal)).toBe(0);
    expect(counters).toMatchObject({ appended: 0, refused: 1 });
  });
});

describe("usageJournal: the client's x-request-id", () => {
  it("accepts a UUIDv7 in any letter case, and uses it in lowercase: the retry in other case is the same request", async () => {
    const journal = billingJournal();
    const { app } = appWith({ journal });
    const id = newRequestId();
    const first = await post(app, { "x-request-id": id.toUpperCase() });
    expect([first.status, first.headers.get("x-request-id")]).toEqual([200, id]);
    const again = await post(app, { "x-request-id": id.replace(/[a-f]/, (x) => x.toUpperCase()) });
    expect([again.status, ((await again.json()) as ErrorAnswer).error.code]).toEqual([409, "duplicate_request"]);
    const [delivery] = await journal.claim(billing, { maxEvents: 10, leaseMs: 1000, now: Date.now() });
    expect(delivery?.event.record.requestId).toBe(id);
    expect(await pending(journal)).toBe(1);
  });

  for (const [label, value] of [
    ["a version 4 UUID (crypto.randomUUID())", crypto.randomUUID()],
    ["not a UUID", "not-an-id"],
    ["empty", ""],
  ] as const) {
    it(`answers ${label} with 400 invalid_request naming the header, without running the handler or minting an id`, async () => {
      const journal = billingJournal();
      const { app, runs, counters } = appWith({ journal });
      for (let i = 0; i < 2; i++) {
        const answer = await post(app, { "x-request-id": value });
        expect([answer.status, answer.headers.get("x-request-id")]).toEqual([400, null]);
        const body = (await answer.json()) as ErrorAnswer;
        expect(body.error).toMatchObject({ code: "invalid_request", retryable: false, fields: { argument: "x-request-id" } });
        expect(body.error.message).toMatch(/x-request-id header must be a UUIDv7/);
      }
      expect(runs.count).toBe(0);
      expect(await pending(journal)).toBe(0);
      expect(counters.appended).toBe(0);
    });
  }
});

describe("usageJournal: a failed append says whether the usage may have been journaled", () => {
  const lostReplies = (count: { left: number }) =>
    withAppend(billingJournal(), async (event, target) => {
      const result = await target.append(event);
      if (count.left-- > 0) throw new BackendError("the connection to the Durable Object closed before its reply", { retryable: true });
      return result;
    });

  it("a backend failure after the commit (every try's reply lost): 503, retryable, the answer says it may have been journaled and to retry with the same id, whose 409 duplicate_request means billed", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    const count = { left: 3 };
    const journal = lostReplies(count);
    const { app, counters } = appWith({ journal });
    const failed = await post(app);
    const id = failed.headers.get("x-request-id")!;
    expect([failed.status, failed.headers.get("retry-after")]).toEqual([503, "1"]);
    const body = (await failed.json()) as ErrorAnswer;
    expect(body.error).toMatchObject({ code: "backend", retryable: true, requestId: id });
    expect(body.error.message).toMatch(/may have been journaled/);
    expect(body.error.message).toContain(`retry with the same x-request-id (${id}); a 409 duplicate_request then means it was billed`);
    expect(body.error.message).not.toMatch(/could not be journaled/);
    expect(await pending(journal)).toBe(1); // it was billed
    const retried = await post(app, { "x-request-id": id });
    expect([retried.status, ((await retried.json()) as ErrorAnswer).error.code]).toEqual([409, "duplicate_request"]);
    expect(counters).toMatchObject({ refused: 1, duplicates: 1 });
  });

  it("a full journal (at_capacity): 503, retryable, nothing was journaled, and the answer says so", async () => {
    const journal = billingJournal({ ...BILLING_GRADE, maxEvents: 1 });
    const { app } = appWith({ journal });
    expect((await post(app)).status).toBe(200);
    const full = await post(app);
    expect([full.status, full.headers.get("retry-after")]).toEqual([503, "1"]);
    const body = (await full.json()) as ErrorAnswer;
    expect(body.error).toMatchObject({ code: "at_capacity", retryable: true });
    expect(body.error.message).toMatch(/^the request's usage could not be journaled, so it was not served/);
    expect(body.error.message).not.toMatch(/may have been journaled/);
  });

  for (const [label, cause] of [
    ["overloaded", Object.assign(new Error("Durable Object is overloaded"), { overloaded: true })],
    ["full", Object.assign(new Error("SQLITE_FULL"), { code: "storage_full" })],
  ] as const) {
    it(`a backend failure whose storage object is ${label} (a wait-out mark): 503, retryable, nothing was journaled, and the answer says so`, async () => {
      vi.spyOn(console, "error").mockImplementation(() => {});
      let tries = 0;
      const journal = withAppend(billingJournal(), async () => {
        tries += 1;
        throw new BackendError(`append: ${cause.message}`, { cause, retryable: false });
      });
      const { app } = appWith({ journal });
      const refused = await post(app);
      expect([refused.status, refused.headers.get("retry-after"), tries]).toEqual([503, "1", 1]);
      const body = (await refused.json()) as ErrorAnswer;
      expect(body.error).toMatchObject({ code: "backend", retryable: true });
      expect(body.error.message).toMatch(/^the request's usage could not be journaled, so it was not served/);
      expect(body.error.message).not.toMatch(/may have been journaled/);
    });
  }

  it("a backend failure a retry will not fix: 500, not retryable, and still it may have been journaled (a retry must send the same id)", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    const journal = withAppend(billingJournal(), async () => Promise.reject(new BackendError("disk is corrupt", { retryable: false })));
    const { app } = appWith({ journal });
    const failed = await post(app);
    expect([failed.status, failed.headers.get("retry-after")]).toEqual([500, null]);
    const body = (await failed.json()) as ErrorAnswer;
    expect(body.error).toMatchObject({ code: "backend", retryable: false });
    expect(body.error.message).toMatch(/may have been journaled.*a retry must send the same x-request-id/);
  });

  it("a journal function that throws: 500, nothing was appended, and the answer says so", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    const { app, counters } = appWith({
      journal: () => {
        throw new Error("no JOURNAL binding");
      },
    });
    const failed = await post(app);
    expect(failed.status).toBe(500);
    const body = (await failed.json()) as ErrorAnswer;
    expect(body.error).toMatchObject({ code: "backend", retryable: false });
    expect(body.error.message).toMatch(/^the request's usage could not be journaled/);
    expect(counters).toMatchObject({ refused: 1 });
  });

  it("a lost reply followed by an overloaded try is still an unknown outcome (the first try may have committed)", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    let tries = 0;
    const journal = withAppend(billingJournal(), async (event, target) => {
      tries += 1;
      if (tries === 1) {
        await target.append(event);
        throw new BackendError("reply lost", { retryable: true });
      }
      throw new BackendError("overloaded", { cause: Object.assign(new Error("Durable Object is overloaded"), { overloaded: true }), retryable: false });
    });
    const { app } = appWith({ journal });
    const failed = await post(app);
    expect([failed.status, tries]).toEqual([503, 2]);
    expect(((await failed.json()) as ErrorAnswer).error.message).toMatch(/may have been journaled/);
  });
});

describe("usageJournal: a request id already used", () => {
  it("a client's id journaled with other usage (a retry whose handler reported other figures) is 409 duplicate_request, not conflict", async () => {
    const journal = billingJournal();
    const { app, counters } = appWith({ journal });
    const id = newRequestId();
    expect((await post(app, { "x-request-id": id, "x-tokens": "40" })).status).toBe(200);
    const retried = await post(app, { "x-request-id": id, "x-tokens": "41" });
    expect([retried.status, retried.headers.get("retry-after"), retried.headers.get("x-request-id")]).toEqual([409, null, id]);
    const body = (await retried.json()) as ErrorAnswer;
    expect(body.error).toMatchObject({ code: "duplicate_request", retryable: false, requestId: id });
    expect(body.error.message).toMatch(/^this request id was already used/);
    expect(await pending(journal)).toBe(1);
    expect(counters).toMatchObject({ appended: 1, refused: 0, duplicates: 1 });
  });

  it("a conflict on an id the middleware minted itself stays 409 conflict (a bug, never a retry)", async () => {
    const journal = withAppend(billingJournal(), async (event) => Promise.reject(new EventConflictError(event.id)));
    const { app, counters } = appWith({ journal });
    const answer = await post(app);
    expect(answer.status).toBe(409);
    expect(((await answer.json()) as ErrorAnswer).error).toMatchObject({ code: "conflict", retryable: false });
    expect(counters).toMatchObject({ refused: 1, duplicates: 0 });
  });

  it("a replayed id runs the handler again, and only its answer is dropped (handlers must be idempotent per request id)", async () => {
    const journal = billingJournal();
    const { app, runs } = appWith({ journal });
    const id = newRequestId();
    expect((await post(app, { "x-request-id": id })).status).toBe(200);
    expect((await post(app, { "x-request-id": id })).status).toBe(409);
    expect(runs.count).toBe(2);
    expect(await pending(journal)).toBe(1);
  });
});

describe("usageJournal: appendTimeoutMs", () => {
  const stuck = () => withAppend(billingJournal(), () => new Promise(() => {}));

  it("a journal that never answers: after appendTimeoutMs, 503, retryable, not served, and the usage may have been journaled", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    const { app, counters } = appWith({ journal: stuck(), appendTimeoutMs: 20 });
    const started = Date.now();
    const answer = await post(app);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect([answer.status, answer.headers.get("retry-after")]).toEqual([503, "1"]);
    const body = (await answer.json()) as ErrorAnswer & { ok?: boolean };
    expect(body.ok).toBeUndefined();
    expect(body.error).toMatchObject({ code: "backend", retryable: true });
    expect(body.error.message).toMatch(/may have been journaled/);
    expect(body.error.message).toMatch(/did not answer within 20 ms/);
    expect(counters).toMatchObject({ appended: 0, refused: 1 });
  });

  it("defaults to 10,000 ms, on the injected scheduler's timers", async () => {
    vi.spyOn(console, "error").mockImplementation(() => {});
    const time = virtualClock(0);
    const scheduler = virtualScheduler(time, { waitForCallbacks: false });
    const { app } = appWith({ journal: stuck(), scheduler });
    let status: number | null = null;
    const request = Promise.resolve(post(app)).then((answer) => (status = answer.status));
    await vi.waitFor(() => expect(scheduler.pending()).toBe(1)); // the append is waiting on its deadline
    expect(scheduler.delays).toEqual([10_000]);
    await scheduler.advance(9_999);
    expect(status).toBeNull();
    await scheduler.advance(1);
    await request;
    expect(status).toBe(503);
  });

  it("is validated (InvalidArgumentError, argument appendTimeoutMs); option names the middleware does not know are still ignored", () => {
    const journal = billingJournal();
    for (const appendTimeoutMs of [0, -1, 1.5, Number.NaN, Infinity, 2 ** 31, "100" as unknown as number]) {
      expect(() => usageJournal({ journal, mode: "billing_grade", toRecord: () => null, appendTimeoutMs })).toThrow(
        expect.objectContaining({ code: "invalid_argument", argument: "appendTimeoutMs" }) as Error,
      );
    }
    expect(() => usageJournal({ journal, mode: "billing_grade", toRecord: () => null, appendTimeoutMs: 1 })).not.toThrow();
    expect(() => usageJournal({ journal, mode: "billing_grade", toRecord: () => null, appendTimeoutMs: 2 ** 31 - 1 })).not.toThrow();
    expect(() => usageJournal({ journal, mode: "billing_grade", toRecord: () => null, ...({ timeoutMs: 5 } as object) })).not.toThrow();
    expect(() => usageJournal({ journal, mode: "billing_grade", toRecord: () => null, scheduler: {} as never })).toThrow(
      expect.objectContaining({ code: "invalid_argument", argument: "scheduler" }) as Error,
    );
  });
});

describe("usageJournal: a failing usage extractor is a server fault", () => {
  for (const [label, toRecord] of [
    ["throws", () => { throw new TypeError("no user on the context"); }],
    ["returns undefined", () => undefined],
    ["returns a record that is not a valid event", () => ({ namespace: "acme", subject: "", data: 1 })],
    ["returns data that is not JSON", () => ({ namespace: "acme", subject: "u1", data: { tokens: Number.NaN } })],
  ] as const) {
    it(`billing_grade: toRecord ${label}: logged with an id, 500 internal naming the extractor, not served, nothing journaled`, async () => {
      const logged: unknown[][] = [];
      vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => void logged.push(args));
      const journal = billingJournal();
      const { app, counters } = appWith({ journal, toRecord: toRecord as unknown as UsageJournalOptions<Usage>["toRecord"] });
      const answer = await post(app);
      expect([answer.status, answer.headers.get("retry-after")]).toEqual([500, null]);
      const body = (await answer.json()) as ErrorAnswer & { ok?: boolean };
      expect(body.ok).toBeUndefined();
      expect(body.error).toMatchObject({ code: "internal", retryable: false, requestId: answer.headers.get("x-request-id") });
      const id = /^the usage extractor failed or returned an invalid record \(logged as ([0-9a-f]{8})\)/.exec(body.error.message)?.[1];
      expect(id).toBeDefined();
      expect(logged).toHaveLength(1);
      expect(String(logged[0]?.[0])).toContain(`the usage extractor failed [${id}]`);
      expect(await pending(journal)).toBe(0);
      expect(counters).toMatchObject({ appended: 0, refused: 1 });
    });
  }

  it("telemetry_grade: a throwing toRecord is counted as dropped and goes to onDropped, the answer is served", async () => {
    const dropped: unknown[] = [];
    const { app, counters } = appWith({
      journal: billingJournal(),
      mode: "telemetry_grade",
      toRecord: () => {
        throw new TypeError("no user on the context");
      },
      onDropped: (error) => dropped.push(error),
    });
    expect((await post(app)).status).toBe(200);
    expect(dropped).toEqual([expect.any(TypeError)]);
    expect(counters).toMatchObject({ dropped: 1 });
  });
});
