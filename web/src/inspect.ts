/**
 * The inspect view of one quarantined event: its record as formatted JSON,
 * its attempt history, the audit entries recorded for it (following the
 * audit log's cursor, up to `AUDIT_BATCH` at a time), and the two
 * operator actions (release, discard), each confirmed in a dialog first.
 * Every value from the event is rendered as text.
 */
import type { Attempt, AuditEntry, QuarantinedEvent } from "../../src/journal/types.js";
import { ApiError, AuthError, describeError, type OperatorApi } from "./api.js";
import { confirmAction } from "./confirm-dialog.js";
import { button, el, replaceChildren, type Child } from "./dom.js";
import { formatCount, formatTime, isoTime } from "./format.js";
import type { Selection } from "./session.js";
import { displayValue, jsonDisplay, keyDisplay, revealed } from "./text.js";

/** Audit entries asked for per request (the worker's most). */
const AUDIT_PAGE = 1000;
/** Audit entries read before the view shows them and offers "Load more" for the rest. */
const AUDIT_BATCH = 3000;

/** What the inspect view needs from the page. */
export interface InspectOptions {
  readonly api: OperatorApi;
  readonly selection: Selection;
  readonly item: QuarantinedEvent;
  /** Back to the list (focus goes back to the row). */
  readonly onBack: () => void;
  /** The event was released or discarded: refresh the list and stats. */
  readonly onResolved: (message: string) => void;
  readonly onAuthError: (error: AuthError) => void;
  /** Whether the views were closed (signed out, another consumer opened): an action that answers then asks nothing more. */
  readonly closed: () => boolean;
}

/**
 * The ordering key as shown, `namespace/subject`, each part JSON-quoted when it
 * holds `/`, whitespace or a character that does not show as itself (see
 * `text.ts`): `"a/b"/c` and `a/"b/c"` are two keys.
 */
export function keyText(item: QuarantinedEvent): string {
  return keyDisplay(item.event.orderingKey.namespace, item.event.orderingKey.subject);
}

/** A request id, key or other untrusted value in a bidi-isolated `<code>` (see `app.css`). */
export function codeText(text: string, className = "break"): HTMLElement {
  return el("code", { class: className }, text);
}

/**
 * Build the inspect view; the audit entries load into it. The returned
 * element's heading (`[data-focus]`) should receive focus when shown.
 */
