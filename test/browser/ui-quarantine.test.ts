/**
 * The operator page's quarantine review and overview (web/src), in Chromium
 * against the fake operator routes of ui-fake-api.ts:
 * - ordering keys that join to the same `namespace/subject`, or differ only in
 *   hidden characters, are shown differently, and the filter selects by
 *   namespace and subject separately (list, bulk dry run and action, export);
 * - a bidi override in a key, a record or an error is shown escaped, in
 *   bidi-isolated elements, and reorders nothing;
 * - a double click on a bulk button runs one dry run, one dialog, one action;
 * - bulk and export act on what the filter inputs show, applied first;
 * - the Dropped card describes a lifetime count under any policy;
 * - an action's stats refresh is not swallowed by a read already in flight;
 * - inspect shows any stored time without failing, says when an event was
 *   resolved elsewhere (and refreshes), and follows the audit log's cursor;
 * - export hands the worker's bytes to the download as they came.
 * (Sign-out closing a dialog, the status toast: ui-signout.test.ts.)
 */
import "../../web/src/app.css";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { page, userEvent } from "vitest/browser";
import type { QuarantinedEvent } from "../../src/journal/types.js";
import { OperatorApi } from "../../web/src/api.js";
import { Overview } from "../../web/src/overview.js";
import { QuarantineReview } from "../../web/src/quarantine.js";
import { displayValue, parseTyped } from "../../web/src/text.js";
import { CONSUMER, FakeApi, JOURNAL, TOKEN } from "./ui-fake-api.js";

const selection = { journal: JOURNAL, consumer: CONSUMER };
const RLO = "\u202E";

let fake: FakeApi;
let container: HTMLElement;
let overview: Overview | null = null;

/** Close what a failed test left open (a modal dialog would block the next test). */
function closeDialogs(): void {
  for (const dialog of document.querySelectorAll("dialog")) {
    dialog.close();
    dialog.remove();
  }
}

beforeEach(() => {
  fake = new FakeApi().install();
  container = document.createElement("div");
  container.style.width = "1200px";
  document.body.append(container);
});

afterEach(() => {
  overview?.stop();
  overview = null;
  closeDialogs();
  container.remove();
  fake.uninstall();
});

/** A refused token is not expected here: fail loudly. */
function rethrow(error: Error): never {
  throw error;
}

async function mountReview(): Promise<QuarantineReview> {
  const review = new QuarantineReview({
    api: new OperatorApi(TOKEN),
    selection,
    pageSize: 25,
    onAuthError: rethrow,
    onChanged: () => undefined,
    announce: () => undefined,
  });
  container.append(review.element);
  await review.reload();
  return review;
}

const rows = () => [...container.querySelectorAll<HTMLTableRowElement>(".results tbody tr")];
const cellText = (column: number) => rows().map((row) => row.cells[column]!.textContent ?? "");
const rowIds = () => rows().map((row) => row.querySelector<HTMLButtonElement>("button[data-request-id]")!.dataset["requestId"]);
const openDialogs = () => document.querySelectorAll("dialog[open]");
const button = (name: string) => page.getByRole("button", { name, exact: true });
const listIdle = () => expect.poll(() => container.querySelector(".results")?.getAttribute("aria-busy")).toBe("false");

/** Whether every character of `element`'s text sits to the right of the one before it on its line (nothing reordered). */
function inLogicalOrder(element: Element): boolean {
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  let previous: DOMRect | null = null;
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.textContent ?? "";
    for (let index = 0; index < text.length; index++) {
      range.setStart(node, index);
      range.setEnd(node, index + 1);
      const rect = range.getBoundingClientRect();
      if (rect.width === 0) continue;
      if (previous && Math.abs(rect.top - previous.top) < 2 && rect.left < previous.left) return false;
      previous = rect;
    }
  }
  return true;
}

const unicodeBidi = (element: Element) => getComputedStyle(element).unicodeBidi;

