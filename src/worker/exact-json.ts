/**
 * Integer literals that `JSON.parse` cannot keep: the check of the event data
 * of the append routes (docs/http-api.md, "Wire shapes").
 *
 * A JSON number is parsed into a double, so an integer literal beyond 2^53 - 1
 * (a Go or Rust `u64` counter such as `18446744073709551615`) may be read as a
 * different number (`18446744073709552000`). Journaled as read, the event would
 * carry a number its producer never sent, and a retry of the same request id
 * with the number that was rounded to would be taken for the same fact
 * (`already_present`, not `conflict`). The append routes refuse such a literal
 * instead, as `invalid_event` with `rule` `data` (a producer sends such numbers
 * as strings).
 *
 * The check reads each number's source text, which `JSON.parse` hands a reviver
 * as `context.source` (the JSON.parse source text access proposal): workerd
 * has it, Node 20 does not. {@link SOURCE_TEXT_ACCESS} says which, found once;
 * without it nothing is refused (the app behaves as before the check).
 */

/** The third argument `JSON.parse` gives a reviver where source text access is there. */
interface ReviverContext {
  readonly source?: unknown;
}

type Reviver = (this: unknown, key: string, value: unknown, context?: ReviverContext) => unknown;

/** `JSON.parse` with a reviver that may take the context (the platform's typings know only two arguments). */
const parseWith = JSON.parse as (text: string, reviver: Reviver) => unknown;

/** Whether this platform's `JSON.parse` gives a reviver each primitive's source text (workerd yes, Node 20 no). */
export const SOURCE_TEXT_ACCESS: boolean = (() => {
  let seen = false;
  parseWith("1", (_key, value, context) => {
    seen ||= typeof context?.source === "string";
    return value;
  });
  return seen;
})();

/**
 * Whether a number literal of JSON `source`, parsed as `value`, was rounded:
 * an integer literal (no `.`, `e` or `E`) whose value is not a safe integer
 * and whose text is not what `String(value)` writes. `JSON.stringify` writes
 * every number as `String(value)`, so what a JavaScript producer sends is
 * never refused (2^60 as `1152921504606847000`, say), while a literal that
 * reads as another number is (2^60 written out in full, `1152921504606846976`,
 * too: it would come back as `1152921504606847000`).
 */
export function isRoundedInteger(source: string, value: number): boolean {
  return !Number.isSafeInteger(value) && !/[.eE]/.test(source) && source !== String(value);
}

/** Every integer literal that is not a safe integer has at least 16 digits (2^53 - 1 is 9007199254740991). */
const LONG_DIGITS = /\d{16}/;

/**
 * The objects of JSON `text` whose `data` field holds, at any depth, an
 * integer literal that parsing rounded (see {@link isRoundedInteger}), each
 * with the text of the first such literal; with the parsed body, in which
 * those objects are found. Null when there is none, or when the platform
 * gives no source text (see {@link SOURCE_TEXT_ACCESS}). A text with no run
 * of 16 digits holds no such literal and is not parsed at all.
 *
 * @throws SyntaxError when `text` is not JSON (the caller parsed it before).
 */
export function roundedData(text: string): { readonly body: unknown; readonly holders: WeakMap<object, string> } | null {
  if (!SOURCE_TEXT_ACCESS || !LONG_DIGITS.test(text)) return null;
  /** Objects and arrays holding a rounded literal at any depth, with the first one's text. */
  const within = new WeakMap<object, string>();
  const holders = new WeakMap<object, string>();
  let found = false;
  // The reviver sees every value after its members (depth first), with its holder as `this`.
  const body = parseWith(text, function (this: unknown, key, value, context) {
    const literal =
      typeof value === "number"
        ? typeof context?.source === "string" && isRoundedInteger(context.source, value)
          ? context.source
          : undefined
        : value !== null && typeof value === "object"
          ? within.get(value)
          : undefined;
    if (literal !== undefined && this !== null && typeof this === "object") {
      found = true;
      if (!within.has(this)) within.set(this, literal);
      if (key === "data" && !Array.isArray(this) && !holders.has(this)) holders.set(this, literal);
    }
    return value;
  });
  return found ? { body, holders } : null;
}
