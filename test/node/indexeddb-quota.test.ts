/**
 * A real QuotaExceededError in real Chromium (issue 4, "storage pressure"):
 * the test lowers the page origin's storage quota through the DevTools
 * protocol (`Storage.overrideQuotaForOrigin`), then the page
 * (test/browser/quota-page.ts) appends large, incompressible events with a
 * strict IndexedDB journal until the browser refuses a commit.
 *
 * Required: the refused append rejects with a `JournalError` `backend`, not
 * retryable, whose cause is the engine's `quota_exceeded` error whose cause
 * is the browser's DOMException; an `appendBatch` is refused whole; the
 * journal's count is unchanged; after the quota is lifted, a reopened journal
 * delivers exactly the accepted events, and the refused events append as new
 * (nothing of them was half-written).
 *
 * This runs in its own browser (not in the browser project), so the lowered
 * quota cannot touch other tests' databases.
 */
import { fileURLToPath } from "node:url";
import { chromium, type Browser } from "playwright";
import { createServer, type ViteDevServer } from "vite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { QuotaPage } from "../browser/quota-page.js";

const CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"];

describe("IndexedDB journal under a real storage quota (Chromium)", () => {
  let server: ViteDevServer;
  let browser: Browser;
  let base: string;

  beforeAll(async () => {
    server = await createServer({
      root: fileURLToPath(new URL("../..", import.meta.url)),
      configFile: false,
      logLevel: "warn",
      optimizeDeps: { noDiscovery: true, include: [] },
      server: { host: "127.0.0.1", port: 0, strictPort: false, hmr: false, watch: null },
    });
    await server.listen();
    base = server.resolvedUrls?.local[0] ?? "";
    browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: CHROMIUM_ARGS });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it("a commit over quota is refused as a typed backend error, nothing of it is written, and every accepted event stays", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(new URL("test/browser/quota-page.html", base).href);
    await page.waitForFunction(() => (globalThis as { isostoreQuota?: unknown }).isostoreQuota !== undefined, undefined, { timeout: 60_000 });
    const origin = new URL(page.url()).origin;
    const cdp = await context.newCDPSession(page);
    await cdp.send("Storage.overrideQuotaForOrigin", { origin, quotaSize: 1536 * 1024 });
    const database = `quota-${Date.now()}`;

    const filled = await page.evaluate((name) => (globalThis as unknown as { isostoreQuota: QuotaPage }).isostoreQuota.fill(name), database);
    expect(filled.accepted.length).toBeGreaterThan(2);
    expect(filled.refusal).toEqual({
      name: "BackendError",
      code: "backend",
      retryable: false,
      causeName: "IndexedDbEngineError",
      causeCode: "quota_exceeded",
      rootName: "QuotaExceededError",
      rootIsDomException: true,
    });
    expect(filled.batchRefusal?.code).toBe("backend");
    expect(filled.batchRefusal?.causeCode).toBe("quota_exceeded");
    expect(filled.pendingAfter).toBe(filled.accepted.length);

    // Lift the quota (no size: the override is removed) and reopen.
    await cdp.send("Storage.overrideQuotaForOrigin", { origin });
    const verified = await page.evaluate((name) => (globalThis as unknown as { isostoreQuota: QuotaPage }).isostoreQuota.verify(name), database);
    expect(verified.delivered).toEqual(filled.accepted);
    expect(verified.refusedAgain).toEqual(["accepted", "accepted"]);
    await context.close();
  }, 120_000);
});
