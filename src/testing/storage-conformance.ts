/**
 * The storage primitives conformance suite: what the ledger, leaser, KV and
 * blobs must do over any Engine, as runner-agnostic cases (`it(c.name,
 * c.run, c.timeoutMs)`), parameterised by an engine factory so each adapter
 * (memory, IndexedDB, Durable Objects) runs the same suite.
 *
 * - Model-based: random sequences of ledger, KV and blob calls (with bad
 *   names, stale revisions, aborted signals, cursors read while the ledger
 *   grows or is deleted and written again, and restarts) against the
 *   reference models, call by call.
 * - A multi-page ledger deleted and written again under open cursors (at
 *   the start, inside the first page, at a page boundary), against the
 *   reference model: a cursor never yields records of two lives.
 * - Model-based leases on a stalled scheduler (no renewal runs, the clock
 *   jumps), against the lease facts model.
 * - Lease invariants under random schedules with renewals running: at most
 *   one holder per name, epochs strictly increase, a lost lease never holds
 *   again, a holder whose signal is not aborted holds.
 * - Concurrency: two appenders at the same `expected`, two acquirers of one
 *   lease, two KV writers at one revision, two blob writers of one key.
 * - Readable examples, one per rule (`./storage-examples.ts`).
 */
import fc from "fast-check";
import type { Arbitrary, AsyncCommand } from "fast-check";
import type { Engine } from "../engine.js";
import { LeaseHeldError } from "../storage/errors.js";
import type { Lease } from "../storage/leaser.js";
import { appendDefinite, type LedgerCursor, type LedgerRecord } from "../storage/ledger.js";
import { readAll } from "../storage/blobs.js";
import { createStore, type Store } from "../storage/store.js";
import type { ByteStream } from "../storage/web.js";
import type { ConformanceCase } from "./journal-conformance.js";
import { storageExampleCases } from "./storage-examples.js";
import { BlobsOracle, KvOracle, LeaseOracle, LedgerOracle, type LedgerCursorModel, type LedgerDrain } from "./storage-oracle.js";
import { expectSameOutcome, renderStorage, sameStorage, sameStorageOutcome, settleStorage, type StorageOutcome } from "./storage-compare.js";
import { virtualScheduler, type VirtualScheduler } from "./storage-scheduler.js";
import { virtualClock, type VirtualClock } from "./virtual-clock.js";
import { commandsUpTo, soakRequested } from "./soak.js";

/** Storage under test: an engine, and how to restart and release it. */
export interface StorageSubject {
  readonly engine: Engine;
  /** The same data after a restart (a durable engine closes and reopens; memory may return the same engine). */
  readonly reopen?: () => Promise<Engine>;
  /** Release the storage. */
  readonly close: () => Promise<void>;
}

/** Creates fresh, empty storage, every call. */
export type StorageSubjectFactory = () => Promise<StorageSubject>;

/** What {@link storageConformanceCases} needs. */
export interface StorageConformanceOptions {
  /** Names the engine in failure messages, e.g. `"memory"`. */
  readonly label: string;
  readonly createSubject: StorageSubjectFactory;
  /** Random sequences per model-based case. Default 60, or 3000 at soak size (`soakRequested()`). */
  readonly runs?: number;
  /** Seed (fast-check prints the seed of a failing run). */
  readonly seed?: number;
}

/** The lease time to live of the lease cases. */
export const CONFORMANCE_LEASE_TTL_MS = 3_000;
const RENEW_EVERY_MS = 1_000;
const STORE = "conformance";


function pick<T>(items: readonly T[], index: number): T {
  const item = items[index % items.length];
  if (item === undefined) throw new Error("pick from an empty list");
  return item;
}

/** Bytes `0..n` of a fixed pattern, `flip` changing one of them. */
export function patternBytes(length: number, seed: number, flip = -1): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i++) bytes[i] = (i * 31 + seed * 7) & 0xff;
  if (flip >= 0 && flip < length) bytes[flip] = (bytes[flip]! + 1) & 0xff;
  return bytes;
}

/** A `ReadableStream` of `bytes` cut into pieces of `piece` bytes (looked up on `globalThis`). */
export function streamOf(bytes: Uint8Array, piece: number): ByteStream {
  const Ctor = (globalThis as unknown as { ReadableStream: new (source: { start(controller: { enqueue(c: Uint8Array): void; close(): void }): void }) => ByteStream }).ReadableStream;
  return new Ctor({
    start(controller) {
      for (let offset = 0; offset < bytes.length; offset += piece) controller.enqueue(bytes.slice(offset, offset + piece));
      controller.close();
    },
  });
}

/** Drain a cursor into an array and close it. */
export async function drain(cursor: LedgerCursor): Promise<{ seq: number; payload: Uint8Array }[]> {
  const out: { seq: number; payload: Uint8Array }[] = [];
  for await (const record of cursor) out.push(record);
  return out;
}

