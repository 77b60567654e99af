/**
 * `HttpJournal`: a `UsageJournal` over the isostore HTTP API
 * (docs/http-api.md), for a browser, a Node service or another Worker.
 *
 * - Arguments are checked here first, with the same checks as the core
 *   journal (`src/journal/arguments.ts`), so bad input fails with the same
 *   typed error and never reaches the network.
 * - Failures come back typed: a journal error answer is rebuilt into the same
 *   class with the same fields (`src/journal/wire.ts`); anything else (auth,
 *   an unknown journal, a proxy's 502) is a `BackendError` whose `cause` is an
 *   {@link HttpError} with the status and the API's code.
 * - Answers are checked: a 2xx whose body is not the answer the API promises
 *   (a misrouted `baseUrl`, a proxy's page, a mock) fails with a `BackendError`
 *   whose `cause` is an {@link HttpError} of code `invalid_answer`; it is never
 *   taken for a result (an `append` answered `{}` must not pass for journaled).
 * - Retries: a call is repeated (exponential backoff with jitter, up to
 *   `retry.attempts` tries, never sooner than an answer's `Retry-After`
 *   asked, and not at all when that asks for longer than
 *   `retry.maxDelayMs`: the wait is then on the error's
 *   {@link HttpError.retryAfterMs}) only after a failure that may pass (a 429, a
 *   gateway's 502, 503 or 504, a retryable journal `backend` 503, a network
 *   failure or timeout), and then only when repeating it cannot do its work
 *   twice. Calls that are idempotent (append, appendBatch, ack, quarantine,
 *   prune and every read) are repeated after any of them: appends are
 *   idempotent on their request id, so a retried append never journals twice.
 *   (An ack is idempotent while its event is stored: a retry after a try that
 *   may have committed that finds the event gone, pruned or dropped meanwhile,
 *   reports the ack done rather than `not_outstanding`.)
 *   The others (claim, extend, nack, release, discard) are repeated only when
 *   the answer says nothing was committed: a 429, or a journal `backend` 503
 *   whose error carries the marks of a full or overloaded storage object
 *   (`cause`, see docs/http-api.md), which the server sets only for a
 *   refusal before any commit. Any other failure may have come after the
 *   commit (a lost reply between the worker and its Durable Object is a
 *   retryable `backend` 503 too; a gateway may have passed the request on),
 *   so it is not repeated: a repeated claim would lease more events while
 *   the first claim's leases hold its events and burn their attempts, and a
 *   repeated release would fail as not quarantined after releasing.
 *   `at_capacity` is not retried: it is the journal's answer, and the caller
 *   decides what to do with it.
 * - Bounds: each try is aborted after `timeoutMs` (default 30 s), from the
 *   request to the last byte of the answer, and fails as a network failure
 *   would (the outcome is unknown, so only idempotent calls retry it).
 *   `appendBatch` also takes a caller's `signal`: aborting it abandons the
 *   call at once, in flight or between tries, and nothing is retried.
 * - Batching: `append` calls issued together (within `batching.maxDelayMs`,
 *   default the same turn of the event loop) travel as one `append-batch`
 *   request of up to `batching.maxEvents` (default 100) and of at most the
 *   worker's 1 MiB body cap; each caller still gets its own result or error,
 *   in call order. One client sends its requests one after another, so calls
 *   of one ordering key are journaled in call order. With `batching: false`,
 *   each append is its own request, and the requests of different ordering
 *   keys go concurrently; one of a key leaves only once the previous append of
 *   that key (or `appendBatch` holding it) from this client has settled, so
 *   they too are journaled in call order. `appendBatch` keeps the same order
 *   with appends in either mode: it waits for the unsettled appends (and
 *   batches) of its events' keys, and a later append of one of those keys
 *   waits for it; calls sharing no key with it are not held. When the worker refuses a
 *   coalesced request as a whole (413 over its body cap, 403
 *   `forbidden_namespace` for one event's namespace), its appends are sent
 *   again one by one, each for its own answer. `appendBatch` splits a batch
 *   over the body cap the same way, into requests sent one after another
 *   (see {@link HttpJournal.appendBatch}).
 * - The server's clock: the `Date` header of the API's answers keeps an
 *   estimate of it, to the second ({@link HttpJournal.serverNow}), which a
 *   forwarder reads to age its resends by the sink's clock too.
 */
import { waitOutMarks } from "../cause-chain.js";
import {
  checkAckBatch,
  checkAttempts,
  checkBatch,
  checkClaim,
  checkCursorText,
  checkExtend,
  checkListAudit,
  checkListQuarantined,
  checkNack,
  checkOperatorAction,
  checkPrune,
  checkQuarantine,
} from "../journal/arguments.js";
import { BackendError, InvalidArgumentError, JournalError, NotOutstandingError } from "../journal/errors.js";
import { checkCapacity, checkInteger, checkJournalName, checkUsageEvent, orderingKeyText, parseConsumerId, storedUsageEvent } from "../journal/event.js";
import type {
  AckResult,
  AppendResult,
  Attempt,
  AuditPage,
  ListAuditOptions,
  BatchAppendResult,
  Capacity,
  ClaimOptions,
  ConsumerId,
  Delivery,
  DeliveryId,
  DeliveryMode,
  ExtendOptions,
  JournalStats,
  ListQuarantinedOptions,
  NackOptions,
  OperatorActionOptions,
  PoisonReason,
  PruneOptions,
  QuarantinedEvent,
  QuarantinePage,
  UsageEvent,
  UsageJournal,
} from "../journal/types.js";
import { decodeAcks, decodeBatch, decodeError, type WireAckResult, type WireBatchResult, type WireError } from "../journal/wire.js";
import { utf8Length } from "../storage/names.js";
import { MAX_TIMER_DELAY_MS } from "../storage/leaser.js";
import type { AbortSignalLike } from "../storage/options.js";
import { newAbortController } from "../storage/web.js";

/** The part of a `Response` the client reads; the platform's `Response` fits. */
export interface ResponseLike {
  readonly status: number;
  readonly headers: { get(name: string): string | null };
  text(): Promise<string>;
}

/**
 * The `AbortSignal` type the platform's `fetch` takes, read off its own
 * typings (DOM, Node and Workers typings each declare it their own way), so
 * that the platform's `fetch` still fits {@link FetchLike}; where no `fetch`
 * is typed, {@link AbortSignalLike}.
 */
type FetchSignal = typeof globalThis extends { fetch: (input: never, init?: infer I) => unknown } ? (NonNullable<I> extends { signal?: infer S } ? NonNullable<S> : AbortSignalLike) : AbortSignalLike;

