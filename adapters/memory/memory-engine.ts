/**
 * The memory engine's implementation: the reference {@link Engine}, kept in
 * process memory. The public entry point is `memoryEngine()` in `./index.ts`;
 * this module also exposes the {@link MemoryEngine} class so that the tests can
 * inspect the ordered index (`inspectIndex`).
 *
 * What it promises, beyond the {@link Engine} contract:
 * - Storage: an {@link OrderedTrie} (`./ordered-trie`): one node per key
 *   prefix, children found by element in native `Map`s and kept in order per
 *   node. Point reads, overwrites and deletes cost O(key length) `Map`
 *   lookups and never build an encoding of the key; a new key costs, on top,
 *   an insert into the sorted elements of the one node it joins (an append
 *   when its last element is the largest, as positions and times are). A
 *   scan reaches its first entry through O(key length) sorted element lists,
 *   then walks from each entry to the next (one step when they differ only in
 *   their last element; up to the key's length when they part early).
 * - Transactions run one at a time, in the order `transact` was called. Writes
 *   apply at once (so the body reads its own writes, and nothing else can
 *   observe them until it settles because nothing else runs), and each is
 *   recorded in an undo log (the key as stored before, and its previous value
 *   or none; a readonly transaction has none) that is replayed backwards when the body
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
 *   keys (`scanBounds`), so it visits exactly the keys `inRange` accepts: an empty
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
import { scanBounds } from "../../src/ordered/scan-bounds.js";
import { ABSENT, OrderedTrie, type TrieNode } from "./ordered-trie.js";

/** Options of the {@link MemoryEngine} constructor (internal, for tests). */
export interface MemoryEngineInternals {
  /**
   * Elements per chunk of a trie node's sorted children (default 256);
   * tests use tiny ones to get many chunks.
   */
  readonly chunkCapacity?: number;
}

/** What {@link checkKey} returns. */
const INVALID = 0;
const VALID = 1;
/** Valid, with a `-0` element. */
const VALID_NEGATIVE_ZERO = 2;

const PREFIX = "isostore memory engine: ";

/** What `get` returns for a missing key (one shared, already resolved promise). */
const RESOLVED_UNDEFINED: Promise<undefined> = Promise.resolve(undefined);


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
  /**
   * Undo log: pairs `(key, previous value)`, the key as stored before the
   * write and the value {@link ABSENT} when the key had no entry; created by
   * the first write.
   */
  private undo: unknown[] | null = null;

  constructor(
    private readonly store: OrderedTrie,
    private readonly readonly: boolean,
  ) {}

  get<V = unknown>(key: Key): Promise<V | undefined> {
    if (!this.live) throw dead();
    if (checkKey(key) === INVALID) throw this.fail(invalidKeyError(key));
    const node = this.store.find(key);
    return node === undefined ? RESOLVED_UNDEFINED : Promise.resolve(node.value as V);
  }

  put(key: Key, value: unknown): void {
    if (!this.live) throw dead();
    if (this.readonly) throw this.fail(readonlyWrite("put"));
    const check = checkKey(key);
    if (check === INVALID) throw this.fail(invalidKeyError(key));
    try {
      const node = this.store.node(key);
      const previous = node.value;
      if (previous === ABSENT) {
        // Copy the key (a caller may reuse its array); keep the value by reference.
        const stored = copyKey(key);
        node.key = stored;
        node.value = value;
        this.store.size++;
        this.log(stored, ABSENT);
      } else {
        const stored = node.key!;
        this.log(stored, previous);
        node.value = value;
        // The stored key equals `key` element-wise: only a -0 on either side
        // can tell them apart, and then the latest put's key wins.
        if (check === VALID_NEGATIVE_ZERO || hasNegativeZero(stored)) node.key = copyKey(key);
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
      const previous = this.store.delete(key);
      if (previous !== ABSENT) this.log(this.store.removedKey!, previous);
    } catch (error) {
      throw this.fail(error);
    }
  }

  scan<V = unknown>(range: KeyRange, options?: ScanOptions): Promise<Entry<V>[]> {
    if (!this.live) throw dead();
    try {
      const limit = checkScanLimit(options?.limit, PREFIX);
      const reverse = options?.reverse === true;
      const bounds = scanBounds(range);
      const out: Entry[] = [];
      this.store.scan(bounds, reverse, limit, (node) => {
        out.push({ key: node.key!, value: node.value });
      });
      return Promise.resolve(out as Entry<V>[]);
    } catch (error) {
      throw this.fail(error);
    }
  }

  /** Delete every key of `range`: one walk of the trie, then a delete per key (each in the undo log). */
  deleteRange(range: KeyRange): void {
    if (!this.live) throw dead();
    if (this.readonly) throw this.fail(readonlyWrite("deleteRange"));
    try {
      const doomed: Key[] = [];
      this.store.scan(scanBounds(range), false, Infinity, (node: TrieNode) => {
        doomed.push(node.key!);
      });
      for (const key of doomed) {
        const previous = this.store.delete(key);
        this.log(key, previous);
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
    const store = this.store;
    for (let i = undo.length - 2; i >= 0; i -= 2) {
      const key = undo[i] as Key;
      const previous = undo[i + 1];
      if (previous === ABSENT) {
        store.delete(key);
      } else {
        const node = store.node(key);
        if (node.value === ABSENT) store.size++;
        node.value = previous;
        node.key = key;
      }
    }
  }

  /** Forget the undo log (after a commit). */
  discardLog(): void {
    this.undo = null;
  }

  /** Append one undo record (the first one creates the log). */
  private log(key: Key, previous: unknown): void {
    const undo = this.undo;
    if (undo === null) this.undo = [key, previous];
    else undo.push(key, previous);
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
  private readonly store: OrderedTrie;
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
    this.store = new OrderedTrie(internals.chunkCapacity);
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
   * The ordered trie, for tests: its number of entries, its height (the
   * longest stored key's length; 0 when empty), its tombstones (nodes kept
   * after their last key was deleted) and its structural check. Not part of
   * the Engine contract.
   */
  inspectIndex(): { readonly size: number; readonly height: number; readonly tombstones: number; check(): void } {
    const trie = this.store;
    const height = trie.check();
    return { size: trie.size, height, tombstones: trie.tombstones, check: () => trie.check() };
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
    this.store.clear();
  }
}
