/**
 * Order-preserving string encoding of tuple keys, shared by the engines that
 * keep their own ordered structures (memory, IndexedDB pages).
 *
 * Those engines order keys as plain JavaScript strings, so that ordering a key
 * costs one native string comparison instead of a walk through
 * {@link compareKeys}. This module turns a tuple key into such a string and
 * back ({@link decodeKey}).
 *
 * Promises (checked by `key-encoding.test.ts`), for valid keys `a`, `b`, `p`:
 * - Order: `encodeKey(a) < encodeKey(b)` (JavaScript string comparison, i.e.
 *   UTF-16 code units) exactly when `compareKeys(a, b) < 0`, and the encodings
 *   are equal exactly when `compareKeys(a, b) === 0` (so `0` and `-0` share one
 *   encoding).
 * - Prefixes: `hasPrefix(a, p)` exactly when `encodeKey(a)` starts with
 *   `encodeKey(p)`, which is exactly when
 *   `encodeKey(p) <= encodeKey(a) < prefixUpperBound(encodeKey(p))`.
 *
 * Layout: each element is a tag byte followed by its payload; the encoding of
 * a tuple is the concatenation of its elements' encodings. Every code unit of
 * an encoding is at most U+00FF, so V8 stores it as a one-byte string and
 * compares it several times faster than a two-byte one. Element encodings are
 * prefix-free and ordered like {@link compareKeyParts}, so the concatenation
 * compares like the tuple (a shorter tuple's encoding is a proper prefix of a
 * longer one's and thus sorts first).
 * - Number: tag 0x01, then the 8 bytes of the float64, big-endian, with the
 *   sign bit set for non-negative numbers and every bit flipped for negative
 *   ones (the usual order-preserving transform of IEEE 754 bits). Fixed
 *   length, hence prefix-free.
 * - String: tag 0x02, then each UTF-16 code unit `c` as
 *   `[0x01, 0x01]` (c = 0), `[0x01, 0x02]` (c = 1), `[c]` (2 <= c <= 0xFE) or
 *   `[0xFF, c >> 8, c & 0xFF]` (c >= 0xFF), then a 0x00 terminator. These unit
 *   codes are prefix-free and ordered like the code units, and the terminator
 *   sorts below all of them, so a string sorts before its extensions.
 *
 * Cost: a string element whose code units all lie in 0x02..0xFE (the common
 * case: identifiers, ids, names) is the string itself between tag and
 * terminator, assembled by concatenation after one scan of its code units (and
 * taken from a small cache when the string is short); a number takes one
 * `String.fromCharCode` call. No scratch array is involved. Other strings take
 * a slower escaping path. The result is a concatenation ("cons") string: V8
 * flattens it in place the first time it is compared (in the tree), which
 * costs what flattening it here would.
 *
 * The IndexedDB engine persists these strings (page fences and row keys, see
 * `adapters/indexeddb/pages.ts`), and IndexedDB orders string keys by code
 * units exactly as JavaScript does. The format is therefore frozen: changing it
 * needs a schema migration of that engine.
 */

import type { Key, KeyPart, KeyRange } from "../engine.js";
import { scanBounds, Upper } from "./scan-bounds.js";

/** Tag of a number element; below {@link STRING_TAG} because numbers sort first. */
const NUMBER_TAG = 0x01;
/** Tag of a string element. */
const STRING_TAG = 0x02;
/**
 * A code unit above every element tag: `enc + PREFIX_END` is a strict upper
 * bound of every encoding that extends `enc` by at least one element.
 */
const PREFIX_END = String.fromCharCode(0x03);
/** Ends a string element; below every encoded code unit. */
const STRING_TERMINATOR = 0x00;
/** Escape of a code unit below 0x02: `[ESCAPE_LOW, c + 1]`. */
const ESCAPE_LOW = 0x01;
/** Escape of a code unit of 0xFF or more: `[ESCAPE_HIGH, c >> 8, c & 0xFF]`. */
const ESCAPE_HIGH = 0xff;

/** Largest number of arguments passed to one `String.fromCharCode` call. */
const CHUNK = 8192;

// The pieces a plain string element is assembled from.
const OPEN = String.fromCharCode(STRING_TAG);
const CLOSE = String.fromCharCode(STRING_TERMINATOR);

