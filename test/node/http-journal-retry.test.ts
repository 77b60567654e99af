/**
 * `HttpJournal`'s failure handling, call by call, against a scripted fake
 * fetch (every other suite runs it with `retry: { attempts: 1 }`): which
 * failures are retried for idempotent calls (`stats`, `appendBatch`) and for
 * `claim`, which is not idempotent (only what says nothing committed: a 429,
 * a full or overloaded storage object's 503), how many requests each costs, and the
 * typed error the caller gets (class, code, retryable, cause). Then the
 * bounds of a call: the per-try `timeoutMs`, and the caller's `signal` on
 * `appendBatch`, which stops everything, a wait between tries included.
 * Last, the same failures through the platform's own fetch against a real
 * socket: a body cut off after the headers, a server that never answers.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HttpError, HttpJournal, type FetchLike, type HttpJournalOptions, type ResponseLike } from "../../src/http/index.js";
import type { JournalError} from "../../src/index.js";
import { BackendError, BILLING_GRADE, createUsageEvent, InvalidArgumentError, newRequestId, parseConsumerId } from "../../src/index.js";
import { rejection } from "./support/rejection.js";

const TOKEN = "retry-token-0123456789";
const billing = parseConsumerId("billing");
const ATTEMPTS = 3;
const TIMEOUT_MS = 20;

/** What the fake server does with one request. */
type Answer =
  | { readonly status: number; readonly body?: unknown }
  /** The fetch rejects (refused, reset before the headers). */
  | { readonly fetchThrows: unknown }
  /** The headers arrive, then the body breaks off. */
  | { readonly status: number; readonly bodyThrows: Error }
  /** No answer; the fetch rejects when its signal aborts, as the platform's does. */
  | "hang"
  /** No answer, and the fetch ignores its signal. */
  | "deaf"
  /** The headers arrive, the body never does (the read ignores the signal). */
  | "deaf-body";

interface Fake {
  readonly fetch: FetchLike;
  /** Every request, in order, with the init it was given. */
  readonly calls: { url: string; init: Parameters<FetchLike>[1] }[];
}

/** A fetch that answers the i-th request with `answers[i]` (the last one over and over). */
function scripted(...answers: Answer[]): Fake {
  const calls: Fake["calls"] = [];
  const response = (status: number, text: () => Promise<string>): ResponseLike => ({ status, headers: { get: () => null }, text });
  const fetch: FetchLike = async (url, init) => {
    calls.push({ url, init });
    const answer = answers[Math.min(calls.length, answers.length) - 1]!;
    if (answer === "hang") {
      return new Promise((_, reject) => init.signal?.addEventListener("abort", () => reject(init.signal?.reason as Error), { once: true }));
    }
    if (answer === "deaf") return new Promise(() => {});
    if (answer === "deaf-body") return response(200, () => new Promise(() => {}));
    if ("fetchThrows" in answer) throw answer.fetchThrows;
    if ("bodyThrows" in answer) return response(answer.status, () => Promise.reject(answer.bodyThrows));
    return response(answer.status, async () => (answer.body === undefined ? "" : typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body)));
  };
  return { fetch, calls };
}

/** A client over `fake` with `ATTEMPTS` tries, no jitter and a sleep that only records its delays. */
function client(fake: Fake, options: Partial<HttpJournalOptions> = {}) {
  const sleeps: number[] = [];
  const journal = new HttpJournal({
    baseUrl: "http://isostore.test",
    journal: "usage",
    token: TOKEN,
    fetch: fake.fetch,
    capacity: BILLING_GRADE,
    mode: "billing_grade",
    retry: { attempts: ATTEMPTS },
    timeoutMs: TIMEOUT_MS,
    batching: false,
    sleep: async (ms) => void sleeps.push(ms),
    random: () => 0,
    ...options,
  });
  return { journal, sleeps };
}

const event = () => createUsageEvent({ record: { requestId: newRequestId(), namespace: "acme", subject: "user-1", data: { tokens: 1 } }, observedAt: 1_000 });
const accepted = { status: 200, body: { results: [{ status: "accepted", position: 1 }] } };
/** A whole stats answer (the client checks an answer's shape). */
const someStats = { pending: 0, inFlight: 0, quarantined: 0, oldestPendingAgeMs: null, dropped: 0, capacity: BILLING_GRADE };

