/**
 * The one interval of keys a {@link KeyRange} selects: its `prefix`, `lower`
 * and `upper` intersected into a lower and an upper bound, in tuple keys. The
 * memory engine walks its trie within it; the engines that order encoded keys
 * (IndexedDB pages) encode it (`encodedInterval` in `./key-encoding`), so
 * every engine intersects a range by the same rules.
 */
import { assertValidKey, compareKeys, hasPrefix, type Key, type KeyRange } from "../engine.js";

/** How the upper bound of a {@link ScanBounds} holds. */
export const Upper = {
  /** Keys up to and including `upper`. */
  Closed: 0,
  /** Keys before `upper`. */
  Open: 1,
  /** Keys up to `upper` and every key that starts with it. */
  Prefix: 2,
} as const;
export type Upper = (typeof Upper)[keyof typeof Upper];

/** One interval of keys: the intersection of a scan's prefix and bounds. */
export interface ScanBounds {
  readonly lower: Key | undefined;
  readonly lowerOpen: boolean;
  readonly upper: Key | undefined;
  readonly upperMode: Upper;
}

/**
 * The interval of keys a scan's `range` selects (the keys `inRange` accepts):
 * `prefix` and the bounds intersected into one lower and one upper bound. An
 * empty prefix means every key, and an absent (or falsy) bound is unbounded.
 * Throws `InvalidKeyError` for a bound that is not a valid key.
 */
export function scanBounds(range: KeyRange): ScanBounds {
  let lower: Key | undefined;
  let lowerOpen = false;
  let upper: Key | undefined;
  let upperMode: Upper = Upper.Closed;
  const prefix: unknown = range.prefix;
  if (prefix && !(Array.isArray(prefix) && prefix.length === 0)) {
    assertValidKey(prefix);
    lower = upper = prefix;
    upperMode = Upper.Prefix;
  }
  if (range.lower) {
    assertValidKey(range.lower);
    const open = range.lowerOpen === true;
    const c = lower === undefined ? 1 : compareKeys(range.lower, lower);
    if (c > 0 || (c === 0 && open)) {
      lower = range.lower;
      lowerOpen = open;
    }
  }
  if (range.upper) {
    assertValidKey(range.upper);
    const open = range.upperOpen === true;
    // Only the prefix can have set `upper`: a bound inside the prefix's keys
    // or before them is the tighter one.
    const tighter = upper === undefined || hasPrefix(range.upper, upper) || compareKeys(range.upper, upper) < 0;
    if (tighter) {
      upper = range.upper;
      upperMode = open ? Upper.Open : Upper.Closed;
    }
  }
  return { lower, lowerOpen, upper, upperMode };
}
