/**
 * Where the page keeps its state between reloads: the operator token in
 * `sessionStorage` (this tab only, gone when it closes; never a cookie, so no
 * request carries it unless this page puts it in the `Authorization` header),
 * and the chosen journal and consumer in the URL fragment (so a view can be
 * bookmarked or shared without the token).
 */

const TOKEN_KEY = "isostore.operatorToken";

/** The stored token, or null when signed out. */
export function loadToken(): string | null {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    // Storage disabled (privacy mode): the operator signs in on every load.
    return null;
  }
}

/** Keep the token for this tab. */
export function saveToken(token: string): void {
  try {
    sessionStorage.setItem(TOKEN_KEY, token);
  } catch {
    // Storage disabled: the token lives in memory only (see main.ts).
  }
}

/** Forget the token. */
export function clearToken(): void {
  try {
    sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // Nothing stored, nothing to forget.
  }
}

/** Which journal and consumer are being reviewed. */
export interface Selection {
  readonly journal: string;
  readonly consumer: string;
}

/** The selection in the URL fragment (`#journal=usage&consumer=billing`), if complete. */
export function loadSelection(): Selection | null {
  const params = new URLSearchParams(location.hash.slice(1));
  const journal = params.get("journal");
  const consumer = params.get("consumer");
  return journal && consumer ? { journal, consumer } : null;
}

/** Record the selection in the URL fragment without adding a history entry. */
export function saveSelection(selection: Selection): void {
  const params = new URLSearchParams({ journal: selection.journal, consumer: selection.consumer });
  history.replaceState(null, "", `#${params.toString()}`);
}

/** The rule consumer names follow (see `parseConsumerId`): checked before asking the worker. */
export const CONSUMER_PATTERN = "[a-z0-9_\\-]{1,63}";
