/**
 * The quarantine review page (web/, issue 7) in real Chromium against the
 * worker on a free port: events are seeded and quarantined through the HTTP
 * API, then an operator signs in, reads the counts, filters, inspects,
 * releases (and the release is seen in the next claim, in its key's order),
 * discards, bulk-releases after a dry-run count (acting on the counted events
 * only, though another operator resolves one and a new one is quarantined
 * before the confirmation), and exports NDJSON. Around
 * that: script payloads in records stay text and run nothing, a cross-site
 * form cannot release an event, and a missing, wrong or under-scoped token
 * brings the sign-in screen back.
 *
 * One browser, one worker, one page flow; screenshots of the overview and the
 * inspect view land in web/screenshots/ as artifacts.
 */
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { chromium, type Browser } from "playwright";
import { build } from "vite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevWorker, type DevWorker } from "../../scripts/dev-worker.mjs";
import { newRequestId as requestId } from "../../src/index.js";

const webRoot = fileURLToPath(new URL("../../web/", import.meta.url));
const screenshots = `${webRoot}screenshots/`;

const OPS_TOKEN = "ops-token-for-the-ui-test-0123456789";
const APPEND_TOKEN = "append-only-token-for-the-ui-test-0123";
const TOKENS = [
  { name: "ops", token: OPS_TOKEN, scopes: ["operate", "consume", "append:*"] },
  { name: "appender", token: APPEND_TOKEN, scopes: ["append:*"] },
];
const CONSUMER = "ui-review";

const XSS_IMG = "<img src=x onerror=alert(1)>";
const XSS_SCRIPT = "</script><script>alert(1)</script>";
const XSS_LINK = "javascript:alert(1)";

