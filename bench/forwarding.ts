/**
 * Issue 8's figures, printed as a markdown section (bench/run.ts adds it to
 * BENCHMARKS.md):
 *
 * 1. Forwarding throughput: the offline example page (examples/offline,
 *    built afresh for the run) in Debian's Chromium journals N events into
 *    IndexedDB (strict durability) while offline; the clock runs from going
 *    online until the page's journal has nothing pending and nothing in
 *    flight for the forwarder (its stats: `pending + inFlight === 0`), i.e.
 *    every event was appended to the worker (`wrangler dev`, Durable Objects
 *    on local SQLite, P = 4) and acked locally. Batches of 100. Then, untimed,
 *    the run fails unless nothing was quarantined, the forwarder counts N
 *    events forwarded and the worker's journal holds N events.
 * 2. The billing-grade usage middleware's added latency: the same Hono
 *    handler with and without `usageJournal`, called in-process, sequentially;
 *    (a) over a memory journal (the middleware's own cost plus an append to an
 *    in-process memory journal), (b) over an `HttpJournal` to the same worker
 *    (what a Worker pays when its journal is a network hop away; on Cloudflare
 *    the hop is a Durable Object call). Each journal is checked afterwards to
 *    hold one event per request.
 *
 * `BENCH_QUICK=1` runs smaller sizes.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { Hono } from "hono";
import { chromium } from "playwright";
import { startDevWorker, ROOT } from "../scripts/dev-worker.mjs";
import { memoryEngine } from "../adapters/memory/index.js";
import { HttpJournal } from "../src/http/index.js";
import { BILLING_GRADE, createJournal, parseConsumerId, type JournalStats, type UsageJournal } from "../src/index.js";
import type { ForwarderProgress } from "../src/sync/index.js";
import { usageJournal, type UsageVariables } from "../src/worker/index.js";

const quick = process.env.BENCH_QUICK === "1";
const TOKEN = "bench-forwarding-token-0123456789";
const fmt = (n: number, digits = 0) => n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const version = (name: string) => (JSON.parse(readFileSync(new URL(`../node_modules/${name}/package.json`, import.meta.url), "utf8")) as { version: string }).version;
/** How long the forwarding may take before the run fails (it takes seconds). */
const FORWARDING_TIMEOUT_MS = 300_000;
/** A consumer nobody registers: its stats' `pending` is every event a journal holds. */
const COUNTING = parseConsumerId("bench-count");

interface ExampleWindow {
  isostoreExample: { record(count: number, subject?: string): Promise<string[]>; stats(): Promise<JournalStats>; progress(): ForwarderProgress | null };
}

/** Events the worker's `usage` journal holds. */
async function heldAtWorker(url: string): Promise<number> {
  const journal = new HttpJournal({ baseUrl: url, journal: "usage", token: TOKEN, capacity: BILLING_GRADE, mode: "billing_grade", batching: false });
  return (await journal.stats(COUNTING)).pending;
}

async function forwardingThroughput(url: string, events: number): Promise<{ seconds: number; perSecond: number; browser: string }> {
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  try {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${url}/example/`);
    await page.waitForFunction(() => "isostoreExample" in globalThis);
    await page.fill("#token", TOKEN);
    await page.click("#token-form button[type=submit]");
    await context.setOffline(true);
    // 100 keys, so a batch of 100 can be full (the journal leases one event per key at a time).
    for (let key = 0; key < 100; key++) {
      await page.evaluate(([n, s]) => (globalThis as unknown as ExampleWindow).isostoreExample.record(n, s), [events / 100, `user-${key}`] as const);
    }
    const outbox = () => page.evaluate(() => (globalThis as unknown as ExampleWindow).isostoreExample.stats());
    const progress = () => page.evaluate(() => (globalThis as unknown as ExampleWindow).isostoreExample.progress());
    const recorded = await outbox();
    if (recorded.pending !== events || recorded.inFlight !== 0) throw new Error(`the outbox holds ${recorded.pending} pending and ${recorded.inFlight} in flight before going online, not ${events} pending`);
    const heldBefore = await heldAtWorker(url);
    const started = performance.now();
    await context.setOffline(false);
    // Until nothing is pending or in flight: the last batch's send to the worker and its local ack included.
    for (;;) {
      const stats = await outbox();
      if (stats.pending + stats.inFlight === 0) break;
      if (performance.now() - started > FORWARDING_TIMEOUT_MS) {
        throw new Error(`forwarding: ${stats.pending} pending and ${stats.inFlight} in flight after ${FORWARDING_TIMEOUT_MS / 1000} s; forwarder: ${JSON.stringify(await progress())}`);
      }
      await page.waitForTimeout(25);
    }
    const seconds = (performance.now() - started) / 1000;
    // Untimed: every event reached the worker, once, and none was set aside.
    const [stats, forwarder, held] = [await outbox(), await progress(), await heldAtWorker(url)];
    const problems = [
      ...(stats.quarantined !== 0 ? [`${stats.quarantined} events quarantined in the outbox`] : []),
      ...(forwarder?.forwarded !== events ? [`the forwarder counts ${forwarder?.forwarded ?? "no"} events forwarded`] : []),
      ...(held - heldBefore !== events ? [`the worker's journal gained ${held - heldBefore} events`] : []),
    ];
    if (problems.length > 0) throw new Error(`forwarding ${events} events: ${problems.join("; ")}; forwarder: ${JSON.stringify(forwarder)}`);
    return { seconds, perSecond: events / seconds, browser: browser.version() };
  } finally {
    await browser.close();
  }
}

