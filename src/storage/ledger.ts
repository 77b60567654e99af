/**
 * Ledger: many append-only, compare-and-swap logs addressed by name
 * (`storage-primitives.go.txt`, `Ledger`).
 *
 * What it promises:
 * - `append(name, expected, payload)` commits `payload` as record
 *   `expected + 1` exactly when the tip is `expected` (CAS on the tip;
 *   `expected` 0 means the ledger must be empty); otherwise it fails with
 *   {@link ConflictError} and nothing lands. Sequences are 1-based,
 *   contiguous and immutable. The engine-backed ledger never throws
 *   {@link AmbiguousError}: its outcome is always definite.
 * - Absent == empty: a never-written or deleted ledger has tip 0, reads as
 *   drained, accepts `expected` 0, and deletes as a no-op.
 * - `read(name, from)` returns a cursor bounded at the tip seen when it was
 *   opened: it never tails later appends, and any `from` beyond that tip is
 *   a drained cursor, not an error. A cursor reads one life of its ledger:
 *   if the ledger is deleted (and perhaps written again) while the cursor is
 *   open, it never yields a record of the new life; it ends with
 *   {@link RecordNotFoundError} instead (see {@link LedgerCursor.next}).
 *   The cursor names that life (`life`); a later `read` given it (another
 *   request, another process) continues in the same life or ends the same
 *   way, so a reader that pages across calls never mixes two lives either.
 *   An `append` given a life lands only in that life (the tip alone cannot
 *   tell: a rewritten ledger may be back at the tip a writer read), and
 *   otherwise throws {@link RecordNotFoundError}, writing nothing.
 * - Payloads are copied in and copied out; zero-length payloads are legal.
 *
 * Layout: one engine row per record (`["s", store, "lr", name, seq]`); the
 * tip is the last record, found with a one-entry reverse scan, so there is no
 * second copy of it to disagree with. Beside them, the ledger's generation
 * (`["s", store, "lg", name]`, absent = 0): a delete of a non-empty ledger
 * bumps it and nothing removes it, and every page a cursor reads checks it in
 * the page's own transaction, so records of two lives never meet in one
 * cursor (a cursor reads a page per transaction, so it could not tell a
 * rewritten record from the old one by position alone). An append given a
 * life checks it in the append's transaction.
 */
import { clearRange, type Engine, type EngineTransaction } from "../engine.js";
import { copyBytes } from "./copy.js";
import { AmbiguousError, AppendVerifyError, ConflictError, InvalidArgumentError, RecordNotFoundError } from "./errors.js";
import { assertFence, checkFence, type LeaseFence } from "./fence.js";
import { storeLayout, type StoreLayout } from "./layout.js";
import { validateName } from "./names.js";
import { throwIfAborted, type CallOptions } from "./options.js";
import { checkCount, transact } from "./transaction.js";
import { isBytes, sameBytes } from "./web.js";

/** The largest ledger payload (1 MiB): one engine row, well under the 2 MB of a Durable Objects row. */
export const MAX_LEDGER_PAYLOAD_BYTES = 1024 * 1024;

/** Records a cursor fetches per engine transaction. */
const READ_PAGE = 256;

/** One ledger record. `payload` belongs to the caller. */
export interface LedgerRecord {
  readonly seq: number;
  readonly payload: Uint8Array;
}

/** Options of a ledger write: a signal, and optionally a lease the write is fenced by. */
export interface LedgerWriteOptions extends CallOptions {
  /** Commit only while this lease is held at this epoch (else {@link LeaseLostError}, nothing written). */
  readonly fence?: LeaseFence | undefined;
}

/** Options of {@link Ledger.append}. */
export interface LedgerAppendOptions extends LedgerWriteOptions {
  /**
   * Append only to this life of the ledger: the `life` of a cursor the
   * writer read it with. When the ledger has been deleted since (and perhaps
   * written again, even back to `expected`), the append throws
   * {@link RecordNotFoundError} (`seq` = `expected + 1`) and nothing lands.
   * A non-negative integer; absent appends to whatever life the ledger is in
   * now.
   */
  readonly life?: number | undefined;
}

/** Options of {@link Ledger.read}. */
export interface LedgerReadOptions extends CallOptions {
  /**
   * Continue a read of this life of the ledger: the `life` of a cursor opened
   * earlier (by another request or process). When the ledger has been
   * deleted since that cursor was opened, the read throws
   * {@link RecordNotFoundError} (`seq` = the first record it would have
   * returned) instead of returning records of the new life. A non-negative
   * integer; absent reads whatever life the ledger is in now.
   */
  readonly life?: number | undefined;
}