/**
 * Read `cursor` to its end after the records already `taken` from it, and
 * close it: every record, then `"drained"` or the error it threw.
 */
export async function drainToEnd(cursor: LedgerCursor, taken: readonly LedgerRecord[] = []): Promise<LedgerDrain> {
  const records = [...taken];
  try {
    for (;;) {
      const record = await cursor.next();
      if (record === undefined) return { records, end: "drained" };
      records.push(record);
    }
  } catch (error) {
    return { records, end: error instanceof Error ? error : new Error(String(error)) };
  } finally {
    await cursor.close();
  }
}

/** Check a drained cursor against the reference ledger's answer for one opened as `opened` (a mismatch names its first record). */
function expectDrain(label: string, what: string, model: LedgerOracle, opened: LedgerCursorModel, actual: LedgerDrain): void {
  const expected = model.drainAnswer(opened, actual.records.length);
  if (sameStorageOutcome({ ok: true, value: expected }, { ok: true, value: actual })) return;
  const at = Math.max(0, expected.records.findIndex((record, index) => !sameStorage(record, actual.records[index])));
  const show = (drain: LedgerDrain) =>
    `${drain.records.length} records, from record ${at + 1}: ${renderStorage(drain.records.slice(at, at + 3))}${drain.records.length > at + 3 ? "..." : ""}, then ${renderStorage(drain.end)}`;
  throw new Error(`storage conformance (${label}): ${what} disagrees with the reference model\n  model:   ${show(expected)}\n  subject: ${show(actual)}`);
}

/**
 * The storage conformance cases for one engine.
 *
 * @example
 * ```ts
 * import { it } from "vitest";
 * import { memoryEngine } from "isostore/memory";
 * import { storageConformanceCases } from "isostore/testing";
 *
 * for (const c of storageConformanceCases({
 *   label: "memory",
 *   createSubject: async () => { const engine = memoryEngine(); return { engine, reopen: async () => engine, close: () => engine.close() }; },
 * })) it(c.name, c.run, c.timeoutMs);
 * ```
 */
export function storageConformanceCases(options: StorageConformanceOptions): ConformanceCase[] {
  const runs = options.runs ?? (soakRequested() ? 3000 : 60);
  const timeoutMs = 60_000 + runs * 500;
  return [
    { name: "random ledger, KV and blob calls agree with the reference models", run: () => runPrimitivesModel(options, runs), timeoutMs },
    { name: "random lease calls on a stalled scheduler agree with the lease facts model", run: () => runLeaseModel(options, runs), timeoutMs },
    { name: "random lease schedules with renewals keep the lease invariants", run: () => runLeaseInvariants(options, runs), timeoutMs },
    { name: "cursors across a delete and rewrite of a multi-page ledger agree with the reference model", run: () => readAcrossRewrite(options), timeoutMs: 120_000 },
    { name: "two appenders at the same expected: exactly one lands", run: () => twoAppenders(options), timeoutMs: 60_000 },
    { name: "two acquirers of one lease: exactly one is granted", run: () => twoAcquirers(options), timeoutMs: 60_000 },
    { name: "two KV writers at one revision: exactly one wins", run: () => twoKvWriters(options), timeoutMs: 60_000 },
    { name: "two blob writers of one key: same bytes both succeed, different bytes one conflicts", run: () => twoBlobWriters(options), timeoutMs: 60_000 },
    ...storageExampleCases(options),
  ];
}

/**
 * One multi-page ledger (more records than a cursor's page), cursors opened
 * on it and read to different points (none, inside the first page, exactly
 * one page of 256, from the middle), then the ledger deleted and written
 * again as long and longer; and a second ledger deleted under a cursor and
 * left empty. Every cursor must agree with the reference model: a prefix of
 * its own life, then drained or RecordNotFoundError, never a new record.
 */
async function readAcrossRewrite(options: StorageConformanceOptions): Promise<void> {
  const subject = await options.createSubject();
  try {
    const store = createStore(subject.engine, { name: STORE });
    const model = new LedgerOracle();
    const text = (value: string) => new TextEncoder().encode(value);
    const fill = async (name: string, from: number, count: number, tag: string) => {
      for (let seq = from + 1; seq <= from + count; seq++) {
        const payload = text(`${tag}${seq}`);
        model.append(name, seq - 1, payload);
        await store.ledger.append(name, seq - 1, payload);
      }
    };
    const open = async (name: string, from: number, take: number) => {
      const opened = model.open(name, from);
      const cursor = await store.ledger.read(name, from);
      const taken: LedgerRecord[] = [];
      for (let i = 0; i < take; i++) {
        const record = await cursor.next();
        if (record !== undefined) taken.push(record);
      }
      return { what: `read(${name}, ${from}) with ${take} records taken before the delete`, opened, cursor, taken };
    };

    await fill("rewritten", 0, 300, "old");
    const cursors = [await open("rewritten", 1, 0), await open("rewritten", 1, 1), await open("rewritten", 1, 256), await open("rewritten", 200, 1)];
    model.delete("rewritten");
    await store.ledger.delete("rewritten");
    await fill("rewritten", 0, 300, "new");
    // A later cursor reads the new life only.
    const after = await open("rewritten", 250, 0);
    await fill("rewritten", 300, 20, "new");
    for (const c of [...cursors, after]) expectDrain(options.label, c.what, model, c.opened, await drainToEnd(c.cursor, c.taken));

    await fill("emptied", 0, 260, "old");
    const emptied = await open("emptied", 1, 1);
    model.delete("emptied");
    await store.ledger.delete("emptied");
    expectDrain(options.label, emptied.what, model, emptied.opened, await drainToEnd(emptied.cursor, emptied.taken));
  } finally {
    await subject.close();
  }
}