describe("web UI: ordering keys (namespace and subject, unambiguous)", () => {
  it("shows keys that join to the same text, or differ only in hidden characters, differently, and filters by namespace and subject apart", async () => {
    const [ab_c, a_bc] = fake.seed([
      { namespace: "a/b", subject: "c" },
      { namespace: "a", subject: "b/c" },
      { namespace: "acme", subject: "user 1" },
      { namespace: "acme", subject: "user\n1" },
      { namespace: "acme ", subject: "user 1" },
      { namespace: "acme", subject: "user\u200B 1" },
      { namespace: "acme", subject: "user-1" },
    ]);
    await mountReview();
    expect(cellText(1).reverse()).toEqual(['"a/b"/c', 'a/"b/c"', 'acme/"user 1"', 'acme/"user\\n1"', '"acme "/"user 1"', 'acme/"user\\u200B 1"', "acme/user-1"]);
    // Rendered, too: no two rows read the same.
    const shown = rows().map((row) => row.cells[1]!.innerText);
    expect(new Set(shown).size).toBe(shown.length);

    // The filter: namespace and subject, each exact, sent apart; a part typed as the list shows it (quoted) is read as JSON.
    await userEvent.fill(page.getByLabelText("Namespace (exact)"), "a");
    await userEvent.fill(page.getByLabelText("Subject (exact)"), '"b/c"');
    await button("Apply filter").click();
    await listIdle();
    expect(rowIds()).toEqual([a_bc]);
    const listed = fake.requestsTo("/quarantined").at(-1)!;
    expect(listed.query).toMatchObject({ namespace: "a", subject: "b/c" });
    expect(listed.query).not.toHaveProperty("key");

    // Inspect and its dialog show the key as the list does.
    await page.getByRole("button", { name: `Inspect ${a_bc}` }).click();
    const inspect = container.querySelector("section.inspect")!;
    expect(inspect.querySelector(".facts")!.textContent).toContain('Ordering keya/"b/c"');
    await button("Release…").click();
    await expect.poll(() => openDialogs().length).toBe(1);
    expect(openDialogs()[0]!.textContent).toContain('ordering key a/"b/c" at');
    await button("Cancel").click();
    await button("← Back to the list").click();

    // Export and bulk send the same two fields.
    await button("Export NDJSON").click();
    await expect.poll(() => fake.requestsTo("/quarantined/export").length).toBe(1);
    expect(fake.requestsTo("/quarantined/export")[0]!.query).toEqual({ namespace: "a", subject: "b/c" });
    await expect.poll(() => container.querySelector(".bulk-result")?.textContent).toContain("Exported 1 event");

    await button("Discard all matching…").click();
    await expect.poll(() => openDialogs().length).toBe(1);
    const dialog = openDialogs()[0]!;
    expect(dialog.querySelector(".bulk-count")!.textContent).toBe("1");
    expect(dialog.textContent).toContain('(namespace a, subject "b/c")');
    await button("Discard 1").click();
    await expect.poll(() => container.querySelector(".bulk-result")?.textContent).toContain("Discarded 1 of the 1 event");
    expect(fake.requestsTo("/quarantined/bulk").map((request) => request.body)).toEqual([
      { action: "discard", dryRun: true, namespace: "a", subject: "b/c" },
      { action: "discard", dryRun: false, requestIds: [a_bc] },
    ]);
    // The other key that joins to "a/b/c" is still quarantined.
    expect(fake.quarantined.map((item) => item.event.id)).toContain(ab_c);
    expect(fake.quarantined.map((item) => item.event.id)).not.toContain(a_bc);
  });

  it("reads a part typed as the list shows it back as that part, and shows no two parts alike", () => {
    const parts = ["acme", "a/b", "user 1", "user\n1", "acme ", " acme", "user\u200B 1", `x${RLO}y`, '"quoted"', "back\\slash", "\u00A0", "tab\there", "\u{E0041}tag", "\uD800", "caf\u00E9", "cafe\u0301", "ünïcødé", "日本"];
    const shownParts = parts.map(displayValue);
    expect(new Set(shownParts).size).toBe(parts.length);
    for (const [index, part] of parts.entries()) expect(parseTyped(shownParts[index]!)).toBe(part);
    // Plain parts stay as they are; the others are quoted, with nothing hidden left in them.
    expect(shownParts.slice(0, 3)).toEqual(["acme", '"a/b"', '"user 1"']);
    expect(shownParts.at(-2)).toBe("ünïcødé");
    for (const shownPart of shownParts) expect(shownPart).toMatch(/^[\x20-\x7E\u00C0-\u00FF\u3000-\u9FFF]+$/);
  });
});

