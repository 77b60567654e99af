/**
 * Fuzz of the HTTP API's refusals, inside workerd: `createApp` over a
 * `PartitionedJournal` (P = 2) on real `JournalPartition` objects.
 *
 * The journal is seeded through the app (appends, a claim, three quarantines).
 * Then fast-check (fixed seed; 2,000 requests, 20,000 with SOAK=1 / VITE_SOAK=1)
 * sends malformed requests, each built from a VALID, state-changing request
 * (a template) broken in exactly one chosen way: broken JSON, a non-object
 * body, an unknown field, a missing field, a wrong type, a value out of its
 * range or grammar (request ids, consumer names, lengths, counts), bad `data`
 * (10,000-deep arrays, over 32 levels, over 64 KiB), a body over the 1 MiB cap,
 * a wrong content type (a form POST among them), a missing / malformed /
 * wrong token, a token lacking the scope, a wrong method, a bad path
 * (journal, consumer, request id; unknown routes) or a bad query string.
 *
 * Every answer must be a 4xx whose JSON body is `{ error: { code, message } }`
 * with a documented code (and the code the mutation calls for); never a 5xx.
 * One exception: a batch item (append-batch, ack) given a value of the right
 * JSON type that breaks a rule the journal checks itself (request id, ordering
 * part, observedAt, consumer, delivery id) is the journal's to reject in place:
 * the answer is 200, that item rejected exactly as a local journal rejects it,
 * and the other items answered exactly as in the same batch without it (they
 * are already present or refused in place, so they change nothing either).
 * Afterwards the journal must be unchanged: stats of the consumers used,
 * quarantined events, audit log, attempts, and its contents (claimed in full
 * by a fresh consumer, compared with the seeded events, per-key order
 * included). Last, every template is sent unbroken and must succeed: that
 * proves the templates were valid, so the mutations alone were refused.
 *
 * Requests go to `app.fetch` directly (no network). Journal and app share a
 * fixed clock, so stats (`oldestPendingAgeMs`) and leases do not move.
 */
import { env } from "cloudflare:workers";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { PartitionedJournal } from "../../adapters/durable-objects/index.js";
import { memoryEngine } from "../../adapters/memory/index.js";
import {
  MAX_LEASE_MS,
  MAX_RECORD_DATA_CHARS,
  createJournal,
  createUsageEvent,
  newRequestId,
  orderingKeyText,
  parseConsumerId,
  type Delivery,
  type DeliveryId,
  type UsageEvent,
} from "../../src/index.js";
import { MAX_ITEM_TEXT, createApp } from "../../src/worker/index.js";
import { encodeAcks, encodeBatch } from "../../src/journal/wire.js";
import { soakRequested } from "../../src/testing/index.js";

const SOAK = soakRequested() || (import.meta as unknown as { env?: Record<string, unknown> }).env?.["VITE_SOAK"] === "1";
const RUNS = SOAK ? 20_000 : 2_000;
const SEED = 61_120_261;
const NOW = 1_800_000_000_000;
const ORIGIN = "http://isostore.test";
const MIB = 1024 * 1024;

/** Codes docs/http-api.md lists with a 4xx status. */
const DOCUMENTED_4XX = new Set([
  "invalid_request",
  "invalid_json",
  "invalid_event",
  "invalid_consumer_id",
  "invalid_argument",
  "unauthorized",
  "forbidden",
  "forbidden_namespace",
  "not_found",
  "unknown_journal",
  "not_outstanding",
  "not_quarantined",
  "method_not_allowed",
  "conflict",
  "quarantined",
  "already_acknowledged",
  "payload_too_large",
  "unsupported_media_type",
]);

const TOKENS = {
  full: { name: "full", token: "fuzz-full-token-0123456789", scopes: ["append:*", "consume", "operate"] },
  appendAcme: { name: "appender", token: "fuzz-append-acme-0123456789", scopes: ["append:acme"] },
  consume: { name: "worker", token: "fuzz-consume-token-0123456789", scopes: ["consume"] },
  operate: { name: "ops", token: "fuzz-operate-token-0123456789", scopes: ["operate"] },
} as const;
type TokenName = keyof typeof TOKENS;

// --- request descriptions ---------------------------------------------------------------------

/** JSON text spliced into a body as is (deep nesting, `1e400`), after `JSON.stringify`. */
class Raw {
  constructor(readonly text: string) {}
}

type Body =
  | { readonly kind: "json"; readonly value: unknown } // JSON.stringify'd (Raw spliced in)
  | { readonly kind: "text"; readonly text: string }
  | { readonly kind: "bytes"; readonly text: string } // no content type at all
  | { readonly kind: "form" } // URLSearchParams: application/x-www-form-urlencoded
  | { readonly kind: "multipart" }; // FormData: multipart/form-data

/** One request to send, and the codes the mutation calls for. */
interface Probe {
  readonly label: string;
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: Body;
  readonly expect: readonly string[];
  /** A batch item the journal rejects in place (see {@link Field.judged}): the template's name and where the item is. */
  readonly inPlace?: { readonly template: string; readonly item: Path };
}

type Segment = string | { readonly param: "journal" | "consumer" | "requestId"; readonly value: string };
type Path = readonly (string | number)[];

type Kind =
  | { readonly type: "string"; readonly min: number; readonly max: number; readonly grammar?: "requestId" | "name" }
  | { readonly type: "int"; readonly min: number; readonly max: number }
  | { readonly type: "enum"; readonly values: readonly string[] }
  | { readonly type: "bool" }
  | { readonly type: "object"; readonly keys: readonly string[] }
  | { readonly type: "array"; readonly min: number; readonly max: number };

interface Field {
  readonly path: Path;
  readonly kind: Kind;
  readonly required: boolean;
  /**
   * A field of a batch item (`item`, e.g. `["events", 1]`) the journal checks
   * itself: a value out of its range, but of the right JSON type and (a
   * string) at most `MAX_ITEM_TEXT` long, is rejected in place with a 200; a
   * longer string is refused whole (`invalid_request`).
   */
  readonly judged?: { readonly item: Path };
}

type QueryKind = "limit" | "cursor" | "order" | "reason" | "text200" | "key" | "requestId";

