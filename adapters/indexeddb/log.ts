/**
 * The committed log: how the IndexedDB engine commits a small transaction
 * with one request instead of one per page it changes (pure code, no
 * IndexedDB).
 *
 * Why: a request costs about the same in Chromium whatever it carries
 * (BENCHMARKS.md), and a journal append changes rows on five or six pages (the
 * event, its id, its key's order, the head and ready rows, the journal's
 * meta row). Written as pages, that is six puts per append; written as one
 * record of the changes, it is one.
 *
 * Layout (schema v3, see `./schema.ts`): the `log` store maps a database
 * version (a counter, one per committed writing transaction) to a
 * {@link LogRecord}. A transaction that wrote adds, under the next version,
 * either:
 * - a {@link ChangeRecord}: the ranges it cleared and the rows it put or
 *   deleted, while the records since the last checkpoint stay within the
 *   {@link LogLimits}; or
 * - a {@link CheckpointRecord}, having written every change since the last
 *   checkpoint, its own included, into the pages, and deleted the records
 *   before it.
 *
 * So the database at version `v` is: the pages, with the change records after
 * the last checkpoint applied in version order. The newest key of the `log`
 * store is the database version; an engine that knows an older version reads
 * the records after it and either applies them (only change records: its
 * cached pages are still current) or, when a checkpoint is among them,
 * forgets its cached pages and keeps the change records after that checkpoint.
 *
 * Evidence of every commit (schema v4). Each record names the versions it was
 * made on, `b`, in a unique index (`bases`): a change record made at version
 * `v + 1` was made on `v`; a checkpoint was made on its own base and on the
 * bases of the change records it replaced. So two commits made on one version
 * cannot both be stored: the second one's `add` fails with a
 * `ConstraintError`, whatever else happened meanwhile. That is what lets an
 * engine that checked the version a moment ago commit without reading it
 * again (`./paged-transaction.ts`, "trusted"). A checkpoint deletes the change
 * records it replaced but keeps its predecessors' checkpoint records, with
 * their bases, until {@link EVIDENCE_MS} after each was written by the wall
 * clock, and until the engine deleting one has itself seen it stored for
 * {@link WITNESS_MS} by its monotonic clock ({@link Witness}); an engine
 * trusts its check for less than {@link TRUST_MS} by both its wall and its
 * monotonic clock ({@link trustHolds}), so the evidence of any commit it has
 * not seen is still stored when it commits, whatever the wall clock does
 * (stepped back, it cannot bring a past check back into trust; stepped
 * forward past a record's evidence time, the record still waits for its
 * witness). So a trusted commit made on a version another commit already
 * built on always fails its `add`: none is ever stored below the newest
 * checkpoint, where no engine would read it. The readings are taken while a
 * transaction held its lock: the check's (a request callback of the reading
 * or committing transaction), the commit's (the change record's `add`
 * callback, where the trust is judged) and the witness's (the callback of
 * the checkpoint's read of the oldest records), never the creation of a
 * transaction or its `complete` event, either of which may be far from when
 * IndexedDB ran it.
 */
import { BTree } from "../../src/ordered/btree.js";
import { decodeKey, type EncodedInterval } from "../../src/ordered/key-encoding.js";
import type { Key } from "../../src/engine.js";

/** One row of a change record: `[enc, size, value]` for a put, `[enc]` for a delete. */
export type LogRow = readonly [enc: string] | readonly [enc: string, size: number, value: unknown];

/** What one committed transaction changed, stored under the version it made. */
export interface ChangeRecord {
  /** Ranges it deleted (applied before the rows: a row in one was written after the clear). */
  readonly c: readonly EncodedInterval[];
  /** Rows it put or deleted, ascending by encoding. */
  readonly r: readonly LogRow[];
  /** The version it was made on (the `bases` index; absent in records written before schema v4). */
  readonly b?: number;
}

/** Stored by a checkpoint: the pages hold everything committed up to this version. */
export interface CheckpointRecord {
  readonly checkpoint: true;
  /** Its own version (the `checkpoints` index: the newest one is where a cold engine starts reading). */
  readonly cp?: number;
  /**
   * When it was written (epoch ms): once replaced by a later checkpoint, it is
   * kept, as evidence, until {@link EVIDENCE_MS} after it was written (any
   * record holding the base of a commit made after an engine's check was
   * written after that check, so it outlives the check's trust).
   */
  readonly at?: number;
  /** The versions its commit and the change records it replaced were made on (the `bases` index). */
  readonly b?: readonly number[];
}

export type LogRecord = ChangeRecord | CheckpointRecord;

/** Whether `record` is a checkpoint. */
export function isCheckpoint(record: LogRecord): record is CheckpointRecord {
  return (record as Partial<CheckpointRecord>).checkpoint === true;
}

/** A written row, as a transaction's overlay and the committed log hold it (`deleted`: a delete). */
export interface Slot {
  readonly enc: string;
  readonly key: Key;
  value: unknown;
  size: number;
  deleted: boolean;
}

