/**
 * The memory engine's store: an ordered trie over tuple keys.
 *
 * Each node stands for one key prefix. A key of n elements is the node n
 * levels below the root, and its entry (value and stored key) sits on that
 * node. A node finds a child by its element in a native `Map` (point reads,
 * writes and deletes cost O(key length) `Map` operations and never build an
 * encoding of the key), and keeps its children's elements in order in a
 * {@link SortedParts}, so a scan walks the trie in key order.
 *
 * Why this shape: the keys of the kit's layers share long prefixes (`["j",
 * name, table, consumer, ...]`) and vary in their last one or two elements,
 * which are mostly numbers that grow (positions, times) or strings that
 * sort by time (UUIDv7 request ids). A single ordered index over whole keys
 * pays, per insert, a key encoding and a descent that compares long common
 * prefixes; here an insert costs one `Map` lookup per element and an insert
 * into the sorted elements of one node, which for a growing element is an
 * append to the last chunk.
 *
 * Order: a node's own entry sorts before its children (a proper prefix sorts
 * first), and children sort by {@link compareKeyParts} (numbers before
 * strings, numbers by value, strings by UTF-16 code units). `0` and `-0` are
 * one element (the `Map` and the comparison agree on that).
 *
 * A node with neither an entry nor children is removed from its parent, so
 * deleting every key leaves only the root.
 */

import { assertValidKey, compareKeyParts, compareKeys, hasPrefix, type Key, type KeyPart, type KeyRange } from "../../src/engine.js";

/** The value of a node that holds no entry (no stored value is this private symbol). */
export const ABSENT: unique symbol = Symbol("absent");

/** Default number of elements per chunk of {@link SortedParts}. */
const DEFAULT_CHUNK = 256;

/**
 * Whether `a` sorts after `b` (see {@link compareKeyParts}), without the
 * general comparison's three-way result.
 */
function after(a: KeyPart, b: KeyPart): boolean {
  if (typeof a === typeof b) return a > b;
  return typeof a === "string";
}