/** A valid, state-changing (or, for GETs, successful) request the fuzzer breaks in one way. */
interface Template {
  readonly name: string;
  readonly method: "GET" | "POST";
  readonly segments: readonly Segment[];
  readonly token: TokenName;
  /** Tokens that lack the scope the route needs. */
  readonly lacking: readonly TokenName[];
  readonly body?: Record<string, unknown>;
  readonly fields: readonly Field[];
  /** The valid query (routes with a query schema). */
  readonly query?: Readonly<Record<string, string>>;
  readonly queryKinds?: Readonly<Record<string, QueryKind>>;
  /** Where `record.data` is (single append only: the journal checks data per event, and a batch rejects a bad one in place with a 200). */
  readonly dataPath?: Path;
}

// --- builders ------------------------------------------------------------------------------------

const clone = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

function setAt(root: unknown, path: Path, value: unknown): void {
  let node = root as Record<string | number, unknown>;
  for (const part of path.slice(0, -1)) node = node[part] as Record<string | number, unknown>;
  node[path[path.length - 1]!] = value;
}

function deleteAt(root: unknown, path: Path): void {
  let node = root as Record<string | number, unknown>;
  for (const part of path.slice(0, -1)) node = node[part] as Record<string | number, unknown>;
  delete node[path[path.length - 1]!];
}

function getAt(root: unknown, path: Path): unknown {
  let node = root as Record<string | number, unknown>;
  for (const part of path) node = node[part] as Record<string | number, unknown>;
  return node;
}

function stringify(value: unknown): string {
  const raws: string[] = [];
  const text = JSON.stringify(value, (_key, item: unknown) => {
    if (item instanceof Raw) {
      raws.push(item.text);
      return `@@raw-${raws.length - 1}@@`;
    }
    return item;
  });
  return text.replace(/"@@raw-(\d+)@@"/g, (_match, index: string) => raws[Number(index)]!);
}

const deepArray = (depth: number) => new Raw(`${"[".repeat(depth)}${"]".repeat(depth)}`);
const deepObject = (depth: number) => new Raw(`${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`);

function pathOf(segments: readonly Segment[], replace?: { readonly param: string; readonly raw: string }): string {
  return `/v1/${segments
    .map((segment) => {
      if (typeof segment === "string") return segment;
      if (replace && replace.param === segment.param) return replace.raw;
      return encodeURIComponent(segment.value);
    })
    .join("/")}`;
}

function queryText(query: Readonly<Record<string, string>> | undefined, extra = ""): string {
  const parts = Object.entries(query ?? {}).map(([key, value]) => `${encodeURIComponent(key)}=${encodeURIComponent(value)}`);
  if (extra !== "") parts.push(extra);
  return parts.length === 0 ? "" : `?${parts.join("&")}`;
}

function bearer(token: TokenName): string {
  return `Bearer ${TOKENS[token].token}`;
}

/** The template as is (the control run, and the base of every mutation). */
function valid(t: Template, label = "valid"): Probe {
  return {
    label: `${t.name} ${label}`,
    method: t.method,
    path: `${pathOf(t.segments)}${queryText(t.query)}`,
    headers: { authorization: bearer(t.token), ...(t.method === "POST" ? { "content-type": "application/json" } : {}) },
    ...(t.body === undefined ? {} : { body: { kind: "json", value: t.body } }),
    expect: [],
  };
}

function withBody(t: Template, label: string, value: unknown, expect: readonly string[]): Probe {
  return { ...valid(t), label: `${t.name} ${label}`, body: { kind: "json", value }, expect };
}

function mutateBody(t: Template, label: string, expect: readonly string[], change: (body: Record<string, unknown>) => void): Probe {
  const body = clone(t.body!);
  change(body);
  return withBody(t, label, body, expect);
}

// --- the mutations ------------------------------------------------------------------------------

const INVALID = ["invalid_request"] as const;

/**
 * The journal's own error for a string field of a single-item request it
 * checks itself (an append's event fields, a consumer name): the API answers
 * with it, as a local call would. Other fields are schema errors
 * (`invalid_request`); batch items are {@link Field.judged}.
 */
function journalCheck(path: readonly (string | number)[]): readonly string[] | null {
  if (path[0] === "event" && path[1] === "record" && (path[2] === "requestId" || path[2] === "namespace" || path[2] === "subject")) return ["invalid_event"];
  if (path.join(".") === "consumer" || path.join(".") === "delivery.consumer") return ["invalid_consumer_id"];
  return null;
}

/** Whether a value out of a judged field's range reaches the journal (the right JSON type, within the schema's cap). */
function reachesJournal(value: unknown): boolean {
  return !(value instanceof Raw) && !(typeof value === "string" && value.length > MAX_ITEM_TEXT);
}

/** Values of the wrong JSON type for a kind (never one the kind accepts). */
function wrongTypes(kind: Kind): fc.Arbitrary<unknown> {
  const all: { readonly type: string; readonly value: () => unknown }[] = [
    { type: "null", value: () => null },
    { type: "boolean", value: () => true },
    { type: "boolean", value: () => false },
    { type: "number", value: () => 0 },
    { type: "number", value: () => 7 },
    { type: "string", value: () => "7" },
    { type: "string", value: () => "" },
    { type: "array", value: () => [] },
    { type: "array", value: () => ["x", 1] },
    { type: "array", value: () => deepArray(10_000) },
    { type: "object", value: () => ({}) },
    { type: "object", value: () => ({ value: 1 }) },
    { type: "object", value: () => deepObject(10_000) },
  ];
  const accepted = kind.type === "int" ? "number" : kind.type === "enum" ? "string" : kind.type === "bool" ? "boolean" : kind.type;
  const usable = all.filter((entry) => entry.type !== accepted);
  return fc.constantFrom(...usable).map((entry) => entry.value());
}

function requestIdViolations(id: string): string[] {
  return [
    id.toUpperCase(),
    `${id}0`,
    id.slice(0, -1),
    id.replaceAll("-", ""),
    `${id.slice(0, 14)}4${id.slice(15)}`, // version 4
    `${id.slice(0, 19)}c${id.slice(20)}`, // variant bits 11
    `${id.slice(0, 35)}g`,
    "not-a-request-id",
    " ".repeat(36),
  ];
}

const NAME_VIOLATIONS = ["Billing", "bill ing", "bill.ing", "bill/ing", "bill\u00e9", "bill\u0000ing", "BILLING", "a".repeat(64), ""];