describe("web UI: untrusted text cannot reorder the page (bidi)", () => {
  it("shows bidi overrides escaped in keys, records and errors, in isolated elements, in logical order", async () => {
    const subject = `user-9${RLO}}tnuocca-rehto{`;
    const record = { note: `pay ${RLO}001$ now`, [`k${RLO}ey`]: [1, 2], plain: "after the override" };
    const [id] = fake.seed([{ namespace: "acme", subject, data: record, nackError: `boom ${RLO}kcab\nsecond line` }]);
    await mountReview();

    const [idCode, keyCode] = [rows()[0]!.cells[0]!.querySelector("code")!, rows()[0]!.cells[1]!.querySelector("code")!];
    expect(keyCode.textContent).toBe('acme/"user-9\\u202E}tnuocca-rehto{"');
    expect(idCode.textContent).toBe(id);
    for (const element of [idCode, keyCode]) {
      expect(unicodeBidi(element)).toBe("isolate");
      expect(inLogicalOrder(element)).toBe(true);
    }

    await page.getByRole("button", { name: `Inspect ${id}` }).click();
    const inspect = container.querySelector("section.inspect")!;
    const pre = inspect.querySelector("pre.json")!;
    expect(pre.textContent).not.toContain(RLO);
    expect(pre.textContent).toContain("\\u202E");
    expect(JSON.parse(pre.textContent ?? "")).toEqual({ requestId: id, namespace: "acme", subject, data: record });
    expect(unicodeBidi(pre)).toBe("isolate");
    expect(inLogicalOrder(pre)).toBe(true);
    const error = inspect.querySelector("table tbody tr td:nth-child(4) span")!;
    expect(error.textContent).toBe("boom \\u202Ekcab\nsecond line");
    expect(unicodeBidi(error)).toBe("isolate");
    expect(inLogicalOrder(error)).toBe(true);
    const inspectCodes = [...inspect.querySelectorAll("h2 code, .facts code")];
    expect(inspectCodes.map((element) => element.textContent)).toEqual([id, 'acme/"user-9\\u202E}tnuocca-rehto{"']);
    for (const element of inspectCodes) expect(unicodeBidi(element)).toBe("isolate");

    await button("Release…").click();
    await expect.poll(() => openDialogs().length).toBe(1);
    const dialogBody = openDialogs()[0]!.querySelector(".confirm-body")!;
    expect(dialogBody.textContent).not.toContain(RLO);
    for (const element of dialogBody.querySelectorAll("code")) expect(unicodeBidi(element)).toBe("isolate");
    expect(inLogicalOrder(dialogBody)).toBe(true);
    await button("Release").click();
    await expect.poll(() => inspect.querySelector(".banner.success")?.textContent).toContain('back on key acme/"user-9\\u202E}tnuocca-rehto{" at position');
    expect(inLogicalOrder(inspect.querySelector(".banner.success")!)).toBe(true);
  });
});

describe("web UI: one bulk action at a time", () => {
  it("a double click on Discard all runs one dry run, opens one dialog and acts once; the buttons wait until it is over", async () => {
    const ids = fake.seed([1, 2, 3].map((n) => ({ namespace: "bulk", subject: `b-${n}` })));
    await mountReview();
    const toolbar = ["Release all matching…", "Discard all matching…", "Export NDJSON"].map((name) => button(name).element() as HTMLButtonElement);
    const held = fake.hold((request) => request.route === "/quarantined/bulk");
    await userEvent.dblClick(button("Discard all matching…"));
    await held.arrived;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(fake.requestsTo("/quarantined/bulk")).toHaveLength(1);
    expect(toolbar.map((control) => control.disabled)).toEqual([true, true, true]);
    // A click on another bulk button meanwhile does nothing either.
    toolbar[0]!.click();
    held.release();
    await expect.poll(() => openDialogs().length).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(openDialogs()).toHaveLength(1);
    expect(fake.requestsTo("/quarantined/bulk")).toHaveLength(1);
    expect(toolbar.map((control) => control.disabled)).toEqual([true, true, true]);

    await button("Discard 3").click();
    await expect.poll(() => container.querySelector(".bulk-result")?.textContent).toContain("Discarded 3 of the 3 events the dry run counted.");
    await expect.poll(() => toolbar.map((control) => control.disabled)).toEqual([false, false, false]);
    expect(openDialogs()).toHaveLength(0);
    expect(fake.requestsTo("/quarantined/bulk").map((request) => request.body)).toEqual([
      { action: "discard", dryRun: true },
      { action: "discard", dryRun: false, requestIds: [...ids].reverse() },
    ]);
    // Focus went back to the button that started it, enabled again.
    expect(document.activeElement).toBe(toolbar[1]);
  });

  it("keeps the bulk and export buttons disabled while the dialog is open, and enables them after a cancel", async () => {
    fake.seed([{ namespace: "bulk", subject: "one" }]);
    await mountReview();
    const toolbar = ["Release all matching…", "Discard all matching…", "Export NDJSON"].map((name) => button(name).element() as HTMLButtonElement);
    await button("Release all matching…").click();
    await expect.poll(() => openDialogs().length).toBe(1);
    expect(toolbar.map((control) => control.disabled)).toEqual([true, true, true]);
    toolbar[1]!.click();
    toolbar[2]!.click();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(openDialogs()).toHaveLength(1);
    expect(fake.requestsTo("/quarantined/bulk")).toHaveLength(1);
    expect(fake.requestsTo("/quarantined/export")).toHaveLength(0);
    await button("Cancel").click();
    await expect.poll(() => toolbar.map((control) => control.disabled)).toEqual([false, false, false]);
    expect(container.querySelector(".bulk-result")?.textContent).toContain("Bulk release cancelled; nothing changed.");
    expect(document.activeElement).toBe(toolbar[0]);
  });
});