/**
 * A bounded, forward-only view of one ledger: the records from `from` up to
 * the tip seen when the cursor was opened. Also an async iterable (a `for
 * await` loop closes it when it ends or breaks).
 */
export interface LedgerCursor extends AsyncIterable<LedgerRecord> {
  /**
   * The life of the ledger this cursor reads: 0 until the ledger's first
   * delete that removed records, one more after each. Hand it to a later
   * {@link Ledger.read} (`options.life`) to page on from another call without
   * ever reading into a rewritten ledger (the HTTP API's `life` parameter).
   */
  readonly life: number;
  /**
   * The next record, or `undefined` once drained (Go's `io.EOF`) or closed.
   *
   * @throws {RecordNotFoundError} `{ name, seq }`, `seq` the record it would
   *   have yielded next, when the ledger was deleted (and perhaps written
   *   again) since the cursor was opened: a cursor never yields records of
   *   two lives of a ledger. Records it already fetched, all of the life it
   *   was opened on, may still come first; once thrown, every later call
   *   throws it again (until `close`).
   */
  next(options?: CallOptions): Promise<LedgerRecord | undefined>;
  /** Stop reading; idempotent. */
  close(): Promise<void>;
}

/** Many ledgers, addressed by name. */
export interface Ledger {
  /**
   * Commit `payload` as record `expected + 1` iff the tip is `expected`
   * (and, given `options.life`, the ledger is still in that life).
   * Resolves once committed (definitely); {@link ConflictError} when the tip
   * is not `expected`, {@link RecordNotFoundError} when the ledger left
   * `options.life` (definitely not committed). Networked implementations
   * may also throw {@link AmbiguousError}; see {@link appendDefinite}.
   */
  append(name: string, expected: number, payload: Uint8Array, options?: LedgerAppendOptions): Promise<void>;
  /**
   * A cursor over records `from`.. (the tip as of now). `from` 0 reads from
   * the start. The cursor ends with {@link RecordNotFoundError} if the ledger
   * is deleted while it reads (see {@link LedgerCursor.next}), and throws
   * {@link RecordNotFoundError} at once when `options.life` names a life the
   * ledger has left.
   *
   * @example
   * ```ts
   * // Page through a ledger across requests, never into a rewritten one.
   * const cursor = await ledger.read("orders/acme", 0);
   * const first = await cursor.next();
   * await cursor.close();
   * const later = await ledger.read("orders/acme", (first?.seq ?? 0) + 1, { life: cursor.life });
   * ```
   */
  read(name: string, from: number, options?: LedgerReadOptions): Promise<LedgerCursor>;
  /** The last sequence number, 0 for an empty (or absent) ledger. */
  tip(name: string, options?: CallOptions): Promise<number>;
  /**
   * Remove the ledger; absent is a no-op success. A later append starts again
   * at `expected` 0. Cursors open on the removed ledger end with
   * {@link RecordNotFoundError} rather than read on into a new one.
   * Networked implementations may throw {@link AmbiguousError} (`operation`
   * `"ledger.delete"`) when the delete got no answer: it may have landed.
   */
  delete(name: string, options?: LedgerWriteOptions): Promise<void>;
}

/** Options of {@link createLedger}. */
export interface LedgerOptions {
  /** The store's name (storage name grammar): keys live under `["s", store]`. */
  readonly store: string;
  /** Read when checking a write's lease fence. Defaults to `Date.now`. */
  readonly clock?: () => number;
}

/**
 * A {@link Ledger} over an Engine. Usually reached through `createStore`.
 *
 * @example
 * ```ts
 * const ledger = createStore(memoryEngine(), { name: "app" }).ledger;
 * await ledger.append("orders/acme", 0, new TextEncoder().encode("first"));
 * await ledger.append("orders/acme", 1, new TextEncoder().encode("second"));
 * for await (const record of await ledger.read("orders/acme", 1)) console.log(record.seq);
 * ```
 */
export function createLedger(engine: Engine, options: LedgerOptions): Ledger {
  return new EngineLedger(engine, storeLayout(options), options.clock ?? Date.now);
}

