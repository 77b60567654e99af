/**
 * The memory engine's implementation: the reference {@link Engine}, kept in
 * process memory. The public entry point is `memoryEngine()` in `./index.ts`;
 * this module also exposes the {@link MemoryEngine} class so that the tests can
 * inspect the ordered index (`inspectIndex`).
 *
 * What it promises, beyond the {@link Engine} contract:
 * - Storage: a {@link TupleMap} (`src/tuple-map.ts`) from each key to its slot
 *   `{ enc, value, key }`, for point reads, overwrites and deletes in
 *   O(key length) native `Map` lookups without building the key's encoding,
 *   plus a B+ tree (`./btree`) of the same slots ordered by the
 *   order-preserving key encoding (`./key-encoding`), for O(log n) inserts and
 *   deletes and O(log n + k) scans. A key is encoded only when it enters the
 *   tree (a new key) or bounds a scan. Overwriting an existing key replaces the
 *   slot's value and does not touch the tree.
 * - Transactions run one at a time, in the order `transact` was called. Writes
 *   apply at once (so the body reads its own writes, and nothing else can
 *   observe them until it settles because nothing else runs), and each is
 *   recorded in an undo log (the slot and its previous value and key; a
 *   readonly transaction has none) that is replayed backwards when the body
 *   throws or rejects, or when any call on the handle failed (see below).
 * - Every call on a transaction handle validates synchronously and throws
 *   from the call itself: `InvalidKeyError` for a bad key, `TypeError` for a
 *   write in a "readonly" transaction, `RangeError` for a bad `limit`. Such a
 *   failure also dooms the transaction: even if the body catches it, the
 *   transaction rolls back and `transact` rejects with that error (the
 *   contract says a failed write surfaces as the rejection of `transact`).
 * - After the body settles its handle is dead: every call on it throws.
 * - Values are stored and handed back by reference, never cloned (the core
 *   promises never to mutate a value after `put` or `get`). Keys are copied
 *   when they enter the store, so that a caller reusing its key array cannot
 *   change a stored key; an overwrite keeps the stored copy (it equals the new
 *   key) unless a `-0` tells them apart. `scan` returns a new entry object per
 *   key, so an entry a scan returned never changes when the key is
 *   overwritten, but its key array is the stored copy, shared with later
 *   scans: callers must treat entries and their keys as read-only, as their
 *   types say (freezing them was measured to cost about a quarter of the time
 *   of a `put`).
 * - `scan` intersects `prefix`, `lower` and `upper` into one interval of
 *   encodings, so it visits exactly the keys `inRange` accepts: an empty
 *   prefix means every key, and an absent (or falsy) bound is unbounded.
 *   `deleteRange` deletes exactly the keys `scan` of the same range visits.
 * - `close()` refuses later `transact` calls, lets the already queued ones
 *   finish, then drops the data.
 * - Scheduling: a transaction starts one microtask after `transact` (or right
 *   when the previous one settles), the body's promise is observed with one
 *   `then`, and the engine allocates no closure per transaction (the promise
 *   of `transact` gets one shared executor). A `get` of a missing key returns one
 *   shared resolved promise.
 */

import {
  invalidKeyError,
  checkScanLimit,
  type Engine,
  type EngineTransaction,
  type Entry,
  type Key,
  type KeyRange,
  type ScanOptions,
  type TransactionMode,
} from "../../src/engine.js";
import { BTree } from "../../src/ordered/btree.js";
import { encodedInterval, encodeKey } from "../../src/ordered/key-encoding.js";
import { TupleMap } from "../../src/tuple-map.js";

/** Options of the {@link MemoryEngine} constructor (internal, for tests). */
export interface MemoryEngineInternals {
  /** B+ tree node capacity (default 64); tests use tiny ones to get deep trees. */
  readonly nodeCapacity?: number;
}

/**
 * One stored key: its encoding (the tree's sort key, immutable), a private
 * copy of the key (as last put: it differs from earlier puts of the same key
 * only in the sign of a zero) and its current value.
 */
interface Slot {
  readonly enc: string;
  key: Key;
  value: unknown;
}

