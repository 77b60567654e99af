/**
 * What the HTTP API answers, and logs, when the server itself fails: the
 * storage under a journal breaking, or an untyped exception. Any token holder
 * (a browser's user with an `append:<namespace>` token, say) reads the
 * answer, so it names the failure and a log id, never the internals (SQL,
 * paths, engine states); the worker's log has the error with that id.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { backendError } from "../../adapters/durable-objects/errors.js";
import { memoryEngine } from "../../adapters/memory/index.js";
import { BackendError, createJournal, createUsageEvent, type UsageJournal } from "../../src/index.js";
import { AmbiguousError, AppendVerifyError, StorageBackendError } from "../../src/storage/errors.js";
import { errorAnswer } from "../../src/worker/errors.js";
import { createApp } from "../../src/worker/index.js";

const TOKEN = "acme-producer-token-01234";
const SECRET = "SQLITE_ERROR: no such table: q_events_v3 (at /srv/partition.ts:412)";
const event = { record: { requestId: "0190b000-0000-7000-8000-000000000001", namespace: "acme", subject: "u1", data: { n: 1 } }, observedAt: 1_700_000_000_000 };

/** A journal whose appends fail the way broken storage does. */
function breaking(failure: () => Error): UsageJournal {
  const journal = createJournal(memoryEngine(), { name: "usage" });
  return new Proxy(journal, {
    get(target, property, receiver) {
      if (property === "append") return () => Promise.reject(failure());
      return Reflect.get(target, property, receiver) as unknown;
    },
  });
}

async function appendThrough(journal: UsageJournal): Promise<{ status: number; body: { error: { code: string; message: string; retryable: boolean } } }> {
  const app = createApp({ journals: { usage: journal }, auth: { tokens: [{ name: "acme", token: TOKEN, scopes: ["append:acme"] }] } });
  const answer = await app.fetch(
    new Request("http://isostore.test/v1/journals/usage/append", {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ event }),
    }),
  );
  return { status: answer.status, body: (await answer.json()) as { error: { code: string; message: string; retryable: boolean } } };
}

describe("server faults over HTTP", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it.each([
    ["a backend failure (retryable)", () => new BackendError(SECRET, { retryable: true }), 503, "backend", true],
    ["a backend failure (not retryable)", () => new BackendError(SECRET, { retryable: false }), 500, "backend", false],
    ["an untyped exception", () => new TypeError(SECRET), 500, "internal", false],
  ] as const)("%s is answered with its code and a log id, and logged with that id and the error", async (_, failure, status, code, retryable) => {
    const logged: unknown[][] = [];
    vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => {
      logged.push(args);
    });
    const answer = await appendThrough(breaking(failure));
    expect([answer.status, answer.body.error.code, answer.body.error.retryable]).toEqual([status, code, retryable]);
    expect(answer.body.error.message).not.toContain("SQLITE");
    expect(answer.body.error.message).not.toContain("/srv/");
    const id = /error ([0-9a-f]{8})\)$/.exec(answer.body.error.message)?.[1];
    expect(id).toBeDefined();
    expect(logged).toHaveLength(1);
    expect(String(logged[0]![0])).toContain(`[${id!}]`);
    expect(String((logged[0]![1] as Error).message)).toContain("no such table");
  });

  it("a server fault's cause is not answered either: a storage backend failure keeps its operation, not the engine's text", () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    for (const fault of [new StorageBackendError("kv.get", new Error(SECRET)), new BackendError("storage failed", { cause: new Error(SECRET), retryable: true })]) {
      const answer = errorAnswer(fault);
      expect(JSON.stringify(answer.body)).not.toContain("SQLITE");
      expect(JSON.stringify(answer.body)).not.toContain("/srv/");
    }
    expect(errorAnswer(new StorageBackendError("kv.get", new Error(SECRET))).body.error).toMatchObject({ code: "backend", fields: { operation: "kv.get" } });
  });

  it("no typed answer carries its cause's text either: an ambiguous outcome keeps its message and fields, the cause goes to the log", () => {
    const logged: unknown[][] = [];
    vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => {
      logged.push(args);
    });
    for (const [error, status, code] of [
      [new AmbiguousError("orders", 3, Object.assign(new Error(SECRET), { retryable: true })), 504, "ambiguous"],
      [new AppendVerifyError("orders", 4, new Error(SECRET)), 504, "append_verify_failed"],
    ] as const) {
      const answer = errorAnswer(error);
      expect([answer.status, answer.body.error.code]).toEqual([status, code]);
      expect(JSON.stringify(answer.body)).not.toContain("SQLITE");
      expect(answer.body.error.fields).toMatchObject({ name: "orders" });
      const id = /error ([0-9a-f]{8})\)$/.exec(answer.body.error.message)?.[1];
      expect(String(logged.at(-1)?.[0])).toContain(`[${id!}]`);
    }
  });

  it("an unknown outcome (504) is never retryable as such, even when its lost reply's failure was: a blind retry of a compare-and-swap that applied fails as a conflict", () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const lostReply = () => Object.assign(new Error("Network connection lost."), { retryable: true });
    for (const error of [new AmbiguousError("orders", 3, lostReply()), new AppendVerifyError("orders", 4, lostReply())]) {
      const { status, body } = errorAnswer(error);
      expect([status, body.error.retryable]).toEqual([504, false]);
      expect(body.error.fields).not.toHaveProperty("retryable");
    }
  });

  it("an overloaded Durable Object or a full one is a 503 with Retry-After, retryable (waited out), not a 500 (the request's fault)", async () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    for (const platform of [Object.assign(new Error("Durable Object is overloaded."), { overloaded: true, retryable: true }), new Error("SQLITE_FULL: database or disk is full")]) {
      const fault = backendError(platform, "append");
      expect(fault.retryable).toBe(false); // never retried at once in the process
      const answer = await appendThrough(breaking(() => fault));
      expect([answer.status, answer.body.error.code, answer.body.error.retryable]).toEqual([503, "backend", true]);
    }
    const broken = await appendThrough(breaking(() => backendError(new Error("internal error; reference = x"), "append")));
    expect([broken.status, broken.body.error.retryable]).toEqual([500, false]);
  });

  it("an error the caller caused keeps its message and is not logged", async () => {
    const logged: unknown[][] = [];
    vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => {
      logged.push(args);
    });
    const journal = createJournal(memoryEngine(), { name: "usage" });
    await journal.append(createUsageEvent({ ...event, record: { ...event.record, data: { n: 2 } } }));
    const answer = await appendThrough(journal);
    expect([answer.status, answer.body.error.code]).toEqual([409, "conflict"]);
    expect(answer.body.error.message).toContain(event.record.requestId);
    expect(logged).toEqual([]);
  });
});