/** Values a kind refuses although their JSON type is right. */
function outOfRange(kind: Kind, current: unknown): unknown[] {
  switch (kind.type) {
    case "string": {
      const values: unknown[] = [];
      if (kind.grammar === "requestId") values.push(...requestIdViolations(String(current)));
      else if (kind.grammar === "name") values.push(...NAME_VIOLATIONS);
      else values.push("a".repeat(kind.max + 1), "\u00e9".repeat(kind.max + 1));
      if (kind.min > 0) values.push("a".repeat(kind.min - 1));
      return values;
    }
    case "int":
      return [kind.min - 1, kind.max + 1, kind.min + 0.5, -1e21, 1e21, new Raw("1e400"), new Raw("-1e400")].filter(
        (value) => value instanceof Raw || value < kind.min || value > kind.max || !Number.isInteger(value),
      );
    case "enum":
      return ["bogus", kind.values[0]!.toUpperCase(), "", ` ${kind.values[0]!}`];
    case "array": {
      const items = current as unknown[];
      const values: unknown[] = [];
      if (kind.min > 0) values.push([]);
      values.push(Array.from({ length: kind.max + 1 }, (_, i) => items[i % items.length]));
      return values;
    }
    default:
      return [];
  }
}

const UNKNOWN_KEYS = ["extra", "Event", "requestID", "", " ", "__proto__", "constructor", "toString", "observed_at", "0"];

