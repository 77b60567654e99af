/**
 * The operator page as a whole (web/src/main.ts, run in this Chromium page
 * against the fake operator routes of ui-fake-api.ts): signing out, by the
 * button or because the worker refused the token, closes every confirmation
 * dialog as a cancel, and a dry run answered after sign-out opens none; the
 * action it would have confirmed is never sent.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
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
