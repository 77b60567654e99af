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
 *   a drained cursor, not an error.
 * - Payloads are copied in and copied out; zero-length payloads are legal.
 *
 * Layout: one engine row per record (`["s", store, "lr", name, seq]`); the
 * tip is the last record, found with a one-entry reverse scan, so there is no
 * second copy of it to disagree with.
 */
import type { Engine, EngineTransaction } from "../engine.js";
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

/**
 * A bounded, forward-only view of one ledger: the records from `from` up to
 * the tip seen when the cursor was opened. Also an async iterable (a `for
 * await` loop closes it when it ends or breaks).
 */
export interface LedgerCursor extends AsyncIterable<LedgerRecord> {
  /** The next record, or `undefined` once drained (Go's `io.EOF`) or closed. */
  next(options?: CallOptions): Promise<LedgerRecord | undefined>;
  /** Stop reading; idempotent. */
  close(): Promise<void>;
}

/** Many ledgers, addressed by name. */
export interface Ledger {
  /**
   * Commit `payload` as record `expected + 1` iff the tip is `expected`.
   * Resolves once committed (definitely); {@link ConflictError} when the tip
   * is not `expected` (definitely not committed). Networked implementations
   * may also throw {@link AmbiguousError}; see {@link appendDefinite}.
   */
  append(name: string, expected: number, payload: Uint8Array, options?: LedgerWriteOptions): Promise<void>;
  /** A cursor over records `from`.. (the tip as of now). `from` 0 reads from the start. */
  read(name: string, from: number, options?: CallOptions): Promise<LedgerCursor>;
  /** The last sequence number, 0 for an empty (or absent) ledger. */
  tip(name: string, options?: CallOptions): Promise<number>;
  /** Remove the ledger; absent is a no-op success. A later append starts again at `expected` 0. */
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

function checkPayload(payload: unknown): Uint8Array {
  if (!isBytes(payload)) throw new InvalidArgumentError("payload", "must be a Uint8Array");
  if (payload.length > MAX_LEDGER_PAYLOAD_BYTES) {
    throw new InvalidArgumentError("payload", `is ${payload.length} bytes; a ledger record holds at most ${MAX_LEDGER_PAYLOAD_BYTES}`);
  }
  return payload;
}

class EngineLedger implements Ledger {
  constructor(
    private readonly engine: Engine,
    private readonly layout: StoreLayout,
    private readonly clock: () => number,
  ) {}

  async append(name: string, expected: number, payload: Uint8Array, options?: LedgerWriteOptions): Promise<void> {
    validateName(name);
    checkCount("expected", expected, 0);
    const copy = copyBytes(checkPayload(payload));
    const fence = checkFence(options?.fence);
    throwIfAborted(options);
    const now = this.clock();
    await transact(this.engine, "readwrite", "ledger.append", options, async (tx) => {
      await assertFence(tx, this.layout, fence, now);
      if ((await tipOf(tx, this.layout, name)) !== expected) throw new ConflictError(name, expected);
      tx.put(this.layout.ledgerRecord(name, expected + 1), copy);
    });
  }

  async read(name: string, from: number, options?: CallOptions): Promise<LedgerCursor> {
    validateName(name);
    checkCount("from", from, 0);
    const bound = await transact(this.engine, "readonly", "ledger.read", options, (tx) => tipOf(tx, this.layout, name));
    // Each page is its own transaction; payloads are copied out of the engine.
    return new PagedLedgerCursor(Math.max(from, 1), bound, READ_PAGE, async (first, last, pageOptions) => {
      const entries = await transact(this.engine, "readonly", "ledger.read", pageOptions, (tx) =>
        tx.scan<Uint8Array>({ lower: this.layout.ledgerRecord(name, first), upper: this.layout.ledgerRecord(name, last) }),
      );
      return entries.map((entry) => ({ seq: entry.key[entry.key.length - 1] as number, payload: copyBytes(entry.value) }));
    });
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
      for (const entry of await tx.scan({ prefix: this.layout.ledgerRecords(name) })) tx.delete(entry.key);
    });
  }
}

/**
 * A ledger cursor over pages: `readPage(first, last)` answers records from
 * `first` in sequence order (at most `last - first + 1`, possibly fewer), and
 * the cursor hands them out up to the bound fixed at open. A record missing
 * where the next one was expected (the ledger deleted, perhaps rewritten,
 * under the cursor) ends it. The engine ledger reads a page per transaction;
 * a remote client reads a page per call.
 */
export class PagedLedgerCursor implements LedgerCursor {
  private buffer: LedgerRecord[] = [];
  private closed = false;

  constructor(
    private nextSeq: number,
    private readonly bound: number,
    private readonly pageSize: number,
    private readonly readPage: (first: number, last: number, options: CallOptions | undefined) => Promise<readonly LedgerRecord[]>,
  ) {}

  async next(options?: CallOptions): Promise<LedgerRecord | undefined> {
    throwIfAborted(options);
    if (this.closed) return undefined;
    if (this.buffer.length === 0 && this.nextSeq <= this.bound) await this.fill(options);
    return this.buffer.shift();
  }

  private async fill(options: CallOptions | undefined): Promise<void> {
    const first = this.nextSeq;
    const page = await this.readPage(first, Math.min(this.bound, first + this.pageSize - 1), options);
    let expected = first;
    for (const record of page) {
      if (record.seq !== expected || expected > this.bound) break;
      this.buffer.push(record);
      expected++;
    }
    // Nothing where `first` was expected: the ledger changed under the cursor; stop. A short page
    // goes on from where it ended (the next page finds any gap).
    this.nextSeq = expected === first ? this.bound + 1 : expected;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.buffer = [];
  }

  [Symbol.asyncIterator](): AsyncIterator<LedgerRecord> {
    return {
      next: async () => {
        const record = await this.next();
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
export async function readRecord(ledger: Ledger, name: string, seq: number, options?: CallOptions): Promise<LedgerRecord> {
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
export async function appendDefinite(ledger: Ledger, name: string, expected: number, payload: Uint8Array, options?: LedgerWriteOptions): Promise<void> {
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
