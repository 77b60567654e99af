/**
 * An in-memory B+ tree of items ordered by a string key: the sorted caches of
 * the IndexedDB engine (its log and pages) and of the Durable Objects engine.
 *
 * Promises (checked by `btree.test.ts` against a sorted array, and by
 * {@link BTree.check}):
 * - Items are unique by their `enc` string and kept in JavaScript string order
 *   (UTF-16 code units).
 * - `insert` and `delete` cost O(log n) node visits (each node visit costs
 *   O(capacity) for the array shift inside the node, done in place: no
 *   allocation unless a node splits); `scan` costs O(log n + k) for k visited
 *   items, in either direction, by following the doubly linked leaf level.
 *   Inserting a key above every present key (ascending loads) compares it with
 *   the largest key only.
 * - The tree stays balanced: every leaf sits at the same depth, and every node
 *   except the root holds between `floor(capacity / 2)` and `capacity`
 *   entries (deletion borrows from or merges with a sibling), so the height is
 *   O(log n). Deleting every item leaves an empty leaf as the root (height 1).
 *
 * Layout: leaves hold the items and, in a parallel array, their keys; an
 * inner node holds `keys.length + 1` children and separator keys such that
 * every item of `children[i]` has `keys[i - 1] <= enc < keys[i]`. Separators
 * are not required to be present items (deletion may leave a stale one
 * behind, which still bounds correctly).
 *
 * The tree does not own its items: it reads their `enc` once, on insert, and
 * hands the items back untouched.
 */

/** What the tree stores: anything with an immutable string sort key. */
export interface Keyed {
  /** The sort key. Must not change while the item is in the tree. */
  readonly enc: string;
}

/**
 * A leaf: a sorted run of items, linked to its neighbours for scans. `keys[i]`
 * is `items[i].enc`, kept in a parallel array so that a binary search reads
 * contiguous strings instead of chasing item objects.
 */
class Leaf<T extends Keyed> {
  readonly isLeaf = true as const;
  next: Leaf<T> | null = null;
  prev: Leaf<T> | null = null;
  constructor(
    public keys: string[],
    public items: T[],
  ) {}
}

/** An inner node: separators and one more child than separators. */
class Inner<T extends Keyed> {
  readonly isLeaf = false as const;
  constructor(
    public keys: string[],
    public children: Node<T>[],
  ) {}
}

type Node<T extends Keyed> = Leaf<T> | Inner<T>;

/**
 * Index of the first key `> k`: in an inner node, the child whose range holds
 * `k`; in a leaf, the first item above `k`.
 */
