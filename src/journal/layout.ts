/**
 * How the journal lays itself out in an Engine: every key and every stored row.
 *
 * All keys of journal `name` start with `["j", name]`. Per event there is one
 * row in each of the global tables; per registered consumer and event exactly
 * one of `u` (unfinished), `f` (acked or discarded) and `q` (quarantined). Per
 * consumer and ordering key with unfinished events there is one `h` row naming
 * the key's *active* event, which sits in exactly one of the `r` (ready), `l`
 * (leased until) and `w` (waiting until) indexes. Claim reads `r` in position
 * order and sweeps the due parts of `l` and `w`, so its cost follows the batch
 * size, not the backlog.
 *
 * | key | value | what it is |
 * | --- | --- | --- |
 * | `m` | {@link MetaRow} | counters, consumers (registered and registering), next position |
 * | `e, pos` | {@link EventRow} | the event |
 * | `i, requestId` | position | idempotency index |
 * | `k, ns, subject, pos` | 0 | events of an ordering key in order (kept while a consumer is registered) |
 * | `t, observedAt, pos` | 0 | every stored event by when it was observed (the oldest for stats) |
 * | `x, observedAt, pos` | 0 | delivered to every consumer (prunable after the window) |
 * | `o, pos` | 0 | neither delivered to all nor quarantined by anyone (drop candidates; kept while `MetaRow.openIndexed`) |
 * | `c, consumer` | {@link ConsumerRow} | per-consumer counters (of a registering consumer: how far its walk came) |
 * | `u, consumer, pos` | {@link UnfinishedRow} | unfinished event of a consumer |
 * | `p, consumer, observedAt, pos` | 0 | the same unfinished events by when they were observed (the oldest pending for stats) |
 * | `f, consumer, pos` | {@link FinishedRow} | acked or discarded |
 * | `q, consumer, pos` | {@link QuarantineRow} | quarantined |
 * | `h, consumer, ns, subject` | {@link HeadRow} | the active event of a key |
 * | `r, consumer, pos` | 0 | active and claimable |
 * | `l, consumer, until, pos` | 0 | active and leased until `until` |
 * | `w, consumer, until, pos` | 0 | active and waiting (nack, or a hold) until `until` |
 * | `g, consumer, ns, subject` | number | drop_oldest's hold on a key: none of its events claimable by the consumer before this (kept while `MetaRow.holdsKept`) |
 * | `gt, consumer, until, ns, subject` | 0 | the same holds by their end, for the claim's sweep to forget the passed ones |
 * | `a, seq` | AuditEntry | operator audit log |
 * | `b, requestId, seq` | 0 | the audit entries of one event (from `MetaRow.auditIndexedFrom` on) |
 *
 * A consumer registers in bounded steps (`Work.registerStep`), one
 * transaction each, so that registering over a large journal never makes one
 * huge transaction: its registration walks the events in position order,
 * writing its `u` and `p` rows (and `h` and `r` for each key's first event)
 * as if it had been registered when each was appended, and it is a
 * registered consumer once the walk reached the end. Meanwhile it is listed
 * in `MetaRow.registering` and `ConsumerRow.registeredBelow` says how far
 * the walk came: it has rows of every stored event below that position and
 * of none from it on. Appends write no rows for it (the walk reaches them),
 * and deleting an event removes its rows only below that position. No `x`
 * entry is written while a consumer registers (it has finished nothing), so
 * nothing the others finish meanwhile is pruned or reclaimed; an event every
 * registered consumer had finished before keeps its `x` entry until the walk
 * reaches it, which prunes it if its window has passed and else deletes the
 * entry.
 *
 * Two indexes are kept only while something reads them, because every row
 * an append writes is a request on engines with round trips (IndexedDB):
 * - `k` serves consumers only (finding a key's next event). With no consumer
 *   registered no `k` row is written; the registration walk of the first
 *   consumer builds the index from the `e` rows it walks anyway.
 * - `o` serves the `drop_oldest` policy only. A journal whose meta row is
 *   created under `refuse` does not keep it (`openIndexed: false`); the first
 *   time a `drop_oldest` journal over the same data has to drop, it builds the
 *   index in that transaction and from then on every journal keeps it. A meta
 *   row without the field (written before the field existed) has the index.
 */
import type { Key } from "../engine.js";
import type { Attempt, PoisonReason, UsageEvent } from "./types.js";

