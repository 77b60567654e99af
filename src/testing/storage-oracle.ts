/**
 * Reference models of the storage primitives: plain, obviously correct,
 * in-memory, synchronous at heart (async only to share the interfaces).
 * Each follows `storage-primitives.go.txt` line by line and throws the same
 * typed errors, checking arguments in the same order as the core (name
 * first, then the numbers, then the bytes).
 *
 * - {@link LedgerOracle}: one array of payloads per name, and a count of
 *   deletes per name (the ledger's lives), for what a cursor open across a
 *   delete may answer ({@link LedgerOracle.drainAnswer}).
 * - {@link KvOracle}: one map; revisions from one per-store counter (as the
 *   core issues them: strictly increasing per key, across delete too).
 * - {@link BlobsOracle}: one map of whole byte arrays; conflict by bytes.
 * - {@link LeaseOracle}: the lease facts in storage (epoch, expiresAt) with
 *   the caller passing `now`; it does not run renewal timers.
 */
import { copyBytes } from "../storage/copy.js";
import { ConflictError, BlobConflictError, RecordNotFoundError, BlobNotFoundError, InvalidArgumentError, KeyNotFoundError, LeaseHeldError, LeaseLostError, RevisionConflictError } from "../storage/errors.js";
import type { KvEntry } from "../storage/kv.js";
import type { LedgerRecord } from "../storage/ledger.js";
import { validateName, validatePrefix } from "../storage/names.js";

function checkCount(argument: string, value: number, min: number): void {
  if (!Number.isSafeInteger(value) || value < min) throw new InvalidArgumentError(argument, `must be a safe integer >= ${min}`);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, index) => byte === b[index]);
}

/** A cursor as the reference ledger opened it: its records, and the life of the ledger it reads. */
export interface LedgerCursorModel {
  readonly name: string;
  /** Every record from `from` to the tip when it was opened. */
  readonly records: readonly LedgerRecord[];
  /** The ledger's deletes so far when it was opened. */
  readonly life: number;
}

/** How draining a cursor ended: its records, then drained or the error it threw. */
export interface LedgerDrain {
  readonly records: readonly LedgerRecord[];
  readonly end: "drained" | Error;
}

/** The reference ledger. */
export class LedgerOracle {
  private readonly ledgers = new Map<string, Uint8Array[]>();
  /** Deletes that removed records, per name: each one starts a new life of the ledger. */
  private readonly lives = new Map<string, number>();

  append(name: string, expected: number, payload: Uint8Array): void {
    validateName(name);
    checkCount("expected", expected, 0);
    const records = this.ledgers.get(name) ?? [];
    if (records.length !== expected) throw new ConflictError(name, expected);
    records.push(copyBytes(payload));
    this.ledgers.set(name, records);
  }

  /** Every record from `from` (0 = 1) to the tip now. */
  read(name: string, from: number): LedgerRecord[] {
    validateName(name);
    checkCount("from", from, 0);
    const records = this.ledgers.get(name) ?? [];
    const out: LedgerRecord[] = [];
    for (let seq = Math.max(from, 1); seq <= records.length; seq++) out.push({ seq, payload: copyBytes(records[seq - 1]!) });
    return out;
  }

  tip(name: string): number {
    validateName(name);
    return this.ledgers.get(name)?.length ?? 0;
  }

  delete(name: string): void {
    validateName(name);
    // A delete that removes records starts a new life; one of an absent ledger changes nothing.
    if (!this.ledgers.delete(name)) return;
    this.lives.set(name, (this.lives.get(name) ?? 0) + 1);
  }

  /** A cursor opened now: what {@link read} answers now, and the ledger's life. */
  open(name: string, from: number): LedgerCursorModel {
    return { name, records: this.read(name, from), life: this.lives.get(name) ?? 0 };
  }

  /**
   * What draining `cursor` must answer now, given that it yielded `yielded`
   * records in all (the one thing the spec leaves to an implementation: how
   * many records it had fetched before a delete; a cursor reads in pages).
   * - The ledger has not been deleted since the cursor was opened: all of its
   *   records, then drained (cursors are bounded: no later appends).
   * - It has: its first `yielded` records then {@link RecordNotFoundError} at
   *   the next one, or all of them then drained. Never a record of the new
   *   life: sequences are immutable, so a cursor reads one life.
   */
  drainAnswer(cursor: LedgerCursorModel, yielded: number): LedgerDrain {
    const all = cursor.records.map((record) => ({ seq: record.seq, payload: copyBytes(record.payload) }));
    const deleted = (this.lives.get(cursor.name) ?? 0) !== cursor.life;
    if (!deleted || yielded >= all.length) return { records: all, end: "drained" };
    const cut = Math.max(0, yielded);
    return { records: all.slice(0, cut), end: new RecordNotFoundError(cursor.name, all[cut]!.seq) };
  }

