/**
 * One journal transaction's worth of work: the state transitions of
 * `docs/journal-semantics.md`, written over the rows of `layout.ts`.
 *
 * A `Work` lives inside one `Engine.transact` body and awaits nothing but the
 * transaction's calls. It caches the meta row and the consumer rows it touched
 * and writes them back once, in `flush()`. Every method keeps the layout's
 * invariants:
 * - an unfinished event of consumer C has a `u` row; a finished one an `f` or
 *   `q` row; never two of them;
 * - for each (C, ordering key) with unfinished events there is an `h` row whose
 *   `active` event is in exactly one of `r`, `l`, `w` (its `slot`), and every
 *   event of the key at or below `h.done` is finished;
 * - an unfinished event's latest attempt has `outcome: null` exactly while it
 *   sits in `l` (leased; its lease may have run out and not been swept yet);
 * - when the active event is not leased, it is the key's first unfinished
 *   event; a leased one may have earlier unfinished events (put back by
 *   `release`), which the sweep reinstates once its lease is over.
 */
import { compareKeys, type Entry, type EngineTransaction, type Key } from "../engine.js";
import { CLOCK_BACK_TOLERANCE_MS, deliveryBytes, MAX_KEPT_ATTEMPTS } from "./arguments.js";
import { AtCapacityError, type JournalError } from "./errors.js";
import { isSameFact } from "./event.js";
import {
  Slot,
  TOP,
  type ConsumerRow,
  type EventRow,
  type FinishedRow,
  type HeadRow,
  type Layout,
  type MetaRow,
  type QuarantineRow,
  type UnfinishedRow,
} from "./layout.js";
import type { AppendResult, Attempt, AttemptOutcome, AuditEntry, Capacity, Delivery, DeliveryId, PoisonReason, UsageEvent } from "./types.js";
import { EventConflictError } from "./errors.js";
import { readAhead, type ReadGroup, type ScanRequest } from "./read-ahead.js";

const EMPTY_META: MetaRow = { version: 1, next: 1, stored: 0, dropped: 0, consumers: [], auditSeq: 0 };
const EMPTY_CONSUMER: ConsumerRow = { finished: 0, quarantined: 0, leased: 0 };

/** A consumer row as written before `ConsumerRow.finished` existed. */
interface LegacyConsumerRow {
  readonly unfinished: number;
  readonly quarantined: number;
  readonly leased: number;
}
/** The most index entries one engine scan fetches while walking. */
const CHUNK = 64;
/**
 * The first chunk of a key's events {@link Work.firstUnfinished} reads: the
 * event just finished and, usually, the next one.
 */
const FIRST_UNFINISHED_CHUNK = 2;

/** What pruning a page of events deletes together at the end (see `Work.flushDeletes`). */
interface DeferredDeletes {
  /** Positions whose event rows go. */
  readonly events: number[];
  /** Per consumer, positions whose finished rows go. */
  readonly finished: Map<string, number[]>;
}

/** The last element of a key (positions are always last). */
export function lastPart(key: Key): number {
  return key[key.length - 1] as number;
}

/** Where a consumer's event stands. */
export type Standing =
  | { readonly kind: "unfinished"; readonly row: UnfinishedRow }
  | { readonly kind: "finished"; readonly row: FinishedRow }
  | { readonly kind: "quarantined"; readonly row: QuarantineRow }
  | { readonly kind: "none" };

/** The latest attempt, if any. */
export function latest(history: readonly Attempt[]): Attempt | undefined {
  return history[history.length - 1];
}

/** `history` with `attempt` added, keeping the latest {@link MAX_KEPT_ATTEMPTS} (copy on write). */
/** The first page of ready entries a claim with a byte bound reads (and, on engines with round trips, reads ahead). */
const FIRST_BOUNDED_PAGE = 16;

/**
 * How many ready entries a claim's next page takes: all it may still lease
 * without a byte bound; with one, about as many as the bytes left hold at
 * the average size of the deliveries so far (one more, and
 * {@link FIRST_BOUNDED_PAGE} before any), so that a claim bounded to a few
 * deliveries does not read (ahead) the rows and events of `maxEvents`.
 */
function pageWithin(maxBytes: number, bytes: number, delivered: number): number {
  if (maxBytes === Infinity) return Infinity;
  if (delivered === 0) return FIRST_BOUNDED_PAGE;
  return Math.max(1, Math.ceil((maxBytes - bytes) / (bytes / delivered)) + 1);
}

function withAttempt(history: readonly Attempt[], attempt: Attempt): Attempt[] {
  const kept = history.length >= MAX_KEPT_ATTEMPTS ? history.slice(history.length - MAX_KEPT_ATTEMPTS + 1) : history.slice();
  kept.push(attempt);
  return kept;
}

/** Replace the latest attempt's outcome (copy on write). */
function withOutcome(history: readonly Attempt[], outcome: AttemptOutcome): Attempt[] {
  const copy = history.slice();
  const last = copy[copy.length - 1];
  if (last) copy[copy.length - 1] = { ...last, outcome };
  return copy;
}

/** Mark a running latest attempt as expired at its lease end. */
function expireLatest(history: readonly Attempt[]): readonly Attempt[] {
  const last = latest(history);
  if (!last || last.outcome !== null) return history;
  return withOutcome(history, { kind: "expired", at: last.leaseExpiresAt });
}

/** Whether the latest attempt is in flight at `now`. */
export function inFlightAt(row: UnfinishedRow, now: number): boolean {
  const last = latest(row.history);
  return last !== undefined && last.outcome === null && last.leaseExpiresAt > now;
}


export class Work {
  private metaRow: MetaRow | undefined;
  private metaDirty = false;
  private readonly consumers = new Map<string, ConsumerRow>();
  private readonly dirtyConsumers = new Set<string>();
  /**
   * A prune cutoff up to which no delivered event is left in this
   * transaction (set by a prune that found fewer than its limit; forgotten
   * when an event becomes delivered).
   */
  private sweptThrough: number | null = null;
  /** Lease entries an ackBatch removes, by consumer, while {@link deferLeaseDeletes} holds. */
  private leaseDeletes: Map<string, Key[]> | null = null;

  /**
   * The stored count the consumer rows in the old shape agree with (the meta
   * row's as this transaction found it), while the journal's meta row says
   * they may still be in that shape (see `MetaRow.countsFinished`).
   */
  private legacyStored: number | null = null;

  /**
   * @param readsAhead whether batch operations read their keys in groups
   *   first (worth it on engines whose requests wait on round trips; see
   *   `Engine.localReads`).
   * @param writable whether the transaction may write (a readonly one leaves
   *   rows in an old shape as they are and reads them converted).
   */
  constructor(
    public tx: EngineTransaction,
    readonly layout: Layout,
    readonly capacity: Capacity,
    private readonly readsAhead = true,
    private readonly writable = true,
  ) {}

  // ---- cached rows --------------------------------------------------------

  async meta(): Promise<MetaRow> {
    if (!this.metaRow) {
      const row = (await this.tx.get<MetaRow>(this.layout.meta())) ?? this.emptyMeta();
      this.metaRow = row;
      if (row.countsFinished !== true && row.consumers.length > 0) await this.convertConsumerRows(row);
      if (row.agesIndexed !== true && this.writable) await this.buildAgeIndexes();
    }
    return this.metaRow;
  }

  /**
   * Build the `t` and `p` indexes (events, and each consumer's unfinished
   * events, by observedAt) over data written before they existed: one walk of
   * the events and of each consumer's unfinished rows, once, in the first
   * writing transaction. A readonly transaction reads such data without them
   * (see `ageIndexed`).
   */
  private async buildAgeIndexes(): Promise<void> {
    await this.walk<EventRow>({ prefix: this.layout.events() }, (entry) => {
      this.tx.put(this.layout.observed(entry.value.event.observedAt, entry.value.position), 0);
      return true;
    });
    for (const consumer of this.metaRow!.consumers) {
      await this.walk<UnfinishedRow>({ prefix: this.layout.unfinishedAll(consumer) }, (entry) => {
        this.tx.put(this.layout.unfinishedByAge(consumer, entry.value.observedAt, lastPart(entry.key)), 0);
        return true;
      });
    }
    this.setMeta({ agesIndexed: true });
  }

  /** Delete the consumer's unfinished row of `position` and its entry in the `p` index. */
  private dropUnfinished(consumer: string, position: number, row: UnfinishedRow): void {
    this.tx.delete(this.layout.unfinished(consumer, position));
    this.tx.delete(this.layout.unfinishedByAge(consumer, row.observedAt, position));
  }

