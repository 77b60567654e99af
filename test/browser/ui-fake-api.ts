/**
 * A stand-in for the worker's operator routes (docs/http-api.md) behind
 * `fetch`, for the web UI tests (ui-*.test.ts) that run the page's modules in
 * this Chromium page: one journal (`usage`) and consumer (`billing`), its
 * quarantine in memory, filtered as the worker filters it (`query` substring of
 * request id, `namespace/subject` or reason; `key` the joined string; `namespace`
 * and `subject` exact), newest first with cursor paging, bulk dry runs and
 * confirmations by `requestIds`, NDJSON export, release/discard (404
 * `not_quarantined` for an event no longer quarantined, as the worker answers),
 * audit (oldest first, paged by `limit` (1 to 1000, default 100) and the
 * `nextCursor` it answers, as the worker pages it), stats.
 *
 * Every request is logged, and a test can hold answers (`hold`) to act while
 * one is in flight, or refuse the token (`refuseAll`).
 */
import type { AuditEntry, ConsumerId, JournalStats, JsonValue, PoisonReason, QuarantinedEvent } from "../../src/journal/types.js";

export const TOKEN = "ops-token-for-the-ui-browser-tests";
export const JOURNAL = "usage";
export const CONSUMER = "billing";

/** One request as the fake saw it. */
export interface LoggedRequest {
  readonly method: string;
  /** The path under `/v1/journals/usage/consumers/billing` (or under `/v1` for others). */
  readonly route: string;
  readonly query: Readonly<Record<string, string>>;
  readonly body: Readonly<Record<string, unknown>> | null;
}

/** A held answer: the request waits until `release()`. */
export interface Hold {
  /** Resolves when a matching request has arrived (and is waiting). */
  readonly arrived: Promise<LoggedRequest>;
  release(): void;
}

interface HoldEntry {
  readonly match: (request: LoggedRequest) => boolean;
  readonly arrived: (request: LoggedRequest) => void;
  readonly released: Promise<void>;
}

let counter = 0;

/** A request id shaped like a UUIDv7 (the fake does not check it). */
export function fakeRequestId(): string {
  counter += 1;
  return `01936f3e-7c1a-7d2b-8c3d-${counter.toString(16).padStart(12, "0")}`;
}

/** An event to put in the fake quarantine. */
export interface Seed {
  readonly namespace: string;
  readonly subject: string;
  readonly data?: JsonValue;
  readonly reason?: PoisonReason;
  readonly nackError?: string;
}

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

export class FakeApi {
  /** Quarantined events of `billing`, oldest position first. */
  readonly quarantined: QuarantinedEvent[] = [];
  readonly audit: AuditEntry[] = [];
  readonly requests: LoggedRequest[] = [];
  stats: JournalStats = {
    pending: 0,
    inFlight: 0,
    quarantined: 0,
    oldestPendingAgeMs: null,
    dropped: 0,
    capacity: { maxEvents: 10_000, maxDeliveryAttempts: 3, retainAcknowledgedMs: 60_000, policy: "refuse" },
  };
  /** Answer 401 to everything (a revoked token). */
  refuseAll = false;
  /** Answer the next request `failNext` accepts with a 500 \`backend\` error (once). */
  failNext: ((request: LoggedRequest) => boolean) | null = null;
  readonly #holds: HoldEntry[] = [];
  #position = 0;
  readonly #original = globalThis.fetch;

  /** Route `fetch` of `/v1/...` to this fake until `uninstall()`. */
  install(): this {
    globalThis.fetch = (input: RequestInfo | URL, init?: RequestInit) => {
      const request = new Request(input, init);
      if (!new URL(request.url).pathname.startsWith("/v1/")) return this.#original(input, init);
      return this.#answer(request);
    };
    return this;
  }

  uninstall(): void {
    globalThis.fetch = this.#original;
  }

