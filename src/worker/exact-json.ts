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
 * The check reads each number's source text, on every platform by a linear
 * scan of the text ({@link numberLiterals}, {@link roundedDataByScan}), which
 * pairs each literal with its place in the parsed value by the text's
 * structure, not by the order of a reviver's visits (which differs:
 * `{"b":1,"0":2}` is revived `0` first, and a duplicate key's earlier values
 * are never revived). Where `JSON.parse` hands a reviver each literal's text
 * as `context.source` (the JSON.parse source text access proposal, which
 * workerd has: {@link SOURCE_TEXT_ACCESS}), {@link roundedDataBySource} reads
 * the same answer there; it is the reference the scan is tested against, not
 * the way the routes take, because V8 revives recursively: a body nested a
 * few thousand levels deep (refused by the journal for its depth, but inside
 * the body cap) overflowed the call stack, and a whole `append-batch` failed
 * with a 500 instead of rejecting that one event in place. The scan keeps its
 * own stack, of at most {@link TRACKED_DEPTH} containers.
 */

import { MAX_RECORD_DATA_DEPTH } from "../journal/event.js";

/** The third argument `JSON.parse` gives a reviver where source text access is there. */
interface ReviverContext {
  readonly source?: unknown;
}

type Reviver = (this: unknown, key: string, value: unknown, context?: ReviverContext) => unknown;

/** `JSON.parse` with a reviver that may take the context (the platform's typings know only two arguments). */
const parseWith = JSON.parse as (text: string, reviver: Reviver) => unknown;

/**
 * Whether this platform's `JSON.parse` gives a reviver each primitive's source
 * text (workerd yes, Node 20 no): where it does, {@link roundedDataBySource}
 * reads the literals there (the tests compare it with the scan).
 */
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

/** What {@link roundedData} finds: the parsed body, and the objects of it whose `data` holds a rounded literal, each with that literal's text. */
export interface RoundedData {
  readonly body: unknown;
  readonly holders: WeakMap<object, string>;
}

/**
 * The objects of JSON `text` whose `data` field holds, at any depth up to
 * {@link TRACKED_DEPTH} containers, an integer literal that parsing rounded
 * (see {@link isRoundedInteger}), each with the text of the first such
 * literal (first in the order `JSON.parse` revives values: depth first, an
 * object's keys in property order); with the parsed body, in which those
 * objects are found. Null when there is none. A text with no run of 16 digits
 * holds no such literal and is not scanned at all; one with no rounded
 * literal is scanned and not parsed. The same on every platform (by
 * {@link roundedDataByScan}).
 *
 * @throws SyntaxError when `text` holds a rounded literal and is not JSON (the caller parsed it before).
 */
export function roundedData(text: string): RoundedData | null {
  if (!LONG_DIGITS.test(text)) return null;
  return roundedDataByScan(text);
}

/**
 * How deep {@link roundedDataByScan} follows the text's containers: an event's
 * `data` lies at most five containers deep in an append body (`{"events":
 * [{"record": {"data": ...`) and may nest {@link MAX_RECORD_DATA_DEPTH} more,
 * so a literal deeper than this sits in data the journal refuses for its
 * depth (the routes set such an event aside before they look at its
 * literals). Past it the scan only counts the containers it enters and
 * leaves, so a body nested millions deep costs no memory per level.
 */
export const TRACKED_DEPTH = MAX_RECORD_DATA_DEPTH + 16;

/**
 * {@link roundedData} read from the reviver's `context.source`: the way of a
 * platform with source text access, and the reference the scan is tested
 * against (where there is no source text, nothing is found: null).
 *
 * @throws SyntaxError when `text` is not JSON.
 */
