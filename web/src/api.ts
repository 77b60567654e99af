/**
 * The operator's client for the worker's HTTP API (`docs/http-api.md`). Every
 * call sends the token as `Authorization: Bearer`, never a cookie, and POSTs
 * JSON (the worker refuses any other body type, which is what keeps a
 * cross-site form from acting).
 *
 * Failures are thrown as `ApiError`; a refused token (401) or a token without
 * the needed scope (403) as its subclass `AuthError`, which the page answers by
 * showing the sign-in screen again.
 */
import type { AuditPage, Capacity, DeliveryMode, JournalStats, PoisonReason, QuarantinePage } from "../../src/journal/types.js";

/** A journal as `GET /v1/journals` lists it. */
export interface JournalInfo {
  readonly name: string;
  readonly capacity: Capacity;
  readonly mode: DeliveryMode;
  /** Consumers the journal knows about (others may still be typed in). */
  readonly consumers: readonly string[];
}

/** The filter of the quarantine list, bulk actions and export. Empty strings mean "any". */
export interface QuarantineFilter {
  /** Case-insensitive substring of request id, ordering key or reason. */
  readonly query: string;
  readonly reason: PoisonReason | "";
  /**
   * The ordering key's namespace, exact. Sent as `namespace`, never joined with
   * the subject into a `key`: `a/b` + `c` and `a` + `b/c` would both be `a/b/c`.
   */
  readonly namespace: string;
  /** The ordering key's subject, exact (sent as `subject`). */
  readonly subject: string;
}

/** The answer of `POST .../quarantined/bulk`. */
export interface BulkResult {
  /** How many events the filter selected (up to `max`), or how many `requestIds` were sent. */
  readonly matched: number;
  /** The filter selects more than `max` (1000 by default). */
  readonly more: boolean;
  /** The selected events: after a dry run, the ids its confirmation sends back. */
  readonly requestIds: readonly string[];
  readonly applied: number;
  /** Events not acted on, each with the journal's error; `not_quarantined` means resolved elsewhere since the dry run. */
  readonly failed: readonly { readonly requestId: string; readonly error: unknown }[];
}

/**
 * One call of the bulk route: a dry run of a filter, or the confirmation of
 * one, which sends the ids the dry run answered so that exactly the events the
 * operator saw counted are acted on (never events quarantined since).
 */
export type BulkRequest =
  | { readonly action: "release" | "discard"; readonly dryRun: true; readonly filter: QuarantineFilter; readonly max?: number }
  | { readonly action: "release" | "discard"; readonly dryRun: false; readonly requestIds: readonly string[] };

/** An answer the API refused, with the error `code` of its JSON body when there is one. */
export class ApiError extends Error {
  override readonly name: string = "ApiError";
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** 401 (no or wrong token) or 403 (the token lacks the scope): sign in again. */
export class AuthError extends ApiError {
  override readonly name = "AuthError";
}

/** Any failure as one line of text, for an error message on the page. */
export function describeError(error: unknown): string {
  if (error instanceof ApiError) return error.status ? `${error.message} (${error.code}, HTTP ${error.status})` : error.message;
  if (error instanceof Error) return error.message;
  return String(error);
}

type Query = Record<string, string | number | null | undefined>;

/** The filter's fields as the API names them, empty ones left out. */
function filterFields(filter: QuarantineFilter): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const name of ["query", "reason", "namespace", "subject"] as const) {
    if (filter[name]) fields[name] = filter[name];
  }
  return fields;
}

/**
 * The operator routes of one worker, called with one token.
 *
 * @example
 * const api = new OperatorApi(token);
 * const { items, nextCursor } = await api.listQuarantined("usage", "billing", { query: "", reason: "", namespace: "", subject: "" }, null);
 */
export class OperatorApi {
  readonly #token: string;
  readonly #base: string;

  /** @param base The API root, `/v1` of the page's own origin by default. */
  constructor(token: string, base = "/v1") {
    this.#token = token;
    this.#base = base;
  }

  /** `GET /v1/journals`: the journals and their known consumers (a token with a journal scope may list them; consumers are listed to `consume` and `operate`). */
  async journals(): Promise<readonly JournalInfo[]> {
    const body = await this.#json<{ journals: JournalInfo[] }>("GET", "/journals");
    return body.journals;
  }

  /** `GET .../consumers/{consumer}/stats`. */
  stats(journal: string, consumer: string): Promise<JournalStats> {
    return this.#json("GET", `${consumerPath(journal, consumer)}/stats`);
  }

