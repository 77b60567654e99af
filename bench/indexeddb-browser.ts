/**
 * `npx tsx bench/indexeddb-browser.ts`: the IndexedDB benchmarks in headless
 * Chromium (Debian's /usr/bin/chromium through Playwright). Serves
 * bench/browser/ with Vite, runs bench/browser/bench-main.ts in the page, and
 * prints the results as markdown for BENCHMARKS.md.
 *
 * `BENCH_QUICK=1` runs smaller sizes (a smoke run; the output says so).
 *
 * `process.env.NODE_ENV` is defined as "production" for the page, so that
 * workbox-background-sync runs as apps ship it (no dev-mode assertions or
 * console logging per request); the journal does not read it.
 */
import { readFileSync } from "node:fs";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright";
import { createServer } from "vite";
import type { BenchResults, ClaimCostResult, PairResult, QueuePairResult, RequestCost } from "./indexeddb-results.js";

const quick = process.env.BENCH_QUICK === "1";
const root = fileURLToPath(new URL("..", import.meta.url));
const packageVersion = (name: string) => (JSON.parse(readFileSync(new URL(`../node_modules/${name}/package.json`, import.meta.url), "utf8")) as { version: string }).version;
const workboxVersion = packageVersion("workbox-background-sync");

function fmt(n: number, digits = 0): string {
  return n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

function pairRow(label: string, unit: string, r: PairResult): string {
  return `| ${label} | ${fmt(r.journalPerSecond, 1)} ${unit}/s | ${fmt(r.rawPerSecond, 1)} ${unit}/s | ${fmt(r.ratio, 2)} | ${r.rounds} x ${r.perRound} |`;
}

function queueRow(r: QueuePairResult): string {
  const grade = r.durability === "strict" ? "billing_grade" : "telemetry_grade";
  const m = r.msPerEvent;
  return `| ${r.arrival} | journal durability ${r.durability} (\`${grade}\`) | ${fmt(r.journalPerSecond, 1)} events/s | ${fmt(r.workboxPerSecond, 1)} requests/s | ${fmt(r.ratio, 2)} | ${fmt(m.journalAppend, 2)} + ${fmt(m.journalClaimAck, 2)} | ${fmt(m.workboxPush, 2)} + ${fmt(m.workboxShift, 2)} | ${r.rounds} x ${r.perRound} |`;
}

function claimRow(r: ClaimCostResult): string {
  return `| ${fmt(r.backlog)} | ${r.cycles} | ${fmt(r.msPerCycle, 1)} | ${fmt(r.medianMsPerCycle, 1)} | ${fmt(r.medianClaimMs, 1)} + ${fmt(r.medianAckMs, 1)} |`;
}

function costRow(r: RequestCost): string {
  return `| ${r.what} | ${fmt(r.microseconds, 1)} | ${r.per} | ${r.rounds} x ${r.perRound} |`;
}

/** workbox's ms per request (push + shift) in the sequential strict comparison. */
function sequentialWorkbox(results: BenchResults): number {
  const row = results.workbox.find((r) => r.arrival === "sequential" && r.durability === "strict");
  if (!row) throw new Error("no sequential strict workbox comparison");
  return row.msPerEvent.workboxPush + row.msPerEvent.workboxShift;
}

/** The cost whose label starts with `what` (the rows the text compares). */
function cost(results: BenchResults, what: string): number {
  const found = results.requests.find((r) => r.what.startsWith(what));
  if (!found) throw new Error(`no request cost "${what}"`);
  return found.microseconds;
}

async function main(): Promise<void> {
  const server = await createServer({
    root,
    configFile: false,
    logLevel: "warn",
    // workbox as shipped to production (its dev build asserts and logs every request).
    define: { "process.env.NODE_ENV": JSON.stringify("production") },
    // Every dependency is already ESM: serve it as is, so the optimizer never reloads the page mid-run.
    optimizeDeps: { noDiscovery: true, include: [] },
    // No HMR and no watching: an edit elsewhere in the tree must not reload the page mid-run.
    server: { host: "127.0.0.1", port: 0, strictPort: false, hmr: false, watch: null },
  });
  await server.listen();
  const base = server.resolvedUrls?.local[0];
  if (base === undefined) throw new Error("vite did not report a URL");
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  try {
    const page = await browser.newPage();
    page.on("pageerror", (error) => console.error(`page error: ${error.message}`));
    // A second navigation would restart the page under the benchmark: say so rather than report half a run.
    let navigations = 0;
    page.on("framenavigated", (frame) => {
      if (frame === page.mainFrame() && ++navigations > 1) console.error(`the benchmark page navigated again (${frame.url()}); rerun`);
    });
    await page.goto(new URL("bench/browser/index.html", base).href);
    await page.waitForFunction(() => (globalThis as { isostoreBench?: unknown }).isostoreBench !== undefined, undefined, { timeout: 60_000 });
    const results = await page.evaluate(
      (options) => (globalThis as unknown as { isostoreBench: (o: { quick: boolean }) => Promise<BenchResults> }).isostoreBench(options),
      { quick },
    );
    const version = browser.version();
    const cpu = os.cpus()[0]?.model ?? "unknown CPU";
    const lines = [
      "## Usage journal over the IndexedDB engine (Chromium)",
      "",
      `- Date: ${new Date().toISOString()}`,
      `- Browser: headless Chromium ${version} (Playwright ${packageVersion("playwright")}, /usr/bin/chromium), ${results.userAgent}; workbox-background-sync ${workboxVersion}`,
      `- Machine: ${cpu}, ${os.cpus().length} cores, ${os.platform()} ${os.release()}${quick ? " (BENCH_QUICK=1: smoke sizes, not the reference figures)" : ""}`,
      "- Written by `npx tsx bench/indexeddb-browser.ts` (bench/browser/bench-main.ts). Ratios are journal / raw `idb` throughput, median of interleaved rounds.",
      "",
      "### Append vs raw `idb` adds of the same event records",
      "",
      "| figure | journal | raw idb | ratio | rounds x ops |",
      "| --- | ---: | ---: | ---: | ---: |",
      pairRow("single `append`, durability strict (vs one `add` per strict transaction)", "appends", results.strict),
      pairRow("single `append`, durability relaxed (vs one `add` per relaxed transaction)", "appends", results.relaxed),
      pairRow("`appendBatch` of 100, strict, no consumer registered yet (vs 100 `add`s in one strict transaction)", "batches", results.batch),
      pairRow("`appendBatch` of 100, strict, one consumer registered (same baseline)", "batches", results.batchRegistered),
      pairRow("engine vs raw rows: 100 x (awaited get + 5 puts) in one `engine.transact` (vs the same rows as raw records, a request each)", "batches", results.pattern),
      "",
      `appendBatch target: ratio at least 0.5 (measured ${fmt(results.batch.ratio, 2)} with no consumer registered, ${fmt(results.batchRegistered.ratio, 2)} with one). Strict is the default (\`durable: true\`, journal \`billing_grade\`); relaxed is reported as \`telemetry_grade\`. Rows the journal writes per event (src/journal/layout.ts): with no consumer registered three, the event (\`e\`), its request-id entry (\`i\`) and its by-observed-time entry (\`t\`), plus the meta row (\`m\`) once per batch; with one consumer registered three more, the key's order entry (\`k\`, kept only while a consumer is registered), the consumer's unfinished row (\`u\`) and its by-observed-time entry (\`p\`), and for a key with nothing pending before, a head (\`h\`) and a ready (\`r\`) entry. The engine stores a commit's rows as one record of a log, and every 128 records (or 256 KB) writes them into pages of up to 128 rows or 16 KB (one IndexedDB record each, schema v4), so a batch's rows cost one log record now and, later, a share of a few page writes, where the baseline writes one record per event. A write shortly after the engine's last commit stores that record with no other request: a unique index of the versions each commit was made on refuses a commit on a version another tab already built on (then the body runs again, after reading the version). The last row isolates that: one fixed pattern of rows (one awaited read and five writes per event, shaped like journal rows), written through the engine and, beside it, as raw records, a request each.`,
      "",
      `### Claim cost as the backlog grows (claim 100 + ackBatch of the 100, ${fmt(results.small.keys)} ordering keys, strict)`,
      "",
      "| pending events | cycles | mean ms per claim+ack cycle | median ms | median ms: claim + ackBatch |",
      "| ---: | ---: | ---: | ---: | ---: |",
      claimRow(results.small),
      claimRow(results.large),
      "",
      `Ratio large/small: ${fmt(results.large.msPerCycle / results.small.msPerCycle, 2)} (mean), ${fmt(results.large.medianMsPerCycle / results.small.medianMsPerCycle, 2)} (median); target: within 2x. Each cycle is 2 strict transactions (one claim, one \`ackBatch\`). The backlog spans all ${fmt(results.small.keys)} keys throughout (${fmt(results.large.keys)} at ${fmt(results.large.backlog)} pending): its top-ups continue round robin over the keys (checked after each run).`,
      "",
      "### Append + claim + ack vs workbox-background-sync's `Queue` (pushRequest + shiftRequest), same page",
      "",
      "| events arrive | journal | journal append + claim + ack | workbox push + shift | ratio (journal / workbox) | journal ms/event: append + claim/ack | workbox ms/event: push + shift | rounds x events |",
      "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
      ...results.workbox.map(queueRow),
      "",
      `Target: journal at least 3x workbox's throughput (measured ${results.workbox.map((r) => `${fmt(r.ratio, 2)}x ${r.arrival} ${r.durability}`).join(", ")}). "sequential": the app awaits each \`append\` (\`pushRequest\`) before the next; "concurrent": it issues all N and then awaits them, as when events arrive faster than one commit (the journal then commits the appends that arrive during a commit together, in one transaction, each with its own answer; workbox has no such grouping). Each round: N \`append\`s, then claims of up to 100 (100 ordering keys) each acknowledged with one \`ackBatch\`, until nothing is pending, beside workbox ${workboxVersion} \`pushRequest\` of N POST requests whose bodies are the same events as JSON, then \`shiftRequest\` until empty; the two sides alternate order round by round. workbox writes with relaxed durability (three transactions per request: add, cursor read, delete); the journal takes one transaction per append, one per claim and one per \`ackBatch\`. In a page workbox's Queue needs a \`self.registration\`: the page supplies one without \`sync\`, workbox's fallback path, so no Background Sync registration is counted per push (one more cost it has in a real service worker). What bounds the sequential rows: an awaited append is at least one transaction, and a transaction that adds one raw record costs ${fmt(1000 / results.strict.rawPerSecond, 2)} ms strict (${fmt(1000 / results.relaxed.rawPerSecond, 2)} ms relaxed) here (first table), against workbox's ${fmt(sequentialWorkbox(results), 2)} ms per request (push + shift): a journal whose append cost exactly one raw add and whose claim + ack cost nothing would reach ${fmt(sequentialWorkbox(results) * results.strict.rawPerSecond / 1000, 1)}x strict.`,
      "",
      "### What one IndexedDB request costs (raw IndexedDB, same page, strict)",
      "",
      "| request | microseconds | per | rounds x requests |",
      "| --- | ---: | --- | ---: |",
      ...results.requests.map(costRow),
      "",
      `Each round issues its requests together in one transaction and is timed to the transaction's completion (commit included, spread over the round). A request costs about the same whatever it carries: a page of 128 index rows costs ${fmt(cost(results, "`put` of a page of 128"), 0)} us and a 16 KB page of 40 event rows ${fmt(cost(results, "`put` of a page of 40"), 0)} us, against ${fmt(cost(results, "`put` of a new index row"), 0)} us for one index row. That is why the engine keeps pages, and a log in front of them: a claim + ackBatch of 100 events touches about 700 rows (ready and lease entries, unfinished and finished rows, delivered entries, heads) but only the few pages those rows share; a commit writes its changes as one log record, and a checkpoint every 128 records writes each page they touched once; pages read are cached with the log after them (brought up to date from the log when another tab wrote), so a warm transaction's reads cost one request (the database version) and a warm append two requests in all. Likewise a record carrying three native index entries costs ${fmt(cost(results, "an event row carrying"), 0)} us where the same record and three separate index rows cost ${fmt(cost(results, "an event row and three"), 0)} us.`,
      "",
    ];
    console.log(lines.join("\n"));
  } finally {
    await browser.close();
    await server.close();
  }
}

await main();