  /** Whether the `t` and `p` indexes are there to read (see {@link buildAgeIndexes}). */
  async ageIndexed(): Promise<boolean> {
    return (await this.meta()).agesIndexed === true;
  }

  /** The meta row of a journal with no data: it keeps the `o` index only when its policy reads it. */
  private emptyMeta(): MetaRow {
    return { ...EMPTY_META, openIndexed: this.capacity.policy === "drop_oldest", countsFinished: true, agesIndexed: true, auditIndexedFrom: 1 };
  }

  /**
   * Consumer rows written before they counted finished events hold
   * `unfinished`, consistent with the meta row's `stored` as committed (every
   * commit of the old code kept them so). Converted here, before anything in
   * this transaction moves `stored`: a writable transaction writes every row
   * in the new shape and marks the meta row, so later appends, which no
   * longer touch consumer rows, cannot make an old row stale; a readonly one
   * converts as it reads.
   */
  private async convertConsumerRows(meta: MetaRow): Promise<void> {
    this.legacyStored = meta.stored;
    if (!this.writable) return;
    for (const consumer of meta.consumers) {
      await this.consumerRow(consumer);
      this.dirtyConsumers.add(consumer);
    }
    this.legacyStored = null;
    this.setMeta({ countsFinished: true });
  }

  private setMeta(patch: Partial<MetaRow>): void {
    this.metaRow = { ...(this.metaRow ?? this.emptyMeta()), ...patch };
    this.metaDirty = true;
  }

  /** Whether the `o` index (drop candidates) is kept (see `layout.ts`). */
  private async openIndexed(): Promise<boolean> {
    return (await this.meta()).openIndexed !== false;
  }

  /**
   * Build the `o` index from the stored events (the first drop over data whose
   * journals never kept it): every event that is neither delivered to all
   * registered consumers nor quarantined by one of them.
   */
  private async buildOpenIndex(): Promise<void> {
    const consumers = (await this.meta()).consumers;
    await this.walk<EventRow>({ prefix: this.layout.events() }, async (entry) => {
      const { position, event } = entry.value;
      // An `x` entry's value is 0: present, not truthy.
      if ((await this.tx.get(this.layout.delivered(event.observedAt, position))) !== undefined) return true;
      for (const consumer of consumers) if (await this.tx.get(this.layout.quarantined(consumer, position))) return true;
      this.tx.put(this.layout.open(position), 0);
      return true;
    });
    this.setMeta({ openIndexed: true });
  }

  async isRegistered(consumer: string): Promise<boolean> {
    return (await this.meta()).consumers.includes(consumer);
  }

  async consumerRow(consumer: string): Promise<ConsumerRow> {
    let row = this.consumers.get(consumer);
    if (!row) {
      await this.meta(); // converts rows in the old shape first, if the meta row says there may be some
      row = this.consumers.get(consumer);
      if (row) return row;
      const stored = await this.tx.get<ConsumerRow | LegacyConsumerRow>(this.layout.consumer(consumer));
      row = stored === undefined ? EMPTY_CONSUMER : "finished" in stored ? stored : this.fromLegacy(stored);
      this.consumers.set(consumer, row);
    }
    return row;
  }

  /** A consumer row written before `finished` existed: what it counted, as it is counted now. */
  private fromLegacy(row: LegacyConsumerRow): ConsumerRow {
    if (this.legacyStored === null) throw new Error("journal layout is inconsistent: a consumer row in the old shape under a meta row that says none is left");
    return { finished: this.legacyStored - row.unfinished - row.quarantined, quarantined: row.quarantined, leased: row.leased };
  }

  /** Events stored that `consumer` has neither finished nor quarantined. */
  async unfinishedCount(consumer: string): Promise<number> {
    const row = await this.consumerRow(consumer);
    return (await this.meta()).stored - row.finished - row.quarantined;
  }

  private async bump(consumer: string, delta: { finished?: number; quarantined?: number; leased?: number }): Promise<void> {
    const row = await this.consumerRow(consumer);
    this.consumers.set(consumer, {
      ...row,
      finished: row.finished + (delta.finished ?? 0),
      quarantined: row.quarantined + (delta.quarantined ?? 0),
      leased: row.leased + (delta.leased ?? 0),
    });
    this.dirtyConsumers.add(consumer);
  }

  /** Write back the cached rows that changed. */
  flush(): void {
    if (this.metaDirty && this.metaRow) this.tx.put(this.layout.meta(), this.metaRow);
    for (const consumer of this.dirtyConsumers) this.tx.put(this.layout.consumer(consumer), this.consumers.get(consumer));
    this.metaDirty = false;
    this.dirtyConsumers.clear();
  }

  /**
   * Read, together, what appending these events will look up one by one (their
   * request ids and, per consumer, their keys' head rows, and the first prune
   * scan), so an engine with request round trips waits once instead of per
   * event. (An append writes no consumer row: see `ConsumerRow`.)
   */
  async readAheadForAppend(events: readonly UsageEvent[], prune?: { readonly now: number; readonly limit: number }): Promise<void> {
    if (!this.readsAhead) return;
    const consumers = (await this.meta()).consumers;
    // What `prune` will read first: its scan.
    const scans: ScanRequest[] = prune === undefined || consumers.length === 0 ? [] : [this.pruneScan(prune.now, prune.limit)];
    const groups: ReadGroup[] = [{ prefix: this.layout.ids(), keys: events.map((event) => this.layout.id(event.id)) }];
    for (const consumer of consumers) {
      groups.push({
        prefix: this.layout.headsOf(consumer),
        keys: events.map((event) => this.layout.head(consumer, event.orderingKey.namespace, event.orderingKey.subject)),
      });
    }
    this.tx = await readAhead(this.tx, [], [], scans, groups);
  }

  /**
   * Warm the transaction for acks of `deliveries`: what each ack reads before
   * it writes (the event's position, its row, the consumer's standing on it,
   * the other consumers' finished rows, the key's head, and the key's next
   * event), read together in five rounds instead of several awaited reads
   * per ack.
   */
  async readAheadForAck(deliveries: readonly DeliveryId[]): Promise<void> {
    if (!this.readsAhead) return;
    const consumers = (await this.meta()).consumers;
    this.tx = await readAhead(this.tx, [], [], [], [{ prefix: this.layout.ids(), keys: deliveries.map((delivery) => this.layout.id(delivery.event)) }]);
    const positions = await Promise.all(deliveries.map((delivery) => this.positionOf(delivery.event)));
    const keys: Key[] = [];
    deliveries.forEach((delivery, i) => {
      const position = positions[i];
      if (position === undefined) return;
      keys.push(this.layout.event(position), this.layout.unfinished(delivery.consumer, position));
      for (const other of consumers) if (other !== delivery.consumer) keys.push(this.layout.finished(other, position));
    });
    this.tx = await readAhead(this.tx, keys);
    // The standing rows `standing` reads only when the unfinished row is missing (a repeated ack, say).
    const standings: Key[] = [];
    for (const [i, delivery] of deliveries.entries()) {
      const position = positions[i];
      if (position !== undefined && !(await this.tx.get(this.layout.unfinished(delivery.consumer, position)))) {
        standings.push(this.layout.finished(delivery.consumer, position), this.layout.quarantined(delivery.consumer, position));
      }
    }
    const located: { consumer: string; position: number; key: UsageEvent["orderingKey"] }[] = [];
    const heads = new Map<string, Key[]>();
    for (const [i, delivery] of deliveries.entries()) {
      const position = positions[i];
      if (position === undefined) continue;
      const row = await this.tx.get<EventRow>(this.layout.event(position));
      if (!row) continue;
      const key = row.event.orderingKey;
      let group = heads.get(delivery.consumer);
      if (!group) heads.set(delivery.consumer, (group = []));
      group.push(this.layout.head(delivery.consumer, key.namespace, key.subject));
      located.push({ consumer: delivery.consumer, position, key });
    }
    // Each consumer's head rows with one range read when they lie close
    // together (other keys' heads in between are cheap to read past).
    const groups = [...heads].map(([consumer, keys]) => ({ prefix: this.layout.headsOf(consumer), keys }));
    this.tx = await readAhead(this.tx, standings, [], [], groups);
    // Each ack of a key's active event hands the turn on: it scans the key's
    // events after `done` for the first unfinished one (see `advance`). Read
    // those first scans, then the unfinished rows they name, together.
    const scans: ScanRequest[] = [];
    const advancing: { consumer: string; scan: ScanRequest }[] = [];
    for (const { consumer, position, key } of located) {
      const head = await this.tx.get<HeadRow>(this.layout.head(consumer, key.namespace, key.subject));
      if (!head || head.active !== position) continue;
      const scan = this.firstUnfinishedScan(key, head.done, FIRST_UNFINISHED_CHUNK);
      scans.push(scan);
      advancing.push({ consumer, scan });
    }
    if (scans.length === 0) return;
    this.tx = await readAhead(this.tx, [], [], scans);
    const rows: Key[] = [];
    for (const { consumer, scan } of advancing) {
      for (const entry of await this.tx.scan(scan.range, scan.options)) rows.push(this.layout.unfinished(consumer, lastPart(entry.key)));
    }
    this.tx = await readAhead(this.tx, rows);
  }