/**
 * The part of `fetch` the client calls; the platform's `fetch` fits. `signal`
 * aborts when the try times out or the caller abandons the call; a fetch that
 * ignores it is cut short all the same (the client stops waiting for it).
 */
export type FetchLike = (url: string, init: { method: string; headers: Record<string, string>; body?: string; signal?: FetchSignal }) => Promise<ResponseLike>;

/** An answer of the API that is not a journal error (auth, routing, gateway), kept as the `cause` of a `BackendError`. */
export class HttpError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** The API's error code (`unauthorized`, `unknown_journal`, ...), or `http_<status>` when the body had none. */
  readonly code: string;
  /**
   * How long the server asked to wait before trying again (its `Retry-After`,
   * in ms: seconds or an HTTP date), when the answer had one. The client's
   * retries never come sooner, and it does not retry when this is longer
   * than `retry.maxDelayMs`: the caller then has the wait here.
   */
  readonly retryAfterMs?: number;
  constructor(status: number, code: string, message: string, retryAfterMs?: number) {
    super(`HTTP ${status} ${code}: ${message}`);
    this.name = "HttpError";
    this.status = status;
    this.code = code;
    if (retryAfterMs !== undefined) this.retryAfterMs = retryAfterMs;
  }
}

/** The wait each failed answer's `Retry-After` asked for, by the error made of it (a journal error decoded from the body has no field for it). */
const REQUESTED_WAITS = new WeakMap<object, number>();

/** The wait (ms) the server asked for before the failure's try is repeated, if its answer said. */
function requestedWait(failure: unknown): number | undefined {
  return typeof failure === "object" && failure !== null ? REQUESTED_WAITS.get(failure) : undefined;
}

/**
 * An answer's `Retry-After` in ms from when it was received: delay-seconds
 * (`"30"`) or an HTTP date; absent, malformed or in the past: undefined, or 0.
 */
function retryAfterOf(response: ResponseLike, receivedAt: number): number | undefined {
  let value: string | null;
  try {
    value = response.headers.get("retry-after");
  } catch {
    return undefined;
  }
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d{1,10}$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - receivedAt);
}

/** Retry policy of {@link HttpJournal}. */
export interface RetryOptions {
  /** Tries in all, the first included (default 4; 1 turns retries off; at most 20). */
  readonly attempts?: number;
  /** Delay before the first retry (default 100 ms; an integer from 0 to 2^31 - 1); it doubles each retry. */
  readonly baseDelayMs?: number;
  /** Longest delay between tries (default 5000 ms; an integer from 0 to 2^31 - 1); an answer whose `Retry-After` asks for longer is not retried. */
  readonly maxDelayMs?: number;
}

/** Append batching of {@link HttpJournal}. */
export interface BatchingOptions {
  /** Most events per request (default 100, at most 1000); a request also stays within the worker's 1 MiB body cap. */
  readonly maxEvents?: number;
  /** How long the first queued append waits for company (default 0: the same turn of the event loop; an integer from 0 to 2^31 - 1). */
  readonly maxDelayMs?: number;
}

/** Options of {@link HttpJournal.connect}. */
export interface HttpJournalOptions {
  /** Where the API is, e.g. `"http://localhost:8787"` (the `/v1` routes are under it). */
  readonly baseUrl: string;
  /** The journal's name on the server. */
  readonly journal: string;
  /** A bearer token with the scopes the calls need. */
  readonly token: string;
  /** Default: `globalThis.fetch`. */
  readonly fetch?: FetchLike;
  readonly retry?: RetryOptions;
  /**
   * Longest wait for one try, from sending the request to the last byte of the
   * answer (default 30 000 ms; `0` for none). A try that takes longer is
   * aborted and fails with a retryable `BackendError` whose `cause` is named
   * `TimeoutFailure`; like a network failure, it is retried for idempotent
   * calls only, since the server may have acted on it. Batched appends go
   * out one request after another (for call order), so with `0` a request
   * that never answers also holds every later `append` of this client (with
   * `batching: false`, every later `append` and `appendBatch` of its ordering
   * key).
   */
  readonly timeoutMs?: number;
  /**
   * `false` sends every append on its own: appends of different ordering keys
   * go concurrently, and one of a key waits for the previous one of that key
   * to settle (call order, see the module comment).
   */
  readonly batching?: BatchingOptions | false;
  /** Waits between retries (default `setTimeout`); injectable for tests. A function, else `InvalidArgumentError`. */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Jitter source in [0, 1) (default `Math.random`). A function, else `InvalidArgumentError`. */
  readonly random?: () => number;
}

/** What the constructor needs beyond the options: what `GET /v1/journals/{journal}` answers. */
export interface HttpJournalDescriptor {
  readonly capacity: Capacity;
  readonly mode: DeliveryMode;
}

interface Call<T> {
  readonly method: "GET" | "POST";
  readonly path: string;
  readonly body?: unknown;
  /** Whether repeating the call after an unknown outcome is harmless. */
  readonly idempotent: boolean;
  /** Reads the parsed body of a 2xx answer into the result; throws when it is not the API's answer (see {@link answer}). */
  readonly read: (body: unknown) => T;
  /** Told before a retry that follows a try whose outcome is unknown (it may have committed). */
  readonly onUncertainRetry?: () => void;
}

/** Per-call options of {@link HttpJournal.appendBatch}. */
export interface HttpCallOptions {
  /**
   * Abandons the call when it aborts: the request in flight is aborted, a wait
   * between tries is cut short, nothing is retried, and the call rejects with
   * a retryable `BackendError` whose `cause` is the signal's reason (retryable
   * because the server may or may not have acted on a request in flight).
   */
  readonly signal?: AbortSignalLike | undefined;
}

/**
 * The last append or `appendBatch` of an ordering key not yet settled: a later
 * call of that key waits for `settled` (see `HttpJournal.inKeyOrder`).
 */
interface KeyTail {
  /** Settles (never rejects) when the call does. */
  settled: Promise<void>;
  /** Whether the call is an append in the batching queue already, sent before anything queued after it. */
  queued: boolean;
}

interface QueuedAppend {
  readonly event: UsageEvent;
  /** The UTF-8 length of the event's JSON in an `append-batch` body. */
  readonly bytes: number;
  readonly resolve: (result: AppendResult) => void;
  readonly reject: (error: unknown) => void;
}

const JOURNAL_CODES = new Set(["at_capacity", "conflict", "not_outstanding", "quarantined", "already_acknowledged", "not_quarantined", "backend", "invalid_event", "invalid_consumer_id", "invalid_argument"]);

/** The default timeout of one try (see {@link HttpJournalOptions.timeoutMs}). */
const DEFAULT_TIMEOUT_MS = 30_000;