/** How much the change records since the last checkpoint may hold before a commit checkpoints instead. */
export interface LogLimits {
  /** Most change records (0: every writing transaction checkpoints, the log is never used). */
  readonly records: number;
  /** Most estimated bytes over those records (an engine starting cold reads them all). */
  readonly bytes: number;
}

/**
 * The defaults: 128 records or 256 KB. A checkpoint writes every page the
 * records touched, so the more records it covers, the more of their writes to
 * one page it folds into one put (the journal's meta, event and id pages);
 * an engine starting cold reads up to this much in one request.
 */
export const DEFAULT_LOG_LIMITS: LogLimits = { records: 128, bytes: 256 * 1024 };

/**
 * Cleared ranges the log holds at most: every read of the log tests a row
 * against each of them, so many range deletes checkpoint early.
 */
export const MAX_LOG_CLEARED = 64;

/**
 * How long an engine trusts a version it confirmed (by reading it, or by a
 * commit made on it) enough to commit without reading it again: by both of
 * its clocks ({@link Moment}, {@link trustHolds}).
 */
export const TRUST_MS = 10_000;

/**
 * A moment as an engine's two clocks read it: `wall`, epoch ms (shared by
 * every context of the machine, but stepped by NTP or a user, either way),
 * and `mono`, a monotonic clock of the context (`performance.now()`: never
 * stepped, but comparable only within one context, and by its differences
 * across contexts of one machine, which all advance it at the same rate).
 */
export interface Moment {
  readonly wall: number;
  readonly mono: number;
}

/** The context's monotonic clock (ms): `performance.now()`, read when called (the wall clock where there is none). */
export function monotonicNow(): number {
  const performance = (globalThis as { performance?: { now?: () => number } }).performance;
  return typeof performance?.now === "function" ? performance.now() : Date.now();
}

/** No moment at all: nothing confirmed at it is trusted. */
export const NEVER: Moment = { wall: -Infinity, mono: -Infinity };

/**
 * Whether a version confirmed at `since` is still trusted at `now`: less
 * than {@link TRUST_MS} after it by both clocks. So a step of the wall clock
 * ends the trust, backward (the monotonic clock counts on) as forward (the
 * wall clock does).
 */
export function trustHolds(since: Moment, now: Moment): boolean {
  const wall = now.wall - since.wall;
  const mono = now.mono - since.mono;
  return wall >= 0 && wall < TRUST_MS && mono >= 0 && mono < TRUST_MS;
}

/**
 * How long a replaced checkpoint record (and the bases it holds) is kept, by
 * the wall clock (the clock of one machine, which every context of one
 * IndexedDB database shares): sixty times {@link TRUST_MS}, so that a commit
 * whose evidence is gone happened long before any check an engine still
 * trusts. A wall clock may be stepped, so this alone does not promise it:
 * {@link WITNESS_MS} does.
 */
export const EVIDENCE_MS = 10 * 60_000;

/** Replaced checkpoint records looked at, for deletion past {@link EVIDENCE_MS}, per checkpoint. */
export const EVIDENCE_SWEEP = 8;

/**
 * How long an engine must have seen a replaced checkpoint record stored, by
 * its monotonic clock, before it deletes it (twice {@link TRUST_MS}: a margin
 * over the coarsened `performance.now()` of browsers). See {@link Witness}.
 */
export const WITNESS_MS = 2 * TRUST_MS;

/** What a checkpoint does with the oldest checkpoint records it read ({@link Witness.sweep}). */
export interface Sweep {
  /** The versions of the replaced records to delete. */
  readonly deletes: readonly number[];
  /** Replaced records dated after the sweep's wall clock, re-dated to it (to put back). */
  readonly redated: readonly CheckpointRecord[];
}

/**
 * Which replaced checkpoint records an engine's checkpoints delete, and
 * what the engine has seen of them: a record goes only when both hold:
 * - it was written more than {@link EVIDENCE_MS} ago by the wall clock
 *   (its `at`); a record dated after the sweep's wall clock (written while
 *   the clock ran ahead, then stepped back) is re-dated to it, so that it
 *   waits the full evidence time from now rather than stall the sweep, which
 *   looks at the oldest records only;
 * - this engine has seen it stored (read it, or committed it) at least
 *   {@link WITNESS_MS} earlier by its monotonic clock (unless it names no
 *   base at all: the schema upgrade's checkpoint is evidence of nothing).
 *
 * The second condition is what makes the evidence outlast every trust
 * whatever the wall clock does: a record holding the base of a commit an
 * engine has not seen was written after that engine's confirmation, so
 * when it is deleted, more than {@link WITNESS_MS} has passed since that
 * confirmation on every monotonic clock of the machine, and the engine's
 * trust (less than {@link TRUST_MS} on its own, `trustHolds`) is over.
 * The wall-clock dating alone cannot promise that: the clock may be
 * stepped forward past a record's evidence time, and back, within a trust.
 * The cost: a context that lives less than {@link WITNESS_MS} deletes
 * nothing (a longer-lived one, or the next, does).
 *
 * Records are known by version and date (a database deleted and made again
 * counts its versions from 1 again; the cache forgets its witness then).
 */
export class Witness {
  /** When (monotonic ms) this engine first saw each record still stored, by {@link Witness.id}. */
  private readonly since = new Map<string, number>();