/**
 * Undo-log markers. The log holds triples `(slot, previous value, previous
 * key)`: the slot's fields before an overwrite, or one of these markers (no
 * value can be one of these private symbols).
 */
const INSERTED: unique symbol = Symbol("inserted"); // the slot was added: remove it again
const REMOVED: unique symbol = Symbol("removed"); // the slot was removed: add it back

/** What {@link checkKey} returns. */
const INVALID = 0;
const VALID = 1;
/** Valid, with a `-0` element. */
const VALID_NEGATIVE_ZERO = 2;

const PREFIX = "isostore memory engine: ";

/** What `get` returns for a missing key (one shared, already resolved promise). */
const RESOLVED_UNDEFINED: Promise<undefined> = Promise.resolve(undefined);

/** The stored data shared by the engine and its transactions. */
interface Store {
  readonly slots: TupleMap<Slot>;
  readonly tree: BTree<Slot>;
}

/** A queued `transact` call, linked to the next one in the queue. */
interface Job {
  readonly mode: TransactionMode;
  readonly fn: (tx: EngineTransaction) => Promise<unknown>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (reason: unknown) => void;
  next: Job | null;
}

/**
 * Whether `key` is a non-empty array of strings and finite numbers (and
 * whether it holds a `-0`): the fast check in front of `assertValidKey`, which
 * builds the error when this one fails.
 */
