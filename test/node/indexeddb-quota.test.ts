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
 * fill; on disk (a persistent profile) Chromium then refuses the first claim,
 * so there the engine keeps a reserve (`reserveBytes`): appends are refused
 * early, by the engine, and the drain runs in the room kept (see the
 * comments at both).
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
import type { Drained, QuotaPage, Refusal, Reserve } from "../browser/quota-page.js";

/** The origin's lowered quota where the browser refuses (the engine keeps no reserve): 1.5 MiB. */
const QUOTA = 1536 * 1024;

/**
 * Where the engine keeps a reserve. Off the record (IndexedDB in memory, where usage follows the
 * data): a 4 MiB quota, 768 KiB kept. On disk (LevelDB) the usage the quota system counts jumps far
 * beyond what is written, and the reserve must hold those jumps. Measured (Chromium 156, 56 KiB
 * events): an append adds about 58 KB, every fifth one checkpoints (the log's 256 KB into pages) and
 * usage jumps 0.5-0.65 MB, and when LevelDB turns its 4 MiB write buffer into a table usage jumps
 * 1.6-5.4 MB more, falling back later, or not for minutes. With 768 KiB kept at a 4 MiB quota on
 * disk, that flush (during the drain) carried usage to 8.8 MB, over twice the quota; so on disk
 * 10 MiB are kept at a 14 MiB quota.
 */
const RESERVED_QUOTA = 4 * 1024 * 1024;
const RESERVE = 768 * 1024;
const DISK_QUOTA = 14 * 1024 * 1024;
const DISK_RESERVE = 10 * 1024 * 1024;

const CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"];

/** The origin's usage and quota as the quota system sees them (the override included). */
interface Usage {
  readonly usage: number;
  readonly quota: number;
}

/** What {@link fillThenDrain} found. */
interface FillThenDrain {
  readonly accepted: string[];
  /** How the fill's last append was refused. */
  readonly refusal: Refusal | null;
  readonly drained: Drained;
  readonly afterFill: Usage;
  readonly afterDrain: Usage;
  /** Lift the quota override, then reopen the journal (the engine's default reserve) and verify it (`verify` in the page). */
  readonly liftAndVerify: () => Promise<{ delivered: string[]; refusedAgain: string[] }>;
}

/**
 * In `context`: open the quota page, lower its origin's quota to `quota`,
 * fill a journal until an append is refused (by the browser; or by the
 * engine, within `reserveBytes` of the quota), then, the quota still lowered,
 * drain it (`drain` in the page). Returns the accepted events, the drain's
 * report and the origin's usage after the fill and after the drain.
 */
async function fillThenDrain(context: BrowserContext, base: string, quota: number, reserveBytes?: number): Promise<FillThenDrain> {
  const page = await context.newPage();
  await page.goto(new URL("test/browser/quota-page.html", base).href);
  await page.waitForFunction(() => (globalThis as { isostoreQuota?: unknown }).isostoreQuota !== undefined, undefined, { timeout: 60_000 });
  const origin = new URL(page.url()).origin;
  const cdp = await context.newCDPSession(page);
  await cdp.send("Storage.overrideQuotaForOrigin", { origin, quotaSize: quota });
  const reserve: Reserve | undefined = reserveBytes === undefined ? undefined : { quota, reserveBytes };
  const measure = async (): Promise<Usage> => {
    const answer = await cdp.send("Storage.getUsageAndQuota", { origin });
    return { usage: answer.usage, quota: answer.quota };
  };
  const database = `quota-drain-${Date.now()}`;
  const filled = await page.evaluate(([name, limits]) => (globalThis as unknown as { isostoreQuota: QuotaPage }).isostoreQuota.fill(name, limits), [database, reserve] as const);
  expect(filled.refusal?.causeCode).toBe("quota_exceeded");
  const afterFill = await measure();
  const drained = await page.evaluate(([name, limits]) => (globalThis as unknown as { isostoreQuota: QuotaPage }).isostoreQuota.drain(name, limits), [database, reserve] as const);
  const liftAndVerify = async () => {
    await cdp.send("Storage.overrideQuotaForOrigin", { origin });
    return page.evaluate((name) => (globalThis as unknown as { isostoreQuota: QuotaPage }).isostoreQuota.verify(name), database);
  };
  const afterDrain = await measure();
  return { accepted: filled.accepted, refusal: filled.refusal, drained, afterFill, afterDrain, liftAndVerify };
}