/** Untimed warm-up requests {@link latency} sends before its timed ones (with a journal, each appends an event too). */
const WARM_UP = 20;

/** Mean ms per request of `count` sequential requests to `/work`, after a warm-up of {@link WARM_UP}. */
async function latency(journal: UsageJournal | null, count: number): Promise<number> {
  const app = new Hono<{ Variables: UsageVariables<{ units: number }> }>();
  if (journal) app.use("/work", usageJournal<{ units: number }>({ journal, mode: "billing_grade", toRecord: (usage) => ({ namespace: "bench", subject: "caller", data: usage }) }));
  app.post("/work", (c) => {
    if (journal) c.get("reportUsage")({ units: 1 });
    return c.json({ ok: true });
  });
  for (let i = 0; i < WARM_UP; i++) await app.request("/work", { method: "POST" });
  const started = performance.now();
  for (let i = 0; i < count; i++) {
    const answer = await app.request("/work", { method: "POST" });
    if (answer.status !== 200) throw new Error(`request ${i} answered ${answer.status}`);
  }
  return (performance.now() - started) / count;
}

async function main(): Promise<void> {
  // Built for every run: a page built from older sources would measure other code (and lack the test hook).
  execFileSync(`${ROOT}/node_modules/.bin/vite`, ["build", "examples/offline"], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
  const date = new Date().toISOString();
  const worker = await startDevWorker({ tokens: [{ name: "bench", token: TOKEN, scopes: ["append:*", "consume", "operate"] }] });
  try {
    const events = quick ? 500 : 3_000;
    const forwarded = await forwardingThroughput(worker.url, events);

    const requests = quick ? 200 : 1_000;
    const bare = await latency(null, requests);
    // The middleware's own cost: a memory journal presented as billing-grade (the middleware refuses a
    // telemetry-grade journal in billing mode), so each request awaits its append inline, as billing does.
    const inMemory = createJournal(memoryEngine(), { name: "usage", capacity: BILLING_GRADE });
    const memory = await latency(Object.assign(Object.create(inMemory) as UsageJournal, { mode: "billing_grade" as const }), requests);
    const remote = new HttpJournal({ baseUrl: worker.url, journal: "usage", token: TOKEN, capacity: BILLING_GRADE, mode: "billing_grade", batching: false });
    const httpRequests = Math.min(requests, quick ? 100 : 300);
    const heldBefore = await heldAtWorker(worker.url);
    const overHttp = await latency(remote, httpRequests);
    // Untimed: each request's usage event was appended, once.
    const inMemoryHeld = (await inMemory.stats(COUNTING)).pending;
    if (inMemoryHeld !== WARM_UP + requests) throw new Error(`the memory journal holds ${inMemoryHeld} events after ${WARM_UP + requests} requests`);
    const remoteGained = (await heldAtWorker(worker.url)) - heldBefore;
    if (remoteGained !== WARM_UP + httpRequests) throw new Error(`the worker's journal gained ${remoteGained} events from ${WARM_UP + httpRequests} requests`);

    console.log(
      [
        "## Forwarding and the usage middleware",
        "",
        `- Date: ${date}`,
        `- Chromium ${forwarded.browser} (Playwright ${version("playwright")}, /usr/bin/chromium); wrangler ${version("wrangler")}, workerd ${version("workerd")}; Node ${process.version}${quick ? " (BENCH_QUICK=1: smoke sizes, not the reference figures)" : ""}`,
        "- Written by `npx tsx bench/forwarding.ts`.",
        "",
        `### Forwarding from IndexedDB in Chromium to the worker (${fmt(events)} events, batches of 100, 100 ordering keys)`,
        "",
        `The offline example page (strict IndexedDB durability; built for the run), \`wrangler dev\` on localhost with Durable Objects on local SQLite (\`usage\`, P = 4). Timed from going online until the page's journal had nothing pending and nothing in flight for the forwarder (the last batch appended at the worker and acked locally; polled every 25 ms). Checked after the timing: nothing quarantined, the forwarder counts ${fmt(events)} events forwarded and the worker's journal holds ${fmt(events)} more events than before.`,
        "",
        "| events | seconds | events/s |",
        "| ---: | ---: | ---: |",
        `| ${fmt(events)} | ${fmt(forwarded.seconds, 2)} | ${fmt(forwarded.perSecond)} |`,
        "",
        `### The billing-grade usage middleware: added latency per request (sequential in-process requests, Node ${process.version})`,
        "",
        "| handler | requests | ms per request | added by the middleware |",
        "| --- | ---: | ---: | ---: |",
        `| without the middleware | ${fmt(requests)} | ${fmt(bare, 3)} | |`,
        `| with \`usageJournal\`, memory journal (the middleware + an append to an in-process memory journal) | ${fmt(requests)} | ${fmt(memory, 3)} | ${fmt(memory - bare, 3)} ms |`,
        `| with \`usageJournal\`, \`HttpJournal\` to the local worker (an append over HTTP to a Durable Object) | ${fmt(httpRequests)} | ${fmt(overHttp, 3)} | ${fmt(overHttp - bare, 3)} ms |`,
        "",
        "Billing grade waits for the append before answering, so its added latency is the journal's append latency plus the middleware's own cost; the memory-journal row is the middleware plus an append to a memory journal in the same process (the cheapest journal append there is here), so it bounds the middleware's own cost from above. Telemetry grade answers first and appends in `waitUntil`. Each journal is checked after the timing to hold one event per request.",
        "",
      ].join("\n"),
    );
  } finally {
    await worker.stop();
  }
}

await main();