/** First index of `chunk` (sorted) whose element is not before `part`. */
function lowerIndex(chunk: readonly KeyPart[], part: KeyPart): number {
  let lo = 0;
  let hi = chunk.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (after(part, chunk[mid]!)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** First index of `chunk` (sorted) whose element is after `part`. */
function upperIndex(chunk: readonly KeyPart[], part: KeyPart): number {
  let lo = 0;
  let hi = chunk.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (after(chunk[mid]!, part)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/**
 * A sorted set of distinct key elements: a list of sorted, non-empty chunks
 * whose concatenation is sorted. An element larger than every other one is
 * appended to the last chunk (a new chunk once that one is full); any other
 * insert or delete finds its chunk by binary search over the chunks' last
 * elements and splices inside one chunk of at most `capacity` elements. A
 * chunk that outgrows the capacity is split in two halves; one that shrinks
 * below a quarter of it is merged into a neighbour with room. The caller
 * guarantees that an inserted element is absent and a removed one present
 * (the node's `Map` says so).
 */
export class SortedParts {
  /** The chunks, in order; each sorted and non-empty. */
  readonly chunks: KeyPart[][] = [];
  /** Set by {@link seek}: the position it found. */
  chunk = 0;
  index = 0;

  constructor(private readonly capacity: number = DEFAULT_CHUNK) {}

  insert(part: KeyPart): void {
    const chunks = this.chunks;
    const n = chunks.length;
    if (n === 0) {
      chunks.push([part]);
      return;
    }
    const last = chunks[n - 1]!;
    if (after(part, last[last.length - 1]!)) {
      if (last.length < this.capacity) last.push(part);
      else chunks.push([part]);
      return;
    }
    const c = this.chunkOf(part);
    const chunk = chunks[c]!;
    chunk.splice(lowerIndex(chunk, part), 0, part);
    if (chunk.length > this.capacity) chunks.splice(c + 1, 0, chunk.splice(chunk.length >> 1));
  }

  remove(part: KeyPart): void {
    const chunks = this.chunks;
    const c = this.chunkOf(part);
    const chunk = chunks[c]!;
    const i = lowerIndex(chunk, part);
    if (i === 0) chunk.shift();
    else if (i === chunk.length - 1) chunk.pop();
    else chunk.splice(i, 1);
    if (chunk.length === 0) {
      chunks.splice(c, 1);
    } else if (chunk.length < this.capacity >> 2 && chunks.length > 1) {
      // Merge with the smaller neighbour when the two fit in one chunk.
      const left = c > 0 ? chunks[c - 1]! : undefined;
      const right = c + 1 < chunks.length ? chunks[c + 1]! : undefined;
      if (left !== undefined && (right === undefined || left.length <= right.length)) {
        if (left.length + chunk.length <= this.capacity) {
          for (const p of chunk) left.push(p);
          chunks.splice(c, 1);
        }
      } else if (right !== undefined && right.length + chunk.length <= this.capacity) {
        for (const p of right) chunk.push(p);
        chunks.splice(c + 1, 1);
      }
    }
  }

  /**
   * Find the first element not before `part` and leave its position in
   * {@link chunk} / {@link index} (`chunk === chunks.length` when there is none).
   */
  seek(part: KeyPart): void {
    const chunks = this.chunks;
    const c = this.chunkOf(part);
    this.chunk = c;
    this.index = c < chunks.length ? lowerIndex(chunks[c]!, part) : 0;
  }

  /**
   * Find the last element not after `part` and leave its position in
   * {@link chunk} / {@link index} (`chunk === -1` when there is none).
   */
  seekLast(part: KeyPart): void {
    const chunks = this.chunks;
    // The first chunk whose last element is after `part` holds the answer's successor.
    let lo = 0;
    let hi = chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const chunk = chunks[mid]!;
      if (after(chunk[chunk.length - 1]!, part)) hi = mid;
      else lo = mid + 1;
    }
    if (lo < chunks.length) {
      const i = upperIndex(chunks[lo]!, part) - 1;
      if (i >= 0) {
        this.chunk = lo;
        this.index = i;
        return;
      }
    }
    this.chunk = lo - 1;
    this.index = lo > 0 ? chunks[lo - 1]!.length - 1 : 0;
  }

  /** Number of elements (walks the chunks: for tests). */
  count(): number {
    let n = 0;
    for (const chunk of this.chunks) n += chunk.length;
    return n;
  }

  /** The first chunk whose last element is not before `part` (`chunks.length` when none). */
  private chunkOf(part: KeyPart): number {
    const chunks = this.chunks;
    let lo = 0;
    let hi = chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const chunk = chunks[mid]!;
      if (after(part, chunk[chunk.length - 1]!)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/** One node of the trie: the key prefix its path spells. */
export class TrieNode {
  /** The entry's value, or {@link ABSENT} when no key ends here. */
  value: unknown = ABSENT;
  /** The stored copy of the entry's key (null without an entry). */
  key: Key | null = null;
  /** Children by element (null when there are none). */
  children: Map<KeyPart, TrieNode> | null = null;
  /** The children's elements in order (null exactly when `children` is). */
  order: SortedParts | null = null;
}

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

/** The ordered trie (see the module comment). */
export class OrderedTrie {
  root = new TrieNode();
  /** Number of entries. */
  size = 0;
  /** Nodes visited by {@link delete}, for pruning (reused: the trie is used synchronously). */
  private readonly path: TrieNode[] = [];
  /** The key of the entry {@link delete} removed last. */
  removedKey: Key | null = null;
  // The running scan's state (scans do not nest).
  private bounds: ScanBounds = { lower: undefined, lowerOpen: false, upper: undefined, upperMode: Upper.Closed };
  private reverse = false;
  private remaining = 0;
  private visit: (node: TrieNode) => void = () => undefined;

  constructor(private readonly chunkCapacity: number = DEFAULT_CHUNK) {}

  /** The node of `key` when it holds an entry. */
  find(key: Key): TrieNode | undefined {
    let node: TrieNode | undefined = this.root;
    for (let i = 0; i < key.length; i++) {
      const children: Map<KeyPart, TrieNode> | null = node.children;
      if (children === null) return undefined;
      node = children.get(key[i]!);
      if (node === undefined) return undefined;
    }
    return node.value === ABSENT ? undefined : node;
  }

  /**
   * The node of `key`, created (with the nodes above it) when missing. The
   * caller sets its entry: a node left without an entry and without children
   * would break the trie's invariant.
   */
  node(key: Key): TrieNode {
    let node = this.root;
    for (let i = 0; i < key.length; i++) {
      const part = key[i]!;
      let children = node.children;
      if (children === null) {
        children = node.children = new Map();
        node.order = new SortedParts(this.chunkCapacity);
      }
      let child = children.get(part);
      if (child === undefined) {
        child = new TrieNode();
        children.set(part, child);
        node.order!.insert(part);
      }
      node = child;
    }
    return node;
  }

  /**
   * Remove `key`'s entry and return its value ({@link ABSENT} when there was
   * none; {@link removedKey} then holds the removed entry's stored key), and
   * remove the nodes left with neither an entry nor children.
   */
  delete(key: Key): unknown {
    const path = this.path;
    let node: TrieNode | undefined = this.root;
    for (let i = 0; i < key.length; i++) {
      path[i] = node;
      const children: Map<KeyPart, TrieNode> | null = node.children;
      node = children === null ? undefined : children.get(key[i]!);
      if (node === undefined) {
        path.length = 0;
        return ABSENT;
      }
    }
    const value = node.value;
    if (value !== ABSENT) {
      this.removedKey = node.key;
      node.value = ABSENT;
      node.key = null;
      this.size--;
      for (let i = key.length - 1; i >= 0 && node.value === ABSENT && node.children === null; i--) {
        const parent: TrieNode = path[i]!;
        const part = key[i]!;
        parent.children!.delete(part);
        if (parent.children!.size === 0) {
          parent.children = null;
          parent.order = null;
        } else {
          parent.order!.remove(part);
        }
        node = parent;
      }
    }
    path.length = 0;
    return value;
  }

  /**
   * Call `visit` with the node of every entry inside `bounds`, in key order
   * (descending when `reverse`), at most `limit` of them. `visit` must not
   * change the trie.
   */
  scan(bounds: ScanBounds, reverse: boolean, limit: number, visit: (node: TrieNode) => void): void {
    if (limit <= 0) return;
    this.bounds = bounds;
    this.reverse = reverse;
    this.remaining = limit;
    this.visit = visit;
    try {
      this.walk(this.root, 0, bounds.lower !== undefined, bounds.upper !== undefined);
    } finally {
      this.visit = () => undefined;
    }
  }

  /** Remove every entry. */
  clear(): void {
    this.root = new TrieNode();
    this.size = 0;
  }

  /**
   * Check the invariants (for tests): every child map and its sorted
   * elements agree, the elements are strictly increasing, no chunk is empty
   * or over capacity, every node but the root holds an entry or children,
   * each entry's stored key spells its path, and `size` counts the entries.
   * Returns the height (the longest key's length).
   */
  check(): number {
    let entries = 0;
    let height = 0;
    const path: KeyPart[] = [];
    const walk = (node: TrieNode, depth: number): void => {
      height = Math.max(height, depth);
      if (node.value !== ABSENT) {
        entries++;
        const key = node.key;
        if (key === null || key.length !== depth || key.some((p, i) => compareKeyParts(p, path[i]!) !== 0)) {
          throw new Error(`trie: the entry at ${JSON.stringify(path)} holds the key ${JSON.stringify(key)}`);
        }
      } else if (node.key !== null) {
        throw new Error(`trie: a node without an entry keeps a key at ${JSON.stringify(path)}`);
      }
      if (node.children === null) {
        if (node.order !== null) throw new Error("trie: sorted elements without children");
        if (depth > 0 && node.value === ABSENT) throw new Error(`trie: an empty node stayed at ${JSON.stringify(path)}`);
        return;
      }
      const order = node.order;
      if (order === null || node.children.size === 0) throw new Error("trie: children without sorted elements");
      let previous: KeyPart | undefined;
      let count = 0;
      for (const chunk of order.chunks) {
        if (chunk.length === 0 || chunk.length > this.chunkCapacity) throw new Error(`trie: a chunk of ${chunk.length} elements`);
        for (const part of chunk) {
          if (previous !== undefined && compareKeyParts(previous, part) >= 0) throw new Error("trie: elements out of order");
          previous = part;
          count++;
          const child = node.children.get(part);
          if (child === undefined) throw new Error(`trie: the element ${String(part)} has no child`);
          path.push(part);
          walk(child, depth + 1);
          path.pop();
        }
      }
      if (count !== node.children.size) throw new Error("trie: children and sorted elements differ in number");
    };
    walk(this.root, 0);
    if (this.root.value !== ABSENT) throw new Error("trie: the root holds an entry");
    if (entries !== this.size) throw new Error(`trie: size ${this.size} but ${entries} entries`);
    return height;
  }

  /**
   * Visit the entries under `node` (whose path has `depth` elements) inside
   * the bounds. `lowerOn` / `upperOn`: the path equals the bound's first
   * `depth` elements, so the bound still constrains this subtree. Returns
   * false once the limit is reached.
   */
  private walk(node: TrieNode, depth: number, lowerOn: boolean, upperOn: boolean): boolean {
    const { lower, lowerOpen, upper, upperMode } = this.bounds;
    // The node's own entry: is its key (the path) inside the bounds?
    let own = node.value !== ABSENT;
    if (own && lowerOn) own = lower!.length === depth && !lowerOpen; // a proper prefix of `lower` sorts before it
    if (own && upperOn) own = upper!.length > depth || upperMode !== Upper.Open;
    if (own && !this.reverse && !this.emit(node)) return false;
    const order = node.order;
    if (order !== null) {
      // Which children can hold keys inside the bounds.
      let from: KeyPart | undefined;
      let to: KeyPart | undefined;
      let childrenIn = true;
      if (lowerOn) {
        if (lower!.length > depth) from = lower![depth];
        else lowerOn = false; // the path is `lower`: every child sorts after it
      }
      if (upperOn) {
        if (upper!.length > depth) to = upper![depth];
        else if (upperMode === Upper.Prefix) upperOn = false; // every child starts with the prefix
        else childrenIn = false; // the path is `upper`: every child sorts after it
      }
      if (childrenIn && !(this.reverse ? this.walkDown(node, depth, from, to, lowerOn, upperOn) : this.walkUp(node, depth, from, to, lowerOn, upperOn))) {
        return false;
      }
    }
    if (own && this.reverse && !this.emit(node)) return false;
    return true;
  }

  /** The children of `node` from `from` to `to` (each when defined), ascending. */
  private walkUp(node: TrieNode, depth: number, from: KeyPart | undefined, to: KeyPart | undefined, lowerOn: boolean, upperOn: boolean): boolean {
    const order = node.order!;
    const children = node.children!;
    const chunks = order.chunks;
    let c = 0;
    let i = 0;
    if (from !== undefined) {
      order.seek(from);
      c = order.chunk;
      i = order.index;
    }
    for (; c < chunks.length; c++, i = 0) {
      const chunk = chunks[c]!;
      for (; i < chunk.length; i++) {
        const part = chunk[i]!;
        let atUpper = false;
        if (to !== undefined) {
          if (after(part, to)) return true;
          atUpper = upperOn && !after(to, part);
        }
        const atLower = lowerOn && from !== undefined && !after(part, from);
        if (!this.walk(children.get(part)!, depth + 1, atLower, atUpper)) return false;
      }
    }
    return true;
  }

  /** The children of `node` from `to` down to `from` (each when defined), descending. */
  private walkDown(node: TrieNode, depth: number, from: KeyPart | undefined, to: KeyPart | undefined, lowerOn: boolean, upperOn: boolean): boolean {
    const order = node.order!;
    const children = node.children!;
    const chunks = order.chunks;
    let c = chunks.length - 1;
    let i = c >= 0 ? chunks[c]!.length - 1 : 0;
    if (to !== undefined) {
      order.seekLast(to);
      c = order.chunk;
      i = order.index;
    }
    for (; c >= 0; c--, i = c >= 0 ? chunks[c]!.length - 1 : 0) {
      const chunk = chunks[c]!;
      for (; i >= 0; i--) {
        const part = chunk[i]!;
        let atLower = false;
        if (from !== undefined) {
          if (after(from, part)) return true;
          atLower = lowerOn && !after(part, from);
        }
        const atUpper = upperOn && to !== undefined && !after(to, part);
        if (!this.walk(children.get(part)!, depth + 1, atLower, atUpper)) return false;
      }
    }
    return true;
  }

  /** Hand `node` to the visitor; false once the limit is reached. */
  private emit(node: TrieNode): boolean {
    this.visit(node);
    return --this.remaining > 0;
  }
}
