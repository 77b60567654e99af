/**
 * The quarantine review page: sign in with an operator token, pick a journal
 * and consumer, then the overview and the quarantine review of that consumer.
 * A refused token (401/403) at any point brings the sign-in screen back with
 * the reason.
 *
 * Configuration by query string: `?sampleMs=5000` sets how often the overview
 * reads stats (1 s to 60 s); `?pageSize=25` how many quarantined events a page
 * of the list asks for (1 to 200).
 */
import "./app.css";
import { AuthError, describeError, OperatorApi, type JournalInfo } from "./api.js";
import { cancelConfirmations } from "./confirm-dialog.js";
import { button, el, replaceChildren } from "./dom.js";
import { Overview } from "./overview.js";
import { QuarantineReview } from "./quarantine.js";
import { clearToken, CONSUMER_PATTERN, loadSelection, loadToken, saveSelection, saveToken, type Selection } from "./session.js";

const root = document.getElementById("app")!;
const settings = new URLSearchParams(location.search);
const sampleMs = clampedInteger(settings.get("sampleMs"), 1000, 60_000, 5000);
const pageSize = clampedInteger(settings.get("pageSize"), 1, 200, 25);
/** How long the status toast shows a message. */
const TOAST_MS = 6000;

/** The token of this tab; mirrors sessionStorage (or stands in for it when storage is disabled). */
let token: string | null = loadToken();
/** The views of the open consumer, stopped when it changes or on sign out. */
let openViews: { overview: Overview; review: QuarantineReview } | null = null;

/** A whole number from the query string, clamped to `[min, max]`; `fallback` when absent or not a number. */
function clampedInteger(raw: string | null, min: number, max: number, fallback: number): number {
  const value = Number(raw);
  return raw && Number.isFinite(value) ? Math.min(max, Math.max(min, Math.round(value))) : fallback;
}

/** Stop the open views and cancel any confirmation still open: nothing of them may act afterwards. */
function closeViews(): void {
  openViews?.overview.stop();
  openViews?.review.close();
  openViews = null;
  cancelConfirmations();
}

/** The sign-in message for a refused token. */
function authMessage(error: AuthError): string {
  return error.status === 403
    ? `This token may not review the quarantine: ${error.message} (403 ${error.code}; it needs the operate scope). Sign in with an operator token.`
    : `The worker did not accept the token: ${error.message} (401 ${error.code}). Sign in again.`;
}

/** A message on the sign-in screen: why it is shown. */
interface SignInMessage {
  readonly text: string;
  readonly tone: "error" | "info";
}

/**
 * Counts sign-ins and sign-outs: a view reports a refused token only while the
 * session it was opened in is current, so a slow request of a session already
 * signed out (its second 403, say) cannot sign out the next one.
 */
let session = 0;

function signOut(message: SignInMessage | null): void {
  session++;
  closeViews();
  token = null;
  clearToken();
  showSignIn(message);
}

function signOutRefused(error: AuthError): void {
  signOut({ text: authMessage(error), tone: "error" });
}

function showSignIn(message: SignInMessage | null): void {
  document.title = "Sign in · isostore quarantine review";
  const input = el("input", {
    id: "token",
    name: "token",
    type: "password",
    required: true,
    autocomplete: "off",
    spellcheck: "false",
    "aria-describedby": "token-help",
  });
  const form = el(
    "form",
    { class: "panel signin", "aria-labelledby": "signin-title" },
    el("h1", { id: "signin-title" }, "isostore quarantine review"),
    message ? el("p", { class: `banner ${message.tone}`, role: message.tone === "error" ? "alert" : "status", id: "signin-message" }, message.text) : null,
    el("div", { class: "field" }, el("label", { for: "token" }, "Operator token"), input),
    el(
      "p",
      { id: "token-help", class: "muted" },
      "A token with the operate scope. It is kept in this tab only (sessionStorage) and sent as an Authorization header; it is never stored in a cookie.",
    ),
    el("button", { type: "submit", class: "button primary" }, "Sign in"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const value = input.value.trim();
    if (!value) return;
    token = value;
    saveToken(value);
    void showApp();
  });
  replaceChildren(root, el("main", { class: "signin-page" }, form));
  input.focus();
}