export function roundedDataBySource(text: string): RoundedData | null {
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

// --- the scan, where there is no source text ------------------------------------------------------

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const DIGIT_0 = 0x30;
const DIGIT_9 = 0x39;
const LOWER_E = 0x65;
const UPPER_E = 0x45;
const LOWER_F = 0x66;
const LOWER_N = 0x6e;
const LOWER_T = 0x74;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;

/** The kind of a {@link scanJson} token that is a value: a string, a number, or `true`, `false` or `null`. */
const STRING = QUOTE;
const NUMBER = DIGIT_0;
const LITERAL = LOWER_T;

/**
 * Calls `token` for each token of JSON `text`, in document order, with its
 * kind and its span (`start` included, `end` not): {@link STRING} (quotes
 * included), {@link NUMBER}, {@link LITERAL}, or the char code of `{`, `}`,
 * `[`, `]`, `:` or `,`; whitespace is skipped. One pass, no backtracking: a
 * string is skipped to its closing quote (an escape skips the character after
 * its backslash, so `\"` and `\\` are inside it), and a number runs over the
 * characters a number may hold. `text` must be JSON (it is not checked: what
 * is not JSON gives some tokens, and the scan still ends).
 */
function scanJson(text: string, token: (kind: number, start: number, end: number) => void): void {
  const length = text.length;
  let at = 0;
  while (at < length) {
    const c = text.charCodeAt(at);
    if (c === QUOTE) {
      let end = at + 1;
      while (end < length) {
        const d = text.charCodeAt(end);
        if (d === QUOTE) break;
        end += d === BACKSLASH ? 2 : 1;
      }
      end = Math.min(end + 1, length);
      token(STRING, at, end);
      at = end;
    } else if (c === MINUS || (c >= DIGIT_0 && c <= DIGIT_9)) {
      let end = at + 1;
      while (end < length && isNumberPart(text.charCodeAt(end))) end++;
      token(NUMBER, at, end);
      at = end;
    } else if (c === LOWER_T || c === LOWER_F || c === LOWER_N) {
      const end = Math.min(at + (c === LOWER_F ? 5 : 4), length);
      token(LITERAL, at, end);
      at = end;
    } else {
      // JSON whitespace is skipped; any other character is a punctuator, one character long.
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) token(c, at, at + 1);
      at++;
    }
  }
}

/** Whether a character may follow the first of a JSON number: a digit, `.`, `e`, `E`, `+` or `-`. */
function isNumberPart(c: number): boolean {
  return (c >= DIGIT_0 && c <= DIGIT_9) || c === DOT || c === LOWER_E || c === UPPER_E || c === PLUS || c === MINUS;
}

/**
 * The text of every number literal of JSON `text`, in document order (a
 * number inside a string, key or value, is not one). The scan
 * {@link roundedDataByScan} is built on, exposed for its tests.
 */
export function numberLiterals(text: string): string[] {
  const literals: string[] = [];
  scanJson(text, (kind, start, end) => {
    if (kind === NUMBER) literals.push(text.slice(start, end));
  });
  return literals;
}

/**
 * Where rounded literals are in a container of the text: for each member
 * (an object's key, an array's index as a string) that holds one at any depth,
 * the literal itself or the same map of the container it is. Only containers
 * holding a rounded literal get one, so most texts make none.
 */
type Found = Map<string, Found | string>;

/** A container of the text being scanned, opened and not yet closed. */
interface OpenContainer {
  readonly array: boolean;
  /** An array's index of the next value. */
  index: number;
  /** An object's current key, as its span in the text (quotes included). */
  keyStart: number;
  keyEnd: number;
  /** Whether an object's next string is a key (after `{` or `,`), not a value (after `:`). */
  expectKey: boolean;
  found: Found | undefined;
}

/**
 * {@link roundedData} by a scan of the text, on every platform: the same
 * answer as {@link roundedDataBySource} gives where `JSON.parse` has source
 * text, for every JSON text whose literals lie at most {@link TRACKED_DEPTH}
 * containers deep (the scan ignores deeper ones).
 *
 * Linear, in two steps. The scan ({@link scanJson}) walks the text's
 * containers, tells each number literal from its text alone (`JSON.parse`
 * reads a literal as `Number()` does), and keeps a {@link Found} for each
 * container holding a rounded one, keyed as the parsed value is: a duplicate
 * key's later value replaces the earlier one, as `JSON.parse` keeps only the
 * last. Then a walk of those containers beside the parsed body takes each
 * object's keys in the order `Object.keys` gives them (the order a reviver
 * visits them in), so each container's first literal, and each holder of a
 * `data` that holds one, is the reviver's. Both steps keep their own stack,
 * so no nesting depth overflows the call stack, and the scan's holds at most
 * {@link TRACKED_DEPTH} containers. The text is parsed only when the scan
 * found a rounded literal (the caller parsed it once already).
 *
 * @throws SyntaxError when `text` holds a rounded literal and is not JSON.
 */