function assertion(condition: boolean, label: string, message: string): asserts condition {
  if (!condition) throw new Error(`storage conformance (${label}): ${message}`);
}

// ------------------------------------------------------- primitives model

const LEDGER_NAMES = ["orders", "orders/acme", "audit/2026.11", "Bad Name"];
const KV_KEYS = ["s/1", "s/2", "sessions/x", "t", "UPPER"];
const BLOB_KEYS = ["snap/a", "snap/b", "z", "/lead"];
const PREFIXES = ["", "s", "s/", "sessions/", "snap/", "t", "zz", "Bad"];
const PAYLOADS = [new Uint8Array(), new Uint8Array([1]), new Uint8Array([1, 2, 3]), patternBytes(40, 3)];
/** Blob contents: empty, small, and two that span several chunks and differ in one byte. */
const CONTENTS = [new Uint8Array(), new Uint8Array([7, 7]), new Uint8Array([7, 8]), patternBytes(300_000, 1), patternBytes(300_000, 1, 299_999)];

interface PrimitivesModel {
  readonly label: string;
  readonly ledger: LedgerOracle;
  readonly kv: KvOracle;
  readonly blobs: BlobsOracle;
  /** Highest revision seen per key (revisions must strictly increase). */
  readonly revs: Map<string, number>;
  /** Ledger rewrites so far: each one's bytes are its own. */
  readonly lives: { count: number };
}

interface PrimitivesReal {
  readonly subject: StorageSubject;
  engine: Engine;
  store: Store;
}

type PrimitivesCommand = AsyncCommand<PrimitivesModel, PrimitivesReal>;

function command<M extends object, R>(label: string, run: (model: M, real: R) => Promise<void>): AsyncCommand<M, R> {
  return { check: () => true, run, toString: () => label };
}

async function agree(model: PrimitivesModel, what: string, expected: () => unknown, actual: () => Promise<unknown>): Promise<boolean> {
  const e = await settleStorage(expected);
  const a = await settleStorage(actual);
  expectSameOutcome(`storage conformance (${model.label}): ${what}`, e, a);
  return e.ok;
}

function abortedSignal(reason: unknown): { signal: { aborted: boolean; reason: unknown; addEventListener(): void; removeEventListener(): void } } {
  return { signal: { aborted: true, reason, addEventListener: () => undefined, removeEventListener: () => undefined } };
}

