/**
 * `HttpJournal` against the real worker app over a memory journal whose
 * calls can be made to fail, to check what the client repeats when a call
 * that is not idempotent (claim, extend, nack, release, discard) fails:
 *
 * - a retryable `backend` failure that came after the commit (what a lost
 *   reply between the worker and its Durable Object looks like) is not
 *   repeated: the caller gets the failure, and the work is done once;
 * - a refusal before any commit that waiting out fixes (a full or overloaded
 *   storage object: the worker's 503 carries its marks as `cause`) is
 *   repeated, and the repeated call succeeds.
 */
import { describe, expect, it, vi } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { HttpJournal, type FetchLike } from "../../src/http/index.js";
import { BackendError, createJournal, createUsageEvent, parseConsumerId, type Capacity, type UsageJournal } from "../../src/index.js";
import { createApp } from "../../src/worker/index.js";
import { rejection } from "./support/rejection.js";

const TOKEN = "commit-retry-token-0123456789";
const t0 = 1_700_000_000_000;
const billing = parseConsumerId("billing");
const CAPACITY: Capacity = { maxEvents: 100, maxDeliveryAttempts: 5, retainAcknowledgedMs: 60_000, policy: "refuse" };
const rid = (n: number) => `0190c000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`;
const event = (n: number) => createUsageEvent({ record: { requestId: rid(n), namespace: "acme", subject: `user-${n}`, data: { tokens: n } }, observedAt: t0 });
const ATTEMPTS = 4;

type Method = "claim" | "extend" | "nack" | "release" | "discard" | "stats";
/** How the next call of a method fails: after it ran (`after`), or instead of running (`before`, with this error). */
type Failure = { readonly when: "after"; readonly error: Error } | { readonly when: "before"; readonly error: Error };

/** A lost reply from a Durable Object: retryable, and it may follow the commit (adapters/durable-objects/errors.ts `backendError`). */
const lostReply = () => new BackendError("rpc: Network connection lost", { retryable: true });
/** A full storage object: refused before anything committed (not retryable at once; the worker answers 503 with its mark). */
const storageFull = () => new BackendError("the object's storage is full", { cause: Object.assign(new Error("SQLITE_FULL"), { code: "storage_full" }) });
/** An overloaded storage object: refused before anything committed. */
const overloaded = () => new BackendError("the object is overloaded", { cause: Object.assign(new Error("Durable Object is overloaded."), { overloaded: true }) });

function setup() {
  const inner = createJournal(memoryEngine(), { name: "usage", capacity: CAPACITY, clock: () => t0 });
  const failures = new Map<Method, Failure[]>();
  const served = new Map<Method, number>();
  const journal: UsageJournal = new Proxy(inner, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      const method = value as (...args: unknown[]) => Promise<unknown>;
      return async (...args: unknown[]) => {
        const name = property as Method;
        served.set(name, (served.get(name) ?? 0) + 1);
        const failure = failures.get(name)?.shift();
        if (failure?.when === "before") throw failure.error;
        const result = await method.apply(target, args);
        if (failure?.when === "after") throw failure.error;
        return result;
      };
    },
  });
  const app = createApp({
    journals: { usage: { journal, consumers: ["billing"] } },
    auth: { tokens: [{ name: "ops", token: TOKEN, scopes: ["operate", "consume", "append:*"] }] },
    clock: () => t0,
  });
  const fetch: FetchLike = async (url, init) => app.fetch(new Request(url, init));
  const client = new HttpJournal({
    baseUrl: "http://isostore.test",
    journal: "usage",
    token: TOKEN,
    fetch,
    capacity: CAPACITY,
    mode: inner.mode,
    retry: { attempts: ATTEMPTS },
    sleep: async () => {},
  });
  const fail = (method: Method, ...next: Failure[]) => {
    failures.set(method, next);
    served.set(method, 0);
  };
  return { inner, app, client, fail, served: (method: Method) => served.get(method) ?? 0 };
}

/** Append `n` events and quarantine them for billing. */
async function quarantine(journal: UsageJournal, count: number): Promise<void> {
  for (let n = 1; n <= count; n++) await journal.append(event(n));
  for (const delivery of await journal.claim(billing, { maxEvents: count, leaseMs: 60_000, now: t0 })) await journal.quarantine(delivery.id, "rejected");
}