  /** Quarantine events (newest last); answers their request ids. */
  seed(events: readonly Seed[]): string[] {
    return events.map((seed) => {
      const id = fakeRequestId();
      const position = ++this.#position;
      const at = 1_700_000_000_000 + position * 1000;
      const record = { requestId: id, namespace: seed.namespace, subject: seed.subject, data: seed.data ?? { n: position } };
      this.quarantined.push({
        consumer: CONSUMER as ConsumerId,
        event: { id, orderingKey: { namespace: seed.namespace, subject: seed.subject }, record, observedAt: at - 500 },
        position,
        reason: seed.reason ?? "rejected",
        quarantinedAt: at,
        attempts: [
          ...(seed.nackError === undefined
            ? []
            : [{ attempt: 1, claimedAt: at - 400, leaseExpiresAt: at + 60_000, outcome: { kind: "nacked" as const, at: at - 300, error: seed.nackError } }]),
          { attempt: seed.nackError === undefined ? 1 : 2, claimedAt: at - 200, leaseExpiresAt: at + 60_000, outcome: { kind: "quarantined" as const, at, reason: seed.reason ?? "rejected" } },
        ],
      });
      this.stats = { ...this.stats, quarantined: this.quarantined.length };
      return id;
    });
  }

  /** Hold the answer of the next request `match` accepts until `release()`. */
  hold(match: (request: LoggedRequest) => boolean): Hold {
    let arrived!: (request: LoggedRequest) => void;
    let release!: () => void;
    const arrivedPromise = new Promise<LoggedRequest>((resolve) => (arrived = resolve));
    const released = new Promise<void>((resolve) => (release = resolve));
    this.#holds.push({ match, arrived, released });
    return { arrived: arrivedPromise, release };
  }

  /** The logged requests of one route (`/quarantined`, `/quarantined/bulk`, `/stats`...). */
  requestsTo(route: string, method?: string): LoggedRequest[] {
    return this.requests.filter((request) => request.route === route && (method === undefined || request.method === method));
  }