function checkKey(key: unknown): number {
  if (!Array.isArray(key)) return INVALID;
  const n = key.length;
  if (n === 0) return INVALID;
  let result = VALID;
  for (let i = 0; i < n; i++) {
    const part: unknown = key[i];
    if (typeof part === "string") continue;
    // `part - part` is 0 exactly for finite numbers (NaN for NaN and ±Infinity).
    if (typeof part !== "number" || part - part !== 0) return INVALID;
    if (part === 0 && 1 / part < 0) result = VALID_NEGATIVE_ZERO;
  }
  return result;
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
  /** Undo log: triples `(slot, previous value or marker, previous key)`; created by the first write. */
  private undo: unknown[] | null = null;

  constructor(
    private readonly store: Store,
    private readonly readonly: boolean,
  ) {}

  get<V = unknown>(key: Key): Promise<V | undefined> {
    if (!this.live) throw dead();
    if (checkKey(key) === INVALID) throw this.fail(invalidKeyError(key));
    const slot = this.store.slots.get(key);
    return slot === undefined ? RESOLVED_UNDEFINED : Promise.resolve(slot.value as V);
  }

  put(key: Key, value: unknown): void {
    if (!this.live) throw dead();
    if (this.readonly) throw this.fail(readonlyWrite("put"));
    const check = checkKey(key);
    if (check === INVALID) throw this.fail(invalidKeyError(key));
    try {
      const leaf = this.store.slots.leaf(key);
      const last = key[key.length - 1]!;
      const slot = leaf.get(last) as Slot | undefined;
      if (slot === undefined) {
        // Copy the key (a caller may reuse its array); keep the value by reference.
        const created: Slot = { enc: encodeKey(key), key: copyKey(key), value };
        this.store.tree.insert(created);
        leaf.set(last, created);
        this.log(created, INSERTED, undefined);
      } else {
        this.log(slot, slot.value, slot.key);
        slot.value = value;
        // The stored key equals `key` element-wise: only a -0 on either side
        // can tell them apart, and then the latest put's key wins.
        if (check === VALID_NEGATIVE_ZERO || hasNegativeZero(slot.key)) slot.key = copyKey(key);
      }
    } catch (error) {
      throw this.fail(error);
    }
  }

  delete(key: Key): void {
    if (!this.live) throw dead();
    if (this.readonly) throw this.fail(readonlyWrite("delete"));
    if (checkKey(key) === INVALID) throw this.fail(invalidKeyError(key));
    try {
      const slot = this.store.slots.delete(key);
      if (slot === undefined) return;
      this.store.tree.delete(slot.enc);
      this.log(slot, REMOVED, undefined);
    } catch (error) {
      throw this.fail(error);
    }
  }

  scan<V = unknown>(range: KeyRange, options?: ScanOptions): Promise<Entry<V>[]> {
    if (!this.live) throw dead();
    try {
      const limit = checkScanLimit(options?.limit, PREFIX);
      const reverse = options?.reverse === true;
      const { lower, lowerOpen, upper, upperOpen } = encodedInterval(range);
      const out: Entry[] = [];
      this.store.tree.scan(lower, lowerOpen, upper, upperOpen, reverse, limit, (slot) => {
        out.push({ key: slot.key, value: slot.value });
      });
      return Promise.resolve(out as Entry<V>[]);
    } catch (error) {
      throw this.fail(error);
    }
  }

  /** Delete every key of `range`: one walk of the tree, then a delete per key (each in the undo log). */
  deleteRange(range: KeyRange): void {
    if (!this.live) throw dead();
    if (this.readonly) throw this.fail(readonlyWrite("deleteRange"));
    try {
      const { lower, lowerOpen, upper, upperOpen } = encodedInterval(range);
      const doomed: Slot[] = [];
      const { slots, tree } = this.store;
      tree.scan(lower, lowerOpen, upper, upperOpen, false, Infinity, (slot) => {
        doomed.push(slot);
      });
      for (const slot of doomed) {
        slots.delete(slot.key);
        tree.delete(slot.enc);
        this.log(slot, REMOVED, undefined);
      }
    } catch (error) {
      throw this.fail(error);
    }
  }

  /** Undo every write of this transaction, newest first, and forget the log. */
  rollback(): void {
    const undo = this.undo;
    if (undo === null) return;
    this.undo = null;
    const { slots, tree } = this.store;
    for (let i = undo.length - 3; i >= 0; i -= 3) {
      const slot = undo[i] as Slot;
      const previous = undo[i + 1];
      if (previous === INSERTED) {
        slots.delete(slot.key);
        tree.delete(slot.enc);
      } else if (previous === REMOVED) {
        tree.insert(slot);
        slots.set(slot.key, slot);
      } else {
        slot.value = previous;
        slot.key = undo[i + 2] as Key;
      }
    }
  }

  /** Forget the undo log (after a commit). */
  discardLog(): void {
    this.undo = null;
  }

  /** Append one undo record (the first one creates the log, sized for it). */
  private log(slot: Slot, previous: unknown, previousKey: Key | undefined): void {
    const undo = this.undo;
    if (undo === null) this.undo = [slot, previous, previousKey];
    else undo.push(slot, previous, previousKey);
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
 * A private copy of `key`. Short keys are copied with array literals rather
 * than `slice`: V8 tracks the survival of what a literal allocates and, for
 * copies that live on in the store, allocates them in the old generation
 * directly instead of copying them through the young one (measured: about
 * half the cost of retaining a `slice`).
 */
function copyKey(key: Key): Key {
  switch (key.length) {
    case 1:
      return [key[0]!];
    case 2:
      return [key[0]!, key[1]!];
    case 3:
      return [key[0]!, key[1]!, key[2]!];
    case 4:
      return [key[0]!, key[1]!, key[2]!, key[3]!];
    case 5:
      return [key[0]!, key[1]!, key[2]!, key[3]!, key[4]!];
    case 6:
      return [key[0]!, key[1]!, key[2]!, key[3]!, key[4]!, key[5]!];
    default:
      return key.slice();
  }
}

/** Whether `key` holds a `-0`. */
function hasNegativeZero(key: Key): boolean {
  for (let i = 0; i < key.length; i++) {
    const part = key[i];
    if (part === 0 && 1 / part < 0) return true;
  }
  return false;
}

/** The error of a call on a settled transaction's handle. */
function dead(): Error {
  return new Error(`${PREFIX}this transaction has already finished; its handle cannot be used any more`);
}

/** The error of a write in a readonly transaction. */
function readonlyWrite(what: string): TypeError {
  return new TypeError(`${PREFIX}${what} in a readonly transaction`);
}

// The resolving functions of the promise `transact` is creating: one shared
// executor hands them over, so that a call allocates no executor closure.
let capturedResolve: ((value: unknown) => void) | undefined;
let capturedReject: ((reason: unknown) => void) | undefined;
function captureResolvers(resolve: (value: never) => void, reject: (reason: unknown) => void): void {
  capturedResolve = resolve as (value: unknown) => void;
  capturedReject = reject;
}

/** One shared resolved promise, to start a transaction on a later microtask. */
const RESOLVED: Promise<void> = Promise.resolve();

/**
 * The reference in-memory {@link Engine}. Use `memoryEngine()` from
 * `isostore/memory` rather than this class; it is exported for the adapter's
 * own tests.
 */
export class MemoryEngine implements Engine {
  /** Memory does not outlive the process. */
  readonly durable = false;
  /** Reads are lookups in process memory: no round trip to save by reading ahead. */
  readonly localReads = true;
  private readonly store: Store;
  private closed = false;
  /** Whether a transaction body is running or about to start. */
  private busy = false;
  /** Waiting `transact` calls: a FIFO linked list from `queueHead` to `queueTail`. */
  private queueHead: Job | null = null;
  private queueTail: Job | null = null;
  /** `close()` calls waiting for the queue to drain. */
  private drained: (() => void)[] = [];
  /** The running transaction and its call (one at a time). */
  private current: MemoryTransaction | null = null;
  private currentJob: Job | null = null;
  // Bound once, so that running a transaction allocates no closures.
  private readonly startNext = (): void => {
    this.runNext();
  };
  private readonly onFulfilled = (value: unknown): void => {
    this.finish(true, value);
  };
  private readonly onRejected = (error: unknown): void => {
    this.finish(false, error);
  };

  constructor(internals: MemoryEngineInternals = {}) {
    this.store = { slots: new TupleMap<Slot>(), tree: new BTree<Slot>(internals.nodeCapacity ?? 64) };
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
    const promise = new Promise<T>(captureResolvers);
    const job: Job = { mode, fn, resolve: capturedResolve!, reject: capturedReject!, next: null };
    capturedResolve = capturedReject = undefined;
    if (this.queueTail === null) this.queueHead = job;
    else this.queueTail.next = job;
    this.queueTail = job;
    if (!this.busy) {
      // Start on a later microtask, never inside the caller's own call.
      this.busy = true;
      void RESOLVED.then(this.startNext);
    }
    return promise;
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

  /** Start the next queued transaction, or go idle (and release a closed engine). */
  private runNext(): void {
    const job = this.dequeue();
    if (job === null) {
      this.busy = false;
      if (this.closed) {
        this.release();
        const waiters = this.drained;
        this.drained = [];
        for (const resolve of waiters) resolve();
      }
      return;
    }
    const tx = new MemoryTransaction(this.store, job.mode === "readonly");
    this.current = tx;
    this.currentJob = job;
    let body: unknown;
    try {
      body = job.fn(tx);
    } catch (error) {
      // Settle on a later microtask, as for a rejected promise, keeping exactly
      // what the body threw (Error or not) as the rejection reason.
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
      void Promise.reject(error).then(undefined, this.onRejected);
      return;
    }
    if (body instanceof Promise) void body.then(this.onFulfilled, this.onRejected);
    else void Promise.resolve(body).then(this.onFulfilled, this.onRejected);
  }

  /** Commit or roll back the running transaction, settle its call, start the next one. */
  private finish(ok: boolean, outcome: unknown): void {
    const tx = this.current!;
    const job = this.currentJob!;
    this.current = null;
    this.currentJob = null;
    tx.live = false;
    if (ok && !tx.failed) {
      tx.discardLog();
      job.resolve(outcome);
    } else {
      tx.rollback();
      job.reject(ok ? tx.failure : outcome);
    }
    this.runNext();
  }

  private dequeue(): Job | null {
    const job = this.queueHead;
    if (job !== null) {
      this.queueHead = job.next;
      if (job.next === null) this.queueTail = null;
      job.next = null;
    }
    return job;
  }

  /** Drop the data of a closed engine. */
  private release(): void {
    this.store.slots.clear();
    this.store.tree.clear();
  }
}
