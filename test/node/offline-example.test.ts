/**
 * Issue 8 end to end, in real Chromium against the real worker (wrangler dev
 * on a free port): the offline example page (examples/offline, served at
 * /example/) journals usage events in IndexedDB and its forwarder sends them
 * to the worker's `usage` journal.
 *
 * - 500 events journaled while the page is offline reach the worker exactly
 *   once after it goes online;
 * - a reload in the middle of forwarding loses nothing and doubles nothing;
 * - two tabs of the same origin forward through one lock without doubling;
 * - a conflicting event is quarantined in the page as `rejected`;
 * - a standby tab's count of events waiting in the outbox follows what the
 *   forwarding tab sends;
 * - a token whose append scope misses the page's namespace holds the events
 *   (nothing quarantined), and the right token, entered without a reload,
 *   restarts the forwarder and sends them.
 *
 * "Exactly once" is checked at the worker: a consumer that never claimed sees
 * every stored event as pending, and a full claim lists each request id once.
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright";
import { build } from "vite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevWorker, type DevWorker } from "../../scripts/dev-worker.mjs";
import { HttpJournal } from "../../src/http/index.js";
import { BILLING_GRADE, parseConsumerId } from "../../src/index.js";

const TOKEN = "offline-example-token-0123456789";
/** A token whose append scope names another namespace than the page's (`example`): a typo. */
const TYPO_TOKEN = "offline-example-typo-token-0123456789";
const EXAMPLE_HTML = fileURLToPath(new URL("../../web/dist/example/index.html", import.meta.url));

/** The newest modification time (ms) of the files under `path`. */
function newest(path: string): number {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(0, ...readdirSync(path).map((name) => newest(join(path, name))));
}

/** Whether the example's build is missing or older than its sources (the page and the library it bundles). */
function exampleBuildStale(): boolean {
  if (!existsSync(EXAMPLE_HTML)) return true;
  const built = statSync(EXAMPLE_HTML).mtimeMs;
  return ["../../examples/offline", "../../src", "../../adapters/indexeddb"].some((dir) => newest(fileURLToPath(new URL(dir, import.meta.url))) > built);
}
const CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"];

interface ExampleWindow {
  isostoreExample: {
    record(count: number, subject?: string): Promise<string[]>;
    recordConflict(): Promise<void>;
    progress(): { state: string; forwarded: number; quarantined: number; lastError: { message: string } | null } | null;
    pending(): Promise<number>;
    stats(): Promise<{ pending: number; inFlight: number; quarantined: number }>;
    rejected(): Promise<readonly { reason: string }[]>;
  };
}