// Scratch space: the float64 being encoded, and, on the escaping path only,
// code units.
const float64View = new DataView(new ArrayBuffer(8));
const float64Bytes = new Uint8Array(float64View.buffer);
const codes: number[] = [];

/**
 * Whether every code unit of `s` lies in 0x02..0xFE, so that its encoding is
 * the string itself between tag and terminator.
 */
function isPlain(s: string): boolean {
  const n = s.length;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x02 || c >= 0xff) return false;
  }
  return true;
}

/**
 * Encode one finite number: its tag and 8 bytes of order-preserving float64
 * bits, in one `String.fromCharCode` call. `-0` is encoded like `0` because
 * {@link compareKeyParts} treats them as equal.
 */
function encodeNumber(n: number): string {
  float64View.setFloat64(0, n === 0 ? 0 : n); // big-endian
  const b = float64Bytes;
  const b0 = b[0]!;
  if (b0 < 0x80) {
    // Non-negative: set the sign bit, so that it sorts above every negative.
    return String.fromCharCode(NUMBER_TAG, b0 | 0x80, b[1]!, b[2]!, b[3]!, b[4]!, b[5]!, b[6]!, b[7]!);
  }
  // Negative: flip every bit, so that larger magnitudes sort first.
  return String.fromCharCode(
    NUMBER_TAG,
    255 - b0,
    255 - b[1]!,
    255 - b[2]!,
    255 - b[3]!,
    255 - b[4]!,
    255 - b[5]!,
    255 - b[6]!,
    255 - b[7]!,
  );
}

/** Encode a whole string element (tag, escaped code units, terminator): the general path. */
function encodeEscapedString(s: string): string {
  const n = s.length;
  let plain = 0;
  while (plain < n) {
    const c = s.charCodeAt(plain);
    if (c < 0x02 || c >= 0xff) break;
    plain++;
  }
  // Keep the plain run [0, plain) as it is, escape from there on.
  codes.length = 0;
  for (let i = plain; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x02) codes.push(ESCAPE_LOW, c + 1);
    else if (c < 0xff) codes.push(c);
    else codes.push(ESCAPE_HIGH, c >> 8, c & 0xff);
  }
  codes.push(STRING_TERMINATOR);
  return OPEN + s.slice(0, plain) + takeCodes();
}

/** Turn the scratch code units into a (one-byte) string and reset them. */
function takeCodes(): string {
  let out: string;
  if (codes.length <= CHUNK) {
    out = String.fromCharCode.apply(null, codes);
  } else {
    out = "";
    for (let i = 0; i < codes.length; i += CHUNK) {
      out += String.fromCharCode.apply(null, codes.slice(i, i + CHUNK));
    }
  }
  codes.length = 0;
  return out;
}

/**
 * Encode one key element. The caller is responsible for having validated it
 * (a string or a finite number).
 */
export function encodeKeyPart(part: KeyPart): string {
  if (typeof part === "number") return encodeNumber(part);
  return isPlain(part) ? OPEN + part + CLOSE : encodeEscapedString(part);
}

/**
 * Element encodings of recently seen short plain strings. Keys repeat their
 * string elements (namespaces, names, tags) far more often than they invent
 * new ones, and a `Map` lookup of a string (whose hash V8 caches in the
 * string) costs less than scanning and concatenating it. Bounded: it is
 * emptied when full.
 */
const stringCache = new Map<string, string>();
/** Longest string (in code units) the cache holds. */
const CACHED_STRING_MAX = 24;
/** Entries before the cache is emptied. */
const STRING_CACHE_LIMIT = 4096;

/** The element encoding of string `s`, from the cache when it is short. */
function encodeStringCached(s: string): string {
  if (s.length > CACHED_STRING_MAX) return isPlain(s) ? OPEN + s + CLOSE : encodeEscapedString(s);
  let enc = stringCache.get(s);
  if (enc === undefined) {
    enc = isPlain(s) ? OPEN + s + CLOSE : encodeEscapedString(s);
    if (stringCache.size >= STRING_CACHE_LIMIT) stringCache.clear();
    stringCache.set(s, enc);
  }
  return enc;
}