  /** `appendDefinite` on a local ledger: append, or accept identical bytes already at `expected + 1`. */
  appendDefinite(name: string, expected: number, payload: Uint8Array): void {
    try {
      this.append(name, expected, payload);
    } catch (error) {
      if (!(error instanceof ConflictError)) throw error;
      const existing = this.ledgers.get(name)?.[expected];
      if (existing !== undefined && sameBytes(existing, payload)) return;
      throw error;
    }
  }
}

/** The reference KV. */
export class KvOracle {
  private readonly entries = new Map<string, { value: Uint8Array; rev: number }>();
  private counter = 0;

  get(key: string): KvEntry {
    validateName(key);
    const entry = this.entries.get(key);
    if (entry === undefined) throw new KeyNotFoundError(key);
    return { value: copyBytes(entry.value), rev: entry.rev };
  }

  put(key: string, expectedRev: number, value: Uint8Array): number {
    validateName(key);
    checkCount("expectedRev", expectedRev, 0);
    const actual = this.entries.get(key)?.rev ?? 0;
    if (actual !== expectedRev) throw new RevisionConflictError(key, expectedRev, actual);
    this.counter += 1;
    this.entries.set(key, { value: copyBytes(value), rev: this.counter });
    return this.counter;
  }

  keys(prefix: string): string[] {
    validatePrefix(prefix);
    return [...this.entries.keys()].filter((key) => key.startsWith(prefix)).sort();
  }

  delete(key: string): void {
    validateName(key);
    this.entries.delete(key);
  }
}

/** The reference blob store. */
export class BlobsOracle {
  private readonly blobs = new Map<string, Uint8Array>();

  put(key: string, content: Uint8Array): void {
    validateName(key);
    const existing = this.blobs.get(key);
    if (existing === undefined) this.blobs.set(key, copyBytes(content));
    else if (!sameBytes(existing, content)) throw new BlobConflictError(key);
  }

  get(key: string): Uint8Array {
    validateName(key);
    const content = this.blobs.get(key);
    if (content === undefined) throw new BlobNotFoundError(key);
    return copyBytes(content);
  }

  delete(key: string): void {
    validateName(key);
    this.blobs.delete(key);
  }

  list(prefix: string): string[] {
    validatePrefix(prefix);
    return [...this.blobs.keys()].filter((key) => key.startsWith(prefix)).sort();
  }
}

/** The reference lease facts: who holds a name until when, given `now`. No timers. */
export class LeaseOracle {
  private readonly rows = new Map<string, { epoch: number; expiresAt: number }>();

  constructor(private readonly ttlMs: number) {}

  /** Grant `name` at `now`, or throw {@link LeaseHeldError}. Returns the epoch. */
  acquire(name: string, now: number): number {
    validateName(name);
    const row = this.rows.get(name);
    if (row !== undefined && row.expiresAt > now) throw new LeaseHeldError(name, row.epoch);
    const epoch = (row?.epoch ?? 0) + 1;
    this.rows.set(name, { epoch, expiresAt: now + this.ttlMs });
    return epoch;
  }

  /** Renew the holder at `epoch` (what a renewal timer does); false when it no longer holds. */
  renew(name: string, epoch: number, now: number): boolean {
    if (!this.holds(name, epoch, now)) return false;
    this.rows.set(name, { epoch, expiresAt: now + this.ttlMs });
    return true;
  }

  /** Release: clears the row only while it still names `epoch`. */
  release(name: string, epoch: number): void {
    const row = this.rows.get(name);
    if (row !== undefined && row.epoch === epoch) this.rows.set(name, { epoch, expiresAt: 0 });
  }

  holds(name: string, epoch: number, now: number): boolean {
    const row = this.rows.get(name);
    return row !== undefined && row.epoch === epoch && row.expiresAt > now;
  }

  /** As `Leaser.assertHeld`. */
  assertHeld(name: string, epoch: number, now: number): void {
    validateName(name);
    checkCount("epoch", epoch, 1);
    if (!this.holds(name, epoch, now)) throw new LeaseLostError(name, epoch);
  }
}
