/**
 * How the OrderedIndex of one store lays itself out in an Engine.
 *
 * Every key starts with the store's ordered subtree (`["s", store, "o"]`, see
 * `../layout.ts`). One row per record, keyed by identity, plus one
 * acceptance-order entry per record and one ranked and one due entry per
 * live record that is ranked or due. The index entries carry the stable key
 * as their value, so a listing reads one index range and then one record row
 * per result: its cost follows the page, not the collection.
 *
 * | key | value | what it is |
 * | --- | --- | --- |
 * | `r, ns, orderingScope, sortKey` | {@link RecordRow} | the record |
 * | `s, ns, orderingScope` | number | the last order the scope allocated |
 * | `a, ns, orderingScope, order` | stableKey | acceptance order (tombstones too) |
 * | `k, ns, rankingScope, rank, sortKey, orderingScope` | stableKey | live ranked records |
 * | `d, ns, dueAt, sortKey, orderingScope` | stableKey | live due records |
 *
 * `sortKey` is the stable key's sort form (hex of its UTF-8 bytes, see
 * `./bytes.ts`), so stable keys order by bytes on every engine, and every
 * key the index writes is plain ASCII whatever its stable keys hold (control
 * characters, NUL, emoji), which no adapter's key encoding can trip over. `listRanked`
 * scans `k` in reverse (descending rank, stable key, ordering scope);
 * `listDue` scans `d` forwards up to the bound. Numbers sort before strings
 * and by value (negative ranks and due times included), names are ASCII.
 */
import type { Key } from "../../engine.js";
import { StoreLayout } from "../layout.js";
import { stableKeySortForm } from "./bytes.js";

/** A stored record. `rank` / `dueAt` are `null` when unranked / not due. */
export interface RecordRow {
  readonly v: 1;
  readonly rankingScope: string;
  readonly revision: number;
  readonly order: number;
  readonly rank: number | null;
  readonly dueAt: number | null;
  readonly value: Uint8Array;
  readonly deleted: boolean;
}

/** The key builders of one store's OrderedIndex. */
export class OrderedLayout {
  readonly root: Key;
  constructor(store: string) {
    this.root = new StoreLayout(store).ordered();
  }
  record(namespace: string, orderingScope: string, stableKey: string): Key {
    return [...this.root, "r", namespace, orderingScope, stableKeySortForm(stableKey)];
  }
  sequence(namespace: string, orderingScope: string): Key {
    return [...this.root, "s", namespace, orderingScope];
  }
  accepted(namespace: string, orderingScope: string, order: number): Key {
    return [...this.root, "a", namespace, orderingScope, order];
  }
  acceptedAll(namespace: string, orderingScope: string): Key {
    return [...this.root, "a", namespace, orderingScope];
  }
  ranked(namespace: string, rankingScope: string, rank: number, stableKey: string, orderingScope: string): Key {
    return [...this.root, "k", namespace, rankingScope, rank, stableKeySortForm(stableKey), orderingScope];
  }
  rankedAll(namespace: string, rankingScope: string): Key {
    return [...this.root, "k", namespace, rankingScope];
  }
  due(namespace: string, dueAt: number, stableKey: string, orderingScope: string): Key {
    return [...this.root, "d", namespace, dueAt, stableKeySortForm(stableKey), orderingScope];
  }
  dueAll(namespace: string): Key {
    return [...this.root, "d", namespace];
  }
}