/**
 * Where an event sits while it is its key's active event: in `l` (Leased), in
 * `w` (Waiting), otherwise in `r`. `None` and `Ready` both mean "neither
 * leased nor waiting": such an event is ready exactly when the key's head row
 * names it active. (Handing a key's turn to its next event then writes the
 * head and the ready entry, and not the event's row: `None` stays.)
 */
export const Slot = { None: 0, Ready: 1, Leased: 2, Waiting: 3 } as const;
export type Slot = (typeof Slot)[keyof typeof Slot];

export interface MetaRow {
  readonly version: 1;
  /** The position the next accepted event gets. */
  readonly next: number;
  /** Events stored now. */
  readonly stored: number;
  /** Events lost to drop_oldest, ever (kept whatever policy later journals over this data run under). */
  readonly dropped: number;
  /** Registered consumers, in registration order. */
  readonly consumers: readonly string[];
  /**
   * Consumers whose registration is under way (see the module comment and
   * `ConsumerRow.registeredBelow`), in the order they began: not registered
   * yet, so in none of `consumers`. Absent means none (data written before
   * the field existed has none).
   */
  readonly registering?: readonly string[];
  /** Last audit sequence number issued. */
  readonly auditSeq: number;
  /**
   * The first audit entry with a `b` row (the per-event index of the audit
   * log): 1 for a journal created with the index. Absent in data written
   * before it existed: no entry is indexed, and the first audit entry
   * written sets it to its own `seq`. Entries below it are found by walking
   * that part of the log, which no longer grows.
   */
  readonly auditIndexedFrom?: number;
  /** Whether the `o` index (drop candidates) is kept; absent means kept. */
  readonly openIndexed?: boolean;
  /**
   * Whether the `t` and `p` indexes (events and unfinished events by
   * observedAt) are kept; absent in data written before they existed: the
   * first writing transaction builds them and sets it.
   */
  readonly agesIndexed?: boolean;
  /**
   * Whether every consumer row counts finished events (see {@link ConsumerRow});
   * absent in data written before: the first writing transaction converts the
   * rows and sets it.
   */
  readonly countsFinished?: boolean;
  /**
   * Whether hold rows (`g`, `gt`) may exist: set by the first drop_oldest
   * drop of an event some consumer held in flight. While absent, nothing
   * reads them (a journal that never dropped such an event pays nothing).
   */
  readonly holdsKept?: boolean;
}

export interface EventRow {
  readonly position: number;
  readonly event: UsageEvent;
}

/**
 * A consumer's counters. Its unfinished events are the stored ones it has
 * neither finished nor quarantined (`MetaRow.stored - finished -
 * quarantined`): counting finished events rather than unfinished ones spares
 * an append the write of every consumer's row (an append changes `stored`
 * only). Rows written before `finished` existed hold `unfinished` instead;
 * the first writing transaction converts them (`MetaRow.countsFinished`).
 */
export interface ConsumerRow {
  /** Stored events this consumer acked or discarded (its `f` rows). */
  readonly finished: number;
  readonly quarantined: number;
  /** Entries in this consumer's `l` index (leases, expired or not). */
  readonly leased: number;
  /**
   * The latest `now` of a claim that leased events for this consumer: no
   * lease of the consumer was claimed later. A claim whose `now` is more than
   * `CLOCK_BACK_TOLERANCE_MS` (`./arguments.ts`) before it (the claimer's clock went back)
   * looks for leases claimed after its `now` and lapses them. Absent in rows
   * written before it existed (until the consumer's next claim that leases).
   */
  readonly claimedThrough?: number;
  /**
   * While the consumer registers (it is in `MetaRow.registering`): the
   * position its registration's walk reads next. It has rows (`u`, `p`, and
   * `h` and `r` for keys' active events) of every stored event below this
   * position, and none of the events from it on. Absent once registered.
   */
  readonly registeredBelow?: number;
}


export interface UnfinishedRow {
  /** Deliveries so far. */
  readonly attempts: number;
  /** `attempts` at the last release: the budget counts from here. */
  readonly budgetBase: number;
  /** Claimable from (after a nack); 0 when not delayed. */
  readonly availableAt: number;
  readonly history: readonly Attempt[];
  /** The event's observedAt (for the oldest pending age). */
  readonly observedAt: number;
  /** Where it sits when it is its key's active event (see {@link Slot}: `None` or `Ready` is ready when active). */
  readonly slot: Slot;
}