export function upperBound(keys: readonly string[], k: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (keys[mid]! <= k) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Insert `value` at `pos` of `array` in place (no result array, unlike
 * `splice`, which allocates one on every call).
 */
function insertAt<V>(array: V[], pos: number, value: V): void {
  let i = array.length;
  if (i === pos) {
    array.push(value);
    return;
  }
  array.push(array[i - 1]!);
  for (i--; i > pos; i--) array[i] = array[i - 1]!;
  array[pos] = value;
}

/** Remove the element at `pos` of `array` in place (no result array, unlike `splice`). */
function removeAt<V>(array: V[], pos: number): void {
  const last = array.length - 1;
  for (let i = pos; i < last; i++) array[i] = array[i + 1]!;
  array.pop();
}

/** Index of the first key `>= k`. */
export function lowerBound(keys: readonly string[], k: string): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (keys[mid]! < k) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * A B+ tree of {@link Keyed} items, ordered by `enc`.
 *
 * Why a B+ tree: wide nodes keep the tree shallow and the items of a scan
 * contiguous in memory, and the linked leaves make a scan of k items cost
 * O(log n + k) in both directions.
 */
export class BTree<T extends Keyed> {
  private root: Node<T> = new Leaf<T>([], []);
  private count = 0;
  private readonly max: number;
  private readonly min: number;
  // Reused descent path (the tree is only ever used synchronously).
  private readonly pathNodes: Inner<T>[] = [];
  private readonly pathIndexes: number[] = [];

  /**
   * @param capacity Most entries (items of a leaf, separators of an inner
   *   node) a node holds before it splits; at least 4. Small capacities are
   *   for tests that want deep trees from few items.
   */
  constructor(capacity = 64) {
    if (!Number.isInteger(capacity) || capacity < 4) {
      throw new RangeError(`BTree capacity must be an integer >= 4, got ${String(capacity)}`);
    }
    this.max = capacity;
    this.min = capacity >> 1;
  }

  /** Number of items in the tree. */
  get size(): number {
    return this.count;
  }

  /** Number of levels (1 for a tree that is a single leaf, including the empty tree). */
  get height(): number {
    let h = 1;
    let node = this.root;
    while (!node.isLeaf) {
      node = node.children[0]!;
      h++;
    }
    return h;
  }

  /** Remove every item. */
  clear(): void {
    this.root = new Leaf<T>([], []);
    this.count = 0;
  }

  /** The item whose key is `enc`, if any. O(log n). */
  find(enc: string): T | undefined {
    const leaf = this.leafFor(enc);
    const pos = lowerBound(leaf.keys, enc);
    return leaf.keys[pos] === enc ? leaf.items[pos] : undefined;
  }

  /** Add `item`, or replace the item with the same key. O(log n). */
  set(item: T): void {
    const leaf = this.leafFor(item.enc);
    const i = lowerBound(leaf.keys, item.enc);
    if (leaf.keys[i] === item.enc) leaf.items[i] = item;
    else this.insert(item);
  }

  /**
   * Add `item`. Returns false (and changes nothing) when an item with the same
   * key is already present.
   */
  insert(item: T): boolean {
    const k = item.enc;
    const pathNodes = this.pathNodes;
    const pathIndexes = this.pathIndexes;
    let depth = 0;
    let node = this.root;
    // Fast path for ascending inserts: a key above every key of the tree goes
    // to the end of the rightmost leaf, which the rightmost spine reaches
    // without a comparison (every separator on it is at most the largest key,
    // so the search below would take the same way).
    while (!node.isLeaf) {
      const i = node.children.length - 1;
      pathNodes[depth] = node;
      pathIndexes[depth] = i;
      depth++;
      node = node.children[i]!;
    }
    let keys = node.keys;
    let pos = keys.length;
    if (pos === 0 || !(k > keys[pos - 1]!)) {
      depth = 0;
      node = this.root;
      while (!node.isLeaf) {
        const i = upperBound(node.keys, k);
        pathNodes[depth] = node;
        pathIndexes[depth] = i;
        depth++;
        node = node.children[i]!;
      }
      keys = node.keys;
      pos = lowerBound(keys, k);
      if (keys[pos] === k) {
        pathNodes.length = 0;
        return false;
      }
    }
    const items = node.items;
    insertAt(keys, pos, k);
    insertAt(items, pos, item);
    this.count++;
    if (keys.length <= this.max) return true;

    // Split the leaf; the right half's first key becomes the separator.
    const half = keys.length >> 1;
    const right = new Leaf<T>(keys.splice(half), items.splice(half));
    right.next = node.next;
    right.prev = node;
    if (node.next !== null) node.next.prev = right;
    node.next = right;
    let separator = right.keys[0]!;
    let newChild: Node<T> = right;

    while (depth > 0) {
      depth--;
      const parent = pathNodes[depth]!;
      const i = pathIndexes[depth]!;
      insertAt(parent.keys, i, separator);
      insertAt(parent.children, i + 1, newChild);
      if (parent.keys.length <= this.max) {
        pathNodes.length = 0;
        return true;
      }
      // Split the inner node; its middle separator moves up.
      const mid = parent.keys.length >> 1;
      const rightKeys = parent.keys.splice(mid + 1);
      separator = parent.keys.pop()!;
      const rightChildren = parent.children.splice(mid + 1);
      newChild = new Inner<T>(rightKeys, rightChildren);
    }
    pathNodes.length = 0;
    this.root = new Inner<T>([separator], [this.root, newChild]);
    return true;
  }

  /** Remove and return the item whose key is `enc`, if any. */
  delete(enc: string): T | undefined {
    const pathNodes = this.pathNodes;
    const pathIndexes = this.pathIndexes;
    let depth = 0;
    let node = this.root;
    while (!node.isLeaf) {
      const i = upperBound(node.keys, enc);
      pathNodes[depth] = node;
      pathIndexes[depth] = i;
      depth++;
      node = node.children[i]!;
    }
    const keys = node.keys;
    const pos = lowerBound(keys, enc);
    if (keys[pos] !== enc) {
      pathNodes.length = 0;
      return undefined;
    }
    const found = node.items[pos]!;
    removeAt(keys, pos);
    removeAt(node.items, pos);
    this.count--;

    // Restore the minimum occupancy bottom-up.
    let current: Node<T> = node;
    while (depth > 0) {
      if (current.keys.length >= this.min) break;
      depth--;
      this.rebalance(pathNodes[depth]!, pathIndexes[depth]!);
      current = pathNodes[depth]!;
    }
    pathNodes.length = 0;

    // A root left with a single child hands the root over to it.
    let root = this.root;
    while (!root.isLeaf && root.keys.length === 0) root = root.children[0]!;
    this.root = root;
    return found;
  }

  /**
   * Fix the underfull child `parent.children[i]`: borrow one entry from a
   * sibling that can spare it, else merge with a sibling (which removes one
   * separator from `parent`).
   */
  private rebalance(parent: Inner<T>, i: number): void {
    const node = parent.children[i]!;
    const left = i > 0 ? parent.children[i - 1] : undefined;
    const right = i + 1 < parent.children.length ? parent.children[i + 1] : undefined;
    const min = this.min;

    if (node.isLeaf) {
      const l = left as Leaf<T> | undefined;
      const r = right as Leaf<T> | undefined;
      if (l !== undefined && l.keys.length > min) {
        node.keys.unshift(l.keys.pop()!);
        node.items.unshift(l.items.pop()!);
        parent.keys[i - 1] = node.keys[0]!;
      } else if (r !== undefined && r.keys.length > min) {
        node.keys.push(r.keys.shift()!);
        node.items.push(r.items.shift()!);
        parent.keys[i] = r.keys[0]!;
      } else if (l !== undefined) {
        for (const k of node.keys) l.keys.push(k);
        for (const item of node.items) l.items.push(item);
        l.next = node.next;
        if (node.next !== null) node.next.prev = l;
        removeAt(parent.keys, i - 1);
        removeAt(parent.children, i);
      } else if (r !== undefined) {
        for (const k of r.keys) node.keys.push(k);
        for (const item of r.items) node.items.push(item);
        node.next = r.next;
        if (r.next !== null) r.next.prev = node;
        removeAt(parent.keys, i);
        removeAt(parent.children, i + 1);
      }
      return;
    }

    const l = left as Inner<T> | undefined;
    const r = right as Inner<T> | undefined;
    if (l !== undefined && l.keys.length > min) {
      // Rotate right through the parent.
      node.keys.unshift(parent.keys[i - 1]!);
      parent.keys[i - 1] = l.keys.pop()!;
      node.children.unshift(l.children.pop()!);
    } else if (r !== undefined && r.keys.length > min) {
      // Rotate left through the parent.
      node.keys.push(parent.keys[i]!);
      parent.keys[i] = r.keys.shift()!;
      node.children.push(r.children.shift()!);
    } else if (l !== undefined) {
      l.keys.push(parent.keys[i - 1]!);
      for (const k of node.keys) l.keys.push(k);
      for (const c of node.children) l.children.push(c);
      removeAt(parent.keys, i - 1);
      removeAt(parent.children, i);
    } else if (r !== undefined) {
      node.keys.push(parent.keys[i]!);
      for (const k of r.keys) node.keys.push(k);
      for (const c of r.children) node.children.push(c);
      removeAt(parent.keys, i);
      removeAt(parent.children, i + 1);
    }
  }

  /** The leaf whose key range holds `k`. */
  private leafFor(k: string): Leaf<T> {
    let node = this.root;
    while (!node.isLeaf) node = node.children[upperBound(node.keys, k)]!;
    return node;
  }

  /** The leftmost or rightmost leaf. */
  private edgeLeaf(last: boolean): Leaf<T> {
    let node = this.root;
    while (!node.isLeaf) node = node.children[last ? node.children.length - 1 : 0]!;
    return node;
  }

  /**
   * Call `visit` on the items between the bounds, in ascending order (or
   * descending when `reverse`), at most `limit` of them. An absent bound is
   * unbounded; an open bound excludes an item equal to it. O(log n + k).
   */
  scan(
    lower: string | undefined,
    lowerOpen: boolean,
    upper: string | undefined,
    upperOpen: boolean,
    reverse: boolean,
    limit: number,
    visit: (item: T) => void,
  ): void {
    if (limit <= 0) return;
    let n = 0;
    if (!reverse) {
      let leaf: Leaf<T> | null;
      let pos: number;
      if (lower === undefined) {
        leaf = this.edgeLeaf(false);
        pos = 0;
      } else {
        leaf = this.leafFor(lower);
        pos = lowerOpen ? upperBound(leaf.keys, lower) : lowerBound(leaf.keys, lower);
      }
      while (leaf !== null) {
        const keys = leaf.keys;
        const items = leaf.items;
        for (; pos < keys.length; pos++) {
          if (upper !== undefined) {
            const k = keys[pos]!;
            if (upperOpen ? k >= upper : k > upper) return;
          }
          visit(items[pos]!);
          if (++n >= limit) return;
        }
        leaf = leaf.next;
        pos = 0;
      }
      return;
    }

    let leaf: Leaf<T> | null;
    let pos: number;
    if (upper === undefined) {
      leaf = this.edgeLeaf(true);
      pos = leaf.keys.length - 1;
    } else {
      leaf = this.leafFor(upper);
      pos = (upperOpen ? lowerBound(leaf.keys, upper) : upperBound(leaf.keys, upper)) - 1;
    }
    while (leaf !== null) {
      const keys = leaf.keys;
      const items = leaf.items;
      for (; pos >= 0; pos--) {
        if (lower !== undefined) {
          const k = keys[pos]!;
          if (lowerOpen ? k <= lower : k < lower) return;
        }
        visit(items[pos]!);
        if (++n >= limit) return;
      }
      leaf = leaf.prev;
      if (leaf !== null) pos = leaf.keys.length - 1;
    }
  }

  /**
   * Verify every structural invariant (ordering, separator bounds, occupancy,
   * uniform leaf depth, leaf links, item count) and throw an Error describing
   * the first violation. O(n); for tests.
   */
  check(): void {
    const leaves: Leaf<T>[] = [];
    let leafDepth = -1;
    let total = 0;
    const walk = (node: Node<T>, depth: number, lo: string | undefined, hi: string | undefined): void => {
      const isRoot = node === this.root;
      if (node.isLeaf) {
        if (leafDepth === -1) leafDepth = depth;
        else if (leafDepth !== depth) throw new Error("btree: leaves at different depths");
        const n = node.keys.length;
        if (node.items.length !== n) throw new Error("btree: leaf keys and items out of step");
        if (n > this.max) throw new Error("btree: overfull leaf");
        if (!isRoot && n < this.min) throw new Error(`btree: underfull leaf (${n} < ${this.min})`);
        for (let i = 0; i < n; i++) {
          const k = node.keys[i]!;
          if (node.items[i]!.enc !== k) throw new Error("btree: leaf key differs from its item's enc");
          if (i > 0 && !(node.keys[i - 1]! < k)) throw new Error("btree: leaf items out of order");
          if (lo !== undefined && k < lo) throw new Error("btree: item below its separator");
          if (hi !== undefined && k >= hi) throw new Error("btree: item at or above its separator");
        }
        total += n;
        leaves.push(node);
        return;
      }
      const n = node.keys.length;
      if (node.children.length !== n + 1) throw new Error("btree: inner node arity mismatch");
      if (n > this.max) throw new Error("btree: overfull inner node");
      if (isRoot ? n < 1 : n < this.min) throw new Error(`btree: underfull inner node (${n})`);
      for (let i = 0; i < n; i++) {
        const k = node.keys[i]!;
        if (i > 0 && !(node.keys[i - 1]! < k)) throw new Error("btree: separators out of order");
        if (lo !== undefined && k < lo) throw new Error("btree: separator below its bound");
        if (hi !== undefined && k >= hi) throw new Error("btree: separator at or above its bound");
      }
      for (let i = 0; i <= n; i++) {
        walk(node.children[i]!, depth + 1, i === 0 ? lo : node.keys[i - 1], i === n ? hi : node.keys[i]);
      }
    };
    walk(this.root, 0, undefined, undefined);
    if (total !== this.count) throw new Error(`btree: size ${this.count} but ${total} items`);
    for (let i = 0; i < leaves.length; i++) {
      const leaf = leaves[i]!;
      if (leaf.prev !== (leaves[i - 1] ?? null)) throw new Error("btree: broken prev link");
      if (leaf.next !== (leaves[i + 1] ?? null)) throw new Error("btree: broken next link");
    }
  }
}
