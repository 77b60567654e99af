/**
 * Issue 8's figures, printed as a markdown section (bench/run.ts adds it to
 * BENCHMARKS.md):
 *
 * 1. Forwarding throughput: the offline example page (examples/offline) in
 *    Debian's Chromium journals N events into IndexedDB (strict durability)
 *    while offline; the clock runs from going online until the page's journal
 *    has nothing pending, i.e. every event was appended to the worker
 *    (`wrangler dev`, Durable Objects on local SQLite, P = 4) and acked
 *    locally. Batches of 100.
 * 2. The billing-grade usage middleware's added latency: the same Hono
 *    handler with and without `usageJournal`, called in-process, sequentially;
 *    (a) over a memory journal (the middleware's own cost), (b) over an
 *    `HttpJournal` to the same worker (what a Worker pays when its journal is
 *    a network hop away; on Cloudflare the hop is a Durable Object call).
 *
 * `BENCH_QUICK=1` runs smaller sizes.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { Hono } from "hono";
import { chromium } from "playwright";
import { startDevWorker, ROOT } from "../scripts/dev-worker.mjs";
import { memoryEngine } from "../adapters/memory/index.js";
import { HttpJournal } from "../src/http/index.js";
import { BILLING_GRADE, createJournal, type UsageJournal } from "../src/index.js";
import { usageJournal, type UsageVariables } from "../src/worker/index.js";

const quick = process.env.BENCH_QUICK === "1";
const TOKEN = "bench-forwarding-token-0123456789";
const fmt = (n: number, digits = 0) => n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

interface ExampleWindow {
  isostoreExample: { record(count: number, subject?: string): Promise<string[]>; pending(): Promise<number> };
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
    const started = performance.now();
    await context.setOffline(false);
    for (;;) {
      const left = await page.evaluate(() => (globalThis as unknown as ExampleWindow).isostoreExample.pending());
      if (left === 0) break;
      await page.waitForTimeout(50);
    }
    const seconds = (performance.now() - started) / 1000;
    return { seconds, perSecond: events / seconds, browser: browser.version() };
  } finally {
    await browser.close();
  }
}

/** Mean ms per request of `count` sequential requests to `/work`, after a warm-up. */
async function latency(journal: UsageJournal | null, count: number): Promise<number> {
  const app = new Hono<{ Variables: UsageVariables<{ units: number }> }>();
  if (journal) app.use("/work", usageJournal<{ units: number }>({ journal, mode: "billing_grade", toRecord: (usage) => ({ namespace: "bench", subject: "caller", data: usage }) }));
  app.post("/work", (c) => {
    if (journal) c.get("reportUsage")({ units: 1 });
    return c.json({ ok: true });
  });
  for (let i = 0; i < 20; i++) await app.request("/work", { method: "POST" });
  const started = performance.now();
  for (let i = 0; i < count; i++) {
    const answer = await app.request("/work", { method: "POST" });
    if (answer.status !== 200) throw new Error(`request ${i} answered ${answer.status}`);
  }
  return (performance.now() - started) / count;
}

async function main(): Promise<void> {
  if (!existsSync(`${ROOT}/web/dist/example/index.html`)) execFileSync(`${ROOT}/node_modules/.bin/vite`, ["build", "examples/offline"], { cwd: ROOT, stdio: "ignore" });
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
    const overHttp = await latency(remote, httpRequests);

    console.log(
      [
        "## Forwarding and the usage middleware",
        "",
        `### Forwarding from IndexedDB in Chromium to the worker (${fmt(events)} events, batches of 100, 100 ordering keys)`,
        "",
        `Chromium ${forwarded.browser}, the offline example page (strict IndexedDB durability), \`wrangler dev\` on localhost with Durable Objects on local SQLite (\`usage\`, P = 4). Timed from going online until the page's journal had nothing pending (appended at the worker and acked locally).`,
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
        `| with \`usageJournal\`, memory journal (the middleware's own cost) | ${fmt(requests)} | ${fmt(memory, 3)} | ${fmt(memory - bare, 3)} ms |`,
        `| with \`usageJournal\`, \`HttpJournal\` to the local worker (an append over HTTP to a Durable Object) | ${fmt(httpRequests)} | ${fmt(overHttp, 3)} | ${fmt(overHttp - bare, 3)} ms |`,
        "",
        "Billing grade waits for the append before answering, so its added latency is the journal's append latency plus the middleware's own cost (the memory-journal row); telemetry grade answers first and appends in `waitUntil`.",
        "",
      ].join("\n"),
    );
  } finally {
    await worker.stop();
  }
}

await main();
