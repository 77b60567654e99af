/**
 * The order of the worker's answers for a token that lacks a route's scope:
 * 401, then the scope check (403), then validation (400) and lookups (404). A
 * token without the scope learns neither the route's fields (a malformed body,
 * query or path answers 403, not 400 with field details) nor which journals or
 * stores exist (an unknown name answers 403, not 404); a token with the scope
 * keeps its 400 and 404 answers.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { createJournal, createStore, type Capacity, type Store } from "../../src/index.js";
import { createApp } from "../../src/worker/index.js";

const OPS = "operator-token-0123456789";
const CONSUME = "consumer-token-0123456789";
const ACME = "acme-producer-token-01234";
const STORE_ACME = "store-acme-token-0123456789";
const STORE_ALL = "store-all-token-0123456789";
const t0 = 1_700_000_000_000;
const rid = (n: number) => `0190b000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`;
const CAPACITY: Capacity = { maxEvents: 50, maxDeliveryAttempts: 3, retainAcknowledgedMs: 60_000, policy: "refuse" };
const ACME_STORE = `/v1/stores/${encodeURIComponent("tenants/acme")}`;

function setup() {
  const journal = createJournal(memoryEngine(), { name: "usage", capacity: CAPACITY, clock: () => t0 });
  const made = new Map<string, Store>();
  const app = createApp({
    journals: { usage: { journal, consumers: ["billing"] } },
    stores: (name) => {
      if (name !== "tenants/acme") return undefined;
      if (!made.has(name)) made.set(name, createStore(memoryEngine(), { name }));
      return made.get(name);
    },
    auth: {
      tokens: [
        { name: "ops", token: OPS, scopes: ["operate", "consume", "append:*"] },
        { name: "worker", token: CONSUME, scopes: ["consume"] },
        { name: "acme-producer", token: ACME, scopes: ["append:acme"] },
        { name: "store-acme", token: STORE_ACME, scopes: ["store:tenants/acme"] },
        { name: "store-all", token: STORE_ALL, scopes: ["store:*"] },
      ],
    },
    clock: () => t0,
  });
  const call = async (method: string, path: string, token: string, body?: unknown) => {
    const response = await app.fetch(
      new Request(`http://isostore.test${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }),
    );
    const json = (await response.json()) as { error?: { code: string; fields?: Record<string, unknown> } };
    return { status: response.status, code: json.error?.code, fields: json.error?.fields };
  };
  return { call };
}

const event = (n: number, namespace = "acme") => ({ record: { requestId: rid(n), namespace, subject: `user-${n}`, data: { tokens: n } }, observedAt: t0 });
const delivery = { consumer: "billing", event: rid(1), attempt: 1 };

/**
 * One route: its path over a journal (or store) name, a request the route's
 * schema refuses and a valid one, the tokens lacking its scope, the token
 * holding it, and what that token gets for the malformed and the unknown.
 */
interface Case {
  readonly name: string;
  readonly method: string;
  readonly path: (journal: string) => string;
  /** The malformed request: a path (default: the journal `usage`'s, plus `suffix`) and a body. */
  readonly malformed: { readonly path?: string; readonly suffix?: string; readonly body?: unknown };
  readonly valid?: unknown;
  readonly lacking: readonly string[];
  readonly holder: string;
  readonly holderMalformed: string;
  readonly unknown?: string;
}

const journalCases: readonly Case[] = [
  {
    name: "append",
    method: "POST",
    path: (j) => `/v1/journals/${j}/append`,
    malformed: { body: { event: event(1), extra: true } },
    valid: { event: event(1) },
    lacking: [CONSUME, STORE_ALL],
    holder: ACME,
    holderMalformed: "invalid_request",
  },
  {
    name: "append-batch",
    method: "POST",
    path: (j) => `/v1/journals/${j}/append-batch`,
    malformed: { body: { events: "none" } },
    valid: { events: [event(1)] },
    lacking: [CONSUME, STORE_ALL],
    holder: ACME,
    holderMalformed: "invalid_request",
  },
  {
    name: "claim",
    method: "POST",
    path: (j) => `/v1/journals/${j}/claim`,
    malformed: { body: { consumer: "billing", maxEvents: "many", leaseMs: 1000 } },
    valid: { consumer: "billing", maxEvents: 1, leaseMs: 1000 },
    lacking: [ACME, STORE_ALL],
    holder: CONSUME,
    holderMalformed: "invalid_request",
  },
  {
    name: "ack",
    method: "POST",
    path: (j) => `/v1/journals/${j}/ack`,
    malformed: { body: { deliveries: "all" } },
    valid: { deliveries: [delivery] },
    lacking: [ACME, STORE_ALL],
    holder: CONSUME,
    holderMalformed: "invalid_request",
  },
  {
    name: "stats (a malformed consumer name)",
    method: "GET",
    path: (j) => `/v1/journals/${j}/consumers/billing/stats`,
    malformed: { path: `/v1/journals/usage/consumers/${encodeURIComponent("Bad Consumer!")}/stats` },
    lacking: [ACME, STORE_ALL],
    holder: CONSUME,
    holderMalformed: "invalid_consumer_id",
  },
  {
    name: "audit",
    method: "GET",
    path: (j) => `/v1/journals/${j}/audit`,
    malformed: { suffix: "?limit=lots" },
    lacking: [CONSUME, ACME, STORE_ALL],
    holder: OPS,
    holderMalformed: "invalid_request",
  },
  {
    name: "release",
    method: "POST",
    path: (j) => `/v1/journals/${j}/consumers/billing/quarantined/${rid(1)}/release`,
    malformed: { body: { now: "soon" } },
    valid: {},
    lacking: [CONSUME, ACME, STORE_ALL],
    holder: OPS,
    holderMalformed: "invalid_request",
  },
  {
    name: "bulk",
    method: "POST",
    path: (j) => `/v1/journals/${j}/consumers/billing/quarantined/bulk`,
    malformed: { body: { action: "explode", dryRun: true } },
    valid: { action: "release", dryRun: true },
    lacking: [CONSUME, ACME, STORE_ALL],
    holder: OPS,
    holderMalformed: "invalid_request",
  },
  {
    name: "describe one journal (a malformed journal name)",
    method: "GET",
    path: (j) => `/v1/journals/${j}`,
    malformed: { path: "/v1/journals/Not%20A%20Name" },
    lacking: [STORE_ALL],
    holder: ACME,
    holderMalformed: "invalid_request",
  },
];