/** The calls the matrix makes: two idempotent ones and `claim`, which is not. */
const calls = {
  stats: (journal: HttpJournal) => journal.stats(billing),
  appendBatch: (journal: HttpJournal) => journal.appendBatch([event()]),
  claim: (journal: HttpJournal) => journal.claim(billing, { maxEvents: 1, leaseMs: 1_000, now: 0 }),
};

/** Wait (a few ms at a time) until `done()` holds. */
async function until(done: () => boolean): Promise<void> {
  for (let spins = 0; !done(); spins++) {
    if (spins > 2_000) throw new Error("timed out waiting");
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/** Asserts a `BackendError` whose cause is an `HttpError` with `status` and `code`. */
function expectHttpFailure(error: JournalError, status: number, code: string, retryable: boolean): void {
  expect(error).toBeInstanceOf(BackendError);
  expect(error).toMatchObject({ code: "backend", retryable });
  expect(error.cause).toBeInstanceOf(HttpError);
  expect(error.cause).toMatchObject({ status, code });
}

/** Asserts the error of a try whose outcome is unknown: a retryable `BackendError` whose cause is named `causeName`. */
function expectUnknownOutcome(error: JournalError, causeName: "NetworkFailure" | "TimeoutFailure", thrown?: unknown): void {
  expect(error).toBeInstanceOf(BackendError);
  expect(error).toMatchObject({ code: "backend", retryable: true });
  expect(error.cause).toBeInstanceOf(Error);
  expect((error.cause as Error).name).toBe(causeName);
  if (causeName === "TimeoutFailure") expect(error.cause).toMatchObject({ timeoutMs: TIMEOUT_MS });
  if (thrown !== undefined) expect((error.cause as Error).cause).toBe(thrown);
}

describe("HttpJournal retries: answers the server did not act on", () => {
  const passing = [{ label: "429", answer: { status: 429, body: { error: { code: "rate_limited", message: "slow down" } } }, status: 429, code: "rate_limited" }];
  for (const { label, answer, status, code } of passing) {
    for (const [name, call] of Object.entries(calls)) {
      it(`${label}: ${name} is tried ${ATTEMPTS} times, with backoff, then fails retryable`, async () => {
        const fake = scripted(answer);
        const { journal, sleeps } = client(fake);
        expectHttpFailure(await rejection(call(journal)), status, code ?? `http_${status}`, true);
        expect(fake.calls).toHaveLength(ATTEMPTS);
        expect(sleeps).toEqual([50, 100]); // base 100 ms, doubled, times 0.5 + random / 2 with random 0
      });
    }
  }

  it("a journal `backend` 503 with the marks of a full or overloaded storage object (refused before any commit) is retried, claim included", async () => {
    for (const cause of [{ code: "storage_full" }, { overloaded: true }]) {
      for (const [name, call] of Object.entries(calls)) {
        const fake = scripted({ status: 503, body: { error: { code: "backend", name: "BackendError", message: "storage full", retryable: true, fields: {}, cause } } });
        const error = await rejection(call(client(fake).journal));
        expect(error).toBeInstanceOf(BackendError);
        expect(error).toMatchObject({ code: "backend", retryable: true, message: "storage full" });
        expect(error.cause, name).toMatchObject(cause);
        expect(fake.calls, name).toHaveLength(ATTEMPTS);
      }
    }
  });

  it("a retry that succeeds answers the result", async () => {
    const fake = scripted({ status: 503 }, { status: 200, body: someStats });
    const { journal, sleeps } = client(fake);
    expect(await journal.stats(billing)).toEqual(someStats);
    expect(fake.calls).toHaveLength(2);
    expect(sleeps).toEqual([50]);
  });
});

describe("HttpJournal retries: outcomes unknown (idempotent calls only)", () => {
  const gateway = [
    { label: "502 from a gateway (an HTML body)", answer: { status: 502, body: "<html>Bad Gateway</html>" }, status: 502 },
    { label: "503 from a proxy", answer: { status: 503 }, status: 503 },
    { label: "504 from a gateway", answer: { status: 504 }, status: 504 },
  ];
  for (const { label, answer, status } of gateway) {
    it(`${label}: retried for stats and appendBatch, not for claim`, async () => {
      for (const [name, call] of Object.entries(calls)) {
        const fake = scripted(answer);
        expectHttpFailure(await rejection(call(client(fake).journal)), status, `http_${status}`, true);
        expect(fake.calls, name).toHaveLength(name === "claim" ? 1 : ATTEMPTS);
      }
    });
  }

  const thrown = new TypeError("fetch failed");
  const unknown = [
    { label: "a fetch that throws", answer: { fetchThrows: thrown }, cause: "NetworkFailure", thrown },
    { label: "a body that breaks off after the headers", answer: { status: 200, bodyThrows: thrown }, cause: "NetworkFailure", thrown },
    { label: "a body that breaks off after a 503's headers", answer: { status: 503, bodyThrows: thrown }, cause: "NetworkFailure", thrown },
    { label: "no answer within timeoutMs (a fetch that honours its signal)", answer: "hang", cause: "TimeoutFailure" },
    { label: "no answer within timeoutMs (a fetch that ignores its signal)", answer: "deaf", cause: "TimeoutFailure" },
    { label: "no whole body within timeoutMs", answer: "deaf-body", cause: "TimeoutFailure" },
  ] as const;
  for (const { label, answer, cause, ...rest } of unknown) {
    const error = "thrown" in rest ? rest.thrown : undefined;
    it(`${label}: a typed retryable error, retried for stats and appendBatch, not for claim`, { timeout: 5_000 }, async () => {
      for (const [name, call] of Object.entries(calls)) {
        const fake = scripted(answer);
        expectUnknownOutcome(await rejection(call(client(fake).journal)), cause, error);
        expect(fake.calls, name).toHaveLength(name === "claim" ? 1 : ATTEMPTS);
      }
    });
  }

  it("a journal `backend` 503 marked retryable without the marks (it may follow the commit: a lost reply from the Durable Object): retried for stats and appendBatch, not for claim", async () => {
    for (const [name, call] of Object.entries(calls)) {
      const fake = scripted({ status: 503, body: { error: { code: "backend", message: "storage busy", retryable: true } } });
      const error = await rejection(call(client(fake).journal));
      expect(error).toBeInstanceOf(BackendError);
      expect(error).toMatchObject({ code: "backend", retryable: true, message: "storage busy" });
      expect(fake.calls, name).toHaveLength(name === "claim" ? 1 : ATTEMPTS);
    }
  });

  it("a body that broke off once, then a whole answer: the retried appendBatch succeeds", async () => {
    const fake = scripted({ status: 200, bodyThrows: new TypeError("terminated") }, accepted);
    const [result] = await client(fake).journal.appendBatch([event()]);
    expect(result).toEqual({ status: "accepted", position: 1 });
    expect(fake.calls).toHaveLength(2);
  });

  it("each try gets its own signal, aborted by its own timeout", { timeout: 5_000 }, async () => {
    const fake = scripted("hang");
    await rejection(client(fake).journal.stats(billing));
    const signals = fake.calls.map((request) => request.init.signal);
    expect(new Set(signals).size).toBe(ATTEMPTS);
    for (const signal of signals) expect(signal?.aborted).toBe(true);
  });
});

describe("HttpJournal retries: final answers are not retried", () => {
  const final = [
    { status: 413, code: "payload_too_large" },
    { status: 401, code: "unauthorized" },
    { status: 403, code: "forbidden" },
    { status: 500, code: "internal" },
  ];
  for (const { status, code } of final) {
    it(`${status} ${code}: one request for every call, not retryable`, async () => {
      for (const [name, call] of Object.entries(calls)) {
        const fake = scripted({ status, body: { error: { code, message: "no", retryable: false } } });
        const { journal, sleeps } = client(fake);
        expectHttpFailure(await rejection(call(journal)), status, code, false);
        expect(fake.calls, name).toHaveLength(1);
        expect(sleeps).toEqual([]);
      }
    });
  }

  it("at_capacity (503, retryable) is the journal's answer: one request", async () => {
    const fake = scripted({ status: 503, body: { error: { code: "at_capacity", message: "full", retryable: true } } });
    const error = await rejection(client(fake).journal.appendBatch([event()]));
    expect(error).toMatchObject({ code: "at_capacity", retryable: true });
    expect(fake.calls).toHaveLength(1);
  });

  it("a journal `backend` answer not marked retryable: one request", async () => {
    const fake = scripted({ status: 500, body: { error: { code: "backend", message: "corrupt", retryable: false } } });
    const error = await rejection(client(fake).journal.stats(billing));
    expect(error).toBeInstanceOf(BackendError);
    expect(error).toMatchObject({ code: "backend", retryable: false });
    expect(fake.calls).toHaveLength(1);
  });
});

describe("HttpJournal timeoutMs", () => {
  it("is refused unless an integer from 0 to 2^31 - 1", () => {
    for (const timeoutMs of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31]) {
      expect(() => client(scripted(accepted), { timeoutMs })).toThrow(InvalidArgumentError);
    }
    for (const timeoutMs of [0, 1, 2 ** 31 - 1]) client(scripted(accepted), { timeoutMs });
  });

  it("0 sets no timer: a slow answer is waited for", async () => {
    let answer!: (response: ResponseLike) => void;
    const fake: Fake = { calls: [], fetch: async () => new Promise((resolve) => (answer = resolve)) };
    const pending = client(fake, { timeoutMs: 0 }).journal.stats(billing);
    await new Promise((resolve) => setTimeout(resolve, TIMEOUT_MS * 3));
    answer({ status: 200, headers: { get: () => null }, text: async () => JSON.stringify(someStats) });
    expect(await pending).toEqual(someStats);
  });
});

describe("HttpJournal retry, batching, sleep and random options", () => {
  it("are refused unless valid, with the option's name, before any request", () => {
    const bad: [Partial<HttpJournalOptions>, string][] = [
      [{ retry: { baseDelayMs: -1 } }, "retry.baseDelayMs"],
      [{ retry: { baseDelayMs: 1.5 } }, "retry.baseDelayMs"],
      [{ retry: { maxDelayMs: "soon" as never } }, "retry.maxDelayMs"],
      [{ retry: { maxDelayMs: 2 ** 31 } }, "retry.maxDelayMs"],
      [{ batching: { maxDelayMs: Number.NaN } }, "batching.maxDelayMs"],
      [{ batching: { maxDelayMs: -5 } }, "batching.maxDelayMs"],
      [{ random: 42 as never }, "random"],
      [{ sleep: "x" as never }, "sleep"],
    ];
    const fake = scripted(accepted);
    for (const [options, argument] of bad) {
      expect(() => client(fake, options), argument).toThrow(InvalidArgumentError);
      expect(() => client(fake, options)).toThrow(expect.objectContaining({ argument }) as Error);
    }
    for (const options of [{ retry: { baseDelayMs: 0, maxDelayMs: 2 ** 31 - 1 } }, { batching: { maxDelayMs: 2 ** 31 - 1 } }, { random: Math.random }]) client(fake, options);
    expect(fake.calls).toHaveLength(0);
  });
});

describe("HttpJournal appendBatch signal", () => {
  it("is forwarded to the fetch; aborting it mid-request rejects at once with its reason, and nothing is retried", { timeout: 5_000 }, async () => {
    for (const answer of ["hang", "deaf"] as const) {
      const fake = scripted(answer);
      const controller = new AbortController();
      const reason = new Error("the user left");
      const { journal, sleeps } = client(fake, { timeoutMs: 0 });
      const pending = journal.appendBatch([event()], { signal: controller.signal });
      await until(() => fake.calls.length === 1);
      controller.abort(reason);
      const error = await rejection(pending);
      expect(error).toBeInstanceOf(BackendError);
      expect(error).toMatchObject({ code: "backend", retryable: true });
      expect(error.cause).toBe(reason);
      expect(fake.calls[0]!.init.signal?.aborted).toBe(true);
      expect(fake.calls).toHaveLength(1);
      expect(sleeps).toEqual([]); // not even a wait for a retry
    }
  });

  it("aborting it while the body is read rejects with its reason", { timeout: 5_000 }, async () => {
    const fake = scripted("deaf-body");
    const controller = new AbortController();
    const pending = client(fake, { timeoutMs: 0 }).journal.appendBatch([event()], { signal: controller.signal });
    await until(() => fake.calls.length === 1);
    await new Promise((resolve) => setTimeout(resolve, 1));
    controller.abort("gone");
    const error = await rejection(pending);
    expect(error).toMatchObject({ code: "backend", retryable: true, cause: "gone" });
  });

  it("cuts an injected sleep between tries short", { timeout: 5_000 }, async () => {
    const fake = scripted({ status: 503 });
    const controller = new AbortController();
    let slept = 0;
    const sleep = () => ((slept += 1), new Promise<void>(() => {}));
    const pending = client(fake, { sleep }).journal.appendBatch([event()], { signal: controller.signal });
    await until(() => slept === 1);
    controller.abort(new Error("stop"));
    const error = await rejection(pending);
    expect(error).toBeInstanceOf(BackendError);
    expect((error.cause as Error).message).toBe("stop");
    expect(fake.calls).toHaveLength(1);
  });

  it("cuts the default sleep between tries short", { timeout: 5_000 }, async () => {
    const fake = scripted({ status: 503 });
    const controller = new AbortController();
    // No injected sleep: the default one, a minute long.
    const journal = new HttpJournal({ baseUrl: "http://isostore.test", journal: "usage", token: TOKEN, fetch: fake.fetch, capacity: BILLING_GRADE, mode: "billing_grade", retry: { attempts: ATTEMPTS, baseDelayMs: 60_000, maxDelayMs: 60_000 } });
    const started = Date.now();
    const pending = journal.appendBatch([event()], { signal: controller.signal });
    await until(() => fake.calls.length === 1);
    await new Promise((resolve) => setTimeout(resolve, 5));
    controller.abort(new Error("stop"));
    expect(await rejection(pending)).toMatchObject({ code: "backend", retryable: true });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(fake.calls).toHaveLength(1);
  });

  it("already aborted: rejects without a request", async () => {
    const fake = scripted(accepted);
    const reason = new Error("too late");
    const error = await rejection(client(fake).journal.appendBatch([event()], { signal: AbortSignal.abort(reason) }));
    expect(error).toMatchObject({ code: "backend", retryable: true });
    expect(error.cause).toBe(reason);
    expect(fake.calls).toHaveLength(0);
  });

  it("a signal that does not abort changes nothing", async () => {
    const fake = scripted({ status: 503 }, accepted);
    const [result] = await client(fake).journal.appendBatch([event()], { signal: new AbortController().signal });
    expect(result).toEqual({ status: "accepted", position: 1 });
    expect(fake.calls).toHaveLength(2);
  });

  it("something that is not an AbortSignal is refused before the network", async () => {
    const fake = scripted(accepted);
    const { journal } = client(fake);
    for (const options of [{ signal: "abort" }, { signal: {} }, null, 5]) {
      const error = await rejection(journal.appendBatch([event()], options as never));
      expect(error).toBeInstanceOf(InvalidArgumentError);
    }
    expect(fake.calls).toHaveLength(0);
  });
});

describe("HttpJournal over the platform's fetch and a real socket", () => {
  it("the platform's fetch still fits FetchLike, signal included", () => {
    const platform: FetchLike = globalThis.fetch; // a compile-time check, as much as a run-time one
    expect(typeof platform).toBe("function");
  });

  let server: Server;
  let baseUrl: string;
  const seen: string[] = [];

  beforeAll(async () => {
    server = createServer((request, response) => {
      seen.push(request.url ?? "");
      request.resume();
      if (request.url?.includes("/silent")) return; // never answers
      // The headers and half a body, then the connection is reset.
      response.writeHead(200, { "content-type": "application/json", "content-length": "100" });
      response.write('{"pending":');
      setTimeout(() => response.socket?.destroy(), 5);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const real = (journal: string, options: Partial<HttpJournalOptions> = {}) =>
    new HttpJournal({ baseUrl, journal, token: TOKEN, capacity: BILLING_GRADE, mode: "billing_grade", retry: { attempts: 2, baseDelayMs: 1 }, timeoutMs: 200, ...options });

  it("a connection reset mid-body is a typed NetworkFailure, retried for an idempotent call only", async () => {
    seen.length = 0;
    expectUnknownOutcome(await rejection(real("reset").stats(billing)), "NetworkFailure");
    expect(seen).toHaveLength(2);
    seen.length = 0;
    expectUnknownOutcome(await rejection(real("reset").claim(billing, { maxEvents: 1, leaseMs: 1_000, now: 0 })), "NetworkFailure");
    expect(seen).toHaveLength(1);
  });

  it("a server that never answers: a TimeoutFailure per try; the caller's abort ends the call", { timeout: 5_000 }, async () => {
    seen.length = 0;
    const error = await rejection(real("silent").stats(billing));
    expect(error).toMatchObject({ code: "backend", retryable: true, cause: { name: "TimeoutFailure", timeoutMs: 200 } });
    await until(() => seen.length === 2);
    seen.length = 0;
    const controller = new AbortController();
    const pending = real("silent", { timeoutMs: 0 }).appendBatch([event()], { signal: controller.signal });
    await until(() => seen.length === 1);
    const reason = new Error("the user left");
    controller.abort(reason);
    expect((await rejection(pending)).cause).toBe(reason);
    expect(seen).toHaveLength(1);
  });
});

describe("Retry-After", () => {
  /** Answers `statuses` in turn (the last one again after), each with `retryAfter` as its Retry-After header, then 200. */
  function waiting(retryAfter: string, ...statuses: number[]): Fake {
    const calls: Fake["calls"] = [];
    const fetch: FetchLike = async (url, init) => {
      calls.push({ url, init });
      const status = statuses[calls.length - 1];
      if (status === undefined) return { status: 200, headers: { get: () => null }, text: async () => JSON.stringify(someStats) };
      const body = JSON.stringify({ error: { code: status === 429 ? "rate_limited" : "overloaded", message: "slow down" } });
      return { status, headers: { get: (name: string) => (name.toLowerCase() === "retry-after" ? retryAfter : null) }, text: async () => body };
    };
    return { fetch, calls };
  }

  it("a retry waits at least what the answer's Retry-After asked (seconds), never the shorter backoff", async () => {
    const fake = waiting("2", 429, 503);
    const { journal, sleeps } = client(fake, { retry: { attempts: 3, baseDelayMs: 100, maxDelayMs: 5_000 } });
    await expect(journal.stats(billing)).resolves.toMatchObject({ pending: 0 });
    expect(fake.calls).toHaveLength(3);
    expect(sleeps).toEqual([2_000, 2_000]);
  });

  it("an HTTP date is read as the wait from when the answer came", async () => {
    const fake = waiting(new Date(Date.now() + 3_000).toUTCString(), 503);
    const { journal, sleeps } = client(fake, { retry: { attempts: 2, baseDelayMs: 100, maxDelayMs: 5_000 } });
    await journal.stats(billing);
    expect(sleeps).toHaveLength(1);
    expect(sleeps[0]).toBeGreaterThan(1_000);
    expect(sleeps[0]).toBeLessThanOrEqual(3_000);
  });

  it("a wait longer than retry.maxDelayMs is not slept: the call fails at once, with the wait on its HttpError", async () => {
    const fake = waiting("30", 429);
    const { journal, sleeps } = client(fake, { retry: { attempts: 4, baseDelayMs: 100, maxDelayMs: 5_000 } });
    const error = await rejection(journal.claim(billing, { maxEvents: 1, leaseMs: 1_000, now: 0 }));
    expectHttpFailure(error, 429, "rate_limited", true);
    expect((error.cause as HttpError).retryAfterMs).toBe(30_000);
    expect(fake.calls).toHaveLength(1);
    expect(sleeps).toEqual([]);
  });

  it("a malformed Retry-After is ignored: the usual backoff", async () => {
    const fake = waiting("soon", 503);
    const { journal, sleeps } = client(fake, { retry: { attempts: 2, baseDelayMs: 100, maxDelayMs: 5_000 } });
    await journal.stats(billing);
    expect(sleeps).toEqual([50]);
  });
});
