/**
 * The ledger-backed event queue: the queue's state as a projection of a
 * ledger (`event-queue.lean.txt`: "持久性不在本模块（Ledger 已是历史）").
 *
 * Every call that changes the queue (each enqueue, whatever its outcome, and
 * each consume that hands out an item) is appended to the ledger as one
 * record BEFORE it takes effect in memory, so a failed append changes
 * nothing in memory, and replaying the ledger rebuilds exactly the queue, its
 * remembered keys and its counters. Sheds and duplicates are journaled too:
 * their `now` drives eviction of remembered keys, and without them a rebuilt
 * queue could remember keys the live one had forgotten.
 *
 * Calls on one instance run one at a time. Appends are compare-and-swap on
 * the ledger's tip through `appendDefinite` (so a networked ledger's
 * ambiguous append is resolved by reading the record back); when another
 * writer got there first, the instance replays the new records and decides
 * again. `appendDefinite` takes a record already at the position with the
 * same bytes for its own, so every record carries a random nonce: two
 * instances that decide the same thing at once (consume item 7, a duplicate
 * of key k) still write different bytes, and the loser replays the winner's
 * record and decides again instead of taking it for its own (which would
 * hand item 7 out twice, or count one duplicate for two calls). The ledger
 * grows with every call; compaction is not part of this module.
 *
 * An instance reads and writes one life of its ledger: the one its opening
 * replay read (see `Ledger.read`'s `life`). Every later read and every append
 * is made in that life (an append given `life` lands only while the ledger is
 * in it), because a queue whose ledger was deleted (purged) is gone: its
 * items must not be handed out, and the records a new life has, from another
 * instance, are another queue (the tip cannot tell them apart, and may even
 * be back where the old instance left it). So once an instance finds the
 * ledger deleted since it read it, it writes nothing more, and that call and
 * every later one (a consume of an item held for it too) reject with
 * {@link QueueReplayError} (its `cause` a `RecordNotFoundError`); its
 * `stats()` and `len()` stay those of the life it read. Reopen the queue to
 * read the ledger as it is now.
 *
 * Delivery is at most once, and an item is lost only in the window every
 * at-most-once queue has. A consume's record is the item's delivery: once it
 * is in the ledger the item is consumed, for this instance, any other and any
 * replay, and it is never handed out again. So the record of a call that
 * failed must still reach a consumer:
 * - An append whose outcome is unknown (`appendDefinite` threw
 *   `AppendVerifyError`: the append was ambiguous, e.g. a reply lost by a
 *   networked ledger, and the read that would resolve it failed or found
 *   nothing) is resolved by reading the ledger again, up to
 *   {@link VERIFY_READS} times. If the record is this call's, the call
 *   succeeds with its outcome (a consume returns its item, an enqueue its
 *   verdict, counted once); if another record holds the position, this one
 *   never can, and the call decides again.
 * - When the outcome is still unknown, the call rejects with that
 *   `AppendVerifyError` and the instance remembers a consume's record (its
 *   bytes, unique by the nonce, and its position). When the instance next
 *   reads that record from the ledger (its next enqueue or consume does: an
 *   append at that position conflicts), the item is held and handed to
 *   the next `consume()` of this instance, before any queued item: it
 *   reaches a consumer exactly once. A held item is already counted in
 *   `<lane>_consumed` and is not in `len()`, as a replay of the ledger says.
 *   An unknown enqueue needs no note: if its record landed, the item is
 *   queued, and the sender's retry is admitted as a duplicate.
 * - What cannot be covered: the record landed, the call could not learn so,
 *   and the instance is gone (a restart, or a queue opened per request)
 *   before it read the record. A reopened queue cannot tell that record from
 *   a consume whose item was handed out just before a crash (both are the
 *   last record of a writer that is gone; confirming delivery in a later
 *   record only moves the window to that record's own ambiguous append), and
 *   handing it out again could make the key reach the consumer twice, which
 *   the spec forbids. So such an item counts as consumed and is not handed
 *   out, the same outcome as a crash after a consume's append committed and
 *   before its caller received the item. A caller that must not lose items
 *   keeps the instance that saw `AppendVerifyError` and calls `consume()`
 *   again on it.
 *
 * Record format: a 4-byte big-endian header length, a UTF-8 JSON header
 * (`{"v":1,"op":"enqueue","outcome","key","now","nonce"}` or
 * `{"v":1,"op":"consume","id","nonce"}`), then the payload of an admitted
 * item. `nonce` is 32 hex digits, unique to its append; replay ignores it,
 * and records written before it existed (without one) replay as before.
 */
