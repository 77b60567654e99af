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
 * Deletes leave tombstones: a node left with neither an entry nor live
 * children leaves its parent's sorted elements (so scans never meet it) but
 * stays in its parent's `Map` (its own children are dropped), and a later
 * put of a key through it revives it with an insert into the sorted
 * elements and no `Map` write. Removing it from the `Map` too would cost
 * little, but V8's `Map` keeps a
 * deleted entry in its bucket chain until the table is rehashed, so deleting
 * and setting the same element again and again (a key that runs empty and
 * comes back, beside many siblings) made every lookup of it walk a chain as
 * long as the siblings are many. A node whose tombstones outnumber its live
 * children (at least {@link COMPACT_AT} of them) is compacted: its children
 * are rebuilt from the live ones into a fresh `Map`. A node with no live
 * child left drops its children at once, so deleting every key leaves only
 * the root.
 *
 * A node with a single child keeps it in two fields instead of a `Map` and a
 * sorted list (index entries such as `[table, time, position]` have one
 * child per time): the `Map` is made when a second child comes.
 */

import { compareKeyParts, type Key, type KeyPart } from "../../src/engine.js";
import { Upper, type ScanBounds } from "../../src/ordered/scan-bounds.js";

/** The value of a node that holds no entry (no stored value is this private symbol). */
export const ABSENT: unique symbol = Symbol("absent");

/** Default number of elements per chunk of {@link SortedParts}. */
const DEFAULT_CHUNK = 256;

/** Tombstones a node keeps, at least, before it is compacted (see the module comment). */
export const COMPACT_AT = 16;

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
 * (the node's `Map` and counts say so).
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
  /** Children that hold an entry or a live child of their own. */
  live = 0;
  /** Children kept as tombstones: neither an entry nor a live child (and no children at all). */
  dead = 0;
  /** The element of the only child, while there is one and no `Map` (meaningful while `only` is set). */
  onlyPart: KeyPart = 0;
  /** The only child, while the node has exactly one and no `Map`. */
  only: TrieNode | null = null;
  /** Children by element, tombstones included, once there were two (null otherwise). */
  children: Map<KeyPart, TrieNode> | null = null;
  /** The elements of the live children in `children`, in order (null exactly when `children` is). */
  order: SortedParts | null = null;
}

/** Whether `node` holds an entry or a live child (else it is a tombstone, or the empty root). */
function isLive(node: TrieNode): boolean {
  return node.value !== ABSENT || node.live > 0;
}

/** The child of `node` at `part`, live or not. */
function childOf(node: TrieNode, part: KeyPart): TrieNode | undefined {
  if (node.only !== null) return node.onlyPart === part ? node.only : undefined; // `===`: 0 and -0 are one element
  const children = node.children;
  return children === null ? undefined : children.get(part);
}

/** Drop every child of `node` (all of them tombstones). */
function dropChildren(node: TrieNode): void {
  node.only = null;
  node.onlyPart = 0;
  node.children = null;
  node.order = null;
  node.dead = 0;
}