  /** The first scan of {@link firstUnfinished}: the key's events after `done`. */
  private firstUnfinishedScan(key: UsageEvent["orderingKey"], done: number, limit: number): ScanRequest {
    const prefix = this.layout.keyEvents(key.namespace, key.subject);
    return { range: { prefix, lower: [...prefix, done], lowerOpen: true }, options: { limit } };
  }

  // ---- plain reads -------------------------------------------------------------

  async positionOf(requestId: string): Promise<number | undefined> {
    return this.tx.get<number>(this.layout.id(requestId));
  }

  async eventAt(position: number): Promise<UsageEvent> {
    const row = await this.tx.get<EventRow>(this.layout.event(position));
    if (!row) throw new Error(`journal layout is inconsistent: no event at position ${position}`);
    return row.event;
  }

  async standing(consumer: string, position: number): Promise<Standing> {
    // The unfinished row first: it is there for almost every call (an ack, a
    // nack, an extend), and then the other two are not read at all. When it
    // is not, both others are read together: one more round on engines with
    // round trips, on the rare path only.
    const u = await this.tx.get<UnfinishedRow>(this.layout.unfinished(consumer, position));
    if (u) return { kind: "unfinished", row: u };
    const [f, q] = await Promise.all([
      this.tx.get<FinishedRow>(this.layout.finished(consumer, position)),
      this.tx.get<QuarantineRow>(this.layout.quarantined(consumer, position)),
    ]);
    if (f) return { kind: "finished", row: f };
    if (q) return { kind: "quarantined", row: q };
    return { kind: "none" };
  }

  /** Walk a range in chunks, stopping when `visit` returns false. */
  async walk<V>(
    range: { prefix: Key; lower?: Key; lowerOpen?: boolean; upper?: Key; upperOpen?: boolean },
    visit: (entry: Entry<V>) => Promise<boolean> | boolean,
    firstChunk: number = CHUNK,
    reverse = false,
  ): Promise<void> {
    if (reverse) return this.walkDown(range, visit, firstChunk);
    let lower = range.lower;
    let lowerOpen = range.lowerOpen ?? false;
    // Walks that usually stop at once start small and grow, so the common case
    // reads one or two entries rather than a full chunk.
    let chunk = firstChunk;
    for (;;) {
      const entries = await this.tx.scan<V>(
        {
          prefix: range.prefix,
          ...(lower ? { lower, lowerOpen } : {}),
          ...(range.upper ? { upper: range.upper, upperOpen: range.upperOpen ?? false } : {}),
        },
        { limit: chunk },
      );
      for (const entry of entries) {
        if (!(await visit(entry))) return;
      }
      if (entries.length < chunk) return;
      lower = entries[entries.length - 1]!.key;
      lowerOpen = true;
      chunk = Math.min(CHUNK, chunk * 4);
    }
  }

  /** {@link walk} in descending key order. */
  private async walkDown<V>(
    range: { prefix: Key; lower?: Key; lowerOpen?: boolean; upper?: Key; upperOpen?: boolean },
    visit: (entry: Entry<V>) => Promise<boolean> | boolean,
    firstChunk: number,
  ): Promise<void> {
    let upper = range.upper;
    let upperOpen = range.upperOpen ?? false;
    let chunk = firstChunk;
    for (;;) {
      const entries = await this.tx.scan<V>(
        {
          prefix: range.prefix,
          ...(range.lower ? { lower: range.lower, lowerOpen: range.lowerOpen ?? false } : {}),
          ...(upper ? { upper, upperOpen } : {}),
        },
        { limit: chunk, reverse: true },
      );
      for (const entry of entries) {
        if (!(await visit(entry))) return;
      }
      if (entries.length < chunk) return;
      upper = entries[entries.length - 1]!.key;
      upperOpen = true;
      chunk = Math.min(CHUNK, chunk * 4);
    }
  }

  // ---- the global indexes `x` (delivered to all) and `o` (drop candidates) ----

  /**
   * Whether every registered consumer other than `consumer` acked or
   * discarded the event, and no consumer is registering: one that is has
   * finished nothing yet (so nothing is delivered to all while it registers).
   */
  private async othersFinished(position: number, consumer: string): Promise<boolean> {
    const meta = await this.meta();
    if ((meta.registering ?? []).length > 0) return false;
    for (const other of meta.consumers) {
      if (other !== consumer && !(await this.tx.get(this.layout.finished(other, position)))) return false;
    }
    return true;
  }

  /** Whether a registered consumer other than `consumer` holds the event quarantined. */
  private async othersQuarantined(position: number, consumer: string): Promise<boolean> {
    for (const other of (await this.meta()).consumers) {
      if (other !== consumer && (await this.tx.get(this.layout.quarantined(other, position)))) return true;
    }
    return false;
  }

  // ---- slots: the active event of a (consumer, key) -----------------------------

  /**
   * Remove the event's index entry if it is its key's active event (its row
   * keeps its data). A row that is neither leased nor waiting is ready exactly
   * when it is active, which the key's head row says (see `Slot`).
   */
  private async clearSlot(consumer: string, position: number, row: UnfinishedRow, key: UsageEvent["orderingKey"]): Promise<void> {
    if (row.slot === Slot.Waiting) this.tx.delete(this.layout.waiting(consumer, row.availableAt, position));
    else if (row.slot !== Slot.Leased) {
      const head = await this.tx.get<HeadRow>(this.layout.head(consumer, key.namespace, key.subject));
      if (head?.active === position) this.tx.delete(this.layout.ready(consumer, position));
    } else {
      const key = this.layout.leased(consumer, latest(row.history)!.leaseExpiresAt, position);
      const deferred = this.leaseDeletes?.get(consumer);
      if (deferred) deferred.push(key);
      else if (this.leaseDeletes) this.leaseDeletes.set(consumer, [key]);
      else this.tx.delete(key);
      await this.bump(consumer, { leased: -1 });
    }
  }

  /**
   * From now on, collect the lease entries acks remove instead of deleting
   * them one by one, for {@link flushLeaseDeletes} (an `ackBatch`: nothing it
   * does reads the lease index). Only where the engine has `deleteRange`.
   */
  deferLeaseDeletes(): void {
    if (this.tx.deleteRange) this.leaseDeletes = new Map();
  }

  /**
   * Delete the collected lease entries: a consumer's entries with one range
   * delete when they are every entry from the first to the last of them (the
   * usual batch: the deliveries of one claim, acknowledged together), which
   * one scan of that range checks; else one by one.
   */
  async flushLeaseDeletes(): Promise<void> {
    const collected = this.leaseDeletes;
    this.leaseDeletes = null;
    if (!collected) return;
    for (const [consumer, keys] of collected) {
      keys.sort(compareKeys);
      const prefix = this.layout.leasedAll(consumer);
      if (keys.length > 1) {
        // The keys are stored and distinct: the range holds only them when it holds that many.
        const stored = await this.tx.scan({ prefix, lower: keys[0]!, upper: keys[keys.length - 1]! }, { limit: keys.length + 1 });
        if (stored.length === keys.length) {
          this.deleteListed(prefix, keys);
          continue;
        }
      }
      for (const key of keys) this.tx.delete(key);
    }
  }