import { copyBytes } from "../storage/copy.js";
import { AppendVerifyError, ConflictError, RecordNotFoundError, StorageError } from "../storage/errors.js";
import { appendDefinite, type Ledger, type LedgerCursor } from "../storage/ledger.js";
import { validateName } from "../storage/names.js";
import { throwIfAborted, type CallOptions } from "../storage/options.js";
import { randomBytes, sameBytes, toHex, utf8Decode, utf8Encode } from "../storage/web.js";
import { checkCapacity, checkKey, checkLane, checkNow, checkPayload } from "./checks.js";
import { QueueState, type Admission, type EnqueueOutcome, type QueueItem, type QueueLane, type QueueStats } from "./state.js";

/**
 * A queue ledger holds a record this code cannot read (not a queue record, an
 * unknown version or op, a gap, or a consume of an item not queued). The
 * ledger is never written; a queue that was catching up keeps the records
 * before the bad one applied (its state is that prefix of the ledger), and
 * every later call fails again on the same record.
 *
 * Also thrown, with a {@link RecordNotFoundError} as `cause`, by an instance
 * whose ledger was deleted (and perhaps written again) since it read it: its
 * state is of a life of the ledger that is gone, so it writes nothing more,
 * and every later call of the instance fails with the same error. Reopen the
 * queue (`EventQueue.fromLedger`) to read the ledger as it is now.
 */
export class QueueReplayError extends StorageError {
  declare readonly code: "queue_replay";
  /** The queue's ledger. */
  readonly ledger: string;
  readonly seq: number;
  constructor(ledger: string, seq: number, problem: string, cause?: unknown) {
    super("queue_replay", `queue ledger ${JSON.stringify(ledger)} record ${seq}: ${problem}`, cause === undefined ? undefined : { cause });
    this.name = "QueueReplayError";
    this.ledger = ledger;
    this.seq = seq;
  }
}

/** How many times one call re-decides after losing a race to another writer. */
const MAX_RACE_RETRIES = 64;

/**
 * How many more times a call reads the ledger to resolve an append whose
 * outcome `appendDefinite` could not verify, before it rejects.
 */
const VERIFY_READS = 2;

type Header = { readonly v: 1; readonly op: "enqueue"; readonly outcome: EnqueueOutcome; readonly key: string; readonly now: number } | { readonly v: 1; readonly op: "consume"; readonly id: number };

/** A record's bytes, made unique to this append by a fresh random nonce in its header. */
function encode(header: Header, payload?: Uint8Array): Uint8Array {
  const text = utf8Encode(JSON.stringify({ ...header, nonce: toHex(randomBytes(16)) }));
  const body = payload ?? new Uint8Array();
  const bytes = new Uint8Array(4 + text.length + body.length);
  new DataView(bytes.buffer).setUint32(0, text.length);
  bytes.set(text, 4);
  bytes.set(body, 4 + text.length);
  return bytes;
}

function decode(bytes: Uint8Array): { header: Header; payload: Uint8Array } {
  if (bytes.length < 4) throw new Error("shorter than its header length");
  const length = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(0);
  if (4 + length > bytes.length) throw new Error("header longer than the record");
  const header = JSON.parse(utf8Decode(bytes.subarray(4, 4 + length))) as Header;
  // Records written before the nonce existed have none; it is never applied.
  const nonce: unknown = header !== null && typeof header === "object" ? (header as { nonce?: unknown }).nonce : undefined;
  const ok =
    header !== null &&
    typeof header === "object" &&
    header.v === 1 &&
    (nonce === undefined || typeof nonce === "string") &&
    ((header.op === "enqueue" && ["admitted", "duplicate", "shed"].includes(header.outcome) && typeof header.key === "string" && Number.isSafeInteger(header.now)) ||
      (header.op === "consume" && Number.isSafeInteger(header.id)));
  if (!ok) throw new Error("unknown record");
  return { header, payload: bytes.slice(4 + length) };
}