function primitivesCommands(): Arbitrary<PrimitivesCommand>[] {
  const name = fc.nat({ max: LEDGER_NAMES.length - 1 }).map((i) => pick(LEDGER_NAMES, i));
  const payload = fc.nat({ max: PAYLOADS.length - 1 }).map((i) => pick(PAYLOADS, i));
  const key = fc.nat({ max: KV_KEYS.length - 1 }).map((i) => pick(KV_KEYS, i));
  const prefix = fc.constantFrom(...PREFIXES);

  const append = fc.record({ name, delta: fc.constantFrom(-1, 0, 0, 0, 1), payload, definite: fc.boolean() }).map(({ name, delta, payload, definite }) =>
    command<PrimitivesModel, PrimitivesReal>(`${definite ? "appendDefinite" : "append"}(${name}, tip${delta >= 0 ? "+" : ""}${delta}, ${renderStorage(payload)})`, async (model, real) => {
      let expected = 0;
      try {
        expected = Math.max(0, model.ledger.tip(name) + delta);
      } catch {
        expected = 0; // invalid name: the call must refuse it first
      }
      await agree(
        model,
        `append(${name}, ${expected})`,
        () => (definite ? model.ledger.appendDefinite(name, expected, payload) : model.ledger.append(name, expected, payload)),
        () => (definite ? appendDefinite(real.store.ledger, name, expected, payload) : real.store.ledger.append(name, expected, payload)),
      );
    }),
  );

  const read = fc.record({ name, from: fc.nat({ max: 6 }) }).map(({ name, from }) =>
    command<PrimitivesModel, PrimitivesReal>(`read(${name}, ${from})`, async (model, real) => {
      await agree(model, `read(${name}, ${from})`, () => model.ledger.read(name, from), async () => drain(await real.store.ledger.read(name, from)));
    }),
  );

  // A cursor is bounded at the tip seen when it was opened.
  const readWhileAppending = fc.record({ name, payload }).map(({ name, payload }) =>
    command<PrimitivesModel, PrimitivesReal>(`read(${name}) while appending`, async (model, real) => {
      let before: unknown;
      try {
        before = model.ledger.read(name, 1);
      } catch {
        return; // invalid names are covered by read()
      }
      const cursor = await real.store.ledger.read(name, 1);
      const tip = model.ledger.tip(name);
      await agree(model, `append(${name}, ${tip}) under an open cursor`, () => model.ledger.append(name, tip, payload), () => real.store.ledger.append(name, tip, payload));
      await agree(model, `draining a cursor opened before that append`, () => before, () => drain(cursor));
    }),
  );

  // A cursor reads one life of its ledger: deleted (and written again) under it, it never yields the new records.
  // The command grows the ledger first (random runs are short, so it is often empty), and the new life's bytes are
  // unlike any record written before, so a cursor that reads on into the new life cannot pass unnoticed.
  const readAcrossDelete = fc
    .record({ name, grow: fc.integer({ min: 1, max: 3 }), taken: fc.nat({ max: 3 }), rewrite: fc.nat({ max: 4 }) })
    .map(({ name, grow, taken, rewrite: count }) =>
      command<PrimitivesModel, PrimitivesReal>(`append x${grow}, read(${name}), next() x${taken}, delete, append x${count}, drain`, async (model, real) => {
        let tip: number;
        try {
          tip = model.ledger.tip(name);
        } catch {
          return; // invalid names are covered by read()
        }
        for (let i = 0; i < grow; i++) {
          const bytes = patternBytes(3, i);
          await agree(model, `append(${name}, ${tip + i}) before the read`, () => model.ledger.append(name, tip + i, bytes), () => real.store.ledger.append(name, tip + i, bytes));
        }
        const opened = model.ledger.open(name, 1);
        const rewrite = Array.from({ length: count }, () => patternBytes(4, ++model.lives.count));
        const cursor = await real.store.ledger.read(name, 1);
        const first: LedgerRecord[] = [];
        for (let i = 0; i < taken; i++) {
          const record = await cursor.next();
          if (record !== undefined) first.push(record);
        }
        await agree(model, `ledger.delete(${name}) under an open cursor`, () => model.ledger.delete(name), () => real.store.ledger.delete(name));
        for (const [index, bytes] of rewrite.entries()) {
          await agree(model, `append(${name}, ${index}) after the delete`, () => model.ledger.append(name, index, bytes), () => real.store.ledger.append(name, index, bytes));
        }
        expectDrain(model.label, `draining a cursor opened before the delete (${first.length} records taken before it)`, model.ledger, opened, await drainToEnd(cursor, first));
      }),
    );

  const tip = name.map((name) =>
    command<PrimitivesModel, PrimitivesReal>(`tip(${name})`, async (model, real) => {
      await agree(model, `tip(${name})`, () => model.ledger.tip(name), () => real.store.ledger.tip(name));
    }),
  );

  const deleteLedger = name.map((name) =>
    command<PrimitivesModel, PrimitivesReal>(`ledger.delete(${name})`, async (model, real) => {
      await agree(model, `ledger.delete(${name})`, () => model.ledger.delete(name), () => real.store.ledger.delete(name));
    }),
  );

  const put = fc.record({ key, rev: fc.constantFrom("current", "current", "zero", "stale", "ahead"), payload }).map(({ key, rev, payload }) =>
    command<PrimitivesModel, PrimitivesReal>(`kv.put(${key}, ${rev}, ${renderStorage(payload)})`, async (model, real) => {
      let current = 0;
      try {
        current = model.kv.get(key).rev;
      } catch {
        current = 0;
      }
      const expectedRev = rev === "current" ? current : rev === "zero" ? 0 : rev === "stale" ? Math.max(0, current - 1) : current + 1;
      const e = await settleStorage(() => model.kv.put(key, expectedRev, payload));
      const a = await settleStorage(() => real.store.kv.put(key, expectedRev, payload));
      expectSameOutcome(`storage conformance (${model.label}): kv.put(${key}, ${expectedRev})`, e, a);
      if (a.ok) {
        const newRev = a.value as number;
        const last = model.revs.get(key) ?? 0;
        assertion(newRev > last, model.label, `kv revision of ${key} went from ${last} to ${newRev}; revisions must strictly increase (also across delete)`);
        model.revs.set(key, newRev);
      }
    }),
  );

  const get = key.map((key) =>
    command<PrimitivesModel, PrimitivesReal>(`kv.get(${key})`, async (model, real) => {
      await agree(model, `kv.get(${key})`, () => model.kv.get(key), () => real.store.kv.get(key));
    }),
  );

  const keys = prefix.map((prefix) =>
    command<PrimitivesModel, PrimitivesReal>(`kv.keys(${JSON.stringify(prefix)})`, async (model, real) => {
      await agree(model, `kv.keys(${JSON.stringify(prefix)})`, () => model.kv.keys(prefix), () => real.store.kv.keys(prefix));
    }),
  );

  const deleteKey = key.map((key) =>
    command<PrimitivesModel, PrimitivesReal>(`kv.delete(${key})`, async (model, real) => {
      await agree(model, `kv.delete(${key})`, () => model.kv.delete(key), () => real.store.kv.delete(key));
    }),
  );

  const blobKey = fc.nat({ max: BLOB_KEYS.length - 1 }).map((i) => pick(BLOB_KEYS, i));
  const blobPut = fc
    .record({ key: blobKey, content: fc.nat({ max: CONTENTS.length - 1 }), stream: fc.boolean(), piece: fc.constantFrom(1, 1000, 65_536, 1_000_000) })
    .map(({ key, content, stream, piece }) =>
      command<PrimitivesModel, PrimitivesReal>(`blobs.put(${key}, content[${content}]${stream ? `, streamed in ${piece}-byte pieces` : ""})`, async (model, real) => {
        const bytes = pick(CONTENTS, content);
        // One-byte pieces of a 300 kB blob would only be slow, not different.
        const source = stream ? streamOf(bytes, bytes.length > 1000 ? Math.max(piece, 4096) : piece) : bytes;
        await agree(model, `blobs.put(${key}, content[${content}])`, () => model.blobs.put(key, bytes), () => real.store.blobs.put(key, source));
      }),
    );

  const blobGet = blobKey.map((key) =>
    command<PrimitivesModel, PrimitivesReal>(`blobs.get(${key})`, async (model, real) => {
      await agree(model, `blobs.get(${key})`, () => model.blobs.get(key), async () => readAll(await real.store.blobs.get(key)));
    }),
  );

  const blobDelete = blobKey.map((key) =>
    command<PrimitivesModel, PrimitivesReal>(`blobs.delete(${key})`, async (model, real) => {
      await agree(model, `blobs.delete(${key})`, () => model.blobs.delete(key), () => real.store.blobs.delete(key));
    }),
  );

  const blobList = prefix.map((prefix) =>
    command<PrimitivesModel, PrimitivesReal>(`blobs.list(${JSON.stringify(prefix)})`, async (model, real) => {
      await agree(model, `blobs.list(${JSON.stringify(prefix)})`, () => model.blobs.list(prefix), () => real.store.blobs.list(prefix));
    }),
  );

  // An aborted call rejects with the signal's reason and changes nothing (the model is left alone).
  const aborted = fc.record({ which: fc.constantFrom("append", "kv.put", "kv.delete", "blobs.put", "ledger.delete"), name, key, payload }).map(({ which, name, key, payload }) =>
    command<PrimitivesModel, PrimitivesReal>(`${which} with an aborted signal`, async (model, real) => {
      const reason = new Error("caller gave up");
      const options = abortedSignal(reason);
      const validName = LEDGER_NAMES[0]!;
      const outcome = await settleStorage(async () => {
        if (which === "append") return real.store.ledger.append(validName, model.ledger.tip(validName), payload, options);
        if (which === "kv.put") return real.store.kv.put(KV_KEYS[0]!, 0, payload, options);
        if (which === "kv.delete") return real.store.kv.delete(key === "UPPER" ? KV_KEYS[0]! : key, options);
        if (which === "ledger.delete") return real.store.ledger.delete(name === "Bad Name" ? validName : name, options);
        return real.store.blobs.put(BLOB_KEYS[0]!, payload, options);
      });
      assertion(!outcome.ok && outcome.error === reason, model.label, `${which} with an aborted signal must reject with the signal's reason, got ${renderStorage(outcome)}`);
    }),
  );

  const restart = fc.constant(
    command<PrimitivesModel, PrimitivesReal>("restart (a new store over the reopened engine)", async (_model, real) => {
      real.engine = real.subject.reopen ? await real.subject.reopen() : real.engine;
      real.store = createStore(real.engine, { name: STORE });
    }),
  );

  return [append, append, read, readWhileAppending, readAcrossDelete, tip, deleteLedger, put, put, get, keys, deleteKey, blobPut, blobGet, blobDelete, blobList, aborted, restart];
}

