/**
 * Quarantine review of one consumer: the filtered, paged list (newest
 * first), bulk release/discard of the current filter (a dry-run count, then
 * a confirmation that acts on the counted events only), NDJSON export of the
 * current filter, and the inspect view of one event.
 *
 * "The current filter" is what the filter inputs show: a bulk action or an
 * export started with inputs that differ from the last applied filter applies
 * them first (the list reloads), so the dialog counts what the operator sees.
 * One bulk action or export runs at a time: their buttons stay disabled from
 * the dry run until the action, or its cancel, has finished.
 */
import type { PoisonReason, QuarantinedEvent } from "../../src/journal/types.js";
import { AuthError, describeError, type OperatorApi, type QuarantineFilter } from "./api.js";
import { confirmAction } from "./confirm-dialog.js";
import { button, el, replaceChildren, type Child } from "./dom.js";
import { formatCount, formatTime, isoTime } from "./format.js";
import { codeText, inspectView, keyText, table } from "./inspect.js";
import type { Selection } from "./session.js";
import { displayValue, parseTyped, quoted, revealed } from "./text.js";

const REASONS: readonly PoisonReason[] = ["malformed", "rejected", "attempts_exhausted"];
const EMPTY_FILTER: QuarantineFilter = { query: "", reason: "", namespace: "", subject: "" };
/** Longest text a namespace or subject input takes: a 256-unit part, JSON-quoted with every UTF-16 unit escaped (`\uXXXX`). */
const MAX_TYPED_PART = 2 + 256 * 6;

function sameFilter(a: QuarantineFilter, b: QuarantineFilter): boolean {
  return a.query === b.query && a.reason === b.reason && a.namespace === b.namespace && a.subject === b.subject;
}

function isFiltered(filter: QuarantineFilter): boolean {
  return !sameFilter(filter, EMPTY_FILTER);
}

/** What the review needs from the page. */
export interface QuarantineReviewOptions {
  readonly api: OperatorApi;
  readonly selection: Selection;
  /** How many events a page asks the worker for. */
  readonly pageSize: number;
  readonly onAuthError: (error: AuthError) => void;
  /** Something was released or discarded: the overview should read stats again. */
  readonly onChanged: () => void;
  /** Say something in the page's status region (screen readers hear it). */
  readonly announce: (message: string) => void;
}

/** The list and inspect views of one consumer's quarantine. */
export class QuarantineReview {
  readonly element: HTMLElement;
  readonly #options: QuarantineReviewOptions;
  #filter: QuarantineFilter = EMPTY_FILTER;
  /** Cursor of each page seen so far (`null` for the first); the last is the page shown. */
  #cursors: (string | null)[] = [null];
  #nextCursor: string | null = null;
  #items: readonly QuarantinedEvent[] = [];
  #loadSeq = 0;
  /** A bulk action (dry run, confirmation, action) or an export is running. */
  #busy = false;
  /** The views were closed (sign-out, another consumer): nothing more is shown or asked. */
  #closed = false;