/**
 * Encode a tuple key (validated by the caller with `assertValidKey`) into a
 * string whose JavaScript ordering is {@link compareKeys} ordering. The empty
 * tuple encodes to `""`, which sorts below every other encoding.
 *
 * The result is the concatenation of the elements' {@link encodeKeyPart}
 * encodings: one concatenation per element, the element's encoding coming
 * from a small cache for short strings.
 *
 * @example
 * encodeKey([1, "a"]) < encodeKey(["a"]); // true: numbers sort before strings
 * encodeKey(["a"]) < encodeKey(["a", 1]); // true: a prefix sorts first
 */
export function encodeKey(key: Key): string {
  let out = "";
  for (let i = 0; i < key.length; i++) {
    const part = key[i]!;
    out += typeof part === "number" ? encodeNumber(part) : encodeStringCached(part);
  }
  return out;
}

/**
 * The smallest string above every encoding that starts with `encodedPrefix`
 * (an output of {@link encodeKey}): the keys with that prefix are exactly the
 * encodings `e` with `encodedPrefix <= e < prefixUpperBound(encodedPrefix)`.
 */
export function prefixUpperBound(encodedPrefix: string): string {
  return encodedPrefix + PREFIX_END;
}

/**
 * Decode an output of {@link encodeKey} back into its tuple (a number element
 * comes back as a number, `-0` as `0`). Throws a `RangeError` on a string that
 * no key encodes to.
 *
 * @example
 * decodeKey(encodeKey(["usage", 7])); // ["usage", 7]
 */
export function decodeKey(enc: string): KeyPart[] {
  const out: KeyPart[] = [];
  const n = enc.length;
  let i = 0;
  while (i < n) {
    const tag = enc.charCodeAt(i++);
    if (tag === NUMBER_TAG) {
      if (i + 8 > n) throw new RangeError("decodeKey: truncated number element");
      const first = enc.charCodeAt(i);
      const negative = first < 0x80;
      for (let b = 0; b < 8; b++) {
        const c = enc.charCodeAt(i + b);
        float64Bytes[b] = negative ? 255 - c : b === 0 ? c & 0x7f : c;
      }
      i += 8;
      out.push(float64View.getFloat64(0));
    } else if (tag === STRING_TAG) {
      let s = "";
      let runStart = i;
      for (;;) {
        if (i >= n) throw new RangeError("decodeKey: unterminated string element");
        const c = enc.charCodeAt(i);
        if (c === STRING_TERMINATOR) break;
        if (c === ESCAPE_LOW || c === ESCAPE_HIGH) {
          s += enc.slice(runStart, i);
          if (c === ESCAPE_LOW) {
            s += String.fromCharCode(enc.charCodeAt(i + 1) - 1);
            i += 2;
          } else {
            s += String.fromCharCode((enc.charCodeAt(i + 1) << 8) | enc.charCodeAt(i + 2));
            i += 3;
          }
          if (i > n) throw new RangeError("decodeKey: truncated escape");
          runStart = i;
        } else {
          i++;
        }
      }
      s += enc.slice(runStart, i);
      i++; // the terminator
      out.push(s);
    } else {
      throw new RangeError(`decodeKey: unknown element tag ${tag}`);
    }
  }
  return out;
}

/** A {@link KeyRange} as one interval of key encodings (see {@link encodedInterval}). */
export interface EncodedInterval {
  /** Smallest encoding visited; `undefined` is unbounded. */
  readonly lower: string | undefined;
  readonly lowerOpen: boolean;
  /** Largest encoding visited; `undefined` is unbounded. */
  readonly upper: string | undefined;
  readonly upperOpen: boolean;
}

/**
 * `range` as one interval of key encodings: its {@link scanBounds} (`prefix`,
 * `lower` and `upper` intersected), encoded, so a walk visits exactly the
 * keys `inRange` accepts. An empty prefix means every key, and an absent (or
 * falsy) bound is unbounded. Throws `InvalidKeyError` for an invalid bound.
 */
export function encodedInterval(range: KeyRange): EncodedInterval {
  const { lower, lowerOpen, upper, upperMode } = scanBounds(range);
  if (upper === undefined) return { lower: lower && encodeKey(lower), lowerOpen, upper: undefined, upperOpen: false };
  const upperEnc = encodeKey(upper);
  return {
    lower: lower && encodeKey(lower),
    lowerOpen,
    // Every key that starts with a prefix encodes below this bound (see the module comment).
    upper: upperMode === Upper.Prefix ? prefixUpperBound(upperEnc) : upperEnc,
    upperOpen: upperMode !== Upper.Closed,
  };
}