  /**
   * Make `position` its key's active event (the caller points the head row at
   * it): ready, or waiting when a nack delay has not passed at `now` (when
   * `now` is unknown, any delay waits and the next claim's sweep decides).
   * `stored` says `row` is exactly the stored row: a ready event whose row
   * says neither leased nor waiting then needs no write of its row (one
   * request less per ack that hands a key's turn on, on IndexedDB).
   */
  private activate(consumer: string, position: number, row: UnfinishedRow, now: number | null, stored = false): void {
    const waits = row.availableAt > 0 && (now === null || row.availableAt > now);
    if (waits) {
      this.tx.put(this.layout.waiting(consumer, row.availableAt, position), 0);
      this.tx.put(this.layout.unfinished(consumer, position), { ...row, slot: Slot.Waiting });
      return;
    }
    this.tx.put(this.layout.ready(consumer, position), 0);
    if (stored && (row.slot === Slot.None || row.slot === Slot.Ready)) return;
    this.tx.put(this.layout.unfinished(consumer, position), { ...row, slot: Slot.Ready });
  }

  /**
   * The first unfinished event of a key after `done`, and how far `done` can
   * move; with `below`, only among the positions below it (a registering
   * consumer's walk has passed those, and it has no row of the others).
   */
  private async firstUnfinished(
    consumer: string,
    key: UsageEvent["orderingKey"],
    done: number,
    below?: number,
  ): Promise<{ position: number; row: UnfinishedRow } | null> {
    let found: { position: number; row: UnfinishedRow } | null = null;
    const { range } = this.firstUnfinishedScan(key, done, FIRST_UNFINISHED_CHUNK);
    await this.walk(
      below === undefined ? range : { ...range, upper: [...range.prefix, below], upperOpen: true },
      async (entry) => {
        const position = lastPart(entry.key);
        const row = await this.tx.get<UnfinishedRow>(this.layout.unfinished(consumer, position));
        if (row) found = { position, row };
        return found === null;
      },
      FIRST_UNFINISHED_CHUNK,
    );
    return found;
  }

  // ---- drop_oldest's holds on keys (`g`, `gt`) ---------------------------------

  /**
   * drop_oldest's hold on the consumer's key while it runs at `now` (null:
   * unknown, so any hold counts; the next claim's sweep decides), else 0.
   * None of the key's events is claimable by the consumer before it.
   */
  private async holdOn(consumer: string, key: UsageEvent["orderingKey"], now: number | null): Promise<number> {
    if ((await this.meta()).holdsKept !== true) return 0;
    const until = await this.tx.get<number>(this.layout.hold(consumer, key.namespace, key.subject));
    return typeof until === "number" && (now === null || until > now) ? until : 0;
  }

  /** Hold the consumer's key until `until` (or longer, if it is held longer already). */
  private async holdUntil(consumer: string, key: UsageEvent["orderingKey"], until: number): Promise<void> {
    const holdKey = this.layout.hold(consumer, key.namespace, key.subject);
    const meta = await this.meta();
    const held = meta.holdsKept === true ? await this.tx.get<number>(holdKey) : undefined;
    if (typeof held === "number") {
      if (held >= until) return;
      this.tx.delete(this.layout.holdEnd(consumer, held, key.namespace, key.subject));
    }
    this.tx.put(holdKey, until);
    this.tx.put(this.layout.holdEnd(consumer, until, key.namespace, key.subject), 0);
    if (meta.holdsKept !== true) this.setMeta({ holdsKept: true });
  }

  /** Forget the consumer's holds that ended at or before `now` (the claim's sweep). */
  private async forgetHolds(consumer: string, now: number): Promise<void> {
    if ((await this.meta()).holdsKept !== true) return;
    const prefix = this.layout.holdEnds(consumer);
    // Up to `[prefix, now + 1]`, open: the part after `until` is a string, which sorts above any number (TOP too).
    const ended = await this.tx.scan({ prefix, upper: [...prefix, now + 1], upperOpen: true });
    for (const entry of ended) {
      const [until, namespace, subject] = entry.key.slice(prefix.length) as [number, string, string];
      this.tx.delete(entry.key);
      const holdKey = this.layout.hold(consumer, namespace, subject);
      if ((await this.tx.get<number>(holdKey)) === until) this.tx.delete(holdKey);
    }
  }

  /** `row`, waiting out `hold` (0: none) when it is later than its own `availableAt`. */
  private static held(row: UnfinishedRow, hold: number): UnfinishedRow {
    return hold > row.availableAt ? { ...row, availableAt: hold } : row;
  }

  /**
   * Hand the key's turn to its first unfinished event after `done` (below
   * `below`, when given: see {@link firstUnfinished}), or drop the head row.
   * A hold on the key (drop_oldest's) is waited out by the event that takes
   * the turn.
   */
  private async advance(consumer: string, key: UsageEvent["orderingKey"], done: number, now: number | null, below?: number): Promise<void> {
    const headKey = this.layout.head(consumer, key.namespace, key.subject);
    const next = await this.firstUnfinished(consumer, key, done, below);
    if (!next) {
      this.tx.delete(headKey);
      return;
    }
    this.tx.put(headKey, { active: next.position, done: next.position - 1 } satisfies HeadRow);
    const row = Work.held(next.row, await this.holdOn(consumer, key, now));
    this.activate(consumer, next.position, row, now, row === next.row);
  }

  /**
   * An unfinished event left the consumer's backlog (its `u` row is gone or
   * replaced, its slot cleared): if it was its key's active event, pass the
   * turn (among the positions below `below`, when given: see {@link firstUnfinished}).
   */
  private async leftBacklog(consumer: string, event: UsageEvent, position: number, now: number | null, below?: number): Promise<void> {
    const key = event.orderingKey;
    const head = await this.tx.get<HeadRow>(this.layout.head(consumer, key.namespace, key.subject));
    if (!head || head.active !== position) return;
    await this.advance(consumer, key, head.done, now, below);
  }

  /**
   * The active event at `position` stopped being leased (lease swept or
   * nacked) or waiting: it takes the key's turn again unless an earlier
   * unfinished event (put back by release) now comes first.
   */
  private async reinstate(consumer: string, position: number, row: UnfinishedRow, now: number): Promise<void> {
    const event = await this.eventAt(position);
    const key = event.orderingKey;
    const headKey = this.layout.head(consumer, key.namespace, key.subject);
    const head = await this.tx.get<HeadRow>(headKey);
    if (head && head.done < position - 1) {
      const first = await this.firstUnfinished(consumer, key, head.done);
      if (first && first.position < position) {
        this.tx.put(this.layout.unfinished(consumer, position), { ...row, slot: Slot.None });
        this.tx.put(headKey, { active: first.position, done: first.position - 1 } satisfies HeadRow);
        const taking = Work.held(first.row, await this.holdOn(consumer, key, now));
        this.activate(consumer, first.position, taking, now, taking === first.row);
        return;
      }
    }
    this.activate(consumer, position, Work.held(row, await this.holdOn(consumer, key, now)), now);
  }

  // ---- events -------------------------------------------------------------------

  /**
   * Delete an event and everything every consumer knows about it. With
   * `deferred`, its event row, delivered entry and finished rows are collected
   * there instead, for {@link flushDeletes} to delete with the other events'.
   */
  async deleteEvent(position: number, now: number | null, deferred?: DeferredDeletes, droppedAt?: number): Promise<void> {
    const event = await this.eventAt(position);
    const { namespace, subject } = event.orderingKey;
    if (deferred) deferred.events.push(position);
    else this.tx.delete(this.layout.event(position));
    this.tx.delete(this.layout.id(event.id));
    this.tx.delete(this.layout.observed(event.observedAt, position));
    // Always (cheap when absent): data written before `k` was conditional may hold it with no consumer.
    this.tx.delete(this.layout.keyEvent(namespace, subject, position));
    if (!deferred) this.tx.delete(this.layout.delivered(event.observedAt, position));
    if (await this.openIndexed()) this.tx.delete(this.layout.open(position));
    const meta = await this.meta();
    for (const consumer of meta.consumers) {
      const row = await this.tx.get<UnfinishedRow>(this.layout.unfinished(consumer, position));
      if (row) {
        await this.forgetUnfinished(consumer, event, position, row, now, droppedAt);
      } else {
        // Not unfinished and never quarantined (those are not deleted): finished.
        await this.bump(consumer, { finished: -1 });
        if (deferred) {
          let finished = deferred.finished.get(consumer);
          if (!finished) deferred.finished.set(consumer, (finished = []));
          finished.push(position);
        } else {
          this.tx.delete(this.layout.finished(consumer, position));
        }
      }
    }
    // A registering consumer has an unfinished row of each event its walk passed, and no row of the others
    // (none of which it has finished either: its counters stay as they are).
    for (const consumer of meta.registering ?? []) {
      const below = (await this.consumerRow(consumer)).registeredBelow!;
      if (position >= below) continue;
      const row = (await this.tx.get<UnfinishedRow>(this.layout.unfinished(consumer, position)))!;
      await this.forgetUnfinished(consumer, event, position, row, now, droppedAt, below);
    }
    this.setMeta({ stored: (await this.meta()).stored - 1 });
  }

