/**
 * The readable half of the storage conformance suite: one example per rule
 * of `storage-primitives.go.txt`, each on fresh storage from the factory,
 * each asserting concrete values so a wrong implementation fails with a
 * message naming the rule it broke.
 */
import { appendDefinite, MAX_LEDGER_PAYLOAD_BYTES, readRecord, type Ledger, type LedgerCursor, type LedgerRecord } from "../storage/ledger.js";
import { contentAddress, readAll, BLOB_CHUNK_BYTES } from "../storage/blobs.js";
import { createComposite } from "../storage/composite.js";
import { AmbiguousError, ConflictError } from "../storage/errors.js";
import { MAX_KV_VALUE_BYTES } from "../storage/kv.js";
import { validateName, validatePrefix } from "../storage/names.js";
import { createStore, type Store } from "../storage/store.js";
import { newAbortController, newByteStream, sameBytes, type ByteStream, type ByteStreamReader } from "../storage/web.js";
import type { ConformanceCase } from "./journal-conformance.js";
import { describeStorageError, renderStorage, sameStorage, settleStorage } from "./storage-compare.js";
import type { StorageConformanceOptions } from "./storage-conformance.js";
import { virtualScheduler } from "./storage-scheduler.js";
import { virtualClock, type VirtualClock } from "./virtual-clock.js";
import type { VirtualScheduler } from "./storage-scheduler.js";

const bytes = (...values: number[]) => new Uint8Array(values);

/**
 * A `Uint8Array` whose `slice()` returns a view of the same memory, as Node's
 * `Buffer` does (the storage types accept any `Uint8Array`). Defined here, not
 * imported from Node, so the examples run in browsers and workerd too.
 */
export class SharedSliceBytes extends Uint8Array {
  override slice(start?: number, end?: number): Uint8Array<ArrayBuffer> {
    return this.subarray(start, end);
  }
}

function fail(what: string, expected: unknown, actual: unknown): never {
  throw new Error(`${what}\n  expected: ${renderStorage(expected)}\n  actual:   ${renderStorage(actual)}`);
}

function expectEqual(actual: unknown, expected: unknown, what: string): void {
  if (!sameStorage(actual, expected)) fail(what, expected, actual);
}

/** Expect a rejection whose class, code and listed fields are as given. */
async function expectRejects(call: () => unknown, expected: { readonly error: string } & Record<string, unknown>, what: string): Promise<unknown> {
  const outcome = await settleStorage(call);
  if (outcome.ok) fail(`${what}: expected a rejection`, expected, { resolved: outcome.value });
  const actual = describeStorageError(outcome.error);
  for (const [field, value] of Object.entries(expected)) {
    if (!sameStorage(actual[field], value)) fail(`${what}: wrong ${field}`, expected, actual);
  }
  return outcome.error;
}

async function drain(cursor: LedgerCursor): Promise<LedgerRecord[]> {
  const out: LedgerRecord[] = [];
  for await (const record of cursor) out.push(record);
  return out;
}

interface Fixture {
  readonly store: Store;
  readonly time: VirtualClock;
  readonly scheduler: VirtualScheduler;
  /** A second, independent store object over the same engine. */
  readonly other: Store;
}

/**
 * A holder of lease "job" that has written once under its fence (ledger "out"
 * record 0, KV key "state"), and the error its fenced calls get once the lease
 * is lost.
 */
async function fencedHolder(store: Store) {
  const lease = await store.leaser.acquire("job");
  const fence = { lease: "job", epoch: lease.epoch };
  await store.ledger.append("out", 0, bytes(1), { fence });
  await store.kv.put("state", 0, bytes(1), { fence });
  const lost = { error: "LeaseLostError", code: "lease_lost", name: "job", epoch: lease.epoch };
  return { lease, fence, lost };
}

function example(options: StorageConformanceOptions, name: string, body: (fixture: Fixture) => Promise<void>): ConformanceCase {
  return {
    name,
    timeoutMs: 30_000,
    run: async () => {
      const subject = await options.createSubject();
      const time = virtualClock(1_700_000_000_000);
      const scheduler = virtualScheduler(time);
      const make = () => createStore(subject.engine, { name: "examples", clock: time.clock, scheduler, leaseTtlMs: 3_000, leaseRenewEveryMs: 1_000 });
      try {
        await body({ store: make(), other: make(), time, scheduler });
      } catch (error) {
        if (error instanceof Error) error.message = `storage example (${options.label}) "${name}": ${error.message}`;
        throw error;
      } finally {
        await subject.close();
      }
    },
  };
}