describe("HttpJournal: a call that is not idempotent is not repeated after a failure that may follow the commit", () => {
  it("claim: the server's claim ran once; the event is leased once, with one attempt spent", async () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const { inner, client, fail, served } = setup();
    await inner.append(event(1));
    fail("claim", { when: "after", error: lostReply() });
    const error = await rejection(client.claim(billing, { maxEvents: 10, leaseMs: 60_000, now: t0 }));
    expect(error).toBeInstanceOf(BackendError);
    expect(error).toMatchObject({ code: "backend", retryable: true });
    expect(served("claim")).toBe(1);
    expect((await inner.attempts(billing, rid(1))).map((attempt) => attempt.attempt)).toEqual([1]);
    vi.restoreAllMocks();
  });

  it("release and discard: the action ran once and is audited once; the caller gets the backend error, not not_quarantined", async () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const { inner, client, fail, served } = setup();
    await quarantine(inner, 2);
    fail("release", { when: "after", error: lostReply() });
    expect(await rejection(client.release(billing, rid(1), { now: t0 + 1 }))).toMatchObject({ code: "backend", retryable: true });
    expect(served("release")).toBe(1);
    fail("discard", { when: "after", error: lostReply() });
    expect(await rejection(client.discard(billing, rid(2), { now: t0 + 2 }))).toMatchObject({ code: "backend", retryable: true });
    expect(served("discard")).toBe(1);
    expect((await inner.listQuarantined(billing, {})).items).toEqual([]);
    expect((await inner.listAudit({})).items.map((entry) => `${entry.action} ${entry.requestId}`)).toEqual([`release ${rid(1)}`, `discard ${rid(2)}`]);
    vi.restoreAllMocks();
  });

  it("nack and extend: each ran once", async () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const { inner, client, fail, served } = setup();
    await inner.append(event(1));
    await inner.append(event(2));
    const [first, second] = await inner.claim(billing, { maxEvents: 2, leaseMs: 60_000, now: t0 });
    fail("extend", { when: "after", error: lostReply() });
    expect(await rejection(client.extend(first!.id, { leaseMs: 1_000, now: t0 + 1 }))).toMatchObject({ code: "backend", retryable: true });
    expect(served("extend")).toBe(1);
    fail("nack", { when: "after", error: lostReply() });
    expect(await rejection(client.nack(second!.id, { retryAfterMs: 0, error: "boom", now: t0 + 2 }))).toMatchObject({ code: "backend", retryable: true });
    expect(served("nack")).toBe(1);
    // The nack committed once: a repeat would have failed as not outstanding and hidden that.
    expect((await inner.attempts(billing, rid(2)))[0]?.outcome).toMatchObject({ kind: "nacked", error: "boom" });
    vi.restoreAllMocks();
  });

  it("an idempotent call (stats) is still repeated after the same failure", async () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const { client, fail, served } = setup();
    fail("stats", { when: "after", error: lostReply() }, { when: "after", error: lostReply() });
    expect((await client.stats(billing)).pending).toBe(0);
    expect(served("stats")).toBe(3);
    vi.restoreAllMocks();
  });
});

describe("HttpJournal: a call refused before any commit by a full or overloaded storage object is repeated, claim included", () => {
  it("the worker's 503 carries the marks as `cause` (and nothing else of the cause)", async () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const { app, fail } = setup();
    for (const [refusal, marks] of [
      [storageFull, { code: "storage_full" }],
      [overloaded, { overloaded: true }],
    ] as const) {
      fail("claim", { when: "before", error: refusal() });
      const response = await app.fetch(
        new Request("http://isostore.test/v1/journals/usage/claim", {
          method: "POST",
          headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify({ consumer: "billing", maxEvents: 1, leaseMs: 1_000, now: t0 }),
        }),
      );
      expect(response.status).toBe(503);
      const body = (await response.json()) as { error: Record<string, unknown> };
      expect(body.error).toMatchObject({ code: "backend", retryable: true, cause: marks });
      expect(JSON.stringify(body)).not.toMatch(/SQLITE_FULL|Durable Object is overloaded/);
    }
    vi.restoreAllMocks();
  });

  it("claim, release and nack each succeed on the repeat", async () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const { inner, client, fail, served } = setup();
    await quarantine(inner, 1);
    await inner.append(event(2));
    fail("claim", { when: "before", error: storageFull() }, { when: "before", error: overloaded() });
    const deliveries = await client.claim(billing, { maxEvents: 10, leaseMs: 60_000, now: t0 + 1 });
    expect(deliveries.map((delivery) => delivery.id.event)).toEqual([rid(2)]);
    expect(served("claim")).toBe(3);
    fail("nack", { when: "before", error: overloaded() });
    await client.nack(deliveries[0]!.id, { retryAfterMs: 0, error: "later", now: t0 + 2 });
    expect(served("nack")).toBe(2);
    fail("release", { when: "before", error: storageFull() });
    await client.release(billing, rid(1), { now: t0 + 3 });
    expect(served("release")).toBe(2);
    expect((await inner.listAudit({})).items.map((entry) => `${entry.action} ${entry.requestId}`)).toEqual([`release ${rid(1)}`]);
    vi.restoreAllMocks();
  });
});
