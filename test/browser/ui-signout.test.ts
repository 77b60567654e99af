/**
 * The operator page as a whole (web/src/main.ts, run in this Chromium page
 * against the fake operator routes of ui-fake-api.ts): signing out, by the
 * button or because the worker refused the token, closes every confirmation
 * dialog as a cancel, and a dry run answered after sign-out opens none; the
 * action it would have confirmed is never sent. The journals answer of a
 * session signed out while it loaded opens nothing, sends nothing and leaves
 * the next session alone. The status toast wraps, takes no clicks and clears.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { page, userEvent } from "vitest/browser";
import { CONSUMER, FakeApi, JOURNAL, TOKEN } from "./ui-fake-api.js";

let fake: FakeApi;
const openDialogs = () => document.querySelectorAll("dialog");
const button = (name: string) => page.getByRole("button", { name, exact: true });

beforeAll(async () => {
  fake = new FakeApi().install();
  sessionStorage.clear();
  // Stats read every second, the consumer chosen in the fragment: the page opens on its review.
  history.replaceState(null, "", `?sampleMs=1000#journal=${JOURNAL}&consumer=${CONSUMER}`);
  const app = document.createElement("div");
  app.id = "app";
  document.body.append(app);
  await import("../../web/src/main.js");
});

afterAll(() => fake.uninstall());
afterEach(() => vi.useRealTimers());

beforeEach(async () => {
  // What a failed test left open (a modal dialog would block this one).
  for (const dialog of document.querySelectorAll("dialog")) {
    dialog.close();
    dialog.remove();
  }
  if (document.querySelector("#token") === null) (button("Sign out").element() as HTMLButtonElement).click();
  fake.refuseAll = false;
  fake.quarantined.length = 0;
  fake.requests.length = 0;
  fake.seed([{ namespace: "acme", subject: "user-1" }, { namespace: "acme", subject: "user-2" }]);
  await userEvent.fill(page.getByLabelText("Operator token"), TOKEN);
  await button("Sign in").click();
  await expect.poll(() => document.querySelectorAll(".results tbody tr").length).toBe(2);
});

const signInShown = () => expect.poll(() => document.querySelector("#token") !== null).toBe(true);
const acted = () => fake.requests.filter((request) => request.method === "POST" && (/\/(release|discard)$/.test(request.route) || request.body?.["dryRun"] === false));

describe("web UI: sign-out closes confirmation dialogs", () => {
  it("a refused token (401 of a stats read) while Discard… asks for confirmation closes the dialog as a cancel", async () => {
    const id = fake.quarantined[0]!.event.id;
    await page.getByRole("button", { name: `Inspect ${id}` }).click();
    await button("Discard…").click();
    await expect.poll(() => openDialogs().length).toBe(1);
    fake.refuseAll = true; // the token is revoked; the next stats read (within a second) is refused
    await signInShown();
    expect(document.querySelector("#signin-message")?.textContent).toContain("did not accept the token");
    await expect.poll(() => openDialogs().length).toBe(0);
    expect(acted()).toEqual([]);
  });

  it("the Sign out button closes an open bulk confirmation as a cancel", async () => {
    const signOut = button("Sign out").element() as HTMLButtonElement;
    await button("Release all matching…").click();
    await expect.poll(() => openDialogs().length).toBe(1);
    // The dialog is modal: the operator cannot reach the button, but the page may sign out under it.
    signOut.click();
    await signInShown();
    await expect.poll(() => openDialogs().length).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(acted()).toEqual([]);
  });

  it("a release answered after sign-out sends nothing more with the forgotten token (no list, stats or audit read)", async () => {
    const id = fake.quarantined[0]!.event.id;
    await page.getByRole("button", { name: `Inspect ${id}` }).click();
    const held = fake.hold((request) => request.method === "POST" && request.route.endsWith("/release"));
    await button("Release…").click();
    await expect.poll(() => openDialogs().length).toBe(1);
    await button("Release").click();
    await held.arrived;
    (button("Sign out").element() as HTMLButtonElement).click();
    await signInShown();
    const before = fake.requests.length;
    held.release();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(fake.requests.slice(before).map((request) => `${request.method} ${request.route}`)).toEqual([]);
  });

  it("a dry run answered after sign-out opens no dialog", async () => {
    const held = fake.hold((request) => request.route === "/quarantined/bulk");
    const signOut = button("Sign out").element() as HTMLButtonElement;
    await button("Discard all matching…").click();
    await held.arrived;
    signOut.click();
    await signInShown();
    held.release();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(openDialogs()).toHaveLength(0);
    expect(acted()).toEqual([]);
  });
});

describe("web UI: sign-out while the journals load", () => {
  /** Sign out, then sign in with the journals answer held; answers the held request. */
  async function signInHeld() {
    (button("Sign out").element() as HTMLButtonElement).click();
    await signInShown();
    const held = fake.hold((request) => request.route === "/journals");
    await userEvent.fill(page.getByLabelText("Operator token"), TOKEN);
    await button("Sign in").click();
    await held.arrived;
    (button("Sign out").element() as HTMLButtonElement).click();
    await signInShown();
    return held;
  }

  it("a journals answer arriving after sign-out opens no view and sends nothing with the forgotten token", async () => {
    const held = await signInHeld();
    const before = fake.requests.length;
    held.release();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(fake.requests.slice(before).map((request) => `${request.method} ${request.route}`)).toEqual([]);
    expect(document.querySelector("#token")).not.toBeNull();
  });

  it("a journals answer of a signed-out session arriving after the next sign-in leaves that session's views working", async () => {
    const held = await signInHeld();
    await userEvent.fill(page.getByLabelText("Operator token"), TOKEN);
    await button("Sign in").click();
    await expect.poll(() => document.querySelectorAll(".results tbody tr").length).toBe(2);
    held.release();
    await new Promise((resolve) => setTimeout(resolve, 200));
    await button("Release all matching…").click();
    await expect.poll(() => openDialogs().length).toBe(1);
    await button("Cancel").click();
    await expect.poll(() => openDialogs().length).toBe(0);
    expect(acted()).toEqual([]);
  });
});

