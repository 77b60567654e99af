/**
 * The memory engine's implementation: the reference {@link Engine}, kept in
 * process memory. The public entry point is `memoryEngine()` in `./index.ts`;
 * this module also exposes the {@link MemoryEngine} class so that the tests can
 * inspect the ordered index (`inspectIndex`).
 *
 * What it promises, beyond the {@link Engine} contract:
 * - Storage: a `Map` from the order-preserving key encoding (`./key-encoding`)
 *   to a slot `{ enc, entry }`, for O(1) point reads, plus a B+ tree
 *   (`./btree`) of the same slots ordered by encoding, for O(log n) inserts and
 *   deletes and O(log n + k) scans. Overwriting an existing key replaces the
 *   slot's entry and does not touch the tree.
 * - Transactions run one at a time, in the order `transact` was called. Writes
 *   apply at once (so the body reads its own writes, and nothing else can
 *   observe them until it settles because nothing else runs), and each is
 *   recorded in an undo log that is replayed backwards when the body throws
 *   or rejects, or when any call on the handle failed (see below).
 * - Every call on a transaction handle validates synchronously and throws
 *   from the call itself: `InvalidKeyError` for a bad key, `TypeError` for a
 *   write in a "readonly" transaction, `RangeError` for a bad `limit`. Such a
 *   failure also dooms the transaction: even if the body catches it, the
 *   transaction rolls back and `transact` rejects with that error (the
 *   contract says a failed write surfaces as the rejection of `transact`).
 * - After the body settles its handle is dead: every call on it throws.
 * - Values are stored and handed back by reference, never cloned (the core
 *   promises never to mutate a value after `put` or `get`). Keys are copied on
 *   `put`, so that a caller reusing its key array cannot change a stored key.
 *   `scan` returns the stored entry objects themselves (an overwrite replaces
 *   the entry, it never mutates it), so callers must treat entries and their
 *   keys as read-only, as their types say. Freezing them was measured to cost
 *   about a quarter of the time of a `put`.
 * - `scan` intersects `prefix`, `lower` and `upper` into one interval of
 *   encodings, so it visits exactly the keys `inRange` accepts: an empty
 *   prefix means every key, and an absent (or falsy) bound is unbounded.
 * - `close()` refuses later `transact` calls, lets the already queued ones
 *   finish, then drops the data.
 */

import {
  assertValidKey,
  type Engine,
  type EngineTransaction,
  type Entry,
  type Key,
  type KeyRange,
  type ScanOptions,
  type TransactionMode,
} from "../../src/engine.js";
import { BTree } from "./btree.js";
import { encodeKey, prefixUpperBound } from "./key-encoding.js";

/** Options of the {@link MemoryEngine} constructor (internal, for tests). */
export interface MemoryEngineInternals {
  /** B+ tree node capacity (default 64); tests use tiny ones to get deep trees. */
  readonly nodeCapacity?: number;
}

/**
 * One stored key: its encoding (the tree's sort key, immutable) and its
 * current entry (replaced on overwrite, never mutated).
 */
interface Slot {
  readonly enc: string;
  entry: Entry;
}

/** Undo-log operation codes. */
const UNDO_INSERT = 0; // the slot was added: remove it again
const UNDO_UPDATE = 1; // the slot's entry was replaced: restore the previous one
const UNDO_REMOVE = 2; // the slot was removed: add it back

const PREFIX = "isostore memory engine: ";

/** The stored data shared by the engine and its transactions. */
interface Store {
  readonly slots: Map<string, Slot>;
  readonly tree: BTree<Slot>;
}

/** A queued `transact` call. */
interface Job {
  readonly mode: TransactionMode;
  readonly fn: (tx: EngineTransaction) => Promise<unknown>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (reason: unknown) => void;
}

/** Check a scan limit: absent, or a positive integer. */
function checkLimit(limit: unknown): number {
  if (limit === undefined) return Infinity;
  if (typeof limit !== "number" || !Number.isInteger(limit) || limit <= 0) {
    throw new RangeError(`${PREFIX}scan limit must be a positive integer, got ${typeof limit === "number" ? String(limit) : typeof limit}`);
  }
  return limit;
}

/**
 * The handle of one transaction. Writes go straight to the store and into the
 * undo log; the engine kills the handle (`live = false`) when the body settles.
 */
class MemoryTransaction implements EngineTransaction {
  /** False once the body settled: every call then throws. */
  live = true;
  /** Set by the first failing call; dooms the transaction. */
  failed = false;
  failure: unknown = undefined;
  // Undo log, three parallel arrays (one record per effective write).
  private readonly undoOps: number[] = [];
  private readonly undoSlots: Slot[] = [];
  private readonly undoEntries: (Entry | undefined)[] = [];