export interface FinishedRow {
  readonly status: "acked" | "discarded";
  readonly history: readonly Attempt[];
}

export interface QuarantineRow {
  readonly reason: PoisonReason;
  readonly quarantinedAt: number;
  readonly history: readonly Attempt[];
  /** Kept so a release restores the budget arithmetic. */
  readonly attempts: number;
  readonly observedAt: number;
}

export interface HeadRow {
  /** Position of the key's active event. */
  readonly active: number;
  /** Every event of the key at or below this position is finished for the consumer. */
  readonly done: number;
}

/** Larger than any position or time: the open end of a numeric key range. */
export const TOP = Number.MAX_VALUE;

/** The key builders of one journal. */
export class Layout {
  readonly root: Key;
  constructor(name: string) {
    this.root = ["j", name];
    this.name = name;
  }
  private readonly name: string;
  meta(): Key {
    return ["j", this.name, "m"];
  }
  event(pos: number): Key {
    return ["j", this.name, "e", pos];
  }
  events(): Key {
    return ["j", this.name, "e"];
  }
  id(requestId: string): Key {
    return ["j", this.name, "i", requestId];
  }
  ids(): Key {
    return ["j", this.name, "i"];
  }
  keyEvent(ns: string, subject: string, pos: number): Key {
    return ["j", this.name, "k", ns, subject, pos];
  }
  keyEvents(ns?: string, subject?: string): Key {
    return ns === undefined ? ["j", this.name, "k"] : ["j", this.name, "k", ns, subject ?? ""];
  }
  observed(observedAt: number, pos: number): Key {
    return ["j", this.name, "t", observedAt, pos];
  }
  observedAll(): Key {
    return ["j", this.name, "t"];
  }
  unfinishedByAge(c: string, observedAt: number, pos: number): Key {
    return ["j", this.name, "p", c, observedAt, pos];
  }
  unfinishedByAgeAll(c: string): Key {
    return ["j", this.name, "p", c];
  }
  delivered(observedAt: number, pos: number): Key {
    return ["j", this.name, "x", observedAt, pos];
  }
  deliveredAll(): Key {
    return ["j", this.name, "x"];
  }
  open(pos: number): Key {
    return ["j", this.name, "o", pos];
  }
  openAll(): Key {
    return ["j", this.name, "o"];
  }
  consumer(c: string): Key {
    return ["j", this.name, "c", c];
  }
  unfinished(c: string, pos: number): Key {
    return ["j", this.name, "u", c, pos];
  }
  unfinishedAll(c: string): Key {
    return ["j", this.name, "u", c];
  }
  finished(c: string, pos: number): Key {
    return ["j", this.name, "f", c, pos];
  }
  quarantined(c: string, pos: number): Key {
    return ["j", this.name, "q", c, pos];
  }
  quarantinedAll(c: string): Key {
    return ["j", this.name, "q", c];
  }
  headsOf(c: string): Key {
    return ["j", this.name, "h", c];
  }
  head(c: string, ns: string, subject: string): Key {
    return ["j", this.name, "h", c, ns, subject];
  }
  ready(c: string, pos: number): Key {
    return ["j", this.name, "r", c, pos];
  }
  readyAll(c: string): Key {
    return ["j", this.name, "r", c];
  }
  leased(c: string, until: number, pos: number): Key {
    return ["j", this.name, "l", c, until, pos];
  }
  leasedAll(c: string): Key {
    return ["j", this.name, "l", c];
  }
  waiting(c: string, until: number, pos: number): Key {
    return ["j", this.name, "w", c, until, pos];
  }
  waitingAll(c: string): Key {
    return ["j", this.name, "w", c];
  }
  hold(c: string, ns: string, subject: string): Key {
    return ["j", this.name, "g", c, ns, subject];
  }
  holdEnd(c: string, until: number, ns: string, subject: string): Key {
    return ["j", this.name, "gt", c, until, ns, subject];
  }
  holdEnds(c: string): Key {
    return ["j", this.name, "gt", c];
  }
  audit(seq: number): Key {
    return ["j", this.name, "a", seq];
  }
  auditOf(requestId: string, seq: number): Key {
    return ["j", this.name, "b", requestId, seq];
  }
  auditOfAll(requestId: string): Key {
    return ["j", this.name, "b", requestId];
  }
  auditAll(): Key {
    return ["j", this.name, "a"];
  }
}