describe("web UI: the status toast", () => {
  it("wraps a long message within the viewport, lets clicks through to what it covers, and clears after a few seconds", async () => {
    // More than a page (Older → enabled), the newest with a 513-character key.
    fake.quarantined.length = 0;
    const ids = fake.seed([...Array.from({ length: 30 }, (_, i) => ({ namespace: "acme", subject: `user-${i}` })), { namespace: "n".repeat(256), subject: "s".repeat(256) }]);
    await button("Reload list").click();
    await page.getByRole("button", { name: `Inspect ${ids[30]}` }).click();
    await button("Release…").click();
    await expect.poll(() => openDialogs().length).toBe(1);
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    (button("Release").element() as HTMLButtonElement).click();
    const toast = document.querySelector<HTMLElement>(".toast")!;
    await expect.poll(() => toast.textContent).toContain("nnnn");
    (button("← Back to the list").element() as HTMLButtonElement).click();

    const box = toast.getBoundingClientRect();
    expect(toast.scrollWidth).toBeLessThanOrEqual(toast.clientWidth);
    expect(box.left).toBeGreaterThanOrEqual(0);
    expect(box.right).toBeLessThanOrEqual(innerWidth);
    expect(box.height).toBeLessThan(200);
    // A status message, not a control: a click at its centre, or on the pager under it, reaches the page.
    expect(document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2)).not.toBe(toast);
    const older = button("Older →").element() as HTMLButtonElement;
    older.scrollIntoView({ block: "end" });
    const olderBox = older.getBoundingClientRect();
    expect(document.elementFromPoint(olderBox.left + olderBox.width / 2, olderBox.top + olderBox.height / 2)).toBe(older);
    expect(toast.getAttribute("aria-live")).toBe("polite");

    vi.advanceTimersByTime(10_000);
    expect(toast.textContent).toBe("");
    expect(getComputedStyle(toast).display).toBe("none");
  });
});
