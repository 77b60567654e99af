/**
 * The offline-first example: usage events are journaled in IndexedDB (strict
 * durability, so an accepted event survives a crash or a closed tab) and a
 * forwarder drains that journal into the worker's `usage` journal over HTTP
 * whenever the browser is online. One tab forwards at a time (Web Locks); the
 * others stand by and take over when it closes.
 *
 * The sink is made with `HttpJournal.connect`, which asks the worker for the
 * journal's mode and capacity: the forwarder refuses a telemetry-grade sink
 * for this billing-grade outbox, and reports a resend the worker takes as
 * new after its retention window (see the README's forwarding section).
 * A token entered while the forwarder runs replaces it: the forwarder is
 * stopped and started again with a sink connected with the new token (a
 * refused token, 401 or 403, is waited out, not charged to the events, so
 * they go once the right one is entered). The count of events waiting in the
 * outbox is read again every few seconds, since another tab may be the one
 * forwarding them.
 *
 * `window.isostoreExample` exposes the same actions to tests and the console.
 */
import { indexedDbEngine } from "../../adapters/indexeddb/index.js";
import { HttpJournal } from "../../src/http/index.js";
import { BILLING_GRADE, createJournal, createUsageEvent, newRequestId, parseConsumerId, type JournalStats, type QuarantinedEvent, type UsageJournal } from "../../src/index.js";
import { browserOnline, createForwarder, type Forwarder, type ForwarderProgress } from "../../src/sync/index.js";

const TOKEN_KEY = "isostore-example-token";
/** How often the outbox's waiting count is read again (another tab may be forwarding it). */
const WAITING_REFRESH_MS = 2_000;
const consumer = parseConsumerId("forwarder");
const source: UsageJournal = createJournal(indexedDbEngine({ name: "isostore-example", durability: "strict" }), { name: "outbox", capacity: BILLING_GRADE });

let forwarder: Forwarder | null = null;
/** The token the running forwarder's sink was connected with. */
let forwarderToken: string | null = null;
let recorded = 0;
/** The worker's journal, once connected, with the token it was connected with. */
let connected: { token: string; journal: HttpJournal } | null = null;
/** Starts, restarts and stops of the forwarder, one after another (a sign-in during a start waits for it). */
let lifecycle: Promise<void> = Promise.resolve();
/** Why the last attempt to connect failed (shown until the forwarder runs). */
let connectError: string | null = null;
let connectRetry: ReturnType<typeof setTimeout> | null = null;
let connectFailures = 0;

function element<T extends HTMLElement>(id: string): T {
  const found = document.getElementById(id);
  if (!found) throw new Error(`the page has no #${id}`);
  return found as T;
}

/** Append `count` usage events for `subject`, each under a fresh request id. */
async function record(count: number, subject = element<HTMLInputElement>("subject").value || "user-1"): Promise<string[]> {
  const ids: string[] = [];
  const events = [];
  for (let i = 0; i < count; i++) {
    const requestId = newRequestId();
    ids.push(requestId);
    events.push(createUsageEvent({ record: { requestId, namespace: "example", subject, data: { clicks: 1 } }, observedAt: Date.now() }));
  }
  for (let start = 0; start < events.length; start += 500) {
    const results = await source.appendBatch(events.slice(start, start + 500));
    const refused = results.find((result) => result.status === "rejected");
    if (refused && refused.status === "rejected") throw refused.error;
  }
  recorded += count;
  refreshWaiting();
  return ids;
}

/**
 * Record an event whose request id the worker already holds with other data:
 * the worker answers `conflict` and the forwarder quarantines it here as `rejected`.
 */
async function recordConflict(): Promise<void> {
  const requestId = newRequestId();
  const record = (clicks: number) => createUsageEvent({ record: { requestId, namespace: "example", subject: "conflict", data: { clicks } }, observedAt: Date.now() });
  // The twin goes straight to the worker first, so the worker holds the id with other data when ours arrives.
  const target = await sink();
  if (!target) throw new Error("sign in first");
  await target.appendBatch([record(2)]);
  await source.append(record(1));
  recorded += 1;
  refreshWaiting();
}

/**
 * The worker's `usage` journal, connected with the signed-in token (null
 * before sign-in). `connect` reads the journal's mode and capacity from the
 * worker rather than assuming them: the forwarder checks both.
 */
async function sink(token = sessionStorage.getItem(TOKEN_KEY)): Promise<HttpJournal | null> {
  if (!token) return null;
  if (connected?.token === token) return connected.journal;
  // One try per call: the forwarder resends itself, so it knows every resend and can report a possible duplicate.
  const journal = await HttpJournal.connect({ baseUrl: location.origin, journal: "usage", token, batching: false, retry: { attempts: 1 } });
  connected = { token, journal };
  return journal;
}

/** Run `step` after the starts, restarts and stops queued before it. */
function queued(step: () => Promise<void>): Promise<void> {
  const next = lifecycle.then(step);
  lifecycle = next.catch(() => undefined);
  return next;
}

/**
 * Start the forwarder once signed in, or restart it when the token changed: a
 * forwarder keeps the sink it was made with, so after a new token (a typo
 * corrected, a revoked token replaced) the old one is stopped (its held batch
 * given back at once, its lock released), the connection made with the old
 * token dropped, and a new forwarder started with the new one. A failed
 * connect (offline, the worker down, a bad token) is shown and tried again.
 */