/** A call to the worker's API with a token; throws on a refused answer. */
async function call<T>(base: string, method: "GET" | "POST", path: string, body?: unknown, token = OPS_TOKEN): Promise<T> {
  const response = await fetch(`${base}/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return (text ? JSON.parse(text) : {}) as T;
}

interface Delivery {
  readonly id: { consumer: string; event: string; attempt: number };
  readonly event: { id: string };
}

describe("quarantine review page (web/) in Chromium against the worker", () => {
  let server: DevWorker;
  let browser: Browser;
  let journal: string;
  /** Request ids by role in the flow. */
  const ids = {
    toRelease: requestId(),
    toDiscard: requestId(),
    xss: requestId(),
    malformed: requestId(),
    bulk: [requestId(), requestId(), requestId()],
    afterRelease: "",
  };

  beforeAll(async () => {
    // `npm test` builds web/dist (and the example under it) before vitest starts; build here only when it is
    // missing, since rebuilding empties web/dist under the other test files that serve it.
    if (!existsSync(`${webRoot}dist/index.html`)) await build({ configFile: `${webRoot}vite.config.ts`, logLevel: "warn" });
    // The real worker (`wrangler dev`, fresh local storage) serves the page just built and the API.
    server = await startDevWorker({ tokens: TOKENS });
    browser = await chromium.launch({
      executablePath: "/usr/bin/chromium",
      args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
    });
    mkdirSync(screenshots, { recursive: true });

    const { journals } = await call<{ journals: { name: string }[] }>(server.url, "GET", "/journals");
    journal = journals[0]!.name;
    const observedAt = Date.now() - 90_000;
    const event = (id: string, namespace: string, subject: string, data: unknown) => ({ record: { requestId: id, namespace, subject, data }, observedAt });
    await call(server.url, "POST", `/journals/${journal}/append-batch`, {
      events: [
        event(ids.toRelease, "acme", "user-1", { tokens: 42, model: "small" }),
        event(ids.toDiscard, "acme", "user-2", { tokens: -1 }),
        event(ids.xss, "xss", XSS_IMG, { html: XSS_SCRIPT, link: XSS_LINK, img: XSS_IMG }),
        event(ids.malformed, "acme", "user-3", { tokens: "many" }),
        ...ids.bulk.map((id, index) => event(id, "bulk", `b-${index + 1}`, { tokens: index + 1 })),
      ],
    });
    const reasons: Record<string, string> = {
      [ids.toRelease]: "rejected",
      [ids.toDiscard]: "malformed",
      [ids.malformed]: "malformed",
      ...Object.fromEntries(ids.bulk.map((id) => [id, "attempts_exhausted"])),
    };
    const claim = () => call<{ deliveries: Delivery[] }>(server.url, "POST", `/journals/${journal}/claim`, { consumer: CONSUMER, maxEvents: 100, leaseMs: 60_000 });
    const first = await claim();
    expect(first.deliveries.map((delivery) => delivery.event.id).sort()).toEqual([ids.toRelease, ids.toDiscard, ids.xss, ids.malformed, ...ids.bulk].sort());
    for (const delivery of first.deliveries) {
      if (delivery.event.id === ids.xss) {
        await call(server.url, "POST", `/journals/${journal}/nack`, { delivery: delivery.id, retryAfterMs: 0, error: `handler threw: ${XSS_IMG} ${XSS_SCRIPT}` });
      } else {
        await call(server.url, "POST", `/journals/${journal}/quarantine`, { delivery: delivery.id, reason: reasons[delivery.event.id] });
      }
    }
    const second = await claim();
    expect(second.deliveries.map((delivery) => delivery.event.id)).toEqual([ids.xss]);
    await call(server.url, "POST", `/journals/${journal}/quarantine`, { delivery: second.deliveries[0]!.id, reason: "rejected" });
    // Behind the event to release on the same key: it must stay behind it.
    ids.afterRelease = requestId();
    await call(server.url, "POST", `/journals/${journal}/append`, { event: event(ids.afterRelease, "acme", "user-1", { tokens: 7 }) });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
  });

  it("signs in, reviews, releases, discards, bulk-releases and exports; payloads stay text; cross-site forms and bad tokens get nowhere", async () => {
    const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on("dialog", (dialog) => {
      problems.push(`a JavaScript dialog opened: ${dialog.type()} ${dialog.message()}`);
      void dialog.dismiss();
    });
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    page.on("console", (message) => {
      if (message.type() !== "error") return;
      // The browser logs every refused fetch; the refused tokens and the 503 below are on purpose.
      const expectedRefusal = /status of (401|403|503)/.test(message.text()) && new URL(message.location().url).pathname.startsWith("/v1/");
      if (!expectedRefusal) problems.push(`console error: ${message.text()} (${message.location().url})`);
    });
    const base = server.url;
    const list = `/journals/${journal}/consumers/${CONSUMER}/quarantined`;

    // --- sign in: no token, a wrong token, an under-scoped token, then the operator's
    const served = await page.goto(`${base}/?sampleMs=1000&pageSize=3`);
    expect(served?.headers()["content-security-policy"]).toContain("default-src 'self'");
    const tokenInput = page.getByLabel("Operator token");
    await expect.poll(() => tokenInput.isVisible()).toBe(true);
    await tokenInput.fill("not-a-valid-token");
    await page.keyboard.press("Enter");
    await page.locator("#signin-message").waitFor();
    expect(await page.locator("#signin-message").textContent()).toContain("did not accept the token");

    // The under-scoped session's quarantine listing answers (403) only after the operator has
    // signed in again: a refused request of a session already signed out must not sign out the next one.
    let staleRefusal: Promise<unknown> | undefined;
    await page.route(`**${list}**`, async (route) => {
      if (route.request().headers()["authorization"] === `Bearer ${APPEND_TOKEN}`) {
        staleRefusal = page.waitForResponse((response) => response.request() === route.request());
        await new Promise((resolve) => setTimeout(resolve, 1_500));
      }
      await route.continue();
    });
    await tokenInput.fill(APPEND_TOKEN);
    await page.keyboard.press("Enter");
    await page.getByLabel("Consumer", { exact: true }).fill(CONSUMER);
    await page.getByRole("button", { name: "Open" }).click();
    await page.locator("#signin-message").waitFor();
    expect(await page.locator("#signin-message").textContent()).toContain("operate scope");
    expect(await page.evaluate<number>("sessionStorage.length")).toBe(0);

    await tokenInput.fill(OPS_TOKEN);
    await page.keyboard.press("Enter");
    // The fragment remembered the journal and consumer, so the review opens directly.
    const quarantinedCard = page.locator("[data-stat=quarantined] .stat-value");
    await expect.poll(() => quarantinedCard.textContent()).toBe("7");
    expect(staleRefusal).toBeDefined();
    expect(await (staleRefusal as Promise<{ status(): number }>).then((response) => response.status())).toBe(403);
    await page.waitForTimeout(300); // let the page handle that answer
    expect(await quarantinedCard.textContent()).toBe("7"); // still signed in
    expect(await page.locator("#signin-message").count()).toBe(0);
    expect(await page.evaluate<string>("document.cookie")).toBe("");

    // --- paging (3 a page here): Older → walks the cursor pages, ← Newer walks back
    const rows = page.locator(".results tbody tr");
    const pageIds = async () => (await rows.locator("td:first-child").allTextContents()).map((text) => text.trim());
    const older = page.getByRole("button", { name: "Older →" });
    const newer = page.getByRole("button", { name: "← Newer" });
    await expect.poll(() => rows.count()).toBeGreaterThan(0);
    const seen: string[] = [];
    let pageNumber = 1;
    for (;;) {
      await page.locator(".results[aria-busy=false]").waitFor();
      seen.push(...(await pageIds()));
      if (await older.isDisabled()) break;
      expect(pageNumber).toBeLessThan(7);
      await older.click();
      pageNumber += 1;
      await expect.poll(() => page.locator(".pager").textContent()).toContain(`Page ${pageNumber}`);
    }
    expect(pageNumber).toBeGreaterThan(1);
    expect(seen.sort()).toEqual([ids.toRelease, ids.toDiscard, ids.xss, ids.malformed, ...ids.bulk].sort());
    await newer.click();
    await expect.poll(() => page.locator(".pager").textContent()).toContain(`Page ${pageNumber - 1}`);
    expect(await page.evaluate<string>("document.activeElement.id")).toBe("quarantine-title");

    // The rest at the default page size (the page reloads; the token stays in this tab).
    await page.goto(`${base}/?sampleMs=1000${new URL(page.url()).hash}`);
    await expect.poll(() => quarantinedCard.textContent()).toBe("7");
    expect(await page.locator("[data-stat=pending] .stat-value").textContent()).toBe("1");
    expect(await page.locator("[data-stat=capacity-used]").textContent()).toContain("per-partition");
    // A backlog building up while the page samples (once a second here): the depth line climbs.
    for (let round = 1; round <= 4; round++) {
      await new Promise((resolve) => setTimeout(resolve, 1100));
      const batch = Array.from({ length: round * 2 }, (_, index) => ({
        record: { requestId: requestId(), namespace: "load", subject: `k-${round}-${index}`, data: { tokens: index } },
        observedAt: Date.now(),
      }));
      await call(base, "POST", `/journals/${journal}/append-batch`, { events: batch });
    }
    await expect.poll(() => page.locator("[data-stat=pending] .stat-value").textContent(), { timeout: 10_000 }).toBe("21");
    await expect.poll(() => page.locator(".chart-line").count(), { timeout: 10_000 }).toBe(2);
    await page.screenshot({ path: `${screenshots}overview.png`, fullPage: true });

    // --- the list: newest first (the worker's order=newest), every row's fields as text
    await expect.poll(() => rows.count()).toBe(7);
    const newestFirst = await call<{ items: { event: { id: string } }[] }>(base, "GET", `${list}?order=newest`);
    expect(await pageIds()).toEqual(newestFirst.items.map((item) => item.event.id));
    // A key part holding spaces (or /, or hidden characters) is shown JSON-quoted (web/src/text.ts).
    expect(await page.locator(".results tbody").textContent()).toContain(`xss/"${XSS_IMG}"`);

    // --- a failing list read is an error state with a retry, not a blank table
    await page.route("**/quarantined?**", (route) =>
      route.fulfill({ status: 503, contentType: "application/json", body: JSON.stringify({ error: { code: "backend", message: "storage unavailable", retryable: true } }) }),
    );
    await page.getByRole("button", { name: "Reload list" }).click();
    await page.locator(".results .banner.error").waitFor();
    expect(await page.locator(".results .banner.error").textContent()).toContain("storage unavailable");
    await page.unroute("**/quarantined?**");
    await page.locator(".results").getByRole("button", { name: "Retry" }).click();
    await expect.poll(() => rows.count()).toBe(7);

    // --- filters: reason, ordering key (namespace and subject), request id search
    const applyFilter = async (fields: { query?: string; reason?: string; namespace?: string; subject?: string }) => {
      await page.getByLabel("Search").fill(fields.query ?? "");
      await page.getByLabel("Reason").selectOption(fields.reason ?? "");
      await page.getByLabel("Namespace (exact)").fill(fields.namespace ?? "");
      await page.getByLabel("Subject (exact)").fill(fields.subject ?? "");
      await page.getByRole("button", { name: "Apply filter" }).click();
      await page.locator(".results[aria-busy=false]").waitFor();
    };
    await applyFilter({ reason: "malformed" });
    expect(await rows.count()).toBe(2);
    await applyFilter({ namespace: "acme", subject: "user-1" });
    expect(await rows.count()).toBe(1);
    expect(await rows.first().textContent()).toContain(ids.toRelease);
    await applyFilter({ query: ids.toDiscard });
    expect(await rows.count()).toBe(1);
    await applyFilter({ namespace: "nobody", subject: "none" });
    expect(await page.locator(".results .empty").textContent()).toContain("No quarantined event matches this filter");
    await applyFilter({});
    expect(await rows.count()).toBe(7);

    // --- inspect the event full of script payloads: all text, nothing runs
    await page.getByRole("button", { name: `Inspect ${ids.xss}` }).click();
    const inspect = page.locator("section.inspect");
    await inspect.waitFor();
    expect(await page.evaluate<string>("document.activeElement.id")).toBe("inspect-title");
    const json = await inspect.locator("pre.json").textContent();
    expect(JSON.parse(json ?? "")).toMatchObject({ requestId: ids.xss, subject: XSS_IMG, data: { html: XSS_SCRIPT, link: XSS_LINK, img: XSS_IMG } });
    const attempts = inspect.locator("table").first().locator("tbody tr");
    expect(await attempts.count()).toBe(2);
    expect(await attempts.nth(0).textContent()).toContain(`handler threw: ${XSS_IMG} ${XSS_SCRIPT}`);
    expect(await attempts.nth(1).textContent()).toContain("reason: rejected");
    await inspect.locator(".audit .empty").waitFor();
    expect(await page.locator("img").count()).toBe(0);
    expect(await page.locator("script:not([src])").count()).toBe(0);
    expect(await page.locator('a[href^="javascript"]').count()).toBe(0);
    await inspect.screenshot({ path: `${screenshots}inspect.png` });
    await page.getByRole("button", { name: "← Back to the list" }).click();
    expect(await page.evaluate<string>("document.activeElement.getAttribute('aria-label')")).toBe(`Inspect ${ids.xss}`);

    // --- release by keyboard: from the row's Inspect button on, Enter/Tab only, confirmed in the dialog
    await page.getByRole("button", { name: `Inspect ${ids.toRelease}` }).focus();
    await page.keyboard.press("Enter");
    await inspect.waitFor();
    expect(await page.evaluate<string>("document.activeElement.id")).toBe("inspect-title");
    await page.keyboard.press("Tab"); // from the heading to the first action
    expect(await page.evaluate<string>("document.activeElement.textContent")).toBe("Release…");
    expect(await page.evaluate<string>("getComputedStyle(document.activeElement).outlineStyle")).toBe("solid");
    await page.keyboard.press("Enter");
    const dialog = page.locator("dialog[open]");
    await dialog.waitFor();
    expect(await dialog.textContent()).toContain("acme/user-1");
    expect(await page.evaluate<string>("document.activeElement.textContent")).toBe("Cancel");
    await page.keyboard.press("Tab");
    expect(await page.evaluate<string>("document.activeElement.textContent")).toBe("Release");
    await page.keyboard.press("Enter");
    await inspect.locator(".banner.success").waitFor();
    expect(await page.evaluate<boolean>("document.activeElement.classList.contains('banner')")).toBe(true);
    await inspect.locator(".audit tbody tr").waitFor();
    expect(await inspect.locator(".audit tbody tr").textContent()).toContain("release");
    expect(await inspect.locator(".audit tbody tr").textContent()).toContain("ops");

    // Released at its original position: the next claim on its key delivers it, not the event behind it.
    const afterRelease = await call<{ deliveries: Delivery[] }>(base, "POST", `/journals/${journal}/claim`, { consumer: CONSUMER, maxEvents: 100, leaseMs: 60_000 });
    const claimed = afterRelease.deliveries.map((delivery) => delivery.event.id);
    expect(claimed).toContain(ids.toRelease);
    expect(claimed).not.toContain(ids.afterRelease);
    await call(base, "POST", `/journals/${journal}/ack`, { deliveries: afterRelease.deliveries.map((delivery) => delivery.id) });

    // --- discard, with the dialog
    await page.getByRole("button", { name: "← Back to the list" }).click();
    await expect.poll(() => rows.count()).toBe(6);
    await page.getByRole("button", { name: `Inspect ${ids.toDiscard}` }).click();
    await page.getByRole("button", { name: "Discard…" }).click();
    await dialog.waitFor();
    await dialog.getByRole("button", { name: "Discard" }).click();
    await inspect.locator(".banner.success").waitFor();
    const audit = await call<{ items: { action: string; requestId: string; actor: string }[] }>(base, "GET", `/journals/${journal}/audit?requestId=${ids.toDiscard}`);
    expect(audit.items).toMatchObject([{ action: "discard", requestId: ids.toDiscard, actor: "ops" }]);
    await page.getByRole("button", { name: "← Back to the list" }).click();

    // --- bulk release of a filter: the dry-run count, then the real run on the counted events only. While the
    // dialog is open, another operator discards one of them and a new event is quarantined under the filter:
    // the confirmation sends the dry run's ids, so it skips the first and leaves the second alone.
    await applyFilter({ reason: "attempts_exhausted" });
    expect(await rows.count()).toBe(3);
    const bulkBodies: unknown[] = [];
    const onBulk = (request: { url(): string; postDataJSON(): unknown }) => {
      if (new URL(request.url()).pathname.endsWith("/quarantined/bulk")) bulkBodies.push(request.postDataJSON());
    };
    page.on("request", onBulk);
    const [dryAnswer] = await Promise.all([
      page.waitForResponse((response) => new URL(response.url()).pathname.endsWith("/quarantined/bulk")),
      page.getByRole("button", { name: "Release all matching…" }).click(),
    ]);
    const dryRun = (await dryAnswer.json()) as { matched: number; requestIds: string[] };
    expect([...dryRun.requestIds].sort()).toEqual([...ids.bulk].sort());
    await dialog.waitFor();
    expect(await dialog.locator(".bulk-count").textContent()).toBe("3");
    await call(base, "POST", `${list}/${ids.bulk[0]}/discard`, {});
    const late = requestId();
    await call(base, "POST", `/journals/${journal}/append`, { event: { record: { requestId: late, namespace: "bulk", subject: "b-late", data: { tokens: 9 } }, observedAt: Date.now() } });
    const lateClaim = await call<{ deliveries: Delivery[] }>(base, "POST", `/journals/${journal}/claim`, { consumer: CONSUMER, maxEvents: 100, leaseMs: 60_000 });
    const lateDelivery = lateClaim.deliveries.find((delivery) => delivery.event.id === late);
    expect(lateDelivery).toBeDefined();
    await call(base, "POST", `/journals/${journal}/quarantine`, { delivery: lateDelivery!.id, reason: "attempts_exhausted" });
    await dialog.getByRole("button", { name: "Release 3" }).click();
    await expect.poll(() => page.locator(".bulk-result").textContent()).toContain("Released 2 of the 3 events the dry run counted. Skipped 1");
    page.off("request", onBulk);
    expect(bulkBodies).toEqual([
      { action: "release", dryRun: true, reason: "attempts_exhausted" },
      { action: "release", dryRun: false, requestIds: dryRun.requestIds },
    ]);
    expect(await page.locator(".bulk-result .bulk-skipped").textContent()).toContain(ids.bulk[0]);
    expect(await page.locator(".bulk-result .bulk-failed").count()).toBe(0);
    await expect.poll(() => rows.count()).toBe(1);
    expect(await pageIds()).toEqual([late]);
    const left = await call<{ items: { event: { id: string } }[] }>(base, "GET", list);
    expect(left.items.map((item) => item.event.id).sort()).toEqual([ids.xss, ids.malformed, late].sort());
    const lateAudit = await call<{ items: unknown[] }>(base, "GET", `/journals/${journal}/audit?requestId=${late}`);
    expect(lateAudit.items).toEqual([]);

    // --- export of the current filter (none): NDJSON with attempt histories, as a download
    await applyFilter({});
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Export NDJSON" }).click()]);
    expect(download.suggestedFilename()).toMatch(/\.ndjson$/);
    const exported = readFileSync(await download.path(), "utf8")
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map((line) => JSON.parse(line) as { event: { id: string }; attempts: unknown[]; reason: string });
    expect(exported.map((item) => item.event.id).sort()).toEqual([ids.xss, ids.malformed, late].sort());
    expect(exported.find((item) => item.event.id === ids.xss)?.attempts).toHaveLength(2);
    await expect.poll(() => quarantinedCard.textContent(), { timeout: 10_000 }).toBe("3");

    // --- a cross-site form POST to the release route (the JSON-in-text/plain trick) is refused
    const attacker = await context.newPage();
    await attacker.route("http://attacker.example/**", (route) =>
      route.fulfill({
        contentType: "text/html",
        body: `<form method="POST" enctype="text/plain" action="${base}/v1${list}/${ids.xss}/release">
          <input name='{"now":1,"x":"' value='"}'><button>go</button></form>`,
      }),
    );
    await attacker.goto("http://attacker.example/");
    const [answer] = await Promise.all([
      attacker.waitForResponse((response) => response.url().endsWith("/release")),
      attacker.getByRole("button", { name: "go" }).click(),
    ]);
    // 415 (not a JSON body) before 401 (no bearer header): either way, refused before anything acts.
    expect([401, 415]).toContain(answer.status());
    const still = await call<{ items: { event: { id: string } }[] }>(base, "GET", `${list}?query=${ids.xss}`);
    expect(still.items.map((item) => item.event.id)).toEqual([ids.xss]);
    await attacker.close();

    // --- the session's token revoked/changed under it: the next 401 shows the sign-in screen
    await page.evaluate("sessionStorage.setItem('isostore.operatorToken', 'a-token-that-was-revoked')");
    await page.reload();
    await page.locator("#signin-message").waitFor();
    expect(await page.locator("#signin-message").textContent()).toContain("did not accept the token");

    expect(problems).toEqual([]);
    await context.close();
  }, 110_000);
});