export function inspectView(options: InspectOptions): HTMLElement {
  const { api, selection, item } = options;
  const requestId = item.event.id;
  const shownId = displayValue(requestId);
  // Focusable so that focus, which was on the now-disabled action button, lands on the outcome.
  const banner = el("div", { class: "banner", role: "status", tabindex: -1, hidden: true });
  const audit = el("div", { class: "audit", "aria-live": "polite" });

  const showBanner = (tone: "success" | "info" | "error", ...text: Child[]) => {
    banner.hidden = false;
    banner.className = `banner ${tone}`;
    banner.setAttribute("role", tone === "error" ? "alert" : "status");
    replaceChildren(banner, ...text);
    banner.focus();
  };

  const act = async (action: "release" | "discard") => {
    const confirmed = await confirmAction(
      action === "release"
        ? {
            title: "Release this event?",
            body: [
              el("p", {}, "Event ", codeText(shownId), " goes back on its ordering key ", codeText(keyText(item)), ` at its original position (${item.position}), with a fresh attempt budget.`),
              el("p", {}, "Consumer ", el("strong", { class: "untrusted" }, displayValue(selection.consumer)), " will be given it again, in its key's order. The action is recorded in the audit log."),
            ],
            confirmLabel: "Release",
          }
        : {
            title: "Discard this event?",
            body: [
              el("p", {}, "Event ", codeText(shownId), " is resolved as handled for consumer ", el("strong", { class: "untrusted" }, displayValue(selection.consumer)), " without being delivered."),
              el("p", {}, "It will not come back, and it becomes prunable. The action is recorded in the audit log."),
            ],
            confirmLabel: "Discard",
            danger: true,
          },
    );
    if (!confirmed) return;
    releaseButton.disabled = true;
    discardButton.disabled = true;
    try {
      if (action === "release") await api.release(selection.journal, selection.consumer, requestId);
      else await api.discard(selection.journal, selection.consumer, requestId);
    } catch (error) {
      if (options.closed()) return;
      if (error instanceof AuthError) return options.onAuthError(error);
      if (error instanceof ApiError && error.code === "not_quarantined") {
        // Released or discarded elsewhere (another operator, a bulk action) since the list was read:
        // nothing is left to act on here, so the buttons stay disabled and the list and stats are read again.
        const done = action === "release" ? "released" : "discarded";
        showBanner(
          "info",
          "Event ",
          codeText(shownId),
          ` is no longer quarantined: it was released or discarded elsewhere (see the audit entries below). Nothing was ${done} here; the list and counts are updated.`,
        );
        options.onResolved(`${shownId} is no longer quarantined: it was released or discarded elsewhere. Nothing was ${done} here.`);
        await loadAudit();
        return;
      }
      releaseButton.disabled = false;
      discardButton.disabled = false;
      showBanner("error", `Could not ${action} the event: ${describeError(error)}`);
      return;
    }
    // Signed out (or another consumer opened) while the action ran: nothing more is read with the old token.
    if (options.closed()) return;
    const message =
      action === "release"
        ? `Released ${shownId}: it is back on key ${keyText(item)} at position ${item.position}.`
        : `Discarded ${shownId}: resolved as handled, not delivered.`;
    showBanner(
      "success",
      ...(action === "release"
        ? ["Released ", codeText(shownId), ": it is back on key ", codeText(keyText(item)), ` at position ${item.position}.`]
        : ["Discarded ", codeText(shownId), ": resolved as handled, not delivered."]),
      " It is no longer quarantined.",
    );
    options.onResolved(message);
    await loadAudit();
  };

  const releaseButton = button("Release…", () => void act("release"), { class: "button primary" });
  const discardButton = button("Discard…", () => void act("discard"), { class: "button danger" });

  // The audit entries read so far (oldest first), and the cursor of the rest (null: all read).
  let auditEntries: AuditEntry[] = [];
  let auditCursor: string | null = null;
  let auditSeq = 0;
  let auditLoading = false;
  const auditHeading = el("h3", { tabindex: -1 }, "Audit entries");
  // Not disabled while it loads (that would drop its focus): aria-disabled, and a click meanwhile does nothing.
  const moreAuditButton = button(
    "Load more audit entries",
    () => {
      if (!auditLoading) void loadAudit(true);
    },
    { class: "button small" },
  );

  const renderAudit = () => {
    replaceChildren(
      audit,
      auditEntries.length === 0 ? el("p", { class: "empty" }, "No operator action has been recorded for this event yet.") : auditTable(auditEntries),
      auditCursor === null
        ? null
        : el(
            "p",
            { class: "banner info audit-more" },
            `The oldest ${formatCount(auditEntries.length)} entries are shown; newer ones exist and are not shown yet. `,
            moreAuditButton,
          ),
    );
  };

  /** Read the audit entries (all of them, or up to `AUDIT_BATCH` more with "Load more"), following the worker's cursor. */
  const loadAudit = async (more = false) => {
    const seq = ++auditSeq;
    auditLoading = true;
    if (more) {
      moreAuditButton.setAttribute("aria-disabled", "true");
      audit.setAttribute("aria-busy", "true");
    } else {
      auditEntries = [];
      auditCursor = null;
      replaceChildren(audit, el("p", { class: "muted", "aria-busy": "true" }, "Loading audit entries…"));
    }
    try {
      let read = 0;
      do {
        const page = await api.audit(selection.journal, requestId, auditCursor, AUDIT_PAGE);
        if (seq !== auditSeq) return;
        auditEntries.push(...page.items.filter((entry) => entry.requestId === requestId));
        auditCursor = page.nextCursor;
        read += page.items.length;
      } while (auditCursor !== null && read < AUDIT_BATCH);
    } catch (error) {
      if (seq !== auditSeq) return;
      if (error instanceof AuthError) return options.onAuthError(error);
      if (more) {
        // The entries read so far stay, and "Load more" (which keeps its focus) goes on from where this stopped.
        const hadFocus = document.activeElement === moreAuditButton;
        renderAudit();
        audit.append(el("p", { class: "banner error", role: "alert" }, `More audit entries could not be loaded: ${describeError(error)}. Load more tries again from where it stopped.`));
        if (hadFocus) moreAuditButton.focus();
        return;
      }
      replaceChildren(
        audit,
        el("p", { class: "banner error", role: "alert" }, `Audit entries could not be loaded: ${describeError(error)}`),
        button("Retry", () => void loadAudit(), { class: "button" }),
      );
      return;
    } finally {
      if (seq === auditSeq) {
        auditLoading = false;
        moreAuditButton.removeAttribute("aria-disabled");
        audit.removeAttribute("aria-busy");
      }
    }
    const hadFocus = document.activeElement === moreAuditButton;
    renderAudit();
    // "Load more" keeps focus while more remain; once all are read, focus moves to the heading of the entries.
    if (hadFocus) (moreAuditButton.isConnected ? moreAuditButton : auditHeading).focus();
  };

  const view = el(
    "section",
    { class: "panel inspect", "aria-labelledby": "inspect-title" },
    el("div", { class: "panel-head" }, button("← Back to the list", options.onBack, { class: "button link" })),
    el("h2", { id: "inspect-title", tabindex: -1, "data-focus": true }, "Event ", codeText(shownId)),
    banner,
    el(
      "dl",
      { class: "facts" },
      fact("Consumer", el("span", { class: "untrusted" }, displayValue(selection.consumer))),
      fact("Ordering key", codeText(keyText(item))),
      fact("Reason", el("span", { class: `badge reason-${item.reason}` }, item.reason)),
      fact("Quarantined at", timeElement(item.quarantinedAt)),
      fact("Observed at", timeElement(item.event.observedAt)),
      fact("Position", String(item.position)),
      fact("Attempts", String(item.attempts.length)),
    ),
    el("div", { class: "actions" }, releaseButton, discardButton),
    el("h3", {}, "Record"),
    // Hidden characters (a bidi override, say) escaped: the same JSON value, shown as it is.
    el("pre", { class: "json", tabindex: 0, "aria-label": "Record as JSON" }, jsonDisplay(item.event.record)),
    el("h3", {}, "Attempt history"),
    item.attempts.length === 0 ? el("p", { class: "empty" }, "No delivery attempt is recorded for this event.") : attemptsTable(item.attempts),
    auditHeading,
    audit,
  );
  void loadAudit();
  return view;
}

