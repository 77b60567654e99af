/**
 * `createApp`: the HTTP API over any `UsageJournal` (docs/http-api.md).
 *
 * The order every request goes through, so that bad input changes nothing:
 * CORS preflight -> body size cap (413, before parsing; blob uploads stream) -> JSON content type
 * for bodies (415) -> bearer auth (401, health is the only open route) ->
 * route match (404/405) -> the route's scope check (403, route middleware, so a
 * token lacking the scope learns no field and no journal name) -> zod validation
 * of params, query and body (400) -> the journal's lookup (404) -> the journal
 * call (an append's per-namespace scope, in the body, is checked after
 * validation). Journal errors keep their code and become statuses in one place
 * (`./errors.ts`).
 */
import { OpenAPIHono, createRoute, type z } from "@hono/zod-openapi";
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { cors } from "hono/cors";
import { HTTPException } from "hono/http-exception";
import { createUsageEvent, parseConsumerId } from "../journal/event.js";
import type { BatchAppendResult, ClaimOptions, ConsumerId, QuarantinedEvent, QuarantinePage, UsageJournal } from "../journal/types.js";
import { encodeBatch, encodeError } from "../journal/wire.js";
import { MAX_QUARANTINE_QUERY } from "../journal/arguments.js";
import { InvalidArgumentError, InvalidEventError, JournalError } from "../journal/errors.js";
import { TokenMatcher, appendsAny, mayAppend, usesJournals, type Principal, type TokenConfig } from "./auth.js";
import { ApiError, errorAnswer } from "./errors.js";
import { roundedData } from "./exact-json.js";
import * as s from "./schemas.js";
import { MAX_STORE_BODY_BYTES, registerStoreRoutes, storeBodyKind } from "./store-routes.js";
import type { StoreTable } from "./stores.js";

/** A journal the app serves, with the consumers an operator may pick from. */
export interface ServedJournal {
  readonly journal: UsageJournal;
  /** Consumers offered by `GET /v1/journals` (the UI's picker); any valid name may still be used. */
  readonly consumers?: readonly string[];
}

/** Journals by name. */
export type JournalTable = Readonly<Record<string, UsageJournal | ServedJournal>>;

/** Options of {@link createApp}. */
export interface AppOptions {
  /**
   * The journals served, by the name used in paths (`/v1/journals/{name}`);
   * or a function that makes them for each request (a Worker whose journals
   * hold per-request platform objects, such as Durable Object stubs, which
   * may not cross requests). Each name is 1 to 63 characters of lowercase
   * letters, digits, `-` and `_`, the only names a path can address: a record
   * holding another is refused by `createApp` (`InvalidArgumentError`), a
   * function answering one fails the request with a 500 (`internal`, the name
   * in the worker's log), the server's misconfiguration.
   */
  readonly journals: JournalTable | (() => JournalTable);
  /** Bearer tokens and their scopes (see `./auth.ts`). */
  readonly auth: { readonly tokens: readonly TokenConfig[] };
  /** Origins allowed to call the API from a browser (CORS); none by default. `["*"]` allows any. */
  readonly corsOrigins?: readonly string[];
  /** Largest request body accepted, in bytes (default 1 MiB). */
  readonly maxBodyBytes?: number;
  /**
   * Who the audit log records for release and discard: `"token"` (default)
   * records the bearer token's name whatever the caller says, so the log shows
   * what the credential proves; `"caller"` records the `actor` the request
   * reports (or null), exactly as the journal contract has it (a trusted
   * gateway in front, or the conformance suite).
   */
  readonly auditActor?: "token" | "caller";
  /**
   * The server's clock for calls that take `now` and omit it (default
   * `Date.now`). It also bounds `prune`: the route prunes at the earlier of
   * the body's `now` and this clock.
   */
  readonly clock?: () => number;
  /**
   * Answers requests outside `/v1` (the operator UI's static files). The app
   * adds the UI's security headers (strict CSP, no framing, no sniffing).
   */
  readonly assets?: (request: Request) => Promise<Response> | Response;
  /**
   * The stores served under `/v1/stores/{store}` (ledger, KV, blobs, ordered
   * index; see `./store-routes.ts`), by name: a function asked per request
   * (e.g. a Durable Object client per store) or a record. No store routes
   * without it.
   */
  readonly stores?: StoreTable;
}

/** The Hono environment of the app's handlers. */
export interface AppEnv {
  Variables: { principal: Principal; journals: ReadonlyMap<string, ServedJournal> };
}

const isServed = (entry: UsageJournal | ServedJournal): entry is ServedJournal => "journal" in entry && typeof entry.journal === "object";

const JSON_TYPE = /^application\/([\w.-]+\+)?json$/i;

/** Security headers of everything the app answers. */
const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};

/** Extra headers of the UI's pages and files. */
const UI_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy": "default-src 'self'; img-src 'self' data: blob:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
};

/** Largest `maxBodyBytes` accepted (64 MiB: larger JSON bodies belong in blobs). */
const MAX_BODY_BYTES_CAP = 64 * 1024 * 1024;

