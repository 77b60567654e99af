/**
 * A hash map over tuple keys: the journal's read-ahead cache
 * (`src/journal/read-ahead.ts`).
 *
 * Building a key's string encoding (and hashing that fresh string) costs
 * several times more than looking the key's elements up one by one in
 * native `Map`s, whose hashes of strings are cached in the strings and whose
 * hashes of numbers are cheap; this map does the latter.
 *
 * Promises (checked by `tuple-map.test.ts`), for valid keys (non-empty tuples
 * of strings and finite numbers):
 * - Two keys are the same entry exactly when `compareKeys` says they are
 *   equal: element-wise `SameValueZero`, so `0` and `-0` are one key, and
 *   `1` and `"1"` are two.
 * - `get`, `leaf` and `delete` cost O(key length) `Map` operations.
 * - Memory: a key of n elements lives in the trie of the n-element keys; each
 *   of its first n - 1 elements selects one nested `Map` level, and the last
 *   one maps to the value. A level that `delete` leaves empty is removed from
 *   its parent, so deleting every key leaves only the (empty) top levels.
 */

import type { Key, KeyPart } from "./engine.js";

/**
 * One level of a trie: from a key element to the next level, or, at the last
 * level, to the stored value.
 */
export type TupleMapLevel = Map<KeyPart, unknown>;

/** A map from tuple keys (validated by the caller) to values other than `undefined`. */
export class TupleMap<V> {
  /** `roots[n]`: the trie of the keys with `n` elements (absent until used). */
  private roots: (TupleMapLevel | undefined)[] = [];
  /** Levels visited by `delete`, for pruning (reused; the map is used synchronously). */
  private readonly path: TupleMapLevel[] = [];

  /** The value stored under `key`, if any. */
  get(key: Key): V | undefined {
    const last = key.length - 1;
    let level = this.roots[last + 1];
    for (let i = 0; i < last && level !== undefined; i++) {
      level = level.get(key[i]!) as TupleMapLevel | undefined;
    }
    return level === undefined ? undefined : (level.get(key[last]!) as V | undefined);
  }

  /**
   * The last level of `key`'s trie path, created when missing: the caller
   * reads, sets or replaces the value with `level.get(last)` /
   * `level.set(last, value)` where `last` is the key's last element. The value
   * set must not be `undefined`.
   */
  leaf(key: Key): TupleMapLevel {
    const last = key.length - 1;
    let level = this.roots[last + 1];
    if (level === undefined) {
      level = new Map();
      this.roots[last + 1] = level;
    }
    for (let i = 0; i < last; i++) {
      const part = key[i]!;
      let next = level.get(part) as TupleMapLevel | undefined;
      if (next === undefined) {
        next = new Map();
        level.set(part, next);
      }
      level = next;
    }
    return level;
  }

  /**
   * The value stored under the key made of the first `length` elements of
   * `key` (without building that key).
   */
  getPrefix(key: Key, length: number): V | undefined {
    const last = length - 1;
    let level = this.roots[length];
    for (let i = 0; i < last && level !== undefined; i++) {
      level = level.get(key[i]!) as TupleMapLevel | undefined;
    }
    return level === undefined ? undefined : (level.get(key[last]!) as V | undefined);
  }

  /** Store `value` (not `undefined`) under `key`. */
  set(key: Key, value: V): void {
    this.leaf(key).set(key[key.length - 1]!, value);
  }

  /** Remove `key` and return its value, if any; prunes the levels left empty. */
  delete(key: Key): V | undefined {
    const last = key.length - 1;
    let level = this.roots[last + 1];
    if (level === undefined) return undefined;
    const path = this.path;
    for (let i = 0; i < last; i++) {
      path[i] = level;
      level = level.get(key[i]!) as TupleMapLevel | undefined;
      if (level === undefined) {
        path.length = 0;
        return undefined;
      }
    }
    const lastPart = key[last]!;
    const value = level.get(lastPart) as V | undefined;
    if (value !== undefined) {
      level.delete(lastPart);
      for (let i = last - 1; i >= 0 && level.size === 0; i--) {
        level = path[i]!;
        level.delete(key[i]!);
      }
    }
    path.length = 0;
    return value;
  }

  /** Call `visit` with every value and its key (a new array per key; order unspecified). */
  forEach(visit: (value: V, key: Key) => void): void {
    const path: KeyPart[] = [];
    const walk = (level: TupleMapLevel, depth: number): void => {
      for (const [part, next] of level) {
        path.push(part);
        if (depth === 0) visit(next as V, path.slice());
        else walk(next as TupleMapLevel, depth - 1);
        path.pop();
      }
    };
    this.roots.forEach((root, n) => {
      if (root !== undefined) walk(root, n - 1);
    });
  }

  /** Remove every key. */
  clear(): void {
    this.roots = [];
  }

  /**
   * Number of `Map` levels (the top level of each key length included), for
   * tests of the pruning.
   */
  levelCount(): number {
    let count = 0;
    const walk = (level: TupleMapLevel, depth: number): void => {
      count++;
      if (depth === 0) return;
      for (const child of level.values()) walk(child as TupleMapLevel, depth - 1);
    };
    this.roots.forEach((root, n) => {
      if (root !== undefined) walk(root, n - 1);
    });
    return count;
  }
}