  readonly #listSection: HTMLElement;
  readonly #inspectSlot = el("div", { hidden: true });
  readonly #results = el("div", { class: "results" });
  readonly #bulkResult = el("div", { class: "banner", hidden: true });
  readonly #pageLabel = el("span", { class: "muted" });
  readonly #newer = button("← Newer", () => void this.#goPage(-1), { class: "button" });
  readonly #older = button("Older →", () => void this.#goPage(1), { class: "button" });
  readonly #queryInput = el("input", {
    id: "filter-query",
    name: "query",
    type: "search",
    autocomplete: "off",
    maxlength: 200,
    placeholder: "request id, key or reason",
    "aria-describedby": "filter-query-help",
  });
  readonly #reasonSelect = el(
    "select",
    { id: "filter-reason", name: "reason" },
    el("option", { value: "" }, "Any reason"),
    ...REASONS.map((reason) => el("option", { value: reason }, reason)),
  );
  readonly #namespaceInput = el("input", {
    id: "filter-namespace",
    name: "namespace",
    type: "text",
    autocomplete: "off",
    maxlength: MAX_TYPED_PART,
    spellcheck: "false",
    "aria-describedby": "filter-key-help",
  });
  readonly #subjectInput = el("input", {
    id: "filter-subject",
    name: "subject",
    type: "text",
    autocomplete: "off",
    maxlength: MAX_TYPED_PART,
    spellcheck: "false",
    "aria-describedby": "filter-key-help",
  });
  readonly #bulkReleaseButton = button("Release all matching…", () => void this.#bulk("release"), { class: "button" });
  readonly #bulkDiscardButton = button("Discard all matching…", () => void this.#bulk("discard"), { class: "button danger-outline" });
  readonly #exportButton = button("Export NDJSON", () => void this.#export(), { class: "button" });

  constructor(options: QuarantineReviewOptions) {
    this.#options = options;
    const form = el(
      "form",
      { class: "filters", role: "search", "aria-label": "Filter quarantined events" },
      el("div", { class: "field" }, el("label", { for: "filter-query" }, "Search"), this.#queryInput),
      el("div", { class: "field" }, el("label", { for: "filter-reason" }, "Reason"), this.#reasonSelect),
      el("div", { class: "field" }, el("label", { for: "filter-namespace" }, "Namespace (exact)"), this.#namespaceInput),
      el("div", { class: "field" }, el("label", { for: "filter-subject" }, "Subject (exact)"), this.#subjectInput),
      el(
        "div",
        { class: "field-actions" },
        el("button", { type: "submit", class: "button primary" }, "Apply filter"),
        button("Clear", () => this.#clearFilter(), { class: "button" }),
      ),
      el(
        "p",
        { id: "filter-query-help", class: "muted small filter-help" },
        "Search finds text as stored, anywhere in the request id, the ordering key (namespace/subject) or the reason, ignoring case: type a key's parts without the quotes the list shows.",
      ),
      el(
        "p",
        { id: "filter-key-help", class: "muted small filter-help" },
        'The ordering key\'s namespace and subject, each matched exactly. A part shown "quoted" in the list (it holds /, spaces or hidden characters, written as \\u escapes) can be typed as shown, quotes included.',
      ),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.#filter = this.#typedFilter();
      void this.reload();
    });

    this.#listSection = el(
      "section",
      { class: "panel", "aria-labelledby": "quarantine-title" },
      el("div", { class: "panel-head" }, el("h2", { id: "quarantine-title", tabindex: -1 }, "Quarantined events"), el("span", { class: "muted" }, "newest first")),
      form,
      el(
        "div",
        { class: "toolbar", role: "group", "aria-label": "Actions on the current filter" },
        this.#bulkReleaseButton,
        this.#bulkDiscardButton,
        this.#exportButton,
        button("Reload list", () => void this.#load(), { class: "button" }),
      ),
      this.#bulkResult,
      this.#results,
      el("nav", { class: "pager", "aria-label": "Pages of quarantined events" }, this.#newer, this.#pageLabel, this.#older),
    );
    this.element = el("div", { class: "review" }, this.#listSection, this.#inspectSlot);
  }

  /** Load the first page of the current filter. */
  reload(): Promise<void> {
    this.#cursors = [null];
    return this.#load();
  }

  /** The views are gone (sign-out, another consumer): a bulk action under way asks nothing more. */
  close(): void {
    this.#closed = true;
  }

  /** The filter the inputs show (a JSON-quoted namespace or subject read as JSON; see `text.ts`). */
  #typedFilter(): QuarantineFilter {
    return {
      query: this.#queryInput.value.trim(),
      reason: this.#reasonSelect.value as PoisonReason | "",
      namespace: parseTyped(this.#namespaceInput.value),
      subject: parseTyped(this.#subjectInput.value),
    };
  }

  /**
   * The filter a bulk action or export acts on: what the inputs show. Typed but
   * not applied, it is applied first (and the list reloaded), so what the
   * dialog counts and the list shows are the same filter.
   */
  async #filterToActOn(): Promise<QuarantineFilter> {
    const typed = this.#typedFilter();
    if (!sameFilter(typed, this.#filter)) {
      this.#filter = typed;
      await this.reload();
    }
    return this.#filter;
  }

  /**
   * Run one bulk action or export at a time: its buttons are disabled until it
   * has finished (cancelled included). Focus that was lost meanwhile (on a
   * button disabled under it) goes back to the button that started it.
   */
  async #exclusive(started: HTMLButtonElement, run: () => Promise<void>): Promise<void> {
    if (this.#busy) return;
    this.#setBusy(true);
    try {
      await run();
    } finally {
      this.#setBusy(false);
      const active = document.activeElement;
      if (!this.#closed && started.isConnected && (active === null || active === document.body)) started.focus();
    }
  }

  #setBusy(busy: boolean): void {
    this.#busy = busy;
    for (const control of [this.#bulkReleaseButton, this.#bulkDiscardButton, this.#exportButton]) control.disabled = busy;
    this.#listSection.querySelector(".toolbar")?.setAttribute("aria-busy", String(busy));
  }

  #clearFilter(): void {
    this.#queryInput.value = "";
    this.#reasonSelect.value = "";
    this.#namespaceInput.value = "";
    this.#subjectInput.value = "";
    this.#filter = EMPTY_FILTER;
    void this.reload();
  }

  async #goPage(step: 1 | -1): Promise<void> {
    if (step === 1) {
      if (this.#nextCursor === null) return;
      this.#cursors.push(this.#nextCursor);
    } else {
      if (this.#cursors.length <= 1) return;
      this.#cursors.pop();
    }
    await this.#load();
    const heading = this.#listSection.querySelector<HTMLElement>("h2");
    heading?.focus();
  }

  async #load(): Promise<void> {
    // Closed views read nothing more (their token may be signed out).
    if (this.#closed) return;
    const seq = ++this.#loadSeq;
    const { api, selection } = this.#options;
    const after = this.#cursors[this.#cursors.length - 1] ?? null;
    this.#results.setAttribute("aria-busy", "true");
    replaceChildren(this.#results, el("p", { class: "loading" }, "Loading quarantined events…"));
    this.#newer.disabled = true;
    this.#older.disabled = true;
    try {
      const page = await api.listQuarantined(selection.journal, selection.consumer, this.#filter, after, this.#options.pageSize);
      if (seq !== this.#loadSeq) return;
      this.#items = page.items;
      this.#nextCursor = page.nextCursor;
      this.#renderList();
    } catch (error) {
      if (seq !== this.#loadSeq) return;
      if (error instanceof AuthError) return this.#options.onAuthError(error);
      replaceChildren(
        this.#results,
        el("div", { class: "banner error", role: "alert" }, `The quarantine list could not be loaded: ${describeError(error)}`),
        button("Retry", () => void this.#load(), { class: "button" }),
      );
    } finally {
      if (seq === this.#loadSeq) this.#results.setAttribute("aria-busy", "false");
    }
  }

  #renderList(): void {
    const pageNumber = this.#cursors.length;
    this.#newer.disabled = pageNumber <= 1;
    this.#older.disabled = this.#nextCursor === null;
    this.#pageLabel.textContent = `Page ${pageNumber}`;
    if (this.#items.length === 0) {
      const filtered = isFiltered(this.#filter);
      replaceChildren(
        this.#results,
        el(
          "div",
          { class: "empty" },
          el("p", {}, el("strong", {}, filtered ? "No quarantined event matches this filter" : "Nothing is quarantined"), pageNumber > 1 ? " on this page." : "."),
          el(
            "p",
            { class: "muted" },
            this.#nextCursor !== null
              ? "The filter narrows each page the journal reads, so later pages may still hold matches: use Older →."
              : filtered
                ? "Clear the filter to see every quarantined event of this consumer."
                : `Consumer ${displayValue(this.#options.selection.consumer)} has no event awaiting review.`,
          ),
        ),
      );
      return;
    }
    const rows = this.#items.map((item) => [
      codeText(displayValue(item.event.id)),
      codeText(keyText(item)),
      el("span", { class: `badge reason-${item.reason}` }, item.reason),
      String(item.attempts.length),
      el("time", { datetime: isoTime(item.quarantinedAt) }, formatTime(item.quarantinedAt)),
      button("Inspect", () => this.#inspect(item), { class: "button small", "aria-label": `Inspect ${displayValue(item.event.id)}`, "data-request-id": item.event.id }),
    ]);
    replaceChildren(
      this.#results,
      el("p", { class: "muted" }, `${formatCount(this.#items.length)} shown on this page${this.#nextCursor === null ? "" : "; more on older pages"}.`),
      table("Quarantined events, newest first", ["Request id", "Ordering key", "Reason", "Attempts", "Quarantined at", "Action"], rows),
    );
  }

  #inspect(item: QuarantinedEvent): void {
    const view = inspectView({
      api: this.#options.api,
      selection: this.#options.selection,
      item,
      onAuthError: this.#options.onAuthError,
      onBack: () => this.#closeInspect(item.event.id),
      onResolved: (message) => {
        if (this.#closed) return;
        this.#options.announce(message);
        this.#options.onChanged();
        void this.#load();
      },
      closed: () => this.#closed,
    });
    replaceChildren(this.#inspectSlot, view);
    this.#listSection.hidden = true;
    this.#inspectSlot.hidden = false;
    view.querySelector<HTMLElement>("[data-focus]")?.focus();
  }

  #closeInspect(requestId: string): void {
    this.#inspectSlot.hidden = true;
    this.#inspectSlot.replaceChildren();
    this.#listSection.hidden = false;
    const row = [...this.#results.querySelectorAll<HTMLButtonElement>("button[data-request-id]")].find((candidate) => candidate.dataset["requestId"] === requestId);
    (row ?? this.#listSection.querySelector<HTMLElement>("h2"))?.focus();
  }

  /** A filter in words, for dialogs and messages; typed values as shown in the list, each bidi-isolated. */
  #filterText(filter: QuarantineFilter): Child[] {
    const { query, reason, namespace, subject } = filter;
    const parts: Child[][] = [];
    if (query) parts.push(["search ", codeText(quoted(query))]);
    if (reason) parts.push([`reason ${reason}`]);
    if (namespace) parts.push(["namespace ", codeText(displayValue(namespace))]);
    if (subject) parts.push(["subject ", codeText(displayValue(subject))]);
    if (parts.length === 0) return ["no filter: every quarantined event of this consumer"];
    return parts.flatMap((part, index) => (index === 0 ? part : [", ", ...part]));
  }

  /**
   * Bulk release/discard of the current filter: a dry run counts the matching
   * events and answers their ids; after the operator confirms, exactly those ids
   * are sent back, so events quarantined meanwhile are never acted on unseen.
   * Counted events resolved elsewhere meanwhile come back as skipped.
   */
  #bulk(action: "release" | "discard"): Promise<void> {
    return this.#exclusive(action === "release" ? this.#bulkReleaseButton : this.#bulkDiscardButton, () => this.#runBulk(action));
  }

  async #runBulk(action: "release" | "discard"): Promise<void> {
    const { api, selection, announce } = this.#options;
    const filter = await this.#filterToActOn();
    if (this.#closed) return;
    const verb = action === "release" ? "Release" : "Discard";
    this.#showBulk("info", "Counting the events that match (", ...this.#filterText(filter), ")…");
    let requestIds: readonly string[];
    let more: boolean;
    try {
      ({ requestIds, more } = await api.bulk(selection.journal, selection.consumer, { action, dryRun: true, filter }));
    } catch (error) {
      if (error instanceof AuthError) return this.#options.onAuthError(error);
      this.#showBulk("error", `The dry run failed: ${describeError(error)}`);
      return;
    }
    // Signed out (or another consumer opened) while counting: no dialog over what came next.
    if (this.#closed) return;
    // The operator applied or typed another filter while counting: the count is of a filter no longer shown.
    if (!sameFilter(filter, this.#filter) || !sameFilter(filter, this.#typedFilter())) {
      this.#showBulk("info", "The filter changed while the dry run counted (it counted ", ...this.#filterText(filter), `); nothing was done: run ${verb} all matching again for the filter shown.`);
      return;
    }
    const matched = requestIds.length;
    if (matched === 0) {
      this.#showBulk("info", "Dry run: no quarantined event matches (", ...this.#filterText(filter), `); nothing to ${action}.`);
      return;
    }
    this.#showBulk("info", `Dry run: ${formatCount(matched)} event${matched === 1 ? "" : "s"} match; waiting for confirmation.`);
    const confirmed = await confirmAction({
      title: `${verb} ${formatCount(matched)} event${matched === 1 ? "" : "s"}?`,
      body: [
        el(
          "p",
          {},
          "Dry run: ",
          el("strong", { class: "bulk-count" }, formatCount(matched)),
          ` quarantined event${matched === 1 ? "" : "s"} of consumer `,
          el("strong", { class: "untrusted" }, displayValue(selection.consumer)),
          " match the current filter (",
          ...this.#filterText(filter),
          ").",
        ),
        more ? el("p", { class: "banner info" }, `More events match than one bulk action takes; run it again afterwards for the rest.`) : null,
        el(
          "p",
          {},
          action === "release"
            ? "Each goes back on its ordering key at its original position, with a fresh attempt budget."
            : "Each is resolved as handled without being delivered; this cannot be undone.",
          ` Only ${matched === 1 ? "this event is" : `these ${formatCount(matched)} events are`} acted on: one resolved elsewhere before you confirm is skipped, and events quarantined since are left alone. Every action is recorded in the audit log.`,
        ),
      ],
      confirmLabel: `${verb} ${formatCount(matched)}`,
      danger: action === "discard",
    });
    if (!confirmed) {
      if (!this.#closed) this.#showBulk("info", `Bulk ${action} cancelled; nothing changed.`);
      return;
    }
    try {
      const result = await api.bulk(selection.journal, selection.consumer, { action, dryRun: false, requestIds });
      const skipped = result.failed.filter((failure) => errorCode(failure.error) === "not_quarantined");
      const failed = result.failed.filter((failure) => errorCode(failure.error) !== "not_quarantined");
      const done =
        `${action === "release" ? "Released" : "Discarded"} ${formatCount(result.applied)} of the ${formatCount(result.matched)} event${result.matched === 1 ? "" : "s"} the dry run counted.` +
        (skipped.length ? ` Skipped ${formatCount(skipped.length)} no longer quarantined (resolved elsewhere since the dry run).` : "") +
        (failed.length ? ` ${formatCount(failed.length)} failed.` : "");
      this.#showBulk(
        failed.length ? "error" : skipped.length ? "info" : "success",
        done,
        skipped.length
          ? el("ul", { class: "bulk-skipped", "aria-label": "Skipped events" }, ...skipped.map((skip) => el("li", {}, codeText(displayValue(skip.requestId)), ": skipped, no longer quarantined")))
          : null,
        failed.length
          ? el(
              "ul",
              { class: "bulk-failed", "aria-label": "Failed events" },
              ...failed.map((failure) => el("li", {}, codeText(displayValue(failure.requestId)), ": ", el("span", { class: "untrusted" }, revealed(failureText(failure.error))))),
            )
          : null,
      );
      announce(done);
    } catch (error) {
      if (error instanceof AuthError) return this.#options.onAuthError(error);
      this.#showBulk("error", `Bulk ${action} failed: ${describeError(error)}. Some events may have been acted on; the list below is current.`);
    }
    this.#options.onChanged();
    await this.reload();
  }

  #showBulk(tone: "info" | "success" | "error", ...content: Child[]): void {
    this.#bulkResult.hidden = false;
    this.#bulkResult.className = `banner ${tone} bulk-result`;
    this.#bulkResult.setAttribute("role", tone === "error" ? "alert" : "status");
    replaceChildren(this.#bulkResult, ...content);
  }

  #export(): Promise<void> {
    return this.#exclusive(this.#exportButton, () => this.#runExport());
  }

  async #runExport(): Promise<void> {
    const { api, selection, announce } = this.#options;
    const filter = await this.#filterToActOn();
    if (this.#closed) return;
    this.#showBulk("info", "Exporting (", ...this.#filterText(filter), ")…");
    let ndjson: Blob;
    let count: number;
    try {
      ndjson = await api.exportNdjson(selection.journal, selection.consumer, filter);
      count = await countLines(ndjson);
    } catch (error) {
      if (error instanceof AuthError) return this.#options.onAuthError(error);
      this.#showBulk("error", `The export failed: ${describeError(error)}`);
      return;
    }
    if (this.#closed) return;
    const stamp = new Date().toISOString().replace(/[:.]/g, "-");
    const filename = `quarantine-${selection.journal}-${selection.consumer}-${stamp}.ndjson`.replace(/[^A-Za-z0-9._-]/g, "_");
    const url = URL.createObjectURL(new Blob([ndjson], { type: "application/x-ndjson" }));
    const link = el("a", { href: url, download: filename, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    // Give the download a moment to start before the URL is revoked.
    setTimeout(() => URL.revokeObjectURL(url), 30_000);
    const message = `Exported ${formatCount(count)} event${count === 1 ? "" : "s"} with their attempt histories to ${filename}.`;
    // Which filter the file holds: the inputs may have changed while it was read.
    this.#showBulk("success", message, " It holds what matched (", ...this.#filterText(filter), ").");
    announce(message);
  }
}

/** The NDJSON lines of `blob` holding more than blanks, counted as its bytes stream by (no copy as a string). */
async function countLines(blob: Blob): Promise<number> {
  const reader = blob.stream().getReader();
  let count = 0;
  let filled = false;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    for (let index = 0; index < value.length; index++) {
      const byte = value[index];
      if (byte === 0x0a) {
        if (filled) count++;
        filled = false;
      } else if (byte !== 0x20 && byte !== 0x09 && byte !== 0x0d) {
        filled = true;
      }
    }
  }
  return filled ? count + 1 : count;
}

/** The journal error code of a bulk failure, when it has one. */
function errorCode(error: unknown): string | undefined {
  return typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ? error.code : undefined;
}

function failureText(error: unknown): string {
  if (typeof error === "object" && error !== null && "message" in error && typeof error.message === "string") return error.message;
  return typeof error === "string" ? error : JSON.stringify(error);
}
