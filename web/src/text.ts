/**
 * How untrusted strings (ordering keys, request ids, payloads, error texts)
 * are shown so that two different values never look the same and no value can
 * rearrange the text around it:
 *
 * - characters that do not show as themselves (controls, zero-width and bidi
 *   formatting characters such as U+202E, line and paragraph separators, blank
 *   spaces other than U+0020, invisible fillers) are written as JSON escapes
 *   (`\u202E`);
 * - an ordering key part (or id) that holds such a character, whitespace, `/`,
 *   `"` or `\`, or is empty, is shown JSON-quoted, so `"a/b"/c` and `a/"b/c"`
 *   are two keys, and `"acme "` is not `acme`;
 * - a part that is not in Unicode NFC (a decomposed `cafe\u0301`, which
 *   reads like `café`) is quoted with its combining marks escaped too;
 * - the elements that show them are bidi-isolated in `app.css`
 *   (`unicode-bidi: isolate` on `code`, `pre` and `.untrusted`).
 *
 * What an operator types in a filter follows the same rule back:
 * {@link parseTyped} reads a JSON-quoted value as JSON, so a key part can be
 * copied from the list as shown.
 */

/**
 * One character that does not show as itself: any control, format (bidi,
 * zero-width, soft hyphen, tags), surrogate, private-use or unassigned code
 * point, any separator (the plain space U+0020 is let through by the callers),
 * and the invisible letters and marks that are not format characters (Hangul
 * fillers, braille blank, combining grapheme joiner, Khmer invisible vowels,
 * Mongolian and other variation selectors).
 */
const HIDDEN = /[\p{C}\p{Z}\u034F\u115F\u1160\u17B4\u17B5\u180B-\u180F\u2800\u3164\uFE00-\uFE0F\uFFA0\u{E0100}-\u{E01EF}]/gu;

/** Also quoted in a key part or id: whitespace, the key separator, and JSON's own quote and escape. */
const NEEDS_QUOTES = /[\s"\\/]/u;

const SHORT_ESCAPES: Readonly<Record<string, string>> = { "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f" };

function hex4(unit: number): string {
  return `\\u${unit.toString(16).toUpperCase().padStart(4, "0")}`;
}

/** The JSON escape of one character (`\u202E`; a pair of surrogate escapes above U+FFFF). */
function escapeChar(char: string): string {
  const short = SHORT_ESCAPES[char];
  if (short !== undefined) return short;
  let out = "";
  for (let index = 0; index < char.length; index++) out += hex4(char.charCodeAt(index));
  return out;
}

const HIDDEN_ONE = new RegExp(HIDDEN.source, "u");

/** Whether `text` holds a character that does not show as itself (the plain space shows). */
function hasHidden(text: string): boolean {
  return HIDDEN_ONE.test(text.replaceAll(" ", ""));
}

/**
 * Free text (an error message, an actor name) with every character that does
 * not show as itself escaped, except the plain space and the ones in `keep`
 * (e.g. `"\n\t"` for a multi-line message shown with `white-space: pre-wrap`).
 */
export function revealed(text: string, keep = ""): string {
  return text.replace(HIDDEN, (char) => (char === " " || keep.includes(char) ? char : escapeChar(char)));
}

/** `value` as a JSON string literal with every hidden character escaped. */
export function quoted(value: string): string {
  return revealed(JSON.stringify(value));
}

/**
 * A key part or request id as shown: as is when it is plain, JSON-quoted (with
 * hidden characters escaped) when it is empty or holds whitespace, `/`, `"`,
 * `\` or a character that does not show as itself.
 *
 * @example
 * displayValue("acme") // acme
 * displayValue("a/b") // "a/b"
 * displayValue("user\u202E1") // "user\u202E1" (the escape, as six characters)
 */
export function displayValue(value: string): string {
  if (value !== value.normalize("NFC")) return denormalized(value);
  return value === "" || NEEDS_QUOTES.test(value) || hasHidden(value) ? quoted(value) : value;
}

/** A combining mark (`\u0301`, the accent of a decomposed `é`). */
const MARK = /\p{M}/gu;

/**
 * A value that is not in Unicode NFC (`cafe\u0301` beside `café`): it reads
 * like its composed form, so it is shown JSON-quoted with its combining marks
 * escaped as well (`"cafe\u0301"`), and the two never look the same.
 */
function denormalized(value: string): string {
  return quoted(value).replace(MARK, escapeChar);
}

/** An ordering key as shown: `namespace/subject`, each part by {@link displayValue}, so different keys never read the same. */
export function keyDisplay(namespace: string, subject: string): string {
  return `${displayValue(namespace)}/${displayValue(subject)}`;
}

/**
 * A JSON document (a record) indented for reading, with hidden characters in
 * its strings escaped: still valid JSON of the same value, and no bidi
 * override in a payload can reorder what is shown around it.
 */
export function jsonDisplay(value: unknown): string {
  return revealed(JSON.stringify(value, null, 2) ?? "null", "\n");
}

/**
 * A filter value as typed: a JSON string literal (as {@link displayValue}
 * shows a quoted part) is read as JSON; anything else is taken as is, without
 * the surrounding whitespace (a part with outer whitespace is always shown quoted).
 */
export function parseTyped(input: string): string {
  const trimmed = input.trim();
  if (trimmed.length >= 2 && trimmed.startsWith('"') && trimmed.endsWith('"')) {
    try {
      const parsed: unknown = JSON.parse(trimmed);
      if (typeof parsed === "string") return parsed;
    } catch {
      // Not a JSON string after all: the text as typed.
    }
  }
  return trimmed;
}