describe("web UI: bulk and export act on what the filter inputs show", () => {
  it("applies typed, unapplied filter inputs (reloading the list) before the dry run and before the export", async () => {
    const [s1, s2] = fake.seed([
      { namespace: "acme", subject: "s1" },
      { namespace: "acme", subject: "s2" },
    ]);
    await mountReview();
    expect(rows()).toHaveLength(2);

    await userEvent.fill(page.getByLabelText("Subject (exact)"), "s1");
    await button("Discard all matching…").click();
    await expect.poll(() => openDialogs().length).toBe(1);
    expect(fake.requestsTo("/quarantined/bulk")[0]!.body).toEqual({ action: "discard", dryRun: true, subject: "s1" });
    expect(openDialogs()[0]!.querySelector(".bulk-count")!.textContent).toBe("1");
    expect(openDialogs()[0]!.textContent).toContain("(subject s1)");
    // The list behind the dialog shows the same filter.
    expect(fake.requestsTo("/quarantined").at(-1)!.query).toMatchObject({ subject: "s1" });
    expect(rowIds()).toEqual([s1]);
    await button("Cancel").click();
    await expect.poll(() => openDialogs().length).toBe(0);

    await userEvent.fill(page.getByLabelText("Subject (exact)"), "s2");
    await button("Export NDJSON").click();
    await expect.poll(() => fake.requestsTo("/quarantined/export").length).toBe(1);
    expect(fake.requestsTo("/quarantined/export")[0]!.query).toEqual({ subject: "s2" });
    await listIdle();
    expect(rowIds()).toEqual([s2]);
    await expect.poll(() => container.querySelector(".bulk-result")?.textContent).toContain("Exported 1 event");
    // It names the filter the file holds (the inputs may change while it is read).
    expect(container.querySelector(".bulk-result")?.textContent).toContain("It holds what matched (subject s2).");
  });
});