async function runPrimitivesModel(options: StorageConformanceOptions, runs: number): Promise<void> {
  await fc.assert(
    fc.asyncProperty(fc.commands(primitivesCommands(), commandsUpTo(40)), async (commands) => {
      const subject = await options.createSubject();
      try {
        const model: PrimitivesModel = { label: options.label, ledger: new LedgerOracle(), kv: new KvOracle(), blobs: new BlobsOracle(), revs: new Map(), lives: { count: 0 } };
        const real: PrimitivesReal = { subject, engine: subject.engine, store: createStore(subject.engine, { name: STORE }) };
        await fc.asyncModelRun(() => ({ model, real }), commands);
      } finally {
        await subject.close();
      }
    }),
    { numRuns: runs, ...(options.seed === undefined ? {} : { seed: options.seed }) },
  );
}

// ------------------------------------------------------------ lease model

const LEASE_NAMES = ["jobs/nightly", "jobs/compact"];

interface LeaseWorld {
  readonly label: string;
  readonly time: VirtualClock;
  readonly scheduler: VirtualScheduler;
  readonly oracle: LeaseOracle;
  /** Two independent leasers (two stores over the same engine). */
  readonly stores: Store[];
  readonly leases: { readonly lease: Lease; aborts: number }[];
  /** Highest epoch granted per name. */
  readonly epochs: Map<string, number>;
}