  /** One page of quarantined events, newest (latest position) first. */
  listQuarantined(journal: string, consumer: string, filter: QuarantineFilter, after: string | null, limit = 50): Promise<QuarantinePage> {
    return this.#json("GET", `${consumerPath(journal, consumer)}/quarantined`, {
      query: { ...filterFields(filter), order: "newest", limit, after },
    });
  }

  /** Put a quarantined event back on its key at its original position. */
  async release(journal: string, consumer: string, requestId: string): Promise<void> {
    await this.#json("POST", `${consumerPath(journal, consumer)}/quarantined/${encodeURIComponent(requestId)}/release`, { body: {} });
  }

  /** Resolve a quarantined event as handled, without delivering it. */
  async discard(journal: string, consumer: string, requestId: string): Promise<void> {
    await this.#json("POST", `${consumerPath(journal, consumer)}/quarantined/${encodeURIComponent(requestId)}/discard`, { body: {} });
  }

  /**
   * Count, or act on, quarantined events in bulk. A dry run changes nothing and
   * answers the ids `filter` selects (up to `max`); its confirmation passes those
   * ids and acts on them alone, reporting any resolved since in `failed`.
   */
  bulk(journal: string, consumer: string, request: BulkRequest): Promise<BulkResult> {
    const body: Record<string, unknown> = { action: request.action, dryRun: request.dryRun };
    if (request.dryRun) {
      Object.assign(body, filterFields(request.filter));
      if (request.max !== undefined) body["max"] = request.max;
    } else {
      body["requestIds"] = request.requestIds;
    }
    return this.#json("POST", `${consumerPath(journal, consumer)}/quarantined/bulk`, { body });
  }

  /**
   * The NDJSON export (one `QuarantinedEvent` per line, with its attempts) of
   * everything matching `filter`, as the bytes the worker sent (never decoded
   * into one string).
   */
  async exportNdjson(journal: string, consumer: string, filter: QuarantineFilter): Promise<Blob> {
    const response = await this.#fetch("GET", `${consumerPath(journal, consumer)}/quarantined/export`, { query: filterFields(filter) });
    try {
      return await response.blob();
    } catch (error) {
      throw new ApiError(0, "network", `The export could not be read: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  /**
   * One page of the audit entries of one event (all consumers), oldest first;
   * continue with `after` = the page's `nextCursor` until it is null.
   */
  audit(journal: string, requestId: string, after: string | null = null, limit = 1000): Promise<AuditPage> {
    return this.#json("GET", `${journalPath(journal)}/audit`, { query: { requestId, limit, after } });
  }

  async #json<T>(method: "GET" | "POST", path: string, options: { query?: Query; body?: unknown } = {}): Promise<T> {
    const response = await this.#fetch(method, path, options);
    return (await response.json()) as T;
  }

  async #fetch(method: "GET" | "POST", path: string, options: { query?: Query; body?: unknown }): Promise<Response> {
    const url = new URL(`${this.#base}${path}`, location.href);
    for (const [name, value] of Object.entries(options.query ?? {})) {
      if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, String(value));
    }
    const headers = new Headers({ Authorization: `Bearer ${this.#token}`, Accept: "application/json" });
    const init: RequestInit = { method, headers, credentials: "omit", cache: "no-store" };
    if (options.body !== undefined) {
      headers.set("Content-Type", "application/json");
      init.body = JSON.stringify(options.body);
    }
    let response: Response;
    try {
      response = await fetch(url, init);
    } catch (error) {
      throw new ApiError(0, "network", `The worker could not be reached: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (!response.ok) throw await errorOf(response);
    return response;
  }
}

function journalPath(journal: string): string {
  return `/journals/${encodeURIComponent(journal)}`;
}

function consumerPath(journal: string, consumer: string): string {
  return `${journalPath(journal)}/consumers/${encodeURIComponent(consumer)}`;
}

/** Read `{ error: { code, message } }` from a refused answer; tolerate any other body. */
async function errorOf(response: Response): Promise<ApiError> {
  let code = `http_${response.status}`;
  let message = response.statusText || "The request was refused";
  try {
    const body = (await response.json()) as { error?: { code?: unknown; message?: unknown } };
    if (typeof body.error?.code === "string") code = body.error.code;
    if (typeof body.error?.message === "string") message = body.error.message;
  } catch {
    // Not JSON (a proxy's error page, say): the status line is all there is.
  }
  const Kind = response.status === 401 || response.status === 403 ? AuthError : ApiError;
  return new Kind(response.status, code, message);
}