describe("web UI: overview", () => {
  const mountOverview = (sampleMs = 60_000) => {
    overview = new Overview({ api: new OperatorApi(TOKEN), selection, sampleMs, onAuthError: rethrow });
    container.append(overview.element);
    return overview;
  };
  const cardValue = (stat: string) => container.querySelector(`[data-stat=${stat}] .stat-value`)?.textContent;

  it("a filter changed while the dry run counts opens no dialog: the count was of a filter no longer shown, and nothing is done", async () => {
    fake.seed([
      { namespace: "acme", subject: "s1" },
      { namespace: "acme", subject: "s2" },
    ]);
    await mountReview();
    await userEvent.fill(page.getByLabelText("Subject (exact)"), "s1");
    const held = fake.hold((request) => request.route === "/quarantined/bulk");
    await button("Discard all matching…").click();
    await held.arrived;
    // The operator corrects the filter while it counts (the filter inputs stay live).
    await userEvent.fill(page.getByLabelText("Subject (exact)"), "s2");
    held.release();
    await expect.poll(() => container.querySelector(".bulk-result")?.textContent).toContain("The filter changed while the dry run counted");
    expect(openDialogs()).toHaveLength(0);
    expect(fake.requestsTo("/quarantined/bulk").filter((request) => request.body?.["dryRun"] === false)).toEqual([]);
  });

  it("tells the operator that Search matches keys as stored, without the quotes the list shows", async () => {
    await mountReview();
    const search = page.getByRole("searchbox", { name: "Search" }).element() as HTMLInputElement;
    const help = document.getElementById(search.getAttribute("aria-describedby") ?? "");
    expect(help?.textContent).toContain("without the quotes the list shows");
  });

  it("describes Dropped as the journal-wide lifetime count of events lost to drop_oldest, under refuse too", async () => {
    fake.stats = { ...fake.stats, dropped: 4, capacity: { ...fake.stats.capacity, policy: "refuse" } };
    mountOverview().start();
    await expect.poll(() => cardValue("dropped")).toBe("4");
    const note = container.querySelector("[data-stat=dropped] .stat-note")!.textContent;
    expect(note).not.toContain("always 0");
    expect(note).toContain("lifetime count of events lost to drop_oldest");
  });

  it("reads the stats once more after an action when a read was already in flight", async () => {
    fake.stats = { ...fake.stats, quarantined: 2 };
    const first = fake.hold((request) => request.route === "/stats");
    const view = mountOverview();
    view.start();
    await first.arrived; // answered as of before the action, delivered after it
    fake.stats = { ...fake.stats, quarantined: 1 };
    const refreshed = view.refresh();
    first.release();
    await refreshed;
    expect(cardValue("quarantined")).toBe("1");
    expect(fake.requestsTo("/stats")).toHaveLength(2);
  });
});