/** Every kind of one-way breakage that applies to a template. */
function mutations(t: Template): fc.Arbitrary<Probe> {
  const options: fc.WeightedArbitrary<Probe>[] = [];
  const add = (weight: number, arbitrary: fc.Arbitrary<Probe>) => options.push({ weight, arbitrary });
  const base = valid(t);

  if (t.method === "POST" && t.body !== undefined) {
    const text = stringify(t.body);
    // Broken JSON: a proper prefix of an object, trailing junk, JSON5-isms, bytes JSON refuses.
    add(
      6,
      fc.oneof(
        fc.nat({ max: text.length - 1 }).map((cut): Probe => ({ ...base, label: `${t.name} broken json: cut at ${cut}`, body: { kind: "text", text: text.slice(0, cut) }, expect: ["invalid_json"] })),
        fc
          .constantFrom(
            `${text}x`,
            `${text}}`,
            `${text},`,
            `${text}{}`,
            `${text}\u0000`,
            `${text.slice(0, -1)},}`,
            text.replaceAll('"', "'"),
            `/* c */${text}`,
            `${text.slice(0, 1)}NaN${text.slice(1)}`,
            "",
            "{",
            "nul",
            '{"a":}',
            '{"a" 1}',
            '{"a":1}}',
            '{"a":01}',
            '{"a":.5}',
            '{"a":"\\x"}',
            '{"a":"\u0001"}',
            "undefined",
            `${"[".repeat(10_000)}`,
          )
          .map((broken): Probe => ({ ...base, label: `${t.name} broken json: ${JSON.stringify(broken.slice(0, 40))}`, body: { kind: "text", text: broken }, expect: ["invalid_json"] })),
      ),
    );
    // A JSON value that is not an object.
    add(
      2,
      fc
        .constantFrom<unknown>([], null, 42, "body", true, [t.body], deepArray(10_000))
        .map((value) => withBody(t, `non-object body ${stringify(value).slice(0, 20)}`, value, INVALID)),
    );
    // An unknown field in any strict object (the body itself included).
    const objects: Path[] = [[], ...t.fields.filter((field) => field.kind.type === "object").map((field) => field.path)];
    add(
      4,
      fc
        .tuple(fc.constantFrom(...objects), fc.constantFrom(...UNKNOWN_KEYS), fc.constantFrom<unknown>(1, "x", null, {}, deepArray(10_000)))
        .filter(([path, key]) => {
          const field = t.fields.find((f) => f.path.join(".") === path.join("."));
          const keys = field && field.kind.type === "object" ? field.kind.keys : Object.keys(t.body!);
          return !keys.includes(key);
        })
        .map(([path, key, value]) =>
          mutateBody(t, `unknown field ${JSON.stringify([...path, key].join("."))}`, INVALID, (body) => {
            const target = (path.length === 0 ? body : getAt(body, path)) as Record<string, unknown>;
            // Defined as an own property, as JSON.parse would (a plain assignment of __proto__ sets the prototype).
            Object.defineProperty(target, key, { value, enumerable: true, configurable: true, writable: true });
          }),
        ),
    );
    const required = t.fields.filter((field) => field.required);
    if (required.length > 0) {
      add(3, fc.constantFrom(...required).map((field) => mutateBody(t, `missing ${field.path.join(".")}`, INVALID, (body) => deleteAt(body, field.path))));
    }
    add(
      6,
      fc
        .constantFrom(...t.fields)
        .chain((field) => wrongTypes(field.kind).map((value) => ({ field, value })))
        .map(({ field, value }) => mutateBody(t, `wrong type ${field.path.join(".")} = ${stringify(value).slice(0, 24)}`, INVALID, (body) => setAt(body, field.path, value))),
    );
    // A judged string also gets one over the schema's cap (refused whole: the cap keeps bodies bounded).
    const outOf = (field: Field) => [...outOfRange(field.kind, getAt(t.body, field.path)), ...(field.judged && field.kind.type === "string" ? ["a".repeat(MAX_ITEM_TEXT + 1)] : [])];
    const ranged = t.fields.filter((field) => outOf(field).length > 0);
    if (ranged.length > 0) {
      add(
        8,
        fc
          .constantFrom(...ranged)
          .chain((field) => fc.constantFrom(...outOf(field)).map((value) => ({ field, value })))
          .map(({ field, value }) => {
            const label = `out of range ${field.path.join(".")} = ${stringify(value).slice(0, 24)}`;
            const probe = mutateBody(t, label, field.judged ? INVALID : (journalCheck(field.path) ?? INVALID), (body) => setAt(body, field.path, value));
            return field.judged && reachesJournal(value) ? { ...probe, expect: [], inPlace: { template: t.name, item: field.judged.item } } : probe;
          }),
      );
    }
    if (t.dataPath !== undefined) {
      const dataPath = t.dataPath;
      // The journal's own check of `data` (past the zod gate, which takes any JSON there).
      add(
        10,
        fc
          .constantFrom<{ label: string; value: unknown } | { label: string; drop: true }>(
            { label: "10,000-deep arrays", value: deepArray(10_000) },
            { label: "10,000-deep objects", value: deepObject(10_000) },
            { label: "40-deep arrays", value: deepArray(40) },
            { label: "over 64 KiB", value: "x".repeat(MAX_RECORD_DATA_CHARS) },
            { label: "over 64 KiB of numbers", value: Array.from({ length: 20_000 }, (_, i) => i) },
            { label: "missing", drop: true },
          )
          .map((entry) =>
            mutateBody(t, `data ${entry.label}`, ["invalid_event", "invalid_request"], (body) => ("drop" in entry ? deleteAt(body, dataPath) : setAt(body, dataPath, entry.value))),
          ),
      );
    }
    // Over the 1 MiB cap: in an extra field, or in the data of an append; with or without a content-length.
    add(
      2,
      fc.tuple(fc.nat({ max: 4096 }), fc.boolean(), fc.boolean()).map(([extra, inData, withLength]) => {
        const body = clone(t.body!);
        if (inData && t.dataPath !== undefined) setAt(body, t.dataPath, "x".repeat(MIB + extra));
        else body["pad"] = "x".repeat(MIB + extra);
        const probe = withBody(t, `oversize ${MIB + extra} bytes${withLength ? " with content-length" : ""}`, body, ["payload_too_large"]);
        return withLength ? { ...probe, headers: { ...probe.headers, "content-length": String(new TextEncoder().encode(stringify(body)).length) } } : probe;
      }),
    );
    // Not JSON by its content type (the body itself is the valid JSON), a form POST among them.
    add(
      4,
      fc
        .constantFrom<{ type?: string; body?: Body }>(
          { type: "text/plain" },
          { type: "text/plain;charset=UTF-8" },
          { type: "application/x-www-form-urlencoded" },
          { type: "multipart/form-data; boundary=xyz" },
          { type: "application/jsonp" },
          { type: "application/json5" },
          { type: "application/xml" },
          { type: "json" },
          { type: "application/ json" },
          { type: "applicationjson" },
          { type: "application/json+x" },
          { type: "application/javascript" },
          { type: "" },
          { body: { kind: "bytes", text } },
          { body: { kind: "form" } },
          { body: { kind: "multipart" } },
        )
        .map((choice) => {
          const headers: Record<string, string> = { authorization: bearer(t.token) };
          if (choice.type !== undefined) headers["content-type"] = choice.type;
          return {
            ...base,
            label: `${t.name} content type ${choice.type ?? choice.body?.kind ?? ""}`,
            headers,
            body: choice.body ?? { kind: "text", text },
            expect: ["unsupported_media_type"],
          };
        }),
    );
  }

  // Auth: missing, malformed or wrong (never with leading/trailing blanks: Headers trims them). The
  // scheme's case and the spaces after it are free (RFC 9110), so `bearer <token>` is not among them.
  add(
    4,
    fc
      .constantFrom<string | null>(
        null,
        "",
        "Bearer",
        "Bearer  ",
        "Basic dXNlcjpwYXNzd29yZA==",
        `Bearer ${TOKENS[t.token].token}x`,
        `Bearer ${TOKENS[t.token].token.slice(0, -1)}`,
        `Bearer ${TOKENS[t.token].token.toUpperCase()}`,
        `Bearer ${TOKENS[t.token].token}, Bearer ${TOKENS[t.token].token}`,
        "Bearer fuzz-wrong-token-0123456789",
        `Bearer ${"a".repeat(513)}`,
        `Bearer ${TOKENS[t.token].token}\u007f`,
        `Bearer ${TOKENS[t.token].token}\ttab`,
        `Token ${TOKENS[t.token].token}`,
        TOKENS[t.token].token,
      )
      .map((header) => {
        const headers: Record<string, string> = { ...base.headers };
        if (header === null) delete headers["authorization"];
        else headers["authorization"] = header;
        return { ...base, label: `${t.name} auth ${header === null ? "(none)" : JSON.stringify(header.slice(0, 30))}`, headers, expect: ["unauthorized"] };
      }),
  );

  if (t.lacking.length > 0) {
    add(
      4,
      fc.constantFrom(...t.lacking).map((token) => ({
        ...base,
        label: `${t.name} token ${token} lacks the scope`,
        headers: { ...base.headers, authorization: bearer(token) },
        // A token with append scopes of other namespaces is refused for the namespace (forbidden_namespace).
        expect: token === "appendAcme" ? ["forbidden", "forbidden_namespace"] : ["forbidden"],
      })),
    );
  }

  // A method the route does not have.
  add(
    3,
    fc.constantFrom(...(t.method === "POST" ? ["GET", "PUT", "PATCH", "DELETE"] : ["POST", "PUT", "PATCH", "DELETE"])).map((method) => {
      const body: Body | undefined = method === "GET" ? undefined : { kind: "json", value: t.body ?? {} };
      const headers: Record<string, string> = { authorization: bearer(t.token) };
      if (body) headers["content-type"] = "application/json";
      return { label: `${t.name} method ${method}`, method, path: base.path, headers, ...(body ? { body } : {}), expect: ["method_not_allowed"] };
    }),
  );

  // Bad path parameters.
  const params = t.segments.filter((segment): segment is Exclude<Segment, string> => typeof segment !== "string");
  const rawValues = (param: Exclude<Segment, string>): { raw: string; expect: readonly string[] }[] => {
    const broken = (values: readonly string[]) => values.map((value) => ({ raw: encodeURIComponent(value), expect: ["invalid_request", "not_found", "method_not_allowed"] }));
    const malformed = ["%E0%A4%A", "%zz", "%2e%2e", "..", "%00"].map((raw) => ({ raw, expect: ["invalid_request", "not_found", "method_not_allowed"] }));
    if (param.param === "journal") {
      return [
        ...broken(["Usage", "a".repeat(64), "us age", "us.age", "usage/x", "us\u00e9ge"]),
        ...malformed,
        ...["nope", "usage2", "a".repeat(63)].map((raw) => ({ raw, expect: ["unknown_journal"] })),
      ];
    }
    if (param.param === "consumer") {
      // A bad name is refused by the journal's own check, as a local call would be.
      const named = NAME_VIOLATIONS.filter((name) => name !== "").map((value) => ({ raw: encodeURIComponent(value), expect: ["invalid_consumer_id", "not_found", "method_not_allowed"] }));
      return [...named, ...malformed.map((entry) => ({ ...entry, expect: [...entry.expect, "invalid_consumer_id"] }))];
    }
    return [...broken(requestIdViolations(param.value)), ...malformed];
  };
  if (params.length > 0) {
    add(
      4,
      fc
        .constantFrom(...params)
        .chain((param) => fc.constantFrom(...rawValues(param)).map((value) => ({ param, value })))
        .map(({ param, value }) => ({
          ...base,
          label: `${t.name} path ${param.param} = ${value.raw.slice(0, 24)}`,
          path: `${pathOf(t.segments, { param: param.param, raw: value.raw })}${queryText(t.query)}`,
          expect: value.expect,
        })),
    );
  }

  // Unknown routes near this one.
  add(
    2,
    fc
      .constantFrom(
        (path: string) => `${path}/zzz`,
        (path: string) => `${path}/`,
        (path: string) => `${path}x`,
        (path: string) => path.replace("/v1/", "/v2/"),
        (path: string) => path.replace("/v1/", "/V1/"),
        (path: string) => path.replace("/v1/", "/"),
        (path: string) => path.replace("/v1/", "/v1//"),
        (path: string) => path.replace("/journals/", "/journal/"),
        () => "/v1/zzz",
        () => "/",
        () => "/v1",
      )
      .map((route) => route(pathOf(t.segments)))
      .filter((path) => path !== pathOf(t.segments))
      .map((path) => {
        return { ...base, label: `${t.name} route ${path.slice(0, 60)}`, path: `${path}${queryText(t.query)}`, expect: ["not_found", "method_not_allowed", "invalid_request", "unknown_journal"] };
      }),
  );

  // Bad query strings (only routes with a strict query schema: elsewhere the query is ignored).
  if (t.queryKinds !== undefined) {
    const kinds = t.queryKinds;
    const badValues: Record<QueryKind, readonly string[]> = {
      limit: ["0", "-1", "1001", "1.5", "abc", "", "Infinity", "NaN", "99999999999999999999999", "%zz", "%E0%A4%A"],
      cursor: ["", "a".repeat(4097), "qp1.x", "ap1.1", "%zz"],
      order: ["sideways", "NEWEST", "", "%zz"],
      reason: ["bogus", "MALFORMED", "", "%zz"],
      text200: ["a".repeat(201)],
      key: ["ab", "", "a".repeat(514), "%z"],
      requestId: [...requestIdViolations(newRequestId(NOW)), "%zz"],
    };
    const keys = Object.keys(kinds);
    add(
      5,
      fc.oneof(
        fc
          .constantFrom(...keys)
          .chain((key) => fc.constantFrom(...badValues[kinds[key]!]).map((value) => ({ key, value })))
          .map(({ key, value }) => {
            const query = Object.entries({ ...(t.query ?? {}) }).filter(([name]) => name !== key);
            const text = [...query.map(([name, v]) => `${name}=${encodeURIComponent(v)}`), `${key}=${value.startsWith("%") ? value : encodeURIComponent(value)}`].join("&");
            return { ...base, label: `${t.name} query ${key}=${value.slice(0, 20)}`, path: `${pathOf(t.segments)}?${text}`, expect: ["invalid_request", "invalid_argument"] };
          }),
        fc.constantFrom("zzz=1", "LIMIT=5", "Query=a", "limit[]=5", "a=%zz").map((extra) => ({
          ...base,
          label: `${t.name} query unknown ${extra}`,
          path: `${pathOf(t.segments)}${queryText(t.query, extra)}`,
          expect: ["invalid_request"],
        })),
        fc.constantFrom(...keys).map((key) => {
          const value = t.query?.[key] ?? "x";
          return { ...base, label: `${t.name} query repeated ${key}`, path: `${pathOf(t.segments)}${queryText(t.query, `${key}=${encodeURIComponent(value)}`)}${t.query?.[key] === undefined ? `&${key}=x` : ""}`, expect: ["invalid_request"] };
        }),
      ),
    );
  }

  return fc.oneof(...options);
}