/** A record this instance appended without learning whether it landed. */
interface Unconfirmed {
  /** The only position it can hold (its append was conditional on the one before). */
  readonly seq: number;
  readonly bytes: Uint8Array;
  readonly op: Header["op"];
  /** Its call is still running (resolving it), rather than rejected. */
  live: boolean;
  /** Set when it is read back from the ledger: what applying it returned. */
  landed?: { readonly item: QueueItem | undefined };
}

/**
 * The durable {@link EventQueue}: the same rules, every call journaled to a
 * ledger first. Obtain one with `EventQueue.fromLedger`.
 */
export class DurableEventQueue<L extends QueueLane = QueueLane> {
  private state: QueueState;
  private tip = 0;
  private chain: Promise<unknown> = Promise.resolve();
  /** Records appended with an unknown outcome, until their position is filled (consumes only, once their call rejected). */
  private unconfirmed: Unconfirmed[] = [];
  /** Items whose consume record landed after its call rejected: the next `consume()` hands them out first. */
  private readonly held: QueueItem[] = [];
  /** The life of the ledger this instance reads and writes: the one its first read found. */
  private life: number | undefined;
  /** Set once the ledger is found to have left {@link life}: every later call fails with it. */
  private lost: QueueReplayError | undefined;

  private constructor(
    private readonly ledger: Ledger,
    readonly name: string,
    lane: L,
    capacity: number,
  ) {
    this.state = new QueueState(lane, capacity);
  }

  /** Open (and rebuild by replay) the queue journaled in ledger `name`. */
  static async open<L extends QueueLane>(ledger: Ledger, name: string, lane: L, capacity: number, options?: CallOptions): Promise<DurableEventQueue<L>> {
    const queue = new DurableEventQueue(ledger, validateName(name), checkLane(lane) as L, checkCapacity(capacity));
    await queue.catchUp(options);
    return queue;
  }

  get lane(): L {
    return this.state.lane as L;
  }

  get capacity(): number {
    return this.state.capacity;
  }

  /** The ledger sequence this queue's state reflects. */
  get position(): number {
    return this.tip;
  }

  /**
   * The instance's ledger was deleted since it read it (a read or append in
   * {@link life} found another life): from now on every call fails with the
   * returned error.
   */
  private lifeLost(cause: RecordNotFoundError): QueueReplayError {
    this.lost ??= new QueueReplayError(this.name, cause.seq, "the ledger was deleted since this queue read it; reopen the queue to read it as it is now", cause);
    return this.lost;
  }

  /** Apply the ledger's records after {@link position}, of the life read first only. */
  private async catchUp(options?: CallOptions): Promise<void> {
    let cursor: LedgerCursor;
    try {
      cursor = await this.ledger.read(this.name, this.tip + 1, this.life === undefined ? options : { ...options, life: this.life });
    } catch (error) {
      throw error instanceof RecordNotFoundError ? this.lifeLost(error) : error;
    }
    this.life ??= cursor.life;
    try {
      for (let record = await cursor.next(options); record !== undefined; record = await cursor.next(options)) {
        if (record.seq !== this.tip + 1) throw new QueueReplayError(this.name, record.seq, `expected record ${this.tip + 1}`);
        let decoded: { header: Header; payload: Uint8Array };
        try {
          decoded = decode(record.payload);
        } catch (error) {
          throw new QueueReplayError(this.name, record.seq, "not a queue record", error);
        }
        const item = this.apply(decoded.header, decoded.payload, record.seq);
        this.tip = record.seq;
        if (this.unconfirmed.length > 0) this.recognize(record.seq, record.payload, item);
      }
    } catch (error) {
      throw error instanceof RecordNotFoundError ? this.lifeLost(error) : error;
    } finally {
      await cursor.close();
    }
  }