/**
 * The most bytes of one `append-batch` body (coalesced appends, or a part of
 * an `appendBatch`): the worker's body cap
 * (`AppOptions.maxBodyBytes` of `createApp` in `src/worker/app.ts`, default
 * 1 MiB), over which it answers 413 for the whole batch. A worker run with a
 * smaller cap still answers 413: coalesced appends then go one by one, and
 * `appendBatch` throws it.
 */
const MAX_BATCH_BODY_BYTES = 1024 * 1024;

/** The bytes of an `append-batch` body around its events: `{"events":[` and `]}`. */
const BATCH_BODY_FRAME_BYTES = 13;

/** The UTF-8 length of an event's JSON in an `append-batch` body. */
function wireBytes(event: UsageEvent): number {
  return utf8Length(JSON.stringify(wireEvent(event)));
}

/**
 * How many of the leading events whose JSON is `sizes` UTF-8 bytes long go in
 * one `append-batch` request: at most `maxEvents`, and a body of at most
 * {@link MAX_BATCH_BODY_BYTES}; one at least (when there is one), so an event
 * over the cap on its own still goes, alone (the worker answers it 413).
 */
function requestLength(sizes: Iterable<number>, maxEvents: number): number {
  let count = 0;
  let bytes = BATCH_BODY_FRAME_BYTES;
  for (const size of sizes) {
    if (count === maxEvents) break;
    bytes += size + (count > 0 ? 1 : 0); // a comma before each event but the first
    if (count > 0 && bytes > MAX_BATCH_BODY_BYTES) break;
    count++;
  }
  return count;
}

/** Waits `ms`, or less when `signal` aborts (its timer then goes, so it holds no process open). */
function defaultSleep(ms: number, signal?: AbortSignalLike): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

interface JsonEvent {
  readonly record: UsageEvent["record"];
  readonly observedAt: number;
}

/** Rebuild a canonical, frozen event from its JSON (a stored event: its `observedAt` may predate the bound on new ones). */
function eventOf(json: JsonEvent): UsageEvent {
  return storedUsageEvent({ record: json.record, observedAt: json.observedAt });
}

type JsonQuarantined = Omit<QuarantinedEvent, "event"> & { event: JsonEvent };

function quarantinedOf(item: JsonQuarantined): QuarantinedEvent {
  return { ...item, consumer: parseConsumerId(item.consumer), event: eventOf(item.event) };
}

type JsonDelivery = Omit<Delivery, "event"> & { event: JsonEvent };

function deliveryOf(delivery: JsonDelivery): Delivery {
  return { id: { ...delivery.id, consumer: parseConsumerId(delivery.id.consumer) }, event: eventOf(delivery.event), leaseExpiresAt: delivery.leaseExpiresAt };
}

/**
 * A `UsageJournal` over the isostore HTTP API.
 *
 * @example
 * import { HttpJournal } from "isostore/http";
 * import { createUsageEvent, newRequestId, parseConsumerId } from "isostore";
 *
 * const journal = await HttpJournal.connect({ baseUrl: "http://localhost:8787", journal: "usage", token: process.env.ISOSTORE_TOKEN! });
 * await journal.append(createUsageEvent({
 *   record: { requestId: newRequestId(), namespace: "acme", subject: "user-1", data: { tokens: 42 } },
 *   observedAt: Date.now(),
 * }));
 * const deliveries = await journal.claim(parseConsumerId("billing"), { maxEvents: 100, leaseMs: 30_000, now: Date.now() });
 * await journal.ackBatch(deliveries.map((delivery) => delivery.id));
 */
export class HttpJournal implements UsageJournal {
  readonly name: string;
  readonly capacity: Capacity;
  readonly mode: DeliveryMode;
  private readonly base: string;
  private readonly headers: Record<string, string>;
  private readonly fetcher: FetchLike;
  private readonly attemptsPerCall: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly timeoutMs: number;
  /** Waits between tries; the default one also ends early on the call's signal (an injected one is raced against it). */
  private readonly sleep: (ms: number, signal?: AbortSignalLike) => Promise<void>;
  private readonly random: () => number;
  private readonly batchMax: number;
  private readonly batchDelayMs: number;
  private readonly batching: boolean;
  private queue: QueuedAppend[] = [];
  private flushTimer: ReturnType<typeof setTimeout> | null = null;
  /** Whether {@link HttpJournal.pump} is sending the queue (it takes what is queued meanwhile). */
  private pumping = false;
  /** Per ordering key (its text), the last call holding it not yet settled; forgotten once it settles (see {@link HttpJournal.inKeyOrder}). */
  private readonly keyTails = new Map<string, KeyTail>();
  /** The server's clock minus this client's (`Date.now()`), from the `Date` header of the API's latest dated answer; null before one. */
  private serverOffsetMs: number | null = null;

  /**
   * Ask the server for the journal's capacity and mode, and return a client.
   *
   * @throws BackendError (cause {@link HttpError}) when the journal is unknown or the token refused.
   */
  static async connect(options: HttpJournalOptions): Promise<HttpJournal> {
    const probe = new HttpJournal({ ...options, capacity: { maxEvents: 1, maxDeliveryAttempts: 1, retainAcknowledgedMs: 0, policy: "refuse" }, mode: "telemetry_grade" });
    const info = await probe.send({ method: "GET", path: "", idempotent: true, read: answer<HttpJournalDescriptor>(fields({ capacity: isCapacity, mode: oneOf("billing_grade", "telemetry_grade") })) });
    const journal = new HttpJournal({ ...options, capacity: info.capacity, mode: info.mode });
    journal.serverOffsetMs = probe.serverOffsetMs;
    return journal;
  }

  /**
   * The server's clock now, as far as its answers tell (epoch ms), or null
   * before any answer of the API carried a usable `Date` header.
   *
   * Every answer of the API (a 2xx the client reads as the API's answer, or
   * an error with the API's JSON body; not a proxy's or a portal's page)
   * that carries a `Date` header updates the estimate: the offset between
   * that date and `Date.now()` when the answer came is kept, and
   * `serverNow()` is `Date.now()` plus it. A `Date` header has a resolution
   * of one second (truncated) and is stamped before the answer travels, so
   * the estimate may be behind the server's clock by up to a second plus the
   * answer's transit time, never ahead of it (clock drift aside). The
   * isostore worker sets no `Date` header of its own: answers served through
   * Cloudflare's edge carry one, `wrangler dev` answers carry none (this then
   * stays null), and a browser reads it on a cross-origin answer only when
   * the server exposes it (`Access-Control-Expose-Headers: date`).
   *
   * The forwarder (`isostore/sync`) reads it to age a resend by the sink's
   * clock as well as its own: a device clock behind the server's would
   * otherwise hide a resend that the server's retention window, counted on
   * its own clock, no longer recognises (see `ForwarderSink.serverNow`).
   */
  serverNow(): number | null {
    return this.serverOffsetMs === null ? null : Date.now() + this.serverOffsetMs;
  }