function leaseWorld(label: string, engine: Engine): LeaseWorld {
  const time = virtualClock(1_700_000_000_000);
  const scheduler = virtualScheduler(time);
  const stores = [0, 1].map(() => createStore(engine, { name: STORE, clock: time.clock, scheduler, leaseTtlMs: CONFORMANCE_LEASE_TTL_MS, leaseRenewEveryMs: RENEW_EVERY_MS }));
  return { label, time, scheduler, oracle: new LeaseOracle(CONFORMANCE_LEASE_TTL_MS), stores, leases: [], epochs: new Map() };
}

function track(world: LeaseWorld, lease: Lease): void {
  const entry = { lease, aborts: 0 };
  lease.signal.addEventListener("abort", () => {
    entry.aborts += 1;
  });
  world.leases.push(entry);
}

type LeaseCommand = AsyncCommand<LeaseWorld, LeaseWorld>;

function leaseModelCommands(): Arbitrary<LeaseCommand>[] {
  const acquire = fc.record({ holder: fc.nat({ max: 1 }), name: fc.constantFrom(...LEASE_NAMES) }).map(({ holder, name }) =>
    command<LeaseWorld, LeaseWorld>(`leaser[${holder}].acquire(${name})`, async (world) => {
      const expected = await settleStorage(() => world.oracle.acquire(name, world.time.now));
      const actual = await settleStorage(() => world.stores[holder]!.leaser.acquire(name));
      const shown: StorageOutcome = actual.ok ? { ok: true, value: (actual.value as Lease).epoch } : actual;
      expectSameOutcome(`storage conformance (${world.label}): acquire(${name}) at ${world.time.now}`, expected, shown);
      if (actual.ok) track(world, actual.value as Lease);
    }),
  );
  const release = fc.nat({ max: 3 }).map((index) =>
    command<LeaseWorld, LeaseWorld>(`release(lease[latest-${index}])`, async (world) => {
      if (world.leases.length === 0) return;
      const entry = pick(world.leases, world.leases.length - 1 - (index % world.leases.length));
      world.oracle.release(entry.lease.name, entry.lease.epoch);
      await entry.lease.release();
      assertion(entry.lease.signal.aborted, world.label, "a released lease's signal is aborted");
    }),
  );
  const jump = fc.integer({ min: 0, max: 2 * CONFORMANCE_LEASE_TTL_MS }).map((ms) =>
    command<LeaseWorld, LeaseWorld>(`clock += ${ms} (no renewal runs)`, async (world) => {
      world.time.now += ms;
    }),
  );
  const assertHeld = fc.record({ index: fc.nat({ max: 3 }), holder: fc.nat({ max: 1 }) }).map(({ index, holder }) =>
    command<LeaseWorld, LeaseWorld>(`leaser[${holder}].assertHeld(lease[latest-${index}])`, async (world) => {
      if (world.leases.length === 0) return;
      const { lease } = pick(world.leases, world.leases.length - 1 - (index % world.leases.length));
      const expected = await settleStorage(() => world.oracle.assertHeld(lease.name, lease.epoch, world.time.now));
      const actual = await settleStorage(() => world.stores[holder]!.leaser.assertHeld(lease.name, lease.epoch));
      expectSameOutcome(`storage conformance (${world.label}): assertHeld(${lease.name}, ${lease.epoch}) at ${world.time.now}`, expected, actual);
    }),
  );
  return [acquire, acquire, release, jump, assertHeld];
}

async function runLeaseModel(options: StorageConformanceOptions, runs: number): Promise<void> {
  await fc.assert(
    fc.asyncProperty(fc.commands(leaseModelCommands(), commandsUpTo(30)), async (commands) => {
      const subject = await options.createSubject();
      const world = leaseWorld(options.label, subject.engine);
      try {
        await fc.asyncModelRun(() => ({ model: world, real: world }), commands);
      } finally {
        for (const { lease } of world.leases) await lease.release().catch(() => undefined);
        await subject.close();
      }
    }),
    { numRuns: runs, ...(options.seed === undefined ? {} : { seed: options.seed }) },
  );
}