const malformedPath = (c: Case): string => c.malformed.path ?? `${c.path("usage")}${c.malformed.suffix ?? ""}`;

describe("journal routes: the scope check comes before validation and lookups", () => {
  for (const c of journalCases) {
    it(`${c.name}: 403 for a token lacking the scope, whatever the request; 400/404 for one holding it`, async () => {
      const { call } = setup();
      const bad = malformedPath(c);
      for (const token of c.lacking) {
        const refused = await call(c.method, bad, token, c.malformed.body);
        expect([refused.status, refused.code, refused.fields], `${c.name} malformed, token ${token}`).toEqual([403, "forbidden", undefined]);
        const unknown = await call(c.method, c.path("no-such-journal"), token, c.valid);
        expect([unknown.status, unknown.code], `${c.name} unknown journal, token ${token}`).toEqual([403, "forbidden"]);
        const misnamed = await call(c.method, c.path("Not%20A%20Name"), token, c.valid);
        expect([misnamed.status, misnamed.code], `${c.name} malformed journal name, token ${token}`).toEqual([403, "forbidden"]);
      }
      const invalid = await call(c.method, bad, c.holder, c.malformed.body);
      expect([invalid.status, invalid.code], `${c.name} malformed, holder`).toEqual([400, c.holderMalformed]);
      const unknown = await call(c.method, c.path("no-such-journal"), c.holder, c.valid);
      expect([unknown.status, unknown.code], `${c.name} unknown journal, holder`).toEqual([404, "unknown_journal"]);
    });
  }

  it("an append token still answers 403 for a namespace it lacks, once the body is valid", async () => {
    const { call } = setup();
    expect((await call("POST", "/v1/journals/usage/append", ACME, { event: event(1, "globex") })).status).toBe(403);
    expect((await call("POST", "/v1/journals/usage/append-batch", ACME, { events: [event(1, "acme"), event(2, "globex")] })).status).toBe(403);
    expect((await call("POST", "/v1/journals/usage/append", ACME, { event: event(1, "acme") })).status).toBe(200);
  });
});

describe("store routes: the scope check comes before validation and lookups", () => {
  const kv = (store: string) => `/v1/stores/${store}/kv/k`;
  const listOrdered = (store: string, query: string) => `/v1/stores/${store}/ordered/list-ordered?${query}`;

  it("a body route (KV put): 403 for a malformed body, an unknown or malformed store; 400/404 with the scope", async () => {
    const { call } = setup();
    const malformed = { expectedRev: 0, value: "", extra: 1 };
    for (const token of [OPS, CONSUME]) {
      expect((await call("PUT", kv(ACME_STORE.slice("/v1/stores/".length)), token, malformed)).status).toBe(403);
    }
    // A `store:tenants/acme` token: any other store, known or not, well named or not, is 403.
    for (const store of ["missing", "Not%20A%20Store", encodeURIComponent("tenants/other")]) {
      const refused = await call("PUT", kv(store), STORE_ACME, malformed);
      expect([refused.status, refused.code, refused.fields], store).toEqual([403, "forbidden", undefined]);
    }
    const invalid = await call("PUT", `${ACME_STORE}/kv/k`, STORE_ACME, malformed);
    expect([invalid.status, invalid.code]).toEqual([400, "invalid_request"]);
    const unknown = await call("PUT", kv("missing"), STORE_ALL, { expectedRev: 0, value: "" });
    expect([unknown.status, unknown.code]).toEqual([404, "unknown_store"]);
    const misnamed = await call("PUT", kv("Not%20A%20Store"), STORE_ALL, { expectedRev: 0, value: "" });
    expect([misnamed.status, misnamed.code]).toEqual([400, "invalid_name"]);
  });

  it("a query route (ordered list): 403 for a malformed query or an unknown store; 400/404 with the scope", async () => {
    const { call } = setup();
    const bad = "namespace=n&orderingScope=o&limit=lots";
    const good = "namespace=n&orderingScope=o";
    for (const token of [OPS, STORE_ACME]) {
      const store = token === OPS ? ACME_STORE.slice("/v1/stores/".length) : "missing";
      const refused = await call("GET", listOrdered(store, bad), token);
      expect([refused.status, refused.code, refused.fields]).toEqual([403, "forbidden", undefined]);
    }
    expect((await call("GET", listOrdered("missing", good), OPS)).status).toBe(403);
    const invalid = await call("GET", listOrdered(ACME_STORE.slice("/v1/stores/".length), bad), STORE_ACME);
    expect([invalid.status, invalid.code]).toEqual([400, "invalid_request"]);
    const unknown = await call("GET", listOrdered("missing", good), STORE_ALL);
    expect([unknown.status, unknown.code]).toEqual([404, "unknown_store"]);
  });
});