function startForwarder(): Promise<void> {
  return queued(async () => {
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (forwarder && forwarderToken === token) return;
    if (forwarder) {
      const old = forwarder;
      forwarder = null;
      forwarderToken = null;
      render();
      await old.stop();
    }
    if (connected !== null && connected.token !== token) connected = null;
    try {
      const target = await sink(token);
      if (!target) return;
      forwarder = createForwarder({
        source,
        consumer,
        sink: target,
        batchSize: 100,
        leaseMs: 30_000,
        pollIntervalMs: 1_000,
        backoff: { initialMs: 500, maxMs: 10_000 },
        online: browserOnline(),
        lock: { name: "isostore-example-forwarder" },
      });
      forwarderToken = token;
      connectError = null;
      connectFailures = 0;
      const mine = forwarder;
      // A stopped forwarder's late events change nothing on the page.
      mine.addEventListener("progress", () => {
        if (forwarder === mine) refreshWaiting();
      });
      mine.addEventListener("state", () => {
        if (forwarder === mine) render();
      });
      mine.addEventListener("batch", () => void renderRejected());
      mine.start();
    } catch (error) {
      connectError = error instanceof Error ? error.message : String(error);
      connectFailures += 1;
      if (connectRetry !== null) clearTimeout(connectRetry);
      connectRetry = setTimeout(() => {
        connectRetry = null;
        void startForwarder();
      }, Math.min(30_000, 500 * 2 ** connectFailures));
    } finally {
      render();
    }
  });
}

function row(list: HTMLElement, term: string, value: string): void {
  const dt = document.createElement("dt");
  dt.textContent = term;
  const dd = document.createElement("dd");
  dd.textContent = value;
  dd.dataset["field"] = term;
  list.append(dt, dd);
}

/** Events waiting in the outbox (pending and in flight), as its journal last said; null before the first read. */
let waiting: number | null = null;

/**
 * Read how many events wait in the outbox, then show it. The forwarder's
 * progress counts them only after a batch, and no batch runs while the page
 * is offline or the worker is down, which is when they pile up.
 */
function refreshWaiting(): void {
  void source.stats(consumer).then(
    (stats) => {
      waiting = stats.pending + stats.inFlight;
      render();
    },
    () => undefined,
  );
}

function render(): void {
  const status = element("status");
  status.replaceChildren();
  const progress: ForwarderProgress | null = forwarder?.progress ?? null;
  row(status, "state", progress?.state ?? (connectError !== null || sessionStorage.getItem(TOKEN_KEY) ? "connecting" : "waiting for a token"));
  row(status, "recorded in this tab", String(recorded));
  row(status, "forwarded", String(progress?.forwarded ?? 0));
  row(status, "waiting in the outbox", waiting === null ? "?" : String(waiting));
  row(status, "quarantined", String(progress?.quarantined ?? 0));
  row(status, "quarantined in the outbox (any reason)", progress?.quarantinedInSource === null || progress === null ? "?" : String(progress.quarantinedInSource));
  row(status, "last error", progress?.lastError ? `${progress.lastError.code ?? "error"}: ${progress.lastError.message}` : (connectError ?? "none"));
  row(status, "next retry", progress?.nextRetryAt ? new Date(progress.nextRetryAt).toLocaleTimeString() : "-");
}

async function renderRejected(): Promise<readonly QuarantinedEvent[]> {
  const page = await source.listQuarantined(consumer, { limit: 100, order: "newest" });
  const list = element("rejected");
  list.replaceChildren(
    ...page.items.map((item) => {
      const entry = document.createElement("li");
      entry.textContent = `${item.event.id} (${item.event.orderingKey.namespace}/${item.event.orderingKey.subject}): ${item.reason}`;
      return entry;
    }),
  );
  return page.items;
}

element<HTMLFormElement>("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = element<HTMLInputElement>("token").value;
  element<HTMLInputElement>("token").value = "";
  if (token !== sessionStorage.getItem(TOKEN_KEY)) {
    // A new token: a new connection, tried at once (not after the last failure's delay).
    connectFailures = 0;
    connectError = null;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  void startForwarder();
});
// Back online: connect now rather than after the retry's delay.
window.addEventListener("online", () => {
  if (!forwarder) void startForwarder();
});
element("record-one").addEventListener("click", () => void record(1));
element("record-many").addEventListener("click", () => void record(100));
element("record-conflict").addEventListener("click", () => void recordConflict());

declare global {
  interface Window {
    isostoreExample: {
      record: (count: number, subject?: string) => Promise<string[]>;
      recordConflict: () => Promise<void>;
      progress: () => ForwarderProgress | null;
      pending: () => Promise<number>;
      /** The outbox's full stats for the forwarder's consumer (pending, in flight, quarantined, ...). */
      stats: () => Promise<JournalStats>;
      rejected: () => Promise<readonly QuarantinedEvent[]>;
      stop: () => Promise<void>;
    };
  }
}

window.isostoreExample = {
  record,
  recordConflict,
  progress: () => forwarder?.progress ?? null,
  pending: async () => (await source.stats(consumer)).pending,
  stats: () => source.stats(consumer),
  rejected: renderRejected,
  stop: () =>
    queued(async () => {
      const old = forwarder;
      forwarder = null;
      forwarderToken = null;
      await old?.stop();
      render();
    }),
};

render();
refreshWaiting();
void startForwarder();
void renderRejected();
// The outbox is shared by this origin's tabs: a tab standing by sees its count change only by reading it again.
setInterval(() => {
  if (document.visibilityState !== "hidden") refreshWaiting();
}, WAITING_REFRESH_MS);