/** The examples, one per rule. */
export function storageExampleCases(options: StorageConformanceOptions): ConformanceCase[] {
  const ex = (name: string, body: (fixture: Fixture) => Promise<void>) => example(options, name, body);
  return [
    // ---------------------------------------------------------- names
    ex("names: segments of [a-z0-9][a-z0-9_.-]* joined by single '/', at most 512 bytes", async () => {
      for (const good of ["a", "orders/acme", "a.b-c_d/0", "x".repeat(512)]) expectEqual(validateName(good), good, `${good} is a valid name`);
      const cases: [string, string][] = [
        ["", "empty"],
        ["/a", "leading_slash"],
        ["a/", "trailing_slash"],
        ["a//b", "empty_segment"],
        ["A", "segment_start"],
        ["a/.hidden", "segment_start"],
        ["a b", "character"],
        ["x".repeat(513), "too_long"],
        ["é", "segment_start"],
        // The limit counts UTF-8 bytes, before any character rule: 300 `é` are 600 bytes, "a" and 256 `é` are 513.
        ["é".repeat(300), "too_long"],
        [`a${"é".repeat(256)}`, "too_long"],
      ];
      for (const [bad, rule] of cases) await expectRejects(() => validateName(bad), { error: "InvalidNameError", code: "invalid_name", name: bad, rule }, `validateName(${JSON.stringify(bad.slice(0, 20))})`);
    }),
    ex("names: a listing prefix is empty or text a valid name can start with; kv.keys and blobs.list refuse any other with InvalidNameError", async ({ store }) => {
      await store.kv.put("orders/2024", 0, bytes(1));
      await store.blobs.put("orders/2024", bytes(1));
      for (const [prefix, listed] of [["", ["orders/2024"]], ["orders/", ["orders/2024"]], ["orders/2", ["orders/2024"]], ["orders/3", []]] as const) {
        expectEqual(validatePrefix(prefix), prefix, `validatePrefix(${JSON.stringify(prefix)})`);
        expectEqual(await store.kv.keys(prefix), listed, `kv.keys(${JSON.stringify(prefix)})`);
        expectEqual(await store.blobs.list(prefix), listed, `blobs.list(${JSON.stringify(prefix)})`);
      }
      const cases: [string, string][] = [
        ["Bad", "segment_start"],
        ["/x", "leading_slash"],
        ["a//", "empty_segment"],
        ["_x", "segment_start"],
        ["a b", "character"],
        // Bytes of UTF-8 again, before the characters.
        ["é".repeat(300), "too_long"],
        [`a${"é".repeat(256)}`, "too_long"],
      ];
      for (const [bad, rule] of cases) {
        const refused = { error: "InvalidNameError", code: "invalid_name", name: bad, rule };
        const what = JSON.stringify(bad.slice(0, 20));
        await expectRejects(() => validatePrefix(bad), refused, `validatePrefix(${what})`);
        await expectRejects(() => store.kv.keys(bad), refused, `kv.keys(${what})`);
        await expectRejects(() => store.blobs.list(bad), refused, `blobs.list(${what})`);
      }
    }),
    ex("names are checked where they enter: ledger, lease, KV and blob calls refuse a bad name and change nothing", async ({ store }) => {
      const refused = { error: "InvalidNameError", code: "invalid_name", name: "Bad", rule: "segment_start" };
      await expectRejects(() => store.ledger.append("Bad", 0, bytes(1)), refused, "ledger.append");
      await expectRejects(() => store.ledger.read("Bad", 0), refused, "ledger.read");
      await expectRejects(() => store.leaser.acquire("Bad"), refused, "leaser.acquire");
      await expectRejects(() => store.kv.put("Bad", 0, bytes(1)), refused, "kv.put");
      await expectRejects(() => store.blobs.put("Bad", bytes(1)), refused, "blobs.put");
      expectEqual(await store.kv.keys(""), [], "nothing was written");
    }),
    // ---------------------------------------------------------- ledger
    ex("ledger: append at expected commits record expected+1; sequences are 1-based and contiguous", async ({ store }) => {
      await store.ledger.append("log", 0, bytes(10));
      await store.ledger.append("log", 1, bytes(11));
      await store.ledger.append("log", 2, bytes(12));
      expectEqual(await store.ledger.tip("log"), 3, "tip");
      expectEqual(await drain(await store.ledger.read("log", 1)), [{ seq: 1, payload: bytes(10) }, { seq: 2, payload: bytes(11) }, { seq: 3, payload: bytes(12) }], "records");
    }),
    ex("ledger: append at the wrong expected is ConflictError { name, expected } and lands nothing", async ({ store }) => {
      await store.ledger.append("log", 0, bytes(1));
      await expectRejects(() => store.ledger.append("log", 0, bytes(2)), { error: "ConflictError", code: "conflict", name: "log", expected: 0 }, "stale expected");
      await expectRejects(() => store.ledger.append("log", 5, bytes(2)), { error: "ConflictError", code: "conflict", name: "log", expected: 5 }, "expected beyond the tip");
      expectEqual(await drain(await store.ledger.read("log", 0)), [{ seq: 1, payload: bytes(1) }], "only the first record");
    }),
    ex("ledger: absent == empty (tip 0, drained read, append at 0 creates, delete is a no-op)", async ({ store }) => {
      expectEqual(await store.ledger.tip("never"), 0, "tip of a never-written ledger");
      expectEqual(await drain(await store.ledger.read("never", 0)), [], "read of a never-written ledger");
      await store.ledger.delete("never");
      await store.ledger.append("never", 0, bytes(1));
      await store.ledger.delete("never");
      await store.ledger.delete("never");
      expectEqual(await store.ledger.tip("never"), 0, "tip after delete");
      await store.ledger.append("never", 0, bytes(2));
      expectEqual(await drain(await store.ledger.read("never", 1)), [{ seq: 1, payload: bytes(2) }], "a deleted ledger starts again at 1");
    }),
    ex("ledger: reads beyond the tip are empty, not errors", async ({ store }) => {
      await store.ledger.append("log", 0, bytes(1));
      expectEqual(await drain(await store.ledger.read("log", 2)), [], "from tip+1");
      expectEqual(await drain(await store.ledger.read("log", 1000)), [], "from far beyond");
    }),
    ex("ledger: a cursor is bounded at the tip seen when it was opened and never tails later appends", async ({ store }) => {
      for (let i = 0; i < 300; i++) await store.ledger.append("log", i, bytes(i & 0xff));
      const cursor = await store.ledger.read("log", 1);
      const first = await cursor.next();
      await store.ledger.append("log", 300, bytes(1));
      await store.ledger.append("log", 301, bytes(2));
      const rest = await drain(cursor);
      expectEqual(first?.seq, 1, "first record");
      expectEqual(rest.length, 299, "records 2..300, none of the later ones");
      expectEqual(rest[rest.length - 1]?.seq, 300, "last record seen");
    }),
    ex("ledger: a read given a cursor's life continues that life, and ends with RecordNotFoundError once the ledger was deleted", async ({ store, other }) => {
      for (let i = 0; i < 3; i++) await store.ledger.append("log", i, bytes(i + 1));
      const opened = await store.ledger.read("log", 0);
      const first = await opened.next();
      await opened.close();
      const life = opened.life;
      expectEqual(Number.isSafeInteger(life) && life >= 0, true, "a cursor names its life with a non-negative integer");
      // Another store object (another request, another process) pages on in the same life.
      const resumed = await other.ledger.read("log", first!.seq + 1, { life });
      expectEqual(resumed.life, life, "the resumed cursor reads the same life");
      expectEqual(await drain(resumed), [{ seq: 2, payload: bytes(2) }, { seq: 3, payload: bytes(3) }], "the rest of the life");
      // A delete of an absent ledger removes nothing and starts no new life: the life read before it still reads and writes.
      const absent = await store.ledger.read("never", 0);
      await absent.close();
      await store.ledger.delete("never");
      const empty = await store.ledger.read("never", 0);
      await empty.close();
      expectEqual(empty.life, absent.life, "an absent ledger keeps its life across a delete");
      expectEqual(await drain(await other.ledger.read("never", 0, { life: absent.life })), [], "a read in the life seen before the delete");
      await other.ledger.append("never", 0, bytes(7), { life: absent.life });
      expectEqual(await drain(await store.ledger.read("never", 0)), [{ seq: 1, payload: bytes(7) }], "an append in the life seen before the delete lands");
      // Deleted and written again: the old life's reader ends, it never reads the new records.
      await store.ledger.delete("log");
      await store.ledger.append("log", 0, bytes(9));
      await store.ledger.append("log", 1, bytes(8));
      await expectRejects(() => other.ledger.read("log", 2, { life }), { error: "RecordNotFoundError", code: "record_not_found", name: "log", seq: 2 }, "a read in a life the ledger left");
      await expectRejects(() => other.ledger.read("log", 0, { life }), { error: "RecordNotFoundError", code: "record_not_found", name: "log", seq: 1 }, "from 0 reads from record 1");
      const renewed = await store.ledger.read("log", 0);
      expectEqual(renewed.life !== life, true, "the rewritten ledger is another life");
      expectEqual(await drain(await other.ledger.read("log", 2, { life: renewed.life })), [{ seq: 2, payload: bytes(8) }], "the new life pages on");
      await renewed.close();
      for (const bad of [-1, 1.5, Number.NaN, "0"]) {
        await expectRejects(() => store.ledger.read("log", 0, { life: bad as number }), { error: "InvalidArgumentError", code: "invalid_argument", argument: "life" }, `life ${String(bad)}`);
      }
    }),
    ex("ledger: an append given a life lands only in that life, also when the ledger was rewritten back to the same tip", async ({ store, other }) => {
      await store.ledger.append("log", 0, bytes(1));
      const opened = await store.ledger.read("log", 0);
      const life = opened.life;
      await opened.close();
      await other.ledger.append("log", 1, bytes(2), { life });
      await store.ledger.delete("log");
      await store.ledger.append("log", 0, bytes(9));
      await store.ledger.append("log", 1, bytes(8));
      // The tip is 2 again, as the writer read it: only the life tells the new ledger from the old one.
      await expectRejects(() => other.ledger.append("log", 2, bytes(3), { life }), { error: "RecordNotFoundError", code: "record_not_found", name: "log", seq: 3 }, "an append in a life the ledger left");
      await expectRejects(() => other.ledger.append("log", 5, bytes(3), { life }), { error: "RecordNotFoundError", code: "record_not_found", name: "log", seq: 6 }, "whatever the expected tip");
      expectEqual(await drain(await store.ledger.read("log", 0)), [{ seq: 1, payload: bytes(9) }, { seq: 2, payload: bytes(8) }], "nothing landed");
      const renewed = await store.ledger.read("log", 0);
      await renewed.close();
      await other.ledger.append("log", 2, bytes(7), { life: renewed.life });
      expectEqual(await store.ledger.tip("log"), 3, "an append in the current life lands");
      for (const bad of [-1, 1.5, Number.NaN, "0"]) {
        await expectRejects(() => store.ledger.append("log", 3, bytes(1), { life: bad as number }), { error: "InvalidArgumentError", code: "invalid_argument", argument: "life" }, `life ${String(bad)}`);
      }
      expectEqual(await store.ledger.tip("log"), 3, "a refused life writes nothing");
    }),
    ex("ledger: payloads are copied in and out; zero-length payloads are legal", async ({ store }) => {
      const payload = bytes(1, 2, 3);
      await store.ledger.append("log", 0, payload);
      payload[0] = 99;
      await store.ledger.append("log", 1, new Uint8Array());
      const [one, two] = await drain(await store.ledger.read("log", 0));
      expectEqual(one?.payload, bytes(1, 2, 3), "a caller's later change to its array does not reach the ledger");
      one!.payload[1] = 99;
      expectEqual((await readRecord(store.ledger, "log", 1)).payload, bytes(1, 2, 3), "a reader's change to its copy does not reach the ledger");
      expectEqual(two?.payload, new Uint8Array(), "zero-length payload");
    }),
    ex("ledger: a payload is at most MAX_LEDGER_PAYLOAD_BYTES: exactly the limit is stored whole, one byte more is InvalidArgumentError { argument: payload } and lands nothing", async ({ store }) => {
      const atLimit = new Uint8Array(MAX_LEDGER_PAYLOAD_BYTES).map((_, i) => i % 251);
      await expectRejects(() => store.ledger.append("log", 0, new Uint8Array(MAX_LEDGER_PAYLOAD_BYTES + 1)), { error: "InvalidArgumentError", code: "invalid_argument", argument: "payload" }, "one byte over the limit");
      expectEqual(await store.ledger.tip("log"), 0, "nothing landed");
      await store.ledger.append("log", 0, atLimit);
      const stored = await readRecord(store.ledger, "log", 1);
      if (!sameBytes(stored.payload, atLimit)) fail("a payload of exactly the limit is stored whole", { bytes: atLimit.length }, { bytes: stored.payload.length });
      expectEqual(await store.ledger.tip("log"), 1, "one record");
    }),
    ex("ledger: readRecord of a missing seq is RecordNotFoundError { name, seq }", async ({ store }) => {
      await expectRejects(() => readRecord(store.ledger, "log", 1), { error: "RecordNotFoundError", code: "record_not_found", name: "log", seq: 1 }, "readRecord");
    }),
    ex("ledger: appendDefinite accepts its own record already at expected+1 and refuses other bytes", async ({ store }) => {
      await store.ledger.append("log", 0, bytes(1));
      await appendDefinite(store.ledger, "log", 0, bytes(1)); // a retry of an append that landed
      await expectRejects(() => appendDefinite(store.ledger, "log", 0, bytes(2)), { error: "ConflictError", expected: 0 }, "other bytes at seq 1");
      await expectRejects(() => appendDefinite(store.ledger, "log", 3, bytes(2)), { error: "ConflictError", expected: 3 }, "expected beyond the tip");
      expectEqual(await store.ledger.tip("log"), 1, "one record");
    }),
    ex("ledger: appendDefinite resolves an AmbiguousError by reading back, and fails closed with AppendVerifyError", async ({ store }) => {
      const ambiguousOnce = (inner: Ledger, readFails: boolean): Ledger => ({
        append: async (name, expected, payload, opts) => {
          await inner.append(name, expected, payload, opts).catch(() => undefined);
          throw new AmbiguousError(name, expected, new Error("lost ack"));
        },
        read: async (name, from, opts) => {
          if (readFails) throw new Error("network down");
          return inner.read(name, from, opts);
        },
        tip: (name, opts) => inner.tip(name, opts),
        delete: (name, opts) => inner.delete(name, opts),
      });
      await appendDefinite(ambiguousOnce(store.ledger, false), "log", 0, bytes(5)); // landed: resolved as success
      expectEqual(await store.ledger.tip("log"), 1, "the ambiguous append had landed");
      await expectRejects(() => appendDefinite(ambiguousOnce(store.ledger, true), "log", 1, bytes(6)), { error: "AppendVerifyError", code: "append_verify_failed", name: "log", seq: 2 }, "unreadable");
      const noLand: Ledger = { ...store.ledger, append: async (name, expected) => Promise.reject(new AmbiguousError(name, expected)), read: (n, f, o) => store.ledger.read(n, f, o), tip: (n, o) => store.ledger.tip(n, o), delete: (n, o) => store.ledger.delete(n, o) };
      const error = await expectRejects(() => appendDefinite(noLand, "log", 5, bytes(7)), { error: "AppendVerifyError", seq: 6 }, "ambiguous and absent");
      expectEqual(describeStorageError((error as Error).cause), { error: "RecordNotFoundError", code: "record_not_found", name: "log", seq: 6 }, "cause of a fail-closed verify");
    }),
    ex("ledger: the engine-backed ledger never reports AmbiguousError (its outcome is always definite)", async ({ store }) => {
      const outcomes = await Promise.all([0, 0, 0].map((_, i) => settleStorage(() => store.ledger.append("log", 0, bytes(i)))));
      for (const outcome of outcomes) if (!outcome.ok && !(outcome.error instanceof ConflictError)) fail("only success or ConflictError", "ConflictError", outcome.error);
    }),
    // ---------------------------------------------------------- leases
    ex("lease: acquire while a live holder exists is LeaseHeldError { name, holderEpoch }", async ({ store, other }) => {
      const lease = await store.leaser.acquire("job");
      expectEqual(lease.epoch, 1, "first epoch");
      await expectRejects(() => other.leaser.acquire("job"), { error: "LeaseHeldError", code: "lease_held", name: "job", holderEpoch: 1 }, "second acquirer");
      await lease.release();
    }),
    ex("lease: a later grant has a strictly greater epoch (after release and after expiry)", async ({ store, other, time }) => {
      const a = await store.leaser.acquire("job");
      await a.release();
      const b = await other.leaser.acquire("job");
      time.now += 10_000; // b stalls past its expiry: no renewal ran
      const c = await store.leaser.acquire("job");
      expectEqual([a.epoch, b.epoch, c.epoch], [1, 2, 3], "epochs");
      await b.release();
      await c.release();
    }),
    ex("lease: the signal aborts once on release, with LeaseLostError; release is idempotent", async ({ store }) => {
      const lease = await store.leaser.acquire("job");
      let aborts = 0;
      lease.signal.addEventListener("abort", () => {
        aborts++;
      });
      await lease.release();
      await lease.release();
      expectEqual(aborts, 1, "abort events");
      expectEqual(describeStorageError(lease.signal.reason), { error: "LeaseLostError", code: "lease_lost", name: "job", epoch: 1 }, "abort reason");
      await store.leaser.acquire("job").then((next) => next.release());
    }),
    ex("lease: renewals keep a live holder; the signal aborts on takeover after a stall", async ({ store, other, time, scheduler }) => {
      const lease = await store.leaser.acquire("job");
      await scheduler.advance(20_000); // renewals every second keep it for 20 s
      expectEqual(lease.signal.aborted, false, "renewed holder still holds");
      await store.leaser.assertHeld("job", lease.epoch);
      time.now += 5_000; // the holder stalls past its ttl
      const taker = await other.leaser.acquire("job");
      await scheduler.advance(1); // the stalled holder's timer finally runs
      expectEqual(lease.signal.aborted, true, "the stalled holder learned it lost the lease");
      await expectRejects(() => store.leaser.assertHeld("job", lease.epoch), { error: "LeaseLostError", code: "lease_lost", name: "job", epoch: lease.epoch }, "fenced old epoch");
      await taker.release();
    }),
    ex("lease: the holder gives up at its own expiry when it cannot renew", async ({ store, time, scheduler }) => {
      const lease = await store.leaser.acquire("job");
      time.now += 3_000; // exactly its expiry, before any renewal ran
      await scheduler.advance(0);
      expectEqual(lease.signal.aborted, true, "expired holder aborted");
    }),
    ex("lease: releasing an old epoch never frees a later holder", async ({ store, other, time }) => {
      const old = await store.leaser.acquire("job");
      time.now += 10_000;
      const current = await other.leaser.acquire("job");
      await old.release();
      await other.leaser.assertHeld("job", current.epoch);
      await expectRejects(() => store.leaser.acquire("job"), { error: "LeaseHeldError", holderEpoch: current.epoch }, "still held by the later holder");
      await current.release();
    }),
    ex("lease: a write fenced by a lost epoch fails with LeaseLostError and writes nothing", async ({ store, other, time }) => {
      const { lease, fence, lost } = await fencedHolder(store);
      time.now += 10_000;
      const taker = await other.leaser.acquire("job");
      await expectRejects(() => store.ledger.append("out", 1, bytes(2), { fence }), lost, "fenced append");
      await expectRejects(() => store.kv.put("state", 1, bytes(2), { fence }), lost, "fenced put");
      expectEqual(await store.ledger.tip("out"), 1, "nothing appended");
      expectEqual((await store.kv.get("state")).value, bytes(1), "nothing put");
      await store.ledger.append("out", 1, bytes(3), { fence: { lease: "job", epoch: taker.epoch } });
      await taker.release();
      await lease.release();
    }),
    ex("lease: a grant expires at acquire time + ttl exactly: 1 ms before, the holder holds and a competitor is refused; at that instant, the holder's fenced writes are LeaseLostError and a competitor is granted", async ({ store, other, time }) => {
      const grantedAt = time.now;
      const lease = await store.leaser.acquire("job"); // ttl 3 s, and no renewal runs: the scheduler is never advanced
      const fence = { lease: "job", epoch: lease.epoch };
      const lost = { error: "LeaseLostError", code: "lease_lost", name: "job", epoch: 1 };

      time.now = grantedAt + 3_000 - 1;
      await store.leaser.assertHeld("job", lease.epoch);
      await store.ledger.append("out", 0, bytes(1), { fence });
      await store.kv.put("state", 0, bytes(1), { fence });
      await expectRejects(() => other.leaser.acquire("job"), { error: "LeaseHeldError", code: "lease_held", name: "job", holderEpoch: 1 }, "a competitor 1 ms before expiry");

      time.now = grantedAt + 3_000;
      await expectRejects(() => store.ledger.append("out", 1, bytes(2), { fence }), lost, "fenced append at the expiry instant");
      await expectRejects(() => store.kv.put("state", 1, bytes(2), { fence }), lost, "fenced put at the expiry instant");
      await expectRejects(() => store.leaser.assertHeld("job", lease.epoch), lost, "assertHeld at the expiry instant");
      const taker = await other.leaser.acquire("job");
      expectEqual(taker.epoch, 2, "the competitor is granted at the expiry instant");
      expectEqual([await store.ledger.tip("out"), (await store.kv.get("state")).value], [1, bytes(1)], "only the writes made before expiry landed");
      await taker.release();
      await lease.release();
    }),
    ex("lease: a fenced ledger.delete or kv.delete by a holder whose lease expired or was taken over is LeaseLostError and deletes nothing", async ({ store, other, time }) => {
      const { lease, fence, lost } = await fencedHolder(store);

      time.now += 10_000; // the holder stalled past its expiry; nobody else holds the lease
      await expectRejects(() => store.ledger.delete("out", { fence }), lost, "fenced ledger.delete after expiry");
      await expectRejects(() => store.kv.delete("state", { fence }), lost, "fenced kv.delete after expiry");
      const taker = await other.leaser.acquire("job");
      await expectRejects(() => store.ledger.delete("out", { fence }), lost, "fenced ledger.delete after takeover");
      await expectRejects(() => store.kv.delete("state", { fence }), lost, "fenced kv.delete after takeover");
      expectEqual(await drain(await store.ledger.read("out", 1)), [{ seq: 1, payload: bytes(1) }], "the ledger is untouched");
      expectEqual((await store.kv.get("state")).value, bytes(1), "the key is untouched");

      const current = { lease: "job", epoch: taker.epoch }; // the live holder's fenced deletes do delete
      await store.ledger.delete("out", { fence: current });
      await store.kv.delete("state", { fence: current });
      expectEqual([await store.ledger.tip("out"), await store.kv.keys("")], [0, []], "deleted by the live holder");
      await taker.release();
      await lease.release();
    }),
    // ---------------------------------------------------------- KV
    ex("kv: put with expectedRev 0 requires the key to be absent; a mismatch is RevisionConflictError", async ({ store }) => {
      const rev = await store.kv.put("k", 0, bytes(1));
      await expectRejects(() => store.kv.put("k", 0, bytes(2)), { error: "RevisionConflictError", code: "revision_conflict", key: "k", expectedRev: 0, actualRev: rev }, "create over an existing key");
      await expectRejects(() => store.kv.put("k", rev + 1, bytes(2)), { error: "RevisionConflictError", key: "k", expectedRev: rev + 1, actualRev: rev }, "wrong revision");
      await expectRejects(() => store.kv.put("absent", 3, bytes(2)), { error: "RevisionConflictError", key: "absent", expectedRev: 3, actualRev: 0 }, "update of an absent key");
      expectEqual(await store.kv.get("k"), { value: bytes(1), rev }, "unchanged");
    }),
    ex("kv: revisions strictly increase per key, also across delete and re-create", async ({ store }) => {
      const r1 = await store.kv.put("k", 0, bytes(1));
      const r2 = await store.kv.put("k", r1, bytes(2));
      await store.kv.delete("k");
      const r3 = await store.kv.put("k", 0, bytes(3));
      if (!(r1 < r2 && r2 < r3)) fail("revisions strictly increasing", "r1 < r2 < r3", [r1, r2, r3]);
    }),
    ex("kv: get of an absent key is KeyNotFoundError { key }; delete is idempotent", async ({ store }) => {
      await expectRejects(() => store.kv.get("nope"), { error: "KeyNotFoundError", code: "key_not_found", key: "nope" }, "get");
      await store.kv.delete("nope");
      await store.kv.put("k", 0, bytes(1));
      await store.kv.delete("k");
      await store.kv.delete("k");
      await expectRejects(() => store.kv.get("k"), { error: "KeyNotFoundError", key: "k" }, "get after delete");
    }),
    ex("kv: keys(prefix) is sorted and duplicate-free", async ({ store }) => {
      for (const key of ["b/2", "a", "b/1", "b", "c/x", "b/10"]) await store.kv.put(key, 0, bytes(1));
      const rev = (await store.kv.get("b/1")).rev;
      await store.kv.put("b/1", rev, bytes(2));
      expectEqual(await store.kv.keys(""), ["a", "b", "b/1", "b/10", "b/2", "c/x"], "all keys");
      expectEqual(await store.kv.keys("b/"), ["b/1", "b/10", "b/2"], "prefix b/");
      expectEqual(await store.kv.keys("b/1"), ["b/1", "b/10"], "prefix b/1");
    }),
    ex("kv: a value is at most MAX_KV_VALUE_BYTES (1 MiB): one byte more is InvalidArgumentError { argument: value } and changes nothing; exactly the limit is accepted", async ({ store }) => {
      const atLimit = new Uint8Array(MAX_KV_VALUE_BYTES).map((_, i) => i % 251);
      const over = new Uint8Array(MAX_KV_VALUE_BYTES + 1);
      const tooLarge = { error: "InvalidArgumentError", code: "invalid_argument", argument: "value" };
      await expectRejects(() => store.kv.put("big", 0, over), tooLarge, "create one byte over the limit");
      expectEqual(await store.kv.keys(""), [], "nothing created");
      const rev = await store.kv.put("big", 0, bytes(1));
      await expectRejects(() => store.kv.put("big", rev, over), tooLarge, "update one byte over the limit");
      expectEqual(await store.kv.get("big"), { value: bytes(1), rev }, "value and revision unchanged");
      const next = await store.kv.put("big", rev, atLimit); // still at `rev`: the refused update moved nothing
      const stored = await store.kv.get("big");
      if (stored.rev !== next || !sameBytes(stored.value, atLimit)) {
        fail("a value of exactly the limit is stored whole", { rev: next, bytes: atLimit.length }, { rev: stored.rev, bytes: stored.value.length });
      }
    }),
    // ---------------------------------------------------------- blobs
    ex("blobs: the same bytes again is a no-op success; different bytes are BlobConflictError and the original stays", async ({ store }) => {
      const content = new Uint8Array(BLOB_CHUNK_BYTES * 2 + 17).map((_, i) => i % 251);
      await store.blobs.put("snap/1", content);
      await store.blobs.put("snap/1", content);
      const changed = content.slice();
      changed[BLOB_CHUNK_BYTES + 3] = 0;
      await expectRejects(() => store.blobs.put("snap/1", changed), { error: "BlobConflictError", code: "blob_conflict", key: "snap/1" }, "different content");
      expectEqual(await readAll(await store.blobs.get("snap/1")), content, "original untouched");
    }),
    ex("blobs: content is stored in chunks of at most BLOB_CHUNK_BYTES and read back as a stream", async ({ store }) => {
      const content = new Uint8Array(BLOB_CHUNK_BYTES * 3 + 1).map((_, i) => (i * 7) % 256);
      await store.blobs.put("big", content);
      const stream: ByteStream = await store.blobs.get("big");
      const reader = stream.getReader();
      const sizes: number[] = [];
      for (let step = await reader.read(); !step.done; step = await reader.read()) sizes.push(step.value.length);
      expectEqual(sizes, [BLOB_CHUNK_BYTES, BLOB_CHUNK_BYTES, BLOB_CHUNK_BYTES, 1], "chunk sizes");
    }),
    ex("blobs: a stream read while its blob is deleted or replaced errors with BlobNotFoundError rather than mixing contents", async ({ store }) => {
      const old = new Uint8Array(BLOB_CHUNK_BYTES * 2 + 1).fill(1); // three chunks
      const replacement = new Uint8Array(BLOB_CHUNK_BYTES * 2 + 1).fill(2);
      const notFound = { error: "BlobNotFoundError", code: "blob_not_found", key: "snap/1" };
      const openAndReadFirstChunk = async (what: string): Promise<ByteStreamReader> => {
        const reader = ((await store.blobs.get("snap/1")) as ByteStream).getReader();
        const step = await reader.read();
        if (step.done || !sameBytes(step.value, old.subarray(0, BLOB_CHUNK_BYTES))) fail(`${what}: the first chunk is the old content's`, old.subarray(0, BLOB_CHUNK_BYTES), step);
        return reader;
      };

      await store.blobs.put("snap/1", old);
      const deletedWhileRead = await openAndReadFirstChunk("deleted");
      await store.blobs.delete("snap/1");
      await expectRejects(() => deletedWhileRead.read(), notFound, "the next chunk of a deleted blob");

      await store.blobs.put("snap/1", old);
      const replacedWhileRead = await openAndReadFirstChunk("replaced");
      await store.blobs.delete("snap/1");
      await store.blobs.put("snap/1", replacement);
      await expectRejects(() => replacedWhileRead.read(), notFound, "the next chunk of a replaced blob (never the new content's)");
      expectEqual(await contentAddress(await readAll(await store.blobs.get("snap/1"))), await contentAddress(replacement), "a new read sees the replacement whole");
    }),
    ex("blobs: an empty blob, given as bytes or as a stream, reads back as a stream of no chunks; the same empty content again is a no-op", async ({ store }) => {
      const emptyStream = () => newByteStream({ pull: async (controller) => controller.close() });
      await store.blobs.put("empty/bytes", new Uint8Array());
      await store.blobs.put("empty/stream", emptyStream());
      for (const key of ["empty/bytes", "empty/stream"]) {
        const reader = ((await store.blobs.get(key)) as ByteStream).getReader();
        const sizes: number[] = [];
        for (let step = await reader.read(); !step.done; step = await reader.read()) sizes.push(step.value.length);
        expectEqual(sizes, [], `${key}: no chunks`);
        expectEqual(await readAll(await store.blobs.get(key)), new Uint8Array(), `${key}: read back empty`);
      }
      await store.blobs.put("empty/bytes", new Uint8Array());
      await store.blobs.put("empty/bytes", emptyStream());
      await store.blobs.put("empty/stream", new Uint8Array());
      await expectRejects(() => store.blobs.put("empty/bytes", bytes(0)), { error: "BlobConflictError", code: "blob_conflict", key: "empty/bytes" }, "one zero byte is other content");
      expectEqual(await store.blobs.list("empty/"), ["empty/bytes", "empty/stream"], "both stored");
      expectEqual(await readAll(await store.blobs.get("empty/bytes")), new Uint8Array(), "still empty");
    }),
    ex("blobs: get of an absent key is BlobNotFoundError; delete is idempotent; list(prefix) is sorted", async ({ store }) => {
      await expectRejects(() => store.blobs.get("nope"), { error: "BlobNotFoundError", code: "blob_not_found", key: "nope" }, "get");
      await store.blobs.delete("nope");
      for (const key of ["s/b", "s/a", "t"]) await store.blobs.put(key, bytes(1));
      await store.blobs.delete("t");
      await store.blobs.delete("t");
      expectEqual(await store.blobs.list(""), ["s/a", "s/b"], "list");
      expectEqual(await store.blobs.list("s/"), ["s/a", "s/b"], "list s/");
    }),
    ex("blobs: contentAddress is the SHA-256 hex of the bytes (streams too)", async () => {
      expectEqual(await contentAddress(new Uint8Array()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "empty");
      expectEqual(await contentAddress(bytes(0x61, 0x62, 0x63)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "abc");
    }),
    // ---------------------------------------------------------- copies
    ex("copies: ledger payloads, KV values and blob content are copied in and out, also from a Uint8Array whose slice() shares memory (like Node's Buffer)", async ({ store }) => {
      const payload = SharedSliceBytes.from([1, 2, 3]);
      await store.ledger.append("log", 0, payload);
      payload.fill(9);
      const [record] = await drain(await store.ledger.read("log", 1));
      expectEqual(record?.payload, bytes(1, 2, 3), "ledger: a caller's later change to its array does not reach the record");
      record!.payload.fill(8);
      expectEqual((await readRecord(store.ledger, "log", 1)).payload, bytes(1, 2, 3), "ledger: a reader's change to its copy does not reach the record");

      const value = SharedSliceBytes.from([4, 5]);
      const rev = await store.kv.put("k", 0, value);
      value.fill(9);
      const entry = await store.kv.get("k");
      expectEqual(entry, { value: bytes(4, 5), rev }, "kv: a caller's later change to its array does not reach the value");
      entry.value.fill(8);
      expectEqual(await store.kv.get("k"), { value: bytes(4, 5), rev }, "kv: a reader's change to its copy does not reach the value");

      const original = new Uint8Array(BLOB_CHUNK_BYTES + 5).map((_, i) => i % 251);
      const content = SharedSliceBytes.from(original);
      await store.blobs.put("snap/1", content);
      content.fill(9);
      const got: ByteStream = await store.blobs.get("snap/1");
      const reader = got.getReader();
      const read: Uint8Array[] = [];
      for (let step = await reader.read(); !step.done; step = await reader.read()) read.push(step.value);
      expectEqual(read.map((chunk) => chunk.length), [BLOB_CHUNK_BYTES, 5], "blobs: chunk sizes");
      for (const chunk of read) chunk.fill(8);
      expectEqual(await readAll(await store.blobs.get("snap/1")), original, "blobs: the content is unchanged by the caller's and the reader's changes");
      await store.blobs.put("snap/1", original); // the same bytes again: a no-op, not a conflict

      // A stream whose producer reuses one array for every chunk: each chunk is copied when it is read.
      const reused = new SharedSliceBytes(3);
      let pulls = 0;
      const stream = newByteStream({
        pull: async (controller) => {
          if (pulls === 2) return controller.close();
          reused.fill(++pulls);
          controller.enqueue(reused);
        },
      });
      await store.blobs.put("snap/2", stream);
      expectEqual(await readAll(await store.blobs.get("snap/2")), bytes(1, 1, 1, 2, 2, 2), "blobs: a streamed chunk is copied when it is read");
    }),
    // ---------------------------------------------------------- options
    ex("options: an aborted call rejects with the signal's reason and changes nothing", async ({ store }) => {
      const reason = new Error("stop");
      const signal = { aborted: true, reason, addEventListener: () => undefined, removeEventListener: () => undefined };
      for (const call of [
        () => store.ledger.append("log", 0, bytes(1), { signal }),
        () => store.kv.put("k", 0, bytes(1), { signal }),
        () => store.blobs.put("b", bytes(1), { signal }),
        () => store.leaser.acquire("job", { signal }),
      ]) {
        const outcome = await settleStorage(call);
        if (outcome.ok || outcome.error !== reason) fail("rejects with the reason", "the reason", outcome);
      }
      expectEqual([await store.ledger.tip("log"), await store.kv.keys(""), await store.blobs.list("")], [0, [], []], "nothing changed");
      await store.leaser.acquire("job").then((lease) => lease.release());
    }),
    ex("options: an already-aborted signal on blobs.get, blobs.delete, blobs.list, leaser.assertHeld and lease.release rejects with its reason and changes nothing", async ({ store, other }) => {
      await store.blobs.put("b", bytes(1, 2));
      const lease = await store.leaser.acquire("job");
      const reason = new Error("stop");
      const controller = newAbortController();
      controller.abort(reason);
      const { signal } = controller;
      const calls: [string, () => unknown][] = [
        ["blobs.get", () => store.blobs.get("b", { signal })],
        ["blobs.delete", () => store.blobs.delete("b", { signal })],
        ["blobs.list", () => store.blobs.list("", { signal })],
        ["leaser.assertHeld", () => store.leaser.assertHeld("job", lease.epoch, { signal })],
        ["lease.release", () => lease.release({ signal })],
      ];
      for (const [what, call] of calls) {
        const outcome = await settleStorage(call);
        if (outcome.ok || outcome.error !== reason) fail(`${what} rejects with the signal's reason`, "the reason", outcome);
      }
      expectEqual(await readAll(await store.blobs.get("b")), bytes(1, 2), "the blob is still there");
      expectEqual(lease.signal.aborted, false, "the holder's signal did not abort: it still holds");
      await store.leaser.assertHeld("job", lease.epoch);
      await expectRejects(() => other.leaser.acquire("job"), { error: "LeaseHeldError", holderEpoch: lease.epoch }, "the lease is still held");
      await lease.release();
      await other.leaser.acquire("job").then((next) => next.release());
    }),
    // ---------------------------------------------------------- composite
    ex("composite: missing parts are named in field order; requireOrderedIndex", async ({ store }) => {
      await expectRejects(
        () => createComposite({ ledger: undefined, leaser: store.leaser, kv: undefined, blobs: undefined } as unknown as Parameters<typeof createComposite>[0]),
        { error: "IncompleteCompositeError", code: "incomplete_composite", missing: ["Ledger", "KV", "Blobs"] },
        "incomplete",
      );
      const bare = createComposite({ ledger: store.ledger, leaser: store.leaser, kv: store.kv, blobs: store.blobs });
      expectEqual(bare.orderedIndex, undefined, "no ordered index");
      await expectRejects(() => bare.requireOrderedIndex(), { error: "IncompleteCompositeError", missing: ["OrderedIndex"] }, "requireOrderedIndex");
      if (store.requireOrderedIndex() === undefined) fail("createStore wires an ordered index", "an OrderedIndex", undefined);
    }),
    ex("composite: an orderedIndex property that is undefined or null is missing (the constructor WITH an ordered index requires it); missing parts keep field order", async ({ store }) => {
      type Parts = Parameters<typeof createComposite>[0];
      const { ledger, leaser, kv, blobs } = store;
      const index = store.requireOrderedIndex();
      for (const absent of [undefined, null]) {
        await expectRejects(
          () => createComposite({ ledger, leaser, kv, blobs, orderedIndex: absent } as unknown as Parts),
          { error: "IncompleteCompositeError", code: "incomplete_composite", missing: ["OrderedIndex"] },
          `orderedIndex: ${String(absent)}`,
        );
        await expectRejects(
          () => createComposite({ orderedIndex: absent, blobs: undefined, kv, leaser: null, ledger } as unknown as Parts),
          { error: "IncompleteCompositeError", missing: ["Leaser", "Blobs", "OrderedIndex"] },
          `several parts missing, orderedIndex: ${String(absent)}`,
        );
        await expectRejects(
          () => createComposite({ ledger: absent, leaser: absent, kv: absent, blobs: absent, orderedIndex: absent } as unknown as Parts),
          { error: "IncompleteCompositeError", missing: ["Ledger", "Leaser", "KV", "Blobs", "OrderedIndex"] },
          `every part ${String(absent)}`,
        );
      }
      await expectRejects(() => createComposite({ kv: undefined, ledger, leaser, blobs } as unknown as Parts), { error: "IncompleteCompositeError", missing: ["KV"] }, "no orderedIndex property: not asked for");
      expectEqual(createComposite({ ledger, leaser, kv, blobs }).orderedIndex, undefined, "no orderedIndex property: a composite without one");
      const full = createComposite({ ledger, leaser, kv, blobs, orderedIndex: index });
      if (full.requireOrderedIndex() !== index) fail("requireOrderedIndex answers the index given", "the index", full.orderedIndex);
    }),
  ];
}