/** An origin as CORS compares it: scheme, host and optional port, nothing else. */
const ORIGIN = /^https?:\/\/[^\s/?#]+$/;

/**
 * Check {@link AppOptions} before building anything, so a misconfigured
 * worker fails at start with the field named, not at its first request (or
 * never, for a typo that would fall back to a default).
 *
 * @throws InvalidArgumentError naming the first bad field.
 */
function checkAppOptions(options: AppOptions): void {
  if (options === null || typeof options !== "object") throw new InvalidArgumentError("options", "must be an object");
  const { journals, auth, corsOrigins, maxBodyBytes, auditActor, clock, assets, stores } = options as unknown as Record<string, unknown>;
  if (typeof journals !== "function" && (journals === null || typeof journals !== "object")) {
    throw new InvalidArgumentError("journals", "must be a record of journals by name, or a function returning one");
  }
  if (typeof journals !== "function") {
    const unreachable = badJournalName(journals as JournalTable);
    if (unreachable !== undefined) throw new InvalidArgumentError("journals", unreachableMessage(unreachable));
  }
  if (auth === null || typeof auth !== "object") throw new InvalidArgumentError("auth", "must be an object { tokens }");
  if (corsOrigins !== undefined) {
    if (!Array.isArray(corsOrigins) || !corsOrigins.every((origin) => typeof origin === "string" && (origin === "*" || ORIGIN.test(origin)))) {
      throw new InvalidArgumentError("corsOrigins", "must be an array of origins such as `https://app.example` (scheme, host, optional port), or `*`");
    }
  }
  if (maxBodyBytes !== undefined && (typeof maxBodyBytes !== "number" || !Number.isSafeInteger(maxBodyBytes) || maxBodyBytes < 1 || maxBodyBytes > MAX_BODY_BYTES_CAP)) {
    throw new InvalidArgumentError("maxBodyBytes", `must be an integer from 1 to ${MAX_BODY_BYTES_CAP}, got ${describe(maxBodyBytes)}`);
  }
  if (auditActor !== undefined && auditActor !== "token" && auditActor !== "caller") {
    throw new InvalidArgumentError("auditActor", `must be "token" or "caller", got ${describe(auditActor)}`);
  }
  if (clock !== undefined && typeof clock !== "function") throw new InvalidArgumentError("clock", "must be a function returning epoch milliseconds");
  if (assets !== undefined && typeof assets !== "function") throw new InvalidArgumentError("assets", "must be a function from Request to Response");
  if (stores !== undefined && typeof stores !== "function" && (stores === null || typeof stores !== "object")) {
    throw new InvalidArgumentError("stores", "must be a record of stores by name, or a function returning one");
  }
}

/**
 * The first name of a journal table that no route can address (a `{journal}`
 * path segment must pass {@link s.JournalNameSchema}), or `undefined` when
 * every name can be: such a journal would be listed by `GET /v1/journals` and
 * answered 400 by every route of its own.
 */
function badJournalName(journals: JournalTable): string | undefined {
  return Object.keys(journals).find((name) => !s.JournalNameSchema.safeParse(name).success);
}

const unreachableMessage = (name: string) =>
  `holds the name ${JSON.stringify(name)}, which no route can address: a journal name is 1 to 63 characters of lowercase letters, digits, \`-\` and \`_\``;

/**
 * Where a single-item request failed its schema on a field the journal checks
 * itself (the event of `/append`, a consumer name in a body or path), throw
 * the journal's own error for it (`invalid_event` with its `rule`,
 * `invalid_consumer_id` with its fields), as a local call would; otherwise
 * return and let the caller answer `invalid_request`. Batch items never get
 * here for such a field: their schemas leave it to the journal, which rejects
 * the item in place (a batch item over `MAX_ITEM_TEXT` stays `invalid_request`).
 */
async function throwJournalCheck(target: string, issues: readonly { readonly path: readonly PropertyKey[] }[], c: Context): Promise<void> {
  const check = (run: () => unknown): void => {
    try {
      run();
    } catch (error) {
      if (error instanceof JournalError && (error.code === "invalid_event" || error.code === "invalid_consumer_id")) throw error;
    }
  };
  // The body is read once (Hono keeps it parsed); only strings are checked: a value of the
  // wrong JSON type stays a schema error.
  const body: unknown = target === "json" ? await c.req.json().catch(() => undefined) : target === "param" ? c.req.param() : undefined;
  for (const { path } of issues) {
    let value: unknown = body;
    for (const step of path) value = value !== null && typeof value === "object" ? (value as Record<PropertyKey, unknown>)[step] : undefined;
    if (typeof value !== "string") continue;
    const field = path[2];
    if (target === "json" && path[0] === "event" && path[1] === "record" && (field === "requestId" || field === "namespace" || field === "subject")) {
      check(() => createUsageEvent((body as { event: Parameters<typeof createUsageEvent>[0] }).event));
    }
    // `consumer` (body or path), `delivery.consumer`.
    const at = path.join(".");
    if (at === "consumer" || at === "delivery.consumer") check(() => parseConsumerId(value));
  }
}

/** A short description of a bad option value for an error message. */
function describe(value: unknown): string {
  if (typeof value === "number" || typeof value === "boolean" || value === undefined || value === null) return String(value);
  if (typeof value === "string") return JSON.stringify(value);
  return typeof value;
}

function errorResponse(error: unknown): Response {
  const answer = errorAnswer(error);
  return new Response(JSON.stringify(answer.body), {
    status: answer.status,
    headers: { "content-type": "application/json; charset=utf-8", ...SECURITY_HEADERS, ...answer.headers },
  });
}

function describeIssues(issues: readonly { path: readonly PropertyKey[]; message: string }[]): string {
  return issues
    .slice(0, 5)
    .map((issue) => `${issue.path.length > 0 ? issue.path.map(String).join(".") : "(request)"}: ${issue.message}`)
    .join("; ");
}

/**
 * For each event `pick` finds in the request's (valid) JSON body, the text of
 * the first integer literal of its record's `data` that `JSON.parse` rounded
 * (`./exact-json.ts`), or `undefined`, on every platform (by a scan of the
 * text; it is parsed again only when the scan found such a literal).
 */
async function roundedLiterals(c: Context, pick: (body: Record<string, unknown>) => readonly unknown[]): Promise<(string | undefined)[]> {
  const found = roundedData(await c.req.text());
  if (found === null) return [];
  return pick(found.body as Record<string, unknown>).map((event) => {
    const record = event !== null && typeof event === "object" ? (event as { record?: unknown }).record : undefined;
    return record !== null && typeof record === "object" ? found.holders.get(record) : undefined;
  });
}

/**
 * The refusal of an event whose `data` holds an integer literal a double does
 * not hold exactly: the journal's `invalid_event` with `rule` `data`, as for
 * any other bad data, so a producer learns it instead of its number being
 * journaled as another.
 */
function roundedInteger(requestId: string, literal: string): InvalidEventError {
  const shown = literal.length > 40 ? `${literal.slice(0, 40)}…` : literal;
  return new InvalidEventError(
    requestId,
    "data",
    `\`data\` holds the integer ${shown}, beyond 2^53 - 1: it would be journaled as ${String(Number(literal))}; send such numbers as strings`,
  );
}

/**
 * The refusal of an append to a namespace the token may not append to: 403
 * `forbidden_namespace`, not `forbidden`, so a client tells it from a token
 * with no append scope at all (a forwarder refuses that one event for good,
 * and holds its batch through a refusal of the credentials).
 */
function forbiddenNamespace(namespace: string): ApiError {
  return new ApiError("forbidden_namespace", `this token may not append to namespace \`${namespace}\``);
}

/**
 * A claim over HTTP: one claim of the journal whose `maxBytes` is the
 * caller's, if any, capped at {@link s.MAX_CLAIM_ANSWER_BYTES}, so that the
 * answer never holds more than that of deliveries (one journal claim leases
 * exactly what it returns, and the largest delivery, about 199 KiB, is far
 * below the cap; a `PartitionedJournal` over P > 1 partitions may add one
 * delivery per partition, see its docs). Each delivery is serialized once,
 * into the answer (`{ deliveries }`).
 */
async function claimWithin(journal: UsageJournal, consumer: ConsumerId, options: ClaimOptions): Promise<string> {
  const maxBytes = Math.min(options.maxBytes ?? s.MAX_CLAIM_ANSWER_BYTES, s.MAX_CLAIM_ANSWER_BYTES);
  const deliveries = await journal.claim(consumer, { ...options, maxBytes });
  return `{"deliveries":[${deliveries.map((delivery) => JSON.stringify(delivery)).join(",")}]}`;
}

/**
 * Build the HTTP API over the given journals.
 *
 * @example
 * import { createApp } from "isostore/worker";
 * import { createJournal, BILLING_GRADE } from "isostore";
 * import { memoryEngine } from "isostore/memory";
 *
 * const app = createApp({
 *   journals: { usage: { journal: createJournal(memoryEngine(), { name: "usage", capacity: BILLING_GRADE }), consumers: ["billing"] } },
 *   auth: { tokens: [{ name: "ops", token: "a-long-random-secret", scopes: ["operate", "consume", "append:*"] }] },
 * });
 * const answer = await app.fetch(new Request("http://localhost/v1/health"));
 */
export function createApp(options: AppOptions): OpenAPIHono<AppEnv> {
  checkAppOptions(options);
  const clock = options.clock ?? Date.now;
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  const table = (journals: JournalTable) => new Map(Object.entries(journals).map(([name, entry]) => [name, isServed(entry) ? entry : { journal: entry }] as const));
  const fixed = typeof options.journals === "function" ? null : table(options.journals);
  const journalsOf = typeof options.journals === "function" ? options.journals : null;
  /**
   * The table of `options.journals()`, made for one request. A name there that no route can address
   * is the server's misconfiguration, not the caller's fault: a 500 (`internal`, the name in the
   * worker's log), not a 400 for every route of that journal.
   */
  const makeJournals = (): ReadonlyMap<string, ServedJournal> => {
    const journals = journalsOf!();
    const unreachable = journals !== null && typeof journals === "object" ? badJournalName(journals) : undefined;
    if (unreachable !== undefined) throw new ApiError("internal", `the worker's journals() answered a table that ${unreachableMessage(unreachable)}`);
    return table(journals);
  };
  const matcher = new TokenMatcher(options.auth.tokens);

  const app = new OpenAPIHono<AppEnv>({
    defaultHook: async (result, c) => {
      if (!result.success) {
        await throwJournalCheck(result.target, result.error.issues, c);
        const first = result.error.issues[0]?.path.filter((part): part is string => typeof part === "string").pop();
        throw new ApiError("invalid_request", describeIssues(result.error.issues), first);
      }
    },
  });

  app.onError((error) => {
    if (error instanceof HTTPException) {
      if (error.status === 413) return errorResponse(new ApiError("payload_too_large", `the body is over ${maxBodyBytes} bytes`));
      if (error.status === 400) return errorResponse(new ApiError("invalid_json", "the body is not valid JSON"));
      return errorResponse(new ApiError("invalid_request", error.message));
    }
    // A server fault (an untyped error, a `backend` failure) is logged with an id by errorAnswer, and answered with the id only.
    return errorResponse(error);
  });

  // Routes are registered below; this list answers 405 for a known path with another method.
  const known: { method: string; pattern: RegExp }[] = [];
  const isApiPath = (path: string) => path.startsWith("/v1/") || path === "/v1";
  /** The answer for a path no route took: 405 for a known path with another method, else 404. */
  const apiNotFound = (method: string, path: string) => {
    const other = known.some((route) => route.pattern.test(path));
    return errorResponse(other ? new ApiError("method_not_allowed", `${method} is not allowed on ${path}`) : new ApiError("not_found", `no route ${path}`));
  };
  app.notFound((c) => (!isApiPath(c.req.path) && options.assets ? serveAsset(c.req.raw) : apiNotFound(c.req.method, c.req.path)));

  async function serveAsset(request: Request): Promise<Response> {
    const answer = await options.assets!(request);
    const response = new Response(answer.body, answer);
    for (const [name, value] of Object.entries({ ...SECURITY_HEADERS, ...UI_HEADERS })) response.headers.set(name, value);
    return response;
  }

  if (options.corsOrigins && options.corsOrigins.length > 0) {
    const origins = [...options.corsOrigins];
    app.use(
      "/v1/*",
      cors({
        origin: origins.includes("*") ? "*" : origins,
        allowMethods: ["GET", "POST", "PUT", "DELETE", "OPTIONS"],
        allowHeaders: ["authorization", "content-type"],
        exposeHeaders: ["retry-after", "date"],
        maxAge: 600,
      }),
    );
  }

  app.use("/v1/*", async (c, next) => {
    await next();
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) c.res.headers.set(name, value);
    c.res.headers.set("cache-control", "no-store");
    // The server's clock, on every answer (`wrangler dev` sends no Date of its own): a client reads it to age
    // what it resends by the clock the journal prunes by (`HttpJournal.serverNow`, the forwarder's duplicate check).
    if (!c.res.headers.has("date")) c.res.headers.set("date", new Date(clock()).toUTCString());
  });

  const limitOf = (maxSize: number) =>
    bodyLimit({
      maxSize,
      onError: () => {
        throw new ApiError("payload_too_large", `the body is over ${maxSize} bytes`);
      },
    });
  const jsonLimit = limitOf(maxBodyBytes);
  const storeLimit = limitOf(Math.max(maxBodyBytes, MAX_STORE_BODY_BYTES));
  // Store routes take base64 payloads of up to 1 MiB; blob uploads stream (the store bounds them).
  const limitByRoute: MiddlewareHandler<AppEnv> = (c, next) => {
    const kind = storeBodyKind(c.req.method, c.req.path);
    return kind === "blob" ? next() : kind === "store" ? storeLimit(c, next) : jsonLimit(c, next);
  };
  app.use("/v1/*", limitByRoute);

  app.use("/v1/*", async (c, next) => {
    if (c.req.method === "POST" || c.req.method === "PUT") {
      const type = (c.req.header("content-type") ?? "").split(";")[0]!.trim();
      if (storeBodyKind(c.req.method, c.req.path) === "blob") {
        if (type.toLowerCase() !== "application/octet-stream") throw new ApiError("unsupported_media_type", "send the blob as application/octet-stream");
      } else if (!JSON_TYPE.test(type)) throw new ApiError("unsupported_media_type", "send the body as application/json");
    }
    if (c.req.path === "/v1/health") return next();
    const header = c.req.header("authorization") ?? "";
    // The scheme is case-insensitive (RFC 9110 11.1).
    const match = /^Bearer +([\x21-\x7e]{1,512})$/i.exec(header);
    if (!match) throw new ApiError("unauthorized", "send `Authorization: Bearer <token>`");
    const principal = await matcher.match(match[1]!);
    if (!principal) throw new ApiError("unauthorized", "the token is not valid");
    c.set("principal", principal);
    c.set("journals", fixed ?? makeJournals());
    return next();
  });

  /** Register an OpenAPI route and remember its path for 405 answers. */
  function remember(method: string, path: string): void {
    known.push({ method, pattern: new RegExp(`^${path.replace(/\{[^}]+\}/g, "[^/]+")}$`) });
  }

  /** The `actor` option of an operator action (see `AppOptions.auditActor`). */
  function actorOf(principal: Principal, reported: string | undefined): { actor?: string } {
    if (options.auditActor === "caller") return reported === undefined ? {} : { actor: reported };
    return { actor: principal.name };
  }

  function journalOf(c: Context<AppEnv>, name: string): ServedJournal {
    const entry = c.get("journals").get(name);
    if (!entry) throw new ApiError("unknown_journal", `no journal \`${name}\``);
    return entry;
  }

  /**
   * A route's scope check (403), given as the route's `middleware`: @hono/zod-openapi registers a
   * route as `middleware, validators, handler`, so the check runs before its params, query and body
   * are validated (400) and its journal is looked up (404). A token lacking the scope learns neither
   * the route's fields nor which journals exist.
   */
  function gate(allowed: (principal: Principal) => boolean, refusal: string): MiddlewareHandler<AppEnv> {
    return async (c, next) => {
      if (!allowed(c.get("principal"))) throw new ApiError("forbidden", refusal);
      await next();
    };
  }

  /** The scope check of a route that needs any one of `anyOf`. */
  const scope = (...anyOf: string[]) =>
    gate((principal) => anyOf.some((one) => principal.scopes.has(one)), `this token lacks the scope ${anyOf.map((one) => `\`${one}\``).join(" or ")}`);

  const errors = {
    400: { description: "invalid request", content: { "application/json": { schema: s.ErrorSchema } } },
    401: { description: "missing or wrong token", content: { "application/json": { schema: s.ErrorSchema } } },
    403: { description: "the token lacks the scope", content: { "application/json": { schema: s.ErrorSchema } } },
    404: { description: "unknown journal, or not outstanding / not quarantined", content: { "application/json": { schema: s.ErrorSchema } } },
    405: { description: "method_not_allowed: the path takes another method", content: { "application/json": { schema: s.ErrorSchema } } },
    409: { description: "conflict, quarantined or already acknowledged", content: { "application/json": { schema: s.ErrorSchema } } },
    413: { description: "body over the cap", content: { "application/json": { schema: s.ErrorSchema } } },
    415: { description: "body not JSON", content: { "application/json": { schema: s.ErrorSchema } } },
    500: {
      description: "a backend failure that does not pass by itself, or an internal error (logged; the message names the log entry)",
      content: { "application/json": { schema: s.ErrorSchema } },
    },
    503: { description: "at capacity or backend unavailable; see Retry-After", content: { "application/json": { schema: s.ErrorSchema } } },
  } as const;
  /** The store routes' answers: the journal routes' ones, and 504 for a mutation whose outcome is unknown. */
  const storeErrors = {
    ...errors,
    504: {
      description: "ambiguous: a networked store lost a mutation's acknowledgement, so its outcome is unknown (read before retrying)",
      content: { "application/json": { schema: s.ErrorSchema } },
    },
  } as const;
  const ok = <T extends z.ZodType>(schema: T, description: string) => ({ 200: { description, content: { "application/json": { schema } } }, ...errors });
  const body = <T extends z.ZodType>(schema: T) => ({ body: { required: true, content: { "application/json": { schema } } } });
  const security = [{ bearer: [] }];

  app.openAPIRegistry.registerComponent("securitySchemes", "bearer", { type: "http", scheme: "bearer" });

  // --- open and discovery routes ----------------------------------------------------------------

  remember("get", "/v1/health");
  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/health",
      summary: "Liveness (no auth)",
      // The document's default is the bearer token; this route answers without one.
      security: [],
      responses: { 200: { description: "alive", content: { "application/json": { schema: s.HealthSchema } } } },
    }),
    (c) => c.json({ ok: true } as never, 200),
  );

  remember("get", "/v1/openapi.json");
  app.get("/v1/openapi.json", (c) =>
    c.json(
      app.getOpenAPI31Document({
        openapi: "3.1.0",
        info: { title: "isostore", version: "1", description: "Durable usage journal API (see docs/http-api.md)" },
        security,
      }),
    ),
  );

  // Described to journal tokens only; the consumers a worker serves to those who consume or operate (a
  // producer learns the capacity and mode, what HttpJournal needs).
  const info = (name: string, entry: ServedJournal, principal: Principal) => ({
    name,
    capacity: entry.journal.capacity,
    mode: entry.journal.mode,
    consumers: principal.scopes.has("operate") || principal.scopes.has("consume") ? [...(entry.consumers ?? [])] : [],
  });
  const describer = gate(usesJournals, "this token has no journal scope (`append`, `consume` or `operate`)");
  // Before the body is read, an append route checks that the token may append at all; the namespace
  // of each event is checked in the handler, once the body is valid (it is in the body).
  const appender = gate(appendsAny, "this token lacks an `append` scope (`append:*` or `append:<namespace>`)");

  remember("get", "/v1/journals");
  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/journals",
      summary: "The journals served",
      description: "Needs a journal scope (`append`, `append:<namespace>`, `consume` or `operate`); each journal's consumers are listed to `consume` and `operate` only.",
      security,
      middleware: describer,
      responses: ok(s.JournalListSchema, "the journals"),
    }),
    (c) => {
      const principal = c.get("principal");
      return c.json({ journals: [...c.get("journals")].map(([name, entry]) => info(name, entry, principal)) } as never, 200);
    },
  );

  remember("get", "/v1/journals/{journal}");
  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/journals/{journal}",
      summary: "One journal's capacity, mode and known consumers",
      description: "Needs a journal scope (`append`, `append:<namespace>`, `consume` or `operate`); the consumers are listed to `consume` and `operate` only.",
      security,
      middleware: describer,
      request: { params: s.JournalParamsSchema },
      responses: ok(s.JournalInfoSchema, "the journal"),
    }),
    (c) => {
      const principal = c.get("principal");
      const { journal } = c.req.valid("param");
      return c.json(info(journal, journalOf(c, journal), principal) as never, 200);
    },
  );

  // --- producing --------------------------------------------------------------------------------

  remember("post", "/v1/journals/{journal}/append");
  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/journals/{journal}/append",
      summary: "Append one event (idempotent on its request id)",
      description: "Resolves after the journal accepted the event; with a billing-grade journal that means it is durable. Needs `append:<namespace>` or `append:*`.",
      security,
      middleware: appender,
      request: { params: s.JournalParamsSchema, ...body(s.AppendBodySchema) },
      responses: ok(s.AppendAnswerSchema, "accepted or already present"),
    }),
    async (c) => {
      const { journal } = c.req.valid("param");
      const { event } = c.req.valid("json");
      const entry = journalOf(c, journal);
      const principal = c.get("principal");
      if (!mayAppend(principal, event.record.namespace)) throw forbiddenNamespace(event.record.namespace);
      const built = createUsageEvent(event as Parameters<typeof createUsageEvent>[0]);
      const [rounded] = await roundedLiterals(c, (sent) => [sent["event"]]);
      if (rounded !== undefined) throw roundedInteger(built.id, rounded);
      const result = await entry.journal.append(built);
      return c.json({ result } as never, 200);
    },
  );

  remember("post", "/v1/journals/{journal}/append-batch");
  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/journals/{journal}/append-batch",
      summary: "Append up to 1000 events; one result per event, in order",
      description:
        "The journal checks each event (request id, ordering key, data, observedAt): an invalid one is `rejected` in place with the journal's error, as a local `appendBatch` would, and the rest are appended. The token must be allowed to append the namespace of every valid event, else nothing is appended (403 `forbidden_namespace`).",
      security,
      middleware: appender,
      request: { params: s.JournalParamsSchema, ...body(s.AppendBatchBodySchema) },
      responses: ok(s.AppendBatchAnswerSchema, "per-event results"),
    }),
    async (c) => {
      const { journal } = c.req.valid("param");
      const { events } = c.req.valid("json");
      const entry = journalOf(c, journal);
      const principal = c.get("principal");
      // An invalid event is handed on as sent: the journal's own check rejects it in place (appendBatch is
      // per-event), whatever its namespace, as it is never appended.
      const built = events.map((event) => {
        try {
          return createUsageEvent(event as Parameters<typeof createUsageEvent>[0]);
        } catch {
          return null;
        }
      });
      // A valid event whose data held an integer literal that parsing rounded is rejected in place, as
      // the journal rejects other bad data, and is not appended (whatever its namespace, like those).
      const rounded = await roundedLiterals(c, (sent) => sent["events"] as unknown[]);
      const refused = built.map((event, index) => (event !== null && rounded[index] !== undefined ? roundedInteger(event.id, rounded[index]) : null));
      for (const [index, event] of built.entries()) {
        if (event !== null && refused[index] === null && !mayAppend(principal, event.record.namespace)) throw forbiddenNamespace(event.record.namespace);
      }
      const passed = built.map((event, index) => event ?? (events[index] as never)).filter((_, index) => refused[index] === null);
      const appended = await entry.journal.appendBatch(passed);
      let next = 0;
      const results: BatchAppendResult[] = refused.map((error) => (error === null ? appended[next++]! : { status: "rejected", error }));
      return c.json({ results: encodeBatch(results) } as never, 200);
    },
  );

  // --- consuming --------------------------------------------------------------------------------

  remember("post", "/v1/journals/{journal}/claim");
  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/journals/{journal}/claim",
      summary: "Claim up to maxEvents deliverable events for a consumer",
      description: `At most one event per ordering key is in flight; events stay leased until \`leaseExpiresAt\`. \`maxBytes\` bounds the deliveries' JSON (UTF-8 bytes): the claim stops before the first delivery that would go over it, and always answers the first one. The server caps it at ${s.MAX_CLAIM_ANSWER_BYTES} (also when it is absent), so large events come back fewer than \`maxEvents\`. Only what the answer holds is leased. Needs \`consume\`.`,
      security,
      middleware: scope("consume"),
      request: { params: s.JournalParamsSchema, ...body(s.ClaimBodySchema) },
      responses: ok(s.ClaimAnswerSchema, "the deliveries (possibly none)"),
    }),
    async (c) => {
      const { journal } = c.req.valid("param");
      const request = c.req.valid("json");
      const answer = await claimWithin(journalOf(c, journal).journal, parseConsumerId(request.consumer), {
        maxEvents: request.maxEvents,
        leaseMs: request.leaseMs,
        now: request.now ?? clock(),
        ...(request.maxBytes === undefined ? {} : { maxBytes: request.maxBytes }),
      });
      return c.body(answer, 200, { "content-type": "application/json" }) as never;
    },
  );

  remember("post", "/v1/journals/{journal}/ack");
  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/journals/{journal}/ack",
      summary: "Acknowledge up to 1000 deliveries; one result per delivery, in order",
      description:
        "Each ack is idempotent; a failed one (e.g. `not_outstanding`, or `invalid_consumer_id` / `invalid_argument` from the journal's check of the delivery id) is reported in place and does not stop the others. Needs `consume`.",
      security,
      middleware: scope("consume"),
      request: { params: s.JournalParamsSchema, ...body(s.AckBodySchema) },
      responses: ok(s.AckAnswerSchema, "per-delivery results"),
    }),
    async (c) => {
      const { journal } = c.req.valid("param");
      const { deliveries } = c.req.valid("json");
      // One journal call (one transaction per partition): a refused ack is reported in place; a backend
      // failure fails the whole request (503, retryable), so no ack is reported lost.
      const acked = await journalOf(c, journal).journal.ackBatch(deliveries as never);
      const results = acked.map((result) => (result.ok ? result : { ok: false, error: encodeError(result.error) }));
      return c.json({ results } as never, 200);
    },
  );

  remember("post", "/v1/journals/{journal}/nack");
  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/journals/{journal}/nack",
      summary: "Give a delivery back; claimable again after retryAfterMs",
      security,
      middleware: scope("consume"),
      request: { params: s.JournalParamsSchema, ...body(s.NackBodySchema) },
      responses: ok(s.EmptyAnswerSchema, "nacked"),
    }),
    async (c) => {
      const { journal } = c.req.valid("param");
      const request = c.req.valid("json");
      await journalOf(c, journal).journal.nack(request.delivery as never, { retryAfterMs: request.retryAfterMs, error: request.error, now: request.now ?? clock() });
      return c.json({} as never, 200);
    },
  );

  remember("post", "/v1/journals/{journal}/extend");
  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/journals/{journal}/extend",
      summary: "Heartbeat: the lease runs until now + leaseMs",
      security,
      middleware: scope("consume"),
      request: { params: s.JournalParamsSchema, ...body(s.ExtendBodySchema) },
      responses: ok(s.ExtendAnswerSchema, "the new lease end"),
    }),
    async (c) => {
      const { journal } = c.req.valid("param");
      const request = c.req.valid("json");
      const answer = await journalOf(c, journal).journal.extend(request.delivery as never, { leaseMs: request.leaseMs, now: request.now ?? clock() });
      return c.json(answer as never, 200);
    },
  );

  remember("post", "/v1/journals/{journal}/quarantine");
  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/journals/{journal}/quarantine",
      summary: "Set a delivered event aside as poison",
      security,
      middleware: scope("consume"),
      request: { params: s.JournalParamsSchema, ...body(s.QuarantineBodySchema) },
      responses: ok(s.EmptyAnswerSchema, "quarantined"),
    }),
    async (c) => {
      const { journal } = c.req.valid("param");
      const request = c.req.valid("json");
      await journalOf(c, journal).journal.quarantine(request.delivery as never, request.reason);
      return c.json({} as never, 200);
    },
  );

  remember("get", "/v1/journals/{journal}/consumers/{consumer}/stats");
  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/journals/{journal}/consumers/{consumer}/stats",
      summary: "Depth, in flight, quarantined, oldest pending age, dropped, capacity",
      security,
      middleware: scope("consume", "operate"),
      request: { params: s.ConsumerParamsSchema },
      responses: ok(s.StatsSchema, "the consumer's stats"),
    }),
    async (c) => {
      const { journal, consumer } = c.req.valid("param");
      return c.json((await journalOf(c, journal).journal.stats(parseConsumerId(consumer))) as never, 200);
    },
  );

  remember("get", "/v1/journals/{journal}/consumers/{consumer}/attempts/{requestId}");
  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/journals/{journal}/consumers/{consumer}/attempts/{requestId}",
      summary: "The delivery attempts of one event to one consumer",
      security,
      middleware: scope("consume", "operate"),
      request: { params: s.EventParamsSchema },
      responses: ok(s.AttemptsAnswerSchema, "the attempts, oldest first"),
    }),
    async (c) => {
      const { journal, consumer, requestId } = c.req.valid("param");
      return c.json({ attempts: await journalOf(c, journal).journal.attempts(parseConsumerId(consumer), requestId) } as never, 200);
    },
  );

  // --- operating ------------------------------------------------------------------------------

  type Filter = z.infer<typeof s.QuarantineFilterSchema>;

  /** Whether a quarantined event passes the exact filters the journal's substring query cannot express. */
  const passes = (item: QuarantinedEvent, filter: Filter) =>
    (filter.reason === undefined || item.reason === filter.reason) &&
    (filter.key === undefined || `${item.event.orderingKey.namespace}/${item.event.orderingKey.subject}` === filter.key) &&
    (filter.namespace === undefined || item.event.orderingKey.namespace === filter.namespace) &&
    (filter.subject === undefined || item.event.orderingKey.subject === filter.subject);

  /**
   * The journal query that narrows a filter best: the free text, else the key (when it fits the
   * journal's query; a longer key is a valid key, matched by `passes` alone), else the reason.
   */
  const journalQuery = (filter: Filter) =>
    filter.query ??
    [filter.key, filter.subject, filter.namespace].find((text) => text !== undefined && text.length <= MAX_QUARANTINE_QUERY) ??
    filter.reason;

  /** The quarantined events of a filter, one journal page (of `pageSize`) at a time, each page filtered. */
  async function* quarantinedPages(target: UsageJournal, consumer: ConsumerId, filter: Filter, pageSize: number): AsyncGenerator<QuarantinedEvent[]> {
    const query = journalQuery(filter);
    let after: string | null = null;
    do {
      const page: QuarantinePage = await target.listQuarantined(consumer, { limit: pageSize, after, ...(query === undefined ? {} : { query }) });
      yield page.items.filter((item) => passes(item, filter));
      after = page.nextCursor;
    } while (after !== null);
  }

  remember("get", "/v1/journals/{journal}/consumers/{consumer}/quarantined");
  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/journals/{journal}/consumers/{consumer}/quarantined",
      summary: "Quarantined events of a consumer, in cursor pages",
      description:
        "Oldest position first, or newest with `order=newest`. `query` is a case-insensitive substring of the request id, ordering key or reason; `reason` and `key` filter exactly, so a filtered page may hold fewer than `limit` items while `nextCursor` is not null. Needs `operate`.",
      security,
      middleware: scope("operate"),
      request: { params: s.ConsumerParamsSchema, query: s.QuarantineListQuerySchema },
      responses: ok(s.QuarantinePageSchema, "one page"),
    }),
    async (c) => {
      const { journal, consumer } = c.req.valid("param");
      const { limit, after, order, ...filter } = c.req.valid("query");
      const query = journalQuery(filter);
      const page = await journalOf(c, journal).journal.listQuarantined(parseConsumerId(consumer), {
        ...(limit === undefined ? {} : { limit }),
        ...(order === undefined ? {} : { order }),
        ...(after === undefined ? {} : { after }),
        ...(query === undefined ? {} : { query }),
      });
      return c.json({ items: page.items.filter((item) => passes(item, filter)), nextCursor: page.nextCursor } as never, 200);
    },
  );

  for (const action of ["release", "discard"] as const) {
    const path = `/v1/journals/{journal}/consumers/{consumer}/quarantined/{requestId}/${action}`;
    remember("post", path);
    app.openapi(
      createRoute({
        method: "post",
        path,
        summary: action === "release" ? "Put a quarantined event back on its key at its original position" : "Finish a quarantined event without delivering it",
        description: "Recorded in the audit log; the actor is the token's name (or, when the worker is configured so, the `actor` sent). Needs `operate`.",
        security,
        middleware: scope("operate"),
        request: { params: s.EventParamsSchema, ...body(s.OperatorBodySchema) },
        responses: ok(s.EmptyAnswerSchema, `${action}d`),
      }),
      async (c) => {
        const principal = c.get("principal");
        const { journal, consumer, requestId } = c.req.valid("param");
        const { now, actor } = c.req.valid("json");
        await journalOf(c, journal).journal[action](parseConsumerId(consumer), requestId, { now: now ?? clock(), ...actorOf(principal, actor) });
        return c.json({} as never, 200);
      },
    );
  }

  /**
   * The request ids a filter selects, up to `max`, in the journal's listing order; `more` says the
   * filter selects more than that. What a bulk dry run answers and a filter-based real run acts on.
   */
  async function selectQuarantined(target: UsageJournal, consumer: ConsumerId, filter: Filter, max: number): Promise<{ requestIds: string[]; more: boolean }> {
    const requestIds: string[] = [];
    for await (const page of quarantinedPages(target, consumer, filter, 500)) {
      for (const item of page) {
        if (requestIds.length === max) return { requestIds, more: true };
        requestIds.push(item.event.id);
      }
    }
    return { requestIds, more: false };
  }

  remember("post", "/v1/journals/{journal}/consumers/{consumer}/quarantined/bulk");
  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/journals/{journal}/consumers/{consumer}/quarantined/bulk",
      summary: "Release or discard the quarantined events a dry run selected",
      description:
        "A dry run (`dryRun: true`) collects up to `max` (default 1000) events of the filter and answers their `requestIds` with `matched`; `more` says the filter selects more than `max`. Its confirmation sends those `requestIds` back (with `dryRun: false` and no filter): exactly those events are acted on, in that order, each still quarantined for the consumer; one released or discarded since (by another operator) is reported in `failed` as `not_quarantined`, never replaced by an event that arrived after the dry run. A real run may instead send the filter (the older form): it selects again when it runs, so it acts on whatever matches by then, not on what the dry run counted; `max` bounds only how many. The action applies in the journal's listing order (position order for one journal; see docs/http-api.md for a partitioned one). Needs `operate`.",
      security,
      middleware: scope("operate"),
      request: { params: s.ConsumerParamsSchema, ...body(s.BulkBodySchema) },
      responses: ok(s.BulkAnswerSchema, "the selection and what was done"),
    }),
    async (c) => {
      const principal = c.get("principal");
      const { journal, consumer } = c.req.valid("param");
      const { action, dryRun, max = 1000, now, actor, requestIds: confirmed, ...filter } = c.req.valid("json");
      const target = journalOf(c, journal).journal;
      const id = parseConsumerId(consumer);
      // The confirmed ids, when sent, are the selection: the filter is not read again, so nothing that
      // arrived since the dry run can take the place of an event resolved elsewhere in the meantime.
      const { requestIds, more } = confirmed === undefined ? await selectQuarantined(target, id, filter, max) : { requestIds: confirmed, more: false };
      let applied = 0;
      const failed: { requestId: string; error: z.infer<typeof s.WireErrorSchema> }[] = [];
      if (!dryRun) {
        const at = now ?? clock();
        for (const requestId of requestIds) {
          // The journal checks each id (a UUIDv7, quarantined for this consumer) and refuses it alone.
          try {
            await target[action](id, requestId, { now: at, ...actorOf(principal, actor) });
            applied += 1;
          } catch (error) {
            // Answered as any error of the API: a server fault is logged with an id and answered without its internals.
            const answer = errorAnswer(error).body.error;
            failed.push({
              requestId,
              error: { name: answer.name ?? "Error", code: answer.code, message: answer.message, retryable: answer.retryable, fields: answer.fields ?? {} },
            });
          }
        }
      }
      return c.json({ matched: requestIds.length, more, requestIds, applied, failed } as never, 200);
    },
  );

  remember("get", "/v1/journals/{journal}/consumers/{consumer}/quarantined/export");
  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/journals/{journal}/consumers/{consumer}/quarantined/export",
      summary: "NDJSON export of the quarantined events of a filter, with attempt histories",
      security,
      middleware: scope("operate"),
      request: { params: s.ConsumerParamsSchema, query: s.QuarantineFilterSchema },
      responses: { 200: { description: "one QuarantinedEvent per line", content: { "application/x-ndjson": { schema: s.QuarantinedEventSchema } } }, ...errors },
    }),
    async (c) => {
      const { journal, consumer } = c.req.valid("param");
      const filter = c.req.valid("query");
      const target = journalOf(c, journal).journal;
      const id = parseConsumerId(consumer);
      const encoder = new TextEncoder();
      const pages = quarantinedPages(target, id, filter, 200);
      // The first page is read before the answer starts: a refusal or a failure there is the API's typed
      // error answer (status, code, a logged server fault), not a 200 whose body breaks off.
      let first: IteratorResult<QuarantinedEvent[]> | null = await pages.next();
      // Pulled one journal page at a time, so a large quarantine streams in bounded memory.
      const stream = new ReadableStream<Uint8Array>({
        // Each pull enqueues something or closes: a stream calls pull again only after an enqueue, so a
        // page the filter empties (the journal's query matches more than the exact filter) must not end a pull.
        async pull(controller) {
          for (;;) {
            let page: IteratorResult<QuarantinedEvent[]>;
            if (first !== null) {
              page = first;
              first = null;
            } else {
              try {
                page = await pages.next();
              } catch (error) {
                // The status has left: the body breaks off, and the failure is logged as any server fault.
                return controller.error(new Error(errorAnswer(error).body.error.message));
              }
            }
            if (page.done === true) return controller.close();
            if (page.value.length > 0) return controller.enqueue(encoder.encode(page.value.map((item) => `${JSON.stringify(item)}\n`).join("")));
          }
        },
        async cancel() {
          await pages.return(undefined);
        },
      });
      return new Response(stream, {
        status: 200,
        headers: {
          "content-type": "application/x-ndjson; charset=utf-8",
          "content-disposition": `attachment; filename="${journal}-${consumer}-quarantined.ndjson"`,
        },
      }) as never;
    },
  );

  remember("get", "/v1/journals/{journal}/audit");
  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/journals/{journal}/audit",
      summary: "The operator audit log, oldest first",
      description: "With `requestId`, only that event's entries (every consumer's), paged the same way; the journal reads them from a per-event index. Needs `operate`.",
      security,
      middleware: scope("operate"),
      request: { params: s.JournalParamsSchema, query: s.AuditQuerySchema },
      responses: ok(s.AuditPageSchema, "one page"),
    }),
    async (c) => {
      const { journal } = c.req.valid("param");
      const { limit = 100, after, requestId } = c.req.valid("query");
      const page = await journalOf(c, journal).journal.listAudit({ limit, ...(after === undefined ? {} : { after }), ...(requestId === undefined ? {} : { requestId }) });
      return c.json(page as never, 200);
    },
  );

  remember("post", "/v1/journals/{journal}/prune");
  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/journals/{journal}/prune",
      summary: "Forget events every consumer finished with whose window has passed",
      description:
        "Prunes at `now`, or at the server's clock when that is earlier (or `now` is absent): a caller's clock that runs ahead never prunes an event, and forgets its request id, before its window has passed by the server's clock. Needs `operate`.",
      security,
      middleware: scope("operate"),
      request: { params: s.JournalParamsSchema, ...body(s.PruneBodySchema) },
      responses: ok(s.PruneAnswerSchema, "how many were pruned"),
    }),
    async (c) => {
      const { journal } = c.req.valid("param");
      const { now, limit } = c.req.valid("json");
      // Pruning forgets request ids: a caller whose clock runs ahead must not prune events still inside
      // their window (a retried append would be journaled twice). Pruning less never loses anything.
      const at = now === undefined ? clock() : Math.min(now, clock());
      return c.json((await journalOf(c, journal).journal.prune({ now: at, ...(limit === undefined ? {} : { limit }) })) as never, 200);
    },
  );

  if (options.stores !== undefined) registerStoreRoutes(app, { stores: options.stores, remember, errors: storeErrors, security });

  if (options.assets) {
    // The UI's files; an unknown API path (a GET under /v1) is the API's 404 or 405, never a page of the UI.
    app.get("*", (c) => (isApiPath(c.req.path) ? apiNotFound(c.req.method, c.req.path) : serveAsset(c.req.raw)));
  }

  return app;
}
