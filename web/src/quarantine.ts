/**
 * Quarantine review of one consumer: the filtered, paged list (newest
 * first), bulk release/discard of the current filter (a dry-run count, then
 * a confirmation that acts on the counted events only), NDJSON export of the
 * current filter, and the inspect view of one event.
 */
import type { PoisonReason, QuarantinedEvent } from "../../src/journal/types.js";
import { AuthError, describeError, type OperatorApi, type QuarantineFilter } from "./api.js";
import { confirmAction } from "./confirm-dialog.js";
import { button, el, replaceChildren } from "./dom.js";
import { formatCount, formatTime, isoTime } from "./format.js";
import { inspectView, keyText, table } from "./inspect.js";
import type { Selection } from "./session.js";

const REASONS: readonly PoisonReason[] = ["malformed", "rejected", "attempts_exhausted"];
const EMPTY_FILTER: QuarantineFilter = { query: "", reason: "", key: "" };

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

  readonly #listSection: HTMLElement;
  readonly #inspectSlot = el("div", { hidden: true });
  readonly #results = el("div", { class: "results" });
  readonly #bulkResult = el("div", { class: "banner", hidden: true });
  readonly #pageLabel = el("span", { class: "muted" });
  readonly #newer = button("← Newer", () => void this.#goPage(-1), { class: "button" });
  readonly #older = button("Older →", () => void this.#goPage(1), { class: "button" });
  readonly #queryInput = el("input", { id: "filter-query", name: "query", type: "search", autocomplete: "off", maxlength: 200, placeholder: "request id, key or reason" });
  readonly #reasonSelect = el(
    "select",
    { id: "filter-reason", name: "reason" },
    el("option", { value: "" }, "Any reason"),
    ...REASONS.map((reason) => el("option", { value: reason }, reason)),
  );
  readonly #keyInput = el("input", { id: "filter-key", name: "key", type: "text", autocomplete: "off", maxlength: 513, placeholder: "namespace/subject", spellcheck: "false" });

  constructor(options: QuarantineReviewOptions) {
    this.#options = options;
    const form = el(
      "form",
      { class: "filters", role: "search", "aria-label": "Filter quarantined events" },
      el("div", { class: "field" }, el("label", { for: "filter-query" }, "Search"), this.#queryInput),
      el("div", { class: "field" }, el("label", { for: "filter-reason" }, "Reason"), this.#reasonSelect),
      el("div", { class: "field" }, el("label", { for: "filter-key" }, "Ordering key (exact)"), this.#keyInput),
      el(
        "div",
        { class: "field-actions" },
        el("button", { type: "submit", class: "button primary" }, "Apply filter"),
        button("Clear", () => this.#clearFilter(), { class: "button" }),
      ),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.#filter = {
        query: this.#queryInput.value.trim(),
        reason: this.#reasonSelect.value as PoisonReason | "",
        key: this.#keyInput.value.trim(),
      };
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
        button("Release all matching…", () => void this.#bulk("release"), { class: "button" }),
        button("Discard all matching…", () => void this.#bulk("discard"), { class: "button danger-outline" }),
        button("Export NDJSON", () => void this.#export(), { class: "button" }),
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

  #clearFilter(): void {
    this.#queryInput.value = "";
    this.#reasonSelect.value = "";
    this.#keyInput.value = "";
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
      const filtered = Boolean(this.#filter.query || this.#filter.reason || this.#filter.key);
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
                : `Consumer ${this.#options.selection.consumer} has no event awaiting review.`,
          ),
        ),
      );
      return;
    }
    const rows = this.#items.map((item) => [
      el("code", { class: "break" }, item.event.id),
      el("code", { class: "break" }, keyText(item)),
      el("span", { class: `badge reason-${item.reason}` }, item.reason),
      String(item.attempts.length),
      el("time", { datetime: isoTime(item.quarantinedAt) }, formatTime(item.quarantinedAt)),
      button("Inspect", () => this.#inspect(item), { class: "button small", "aria-label": `Inspect ${item.event.id}`, "data-request-id": item.event.id }),
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
        this.#options.announce(message);
        this.#options.onChanged();
        void this.#load();
      },
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

  /** The current filter in words, for dialogs and messages. */
  #filterText(): string {
    const { query, reason, key } = this.#filter;
    const parts = [query && `search “${query}”`, reason && `reason ${reason}`, key && `key ${key}`].filter(Boolean);
    return parts.length === 0 ? "no filter: every quarantined event of this consumer" : parts.join(", ");
  }

  /**
   * Bulk release/discard of the current filter: a dry run counts the matching
   * events and answers their ids; after the operator confirms, exactly those ids
   * are sent back, so events quarantined meanwhile are never acted on unseen.
   * Counted events resolved elsewhere meanwhile come back as skipped.
   */
  async #bulk(action: "release" | "discard"): Promise<void> {
    const { api, selection, announce } = this.#options;
    const filter = this.#filter;
    const verb = action === "release" ? "Release" : "Discard";
    this.#showBulk("info", `Counting the events that match (${this.#filterText()})…`);
    let requestIds: readonly string[];
    let more: boolean;
    try {
      ({ requestIds, more } = await api.bulk(selection.journal, selection.consumer, { action, dryRun: true, filter }));
    } catch (error) {
      if (error instanceof AuthError) return this.#options.onAuthError(error);
      this.#showBulk("error", `The dry run failed: ${describeError(error)}`);
      return;
    }
    const matched = requestIds.length;
    if (matched === 0) {
      this.#showBulk("info", `Dry run: no quarantined event matches (${this.#filterText()}); nothing to ${action}.`);
      return;
    }
    this.#showBulk("info", `Dry run: ${formatCount(matched)} event${matched === 1 ? "" : "s"} match; waiting for confirmation.`);
    const confirmed = await confirmAction({
      title: `${verb} ${formatCount(matched)} event${matched === 1 ? "" : "s"}?`,
      body: [
        el("p", {}, "Dry run: ", el("strong", { class: "bulk-count" }, formatCount(matched)), ` quarantined event${matched === 1 ? "" : "s"} of consumer `, el("strong", {}, selection.consumer), " match the current filter (", this.#filterText(), ")."),
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
      this.#showBulk("info", `Bulk ${action} cancelled; nothing changed.`);
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
        skipped.length ? el("ul", { class: "bulk-skipped", "aria-label": "Skipped events" }, ...skipped.map((skip) => el("li", {}, el("code", {}, skip.requestId), ": skipped, no longer quarantined"))) : null,
        failed.length ? el("ul", { class: "bulk-failed", "aria-label": "Failed events" }, ...failed.map((failure) => el("li", {}, el("code", {}, failure.requestId), ": ", failureText(failure.error)))) : null,
      );
      announce(done);
    } catch (error) {
      if (error instanceof AuthError) return this.#options.onAuthError(error);
      this.#showBulk("error", `Bulk ${action} failed: ${describeError(error)}. Some events may have been acted on; the list below is current.`);
    }
    this.#options.onChanged();
    await this.reload();
  }

  #showBulk(tone: "info" | "success" | "error", ...content: (Node | string | null)[]): void {
    this.#bulkResult.hidden = false;
    this.#bulkResult.className = `banner ${tone} bulk-result`;
    this.#bulkResult.setAttribute("role", tone === "error" ? "alert" : "status");
    replaceChildren(this.#bulkResult, ...content);
  }

  async #export(): Promise<void> {
    const { api, selection, announce } = this.#options;
    this.#showBulk("info", `Exporting (${this.#filterText()})…`);
    let text: string;
    try {
      text = await api.exportNdjson(selection.journal, selection.consumer, this.#filter);
    } catch (error) {
      if (error instanceof AuthError) return this.#options.onAuthError(error);
      this.#showBulk("error", `The export failed: ${describeError(error)}`);
      return;
    }
    const count = text.split("\n").filter((line) => line.trim() !== "").length;
    const stamp = new Date().toISOString().replace(/[:.]/g, "-");
    const filename = `quarantine-${selection.journal}-${selection.consumer}-${stamp}.ndjson`.replace(/[^A-Za-z0-9._-]/g, "_");
    const url = URL.createObjectURL(new Blob([text], { type: "application/x-ndjson" }));
    const link = el("a", { href: url, download: filename, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    // Give the download a moment to start before the URL is revoked.
    setTimeout(() => URL.revokeObjectURL(url), 30_000);
    const message = `Exported ${formatCount(count)} event${count === 1 ? "" : "s"} with their attempt histories to ${filename}.`;
    this.#showBulk("success", message);
    announce(message);
  }
}

/** The journal error code of a bulk failure, when it has one. */
function errorCode(error: unknown): string | undefined {
  return typeof error === "object" && error !== null && "code" in error && typeof error.code === "string" ? error.code : undefined;
}

function failureText(error: unknown): string {
  if (typeof error === "object" && error !== null && "message" in error && typeof error.message === "string") return error.message;
  return typeof error === "string" ? error : JSON.stringify(error);
}