  /** Keep the server's clock offset from an answer of the API's `Date` header (`receivedAt`: `Date.now()` when its headers came). */
  private noteServerDate(response: ResponseLike, receivedAt: number): void {
    let value: string | null;
    try {
      value = response.headers.get("date");
    } catch {
      return;
    }
    if (typeof value !== "string") return;
    const date = Date.parse(value);
    if (Number.isFinite(date)) this.serverOffsetMs = date - receivedAt;
  }

  /** A client for a journal whose capacity and mode are already known (else use {@link HttpJournal.connect}). */
  constructor(options: HttpJournalOptions & HttpJournalDescriptor) {
    this.name = checkJournalName(options.journal);
    this.capacity = checkCapacity(options.capacity);
    if (options.mode !== "billing_grade" && options.mode !== "telemetry_grade") throw new InvalidArgumentError("mode", "must be billing_grade or telemetry_grade");
    this.mode = options.mode;
    let url: URL;
    try {
      url = new URL(options.baseUrl);
    } catch {
      throw new InvalidArgumentError("baseUrl", "must be an absolute http(s) URL");
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new InvalidArgumentError("baseUrl", "must be an absolute http(s) URL");
    this.base = `${url.origin}${url.pathname.replace(/\/+$/, "")}/v1/journals/${this.name}`;
    if (typeof options.token !== "string" || !/^[\x21-\x7e]{1,512}$/.test(options.token)) throw new InvalidArgumentError("token", "must be 1 to 512 printable ASCII characters");
    this.headers = { authorization: `Bearer ${options.token}`, accept: "application/json" };
    const platformFetch = (globalThis as { fetch?: FetchLike }).fetch;
    const fetcher = options.fetch ?? platformFetch;
    if (!fetcher) throw new InvalidArgumentError("fetch", "no fetch given and none on globalThis");
    this.fetcher = options.fetch ? fetcher : (url, init) => platformFetch!(url, init);
    const retry = options.retry ?? {};
    this.attemptsPerCall = retry.attempts ?? 4;
    if (!Number.isSafeInteger(this.attemptsPerCall) || this.attemptsPerCall < 1 || this.attemptsPerCall > 20) throw new InvalidArgumentError("retry.attempts", "must be an integer from 1 to 20");
    // Delays are checked here, not where they are used: a bad one would fail a later call untyped, or fire a timer at once.
    this.baseDelayMs = checkInteger("retry.baseDelayMs", retry.baseDelayMs ?? 100, 0, MAX_TIMER_DELAY_MS);
    this.maxDelayMs = checkInteger("retry.maxDelayMs", retry.maxDelayMs ?? 5000, 0, MAX_TIMER_DELAY_MS);
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!Number.isSafeInteger(this.timeoutMs) || this.timeoutMs < 0 || this.timeoutMs > MAX_TIMER_DELAY_MS) throw new InvalidArgumentError("timeoutMs", `must be an integer from 0 (none) to ${MAX_TIMER_DELAY_MS}`);
    const sleep = options.sleep;
    if (sleep !== undefined && typeof sleep !== "function") throw new InvalidArgumentError("sleep", "must be a function of a delay in ms");
    // An injected sleep is called as documented, with the delay alone.
    this.sleep = sleep ? (ms) => sleep(ms) : defaultSleep;
    if (options.random !== undefined && typeof options.random !== "function") throw new InvalidArgumentError("random", "must be a function answering a number in [0, 1)");
    this.random = options.random ?? Math.random;
    this.batching = options.batching !== false;
    const batching = options.batching === false ? {} : (options.batching ?? {});
    this.batchMax = batching.maxEvents ?? 100;
    if (!Number.isSafeInteger(this.batchMax) || this.batchMax < 1 || this.batchMax > 1000) throw new InvalidArgumentError("batching.maxEvents", "must be an integer from 1 to 1000");
    this.batchDelayMs = checkInteger("batching.maxDelayMs", batching.maxDelayMs ?? 0, 0, MAX_TIMER_DELAY_MS);
  }