async function tipOf(tx: EngineTransaction, layout: StoreLayout, name: string): Promise<number> {
  const last = await tx.scan({ prefix: layout.ledgerRecords(name) }, { reverse: true, limit: 1 });
  const seq = last[0]?.key[last[0].key.length - 1];
  return typeof seq === "number" ? seq : 0;
}

/** The ledger's generation: 0 until its first delete (also for ledgers written before generations existed). */
async function generationOf(tx: EngineTransaction, layout: StoreLayout, name: string): Promise<number> {
  const generation = await tx.get<number>(layout.ledgerGeneration(name));
  return typeof generation === "number" ? generation : 0;
}

/**
 * What a ledger cursor is opened on, read in one transaction: the tip it is
 * bounded at and the generation (the life of the ledger) it reads.
 *
 * @internal
 */
export interface LedgerReadBound {
  readonly tip: number;
  readonly generation: number;
}

/**
 * The ledger reads of one store over an engine, below the {@link Ledger}
 * interface: what the engine ledger's cursor is made of, and what a remote
 * server (the Durable Objects `StoreObject`) uses to serve a remote cursor's
 * pages, each checked against the generation the remote cursor was opened on.
 *
 * @internal
 */
export interface LedgerReader {
  /** The tip and generation of `name` now, in one transaction. */
  bound(name: string, options?: CallOptions): Promise<LedgerReadBound>;
  /**
   * A cursor over records `from`..`bound.tip` of the life `bound.generation`:
   * a page per transaction, each checking the generation first.
   */
  cursor(name: string, from: number, bound: LedgerReadBound): LedgerCursor;
}

/** @internal See {@link LedgerReader}. */
export function ledgerReader(engine: Engine, options: LedgerOptions): LedgerReader {
  return engineLedgerReader(engine, storeLayout(options));
}

function engineLedgerReader(engine: Engine, layout: StoreLayout): LedgerReader {
  return {
    async bound(name, options) {
      validateName(name);
      return transact(engine, "readonly", "ledger.read", options, async (tx) => ({
        tip: await tipOf(tx, layout, name),
        generation: await generationOf(tx, layout, name),
      }));
    },
    cursor(name, from, bound) {
      validateName(name);
      checkCount("from", from, 0);
      // Each page is its own transaction; payloads are copied out of the engine.
      return new PagedLedgerCursor(name, Math.max(from, 1), bound, READ_PAGE, (first, last, pageOptions) =>
        transact(engine, "readonly", "ledger.read", pageOptions, async (tx) => {
          // Deleted since the cursor was opened: the records from `first` on belong to another life (or none).
          if ((await generationOf(tx, layout, name)) !== bound.generation) throw new RecordNotFoundError(name, first);
          const entries = await tx.scan<Uint8Array>({ lower: layout.ledgerRecord(name, first), upper: layout.ledgerRecord(name, last) });
          return entries.map((entry) => ({ seq: entry.key[entry.key.length - 1] as number, payload: copyBytes(entry.value) }));
        }),
      );
    },
  };
}

/**
 * The `life` of read or append options, checked: a non-negative integer, or undefined when absent.
 *
 * @internal
 */
export function checkLife(options: LedgerReadOptions | LedgerAppendOptions | undefined): number | undefined {
  const life = options?.life;
  if (life !== undefined) checkCount("life", life, 0);
  return life;
}

/**
 * `bound`, when the ledger is still in `life` (or no life was asked for);
 * else the {@link RecordNotFoundError} of a read from `from`.
 *
 * @internal
 */
export function boundOfLife(name: string, from: number, bound: LedgerReadBound, life: number | undefined): LedgerReadBound {
  if (life !== undefined && life !== bound.generation) throw new RecordNotFoundError(name, Math.max(from, 1));
  return bound;
}

function checkPayload(payload: unknown): Uint8Array {
  if (!isBytes(payload)) throw new InvalidArgumentError("payload", "must be a Uint8Array");
  if (payload.length > MAX_LEDGER_PAYLOAD_BYTES) {
    throw new InvalidArgumentError("payload", `is ${payload.length} bytes; a ledger record holds at most ${MAX_LEDGER_PAYLOAD_BYTES}`);
  }
  return payload;
}

class EngineLedger implements Ledger {
  private readonly reader: LedgerReader;

  constructor(
    private readonly engine: Engine,
    private readonly layout: StoreLayout,
    private readonly clock: () => number,
  ) {
    this.reader = engineLedgerReader(engine, layout);
  }