  /**
   * The consumer's part of {@link deleteEvent} for an event it has not
   * finished: its unfinished row goes, and if the event was its key's active
   * one, the key's turn passes on (only among positions below `below`, for
   * a registering consumer).
   */
  private async forgetUnfinished(
    consumer: string,
    event: UsageEvent,
    position: number,
    row: UnfinishedRow,
    now: number | null,
    droppedAt: number | undefined,
    below?: number,
  ): Promise<void> {
    // Dropped (drop_oldest at `droppedAt`) while this consumer holds it in flight: it may still be working
    // on it, so none of its key's events is claimable by it before that lease's end.
    if (droppedAt !== undefined && inFlightAt(row, droppedAt)) await this.holdUntil(consumer, event.orderingKey, latest(row.history)!.leaseExpiresAt);
    this.dropUnfinished(consumer, position, row);
    await this.clearSlot(consumer, position, row, event.orderingKey);
    await this.leftBacklog(consumer, event, position, now, below);
  }

  /**
   * Delete what {@link deleteEvent} deferred: runs of consecutive positions
   * with one range delete each where the engine has `deleteRange` (on
   * IndexedDB one request instead of one per row).
   */
  private flushDeletes(deferred: DeferredDeletes): void {
    this.deleteRuns(deferred.events, (position) => this.layout.event(position));
    for (const [consumer, positions] of deferred.finished) this.deleteRuns(positions, (position) => this.layout.finished(consumer, position));
  }

  /**
   * Delete the rows `keyOf(position)` of `positions`. The rows of one table
   * differ only in their last element, an integer position, so a run of
   * consecutive positions is every key stored from its first to its last.
   */
  private deleteRuns(positions: readonly number[], keyOf: (position: number) => Key): void {
    const sorted = [...positions].sort((a, b) => a - b);
    let start = 0;
    for (let end = 1; end <= sorted.length; end++) {
      if (end < sorted.length && sorted[end] === sorted[end - 1]! + 1) continue;
      const keys = sorted.slice(start, end).map(keyOf);
      this.deleteListed(keys[0]!.slice(0, -1), keys);
      start = end;
    }
  }

  /**
   * Delete `keys`, in key order, which the caller knows are every key stored
   * under `prefix` from the first to the last of them (a scan's page, a run
   * of positions): one range delete where the engine has `deleteRange` (one
   * request on IndexedDB instead of one per key), else one delete each.
   */
  private deleteListed(prefix: Key, keys: readonly Key[]): void {
    if (keys.length > 1 && this.tx.deleteRange) this.tx.deleteRange({ prefix, lower: keys[0]!, upper: keys[keys.length - 1]! });
    else for (const key of keys) this.tx.delete(key);
  }

  /** Whether the event's retention window has passed at `now`. */
  private windowPassed(event: UsageEvent, now: number): boolean {
    return event.observedAt <= now - this.capacity.retainAcknowledgedMs;
  }

  /** Whether the stored event at `position` is prunable at `now`: delivered to every consumer, its window passed. */
  private async prunableAt(event: UsageEvent, position: number, now: number): Promise<boolean> {
    if (!this.windowPassed(event, now)) return false;
    return (await this.tx.get(this.layout.delivered(event.observedAt, position))) !== undefined;
  }

  /** Forget up to `limit` delivered events whose window has passed. */
  async prune(now: number, limit: number): Promise<number> {
    const meta = await this.meta();
    if (meta.consumers.length === 0) return 0;
    const cutoff = now - this.capacity.retainAcknowledgedMs;
    // Nothing is due up to a cutoff this transaction already swept clean (a
    // group of appends prunes once per append, each at about the same time).
    if (this.sweptThrough !== null && cutoff <= this.sweptThrough) return 0;
    const scan = this.pruneScan(now, limit);
    const due = await this.tx.scan(scan.range, scan.options);
    if (this.readsAhead && due.length > 0) {
      const positions = due.map((entry) => lastPart(entry.key));
      this.tx = await readAhead(this.tx, [...positions.map((position) => this.layout.event(position)), ...this.pruneReads(meta, positions)]);
    }
    const deferred: DeferredDeletes = { events: [], finished: new Map() };
    for (const entry of due) await this.deleteEvent(lastPart(entry.key), now, deferred);
    // The due entries are every `x` entry from the first to the last (one
    // scan's page; deleting events writes no `x` entry).
    this.deleteListed(this.layout.deliveredAll(), due.map((entry) => entry.key));
    this.flushDeletes(deferred);
    if (due.length < limit) this.sweptThrough = Math.max(cutoff, this.sweptThrough ?? cutoff);
    return due.length;
  }

  /**
   * What deleting the delivered events at `positions` reads besides their
   * event rows (see {@link deleteEvent}), for a read ahead: every registered
   * consumer's unfinished row of each, and the consumers' counters not read
   * yet (of the registering ones too: how far their walks came; a delivered
   * event lies past every walk, so no registering consumer's rows of it are
   * read).
   */
  private pruneReads(meta: MetaRow, positions: readonly number[]): Key[] {
    const keys: Key[] = [...meta.consumers, ...(meta.registering ?? [])]
      .filter((consumer) => !this.consumers.has(consumer))
      .map((consumer) => this.layout.consumer(consumer));
    for (const position of positions) for (const consumer of meta.consumers) keys.push(this.layout.unfinished(consumer, position));
    return keys;
  }

  /** The scan of `prune(now, limit)`: delivered events whose window has passed at `now`. */
  private pruneScan(now: number, limit: number): ScanRequest {
    const prefix = this.layout.deliveredAll();
    return { range: { prefix, upper: [...prefix, now - this.capacity.retainAcknowledgedMs, TOP] }, options: { limit } };
  }

  /** Mark an event delivered to every consumer (prunable once its window passed). */
  private markDelivered(event: UsageEvent, position: number): void {
    this.tx.put(this.layout.delivered(event.observedAt, position), 0);
    this.sweptThrough = null;
  }

  /**
   * Make room for `needed` more events before an append at `now`, or refuse
   * it having deleted nothing. `spared`: a stored event the caller counts as
   * gone already (it deletes it once the append is accepted), so not one to
   * reclaim. Delivered events go first (in `x` order:
   * observed first, then appended first), then, under `drop_oldest`, drop
   * candidates (in `o` order: oldest position first), in flight or not, each
   * drop counted in `dropped`. A consumer holding a dropped event in flight
   * at `now` may still be working on it: its key is held for it until that
   * lease's end (the `g` rows, see `deleteEvent`).
   *
   * Whether enough can go is decided before anything is deleted: a refusal
   * returns (it does not throw), so the caller may go on in the same
   * transaction (`appendBatch` records it and commits the rest), and a
   * refused append must change nothing. `needed` is more than one only when
   * the journal holds more than its `maxEvents` (its data was written under a
   * larger one); each scan reads at most what is needed, so a full journal
   * reads as before: one entry.
   */
  private async makeRoom(needed: number, now: number, spared?: number): Promise<AtCapacityError | null> {
    // `spared` (an event the caller deletes itself, counted as gone) is never one of the reclaimed.
    const candidates = await this.tx.scan({ prefix: this.layout.deliveredAll() }, { limit: needed + (spared === undefined ? 0 : 1) });
    const delivered = candidates.filter((entry) => lastPart(entry.key) !== spared).slice(0, needed);
    const open: Entry[] = [];
    if (delivered.length < needed && this.capacity.policy === "drop_oldest") {
      // Building the index writes only rows every later drop_oldest journal keeps anyway: no trace of a refusal.
      if (!(await this.openIndexed())) await this.buildOpenIndex();
      open.push(...(await this.tx.scan({ prefix: this.layout.openAll() }, { limit: needed - delivered.length })));
    }
    if (delivered.length + open.length < needed) {
      // What the journal would retain had it given up all it could: none of it delivered, none of it droppable.
      return new AtCapacityError((await this.meta()).stored - (spared === undefined ? 0 : 1) - delivered.length - open.length, this.capacity);
    }
    // The two sets do not meet (`o` holds no delivered event), and deleting an event adds no entry to either.
    for (const entry of delivered) await this.deleteEvent(lastPart(entry.key), null);
    for (const entry of open) await this.deleteEvent(lastPart(entry.key), null, undefined, now);
    if (open.length > 0) this.setMeta({ dropped: (await this.meta()).dropped + open.length });
    return null;
  }