// ------------------------------------------------------- lease invariants

async function holdsNow(world: LeaseWorld, lease: Lease): Promise<boolean> {
  const outcome = await settleStorage(() => world.stores[0]!.leaser.assertHeld(lease.name, lease.epoch));
  return outcome.ok;
}

async function checkInvariants(world: LeaseWorld, afterRenewals: boolean): Promise<void> {
  const lost = new Set<Lease>();
  for (const name of LEASE_NAMES) {
    const holders: number[] = [];
    for (const entry of world.leases.filter((e) => e.lease.name === name)) {
      assertion(entry.aborts <= 1, world.label, `the signal of ${name}@${entry.lease.epoch} aborted ${entry.aborts} times`);
      const held = await holdsNow(world, entry.lease);
      if (held) holders.push(entry.lease.epoch);
      if (entry.lease.signal.aborted) {
        lost.add(entry.lease);
        assertion(!held, world.label, `${name}@${entry.lease.epoch} was lost (signal aborted) but still holds`);
      } else if (afterRenewals) {
        assertion(held, world.label, `${name}@${entry.lease.epoch} has run its renewals and its signal is not aborted, yet it does not hold at ${world.time.now}`);
      }
    }
    assertion(holders.length <= 1, world.label, `${name} is held by several epochs at once: ${holders.join(", ")}`);
  }
}

function leaseInvariantCommands(): Arbitrary<LeaseCommand>[] {
  const acquire = fc.record({ holder: fc.nat({ max: 1 }), name: fc.constantFrom(...LEASE_NAMES) }).map(({ holder, name }) =>
    command<LeaseWorld, LeaseWorld>(`leaser[${holder}].acquire(${name})`, async (world) => {
      const outcome = await settleStorage(() => world.stores[holder]!.leaser.acquire(name));
      const highest = world.epochs.get(name) ?? 0;
      if (outcome.ok) {
        const lease = outcome.value as Lease;
        assertion(lease.epoch > highest, world.label, `acquire(${name}) granted epoch ${lease.epoch} after epoch ${highest}; a later grant must have a greater epoch`);
        world.epochs.set(name, lease.epoch);
        track(world, lease);
      } else {
        assertion(outcome.error instanceof LeaseHeldError, world.label, `acquire(${name}) failed with ${renderStorage(outcome.error)}`);
        assertion(outcome.error.holderEpoch === highest, world.label, `LeaseHeldError names epoch ${outcome.error.holderEpoch}, the holder is ${highest}`);
      }
      await checkInvariants(world, false);
    }),
  );
  const release = fc.nat({ max: 3 }).map((index) =>
    command<LeaseWorld, LeaseWorld>(`release(lease[latest-${index}]) twice`, async (world) => {
      if (world.leases.length === 0) return;
      const entry = pick(world.leases, world.leases.length - 1 - (index % world.leases.length));
      const others = world.leases.filter((e) => e !== entry && e.lease.name === entry.lease.name && !e.lease.signal.aborted);
      const heldBefore = await Promise.all(others.map((e) => holdsNow(world, e.lease)));
      await entry.lease.release();
      await entry.lease.release();
      const heldAfter = await Promise.all(others.map((e) => holdsNow(world, e.lease)));
      heldBefore.forEach((held, i) => assertion(!held || heldAfter[i] === true, world.label, `releasing ${entry.lease.name}@${entry.lease.epoch} freed a later holder`));
      await checkInvariants(world, false);
    }),
  );
  const advance = fc.integer({ min: 0, max: 2 * CONFORMANCE_LEASE_TTL_MS }).map((ms) =>
    command<LeaseWorld, LeaseWorld>(`advance ${ms} ms (renewals run)`, async (world) => {
      await world.scheduler.advance(ms);
      await checkInvariants(world, true);
    }),
  );
  const stall = fc.integer({ min: 0, max: 2 * CONFORMANCE_LEASE_TTL_MS }).map((ms) =>
    command<LeaseWorld, LeaseWorld>(`stall: clock += ${ms}, no renewal runs`, async (world) => {
      world.time.now += ms;
      await checkInvariants(world, false);
    }),
  );
  return [acquire, acquire, release, advance, stall];
}

async function runLeaseInvariants(options: StorageConformanceOptions, runs: number): Promise<void> {
  await fc.assert(
    fc.asyncProperty(fc.commands(leaseInvariantCommands(), commandsUpTo(25)), async (commands) => {
      const subject = await options.createSubject();
      const world = leaseWorld(options.label, subject.engine);
      try {
        await fc.asyncModelRun(() => ({ model: world, real: world }), commands);
      } finally {
        for (const { lease } of world.leases) await lease.release().catch(() => undefined);
        await subject.close();
      }
    }),
    { numRuns: runs, ...(options.seed === undefined ? {} : { seed: options.seed }) },
  );
}

