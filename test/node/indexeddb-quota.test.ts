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
 * Then, without lifting the quota, can a forwarder still drain the journal
 * (claim, ack, ackBatch, prune) and append again? In an off-the-record
 * context (`browser.newContext()`: IndexedDB in memory) it can, after this
 * fill; on disk (a persistent profile) Chromium refuses the first claim, and
 * that test is marked failing (see the comments at both).
 *
 * This runs in its own browser (not in the browser project), so the lowered
 * quota cannot touch other tests' databases.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type Browser, type BrowserContext } from "playwright";
import { createServer, type ViteDevServer } from "vite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Drained, QuotaPage } from "../browser/quota-page.js";

const CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"];

/** The origin's usage and quota as the quota system sees them (the override included). */
interface Usage {
  readonly usage: number;
  readonly quota: number;
}

/**
 * In `context`: open the quota page, lower its origin's quota to 1.5 MiB,
 * fill a journal until a commit is refused, then, the quota still lowered,
 * drain it (`drain` in the page). Returns the accepted events, the drain's
 * report and the origin's usage after the fill and after the drain.
 */
async function fillThenDrain(context: BrowserContext, base: string): Promise<{ accepted: string[]; drained: Drained; afterFill: Usage; afterDrain: Usage }> {
  const page = await context.newPage();
  await page.goto(new URL("test/browser/quota-page.html", base).href);
  await page.waitForFunction(() => (globalThis as { isostoreQuota?: unknown }).isostoreQuota !== undefined, undefined, { timeout: 60_000 });
  const origin = new URL(page.url()).origin;
  const cdp = await context.newCDPSession(page);
  await cdp.send("Storage.overrideQuotaForOrigin", { origin, quotaSize: 1536 * 1024 });
  const measure = async (): Promise<Usage> => {
    const answer = await cdp.send("Storage.getUsageAndQuota", { origin });
    return { usage: answer.usage, quota: answer.quota };
  };
  const database = `quota-drain-${Date.now()}`;
  const filled = await page.evaluate((name) => (globalThis as unknown as { isostoreQuota: QuotaPage }).isostoreQuota.fill(name), database);
  expect(filled.refusal?.causeCode).toBe("quota_exceeded");
  const afterFill = await measure();
  const drained = await page.evaluate((name) => (globalThis as unknown as { isostoreQuota: QuotaPage }).isostoreQuota.drain(name), database);
  return { accepted: filled.accepted, drained, afterFill, afterDrain: await measure() };
}

/** Every step of the drain succeeded: each accepted event claimed, acked and pruned once, the new event accepted and alone pending. */
function expectDrained({ accepted, drained }: { accepted: string[]; drained: Drained }): void {
  const steps = drained.steps.map((step) => `${step.step}: ${step.ok ? JSON.stringify(step.detail) : `refused (${String(step.refusal?.causeCode)})`}`);
  expect(steps.filter((step) => step.includes("refused"))).toEqual([]);
  expect(steps).toContain("ack: 1");
  expect(steps.some((step) => step.startsWith("ackBatch: "))).toBe(true);
  expect([...drained.claimed].sort()).toEqual([...accepted].sort());
  const acked = drained.steps.filter((step) => step.step === "ack" || step.step === "ackBatch").reduce((sum, step) => sum + (step.detail as number), 0);
  expect(acked).toBe(accepted.length);
  expect(steps).toContain(`prune: ${accepted.length}`);
  expect(steps).toContain(`append: "accepted"`);
  expect(drained.after).toEqual({ pending: 1, inFlight: 0, quarantined: 0 });
  expect(drained.deliveredAfter).toEqual([drained.appended]);
}

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

  // Measured (Chromium 156, this context is off the record: IndexedDB lives in memory, where a
  // delete frees its bytes at once): 19 events fill the 1.5 MiB; the refused commit is a checkpoint
  // asking ~350 KB, which leaves 98-331 KB of headroom. Chromium admits a transaction when the bytes
  // it puts fit the headroom (its deletes are not credited), so each claim (<11 KB), ack and ackBatch
  // (<4 KB) fits, the prune (a change record, <8 KB) too, and the checkpoint after it writes only
  // what survives (~59 KB: the new event, its index rows) while deleting the pruned events' pages.
  // It holds because the fill stops on a large checkpoint: with 8 KiB events the fill overshoots
  // (usage 1,650,688 > quota 1,572,864) and the very first claim (~1.7 KB) is refused.
  it("at quota, without lifting it, a forwarder still claims, acks (ack and ackBatch) and prunes every event, and the space freed takes a new event", async () => {
    const context = await browser.newContext();
    try {
      const result = await fillThenDrain(context, base);
      expectDrained(result);
      expect(result.afterDrain.usage).toBeLessThan(result.afterFill.usage);
    } finally {
      await context.close();
    }
  }, 120_000);

  // The same on disk (a persistent profile: LevelDB), where it does NOT hold, whatever the engine
  // does. Measured (Chromium 156): 14 events are accepted and usage is already 2.17-2.22 MB against
  // the 1.5 MiB quota (the checkpoints' deletes of 58 KB log records cost disk, in LevelDB's log and
  // rollback journal, that no put asked for), so the first claim (one ~8 KB change record) is refused
  // as quota_exceeded, and so are the prune (nothing to prune) and the append; stats still say 14
  // pending (the refusals changed nothing). Raw IndexedDB, without the engine, shows why no mend in
  // the engine can help: once at quota a 100-byte put is refused, while deleting raises the usage
  // (six 57 KB records deleted: 1.62 -> 1.91 MB; clear(): 1.56 -> 3.06 MB), still refused 30 s later
  // and after a browser restart. Only headroom kept before the quota (appends refused early) lets a
  // forwarder drain on disk.
  it.fails("on disk, at quota: the same drain (Chromium refuses the first claim; deletes do not lower disk usage)", async () => {
    const profile = await mkdtemp(join(tmpdir(), "isostore-quota-"));
    const context = await chromium.launchPersistentContext(profile, { executablePath: "/usr/bin/chromium", args: CHROMIUM_ARGS });
    try {
      expectDrained(await fillThenDrain(context, base));
    } finally {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    }
  }, 120_000);
});