  /** Append one checked event at `now`: the outcome, or the error that refused it (having written nothing). */
  async append(event: UsageEvent, now: number): Promise<AppendResult | JournalError> {
    const known = await this.positionOf(event.id);
    if (known !== undefined) {
      const stored = await this.eventAt(known);
      // Past its window and delivered to all, the stored event is as good as pruned (pruning runs in bounded
      // steps, so it may not have come to it yet): its id is forgotten, and this append is a new event.
      if (!(await this.prunableAt(stored, known, now))) {
        if (!isSameFact(stored, event)) return new EventConflictError(event.id);
        return { status: "already_present", position: known };
      }
    }
    // The forgotten event's room counts as free, but it goes only once the append is sure to be accepted:
    // a refused append changes nothing, also inside an appendBatch that commits the others.
    const stored = (await this.meta()).stored - (known === undefined ? 0 : 1);
    if (stored >= this.capacity.maxEvents) {
      const refused = await this.makeRoom(stored - this.capacity.maxEvents + 1, now, known);
      if (refused) return refused;
    }
    if (known !== undefined) await this.deleteEvent(known, now);
    const meta = await this.meta();
    const position = meta.next;
    const { namespace, subject } = event.orderingKey;
    this.tx.put(this.layout.event(position), { position, event } satisfies EventRow);
    this.tx.put(this.layout.id(event.id), position);
    this.tx.put(this.layout.observed(event.observedAt, position), 0);
    if (meta.consumers.length > 0) this.tx.put(this.layout.keyEvent(namespace, subject, position), 0);
    if (meta.openIndexed !== false) this.tx.put(this.layout.open(position), 0);
    this.setMeta({ next: position + 1, stored: meta.stored + 1 });
    for (const consumer of meta.consumers) {
      const headKey = this.layout.head(consumer, namespace, subject);
      const fresh: UnfinishedRow = { attempts: 0, budgetBase: 0, availableAt: 0, history: [], observedAt: event.observedAt, slot: Slot.None };
      this.tx.put(this.layout.unfinishedByAge(consumer, event.observedAt, position), 0);
      if (await this.tx.get(headKey)) {
        this.tx.put(this.layout.unfinished(consumer, position), fresh);
      } else {
        // The key's only unfinished event: its active one (waiting out a hold on the key, if one runs).
        this.tx.put(headKey, { active: position, done: position - 1 } satisfies HeadRow);
        this.activate(consumer, position, Work.held(fresh, await this.holdOn(consumer, event.orderingKey, now)), null);
      }
    }
    return { status: "accepted", position };
  }

  // ---- consumers ----------------------------------------------------------------

  /**
   * One step of registering `consumer`, in this transaction: its walk goes
   * on (the first step starts it: the consumer is registering from then on,
   * see `layout.ts`) over up to `limit` stored events, in position order
   * from where the previous step stopped. Each event it passes joins the
   * consumer's backlog as an event appended since it registered would (the
   * key's active event when the consumer has no head row of its key), unless
   * it is prunable at `now` (delivered to every registered consumer, its
   * window passed; a null `now`, from an older caller without a time, prunes
   * nothing): then it is pruned, so the newcomer's backlog does not depend on
   * how far the bounded pruning of earlier calls came. One delivered to all
   * but inside its window is not any more (the newcomer has not finished it).
   * While no consumer is registered, the walk also builds the `k` index
   * (appends write it only while one is). Once the walk has passed the last
   * stored event, the consumer is registered, with nothing finished,
   * quarantined or leased, in this transaction. Answers how many events the
   * step walked and whether the consumer is registered now.
   */
  async registerStep(consumer: string, now: number | null, limit: number): Promise<{ walked: number; registered: boolean }> {
    const meta = await this.meta();
    const registering = meta.registering ?? [];
    if (!registering.includes(consumer)) {
      this.setMeta({ registering: [...registering, consumer] });
      this.consumers.set(consumer, { ...EMPTY_CONSUMER, registeredBelow: 0 });
    }
    const buildsKeyIndex = meta.consumers.length === 0;
    const openIndexed = meta.openIndexed !== false;
    // With no `x` entry at all (no consumer registered, say), no event needs looking up there.
    const anyDelivered = (await this.tx.scan({ prefix: this.layout.deliveredAll() }, { limit: 1, keysOnly: true })).length > 0;
    // Per ordering key (JSON keeps the pair apart whatever characters its parts hold): whether the consumer has
    // a head row of it. Read once per step, not kept across steps: a drop between them may delete a head row.
    const headed = new Map<string, boolean>();
    const keyText = ({ orderingKey }: UsageEvent): string => JSON.stringify([orderingKey.namespace, orderingKey.subject]);
    const prefix = this.layout.events();
    let next = (await this.consumerRow(consumer)).registeredBelow!;
    let walked = 0;
    let end = false;
    /** What the walk prunes, deleted after it (see {@link flushDeletes}); and those events' `x` entries. */
    const pruned: DeferredDeletes = { events: [], finished: new Map() };
    const prunedDelivered: Key[] = [];
    while (!end && walked < limit) {
      const ask = Math.min(CHUNK, limit - walked);
      const chunk = await this.tx.scan<EventRow>({ prefix, lower: [...prefix, next] }, { limit: ask });
      if (this.readsAhead && chunk.length > 0) {
        // What walking the chunk reads: the events' `x` entries and the heads of keys not known yet; and,
        // for the events whose window has passed (prunable if their `x` entry is there, which the same read
        // tells), what pruning one reads, as `prune` reads it ahead (their event rows are this scan's).
        const events = chunk.map((entry) => entry.value);
        const delivered = anyDelivered ? events.map(({ position, event }) => this.layout.delivered(event.observedAt, position)) : [];
        const heads = events
          .filter(({ event }) => !headed.has(keyText(event)))
          .map(({ event }) => this.layout.head(consumer, event.orderingKey.namespace, event.orderingKey.subject));
        const passed = anyDelivered && now !== null ? chunk.filter((entry) => this.windowPassed(entry.value.event, now)) : [];
        const pruneReads = passed.length > 0 ? this.pruneReads(meta, passed.map((entry) => entry.value.position)) : [];
        this.tx = await readAhead(
          this.tx,
          [...delivered, ...pruneReads],
          passed.map((entry) => [entry.key, entry.value] as const),
          [],
          [{ prefix: this.layout.headsOf(consumer), keys: heads }],
        );
      }
      for (const entry of chunk) {
        const { position, event } = entry.value;
        const { namespace, subject } = event.orderingKey;
        const deliveredKey = this.layout.delivered(event.observedAt, position);
        const delivered = anyDelivered && (await this.tx.get(deliveredKey)) !== undefined;
        if (delivered && now !== null && this.windowPassed(event, now)) {
          // As `prune` does: the event rows and finished rows go together after the walk, a range delete per
          // run of positions, so a step's writes do not grow with the number of consumers.
          await this.deleteEvent(position, now, pruned);
          prunedDelivered.push(deliveredKey);
          continue;
        }
        if (delivered) {
          this.tx.delete(deliveredKey);
          if (openIndexed) this.tx.put(this.layout.open(position), 0);
        }
        if (buildsKeyIndex) this.tx.put(this.layout.keyEvent(namespace, subject, position), 0);
        const row: UnfinishedRow = { attempts: 0, budgetBase: 0, availableAt: 0, history: [], observedAt: event.observedAt, slot: Slot.None };
        this.tx.put(this.layout.unfinishedByAge(consumer, event.observedAt, position), 0);
        const text = keyText(event);
        const headKey = this.layout.head(consumer, namespace, subject);
        if (headed.get(text) ?? (await this.tx.get(headKey)) !== undefined) {
          this.tx.put(this.layout.unfinished(consumer, position), row);
        } else {
          // The key's first event the consumer has (one it had before went with a drop): its active one.
          this.tx.put(headKey, { active: position, done: position - 1 } satisfies HeadRow);
          this.activate(consumer, position, row, null);
        }
        headed.set(text, true);
      }
      walked += chunk.length;
      if (chunk.length > 0) next = chunk[chunk.length - 1]!.value.position + 1;
      end = chunk.length < ask;
    }
    for (const key of prunedDelivered) this.tx.delete(key);
    this.flushDeletes(pruned);
    // A walk that stopped at its limit may have passed the last event too.
    if (!end) end = (await this.tx.scan({ prefix, lower: [...prefix, next] }, { limit: 1, keysOnly: true })).length === 0;
    if (end) {
      const current = await this.meta();
      const others = (current.registering ?? []).filter((other) => other !== consumer);
      const { registering: _done, ...rest } = current;
      this.metaRow = { ...rest, consumers: [...current.consumers, consumer], ...(others.length > 0 ? { registering: others } : {}) };
      this.metaDirty = true;
      this.consumers.set(consumer, { ...EMPTY_CONSUMER });
    } else {
      this.consumers.set(consumer, { ...EMPTY_CONSUMER, registeredBelow: next });
    }
    this.dirtyConsumers.add(consumer);
    return { walked, registered: end };
  }