  constructor(
    private readonly store: Store,
    private readonly readonly: boolean,
  ) {}

  get<V = unknown>(key: Key): Promise<V | undefined> {
    this.assertLive();
    try {
      assertValidKey(key);
      const slot = this.store.slots.get(encodeKey(key));
      return Promise.resolve(slot === undefined ? undefined : (slot.entry.value as V));
    } catch (error) {
      throw this.fail(error);
    }
  }

  put(key: Key, value: unknown): void {
    this.assertLive();
    try {
      this.assertWritable("put");
      assertValidKey(key);
      const enc = encodeKey(key);
      // Copy the key (a caller may reuse its array); keep the value by reference.
      const entry: Entry = { key: key.slice(), value };
      const { slots, tree } = this.store;
      const slot = slots.get(enc);
      if (slot === undefined) {
        const created: Slot = { enc, entry };
        tree.insert(created);
        slots.set(enc, created);
        this.log(UNDO_INSERT, created, undefined);
      } else {
        this.log(UNDO_UPDATE, slot, slot.entry);
        slot.entry = entry;
      }
    } catch (error) {
      throw this.fail(error);
    }
  }

  delete(key: Key): void {
    this.assertLive();
    try {
      this.assertWritable("delete");
      assertValidKey(key);
      const enc = encodeKey(key);
      const { slots, tree } = this.store;
      const slot = slots.get(enc);
      if (slot === undefined) return;
      slots.delete(enc);
      tree.delete(enc);
      this.log(UNDO_REMOVE, slot, undefined);
    } catch (error) {
      throw this.fail(error);
    }
  }

  scan<V = unknown>(range: KeyRange, options?: ScanOptions): Promise<Entry<V>[]> {
    this.assertLive();
    try {
      const limit = checkLimit(options?.limit);
      const reverse = options?.reverse === true;
      // Intersect the prefix and the lower/upper bounds into one interval of
      // encodings (a tighter bound wins; on a tie, the open one).
      let lower: string | undefined;
      let lowerOpen = false;
      let upper: string | undefined;
      let upperOpen = false;
      if (range.prefix) {
        const prefix = range.prefix;
        // An empty prefix is every key (as in `inRange`); otherwise it must be a valid key.
        if (!(Array.isArray(prefix) && prefix.length === 0)) {
          assertValidKey(prefix);
          lower = encodeKey(prefix);
          upper = prefixUpperBound(lower);
          upperOpen = true;
        }
      }
      if (range.lower) {
        assertValidKey(range.lower);
        const enc = encodeKey(range.lower);
        const open = range.lowerOpen === true;
        if (lower === undefined || enc > lower || (enc === lower && open)) {
          lower = enc;
          lowerOpen = open;
        }
      }
      if (range.upper) {
        // (A tie with the prefix's bound cannot happen: that bound is never a
        // key encoding. The tie rule is kept so the intersection stays exact.)
        assertValidKey(range.upper);
        const enc = encodeKey(range.upper);
        const open = range.upperOpen === true;
        if (upper === undefined || enc < upper || (enc === upper && open)) {
          upper = enc;
          upperOpen = open;
        }
      }
      const out: Entry[] = [];
      this.store.tree.scan(lower, lowerOpen, upper, upperOpen, reverse, limit, (slot) => {
        out.push(slot.entry);
      });
      return Promise.resolve(out as Entry<V>[]);
    } catch (error) {
      throw this.fail(error);
    }
  }

  /** Undo every write of this transaction, newest first. */
  rollback(): void {
    const { slots, tree } = this.store;
    const ops = this.undoOps;
    for (let i = ops.length - 1; i >= 0; i--) {
      const slot = this.undoSlots[i]!;
      switch (ops[i]) {
        case UNDO_INSERT:
          slots.delete(slot.enc);
          tree.delete(slot.enc);
          break;
        case UNDO_UPDATE:
          slot.entry = this.undoEntries[i]!;
          break;
        case UNDO_REMOVE:
          tree.insert(slot);
          slots.set(slot.enc, slot);
          break;
      }
    }
    this.discardLog();
  }

  /** Forget the undo log (after a commit or a rollback). */
  discardLog(): void {
    this.undoOps.length = 0;
    this.undoSlots.length = 0;
    this.undoEntries.length = 0;
  }

  private log(op: number, slot: Slot, previous: Entry | undefined): void {
    this.undoOps.push(op);
    this.undoSlots.push(slot);
    this.undoEntries.push(previous);
  }