// ------------------------------------------------------------ concurrency

const TRIALS = 25;

async function withStores<T>(options: StorageConformanceOptions, body: (stores: [Store, Store], world: LeaseWorld) => Promise<T>): Promise<T> {
  const subject = await options.createSubject();
  const world = leaseWorld(options.label, subject.engine);
  try {
    return await body([world.stores[0]!, world.stores[1]!], world);
  } finally {
    for (const { lease } of world.leases) await lease.release().catch(() => undefined);
    await subject.close();
  }
}

async function twoAppenders(options: StorageConformanceOptions): Promise<void> {
  await withStores(options, async ([a, b]) => {
    for (let trial = 0; trial < TRIALS; trial++) {
      const expected = trial;
      const mine = new Uint8Array([trial, 1]);
      const theirs = new Uint8Array([trial, 2]);
      const [x, y] = await Promise.all([settleStorage(() => a.ledger.append("race", expected, mine)), settleStorage(() => b.ledger.append("race", expected, theirs))]);
      assertion(x.ok !== y.ok, options.label, `two appends at expected ${expected}: ${x.ok && y.ok ? "both" : "neither"} landed`);
      const loser = x.ok ? y : x;
      assertion(!loser.ok && (loser.error as { code?: string }).code === "conflict", options.label, `the losing append must be a ConflictError, got ${renderStorage(loser)}`);
      const records = await drain(await a.ledger.read("race", expected + 1));
      assertion(records.length === 1 && records[0]!.payload[1] === (x.ok ? 1 : 2), options.label, `record ${expected + 1} must be the winner's payload`);
      // appendDefinite of the same bytes from both: both succeed, one record.
      const same = new Uint8Array([trial, 9]);
      await Promise.all([appendDefinite(a.ledger, "definite", expected, same), appendDefinite(b.ledger, "definite", expected, same)]);
      assertion((await a.ledger.tip("definite")) === expected + 1, options.label, "two identical appendDefinite calls must land one record");
    }
  });
}

async function twoAcquirers(options: StorageConformanceOptions): Promise<void> {
  await withStores(options, async ([a, b], world) => {
    for (let trial = 0; trial < TRIALS; trial++) {
      const [x, y] = await Promise.all([settleStorage(() => a.leaser.acquire("contended")), settleStorage(() => b.leaser.acquire("contended"))]);
      assertion(x.ok !== y.ok, options.label, `two acquires: ${x.ok && y.ok ? "both" : "neither"} granted`);
      const winner = (x.ok ? x.value : (y as { value: unknown }).value) as Lease;
      track(world, winner);
      const loser = x.ok ? y : x;
      assertion(
        !loser.ok && loser.error instanceof LeaseHeldError && loser.error.holderEpoch === winner.epoch,
        options.label,
        `the refused acquire must be LeaseHeldError naming epoch ${winner.epoch}, got ${renderStorage(loser)}`,
      );
      assertion(winner.epoch === trial + 1, options.label, `grant ${trial + 1} has epoch ${winner.epoch}`);
      await winner.release();
    }
  });
}

async function twoKvWriters(options: StorageConformanceOptions): Promise<void> {
  await withStores(options, async ([a, b]) => {
    let rev = 0;
    for (let trial = 0; trial < TRIALS; trial++) {
      const [x, y] = await Promise.all([settleStorage(() => a.kv.put("cas", rev, new Uint8Array([1]))), settleStorage(() => b.kv.put("cas", rev, new Uint8Array([2])))]);
      assertion(x.ok !== y.ok, options.label, `two puts at revision ${rev}: ${x.ok && y.ok ? "both" : "neither"} won`);
      const next = (x.ok ? x.value : (y as { value: unknown }).value) as number;
      assertion(next > rev, options.label, `revision went from ${rev} to ${next}`);
      rev = next;
    }
  });
}

async function twoBlobWriters(options: StorageConformanceOptions): Promise<void> {
  await withStores(options, async ([a, b]) => {
    for (let trial = 0; trial < 5; trial++) {
      const content = patternBytes(300_000, trial);
      await Promise.all([a.blobs.put(`same/${trial}`, content), b.blobs.put(`same/${trial}`, streamOf(content, 50_000))]);
      const [x, y] = await Promise.all([
        settleStorage(() => a.blobs.put(`diff/${trial}`, content)),
        settleStorage(() => b.blobs.put(`diff/${trial}`, patternBytes(300_000, trial, 5))),
      ]);
      assertion(x.ok !== y.ok, options.label, `two different puts of one key: ${x.ok && y.ok ? "both" : "neither"} succeeded`);
      const stored = await readAll(await a.blobs.get(`diff/${trial}`));
      assertion(stored[5] === (x.ok ? content[5] : (content[5]! + 1) & 0xff), options.label, "the stored blob must be the winner's content, untouched");
    }
  });
}