  /**
   * Move the consumer's leases that ran out, and waits that ended, back to
   * their keys; and, when the claimer's clock went back (see
   * `ConsumerRow.claimedThrough`), the leases claimed after `now`.
   */
  async sweep(consumer: string, now: number): Promise<void> {
    await this.forgetHolds(consumer, now);
    if (await this.clockWentBack(consumer, now)) await this.lapseLeasesClaimedAfter(consumer, now);
    const leasedPrefix = this.layout.leasedAll(consumer);
    const expired = await this.tx.scan({ prefix: leasedPrefix, upper: [...leasedPrefix, now, TOP] });
    for (const entry of expired) {
      const position = lastPart(entry.key);
      this.tx.delete(entry.key);
      await this.bump(consumer, { leased: -1 });
      const row = (await this.tx.get<UnfinishedRow>(this.layout.unfinished(consumer, position)))!;
      await this.reinstate(consumer, position, { ...row, history: expireLatest(row.history), slot: Slot.None }, now);
    }
    const waitingPrefix = this.layout.waitingAll(consumer);
    const ended = await this.tx.scan({ prefix: waitingPrefix, upper: [...waitingPrefix, now, TOP] });
    for (const entry of ended) {
      const position = lastPart(entry.key);
      this.tx.delete(entry.key);
      const row = (await this.tx.get<UnfinishedRow>(this.layout.unfinished(consumer, position)))!;
      await this.reinstate(consumer, position, { ...row, slot: Slot.None }, now);
    }
  }

  /**
   * Whether a claim of `consumer` at `now` may find leases claimed after
   * `now` + {@link CLOCK_BACK_TOLERANCE_MS}: the consumer's latest leasing
   * claim was later than that, or its row predates `claimedThrough` and it
   * holds leases (looked at once: the scan sets the field).
   */
  private async clockWentBack(consumer: string, now: number): Promise<boolean> {
    const row = await this.consumerRow(consumer);
    return row.claimedThrough === undefined ? row.leased > 0 : row.claimedThrough > now + CLOCK_BACK_TOLERANCE_MS;
  }

  /**
   * The claimer's clock went back: every lease of the consumer claimed more
   * than {@link CLOCK_BACK_TOLERANCE_MS} after `now` lapses (its attempt is
   * marked expired at `now`, and its event goes back to its key, as a lease
   * that ran out does), and `claimedThrough` becomes the latest claim time
   * of the leases left. One scan of the consumer's leases that run past
   * `now`: only when the clock went back.
   */
  private async lapseLeasesClaimedAfter(consumer: string, now: number): Promise<void> {
    const leasedPrefix = this.layout.leasedAll(consumer);
    const running = await this.tx.scan({ prefix: leasedPrefix, lower: [...leasedPrefix, now, TOP], lowerOpen: true });
    let through = now;
    for (const entry of running) {
      const position = lastPart(entry.key);
      const row = (await this.tx.get<UnfinishedRow>(this.layout.unfinished(consumer, position)))!;
      const last = latest(row.history)!;
      if (last.claimedAt <= now + CLOCK_BACK_TOLERANCE_MS) {
        through = Math.max(through, last.claimedAt);
        continue;
      }
      this.tx.delete(entry.key);
      await this.bump(consumer, { leased: -1 });
      await this.reinstate(consumer, position, { ...row, history: withOutcome(row.history, { kind: "expired", at: now }), slot: Slot.None }, now);
    }
    this.consumers.set(consumer, { ...(await this.consumerRow(consumer)), claimedThrough: through });
    this.dirtyConsumers.add(consumer);
  }

  /**
   * At least as many events as a claim at `now` could lease, capped at
   * `limit`, reading only: the consumer's ready entries plus its leases and
   * waits that are due at `now` (what that claim's {@link sweep} puts back).
   * Every active event of a key sits in exactly one of the three indexes and
   * a claim leases at most one event per key, so the count never falls short
   * of what the claim finds; it may exceed it (a due lease out of attempts is
   * quarantined, a lease an earlier released event overtakes hands over).
   *
   * 0 for a consumer that is not registered, also while its registration is
   * under way (see {@link registerStep}): what its claim leases after
   * registering it is not counted (the caller registers a consumer before it
   * asks), and the ready entries its walk wrote so far are not claimable yet.
   */
  async claimableAtMost(consumer: string, now: number, limit: number): Promise<number> {
    if (!(await this.isRegistered(consumer))) return 0;
    let count = 0;
    // Leases claimed after `now` lapse in that claim when the clock went back: count every lease then.
    const allLeases = await this.clockWentBack(consumer, now);
    for (const [prefix, due] of [
      [this.layout.readyAll(consumer), false],
      [this.layout.leasedAll(consumer), !allLeases],
      [this.layout.waitingAll(consumer), true],
    ] as const) {
      if (count >= limit) break;
      const range = due ? { prefix, upper: [...prefix, now, TOP] } : { prefix };
      count += (await this.tx.scan(range, { limit: limit - count })).length;
    }
    return count;
  }

  /**
   * Lease up to `maxEvents` ready events, quarantining those out of attempts,
   * and stop before the first delivery that would take their total size
   * ({@link deliveryBytes}) over `maxBytes` (`Infinity`: no bound), unless it
   * is the first and `firstMustFit` is false.
   */
  async claim(consumer: string, maxEvents: number, leaseMs: number, now: number, maxBytes = Infinity, firstMustFit = false): Promise<Delivery[]> {
    const deliveries: Delivery[] = [];
    const readyPrefix = this.layout.readyAll(consumer);
    let after: number | null = null;
    let bytes = 0;
    let full = false;
    while (!full && deliveries.length < maxEvents) {
      const entries: Entry[] = await this.tx.scan(
        after === null ? { prefix: readyPrefix } : { prefix: readyPrefix, lower: [...readyPrefix, after], lowerOpen: true },
        { limit: Math.min(maxEvents - deliveries.length, pageWithin(maxBytes, bytes, deliveries.length)) },
      );
      if (entries.length === 0) break;
      // Each delivery reads its unfinished row and its event: read them for the whole page at once.
      if (this.readsAhead && entries.length > 1) {
        this.tx = await readAhead(
          this.tx,
          entries.flatMap((entry) => [this.layout.unfinished(consumer, lastPart(entry.key)), this.layout.event(lastPart(entry.key))]),
        );
      }
      // The ready entries claimed from this page: its first ones, every entry
      // from the first to the last of them (the loop stops at a quarantine,
      // the only step that writes a ready entry, and that one lies after them).
      const claimed: Key[] = [];
      for (const entry of entries) {
        const position = lastPart(entry.key);
        after = position;
        const row = (await this.tx.get<UnfinishedRow>(this.layout.unfinished(consumer, position)))!;
        const event = await this.eventAt(position);
        if (row.attempts - row.budgetBase >= this.capacity.maxDeliveryAttempts) {
          // Out of attempts: quarantine instead of redelivering. Its key moves
          // on, possibly to an event just after `position`, so scan again.
          await this.quarantineUnfinished(consumer, event, position, row, "attempts_exhausted", now, now);
          break;
        }
        const attempt = row.attempts + 1;
        const leaseExpiresAt = now + leaseMs;
        const delivery: Delivery = { id: { consumer: consumer as Delivery["id"]["consumer"], event: event.id, attempt }, event, leaseExpiresAt };
        if (maxBytes !== Infinity) {
          const size = deliveryBytes(delivery);
          if ((deliveries.length > 0 || firstMustFit) && bytes + size > maxBytes) {
            full = true;
            break;
          }
          bytes += size;
        }
        claimed.push(entry.key);
        this.tx.put(this.layout.leased(consumer, leaseExpiresAt, position), 0);
        this.tx.put(this.layout.unfinished(consumer, position), {
          ...row,
          attempts: attempt,
          availableAt: 0,
          history: withAttempt(row.history, { attempt, claimedAt: now, leaseExpiresAt, outcome: null }),
          slot: Slot.Leased,
        } satisfies UnfinishedRow);
        await this.bump(consumer, { leased: 1 });
        deliveries.push(delivery);
      }
      this.deleteListed(readyPrefix, claimed);
    }
    if (deliveries.length > 0) {
      const row = await this.consumerRow(consumer);
      if (row.claimedThrough === undefined || row.claimedThrough < now) this.consumers.set(consumer, { ...row, claimedThrough: now });
    }
    return deliveries;
  }