  private assertLive(): void {
    if (!this.live) {
      throw new Error(`${PREFIX}this transaction has already finished; its handle cannot be used any more`);
    }
  }

  private assertWritable(what: string): void {
    if (this.readonly) throw new TypeError(`${PREFIX}${what} in a readonly transaction`);
  }

  /** Record the first failure (it dooms the transaction) and return `error` to rethrow. */
  private fail(error: unknown): unknown {
    if (!this.failed) {
      this.failed = true;
      this.failure = error;
    }
    return error;
  }
}

/**
 * The reference in-memory {@link Engine}. Use `memoryEngine()` from
 * `isostore/memory` rather than this class; it is exported for the adapter's
 * own tests.
 */
export class MemoryEngine implements Engine {
  /** Memory does not outlive the process. */
  readonly durable = false;
  private readonly store: Store;
  private closed = false;
  /** Whether a transaction body is running or about to start. */
  private busy = false;
  /** Waiting `transact` calls, FIFO from `queueHead`. */
  private queue: Job[] = [];
  private queueHead = 0;
  /** `close()` calls waiting for the queue to drain. */
  private drained: (() => void)[] = [];

  constructor(internals: MemoryEngineInternals = {}) {
    this.store = { slots: new Map(), tree: new BTree<Slot>(internals.nodeCapacity ?? 64) };
  }

  /**
   * Queue `fn` behind the transactions already submitted and run it alone
   * (see the module comment for what the handle promises). Rejects at once
   * when the engine is closed, the mode is unknown or `fn` is not a function.
   */
  transact<T>(mode: TransactionMode, fn: (tx: EngineTransaction) => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new Error(`${PREFIX}the engine is closed`));
    if (mode !== "readonly" && mode !== "readwrite") {
      return Promise.reject(new TypeError(`${PREFIX}unknown transaction mode ${String(mode)}`));
    }
    if (typeof fn !== "function") {
      return Promise.reject(new TypeError(`${PREFIX}transact needs a function`));
    }
    return new Promise<T>((resolve, reject) => {
      const job: Job = { mode, fn, resolve: resolve as (value: unknown) => void, reject };
      if (this.busy) {
        this.queue.push(job);
      } else {
        // Start on a later microtask, never inside the caller's own call.
        this.busy = true;
        void Promise.resolve().then(() => this.start(job));
      }
    });
  }

  /**
   * Refuse every later `transact` call, let the queued ones finish, then drop
   * the data. Resolves once the queue drained; calling it again is harmless.
   */
  close(): Promise<void> {
    this.closed = true;
    if (!this.busy) {
      this.release();
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      this.drained.push(resolve);
    });
  }

  /**
   * The ordered index, for tests: its size, its height and its structural
   * check. Not part of the Engine contract.
   */
  inspectIndex(): { readonly size: number; readonly height: number; check(): void } {
    const tree = this.store.tree;
    return { size: tree.size, height: tree.height, check: () => tree.check() };
  }

  /** Run one queued transaction body, then settle it. */
  private start(job: Job): void {
    const tx = new MemoryTransaction(this.store, job.mode === "readonly");
    let body: Promise<unknown>;
    try {
      body = Promise.resolve(job.fn(tx));
    } catch (error) {
      // Keep exactly what the body threw, Error or not, as the rejection reason.
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
      body = Promise.reject(error);
    }
    void body.then(
      (value) => this.finish(tx, job, true, value),
      (error: unknown) => this.finish(tx, job, false, error),
    );
  }

  /** Commit or roll back `tx`, settle its `transact` call, start the next one. */
  private finish(tx: MemoryTransaction, job: Job, ok: boolean, outcome: unknown): void {
    tx.live = false;
    if (ok && !tx.failed) {
      tx.discardLog();
      job.resolve(outcome);
    } else {
      tx.rollback();
      job.reject(ok ? tx.failure : outcome);
    }
    const next = this.dequeue();
    if (next !== undefined) {
      this.start(next);
      return;
    }
    this.busy = false;
    if (this.closed) {
      this.release();
      const waiters = this.drained;
      this.drained = [];
      for (const resolve of waiters) resolve();
    }
  }

  private dequeue(): Job | undefined {
    if (this.queueHead >= this.queue.length) return undefined;
    const job = this.queue[this.queueHead]!;
    this.queueHead++;
    if (this.queueHead === this.queue.length) {
      this.queue = [];
      this.queueHead = 0;
    } else if (this.queueHead > 1024 && this.queueHead * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.queueHead);
      this.queueHead = 0;
    }
    return job;
  }

  /** Drop the data of a closed engine. */
  private release(): void {
    this.store.slots.clear();
    this.store.tree.clear();
  }
}