  async append(name: string, expected: number, payload: Uint8Array, options?: LedgerAppendOptions): Promise<void> {
    validateName(name);
    checkCount("expected", expected, 0);
    const copy = copyBytes(checkPayload(payload));
    const fence = checkFence(options?.fence);
    const life = checkLife(options);
    throwIfAborted(options);
    const now = this.clock();
    await transact(this.engine, "readwrite", "ledger.append", options, async (tx) => {
      await assertFence(tx, this.layout, fence, now);
      // Deleted since the writer read it: whatever the tip, record `expected + 1` would be another life's.
      if (life !== undefined && (await generationOf(tx, this.layout, name)) !== life) throw new RecordNotFoundError(name, expected + 1);
      if ((await tipOf(tx, this.layout, name)) !== expected) throw new ConflictError(name, expected);
      tx.put(this.layout.ledgerRecord(name, expected + 1), copy);
    });
  }

  async read(name: string, from: number, options?: LedgerReadOptions): Promise<LedgerCursor> {
    validateName(name);
    checkCount("from", from, 0);
    const life = checkLife(options);
    return this.reader.cursor(name, from, boundOfLife(name, from, await this.reader.bound(name, options), life));
  }

  async tip(name: string, options?: CallOptions): Promise<number> {
    validateName(name);
    return transact(this.engine, "readonly", "ledger.tip", options, (tx) => tipOf(tx, this.layout, name));
  }

  async delete(name: string, options?: LedgerWriteOptions): Promise<void> {
    validateName(name);
    const fence = checkFence(options?.fence);
    throwIfAborted(options);
    const now = this.clock();
    await transact(this.engine, "readwrite", "ledger.delete", options, async (tx) => {
      await assertFence(tx, this.layout, fence, now);
      if ((await tipOf(tx, this.layout, name)) === 0) return; // absent: a no-op (no cursor can be reading a life of it)
      // One range delete where the engine has it, rather than reading every record's payload to delete it.
      await clearRange(tx, { prefix: this.layout.ledgerRecords(name) });
      // A new life: cursors open on the old one end rather than read into the next.
      tx.put(this.layout.ledgerGeneration(name), (await generationOf(tx, this.layout, name)) + 1);
    });
  }
}

/**
 * A ledger cursor over pages: `readPage(first, last)` answers records from
 * `first` in sequence order (at most `last - first + 1`, possibly fewer), and
 * the cursor hands them out up to the bound fixed at open. `readPage` throws
 * {@link RecordNotFoundError} when the ledger is no longer the life the
 * cursor was opened on (the engine ledger checks its generation; a remote
 * client has the server check it). A record missing where the next one was
 * expected within the bound (which a ledger of one life never shows: records
 * are immutable and contiguous) ends the cursor the same way, so it never
 * hands out records past a hole. The error is sticky: later calls throw it
 * again. The engine ledger reads a page per transaction; a remote client
 * reads a page per call. Calls of `next` (also through the async iterator)
 * take turns: one that starts while another is still running waits for it,
 * so overlapping calls hand out each record once, in call order, then
 * `undefined`.
 *
 * @internal
 */
export class PagedLedgerCursor implements LedgerCursor {
  private buffer: LedgerRecord[] = [];
  private closed = false;
  private failure: RecordNotFoundError | null = null;
  /** Settles when the latest `next` call has: the next call starts after it (never rejects). */
  private turn: Promise<void> = Promise.resolve();
  /** The tip fixed at open: the last record this cursor hands out. */
  private readonly bound: number;
  readonly life: number;

  constructor(
    private readonly name: string,
    private nextSeq: number,
    opened: LedgerReadBound,
    private readonly pageSize: number,
    private readonly readPage: (first: number, last: number, options: CallOptions | undefined) => Promise<readonly LedgerRecord[]>,
  ) {
    this.bound = opened.tip;
    this.life = opened.generation;
  }

  async next(options?: CallOptions): Promise<LedgerRecord | undefined> {
    throwIfAborted(options);
    // Two calls filling at once would both read the page at the same `nextSeq` and hand its records out twice.
    const result = this.turn.then(() => this.nextInTurn(options));
    this.turn = result.then(
      () => undefined,
      () => undefined, // the caller gets the rejection from `result`; the next call only waits for it
    );
    return result;
  }

  private async nextInTurn(options: CallOptions | undefined): Promise<LedgerRecord | undefined> {
    throwIfAborted(options);
    if (this.closed) return undefined;
    if (this.buffer.length === 0 && this.nextSeq <= this.bound) await this.fill(options);
    if (this.closed) {
      this.buffer = []; // closed while the page was read: what it read is not handed out
      return undefined;
    }
    return this.buffer.shift();
  }