  // ---- verdicts ----------------------------------------------------------------

  /** Acknowledge an unfinished event (gates already passed). */
  async ackUnfinished(consumer: string, event: UsageEvent, position: number, row: UnfinishedRow, now: number): Promise<void> {
    const history = inFlightAt(row, now) ? withOutcome(row.history, { kind: "acked", at: now }) : row.history;
    await this.clearSlot(consumer, position, row, event.orderingKey);
    this.dropUnfinished(consumer, position, row);
    this.tx.put(this.layout.finished(consumer, position), { status: "acked", history } satisfies FinishedRow);
    await this.bump(consumer, { finished: 1 });
    // Unfinished by this consumer, it was open or held; delivered to all now, it is neither.
    if (await this.othersFinished(position, consumer)) {
      if (await this.openIndexed()) this.tx.delete(this.layout.open(position));
      this.markDelivered(event, position);
    }
    await this.leftBacklog(consumer, event, position, now);
  }

  /**
   * Quarantine an unfinished event. `verdictAt` is when the consumer gave the
   * verdict (it marks a running attempt), `at` the quarantine time.
   */
  async quarantineUnfinished(
    consumer: string,
    event: UsageEvent,
    position: number,
    row: UnfinishedRow,
    reason: PoisonReason,
    at: number,
    verdictAt: number,
  ): Promise<void> {
    const history = inFlightAt(row, verdictAt) ? withOutcome(row.history, { kind: "quarantined", at, reason }) : row.history;
    await this.clearSlot(consumer, position, row, event.orderingKey);
    this.dropUnfinished(consumer, position, row);
    this.tx.put(this.layout.quarantined(consumer, position), {
      reason,
      quarantinedAt: at,
      history,
      attempts: row.attempts,
      observedAt: row.observedAt,
    } satisfies QuarantineRow);
    await this.bump(consumer, { quarantined: 1 });
    if (await this.openIndexed()) this.tx.delete(this.layout.open(position)); // a quarantined event is never a drop candidate
    await this.leftBacklog(consumer, event, position, at);
  }

  /** Move the running lease of the current attempt to `until`. */
  extendLease(consumer: string, position: number, row: UnfinishedRow, until: number): void {
    const last = latest(row.history)!;
    this.tx.delete(this.layout.leased(consumer, last.leaseExpiresAt, position));
    this.tx.put(this.layout.leased(consumer, until, position), 0);
    const history = row.history.slice();
    history[history.length - 1] = { ...last, leaseExpiresAt: until };
    this.tx.put(this.layout.unfinished(consumer, position), { ...row, history } satisfies UnfinishedRow);
  }

  /** End the current attempt early; claimable again from `availableAt`. */
  async nackCurrent(consumer: string, event: UsageEvent, position: number, row: UnfinishedRow, error: string, now: number, availableAt: number): Promise<void> {
    await this.clearSlot(consumer, position, row, event.orderingKey);
    const history = withOutcome(row.history, { kind: "nacked", at: now, error });
    await this.reinstate(consumer, position, { ...row, history, availableAt, slot: Slot.None }, now);
  }

  /** Operator release: the quarantined event is unfinished again, at its position. */
  async release(consumer: string, event: UsageEvent, position: number, row: QuarantineRow, now: number): Promise<void> {
    this.tx.delete(this.layout.quarantined(consumer, position));
    await this.bump(consumer, { quarantined: -1 });
    if ((await this.openIndexed()) && !(await this.othersQuarantined(position, consumer))) this.tx.put(this.layout.open(position), 0);
    const released: UnfinishedRow = {
      attempts: row.attempts,
      budgetBase: row.attempts,
      availableAt: 0,
      history: expireLatest(row.history),
      observedAt: row.observedAt,
      slot: Slot.None,
    };
    this.tx.put(this.layout.unfinishedByAge(consumer, row.observedAt, position), 0);
    const { namespace, subject } = event.orderingKey;
    const headKey = this.layout.head(consumer, namespace, subject);
    const head = await this.tx.get<HeadRow>(headKey);
    if (!head) {
      this.tx.put(headKey, { active: position, done: position - 1 } satisfies HeadRow);
      this.activate(consumer, position, Work.held(released, await this.holdOn(consumer, event.orderingKey, now)), now);
      return;
    }
    const done = Math.min(head.done, position - 1);
    const activeRow = (await this.tx.get<UnfinishedRow>(this.layout.unfinished(consumer, head.active)))!;
    if (position < head.active && activeRow.slot !== Slot.Leased) {
      // The active event is not in flight: the earlier, released event goes first.
      await this.clearSlot(consumer, head.active, activeRow, event.orderingKey);
      this.tx.put(this.layout.unfinished(consumer, head.active), { ...activeRow, slot: Slot.None });
      this.tx.put(headKey, { active: position, done } satisfies HeadRow);
      this.activate(consumer, position, Work.held(released, await this.holdOn(consumer, event.orderingKey, now)), now);
      return;
    }
    this.tx.put(headKey, { active: head.active, done } satisfies HeadRow);
    this.tx.put(this.layout.unfinished(consumer, position), released);
  }

  /** Operator discard: the quarantined event is finished without delivery. */
  async discard(consumer: string, event: UsageEvent, position: number, row: QuarantineRow): Promise<void> {
    this.tx.delete(this.layout.quarantined(consumer, position));
    this.tx.put(this.layout.finished(consumer, position), { status: "discarded", history: row.history } satisfies FinishedRow);
    await this.bump(consumer, { quarantined: -1, finished: 1 });
    if (await this.othersFinished(position, consumer)) this.markDelivered(event, position);
    else if ((await this.openIndexed()) && !(await this.othersQuarantined(position, consumer))) this.tx.put(this.layout.open(position), 0);
  }

  /** Record an operator action in the audit log, and in its per-event index. */
  async recordAudit(entry: Omit<AuditEntry, "seq">): Promise<void> {
    const meta = await this.meta();
    const seq = meta.auditSeq + 1;
    this.setMeta(meta.auditIndexedFrom === undefined ? { auditSeq: seq, auditIndexedFrom: seq } : { auditSeq: seq });
    this.tx.put(this.layout.audit(seq), { seq, ...entry } satisfies AuditEntry);
    this.tx.put(this.layout.auditOf(entry.requestId, seq), 0);
  }

  /**
   * Up to `limit` audit entries after `after` (a seq), oldest first: of one
   * event when `requestId` is given (from the per-event index, plus a walk of
   * the part of the log written before the index existed), else of all.
   */
  async auditEntries(after: number, limit: number, requestId?: string): Promise<AuditEntry[]> {
    const log = this.layout.auditAll();
    if (requestId === undefined) {
      return (await this.tx.scan<AuditEntry>({ prefix: log, lower: [...log, after], lowerOpen: true }, { limit })).map((entry) => entry.value);
    }
    const meta = await this.meta();
    const indexedFrom = meta.auditIndexedFrom ?? meta.auditSeq + 1;
    const found: AuditEntry[] = [];
    if (after + 1 < indexedFrom) {
      await this.walk<AuditEntry>({ prefix: log, lower: [...log, after], lowerOpen: true, upper: [...log, indexedFrom], upperOpen: true }, (entry) => {
        if (entry.value.requestId === requestId) found.push(entry.value);
        return found.length < limit;
      });
      if (found.length >= limit) return found;
    }
    const index = this.layout.auditOfAll(requestId);
    const from = Math.max(after, indexedFrom - 1);
    const seqs = await this.tx.scan({ prefix: index, lower: [...index, from], lowerOpen: true }, { limit: limit - found.length });
    for (const entry of seqs) found.push((await this.tx.get<AuditEntry>(this.layout.audit(lastPart(entry.key))))!);
    return found;
  }
}