function fact(label: string, value: Node | string): HTMLElement {
  return el("div", {}, el("dt", {}, label), el("dd", {}, value));
}

function timeElement(ms: number): HTMLTimeElement {
  return el("time", { datetime: isoTime(ms) }, formatTime(ms));
}

function outcomeText(attempt: Attempt): { outcome: Node | string; error: string } {
  const outcome = attempt.outcome;
  if (outcome === null) return { outcome: `running (lease until ${formatTime(attempt.leaseExpiresAt)})`, error: "—" };
  switch (outcome.kind) {
    case "acked":
      return { outcome: `acked at ${formatTime(outcome.at)}`, error: "—" };
    case "nacked":
      return { outcome: `nacked at ${formatTime(outcome.at)}`, error: outcome.error };
    case "quarantined":
      return { outcome: `quarantined at ${formatTime(outcome.at)}`, error: `reason: ${outcome.reason}` };
    case "expired":
      return { outcome: `lease expired at ${formatTime(outcome.at)}`, error: "—" };
  }
}

function attemptsTable(attempts: readonly Attempt[]): HTMLElement {
  return table(
    "Delivery attempts of this event to this consumer",
    ["Attempt", "Claimed at", "Outcome", "Error"],
    attempts.map((attempt) => {
      const { outcome, error } = outcomeText(attempt);
      return [String(attempt.attempt), timeElement(attempt.claimedAt), outcome, el("span", { class: "untrusted break pre-wrap" }, revealed(error, "\n\t"))];
    }),
  );
}

function auditTable(entries: readonly AuditEntry[]): HTMLElement {
  return table(
    "Operator actions on this event",
    ["#", "At", "Action", "Consumer", "Reason resolved", "Actor"],
    entries.map((entry) => [
      String(entry.seq),
      timeElement(entry.at),
      entry.action,
      el("span", { class: "untrusted" }, displayValue(entry.consumer)),
      entry.reason,
      entry.actor === null ? "—" : el("span", { class: "untrusted" }, revealed(entry.actor)),
    ]),
  );
}

/** A plain data table with a caption for screen readers. */
export function table(caption: string, headings: readonly string[], rows: readonly (readonly (Node | string)[])[]): HTMLElement {
  return el(
    "div",
    { class: "table-wrap" },
    el(
      "table",
      {},
      el("caption", { class: "visually-hidden" }, caption),
      el("thead", {}, el("tr", {}, ...headings.map((heading) => el("th", { scope: "col" }, heading)))),
      el("tbody", {}, ...rows.map((cells) => el("tr", {}, ...cells.map((cell) => el("td", {}, cell))))),
    ),
  );
}