/** The ordered trie (see the module comment). */
export class OrderedTrie {
  root = new TrieNode();
  /** Number of entries. */
  size = 0;
  /** Nodes visited by {@link delete}, for pruning (reused: the trie is used synchronously). */
  private readonly path: TrieNode[] = [];
  /** Tombstones the last {@link check} found (for tests). */
  tombstones = 0;
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
    for (let i = 0; i < key.length && node !== undefined; i++) node = childOf(node, key[i]!);
    return node === undefined || node.value === ABSENT ? undefined : node;
  }

  /**
   * The node of `key`, created (with the nodes above it) when missing, and
   * counted live in its parent (tombstones on the way are revived). The
   * caller sets its entry at once: a node counted live without an entry or
   * a live child would break the counts.
   */
  node(key: Key): TrieNode {
    let node = this.root;
    for (let i = 0; i < key.length; i++) {
      const part = key[i]!;
      let child = childOf(node, part);
      if (child === undefined) {
        child = new TrieNode();
        this.addChild(node, part, child);
      } else if (!isLive(child)) {
        node.dead--;
        node.live++;
        if (node.order !== null) node.order.insert(part);
      }
      node = child;
    }
    return node;
  }

  /**
   * Remove `key`'s entry and return its value ({@link ABSENT} when there was
   * none; {@link removedKey} then holds the removed entry's stored key). A
   * node left with neither an entry nor a live child becomes a tombstone
   * (see the module comment).
   */
  delete(key: Key): unknown {
    const path = this.path;
    let node: TrieNode | undefined = this.root;
    for (let i = 0; i < key.length; i++) {
      path[i] = node;
      node = childOf(node, key[i]!);
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
      // Each node that died drops its children (all tombstones) and counts as a tombstone in its parent.
      for (let i = key.length - 1; i >= 0 && !isLive(node); i--) {
        if (node.dead > 0) dropChildren(node);
        const parent: TrieNode = path[i]!;
        parent.live--;
        parent.dead++;
        if (parent.order !== null) parent.order.remove(key[i]!);
        if (parent.dead > parent.live && parent.dead >= COMPACT_AT) this.compact(parent);
        node = parent;
      }
      if (this.root.live === 0 && this.root.dead > 0) dropChildren(this.root);
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
   * Check the invariants (for tests): a node keeps its only child in two
   * fields or its children in a `Map` (of two or more) whose sorted elements
   * are exactly its live children, strictly increasing, in chunks neither
   * empty nor over capacity; `live` and `dead` count its live children and tombstones; a
   * tombstone has no children, a node with no live child keeps no
   * tombstones unless it holds an entry, and tombstones outnumber live
   * children only while fewer than {@link COMPACT_AT}; each entry's stored
   * key spells its path; `size` counts the entries. Returns the height (the
   * longest stored key's length; 0 when empty) and sets {@link tombstones}.
   */
  check(): number {
    let entries = 0;
    let tombstones = 0;
    let height = 0;
    const path: KeyPart[] = [];
    const fail = (what: string): never => {
      throw new Error(`trie: ${what} at ${JSON.stringify(path)}`);
    };
    const walk = (node: TrieNode, depth: number): void => {
      if (node.value !== ABSENT) {
        entries++;
        height = Math.max(height, depth);
        const key = node.key;
        if (key === null || key.length !== depth || key.some((p, i) => compareKeyParts(p, path[i]!) !== 0)) fail(`an entry holds the key ${JSON.stringify(key)}`);
      } else if (node.key !== null) {
        fail("a node without an entry keeps a key");
      }
      const children: [KeyPart, TrieNode][] = [];
      if (node.only !== null) {
        if (node.children !== null || node.order !== null) fail("a single child beside a Map");
        children.push([node.onlyPart, node.only]);
      } else if (node.children !== null) {
        const order = node.order;
        if (order === null) fail("children without sorted elements");
        let previous: KeyPart | undefined;
        let sorted = 0;
        for (const chunk of order!.chunks) {
          if (chunk.length === 0 || chunk.length > this.chunkCapacity) fail(`a chunk of ${chunk.length} elements`);
          for (const part of chunk) {
            if (previous !== undefined && compareKeyParts(previous, part) >= 0) fail("elements out of order");
            previous = part;
            sorted++;
            const child = node.children.get(part);
            if (child === undefined || !isLive(child)) fail(`the sorted element ${String(part)} is not a live child`);
          }
        }
        for (const entry of node.children) children.push(entry);
        if (children.length < 2) fail("a Map for fewer than two children");
        if (sorted !== children.filter(([, child]) => isLive(child)).length) fail("live children missing from the sorted elements");
      } else if (node.order !== null) {
        fail("sorted elements without children");
      }
      let live = 0;
      for (const [part, child] of children) {
        path.push(part);
        if (isLive(child)) live++;
        else if (child.only !== null || child.children !== null) fail("a tombstone with children");
        walk(child, depth + 1);
        path.pop();
      }
      const dead = children.length - live;
      tombstones += dead;
      if (node.live !== live || node.dead !== dead) fail(`counts live ${node.live} / dead ${node.dead}, found ${live} / ${dead}`);
      if (dead > live && dead >= COMPACT_AT) fail(`${dead} tombstones beside ${live} live children`);
      if (live === 0 && dead > 0 && node.value === ABSENT) fail("a node with only tombstones keeps them");
    };
    walk(this.root, 0);
    this.tombstones = tombstones;
    if (this.root.value !== ABSENT) throw new Error("trie: the root holds an entry");
    if (entries !== this.size) throw new Error(`trie: size ${this.size} but ${entries} entries`);
    return height;
  }

  /** Add `child` (new, counted live) under `node` at `part` (absent there). */
  private addChild(node: TrieNode, part: KeyPart, child: TrieNode): void {
    node.live++;
    if (node.only === null && node.children === null) {
      node.onlyPart = part;
      node.only = child;
      return;
    }
    if (node.children === null) {
      // A second child: from the two fields to a Map and a sorted list.
      node.children = new Map([[node.onlyPart, node.only!]]);
      node.order = new SortedParts(this.chunkCapacity);
      if (isLive(node.only!)) node.order.insert(node.onlyPart);
      node.only = null;
      node.onlyPart = 0;
    }
    node.children.set(part, child);
    node.order!.insert(part);
  }

  /** Rebuild the children of `node` from its live ones (its sorted elements) into a fresh `Map`, without tombstones. */
  private compact(node: TrieNode): void {
    const old = node.children;
    const order = node.order;
    dropChildren(node);
    node.live = 0;
    if (old === null || order === null) return; // a single child: dropChildren was all there was to do
    for (const chunk of order.chunks) {
      for (const part of chunk) this.addChild(node, part, old.get(part)!); // the live ones, ascending: each insert is an append
    }
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
    if (node.live > 0) {
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
      if (childrenIn) {
        const more =
          node.only !== null
            ? this.walkOnly(node.onlyPart, node.only, depth, from, to, lowerOn, upperOn)
            : this.reverse
              ? this.walkDown(node, depth, from, to, lowerOn, upperOn)
              : this.walkUp(node, depth, from, to, lowerOn, upperOn);
        if (!more) return false;
      }
    }
    if (own && this.reverse && !this.emit(node)) return false;
    return true;
  }

  /** The only child of a node, when it lies from `from` to `to` (each when defined). */
  private walkOnly(part: KeyPart, child: TrieNode, depth: number, from: KeyPart | undefined, to: KeyPart | undefined, lowerOn: boolean, upperOn: boolean): boolean {
    if (from !== undefined && after(from, part)) return true;
    if (to !== undefined && after(part, to)) return true;
    const atLower = lowerOn && from !== undefined && !after(part, from);
    const atUpper = upperOn && to !== undefined && !after(to, part);
    return this.walk(child, depth + 1, atLower, atUpper);
  }

  /** The live children of `node` (its sorted elements) from `from` to `to` (each when defined), ascending. */
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

  /** The live children of `node` from `to` down to `from` (each when defined), descending. */
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