  /**
   * Record `seq` was just applied: if it is one this instance appended
   * unconfirmed, its call (still running) gets its outcome, or (its call
   * rejected) a consume's item is held for the next `consume()`. Either way no
   * other record can land at `seq` now, so the notes for it are dropped.
   */
  private recognize(seq: number, bytes: Uint8Array, item: QueueItem | undefined): void {
    for (const note of this.unconfirmed) {
      if (note.seq !== seq || !sameBytes(note.bytes, bytes)) continue;
      if (note.live) note.landed = { item };
      else if (note.op === "consume" && item !== undefined) this.held.push(item);
    }
    this.forget(seq);
  }

  /** Drop the notes of positions up to `seq`, which are filled. */
  private forget(seq: number): void {
    if (this.unconfirmed.length > 0) this.unconfirmed = this.unconfirmed.filter((note) => note.seq > seq);
  }

  /**
   * `appendDefinite` could not tell whether `bytes` landed at `tip + 1`: read
   * the ledger again (up to {@link VERIFY_READS} times while reads fail).
   * Returns the outcome when the record is read back as this call's own;
   * otherwise the position was filled by another record (`tip` passed it) or
   * is still empty (the outcome stays unknown, and a consume's note stays,
   * for a later read to recognize).
   */
  private async resolve(bytes: Uint8Array, op: Header["op"], options?: CallOptions): Promise<{ readonly item: QueueItem | undefined } | undefined> {
    const note: Unconfirmed = { seq: this.tip + 1, bytes, op, live: true };
    this.unconfirmed.push(note);
    try {
      for (let read = 0; read < VERIFY_READS && this.tip < note.seq; read++) {
        try {
          await this.catchUp(options);
          break;
        } catch (error) {
          if (error === this.lost) throw error; // the ledger was deleted: whether it landed or not, that life is gone
          // Still unknown; the caller gets the AppendVerifyError.
        }
      }
      return note.landed;
    } finally {
      note.live = false;
      if (op !== "consume") this.unconfirmed = this.unconfirmed.filter((other) => other !== note);
    }
  }

  private apply(header: Header, payload: Uint8Array, seq: number): QueueItem | undefined {
    if (header.op === "enqueue") return this.state.applyEnqueue(header.outcome, header.key, payload, header.now);
    const item = this.state.applyConsume(header.id);
    if (item === undefined) throw new QueueReplayError(this.name, seq, `consumes item ${header.id}, which is not queued`);
    return item;
  }

  /** One call at a time per instance; none once the ledger left its life. */
  private serialize<T>(call: () => Promise<T>): Promise<T> {
    const result = this.chain.then(() => {
      if (this.lost !== undefined) throw this.lost;
      return call();
    });
    this.chain = result.catch(() => undefined);
    return result;
  }

