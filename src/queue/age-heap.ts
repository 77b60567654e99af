/**
 * A binary min-heap of remembered keys ordered by (admission time, key), for
 * the event queue's eviction sweep (`./state.ts`).
 *
 * Entries may be pushed in any time order (two producers whose clocks differ,
 * a clock that went back): `push` and `pop` cost O(log n) whatever the order,
 * and `peek` O(1), so a sweep that evicts k keys costs O(k log n) and one that
 * evicts none O(1). The heap does not know which entries are still current;
 * its owner skips the stale ones as it pops them (lazy deletion).
 */

/** A remembered key and the `now` it was admitted at. */
export interface AgeEntry {
  readonly key: string;
  readonly at: number;
}

function before(a: AgeEntry, b: AgeEntry): boolean {
  return a.at < b.at || (a.at === b.at && a.key < b.key);
}

export class AgeHeap {
  private readonly entries: AgeEntry[] = [];

  get size(): number {
    return this.entries.length;
  }

  /** The oldest entry (lowest time, then lowest key), or `undefined` when empty. */
  peek(): AgeEntry | undefined {
    return this.entries[0];
  }

  push(entry: AgeEntry): void {
    const entries = this.entries;
    let i = entries.length;
    entries.push(entry);
    while (i > 0) {
      const parent = (i - 1) >>> 1;
      if (!before(entry, entries[parent]!)) break;
      entries[i] = entries[parent]!;
      i = parent;
    }
    entries[i] = entry;
  }

  /** Remove and return the oldest entry. */
  pop(): AgeEntry | undefined {
    const entries = this.entries;
    const top = entries[0];
    const last = entries.pop();
    if (top === undefined || last === undefined || entries.length === 0) return top;
    const n = entries.length;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= n) break;
      const right = left + 1;
      const child = right < n && before(entries[right]!, entries[left]!) ? right : left;
      if (!before(entries[child]!, last)) break;
      entries[i] = entries[child]!;
      i = child;
    }
    entries[i] = last;
    return top;
  }
}