describe("offline example: IndexedDB -> forwarder -> worker, in Chromium", () => {
  let worker: DevWorker;
  let browser: Browser;
  let audits = 0;

  beforeAll(async () => {
    if (exampleBuildStale()) {
      await build({ configFile: fileURLToPath(new URL("../../examples/offline/vite.config.ts", import.meta.url)), logLevel: "warn" });
    }
    worker = await startDevWorker({
      tokens: [
        { name: "example", token: TOKEN, scopes: ["append:*", "consume", "operate"] },
        { name: "typo", token: TYPO_TOKEN, scopes: ["append:exmaple"] },
      ],
    });
    browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: CHROMIUM_ARGS });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await worker?.stop();
  });

  /** What the worker holds: every request id in its `usage` journal, by a consumer that never claimed before. */
  async function workerIds(): Promise<string[]> {
    const journal = new HttpJournal({ baseUrl: worker.url, journal: "usage", token: TOKEN, capacity: BILLING_GRADE, mode: "billing_grade" });
    const auditor = parseConsumerId(`audit-${audits++}`);
    const ids: string[] = [];
    for (;;) {
      const batch = await journal.claim(auditor, { maxEvents: 1000, leaseMs: 600_000, now: Date.now() });
      if (batch.length === 0) break;
      ids.push(...batch.map((delivery) => delivery.event.id));
      await journal.ackBatch(batch.map((delivery) => delivery.id));
    }
    return ids;
  }

  async function openExample(context: BrowserContext): Promise<Page> {
    const page = await context.newPage();
    page.on("pageerror", (error) => console.error("example page error:", error));
    await page.goto(`${worker.url}/example/`);
    await page.waitForFunction(() => "isostoreExample" in globalThis);
    return page;
  }

  async function signIn(page: Page, token = TOKEN): Promise<void> {
    await page.fill("#token", token);
    await page.click("#token-form button[type=submit]");
  }

  const record = (page: Page, count: number, subject: string) =>
    page.evaluate(([n, s]) => (globalThis as unknown as ExampleWindow).isostoreExample.record(n, s), [count, subject] as const);
  const pending = (page: Page) => page.evaluate(() => (globalThis as unknown as ExampleWindow).isostoreExample.pending());

  async function waitDrained(page: Page, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((await pending(page)) > 0) {
      if (Date.now() > deadline) throw new Error(`the page still has ${await pending(page)} events pending`);
      await page.waitForTimeout(200);
    }
  }

  it("500 events journaled offline reach the worker exactly once; a reload mid-forwarding loses and doubles nothing", async () => {
    const before = (await workerIds()).length;
    const context = await browser.newContext();
    const page = await openExample(context);
    await signIn(page);
    await context.setOffline(true);
    const offlineIds = await record(page, 500, "offline-user");
    await page.waitForFunction(() => (globalThis as unknown as ExampleWindow).isostoreExample.progress()?.state === "offline");
    expect(await pending(page)).toBe(500);
    // The page shows them waiting, though no batch ran since they were recorded.
    await page.waitForFunction(() => document.querySelector('dd[data-field="waiting in the outbox"]')?.textContent === "500");
    await context.setOffline(false);
    await waitDrained(page);
    let ids = await workerIds();
    expect(ids.length - before).toBe(500);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of offlineIds) expect(ids).toContain(id);

    // Reload while forwarding: record 500 more offline, go online, reload as soon as the first batch went out.
    await context.setOffline(true);
    const moreIds = await record(page, 500, "reload-user");
    await context.setOffline(false);
    await page.waitForFunction(() => ((globalThis as unknown as ExampleWindow).isostoreExample.progress()?.forwarded ?? 0) > 0, undefined, { timeout: 30_000 });
    await page.reload();
    await page.waitForFunction(() => "isostoreExample" in globalThis);
    await waitDrained(page);
    ids = await workerIds();
    const all = new Set(ids);
    expect(all.size).toBe(ids.length);
    for (const id of moreIds) expect(all.has(id)).toBe(true);
    await context.close();
  }, 180_000);

  it("two tabs forward through one lock without doubling anything; a conflict is quarantined as rejected", async () => {
    const context = await browser.newContext();
    const first = await openExample(context);
    await signIn(first);
    const second = await openExample(context);
    await signIn(second); // sessionStorage is per tab
    await second.waitForFunction(() => (globalThis as unknown as ExampleWindow).isostoreExample.progress()?.state === "standby");
    expect(await first.evaluate(() => (globalThis as unknown as ExampleWindow).isostoreExample.progress()?.state)).not.toBe("standby");
    const minted = [...(await record(first, 150, "tab-a")), ...(await record(second, 150, "tab-b"))];
    await waitDrained(first);
    // The standby tab sees the outbox it shares with the forwarding tab empty out, though it sent nothing itself.
    await second.waitForFunction(() => document.querySelector('dd[data-field="waiting in the outbox"]')?.textContent === "0", undefined, { timeout: 15_000 });
    await first.close(); // the lock passes to the other tab
    await second.waitForFunction(() => (globalThis as unknown as ExampleWindow).isostoreExample.progress()?.state !== "standby", undefined, { timeout: 30_000 });
    const later = await record(second, 50, "tab-b");
    await waitDrained(second);
    const ids = await workerIds();
    const held = new Set(ids);
    expect(held.size).toBe(ids.length);
    for (const id of [...minted, ...later]) expect(held.has(id)).toBe(true);

    await second.evaluate(() => (globalThis as unknown as ExampleWindow).isostoreExample.recordConflict());
    const rejected = () => second.evaluate(() => (globalThis as unknown as ExampleWindow).isostoreExample.rejected());
    const deadline = Date.now() + 30_000;
    while ((await rejected()).length === 0 && Date.now() < deadline) await second.waitForTimeout(200);
    expect((await rejected()).map((item) => item.reason)).toEqual(["rejected"]);
    await context.close();
  }, 180_000);

  it("a token whose append scope misses the page's namespace holds the events, none quarantined; the right token, entered without a reload, sends them", async () => {
    const context = await browser.newContext();
    const page = await openExample(context);
    await signIn(page, TYPO_TOKEN);
    const ids = await record(page, 3, "token-typo");
    // The worker refuses the batch (403 forbidden_namespace): a fault of the token, waited out with the batch held.
    await page.waitForFunction(() => (globalThis as unknown as ExampleWindow).isostoreExample.progress()?.lastError?.message.includes("forbidden_namespace") === true, undefined, { timeout: 15_000 });
    const stats = () => page.evaluate(() => (globalThis as unknown as ExampleWindow).isostoreExample.stats());
    const refused = await stats(); // one ordering key: one event in flight (held), the others pending behind it
    expect([refused.pending + refused.inFlight, refused.quarantined]).toEqual([3, 0]);
    await signIn(page, TOKEN);
    const deadline = Date.now() + 20_000;
    for (let left = await stats(); left.pending + left.inFlight > 0; left = await stats()) {
      if (Date.now() > deadline) throw new Error(`the page still holds ${JSON.stringify(left)} after the right token`);
      await page.waitForTimeout(200);
    }
    expect(await stats()).toMatchObject({ quarantined: 0 });
    const held = new Set(await workerIds());
    for (const id of ids) expect(held.has(id)).toBe(true);
    await context.close();
  }, 60_000);
});