  /**
   * Decide, journal, apply; on a lost race, replay the winner's records and
   * decide again. Each attempt's record has its own nonce, so a
   * `ConflictError` from `appendDefinite` means another writer's record is at
   * that position, even if it decided exactly what this attempt did. An
   * `AppendVerifyError` (outcome unknown) is resolved by {@link resolve}, and
   * rethrown when it cannot be.
   */
  private async journal<T>(decide: () => { header: Header; payload?: Uint8Array } | { done: T }, finish: (item: QueueItem | undefined, header: Header) => T, options?: CallOptions): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const decision = decide();
      if ("done" in decision) return decision.done;
      const bytes = encode(decision.header, decision.payload);
      const seq = this.tip + 1;
      try {
        // In the life this instance read only: a ledger deleted and rewritten back to this tip is another queue.
        await appendDefinite(this.ledger, this.name, this.tip, bytes, { ...options, life: this.life });
      } catch (error) {
        if (error instanceof RecordNotFoundError) throw this.lifeLost(error);
        if (error instanceof AppendVerifyError) {
          const landed = await this.resolve(bytes, decision.header.op, options);
          if (landed !== undefined) return finish(landed.item, decision.header);
          // Another record holds the position, so this one never will: decide again.
          if (this.tip >= seq && attempt < MAX_RACE_RETRIES) continue;
          throw error;
        }
        if (!(error instanceof ConflictError) || attempt >= MAX_RACE_RETRIES) throw error;
        await this.catchUp(options);
        continue;
      }
      this.tip = seq;
      this.forget(seq);
      return finish(this.apply(decision.header, decision.payload ?? new Uint8Array(), seq), decision.header);
    }
  }

  /**
   * As `EventQueue.enqueue` (the same argument checks, payload size included), journaled first.
   * Rejects (changing nothing) when the ledger append fails; with `AppendVerifyError` when its
   * outcome stays unknown after {@link VERIFY_READS} more reads (the item may be queued: a retry
   * of the same key is then admitted as a duplicate, and the item is queued once); with
   * {@link QueueReplayError} once the ledger was deleted since this instance read it (see the module comment).
   */
  async enqueue(key: string, payload: Uint8Array, now: number, options?: CallOptions): Promise<Admission> {
    checkKey(key);
    const bytes = copyBytes(checkPayload(payload));
    checkNow(now);
    throwIfAborted(options);
    return this.serialize(() =>
      this.journal(
        () => {
          const outcome = this.state.decideEnqueue(key, now);
          return { header: { v: 1, op: "enqueue", outcome, key, now }, ...(outcome === "admitted" ? { payload: bytes } : {}) };
        },
        (_item, header) => (header.op === "enqueue" && header.outcome === "shed" ? "shed" : "admit"),
        options,
      ),
    );
  }

  /**
   * As `EventQueue.consume`, journaled first: the item is handed out only
   * once its consume record is known to be in the ledger. When this instance
   * knows of no queued item it reads the ledger's newer records first, so
   * items another instance over the same ledger enqueued are handed out too
   * (a queued item it knows of is claimed by a conditional append, which
   * fails and re-reads when another instance wrote meanwhile).
   *
   * An item whose consume record landed while its call rejected (see the
   * module comment) is handed out by the next call, before any queued item.
   *
   * @throws {AppendVerifyError} when the append's outcome stays unknown after
   *   {@link VERIFY_READS} more reads; if its record did land, a later call on
   *   this instance hands the item out. Other ledger errors: nothing changed.
   * @throws {QueueReplayError} once the ledger was deleted since this instance
   *   read it (see the module comment): nothing is handed out or written.
   */
  async consume(options?: CallOptions): Promise<QueueItem | undefined> {
    throwIfAborted(options);
    return this.serialize(async () => {
      if (this.held.length === 0 && this.state.peek() === undefined) await this.catchUp(options);
      return this.journal<QueueItem | undefined>(
        () => {
          const held = this.held.shift();
          if (held !== undefined) return { done: { id: held.id, key: held.key, payload: copyBytes(held.payload) } };
          const head = this.state.peek();
          return head === undefined ? { done: undefined } : { header: { v: 1, op: "consume", id: head.id } };
        },
        (item) => item && { id: item.id, key: item.key, payload: copyBytes(item.payload) },
        options,
      );
    });
  }

  /**
   * The lane's counters as of the ledger records this instance has read (up
   * to {@link position}), not as of the ledger: calls another instance over
   * the same ledger journaled since are not counted until a later call of
   * this instance reads them (an enqueue or consume that appends does, and
   * so does a `consume()` that knows of nothing queued). Reads nothing.
   */
  stats(): QueueStats<L> {
    return this.state.stats() as QueueStats<L>;
  }

  /**
   * Items queued as of the ledger records this instance has read (up to
   * {@link position}), as {@link stats}: what another instance over the same
   * ledger enqueued or consumed since is not reflected until this one reads
   * it. Reads nothing, so a consumer loop should not poll it; see
   * {@link isEmpty}.
   */
  len(): number {
    return this.state.length;
  }

  /**
   * Whether no item is queued as of the ledger records this instance has read
   * (up to {@link position}). Reads nothing: it stays `true` while another
   * instance over the same ledger enqueues, and does not count an item held
   * for the next `consume()` (see the module comment). A consumer loop should
   * call {@link consume} instead, which reads the ledger's newer records
   * whenever this instance knows of nothing queued, and returns `undefined`
   * only when, as of that read, there is nothing to hand out.
   */
  isEmpty(): boolean {
    return this.state.length === 0;
  }
}