/** The drain itself succeeded: every accepted event claimed once, acked (with ack and ackBatch) and pruned. */
function expectDrainSteps({ accepted, drained }: { accepted: string[]; drained: Drained }): void {
  const steps = drained.steps.map((step) => `${step.step}: ${step.ok ? JSON.stringify(step.detail) : `refused (${String(step.refusal?.causeCode)})`}`);
  const draining = steps.slice(0, steps.findIndex((step) => step.startsWith("prune")) + 1);
  expect(draining.filter((step) => step.includes("refused"))).toEqual([]);
  expect(steps).toContain("ack: 1");
  expect(steps.some((step) => step.startsWith("ackBatch: "))).toBe(true);
  expect([...drained.claimed].sort()).toEqual([...accepted].sort());
  expect(new Set(drained.claimed).size).toBe(drained.claimed.length);
  const acked = drained.steps.filter((step) => step.step === "ack" || step.step === "ackBatch").reduce((sum, step) => sum + (step.detail as number), 0);
  expect(acked).toBe(accepted.length);
  expect(steps).toContain(`prune: ${accepted.length}`);
}

/** Every step of the drain succeeded: each accepted event claimed, acked and pruned once, the new event accepted and alone pending. */
function expectDrained({ accepted, drained }: { accepted: string[]; drained: Drained }): void {
  const steps = drained.steps.map((step) => `${step.step}: ${step.ok ? JSON.stringify(step.detail) : `refused (${String(step.refusal?.causeCode)})`}`);
  expect(steps.filter((step) => step.includes("refused"))).toEqual([]);
  expectDrainSteps({ accepted, drained });
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
    await cdp.send("Storage.overrideQuotaForOrigin", { origin, quotaSize: QUOTA });
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

  // Off the record (`browser.newContext()`: IndexedDB lives in memory, where a delete frees its
  // bytes at once). Without a reserve this held only when the fill happened to stop on a large
  // refused checkpoint that left headroom (unchanged code at 8ff893d, Chromium 156: it failed 3 runs
  // of 4 here, the ackBatch, prune and append refused as quota_exceeded). With the reserve the
  // engine refuses appends first (measured: 57 events, usage 3.40 MB of 4.19 MB), the drain runs in
  // the reserve, and the prune's deletes free space once the log is written into the pages: the
  // append after it is refused at first, then the engine checkpoints, reads a fresh estimate and
  // runs it again, accepted (usage 3.41 MB -> 0.13 MB).
  it("at quota, without lifting it, a forwarder still claims, acks (ack and ackBatch) and prunes every event, and the space freed takes a new event", async () => {
    const context = await browser.newContext();
    try {
      const result = await fillThenDrain(context, base, RESERVED_QUOTA, RESERVE);
      expect(result.refusal).toMatchObject({ code: "backend", retryable: false, causeCode: "quota_exceeded", rootIsDomException: false });
      expect(result.afterFill.usage).toBeGreaterThan(RESERVED_QUOTA - RESERVE - 64 * 1024);
      expectDrained(result);
      expect(result.afterDrain.usage).toBeLessThan(result.afterFill.usage);
    } finally {
      await context.close();
    }
  }, 120_000);

  // The same on disk (a persistent profile: LevelDB), where without a reserve it does not hold.
  // Measured (Chromium 156, reserveBytes 0): 14 events are accepted and usage is already 2.17-2.22 MB
  // against the 1.5 MiB quota (the checkpoints' deletes of 58 KB log records cost disk, in LevelDB's
  // log, that no put asked for), so the first claim (one ~8 KB change record) is refused as
  // quota_exceeded, and so are the prune (nothing to prune) and the append; stats still say 14
  // pending. Raw IndexedDB shows why nothing done at quota can help: once at quota a 100-byte put is
  // refused, while deleting raises the usage (six 57 KB records deleted: 1.62 -> 1.91 MB; clear():
  // 1.56 -> 3.06 MB), still refused 30 s later and after a browser restart. So the engine keeps
  // headroom (`reserveBytes`): appends are refused once the origin's usage would come within the
  // reserve of the quota, and the drain runs in the reserve.
  //
  // Measured with the reserve (14 MiB quota, 10 MiB kept; 3 runs): 25 events accepted, the 25th's
  // commit meeting a LevelDB flush (usage 3.63 -> 6.4-7.5 MB), the 26th refused by the engine. The
  // drain (claims, acks and ackBatches of 3 events at a time, a prune of 25), the quota still
  // lowered, is never refused and leaves usage at 5.8 MB: the pruned events' space is not given back
  // at once (deletes are logged; LevelDB frees them when it compacts). So the append after it was
  // refused by the engine (no DOMException under it: the browser was never asked) and wrote nothing;
  // in a run where the flush's jump had fallen back first (12 MiB quota, 6 MiB kept) it was
  // accepted. The test takes either answer, checks the journal agrees with it, and that nothing was
  // lost.
  it("on disk, appends refused within the reserve: claims, acks (ack and ackBatch) and a prune drain every event at quota, and nothing is lost", async () => {
    const profile = await mkdtemp(join(tmpdir(), "isostore-quota-"));
    const context = await chromium.launchPersistentContext(profile, { executablePath: "/usr/bin/chromium", args: CHROMIUM_ARGS });
    try {
      const result = await fillThenDrain(context, base, DISK_QUOTA, DISK_RESERVE);
      // The engine refused the fill's last append (no DOMException: the browser was never asked).
      expect(result.refusal).toEqual({
        name: "BackendError",
        code: "backend",
        retryable: false,
        causeName: "IndexedDbEngineError",
        causeCode: "quota_exceeded",
        rootName: undefined,
        rootIsDomException: false,
      });
      expect(result.accepted.length).toBeGreaterThan(10);
      expect(result.afterFill.quota).toBe(DISK_QUOTA);

      // The drain, the quota still lowered: nothing refused, every event claimed once, acked, pruned,
      // and the origin's usage never reached the quota.
      expectDrainSteps(result);
      const { drained } = result;
      for (const step of drained.steps) expect(step.usage).toBeLessThan(DISK_QUOTA);
      expect(result.afterDrain.usage).toBeLessThan(DISK_QUOTA);
      expect(drained.steps.some((step) => step.refusal?.rootIsDomException === true)).toBe(false);

      // The append after the drain: accepted when the usage fell back below the limit, else refused by
      // the engine (its own quota_exceeded, nothing written). Either way the journal says so.
      const append = drained.steps.find((step) => step.step === "append")!;
      if (append.ok) {
        expect(drained.after).toEqual({ pending: 1, inFlight: 0, quarantined: 0 });
        expect(drained.deliveredAfter).toEqual([drained.appended]);
      } else {
        expect(append.refusal).toMatchObject({ code: "backend", retryable: false, causeCode: "quota_exceeded", rootIsDomException: false });
        // Refused for a reason: the usage (after the engine's retry) leaves no room for one more event.
        expect(append.usage).toBeGreaterThan(DISK_QUOTA - DISK_RESERVE - 64 * 1024);
        expect(drained.after).toEqual({ pending: 0, inFlight: 0, quarantined: 0 });
        expect(drained.deliveredAfter).toEqual([]);
      }

      // Quota lifted: nothing reappears (the appended event was claimed above, its lease still runs),
      // and the events the fill had refused append as new.
      const verified = await result.liftAndVerify();
      expect(verified.delivered).toEqual([]);
      expect(verified.refusedAgain).toEqual(["accepted", "accepted"]);
    } finally {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    }
  }, 120_000);
});