  /**
   * One API call with the retry policy; answers what `call.read` makes of the
   * answer, or throws the typed error. An abort of `signal` ends the call at
   * once, before a try, during one or during the wait between two, and is
   * never retried.
   */
  private async send<T>(call: Call<T>, signal?: AbortSignalLike): Promise<T> {
    let delay = this.baseDelayMs;
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) throw abandoned(call, signal);
      let failure: unknown;
      let mayRetry: boolean;
      try {
        return await this.once(call, signal);
      } catch (error) {
        failure = error;
        mayRetry = !signal?.aborted && retryableFailure(error, call.idempotent);
      }
      if (!mayRetry || attempt >= this.attemptsPerCall) throw failure;
      if (!refusedBeforeCommit(failure as JournalError)) call.onUncertainRetry?.();
      // Never sooner than the server asked (a 429 or 503 with Retry-After); and not at all when it asked
      // for longer than this client waits between tries: the caller has the wait on the error.
      const asked = requestedWait(failure);
      if (asked !== undefined && asked > this.maxDelayMs) throw failure;
      const wait = this.sleep(Math.max(asked ?? 0, Math.min(this.maxDelayMs, delay) * (0.5 + this.random() / 2)), signal);
      try {
        await (signal ? untilAborted(wait, signal) : wait);
      } catch (error) {
        if (signal?.aborted) throw abandoned(call, signal);
        throw error;
      }
      delay *= 2;
    }
  }

  /**
   * One try: the request and the whole answer, bounded by `timeoutMs` and by
   * the caller's `signal`. Whatever stops it before the answer is read (the
   * network, the timeout, the caller) comes back as a retryable `BackendError`
   * telling which (see {@link retryableFailure} for what is retried). A 2xx
   * answer that `call.read` refuses is an `invalid_answer`, not retried: the
   * server that sent it is not the API, or not the one this client speaks to.
   */
  private async once<T>(call: Call<T>, signal?: AbortSignalLike): Promise<T> {
    const headers = call.body === undefined ? this.headers : { ...this.headers, "content-type": "application/json" };
    const controller = newAbortController();
    const stop = controller.signal;
    let timedOut: TimeoutFailure | null = null;
    const timer =
      this.timeoutMs === 0
        ? null
        : setTimeout(() => {
            timedOut = new TimeoutFailure(this.timeoutMs);
            controller.abort(timedOut);
          }, this.timeoutMs);
    const onAbort = () => controller.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    if (signal?.aborted) onAbort();
    /** The typed error of a try stopped at `stage`. */
    const failed = (error: unknown, stage: string): BackendError => {
      if (signal?.aborted) return abandoned(call, signal);
      if (timedOut !== null) return new BackendError(`the request to ${call.path || "/"} got no answer within ${this.timeoutMs} ms`, { cause: timedOut, retryable: true });
      return new BackendError(`${stage} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: new NetworkFailure(error), retryable: true });
    };
    let response: ResponseLike;
    let receivedAt = 0;
    let text: string;
    try {
      try {
        const init = { method: call.method, headers, signal: stop as unknown as FetchSignal, ...(call.body === undefined ? {} : { body: JSON.stringify(call.body) }) };
        response = await untilAborted(this.fetcher(`${this.base}${call.path}`, init), stop);
        receivedAt = Date.now();
      } catch (error) {
        throw failed(error, `the request to ${call.path || "/"}`);
      }
      try {
        // The headers are in, but the body may still break off (a reset connection): as unknown an outcome as a failed fetch.
        text = await untilAborted(response.text(), stop);
      } catch (error) {
        throw failed(error, `reading the answer (HTTP ${response.status}) to ${call.path || "/"}`);
      }
    } finally {
      if (timer !== null) clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
    let body: unknown = undefined;
    try {
      body = text === "" ? undefined : JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (response.status >= 200 && response.status < 300) {
      if (body === undefined) throw new BackendError(`the server answered ${response.status} without a JSON body`, { cause: new HttpError(response.status, "invalid_answer", text.slice(0, 200)) });
      let result: T;
      try {
        result = call.read(body);
      } catch {
        throw new BackendError(`the server answered ${response.status} to ${call.path || "/"} with a body that is not the API's answer`, { cause: new HttpError(response.status, "invalid_answer", text.slice(0, 200)) });
      }
      this.noteServerDate(response, receivedAt);
      return result;
    }
    // Only the API's own answers tell the server's clock, not a proxy's or a portal's page.
    if (isApiError(body)) this.noteServerDate(response, receivedAt);
    throw errorFromAnswer(response.status, body, retryAfterOf(response, receivedAt));
  }

  /**
   * Append one event (see `UsageJournal.append`). With batching, it is queued
   * and sent with the appends issued around it (see the module comment); it
   * resolves only with the server's own answer for this event.
   */
  async append(event: UsageEvent): Promise<AppendResult> {
    const checked = checkUsageEvent(event);
    const keys = [orderingKeyText(checked)];
    if (!this.batching) return this.inKeyOrder(keys, false, () => this.sendOne(checked));
    const bytes = wireBytes(checked);
    return this.inKeyOrder(keys, true, (tail) =>
      new Promise<AppendResult>((resolve, reject) => {
        this.queue.push({ event: checked, bytes, resolve, reject });
        tail.queued = true;
        // A running pump takes it after the request in flight.
        if (this.pumping) return;
        if (this.queue.length >= this.batchMax) this.flush();
        else this.flushTimer ??= setTimeout(() => this.flush(), this.batchDelayMs);
      }),
    );
  }

  /**
   * Run `start` once every unsettled earlier call of this client holding one
   * of the ordering `keys` has settled (at once when there is none), and make
   * it the call later ones of those keys wait for: calls of one key are
   * journaled in call order, whatever their requests' timing (a request in
   * flight may be overtaken by a later one). A call that joins the batching
   * queue (`joinsQueue`) need not wait for appends in the queue already: the
   * queue is sent in order. A key is forgotten once its last call settles, so
   * memory follows the calls in flight, not the keys ever used. `start` gets
   * the call's tail, to mark it queued. An abort of `signal` ends the wait
   * (an `appendBatch` abandoned by its caller).
   */
  private inKeyOrder<T>(keys: readonly string[], joinsQueue: boolean, start: (tail: KeyTail) => Promise<T>, signal?: AbortSignalLike): Promise<T> {
    const unique = [...new Set(keys)];
    const before = new Set<KeyTail>();
    for (const key of unique) {
      const tail = this.keyTails.get(key);
      if (tail !== undefined && !(joinsQueue && tail.queued)) before.add(tail);
    }
    const tail: KeyTail = { settled: Promise.resolve(), queued: false };
    let result: Promise<T>;
    if (before.size === 0) result = start(tail);
    else {
      let waited: Promise<unknown> = Promise.all([...before].map((earlier) => earlier.settled));
      // The wait never fails: it rejects only when the caller abandons the call (`appendBatch`), as a wait between tries would.
      if (signal) {
        waited = untilAborted(waited, signal).catch(() => {
          throw abandoned({ path: "/append-batch" }, signal);
        });
      }
      result = waited.then(() => start(tail));
    }
    // Settled once the call settled and everything it waited for did too: a call abandoned while it waited
    // (its caller's signal) settles early, and a later call of its keys must still not overtake the earlier ones.
    tail.settled = Promise.all([
      result.then(
        () => undefined,
        () => undefined,
      ),
      ...[...before].map((earlier) => earlier.settled),
    ]).then(() => undefined);
    for (const key of unique) this.keyTails.set(key, tail);
    void tail.settled.then(() => {
      for (const key of unique) if (this.keyTails.get(key) === tail) this.keyTails.delete(key);
    });
    return result;
  }

  private async sendOne(event: UsageEvent): Promise<AppendResult> {
    return this.send({ method: "POST", path: "/append", body: { event: wireEvent(event) }, idempotent: true, read: answer(fields({ result: isAppendResult }), (body: { result: AppendResult }) => body.result) });
  }

  /** Start sending what the append queue holds, unless it is being sent already. */
  private flush(): void {
    if (this.flushTimer !== null) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    if (!this.pumping) void this.pump();
  }

  /**
   * Send the append queue, one request after another until it is empty: the
   * next request leaves once the previous one is answered, so a later call of
   * an ordering key is never journaled before an earlier one (concurrent
   * requests may arrive in any order). Appends queued meanwhile join the next
   * request.
   */
  private async pump(): Promise<void> {
    this.pumping = true;
    try {
      while (this.queue.length > 0) await this.sendQueued(this.takeRequest());
    } finally {
      this.pumping = false;
    }
  }

  /** The appends of the next request: the oldest queued, up to `batching.maxEvents` and {@link MAX_BATCH_BODY_BYTES} (one at least). */
  private takeRequest(): QueuedAppend[] {
    return this.queue.splice(0, requestLength(this.queue.map((entry) => entry.bytes), this.batchMax));
  }

  /**
   * Send one request's appends and settle each caller (never rejects). A lone
   * event goes to `/append`, so a refused append changes nothing at all, as
   * with the core journal; in a batch, a refused event is refused alone and
   * the others' transaction still commits. A batch the worker refuses as a
   * whole, for one event's sake (413 over the body cap, 403 `forbidden_namespace` for a namespace
   * the token may not append to), is sent again one event at a time, so the
   * others are not refused with it.
   */
  private async sendQueued(taken: readonly QueuedAppend[]): Promise<void> {
    const one = (entry: QueuedAppend) => this.sendOne(entry.event).then(entry.resolve, entry.reject);
    if (taken.length === 1) return one(taken[0]!);
    let results: BatchAppendResult[];
    try {
      results = await this.sendBatch(taken.map((entry) => entry.event));
    } catch (error) {
      if (refusedWhole(error)) for (const entry of taken) await one(entry);
      else for (const entry of taken) entry.reject(error);
      return;
    }
    taken.forEach((entry, index) => {
      const result = results[index]!;
      if (result.status === "rejected") entry.reject(result.error);
      else entry.resolve(result);
    });
  }

  private async sendBatch(events: readonly UsageEvent[], signal?: AbortSignalLike): Promise<BatchAppendResult[]> {
    const read = answer(fields({ results: listOf(isBatchResult, events.length) }), (body: { results: WireBatchResult[] }) => decodeBatch(body.results));
    return this.send({ method: "POST", path: "/append-batch", body: { events: events.map(wireEvent) }, idempotent: true, read }, signal);
  }

  /**
   * Append many events; one result per event, in order (see
   * `UsageJournal.appendBatch`). The events go in one `append-batch` request,
   * or, when their body would be over the worker's 1 MiB body cap, in several:
   * consecutive parts within the cap (as the queued appends are split), sent
   * one after another, each answered before the next leaves, so an ordering
   * key's events are still journaled in order. An event over the cap on its
   * own goes alone, and the worker refuses it with 413.
   *
   * Against this client's other appends, the batch keeps call order per
   * ordering key: it leaves once the appends and batches of its events' keys
   * called before it have settled, and appends or batches of those keys called
   * after it wait for it to settle (calls of other keys are not held).
   *
   * Each request is its own transaction on the server, so a batch sent in
   * several is not journaled at once: per event, nothing changes (each is
   * accepted or refused on its own, as in one request), but when a part
   * fails, the call throws that part's error and the parts before it stay
   * journaled, the parts after it are not sent. Sending the batch again is
   * safe: appends are idempotent on their request id, and the journaled ones
   * answer `already_present`.
   *
   * @param options.signal abandons the call (see {@link HttpCallOptions}).
   * @throws BackendError with the signal's reason as `cause` once `signal` aborts.
   * @throws BackendError (cause {@link HttpError}) when the worker refuses a
   *   part as a whole: 413 over its body cap (an event over it alone, or a
   *   worker run with a smaller cap), 403 `forbidden_namespace` for one of its
   *   events' namespaces; the caller may split the batch and send it again.
   */
  async appendBatch(events: readonly UsageEvent[], options?: HttpCallOptions): Promise<BatchAppendResult[]> {
    const signal = checkSignal(options);
    const checked = checkBatch(events);
    const valid = checked.filter((event): event is UsageEvent => !(event instanceof JournalError));
    const sizes = valid.map(wireBytes);
    const send = async () => {
      const sent: BatchAppendResult[] = [];
      // At least one request, even when nothing in it is valid: the journal's batch still runs (its opportunistic pruning included).
      do {
        const count = requestLength(sizes.slice(sent.length), Infinity);
        sent.push(...(await this.sendBatch(valid.slice(sent.length, sent.length + count), signal)));
      } while (sent.length < valid.length);
      return sent;
    };
    // After the unsettled appends and batches of its keys, before later ones (call order per key, see the module comment).
    const sent = await this.inKeyOrder(valid.map(orderingKeyText), false, send, signal);
    let next = 0;
    return checked.map((event) => (event instanceof JournalError ? { status: "rejected", error: event } : sent[next++]!));
  }

  async claim(consumer: ConsumerId, options: ClaimOptions): Promise<Delivery[]> {
    const { maxBytes, ...args } = checkClaim(consumer, options);
    const read = answer(fields({ deliveries: listOf(isDelivery) }), (body: { deliveries: JsonDelivery[] }) => body.deliveries.map(deliveryOf));
    // No bound is sent as none (`Infinity` is not JSON); the server caps every claim's bytes anyway.
    const body = maxBytes === Infinity ? args : { ...args, maxBytes };
    return this.send({ method: "POST", path: "/claim", body, idempotent: false, read });
  }

  /**
   * Acknowledge many deliveries in one request; one result per delivery, in
   * order (a failed ack, e.g. `not_outstanding`, does not stop the others).
   */
  async ackBatch(deliveries: readonly DeliveryId[]): Promise<AckResult[]> {
    const checked = checkAckBatch(deliveries);
    const valid = checked.filter((delivery): delivery is DeliveryId => !(delivery instanceof JournalError));
    let sent: AckResult[] = [];
    if (valid.length > 0) {
      const read = answer(fields({ results: listOf(isAckResult, valid.length) }), (body: { results: WireAckResult[] }) => decodeAcks(body.results));
      let uncertain = false;
      sent = await this.send({ method: "POST", path: "/ack", body: { deliveries: valid }, idempotent: true, read, onUncertainRetry: () => (uncertain = true) });
      // A retry after a try that may have committed: an event no longer stored was pruned (only once every
      // consumer, this one included, finished it, so this ack committed then) or dropped; either way the
      // consumer is done with it. Ack is idempotent only while the event is stored, so that answer is not
      // the ack's: it is reported acknowledged, not `not_outstanding` (which reads as "the lease was lost").
      if (uncertain) sent = sent.map((result) => (!result.ok && result.error instanceof NotOutstandingError && !result.error.eventStored ? { ok: true } : result));
    }
    let next = 0;
    return checked.map((delivery) => (delivery instanceof JournalError ? { ok: false, error: delivery } : sent[next++]!));
  }

  async ack(delivery: DeliveryId): Promise<void> {
    const [result] = await this.ackBatch([delivery]);
    if (result && !result.ok) throw result.error;
  }

  async quarantine(delivery: DeliveryId, reason: PoisonReason): Promise<void> {
    const args = checkQuarantine(delivery, reason);
    await this.send({ method: "POST", path: "/quarantine", body: args, idempotent: true, read: done });
  }

  async extend(delivery: DeliveryId, options: ExtendOptions): Promise<{ leaseExpiresAt: number }> {
    const args = checkExtend(delivery, options);
    const read = answer(fields({ leaseExpiresAt: isNatural }), (body: { leaseExpiresAt: number }) => ({ leaseExpiresAt: body.leaseExpiresAt }));
    return this.send({ method: "POST", path: "/extend", body: args, idempotent: false, read });
  }

  async nack(delivery: DeliveryId, options: NackOptions): Promise<void> {
    const args = checkNack(delivery, options);
    await this.send({ method: "POST", path: "/nack", body: args, idempotent: false, read: done });
  }

  async stats(consumer: ConsumerId): Promise<JournalStats> {
    const id = parseConsumerId(consumer);
    return this.send({ method: "GET", path: `/consumers/${id}/stats`, idempotent: true, read: answer<JournalStats>(isStats) });
  }

  async attempts(consumer: ConsumerId, requestId: string): Promise<Attempt[]> {
    const args = checkAttempts(consumer, requestId);
    const read = answer(fields({ attempts: listOf(isAttempt) }), (body: { attempts: Attempt[] }) => body.attempts);
    return this.send({ method: "GET", path: `/consumers/${args.consumer}/attempts/${args.requestId}`, idempotent: true, read });
  }

  async listQuarantined(consumer: ConsumerId, options: ListQuarantinedOptions = {}): Promise<QuarantinePage> {
    const args = checkListQuarantined(consumer, options);
    const after = checkCursorText(args.after);
    const query = new URLSearchParams({ limit: String(args.limit) });
    if (after !== null) query.set("after", after);
    if (options.query !== undefined) query.set("query", options.query);
    if (args.order !== "oldest") query.set("order", args.order);
    const read = answer(isPageOf(isQuarantined), (page: { items: JsonQuarantined[]; nextCursor: string | null }) => ({ items: page.items.map(quarantinedOf), nextCursor: page.nextCursor }));
    return this.send({ method: "GET", path: `/consumers/${args.consumer}/quarantined?${query.toString()}`, idempotent: true, read });
  }

  private async operate(action: "release" | "discard", consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<void> {
    const args = checkOperatorAction(action, consumer, requestId, options);
    // By default the server records the token's name as the actor, whatever is sent (see `AppOptions.auditActor`).
    const body = args.actor === null ? { now: args.now } : { now: args.now, actor: args.actor };
    await this.send({ method: "POST", path: `/consumers/${args.consumer}/quarantined/${args.requestId}/${action}`, body, idempotent: false, read: done });
  }

  release(consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<void> {
    return this.operate("release", consumer, requestId, options);
  }

  discard(consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<void> {
    return this.operate("discard", consumer, requestId, options);
  }

  async listAudit(options: ListAuditOptions = {}): Promise<AuditPage> {
    const args = checkListAudit(options);
    const after = checkCursorText(args.after);
    const query = new URLSearchParams({ limit: String(args.limit) });
    if (after !== null) query.set("after", after);
    if (args.requestId !== undefined) query.set("requestId", args.requestId);
    return this.send({ method: "GET", path: `/audit?${query.toString()}`, idempotent: true, read: answer<AuditPage>(isPageOf(isAuditEntry)) });
  }

  /**
   * Prune (see `UsageJournal.prune`). The server prunes at the earlier of
   * `now` and its own clock: pruning forgets request ids, so a client whose
   * clock runs ahead of the server's does not forget them before their
   * window has passed by the server's clock.
   */
  async prune(options: PruneOptions): Promise<{ pruned: number }> {
    const args = checkPrune(options);
    const read = answer(fields({ pruned: isNatural }), (body: { pruned: number }) => ({ pruned: body.pruned }));
    return this.send({ method: "POST", path: "/prune", body: args, idempotent: true, read });
  }
}

/** A fetch, or the read of its answer, that threw (the request may or may not have reached the server). */
class NetworkFailure extends Error {
  constructor(cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.name = "NetworkFailure";
  }
}

/** A try that got no whole answer within `timeoutMs` (the request may or may not have reached the server). */
class TimeoutFailure extends Error {
  readonly timeoutMs: number;
  constructor(timeoutMs: number) {
    super(`no answer within ${timeoutMs} ms`);
    this.name = "TimeoutFailure";
    this.timeoutMs = timeoutMs;
  }
}

/** The error of a call its caller abandoned: `cause` is the signal's reason; retryable, as a request in flight may or may not have been acted on. */
function abandoned(call: Pick<Call<unknown>, "path">, signal: AbortSignalLike): BackendError {
  return new BackendError(`the request to ${call.path || "/"} was abandoned by the caller`, { cause: signal.reason, retryable: true });
}

/** The signal of a call's options, refused (like every bad argument, before the network) unless it looks like an `AbortSignal`. */
function checkSignal(options: HttpCallOptions | undefined): AbortSignalLike | undefined {
  if (options === undefined) return undefined;
  if (typeof options !== "object" || options === null) throw new InvalidArgumentError("options", "must be an object");
  const signal = options.signal;
  if (signal === undefined) return undefined;
  if (typeof signal !== "object" || signal === null || typeof signal.aborted !== "boolean" || typeof signal.addEventListener !== "function") {
    throw new InvalidArgumentError("options.signal", "must be an AbortSignal");
  }
  return signal;
}

/**
 * Settles as `work` does, or rejects with the signal's reason as soon as it
 * aborts, whichever comes first: a fetch, a body read or a sleep that ignores
 * its signal still cannot outlast a timeout or an abort.
 */
function untilAborted<T>(work: Promise<T>, signal: AbortSignalLike): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason); // eslint-disable-line @typescript-eslint/prefer-promise-reject-errors -- any reason; the callers turn it into a typed error
    if (signal.aborted) onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    void work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

function wireEvent(event: UsageEvent): JsonEvent {
  return { record: event.record, observedAt: event.observedAt };
}

/**
 * Whether a batch failed as a whole for what may be one event's sake: 413
 * (the body over the worker's cap) or 403 `forbidden_namespace` (a namespace
 * the token may not append to). Both are final for the batch, not for each of
 * its events; a token refused outright (401, 403 `forbidden`) is refused for
 * every event, so sending them one by one would only repeat the refusal.
 */
function refusedWhole(error: unknown): boolean {
  return error instanceof BackendError && error.cause instanceof HttpError && (error.cause.status === 413 || error.cause.code === "forbidden_namespace");
}

// --- the shapes of the API's answers ----------------------------------------------------------
//
// A 2xx answer is checked before it is used: one from something that is not the
// API (a misrouted `baseUrl`, a proxy, a mock) must not pass for a result. An
// append answered `{}` would otherwise resolve as if the event were journaled.
// The checks follow `src/worker/schemas.ts`; numbers are non-negative safe
// integers (positions, counts, epoch ms), and events are rebuilt (and so
// checked) by `createUsageEvent`.

/** Whether one value of an answer has its expected shape. */
type Check = (value: unknown) => boolean;

const isNatural: Check = (value) => Number.isSafeInteger(value) && (value as number) >= 0;
const isText: Check = (value) => typeof value === "string";
const oneOf =
  (...values: readonly unknown[]): Check =>
  (value) =>
    values.includes(value);
const anyOf =
  (...checks: readonly Check[]): Check =>
  (value) =>
    checks.some((check) => check(value));
/** An object (not an array) whose named fields pass their checks; other fields may be there. */
const fields =
  (shape: Readonly<Record<string, Check>>): Check =>
  (value) =>
    typeof value === "object" && value !== null && !Array.isArray(value) && Object.entries(shape).every(([name, check]) => check((value as Record<string, unknown>)[name]));
/** An array whose items pass `item`, of exactly `length` items when given. */
const listOf =
  (item: Check, length?: number): Check =>
  (value) =>
    Array.isArray(value) && (length === undefined || value.length === length) && value.every(item);

const isReason = oneOf("malformed", "rejected", "attempts_exhausted");
const isCapacity = fields({ maxEvents: isNatural, maxDeliveryAttempts: isNatural, retainAcknowledgedMs: isNatural, policy: oneOf("refuse", "drop_oldest") });
const isAppendResult = fields({ status: oneOf("accepted", "already_present"), position: isNatural });
/** A journal error as data: any object, since `decodeError` trusts none of its fields. */
const isWireError = fields({});
const isBatchResult = anyOf(isAppendResult, fields({ status: oneOf("rejected"), error: isWireError }));
const isAckResult = anyOf(fields({ ok: oneOf(true) }), fields({ ok: oneOf(false), error: isWireError }));
const isJsonEvent = fields({ record: fields({}), observedAt: isNatural });
const isDelivery = fields({ id: fields({ consumer: isText, event: isText, attempt: isNatural }), event: isJsonEvent, leaseExpiresAt: isNatural });
const isOutcome = anyOf(
  oneOf(null),
  fields({ kind: oneOf("acked", "expired"), at: isNatural }),
  fields({ kind: oneOf("nacked"), at: isNatural, error: isText }),
  fields({ kind: oneOf("quarantined"), at: isNatural, reason: isReason }),
);
const isAttempt = fields({ attempt: isNatural, claimedAt: isNatural, leaseExpiresAt: isNatural, outcome: isOutcome });
const isStats = fields({ pending: isNatural, inFlight: isNatural, quarantined: isNatural, oldestPendingAgeMs: anyOf(isNatural, oneOf(null)), dropped: isNatural, capacity: isCapacity });
const isQuarantined = fields({ consumer: isText, event: isJsonEvent, position: isNatural, reason: isReason, quarantinedAt: isNatural, attempts: listOf(isAttempt) });
const isAuditEntry = fields({ seq: isNatural, at: isNatural, action: oneOf("release", "discard"), consumer: isText, requestId: isText, reason: isReason, actor: anyOf(isText, oneOf(null)) });
const isPageOf = (item: Check) => fields({ items: listOf(item), nextCursor: anyOf(isText, oneOf(null)) });

/**
 * The `read` of a call whose answer is of `shape`: `convert` makes the result
 * of it (by default the body itself). It throws on any other answer, and so
 * does `convert` on what it cannot rebuild (an event, a consumer id): the try
 * then fails as `invalid_answer` (see `HttpJournal.once`).
 */
function answer<B, T = B>(shape: Check, convert: (body: B) => T = (body) => body as unknown as T): (body: unknown) => T {
  return (body) => {
    if (!shape(body)) throw new TypeError("not the API's answer");
    return convert(body as B);
  };
}

/** The `read` of a call answered `{}`. */
const done = answer<void>(fields({}), () => undefined);

/** Whether an error answer's body is the API's JSON error (`{ "error": { "code": string, ... } }`). */
function isApiError(body: unknown): boolean {
  const error = typeof body === "object" && body !== null ? (body as { error?: unknown }).error : undefined;
  return typeof error === "object" && error !== null && typeof (error as { code?: unknown }).code === "string";
}

/** The typed error of a non-2xx answer (`retryAfterMs`: its `Retry-After`, remembered for the retries and kept on an {@link HttpError}). */
function errorFromAnswer(status: number, body: unknown, retryAfterMs?: number): JournalError {
  const made = errorOfAnswer(status, body, retryAfterMs);
  if (retryAfterMs !== undefined) REQUESTED_WAITS.set(made, retryAfterMs);
  return made;
}

function errorOfAnswer(status: number, body: unknown, retryAfterMs: number | undefined): JournalError {
  const error = typeof body === "object" && body !== null ? (body as { error?: unknown }).error : undefined;
  const fields = typeof error === "object" && error !== null ? (error as Record<string, unknown>) : {};
  const code = typeof fields["code"] === "string" ? fields["code"] : `http_${status}`;
  const message = typeof fields["message"] === "string" ? fields["message"] : `the server answered ${status}`;
  if (JOURNAL_CODES.has(code)) return decodeError(error as WireError);
  if (code === "invalid_request" || code === "invalid_json") {
    const detail = fields["fields"] as { argument?: unknown } | undefined;
    return new InvalidArgumentError(typeof detail?.argument === "string" ? detail.argument : "request", message);
  }
  // Auth, routing or a gateway: not a journal answer. 429 and 5xx may pass.
  const retryable = status === 429 || status === 502 || status === 503 || status === 504;
  return new BackendError(`HTTP ${status} ${code}: ${message}`, { cause: new HttpError(status, code, message, retryAfterMs), retryable });
}

/** Whether a failed try may be repeated (see the module comment). */
function retryableFailure(error: unknown, idempotent: boolean): boolean {
  if (!(error instanceof JournalError) || !error.retryable || error.code !== "backend") return false;
  return idempotent || refusedBeforeCommit(error);
}

/**
 * Whether a retryable `backend` failure says the server committed nothing, so
 * that even a call that is not idempotent may be repeated: a 429 (a rate
 * limit refuses the request before it is served), or a journal `backend`
 * error carrying the marks of a full or overloaded storage object (the
 * worker's 503 for a refusal before any commit, `cause` in its body). Not a
 * network failure or timeout (the request may have been served), not a
 * gateway's 502, 503 or 504 (it may have passed the request on), and not a
 * journal `backend` error without those marks: a lost reply between the
 * worker and its Durable Object is one, and it may come after the commit.
 */
function refusedBeforeCommit(error: JournalError): boolean {
  const cause = error.cause;
  if (cause instanceof HttpError) return cause.status === 429;
  if (cause instanceof NetworkFailure || cause instanceof TimeoutFailure) return false;
  return waitOutMarks(error) !== undefined;
}
