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
 * their bases, as evidence ({@link Witness}): one is deleted once it was
 * written more than {@link EVIDENCE_MS} (10 min) ago by the wall clock and
 * more than {@link WITNESS_MS} (20 s) is known to have passed since by
 * monotonic clocks (the time each engine saw pass, handed on from context to
 * context in the checkpoint records, `w`), or once it was written more than
 * {@link EVIDENCE_MAX_MS} (a day) ago by the wall clock alone. An engine
 * trusts its check for less than {@link TRUST_MS} by both its wall and its
 * monotonic clock ({@link trustHolds}), so the evidence of any commit it has
 * not seen is still stored when it commits, whatever the wall clock does
 * (stepped back, it cannot bring a past check back into trust; stepped
 * forward past a record's evidence time, the record still waits for its
 * witness), but for two opposite steps of more than a day each within 10 s
 * (the one case {@link EVIDENCE_MAX_MS} does not survive). So a trusted
 * commit made on a version another commit already built on fails its
 * `add`: none is stored below the newest checkpoint, where no engine would
 * read it. The log stays bounded however briefly contexts live: about
 * {@link EVIDENCE_MS} of checkpoint records when contexts see some seconds
 * pass between reading the version and checkpointing, a day of them at worst.
 * The readings are taken while a transaction held its lock: the check's (a
 * request callback of the reading or committing transaction), the commit's
 * (the change record's `add` callback, where the trust is judged) and the
 * witness's (after a read of the version or of checkpoint records, or a
 * commit's `add`), never the creation of a transaction or its `complete`
 * event, either of which may be far from when IndexedDB ran it.
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
   * kept, as evidence, until {@link EVIDENCE_MS} after it was written and
   * {@link WITNESS_MS} is known to have passed since, or until
   * {@link EVIDENCE_MAX_MS} after it was written (any record holding the base
   * of a commit made after an engine's check was written after that check, so
   * it outlives the check's trust; see {@link Witness}).
   */
  readonly at?: number;
  /** The versions its commit and the change records it replaced were made on (the `bases` index). */
  readonly b?: readonly number[];
  /** The time known to have passed, when it was written, since earlier commits ({@link Witness}; absent before it was stored). */
  readonly w?: Ages;
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
 * {@link WITNESS_MS} does (and past {@link EVIDENCE_MAX_MS}, the wall clock
 * alone, see {@link Witness}).
 */
export const EVIDENCE_MS = 10 * 60_000;

/** Replaced checkpoint records looked at, for deletion past {@link EVIDENCE_MS}, per checkpoint. */
export const EVIDENCE_SWEEP = 8;

/**
 * How much time a replaced checkpoint record must be known to have been
 * stored, by monotonic clocks, before it is deleted (twice {@link TRUST_MS}:
 * a margin over the coarsened `performance.now()` of browsers). See
 * {@link Witness}.
 */
export const WITNESS_MS = 2 * TRUST_MS;

/**
 * How old by the wall clock a replaced checkpoint record must be to be
 * deleted without any witness: a day (see {@link Witness} for the one step of
 * the wall clock this does not survive). It bounds the log of an app whose
 * contexts never see {@link WITNESS_MS} pass, even together.
 */
export const EVIDENCE_MAX_MS = 24 * 60 * 60_000;

/**
 * A witness handed on in a checkpoint record: pairs `[version, age]`, each
 * meaning that when the record was written, at least `age` ms (monotonic)
 * had passed since the start of the transaction that committed `version`
 * (so of every transaction that committed a version up to it).
 */
export type Ages = readonly (readonly [version: number, age: number])[];

/** What a checkpoint does with the oldest checkpoint records it read ({@link Witness.sweep}). */
export interface Sweep {
  /** The versions of the replaced records to delete. */
  readonly deletes: readonly number[];
  /** Replaced records dated after the sweep's wall clock, re-dated to it (to put back). */
  readonly redated: readonly CheckpointRecord[];
}

/** At monotonic `mono` of this context, at least `age` ms had passed since every commit of a version up to `version` started. */
interface Anchor {
  readonly version: number;
  readonly age: number;
  readonly mono: number;
}

/** Anchors a witness keeps at most (pruned to a few, spaced {@link WITNESS_MS} / 4 apart by age). */
const MAX_ANCHORS = 16;

/**
 * Which replaced checkpoint records an engine's checkpoints delete. A record
 * goes when either holds:
 * - it was written more than {@link EVIDENCE_MS} ago by the wall clock (its
 *   `at`), and more than {@link WITNESS_MS} is known to have passed since it
 *   was written by monotonic clocks (unless it names no base at all: the
 *   schema upgrade's checkpoint is evidence of nothing);
 * - it was written more than {@link EVIDENCE_MAX_MS} ago by the wall clock.
 * A record dated after the sweep's wall clock (written while the clock ran
 * ahead, then stepped back) is re-dated to it, so that it waits the full
 * evidence time from now rather than stall the sweep, which looks at the
 * oldest records only.
 *
 * How the time passed is known (the witness). Versions are committed in
 * order, so what is true of the transaction that committed version `v` is
 * true of every earlier one. An engine notes anchors, "at my monotonic
 * `mono`, at least `age` ms had passed since the start of the transaction
 * that committed `v`": `age` 0 whenever it reads version `v` or commits it
 * (the reading taken in a callback of that transaction); and the ages a
 * checkpoint record read carries (its `w`), at any reading taken after the
 * read, since the record was stored before. Its anchors age by its
 * monotonic clock, and each checkpoint it writes carries their ages then
 * (`w`) to the next engine, in this context or another that lives later.
 * So the time one context saw pass adds to the time the contexts before it
 * saw (a context reads the record only after the one that wrote it had
 * counted its part): contexts of 15 s that each commit over a few seconds
 * after reading the version delete the records of a few contexts back, and
 * the log holds about {@link EVIDENCE_MS} of them. (A single monotonic
 * clock's readings may not be compared across contexts; spans of one
 * context, all clocks of a machine advancing at one rate, may be added.)
 *
 * Why that keeps the evidence of every commit an engine may still trust. A
 * record holding the base `u` of a commit an engine has not seen was
 * written by (or after) that commit, which started after the engine's
 * confirmation of `u`; once more than {@link WITNESS_MS} is known to have
 * passed since the record's version was committed, more has passed since
 * that confirmation on every monotonic clock of the machine, and the
 * engine's trust (less than {@link TRUST_MS} by its own, `trustHolds`) is
 * over, whatever the wall clock did: the wall-clock dating alone could not
 * promise it (a clock stepped forward past a record's evidence time and
 * back within a trust).
 *
 * The second rule, {@link EVIDENCE_MAX_MS}, is what bounds the log when
 * no chain of contexts ever counts {@link WITNESS_MS} (each checkpoints at
 * once and ends): the log then holds about a day of checkpoint records. It
 * trusts the wall clock alone, and so loses a commit in exactly one case:
 * within one trust (less than {@link TRUST_MS}), the wall clock read at the
 * record's writing and at its deletion differ by more than a day while the
 * trusting engine's readings at its confirmation and its commit, on either
 * side of both, differ by less than 10 s, which takes two steps of the
 * clock of more than a day each, in opposite directions, within 10 s (a
 * single correction, of a bad clock at boot say, does not; a time zone
 * mistaken for UTC is less than a day off).
 *
 * A database deleted and made again counts its versions from 1 again: the
 * anchors are forgotten with the cache, on every new connection, and those
 * a record carries are taken only for versions up to its own.
 */
export class Witness {
  private anchors: Anchor[] = [];

  /** Note that version `version` was committed (by a transaction that started) before `mono`. */
  observe(version: number, mono: number): void {
    this.note({ version, age: 0, mono });
  }

  /** Note the ages a checkpoint record of version `cp` carries, read before `mono`. */
  learn(record: CheckpointRecord, mono: number): void {
    const ages = record.w;
    if (!Array.isArray(ages) || record.cp === undefined) return;
    for (const pair of ages as unknown[]) {
      if (!Array.isArray(pair)) continue;
      const [version, age] = pair as unknown[];
      if (typeof version !== "number" || typeof age !== "number" || !(version <= record.cp) || !(age >= 0) || !Number.isFinite(age)) continue;
      this.note({ version, age, mono });
    }
  }

  /** The ages to store in a checkpoint record written at `mono` (after noting that the version it is made on was committed). */
  carry(mono: number): Ages {
    this.prune(mono);
    return this.anchors.map((a) => [a.version, Math.max(0, a.age + mono - a.mono)] as const);
  }

  /** The newest version whose commit is known to have started at least {@link WITNESS_MS} before `mono` (-Infinity: none). */
  witnessed(mono: number): number {
    let newest = -Infinity;
    for (const a of this.anchors) if (a.age + mono - a.mono >= WITNESS_MS) newest = Math.max(newest, a.version);
    return newest;
  }

  private note(anchor: Anchor): void {
    this.anchors.push(anchor);
    if (this.anchors.length > MAX_ANCHORS) this.prune(anchor.mono);
  }

  /**
   * Keep the anchors that matter at `mono` (dropping one only loses time):
   * of those aged {@link WITNESS_MS}, the one of the newest version; of the
   * others, those no anchor of a version as new is older than, spaced a
   * quarter of {@link WITNESS_MS} apart by age, and the newest.
   */
  private prune(mono: number): void {
    const byVersion = this.anchors
      .map((a) => ({ version: a.version, age: a.age + mono - a.mono }))
      .sort((x, y) => y.version - x.version || y.age - x.age);
    // Versions descending, ages ascending.
    const front: { version: number; age: number }[] = [];
    for (const a of byVersion) if (front.length === 0 || a.age > front[front.length - 1]!.age) front.push(a);
    const ripe = front.findIndex((a) => a.age >= WITNESS_MS);
    if (ripe >= 0) front.length = ripe + 1;
    const kept: { version: number; age: number }[] = [];
    for (let i = front.length - 1; i >= 0; i--) {
      const a = front[i]!;
      const last = kept[kept.length - 1];
      if (last === undefined || i === 0 || a.age <= last.age - WITNESS_MS / 4) kept.push(a);
    }
    this.anchors = kept.map((a) => ({ version: a.version, age: a.age, mono }));
  }

  /**
   * Given the oldest checkpoint records (by version, at most
   * {@link EVIDENCE_SWEEP}) read, at `now`, by a checkpoint writing version
   * `next`: which replaced ones to delete, which to re-date.
   */
  sweep(oldest: readonly CheckpointRecord[], next: number, now: Moment): Sweep {
    const deletes: number[] = [];
    const redated: CheckpointRecord[] = [];
    for (const record of oldest) this.learn(record, now.mono);
    const witnessed = this.witnessed(now.mono);
    for (const record of oldest) {
      const cp = record.cp;
      if (cp === undefined || cp >= next) continue;
      if (record.at !== undefined && record.at > now.wall) {
        redated.push({ ...record, at: now.wall });
        continue;
      }
      const at = record.at ?? 0;
      // A record naming no base (the first checkpoint, made by the schema upgrade) is evidence of nothing.
      const evidence = record.b !== undefined && record.b.length > 0;
      if ((at < now.wall - EVIDENCE_MS && (!evidence || cp <= witnessed)) || at < now.wall - EVIDENCE_MAX_MS) deletes.push(cp);
    }
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