/** The signed-in shell: header with the journal/consumer picker, then the views. */
async function showApp(): Promise<void> {
  if (token === null) return showSignIn(null);
  const api = new OperatorApi(token);
  const current = ++session;
  const onAuthError = (error: AuthError): void => {
    if (current === session) signOutRefused(error);
  };
  document.title = "isostore quarantine review";
  const status = el("p", { class: "toast", role: "status", "aria-live": "polite" });
  const content = el("main", { id: "content", tabindex: -1 }, el("p", { class: "loading", "aria-busy": "true" }, "Loading journals…"));
  const pickerSlot = el("div", { class: "picker-slot" });
  replaceChildren(
    root,
    el(
      "header",
      { class: "app-header" },
      el("h1", {}, "isostore quarantine review"),
      pickerSlot,
      button("Sign out", () => signOut({ text: "Signed out: the token is forgotten in this tab.", tone: "info" }), { class: "button" }),
    ),
    content,
    status,
  );
  // The toast says what was done, then clears: the page's banners keep the full outcome.
  let toastTimer: ReturnType<typeof setTimeout> | undefined;
  const announce = (message: string) => {
    status.textContent = message;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => {
      status.textContent = "";
    }, TOAST_MS);
  };

  let journals: readonly JournalInfo[];
  try {
    journals = await api.journals();
  } catch (error) {
    // Signed out (or signed in again) while the journals loaded: this session does nothing more.
    if (current !== session) return;
    if (error instanceof AuthError) return onAuthError(error);
    replaceChildren(
      content,
      el("div", { class: "banner error", role: "alert" }, `The journals could not be listed: ${describeError(error)}`),
      button("Retry", () => void showApp(), { class: "button" }),
    );
    return;
  }
  // A late answer of a session signed out since: opening its views would poll with the old
  // token off-screen, and closing "the open views" would close the next session's.
  if (current !== session) return;

  if (journals.length === 0) {
    replaceChildren(content, el("div", { class: "panel empty" }, el("h2", {}, "No journals"), el("p", {}, "This worker serves no journal yet, so there is nothing to review.")));
    return;
  }

  const open = (selection: Selection) => {
    if (current !== session) return;
    closeViews();
    saveSelection(selection);
    const overview = new Overview({ api, selection, sampleMs, onAuthError });
    const review = new QuarantineReview({ api, selection, pageSize, onAuthError, announce, onChanged: () => void overview.refresh() });
    openViews = { overview, review };
    replaceChildren(content, overview.element, review.element);
    overview.start();
    void review.reload();
    overview.element.querySelector<HTMLElement>("h2")?.focus();
  };
  replaceChildren(pickerSlot, picker(journals, open));
  const saved = loadSelection();
  if (saved && journals.some((journal) => journal.name === saved.journal)) {
    open(saved);
  } else {
    replaceChildren(
      content,
      el(
        "div",
        { class: "panel empty" },
        el("h2", {}, "Choose what to review"),
        el("p", {}, `Pick a journal and a consumer above, then Open. ${journals.length} journal${journals.length === 1 ? "" : "s"} available.`),
      ),
    );
    pickerSlot.querySelector<HTMLElement>("select")?.focus();
  }
}

/** The journal select and consumer input (suggesting the journal's known consumers, free text allowed). */
function picker(journals: readonly JournalInfo[], open: (selection: Selection) => void): HTMLFormElement {
  const saved = loadSelection();
  const journalSelect = el("select", { id: "pick-journal", name: "journal" }, ...journals.map((journal) => el("option", { value: journal.name }, journal.name)));
  const consumers = el("datalist", { id: "known-consumers" });
  const consumerInput = el("input", {
    id: "pick-consumer",
    name: "consumer",
    type: "text",
    list: "known-consumers",
    required: true,
    pattern: CONSUMER_PATTERN,
    title: "1 to 63 lowercase letters, digits, - and _",
    autocomplete: "off",
    spellcheck: "false",
  });
  const hint = el("span", { class: "muted small", id: "pick-hint" });
  const showConsumers = () => {
    const journal = journals.find((candidate) => candidate.name === journalSelect.value);
    const known = journal?.consumers ?? [];
    replaceChildren(consumers, ...known.map((name) => el("option", { value: name })));
    hint.textContent = known.length ? `Known: ${known.join(", ")}` : "No known consumers: type a name.";
    if (!consumerInput.value && known[0] !== undefined) consumerInput.value = known[0];
  };
  if (saved && journals.some((journal) => journal.name === saved.journal)) {
    journalSelect.value = saved.journal;
    consumerInput.value = saved.consumer;
  }
  journalSelect.addEventListener("change", () => {
    consumerInput.value = "";
    showConsumers();
  });
  showConsumers();
  const form = el(
    "form",
    { class: "picker", "aria-label": "Journal and consumer" },
    el("div", { class: "field" }, el("label", { for: "pick-journal" }, "Journal"), journalSelect),
    el("div", { class: "field" }, el("label", { for: "pick-consumer" }, "Consumer"), consumerInput, consumers),
    el("button", { type: "submit", class: "button primary" }, "Open"),
    hint,
  );
  consumerInput.setAttribute("aria-describedby", "pick-hint");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!form.reportValidity()) return;
    open({ journal: journalSelect.value, consumer: consumerInput.value.trim() });
  });
  return form;
}

if (token === null) showSignIn(null);
else void showApp();