  private static id(cp: number, at: number | undefined): string {
    return `${cp}@${at ?? 0}`;
  }

  /** Note that the record `cp` dated `at` was stored at `mono` (a record seen before keeps its first sighting). */
  saw(cp: number, at: number | undefined, mono: number): void {
    const id = Witness.id(cp, at);
    if (!this.since.has(id)) this.since.set(id, mono);
  }

  /**
   * Given the oldest checkpoint records (by version, at most
   * {@link EVIDENCE_SWEEP}) read, at `now`, by a checkpoint writing version
   * `next`: which replaced ones to delete, which to re-date. Notes the
   * replaced ones as seen at `now.mono` (they were stored before this
   * checkpoint's transaction, which read them) and forgets the ones deleted.
   */
  sweep(oldest: readonly CheckpointRecord[], next: number, now: Moment): Sweep {
    const deletes: number[] = [];
    const redated: CheckpointRecord[] = [];
    let lowest = Infinity;
    for (const record of oldest) {
      const cp = record.cp;
      if (cp === undefined || cp >= next) continue;
      lowest = Math.min(lowest, cp);
      if (record.at !== undefined && record.at > now.wall) {
        const moved: CheckpointRecord = { ...record, at: now.wall };
        redated.push(moved);
        this.since.delete(Witness.id(cp, record.at));
        this.saw(cp, moved.at, now.mono);
        continue;
      }
      this.saw(cp, record.at, now.mono);
      const seen = this.since.get(Witness.id(cp, record.at))!;
      // A record naming no base (the first checkpoint, made by the schema upgrade) is evidence of nothing.
      const evidence = record.b !== undefined && record.b.length > 0;
      if ((record.at ?? 0) < now.wall - EVIDENCE_MS && (!evidence || now.mono - seen >= WITNESS_MS)) {
        deletes.push(cp);
        this.since.delete(Witness.id(cp, record.at));
      }
    }
    // Records below the oldest one read are gone (deleted by this engine or another): forget them.
    for (const id of this.since.keys()) if (Number(id.slice(0, id.indexOf("@"))) < lowest) this.since.delete(id);
    return { deletes, redated };
  }
}

/** Estimated bytes of a change record (for {@link LogLimits.bytes}). */
export function recordBytes(record: ChangeRecord): number {
  let bytes = 16 + record.c.length * 64;
  for (const row of record.r) bytes += row[0].length + 8 + (row.length === 3 ? row[1] : 0);
  return bytes;
}

/** Whether `enc` lies in `iv`. */
export function contains(iv: EncodedInterval, enc: string): boolean {
  if (iv.lower !== undefined && (iv.lowerOpen ? enc <= iv.lower : enc < iv.lower)) return false;
  if (iv.upper !== undefined && (iv.upperOpen ? enc >= iv.upper : enc > iv.upper)) return false;
  return true;
}

/**
 * The change records since the last checkpoint, applied in order: the rows
 * they wrote (the latest write of each key) and the ranges they cleared, which
 * hide the pages' rows there (not the log's own later rows). Held by the
 * engine beside its page cache, for the same version.
 */
export class CommittedLog {
  /** The latest write of each key, by encoding. Slots are replaced, never changed in place. */
  readonly rows = new BTree<Slot>();
  /** Ranges cleared: they hide the pages' rows (the log's rows inside them were written later). */
  cleared: EncodedInterval[] = [];
  /** Change records applied since the last checkpoint. */
  records = 0;
  /** Their estimated bytes ({@link recordBytes}). */
  bytes = 0;

  /** Whether the log holds nothing (the pages are the whole database). */
  get empty(): boolean {
    return this.records === 0;
  }

  /**
   * Apply one change record: its ranges, then its rows. `keys`, when given,
   * are the rows' decoded keys (the committing transaction has them); else
   * they are decoded from the encodings.
   */
  apply(record: ChangeRecord, keys?: readonly Key[]): void {
    const rows = this.rows;
    for (const iv of record.c) {
      const doomed: string[] = [];
      rows.scan(iv.lower, iv.lowerOpen, iv.upper, iv.upperOpen, false, Infinity, (slot) => doomed.push(slot.enc));
      for (const enc of doomed) rows.delete(enc);
      this.cleared.push(iv);
    }
    record.r.forEach((row, i) => {
      const enc = row[0];
      const slot: Slot =
        row.length === 3
          ? { enc, key: keys?.[i] ?? decodeKey(enc), value: row[2], size: row[1], deleted: false }
          : { enc, key: keys?.[i] ?? decodeKey(enc), value: undefined, size: 0, deleted: true };
      rows.set(slot);
    });
    this.records++;
    this.bytes += recordBytes(record);
  }

  /** Whether the log clears `enc` from the pages. */
  hides(enc: string): boolean {
    for (const iv of this.cleared) if (contains(iv, enc)) return true;
    return false;
  }

  /** Forget every record (after a checkpoint, or to rebuild). */
  clear(): void {
    this.rows.clear();
    this.cleared = [];
    this.records = 0;
    this.bytes = 0;
  }
}
