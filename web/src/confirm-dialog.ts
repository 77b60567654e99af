/**
 * Confirmation of an operator action in a modal `<dialog>` (not
 * `window.confirm`): it states what will happen, focuses the safe choice
 * (Cancel), closes on Escape as a cancel, and hands focus back to whatever
 * opened it. Sign-out closes every open one as a cancel ({@link cancelConfirmations}).
 */
import { el, type Child } from "./dom.js";

/** The confirmations open now, each with what closes it as a cancel. */
const openConfirmations = new Set<() => void>();

/**
 * Close every open confirmation as a cancel (its promise resolves false), on
 * sign-out: a dialog left over the sign-in screen could still confirm an
 * action of the session just ended.
 */
export function cancelConfirmations(): void {
  for (const cancel of [...openConfirmations]) cancel();
}

/** What the dialog says and offers. */
export interface ConfirmOptions {
  readonly title: string;
  /** The explanation; strings are rendered as text. */
  readonly body: readonly Child[];
  readonly confirmLabel: string;
  /** Styles the confirm button as destructive. */
  readonly danger?: boolean;
}

/**
 * Ask for confirmation; resolves true only when the confirm button is used.
 *
 * @example
 * if (await confirmAction({ title: "Discard event?", body: [requestId], confirmLabel: "Discard", danger: true })) { ... }
 */
export function confirmAction(options: ConfirmOptions): Promise<boolean> {
  const opener = document.activeElement instanceof HTMLElement ? document.activeElement : null;
  const titleId = `confirm-title-${Math.random().toString(36).slice(2)}`;
  const cancel = el("button", { type: "submit", value: "cancel", class: "button", autofocus: true }, "Cancel");
  const confirm = el("button", { type: "submit", value: "confirm", class: options.danger ? "button danger" : "button primary" }, options.confirmLabel);
  const dialog = el(
    "dialog",
    { class: "confirm", "aria-labelledby": titleId },
    el(
      "form",
      { method: "dialog" },
      el("h2", { id: titleId }, options.title),
      el("div", { class: "confirm-body" }, ...options.body),
      el("div", { class: "dialog-actions" }, cancel, confirm),
    ),
  );
  document.body.append(dialog);
  return new Promise((resolve) => {
    let settled = false;
    const finish = (confirmed: boolean) => {
      if (settled) return;
      settled = true;
      openConfirmations.delete(cancelNow);
      dialog.remove();
      if (opener?.isConnected) opener.focus();
      resolve(confirmed);
    };
    const cancelNow = () => {
      if (dialog.open) dialog.close("cancel");
      finish(false);
    };
    openConfirmations.add(cancelNow);
    dialog.addEventListener("close", () => finish(dialog.returnValue === "confirm"));
    dialog.showModal();
    cancel.focus();
  });
}