  private async fill(options: CallOptions | undefined): Promise<void> {
    if (this.failure !== null) throw this.failure;
    const first = this.nextSeq;
    let page: readonly LedgerRecord[];
    try {
      page = await this.readPage(first, Math.min(this.bound, first + this.pageSize - 1), options);
    } catch (error) {
      if (error instanceof RecordNotFoundError) this.failure = error;
      throw error;
    }
    let expected = first;
    for (const record of page) {
      if (record.seq !== expected || expected > this.bound) break;
      this.buffer.push(record);
      expected++;
    }
    if (expected === first) {
      // Nothing where `first` was expected, below the bound: the ledger changed under the cursor.
      this.failure = new RecordNotFoundError(this.name, first);
      throw this.failure;
    }
    // A short page goes on from where it ended (the next page finds any hole).
    this.nextSeq = expected;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.buffer = [];
  }

  [Symbol.asyncIterator](): AsyncIterator<LedgerRecord> {
    return {
      next: async () => {
        let record: LedgerRecord | undefined;
        try {
          record = await this.next();
        } catch (error) {
          await this.close(); // a `for await` loop does not call `return` when `next` throws
          throw error;
        }
        if (record === undefined) {
          await this.close();
          return { done: true, value: undefined };
        }
        return { done: false, value: record };
      },
      return: async () => {
        await this.close();
        return { done: true, value: undefined };
      },
    };
  }
}

/**
 * The record at `seq`, read through the public {@link Ledger} interface.
 *
 * @throws {RecordNotFoundError} when the ledger has no record at `seq`.
 */
export async function readRecord(ledger: Ledger, name: string, seq: number, options?: LedgerReadOptions): Promise<LedgerRecord> {
  checkCount("seq", seq, 1);
  const cursor = await ledger.read(name, seq, options);
  try {
    const record = await cursor.next(options);
    if (record === undefined || record.seq !== seq) throw new RecordNotFoundError(name, seq);
    return record;
  } finally {
    await cursor.close();
  }
}

/**
 * Append, and turn a {@link ConflictError} or {@link AmbiguousError} into a
 * definite answer by reading the record at `expected + 1`:
 * - it holds exactly `payload` → success (this append, or an identical one,
 *   landed: retrying an append is safe with it);
 * - it holds other bytes → {@link ConflictError} (definitely not ours);
 * - it is absent after a conflict → the original {@link ConflictError}
 *   (the tip is behind `expected`; nothing landed);
 * - it is absent after an ambiguous append, or it cannot be read →
 *   {@link AppendVerifyError} (fail closed: the outcome is unknown; `cause`
 *   is the read failure, or a {@link RecordNotFoundError}).
 *
 * Given `options.life`, the append lands only in that life, and the record
 * is read back in that life only (a ledger deleted since reads as absent).
 *
 * Identical bytes are taken for this append's own record whoever wrote
 * them, also after a definite conflict (a transport that retried an append
 * whose first try landed sees that conflict). So when another writer may
 * append the very same bytes at the same position, and it matters which
 * call's record it is (two writers deciding the same thing at once), make
 * every payload unique to its writer and call, e.g. with a random nonce in
 * it: otherwise both calls resolve, for one record. The ledger-backed event
 * queue does so.
 *
 * @example
 * ```ts
 * await appendDefinite(store.ledger, "orders/acme", tip, payload); // resolves iff record tip+1 is payload
 * ```
 */
export async function appendDefinite(ledger: Ledger, name: string, expected: number, payload: Uint8Array, options?: LedgerAppendOptions): Promise<void> {
  let failure: ConflictError | AmbiguousError;
  try {
    await ledger.append(name, expected, payload, options);
    return;
  } catch (error) {
    if (!(error instanceof ConflictError) && !(error instanceof AmbiguousError)) throw error;
    failure = error;
  }
  const seq = expected + 1;
  let record: LedgerRecord;
  try {
    record = await readRecord(ledger, name, seq, options);
  } catch (error) {
    if (error instanceof RecordNotFoundError && failure instanceof ConflictError) throw failure;
    throw new AppendVerifyError(name, seq, error);
  }
  if (sameBytes(record.payload, payload)) return;
  throw failure instanceof ConflictError ? failure : new ConflictError(name, expected);
}
