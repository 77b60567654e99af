/**
 * How a store lays its primitives out in an Engine.
 *
 * Every key of store `s` starts with `["s", s]`, so one engine holds many
 * stores beside many journals (`["j", ...]`). Names and keys are validated
 * storage names, so they sort as plain ASCII and a prefix listing is a key
 * range.
 *
 * | key | value | what it is |
 * | --- | --- | --- |
 * | `lr, ledger, seq` | `Uint8Array` | ledger record; the tip is the last seq |
 * | `lg, ledger` | number | ledger generation: bumped by each delete of a non-empty ledger, never removed (absent = 0) |
 * | `ls, lease` | {@link LeaseRow} | lease holder epoch and expiry |
 * | `kv, key` | {@link KvRow} | KV value and revision |
 * | `kvc` | number | last KV revision issued in this store |
 * | `bm, key` | {@link BlobMetaRow} | blob size, digest, chunk count |
 * | `bc, key, i` | `Uint8Array` | blob chunk `i` (at most {@link BLOB_CHUNK_BYTES}) |
 * | `o, ...` | | the OrderedIndex (`./ordered/`) |
 */
import type { Key } from "../engine.js";
import { InvalidArgumentError } from "./errors.js";
import { validateName } from "./names.js";

/** Lease state as a fact in storage (never a timer). */
export interface LeaseRow {
  /** The epoch of the latest grant (kept after release so epochs never repeat). */
  readonly epoch: number;
  /** Epoch ms until which the holder owns it; 0 once released. */
  readonly expiresAt: number;
}

export interface KvRow {
  readonly rev: number;
  readonly value: Uint8Array;
}

export interface BlobMetaRow {
  readonly size: number;
  /** SHA-256 of the content, lowercase hex. */
  readonly sha256: string;
  readonly chunks: number;
}

/** Largest stored blob chunk: far below the 2 MB row limit of Durable Objects. */
export const BLOB_CHUNK_BYTES = 256 * 1024;

/** Larger than any string made of name characters: the open end of a prefix range. */
const PREFIX_END = "\uffff";

/** The key builders of one store. */
export class StoreLayout {
  readonly root: Key;
  constructor(readonly store: string) {
    this.root = ["s", store];
  }
  ledgerRecord(name: string, seq: number): Key {
    return [...this.root, "lr", name, seq];
  }
  ledgerRecords(name: string): Key {
    return [...this.root, "lr", name];
  }
  /** The ledger's generation (its life): a delete bumps it, so a cursor can tell its ledger was replaced. */
  ledgerGeneration(name: string): Key {
    return [...this.root, "lg", name];
  }
  lease(name: string): Key {
    return [...this.root, "ls", name];
  }
  kv(key: string): Key {
    return [...this.root, "kv", key];
  }
  kvCounter(): Key {
    return [...this.root, "kvc"];
  }
  blobMeta(key: string): Key {
    return [...this.root, "bm", key];
  }
  blobChunk(key: string, index: number): Key {
    return [...this.root, "bc", key, index];
  }
  blobChunks(key: string): Key {
    return [...this.root, "bc", key];
  }
  /** The OrderedIndex's own subtree. */
  ordered(): Key {
    return [...this.root, "o"];
  }
  /** The key range of every `table` entry whose name starts with `prefix`. */
  prefixRange(table: "kv" | "bm", prefix: string): { lower: Key; upper: Key } {
    return { lower: [...this.root, table, prefix], upper: [...this.root, table, prefix + PREFIX_END] };
  }
}

/** The layout of the store an options object names (`{ store }`), validating the name. */
export function storeLayout(options: { readonly store: string }): StoreLayout {
  if (options === null || typeof options !== "object") throw new InvalidArgumentError("options", "needs { store }");
  return new StoreLayout(validateName(options.store));
}