// --- sending -------------------------------------------------------------------------------------

function toRequest(probe: Probe): Request {
  const headers = new Headers(probe.headers);
  let body: BodyInit | undefined;
  const spec = probe.body;
  if (spec?.kind === "json") body = stringify(spec.value);
  else if (spec?.kind === "text") body = spec.text;
  else if (spec?.kind === "bytes") body = new TextEncoder().encode(spec.text);
  else if (spec?.kind === "form") body = new URLSearchParams({ consumer: "billing", maxEvents: "1", leaseMs: "1000" });
  else if (spec?.kind === "multipart") {
    const form = new FormData();
    form.set("consumer", "billing");
    form.set("maxEvents", "1");
    body = form;
  }
  return new Request(`${ORIGIN}${probe.path}`, { method: probe.method, headers, ...(body === undefined ? {} : { body }) });
}

interface Answer {
  readonly status: number;
  readonly text: string;
  readonly json: unknown;
}

async function send(app: ReturnType<typeof createApp>, probe: Probe): Promise<Answer> {
  const response = await app.fetch(toRequest(probe));
  // Bytes, then UTF-8 (the export route answers NDJSON; workerd warns on .text() of a non-text type).
  const text = new TextDecoder().decode(await response.arrayBuffer());
  let json: unknown = undefined;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, text, json };
}