export function roundedDataByScan(text: string): RoundedData | null {
  const open: OpenContainer[] = [];
  /** Containers entered past {@link TRACKED_DEPTH} and not left yet: only counted. */
  let untracked = 0;
  let root: Found | string | undefined;
  /** The key of the object `container` is at, decoded (an escaped key is one JSON string to parse). */
  const keyOf = (container: OpenContainer): string => {
    const raw = text.slice(container.keyStart + 1, container.keyEnd - 1);
    return raw.includes("\\") ? (JSON.parse(text.slice(container.keyStart, container.keyEnd)) as string) : raw;
  };
  /** One value of the text ends, with what it holds: a rounded literal, the {@link Found} of a container, or nothing. */
  const ended = (found: Found | string | undefined): void => {
    const container = open[open.length - 1];
    if (container === undefined) {
      root = found;
    } else if (container.array) {
      if (found !== undefined) (container.found ??= new Map()).set(String(container.index), found);
      container.index++;
    } else if (found !== undefined) {
      (container.found ??= new Map()).set(keyOf(container), found);
    } else if (container.found !== undefined) {
      // A later value of a duplicate key is the one parsed: what an earlier one held is gone.
      container.found.delete(keyOf(container));
      if (container.found.size === 0) container.found = undefined;
    }
  };
  scanJson(text, (kind, start, end) => {
    if (untracked > 0) {
      if (kind === OPEN_OBJECT || kind === OPEN_ARRAY) untracked++;
      // The outermost untracked container ends: one value of the tracked one, holding nothing kept.
      else if ((kind === CLOSE_OBJECT || kind === CLOSE_ARRAY) && --untracked === 0) ended(undefined);
      return;
    }
    const container = open[open.length - 1];
    if (kind === STRING && container !== undefined && !container.array && container.expectKey) {
      container.keyStart = start;
      container.keyEnd = end;
      container.expectKey = false;
    } else if (kind === NUMBER) {
      // A literal shorter than 16 characters has fewer than 16 digits: a safe integer or not an integer.
      const literal = end - start >= 16 ? text.slice(start, end) : undefined;
      ended(literal !== undefined && isRoundedInteger(literal, Number(literal)) ? literal : undefined);
    } else if (kind === STRING || kind === LITERAL) {
      ended(undefined);
    } else if (kind === OPEN_OBJECT || kind === OPEN_ARRAY) {
      if (open.length >= TRACKED_DEPTH) untracked = 1;
      else open.push({ array: kind === OPEN_ARRAY, index: 0, keyStart: 0, keyEnd: 0, expectKey: true, found: undefined });
    } else if (kind === CLOSE_OBJECT || kind === CLOSE_ARRAY) {
      const closed = open.pop();
      ended(closed?.found);
    } else if (kind === COMMA && container !== undefined) {
      container.expectKey = true;
    }
  });
  if (root === undefined) return null;
  const body: unknown = JSON.parse(text);
  const holders = new WeakMap<object, string>();
  if (typeof root !== "string") holdersOf(root, body as object, holders);
  return { body, holders };
}

/** A container of {@link holdersOf}'s walk: its {@link Found}, its parsed value, its members in revival order, and how far it is. */
interface Visit {
  readonly found: Found;
  readonly node: object;
  readonly keys: readonly string[];
  at: number;
  /** The first rounded literal among the members walked so far. */
  first: string | undefined;
}

/**
 * Sets in `holders` each object of the parsed `body` whose `data` holds a
 * rounded literal, with the first such literal, walking `root` (the
 * {@link Found} of `body`) beside it, depth first and each object's members in
 * `Object.keys` order: the order of a reviver's visits (an array's indices
 * ascending, an object's integer keys ascending before its other keys in the
 * order they were first made), so the literal kept is the one
 * {@link roundedDataBySource} keeps.
 */
function holdersOf(root: Found, body: object, holders: WeakMap<object, string>): void {
  const visit = (found: Found, node: object): Visit => ({
    found,
    node,
    keys: found.size === 1 || Array.isArray(node) ? [...found.keys()] : Object.keys(node).filter((key) => found.has(key)),
    at: 0,
    first: undefined,
  });
  /** The member `visiting` is at holds `literal` first: it is the container's first, if none was before, and a `data`'s. */
  const held = (visiting: Visit, literal: string): void => {
    visiting.first ??= literal;
    if (visiting.keys[visiting.at] === "data" && !Array.isArray(visiting.node) && !holders.has(visiting.node)) holders.set(visiting.node, literal);
    visiting.at++;
  };
  const stack: Visit[] = [visit(root, body)];
  while (stack.length > 0) {
    const visiting = stack[stack.length - 1] as Visit;
    const key = visiting.keys[visiting.at];
    if (key === undefined) {
      stack.pop();
      const holder = stack[stack.length - 1];
      if (holder !== undefined && visiting.first !== undefined) held(holder, visiting.first);
      continue;
    }
    const member = visiting.found.get(key) as Found | string;
    if (typeof member === "string") held(visiting, member);
    else stack.push(visit(member, (visiting.node as Record<string, unknown>)[key] as object));
  }
}