describe("web UI: inspect", () => {
  const inspectButton = (id: string) => container.querySelector<HTMLButtonElement>(`button[data-request-id="${id}"]`)!;
  const fact = (label: string) => [...container.querySelectorAll(".inspect .facts > div")].find((div) => div.querySelector("dt")?.textContent === label)?.querySelector("dd");

  it("shows a time past year 9999 with its whole year, and one no date can hold as its number, without failing to open", async () => {
    const [micro, huge] = fake.seed([
      { namespace: "acme", subject: "micro" },
      { namespace: "acme", subject: "huge" },
    ]);
    // A producer that sent µs (accepted: at most 8.64e15), and a stored event from before that bound (up to 2^53 - 1).
    (fake.quarantined[0]!.event as { observedAt: number }).observedAt = 1_700_000_000_000 * 1000;
    (fake.quarantined[1]!.event as { observedAt: number }).observedAt = Number.MAX_SAFE_INTEGER;
    await mountReview();

    inspectButton(micro!).click();
    expect(fact("Observed at")?.textContent).toBe("+055840-11-08 22:13:20 UTC");
    expect(fact("Observed at")?.querySelector("time")?.getAttribute("datetime")).toBe("+055840-11-08T22:13:20.000Z");
    await button("← Back to the list").click();

    inspectButton(huge!).click();
    expect(container.querySelector("section.inspect")).not.toBeNull();
    expect(fact("Observed at")?.textContent).toBe("9007199254740991 ms since the epoch (not a date)");
    expect(fact("Quarantined at")?.textContent).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
  });

  it("a release refused as not_quarantined (resolved elsewhere) says so, keeps the actions disabled and refreshes the list and stats", async () => {
    const [id] = fake.seed([{ namespace: "acme", subject: "gone" }]);
    const changed: string[] = [];
    const announced: string[] = [];
    const review = new QuarantineReview({
      api: new OperatorApi(TOKEN),
      selection,
      pageSize: 25,
      onAuthError: rethrow,
      onChanged: () => changed.push("stats"),
      announce: (message) => announced.push(message),
    });
    container.append(review.element);
    await review.reload();
    inspectButton(id!).click();
    await expect.poll(() => container.querySelector(".audit .empty")).not.toBeNull();
    // Another operator discards it meanwhile.
    fake.quarantined.length = 0;
    fake.audit.push({ seq: 1, at: 1_700_000_100_000, action: "discard", consumer: selection.consumer as never, requestId: id!, reason: "rejected", actor: "other-operator" });
    const listReads = fake.requestsTo("/quarantined", "GET").length;

    await button("Release…").click();
    await button("Release").click();
    await expect.poll(() => container.querySelector(".inspect .banner:not([hidden])")?.textContent ?? "").toContain("is no longer quarantined");
    const banner = container.querySelector(".inspect .banner")!;
    expect(banner.className).toContain("info");
    expect(banner.textContent).toContain("Nothing was released here");
    expect([button("Release…"), button("Discard…")].map((control) => (control.element() as HTMLButtonElement).disabled)).toEqual([true, true]);
    expect(changed).toEqual(["stats"]);
    expect(announced).toHaveLength(1);
    await expect.poll(() => container.querySelector(".audit tbody tr")?.textContent ?? "").toContain("other-operator");
    await expect.poll(() => fake.requestsTo("/quarantined", "GET").length).toBe(listReads + 1);
    await button("← Back to the list").click();
    await listIdle();
    expect(rows()).toHaveLength(0);
  });

  it("follows the audit cursor: an event with more entries than a page shows them all, up to 3,000, then offers the rest", async () => {
    const [id] = fake.seed([{ namespace: "acme", subject: "busy" }]);
    for (let seq = 1; seq <= 3100; seq++) {
      fake.audit.push({ seq, at: 1_700_000_000_000 + seq, action: seq % 2 ? "release" : "discard", consumer: selection.consumer as never, requestId: id!, reason: "rejected", actor: `ops-${seq}` });
    }
    await mountReview();
    inspectButton(id!).click();
    const auditRows = () => [...container.querySelectorAll<HTMLTableRowElement>(".audit tbody tr")];
    await expect.poll(() => auditRows().length).toBe(3000);
    expect([auditRows()[0]!.cells[0]!.textContent, auditRows().at(-1)!.cells[0]!.textContent]).toEqual(["1", "3000"]);
    expect(fake.requestsTo(`/journals/${JOURNAL}/audit`).map((request) => request.query["after"] ?? null)).toEqual([null, "a1.1000", "a1.2000"]);
    expect(container.querySelector(".audit-more")?.textContent).toContain("The oldest 3,000 entries are shown; newer ones exist");

    // A failed "Load more" keeps the entries shown and the focus on the button, and says so.
    fake.failNext = (request) => request.route === `/journals/${JOURNAL}/audit`;
    await button("Load more audit entries").click();
    await expect.poll(() => container.querySelector(".audit [role=alert]")?.textContent ?? "").toContain("More audit entries could not be loaded");
    expect(auditRows()).toHaveLength(3000);
    expect(document.activeElement?.textContent).toBe("Load more audit entries");
    await button("Load more audit entries").click();
    await expect.poll(() => auditRows().length).toBe(3100);
    expect(fake.requestsTo(`/journals/${JOURNAL}/audit`).map((request) => request.query["after"] ?? null).slice(3)).toEqual(["a1.3000", "a1.3000"]);
    expect(auditRows().at(-1)!.cells[0]!.textContent).toBe("3100");
    expect(container.querySelector(".audit-more")).toBeNull();
    // The button went away under the focus: it lands on the entries' heading.
    expect(document.activeElement?.textContent).toBe("Audit entries");
  });
});

describe("web UI: export", () => {
  it("downloads the worker's bytes and counts their lines without reading the export as one string", async () => {
    fake.seed([1, 2, 3].map((n) => ({ namespace: "export", subject: `e-${n}` })));
    await mountReview();
    const read = vi.spyOn(Response.prototype, "text");
    const blobs: Blob[] = [];
    const createObjectURL = URL.createObjectURL.bind(URL);
    const made = vi.spyOn(URL, "createObjectURL").mockImplementation((blob) => {
      blobs.push(blob as Blob);
      return createObjectURL(blob);
    });
    try {
      await button("Export NDJSON").click();
      await expect.poll(() => container.querySelector(".bulk-result")?.textContent).toContain("Exported 3 events");
      expect(read).not.toHaveBeenCalled();
      expect(blobs).toHaveLength(1);
      const lines = (await blobs[0]!.text()).split("\n");
      expect(lines.slice(0, -1).map((line) => (JSON.parse(line) as QuarantinedEvent).event.orderingKey.subject)).toEqual(["e-3", "e-2", "e-1"]);
      expect(lines.at(-1)).toBe("");
    } finally {
      read.mockRestore();
      made.mockRestore();
    }
  });
});