  async #answer(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const prefix = `/v1/journals/${JOURNAL}/consumers/${CONSUMER}`;
    const route = url.pathname.startsWith(prefix) ? url.pathname.slice(prefix.length) : url.pathname.slice("/v1".length);
    const body = request.method === "POST" ? ((await request.json()) as Record<string, unknown>) : null;
    const logged: LoggedRequest = { method: request.method, route, query: Object.fromEntries(url.searchParams), body };
    this.requests.push(logged);
    // The answer is computed on arrival; a held one is delivered late, as of then.
    const failing = this.failNext?.(logged) === true;
    if (failing) this.failNext = null;
    const response = failing ? json(500, { error: { code: "backend", message: "storage unavailable", retryable: true } }) : this.#route(request, route, logged);
    const holdIndex = this.#holds.findIndex((hold) => hold.match(logged));
    if (holdIndex >= 0) {
      const [hold] = this.#holds.splice(holdIndex, 1);
      hold!.arrived(logged);
      await hold!.released;
    }
    return response;
  }

  #route(request: Request, route: string, logged: LoggedRequest): Response {
    const url = new URL(request.url);
    const body = logged.body;
    if (this.refuseAll || request.headers.get("authorization") !== `Bearer ${TOKEN}`) {
      return json(401, { error: { code: "unauthorized", message: "the token is not valid" } });
    }
    if (request.method === "GET" && route === "/journals") {
      return json(200, { journals: [{ name: JOURNAL, capacity: this.stats.capacity, mode: "single", consumers: [CONSUMER] }] });
    }
    if (request.method === "GET" && route === "/stats") return json(200, this.stats);
    if (request.method === "GET" && route === "/quarantined") return this.#list(logged.query);
    if (request.method === "GET" && route === "/quarantined/export") {
      return new Response(this.#select(logged.query).map((item) => `${JSON.stringify(item)}\n`).join(""), { headers: { "content-type": "application/x-ndjson" } });
    }
    if (request.method === "POST" && route === "/quarantined/bulk") return this.#bulk(body ?? {});
    const single = /^\/quarantined\/([^/]+)\/(release|discard)$/.exec(route);
    if (request.method === "POST" && single) {
      const id = decodeURIComponent(single[1]!);
      if (!this.#resolve(id, single[2] as "release" | "discard")) return json(404, { error: { code: "not_quarantined", message: `${id} is not quarantined` } });
      return json(200, {});
    }
    if (request.method === "GET" && route === `/journals/${JOURNAL}/audit`) return this.#auditPage(logged.query);
    return json(404, { error: { code: "not_found", message: `no route ${request.method} ${url.pathname}` } });
  }

  /** The quarantined events a filter selects, newest first. */
  #select(filter: Readonly<Record<string, unknown>>): QuarantinedEvent[] {
    const text = (name: string) => {
      const value = filter[name];
      return typeof value === "string" ? value : undefined;
    };
    const query = text("query")?.toLowerCase();
    return [...this.quarantined].reverse().filter((item) => {
      const { namespace, subject } = item.event.orderingKey;
      const key = `${namespace}/${subject}`;
      if (query !== undefined && ![item.event.id, key, item.reason].some((field) => field.toLowerCase().includes(query))) return false;
      if (text("reason") !== undefined && item.reason !== text("reason")) return false;
      if (text("key") !== undefined && key !== text("key")) return false;
      if (text("namespace") !== undefined && namespace !== text("namespace")) return false;
      if (text("subject") !== undefined && subject !== text("subject")) return false;
      return true;
    });
  }

  #list(query: Readonly<Record<string, string>>): Response {
    const selected = this.#select(query);
    const offset = query["after"] === undefined ? 0 : Number(query["after"]);
    const limit = Number(query["limit"] ?? 100);
    const items = selected.slice(offset, offset + limit);
    return json(200, { items, nextCursor: offset + limit < selected.length ? String(offset + limit) : null });
  }

  /** A page of the audit log as the worker answers it: oldest first, after the cursor `a1.<seq>`, at most `limit`. */
  #auditPage(query: Readonly<Record<string, string>>): Response {
    const limit = Number(query["limit"] ?? 100);
    const after = query["after"] === undefined ? 0 : Number(/^a1\.([1-9][0-9]*)$/.exec(query["after"])?.[1] ?? NaN);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000 || Number.isNaN(after)) {
      return json(400, { error: { code: "invalid_request", message: "limit must be 1 to 1000, after a cursor this journal issued" } });
    }
    const requestId = query["requestId"];
    const selected = this.audit.filter((entry) => entry.seq > after && (requestId === undefined || entry.requestId === requestId)).sort((a, b) => a.seq - b.seq);
    const items = selected.slice(0, limit);
    return json(200, { items, nextCursor: selected.length > limit ? `a1.${items.at(-1)!.seq}` : null });
  }

  #bulk(body: Readonly<Record<string, unknown>>): Response {
    const action = body["action"] as "release" | "discard";
    if (body["dryRun"] === true) {
      const selected = this.#select(body);
      return json(200, { matched: selected.length, more: false, requestIds: selected.map((item) => item.event.id), applied: 0, failed: [] });
    }
    const requestIds = body["requestIds"] as string[];
    const failed: { requestId: string; error: unknown }[] = [];
    let applied = 0;
    for (const id of requestIds) {
      if (this.#resolve(id, action)) applied += 1;
      else failed.push({ requestId: id, error: { code: "not_quarantined", message: `${id} is not quarantined` } });
    }
    return json(200, { matched: requestIds.length, more: false, requestIds, applied, failed });
  }

  #resolve(id: string, action: "release" | "discard"): boolean {
    const index = this.quarantined.findIndex((item) => item.event.id === id);
    if (index < 0) return false;
    const [item] = this.quarantined.splice(index, 1);
    this.audit.push({ seq: this.audit.reduce((last, entry) => Math.max(last, entry.seq), 0) + 1, at: Date.now(), action, consumer: item!.consumer, requestId: id, reason: item!.reason, actor: "ops" });
    this.stats = { ...this.stats, quarantined: this.quarantined.length };
    return true;
  }
}