function errorCode(answer: Answer): string | null {
  const error = (answer.json as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  return error && typeof error.code === "string" && typeof error.message === "string" ? error.code : null;
}

/** Mutation kinds, as their labels start (for the tally printed at the end). */
const KINDS = ["broken json", "non-object body", "unknown field", "missing", "wrong type", "out of range", "data", "oversize", "content type", "auth", "token", "method", "path", "route", "query"];

// --- the journal's observable state ---------------------------------------------------------------

const CONSUMERS = ["billing", "fuzz-reader"] as const;

async function snapshot(journal: PartitionedJournal, events: readonly UsageEvent[]) {
  const billing = parseConsumerId("billing");
  return {
    stats: await Promise.all(CONSUMERS.map((consumer) => journal.stats(parseConsumerId(consumer)))),
    quarantined: await Promise.all(CONSUMERS.map((consumer) => journal.listQuarantined(parseConsumerId(consumer), { limit: 1000 }))),
    audit: await journal.listAudit({ limit: 1000 }),
    attempts: await Promise.all(events.map((event) => journal.attempts(billing, event.id))),
  };
}

/** Everything the journal holds, claimed and acked by a consumer that never claimed before. */
async function drain(journal: PartitionedJournal, consumer: string): Promise<UsageEvent[]> {
  const id = parseConsumerId(consumer);
  const seen: UsageEvent[] = [];
  for (;;) {
    const deliveries: Delivery[] = await journal.claim(id, { maxEvents: 1000, leaseMs: 60_000, now: NOW });
    if (deliveries.length === 0) return seen;
    for (const delivery of deliveries) {
      seen.push(delivery.event);
      await journal.ack(delivery.id);
    }
  }
}

function byKey(events: readonly UsageEvent[]): Record<string, string[]> {
  const keys: Record<string, string[]> = {};
  for (const event of events) (keys[orderingKeyText(event)] ??= []).push(event.id);
  return keys;
}

// --- the test ----------------------------------------------------------------------------------

let scopes = 0;

describe("HTTP API fuzz (createApp over PartitionedJournal, P = 2)", () => {
  it(
    `answers ${RUNS} malformed requests with documented 4xx errors (a batch item the journal judges: rejected in place) and changes nothing`,
    async () => {
      const started = Date.now();
      const scope = `http-fuzz-${scopes++}-${crypto.randomUUID()}/`;
      const journal = new PartitionedJournal(env.PARTITIONS, { name: "usage", partitions: 2, scope, clock: () => NOW });
      const app = createApp({
        journals: { usage: { journal, consumers: ["billing"] } },
        auth: { tokens: Object.values(TOKENS) },
        clock: () => NOW,
      });
      const post = async (path: string, body: unknown, token: TokenName = "full") => {
        const answer = await send(app, { label: path, method: "POST", path, headers: { authorization: bearer(token), "content-type": "application/json" }, body: { kind: "json", value: body }, expect: [] });
        expect(answer.status, `${path}: ${answer.text}`).toBe(200);
        return answer.json as Record<string, unknown>;
      };

      // Seed: 16 events on 8 keys (a batch and two single appends), a claim of one per key, three quarantined.
      const subjects = [...["0", "1", "2", "3", "4", "5"].map((n) => ["acme", `user-${n}`] as const), ["other", "x"] as const, ["other", "y"] as const];
      const wire = (i: number) => {
        const [namespace, subject] = subjects[i % subjects.length]!;
        return { record: { requestId: newRequestId(NOW - 100_000 + i), namespace, subject, data: { tokens: i, note: `event ${i}` } }, observedAt: NOW - 100_000 + i };
      };
      const seededWire = Array.from({ length: 16 }, (_, i) => wire(i));
      await post("/v1/journals/usage/append", { event: seededWire[0] }, "appendAcme");
      await post("/v1/journals/usage/append", { event: seededWire[1] }, "appendAcme");
      await post("/v1/journals/usage/append-batch", { events: seededWire.slice(2) });
      const claimed = (await post("/v1/journals/usage/claim", { consumer: "billing", maxEvents: 8, leaseMs: MAX_LEASE_MS })) as { deliveries: { id: DeliveryId; event: UsageEvent }[] };
      expect(claimed.deliveries).toHaveLength(8);
      const [q1, q2, q3, d1, d2, d3, d4] = claimed.deliveries.map((d) => ({ id: d.id, event: createUsageEvent(d.event) }));
      if (!q1 || !q2 || !q3 || !d1 || !d2 || !d3 || !d4) throw new Error("the seed claim returned too few deliveries");
      await post("/v1/journals/usage/quarantine", { delivery: q1.id, reason: "rejected" }, "consume");
      await post("/v1/journals/usage/quarantine", { delivery: q2.id, reason: "malformed" }, "consume");
      await post("/v1/journals/usage/quarantine", { delivery: q3.id, reason: "attempts_exhausted" }, "consume");
      const seeded = seededWire.map((w) => w.record.requestId);
      const seededEvents = seededWire.map((w) => createUsageEvent(w));
      const before = await snapshot(journal, seededEvents);
      expect(before.stats[0]).toMatchObject({ inFlight: 5, quarantined: 3, pending: 8 });

      // The templates: valid requests that would change state (or succeed, for reads).
      const delivery = (d: { id: DeliveryId }) => ({ ...d.id });
      // `inBatch`: the fields are a batch item's, at `prefix`, judged by the journal (see Field.judged).
      const deliveryFields = (prefix: Path, inBatch = false): Field[] => [
        { path: prefix, kind: { type: "object", keys: ["consumer", "event", "attempt"] }, required: true },
        ...[
          { path: [...prefix, "consumer"], kind: { type: "string", min: 1, max: 63, grammar: "name" }, required: true } as const,
          { path: [...prefix, "event"], kind: { type: "string", min: 36, max: 36, grammar: "requestId" }, required: true } as const,
          { path: [...prefix, "attempt"], kind: { type: "int", min: 1, max: Number.MAX_SAFE_INTEGER }, required: true } as const,
        ].map((field): Field => (inBatch ? { ...field, judged: { item: prefix } } : field)),
      ];
      const eventFields = (prefix: Path, inBatch = false): Field[] => [
        { path: prefix, kind: { type: "object", keys: ["record", "observedAt"] }, required: true },
        { path: [...prefix, "record"], kind: { type: "object", keys: ["requestId", "namespace", "subject", "data"] }, required: true },
        ...[
          { path: [...prefix, "record", "requestId"], kind: { type: "string", min: 36, max: 36, grammar: "requestId" }, required: true } as const,
          { path: [...prefix, "record", "namespace"], kind: { type: "string", min: 1, max: 256 }, required: true } as const,
          { path: [...prefix, "record", "subject"], kind: { type: "string", min: 1, max: 256 }, required: true } as const,
          { path: [...prefix, "observedAt"], kind: { type: "int", min: 0, max: Number.MAX_SAFE_INTEGER }, required: true } as const,
        ].map((field): Field => (inBatch ? { ...field, judged: { item: prefix } } : field)),
      ];
      const now: Field = { path: ["now"], kind: { type: "int", min: 0, max: Number.MAX_SAFE_INTEGER }, required: false };
      const J = { param: "journal", value: "usage" } as const;
      const C = { param: "consumer", value: "billing" } as const;
      const fresh = (i: number, namespace: string) => ({ record: { requestId: newRequestId(NOW + i), namespace, subject: `fuzz-${i}`, data: { n: i } }, observedAt: NOW });
      const templates: Template[] = [
        {
          name: "append",
          method: "POST",
          segments: ["journals", J, "append"],
          token: "full",
          lacking: ["appendAcme", "consume", "operate"],
          body: { event: fresh(1, "other") },
          fields: [{ path: ["event"], kind: { type: "object", keys: ["record", "observedAt"] }, required: true }, ...eventFields(["event"]).slice(1)],
          dataPath: ["event", "record", "data"],
        },
        {
          name: "append-batch",
          method: "POST",
          segments: ["journals", J, "append-batch"],
          token: "full",
          lacking: ["appendAcme", "consume", "operate"],
          // Only events.1 is new: with it rejected in place, the batch changes nothing.
          body: { events: [seededWire[2], fresh(3, "other"), seededWire[3]] },
          fields: [{ path: ["events"], kind: { type: "array", min: 0, max: 1000 }, required: true }, ...eventFields(["events", 1], true)],
        },
        {
          name: "claim",
          method: "POST",
          segments: ["journals", J, "claim"],
          token: "consume",
          lacking: ["appendAcme", "operate"],
          body: { consumer: "fuzz-reader", maxEvents: 5, leaseMs: 60_000, now: NOW },
          fields: [
            { path: ["consumer"], kind: { type: "string", min: 1, max: 63, grammar: "name" }, required: true },
            { path: ["maxEvents"], kind: { type: "int", min: 1, max: 10_000 }, required: true },
            { path: ["leaseMs"], kind: { type: "int", min: 1, max: MAX_LEASE_MS }, required: true },
            now,
          ],
        },
        {
          name: "ack",
          method: "POST",
          segments: ["journals", J, "ack"],
          token: "consume",
          lacking: ["appendAcme", "operate"],
          // q1 is quarantined (refused in place, changing nothing); deliveries.1 is the ack that changes state.
          body: { deliveries: [delivery(q1), delivery(d1)] },
          fields: [{ path: ["deliveries"], kind: { type: "array", min: 1, max: 1000 }, required: true }, ...deliveryFields(["deliveries", 1], true)],
        },
        {
          name: "nack",
          method: "POST",
          segments: ["journals", J, "nack"],
          token: "consume",
          lacking: ["appendAcme", "operate"],
          body: { delivery: delivery(d2), retryAfterMs: 1000, error: "upstream 500", now: NOW },
          fields: [
            ...deliveryFields(["delivery"]),
            { path: ["retryAfterMs"], kind: { type: "int", min: 0, max: MAX_LEASE_MS }, required: true },
            { path: ["error"], kind: { type: "string", min: 0, max: 2000 }, required: true },
            now,
          ],
        },
        {
          name: "extend",
          method: "POST",
          segments: ["journals", J, "extend"],
          token: "consume",
          lacking: ["appendAcme", "operate"],
          body: { delivery: delivery(d3), leaseMs: 1000, now: NOW },
          fields: [...deliveryFields(["delivery"]), { path: ["leaseMs"], kind: { type: "int", min: 1, max: MAX_LEASE_MS }, required: true }, now],
        },
        {
          name: "quarantine",
          method: "POST",
          segments: ["journals", J, "quarantine"],
          token: "consume",
          lacking: ["appendAcme", "operate"],
          body: { delivery: delivery(d4), reason: "rejected" },
          fields: [...deliveryFields(["delivery"]), { path: ["reason"], kind: { type: "enum", values: ["malformed", "rejected", "attempts_exhausted"] }, required: true }],
        },
        ...(["release", "discard"] as const).map(
          (action): Template => ({
            name: action,
            method: "POST",
            segments: ["journals", J, "consumers", C, "quarantined", { param: "requestId", value: (action === "release" ? q1 : q2).event.id }, action],
            token: "operate",
            lacking: ["appendAcme", "consume"],
            body: { now: NOW, actor: "someone" },
            fields: [now, { path: ["actor"], kind: { type: "string", min: 0, max: 200 }, required: false }],
          }),
        ),
        {
          name: "bulk",
          method: "POST",
          segments: ["journals", J, "consumers", C, "quarantined", "bulk"],
          token: "operate",
          lacking: ["appendAcme", "consume"],
          body: { action: "release", dryRun: false, query: "", reason: "attempts_exhausted", key: orderingKeyText(q3.event), max: 10, now: NOW },
          fields: [
            { path: ["action"], kind: { type: "enum", values: ["release", "discard"] }, required: true },
            { path: ["dryRun"], kind: { type: "bool" }, required: true },
            { path: ["query"], kind: { type: "string", min: 0, max: 200 }, required: false },
            { path: ["reason"], kind: { type: "enum", values: ["malformed", "rejected", "attempts_exhausted"] }, required: false },
            { path: ["key"], kind: { type: "string", min: 3, max: 513 }, required: false },
            { path: ["max"], kind: { type: "int", min: 1, max: 10_000 }, required: false },
            now,
          ],
        },
        {
          name: "prune",
          method: "POST",
          segments: ["journals", J, "prune"],
          token: "operate",
          lacking: ["appendAcme", "consume"],
          body: { now: NOW, limit: 10 },
          fields: [now, { path: ["limit"], kind: { type: "int", min: 1, max: 100_000 }, required: false }],
        },
        { name: "journals", method: "GET", segments: ["journals"], token: "appendAcme", lacking: [], fields: [] },
        { name: "journal", method: "GET", segments: ["journals", J], token: "consume", lacking: [], fields: [] },
        { name: "stats", method: "GET", segments: ["journals", J, "consumers", C, "stats"], token: "consume", lacking: ["appendAcme"], fields: [] },
        {
          name: "attempts",
          method: "GET",
          segments: ["journals", J, "consumers", C, "attempts", { param: "requestId", value: d1.event.id }],
          token: "operate",
          lacking: ["appendAcme"],
          fields: [],
        },
        {
          name: "quarantined",
          method: "GET",
          segments: ["journals", J, "consumers", C, "quarantined"],
          token: "operate",
          lacking: ["appendAcme", "consume"],
          fields: [],
          query: { limit: "10", order: "newest", query: "a", reason: "rejected", key: orderingKeyText(q1.event) },
          queryKinds: { limit: "limit", after: "cursor", order: "order", query: "text200", reason: "reason", key: "key" },
        },
        {
          name: "export",
          method: "GET",
          segments: ["journals", J, "consumers", C, "quarantined", "export"],
          token: "operate",
          lacking: ["appendAcme", "consume"],
          fields: [],
          query: { reason: "malformed" },
          queryKinds: { query: "text200", reason: "reason", key: "key" },
        },
        {
          name: "audit",
          method: "GET",
          segments: ["journals", J, "audit"],
          token: "operate",
          lacking: ["appendAcme", "consume"],
          fields: [],
          query: { limit: "5" },
          queryKinds: { limit: "limit", after: "cursor", requestId: "requestId" },
        },
      ];

      // The fuzz.
      const tally = new Map<string, number>();
      const statuses = new Map<number, number>();
      const probes = fc.constantFrom(...templates).chain((t) => mutations(t));
      // Run first, whatever the seed draws: the cases the issue names.
      const byName = (name: string) => templates.find((t) => t.name === name)!;
      const append = byName("append");
      const examples: Probe[] = [
        mutateBody(append, "data 10,000-deep arrays", ["invalid_event"], (body) => setAt(body, append.dataPath!, deepArray(10_000))),
        mutateBody(byName("append-batch"), "events.0 10,000-deep arrays", INVALID, (body) => setAt(body, ["events", 0], deepArray(10_000))),
        { ...withBody(append, "oversize in data", { ...append.body, pad: "x".repeat(MIB + 1) }, ["payload_too_large"]) },
        { ...valid(byName("claim")), label: "claim form POST", headers: { authorization: bearer("consume") }, body: { kind: "form" }, expect: ["unsupported_media_type"] },
        { ...valid(byName("release")), label: "release multipart POST", headers: { authorization: bearer("operate") }, body: { kind: "multipart" }, expect: ["unsupported_media_type"] },
        { ...valid(byName("ack")), label: "ack without a token", headers: { "content-type": "application/json" }, expect: ["unauthorized"] },
        ...(
          [
            ["append-batch", ["events", 1], ["record", "requestId"], "not-a-request-id"],
            ["append-batch", ["events", 1], ["record", "subject"], ""],
            ["ack", ["deliveries", 1], ["consumer"], ""],
            ["ack", ["deliveries", 1], ["event"], "not-a-request-id"],
          ] as const
        ).map(([name, item, field, value]): Probe => ({
          ...mutateBody(byName(name), `out of range ${[...item, ...field].join(".")} = ${JSON.stringify(value)}`, [], (body) => setAt(body, [...item, ...field], value)),
          inPlace: { template: name, item },
        })),
      ];

      // What the judged batches answer for the items a mutation leaves alone: the template without its
      // judged item (already present, or refused in place: sending it changes nothing).
      const baselines = new Map<string, unknown[]>();
      for (const t of templates) {
        const judged = t.fields.find((field) => field.judged !== undefined)?.judged;
        if (judged === undefined) continue;
        const body = clone(t.body!);
        (getAt(body, judged.item.slice(0, -1)) as unknown[]).splice(judged.item[judged.item.length - 1] as number, 1);
        const answer = (await post(pathOf(t.segments), body, t.token)) as { results: unknown[] };
        baselines.set(t.name, answer.results);
      }
      expect([...baselines.keys()]).toEqual(["append-batch", "ack"]);
      // The reference for a judged item: a local journal's answer for it (a rejection needs no state).
      const local = createJournal(memoryEngine(), { name: "local", capacity: journal.capacity, clock: () => NOW });
      /** The answer a probe with a judged item must get: the baseline with the local journal's rejection of the item spliced in. */
      const inPlaceAnswer = async (probe: Probe & { inPlace: NonNullable<Probe["inPlace"]> }) => {
        const { template, item } = probe.inPlace;
        // As the server parses it.
        const parsed = JSON.parse(stringify((probe.body as { value: unknown }).value)) as unknown;
        const alone = getAt(parsed, item);
        const [own] = template === "ack" ? encodeAcks(await local.ackBatch([alone as never])) : encodeBatch(await local.appendBatch([alone as never]));
        if (own === undefined || !("error" in own)) throw new Error(`the mutation left the item valid (${probe.label}): ${JSON.stringify(own)}`);
        const results = [...baselines.get(template)!];
        results.splice(item[item.length - 1] as number, 0, own);
        return { results };
      };

      let sent = 0;
      let inPlace = 0;
      await fc.assert(
        fc.asyncProperty(probes, async (probe) => {
          const answer = await send(app, probe);
          sent += 1;
          const code = errorCode(answer);
          const where = `${probe.method} ${probe.path.slice(0, 200)} (${probe.label}) answered ${answer.status} ${answer.text.slice(0, 300)}`;
          if (probe.inPlace !== undefined) {
            expect(answer.status, where).toBe(200);
            expect(answer.json, where).toEqual(await inPlaceAnswer({ ...probe, inPlace: probe.inPlace }));
            inPlace += 1;
            statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
            tally.set("in place", (tally.get("in place") ?? 0) + 1);
            return;
          }
          if (answer.status < 400 || answer.status > 499) throw new Error(`not a 4xx: ${where}`);
          if (code === null) throw new Error(`no { error: { code, message } } body: ${where}`);
          if (!DOCUMENTED_4XX.has(code)) throw new Error(`undocumented code ${code}: ${where}`);
          if (probe.expect.length > 0 && !probe.expect.includes(code)) throw new Error(`expected ${probe.expect.join(" or ")}: ${where}`);
          const rest = probe.label.slice(probe.label.indexOf(" ") + 1);
          const kind = KINDS.find((prefix) => rest.startsWith(prefix)) ?? rest;
          tally.set(kind, (tally.get(kind) ?? 0) + 1);
          statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        }),
        { seed: SEED, numRuns: RUNS, endOnFailure: true, examples: examples.map((probe) => [probe] as [Probe]) },
      );
      const fuzzMs = Date.now() - started;
      expect(inPlace).toBeGreaterThan(0);

      // Nothing changed.
      expect(await snapshot(journal, seededEvents)).toEqual(before);
      const contents = await drain(journal, "fresh-verifier");
      expect(contents.map((event) => event.id).sort()).toEqual([...seeded].sort());
      expect(byKey(contents)).toEqual(byKey(seededEvents));
      for (const event of contents) {
        const original = seededWire.find((w) => w.record.requestId === event.id)!;
        expect({ record: event.record, observedAt: event.observedAt }).toEqual(original);
      }

      // Control: every template, unbroken, succeeds (so each fuzzed request was refused for its one mutation).
      for (const t of templates) {
        const answer = await send(app, valid(t));
        expect(answer.status, `${t.name} unbroken: ${answer.text.slice(0, 300)}`).toBe(200);
        if (t.name === "ack") expect((answer.json as { results: { ok: boolean; error?: { code: string } }[] }).results.map((r) => r.error?.code ?? r.ok)).toEqual(["quarantined", true]);
        if (t.name === "append-batch") expect((answer.json as { results: { status: string }[] }).results.map((r) => r.status)).toEqual(["already_present", "accepted", "already_present"]);
        if (t.name === "claim") expect((answer.json as { deliveries: unknown[] }).deliveries.length).toBeGreaterThan(0);
        if (t.name === "bulk") expect(answer.json).toMatchObject({ matched: 1, applied: 1 });
      }

      expect(sent).toBeGreaterThanOrEqual(RUNS);
      console.log(
        `http fuzz: ${sent} requests in ${fuzzMs} ms (seed ${SEED}); statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}; by kind ${JSON.stringify(Object.fromEntries([...tally].sort()))}`,
      );
    },
    SOAK ? 1_800_000 : 300_000,
  );
});
