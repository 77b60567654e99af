/**
 * The readable half of the queue conformance suite: one example per rule of
 * `event-queue.lean.txt` (and of the ledger-backed variant), each asserting
 * concrete values.
 */
import { MAX_IDEM_KEY_LENGTH, MAX_QUEUE_PAYLOAD_BYTES } from "../queue/checks.js";
import { QueueReplayError } from "../queue/durable.js";
import { EventQueue } from "../queue/event-queue.js";
import { IDEM_WINDOW_MS, type QueueLane } from "../queue/state.js";
import { AmbiguousError, AppendVerifyError, StorageBackendError, StorageError } from "../storage/errors.js";
import type { Ledger } from "../storage/ledger.js";
import type { CallOptions } from "../storage/options.js";
import { createStore } from "../storage/store.js";
import { utf8Encode } from "../storage/web.js";
import type { ConformanceCase } from "./journal-conformance.js";
import type { QueueConformanceOptions } from "./queue-conformance.js";
import { describeStorageError, renderStorage, sameStorage, settleStorage } from "./storage-compare.js";
import { SharedSliceBytes } from "./storage-examples.js";

const T0 = 1_700_000_000_000;
const HOUR = 60 * 60 * 1000;
const p = (...values: number[]) => new Uint8Array(values);

function expectEqual(actual: unknown, expected: unknown, what: string): void {
  if (!sameStorage(actual, expected)) {
    throw new Error(`${what}\n  expected: ${renderStorage(expected)}\n  actual:   ${renderStorage(actual)}`);
  }
}

/** A queue record as written before records carried a nonce: length, JSON header, payload. */
function legacyRecord(header: object, payload = new Uint8Array()): Uint8Array {
  const text = utf8Encode(JSON.stringify(header));
  const bytes = new Uint8Array(4 + text.length + payload.length);
  new DataView(bytes.buffer).setUint32(0, text.length);
  bytes.set(text, 4);
  bytes.set(payload, 4 + text.length);
  return bytes;
}

/** The faults {@link lossyLedger} injects. */
export interface LedgerFaults {
  /** The next append reports `AmbiguousError` (then this is cleared). */
  ambiguous: boolean;
  /** Whether that append commits first. */
  lands: boolean;
  /** How many of the next reads fail. */
  failReads: number;
}

/**
 * A ledger with the faults of a networked one, switched on per call: the next
 * append can commit (or not) and still report `AmbiguousError` (its reply was
 * lost), and the next `failReads` reads fail (the read that would verify it).
 */
export function lossyLedger(inner: Ledger, faults: LedgerFaults = { ambiguous: false, lands: true, failReads: 0 }): { ledger: Ledger; faults: LedgerFaults } {
  const ledger: Ledger = {
    append: async (name, expected, payload, opts) => {
      if (!faults.ambiguous) return inner.append(name, expected, payload, opts);
      faults.ambiguous = false;
      if (faults.lands) await inner.append(name, expected, payload, opts);
      throw new AmbiguousError(name, expected, new Error("reply lost"));
    },
    read: async (name, from, opts) => {
      if (faults.failReads > 0) {
        faults.failReads--;
        throw new StorageBackendError("ledger.read", new Error("connection reset"));
      }
      return inner.read(name, from, opts);
    },
    tip: (name, opts) => inner.tip(name, opts),
    delete: (name, opts) => inner.delete(name, opts),
  };
  return { ledger, faults };
}

/** Every read fails until the call ends: no verification can succeed within it. */
export const ALL_READS = 1_000;

function plainCase(label: string, name: string, body: () => Promise<void> | void): ConformanceCase {
  return {
    name,
    timeoutMs: 30_000,
    run: async () => {
      try {
        await body();
      } catch (error) {
        if (error instanceof Error) error.message = `queue example (${label}) "${name}": ${error.message}`;
        throw error;
      }
    },
  };
}

/** The queue examples. */
export function queueExampleCases(options: QueueConformanceOptions): ConformanceCase[] {
  const ex = (name: string, body: () => Promise<void> | void) => plainCase(options.label, name, body);
  const withLedger = (name: string, body: (ledger: () => Ledger) => Promise<void>) =>
    ex(name, async () => {
      const subject = await options.createSubject();
      let engine = subject.engine;
      try {
        await body(() => createStore(engine, { name: "queues" }).ledger);
        engine = subject.reopen ? await subject.reopen() : engine;
      } finally {
        await subject.close();
      }
    });
  return [
    ex("a key already seen is admitted (not shed), counted as a duplicate, and queued once", () => {
      const queue = new EventQueue("signal", 10);
      expectEqual([queue.enqueue("k", p(1), T0), queue.enqueue("k", p(2), T0 + 1)], ["admit", "admit"], "verdicts");
      expectEqual(queue.len(), 1, "queued once");
      expectEqual(queue.consume(), { id: 1, key: "k", payload: p(1) }, "the first payload");
      expectEqual(queue.enqueue("k", p(3), T0 + 2), "admit", "seen outlives consumption");
      expectEqual(queue.consume(), undefined, "never handed out twice");
      expectEqual(queue.stats(), { signal_enqueued: 1, signal_consumed: 1, signal_shed: 0, signal_duplicates: 2 }, "stats");
    }),
    ex("a full lane sheds, and a shed key is not remembered (its retry is not a duplicate)", () => {
      const queue = new EventQueue("approval", 1);
      expectEqual([queue.enqueue("a", p(), T0), queue.enqueue("b", p(), T0)], ["admit", "shed"], "second is shed");
      queue.consume();
      expectEqual(queue.enqueue("b", p(), T0 + 1), "admit", "the retry is admitted");
      expectEqual(queue.consume()?.key, "b", "and queued");
      expectEqual(queue.stats(), { approval_enqueued: 2, approval_consumed: 2, approval_shed: 1, approval_duplicates: 0 }, "stats");
    }),
    ex("a duplicate is admitted even when the lane is full (dedup before admission)", () => {
      const queue = new EventQueue("repair", 1);
      queue.enqueue("a", p(), T0);
      expectEqual(queue.enqueue("a", p(), T0), "admit", "duplicate into a full lane");
      expectEqual(queue.stats().repair_shed, 0, "not shed");
    }),
    ex("consume hands items out in admission order", () => {
      const queue = new EventQueue("signal", 10);
      for (const key of ["c", "a", "b"]) queue.enqueue(key, p(), T0);
      expectEqual([queue.consume()?.key, queue.consume()?.key, queue.consume()?.key, queue.consume()], ["c", "a", "b", undefined], "order");
      expectEqual([queue.len(), queue.isEmpty()], [0, true], "empty");
    }),
    ex("remembered keys older than IDEM_WINDOW_MS (6 h) are evicted before admission", () => {
      const queue = new EventQueue("signal", 10);
      queue.enqueue("k", p(1), T0);
      queue.consume();
      expectEqual(queue.enqueue("k", p(2), T0 + IDEM_WINDOW_MS), "admit", "at exactly 6 h it is still a duplicate");
      expectEqual(queue.len(), 0, "not queued");
      queue.enqueue("k", p(3), T0 + IDEM_WINDOW_MS + 1);
      expectEqual(queue.consume()?.payload, p(3), "past 6 h it is new again");
      expectEqual(IDEM_WINDOW_MS, 6 * HOUR, "the window");
    }),
    ex("no key is evicted by a call whose now is below the previous call's (the clock went backwards); the next call not below its predecessor evicts again", () => {
      const queue = new EventQueue("signal", 10);
      queue.enqueue("a", p(1), T0);
      queue.enqueue("b", p(), T0 + 10 * HOUR); // "a" is past the window, but still queued: kept
      queue.consume();
      queue.consume();
      // 9 h after "a" was admitted, but below the previous call's reading (10 h): nothing is evicted.
      expectEqual(queue.enqueue("a", p(2), T0 + 9 * HOUR), "admit", "verdict");
      expectEqual([queue.len(), queue.stats().signal_duplicates], [0, 1], "still remembered: a duplicate, not queued again");
      // The same reading again is not below its predecessor's: eviction resumes, by this call's now.
      queue.enqueue("a", p(3), T0 + 9 * HOUR);
      expectEqual(queue.consume()?.payload, p(3), "past the window, and the clock did not go back: new again");
    }),
    withLedger("one far-future reading does not switch eviction off (in memory, and ledger-backed reopened before every call)", async (ledger) => {
      const memory = new EventQueue("signal", 10);
      const reopened = () => EventQueue.fromLedger(ledger(), "q/clock", "signal", 10);
      const kinds = [
        ["in memory", async () => memory],
        ["ledger-backed, reopened before every call", reopened],
      ] as const;
      for (const [kind, queue] of kinds) {
        const enqueue = async (key: string, byte: number, now: number) => (await queue()).enqueue(key, p(byte), now);
        const consume = async () => (await (await queue()).consume())?.key;
        expectEqual(
          [await enqueue("a", 1, T0), await enqueue("typo", 2, T0 * 1000), await enqueue("b", 3, T0 + HOUR)],
          ["admit", "admit", "admit"],
          `${kind}: a, then one reading in microseconds, then b (the clock went back: nothing evicted)`,
        );
        expectEqual([await consume(), await consume(), await consume()], ["a", "typo", "b"], `${kind}: consumed`);
        // Not below its predecessor (T0 + 1 h): "a", admitted 7 h before, is evicted though "typo" is far ahead.
        expectEqual([await enqueue("a", 4, T0 + 7 * HOUR), (await queue()).len()], ["admit", 1], `${kind}: a is new again`);
        // "b" is exactly 6 h old: still remembered.
        expectEqual([await enqueue("b", 5, T0 + 7 * HOUR), (await queue()).len()], ["admit", 1], `${kind}: b is a duplicate`);
        expectEqual([await enqueue("b", 6, T0 + 7 * HOUR + 1), (await queue()).len()], ["admit", 2], `${kind}: a millisecond later, b is new again`);
        expectEqual([await consume(), await consume(), await consume()], ["a", "b", undefined], `${kind}: each once`);
        expectEqual((await queue()).stats(), { signal_enqueued: 5, signal_consumed: 5, signal_shed: 0, signal_duplicates: 1 }, `${kind}: stats`);
      }
    }),
    ex("a key whose item is still queued is never evicted, so it cannot reach the consumer twice", () => {
      const queue = new EventQueue("signal", 10);
      queue.enqueue("k", p(1), T0);
      expectEqual(queue.enqueue("k", p(2), T0 + 7 * HOUR), "admit", "verdict");
      expectEqual(queue.len(), 1, "one item");
      queue.consume();
      expectEqual(queue.consume(), undefined, "handed out once");
    }),
    ex("lanes differ only in their stats names", () => {
      for (const lane of ["signal", "approval", "repair"] as const) {
        const queue = new EventQueue(lane, 1);
        queue.enqueue("a", p(), T0);
        queue.enqueue("a", p(), T0);
        queue.enqueue("b", p(), T0);
        queue.consume();
        expectEqual(queue.stats(), { [`${lane}_enqueued`]: 1, [`${lane}_consumed`]: 1, [`${lane}_shed`]: 1, [`${lane}_duplicates`]: 1 }, lane);
      }
    }),
    ex("bad input is InvalidArgumentError (a StorageError) and changes nothing", async () => {
      const queue = new EventQueue("signal", 1);
      for (const [call, argument] of [
        [() => queue.enqueue("", p(), T0), "key"],
        [() => queue.enqueue("k", "text" as unknown as Uint8Array, T0), "payload"],
        [() => queue.enqueue("k", p(), Number.NaN), "now"],
        [() => new EventQueue("bulk" as "signal", 1), "lane"],
        [() => new EventQueue("signal", -1), "capacity"],
      ] as const) {
        const outcome = await settleStorage(call);
        expectEqual(outcome.ok ? "resolved" : describeStorageError(outcome.error), { error: "InvalidArgumentError", code: "invalid_argument", argument }, argument);
      }
      expectEqual([queue.len(), queue.stats().signal_enqueued], [0, 0], "nothing changed");
    }),
    withLedger("now is a safe integer of epoch ms: a fractional now, or one past MAX_SAFE_INTEGER, is InvalidArgumentError { argument: now } for both queue kinds and changes nothing", async (ledger) => {
      const tip = () => ledger().tip("q/now");
      const memory = new EventQueue("signal", 10);
      const durable = await EventQueue.fromLedger(ledger(), "q/now", "signal", 10);
      for (const [kind, queue] of [["in memory", memory], ["ledger-backed", durable]] as const) {
        for (const now of [1.5, T0 + 0.5, Number.MAX_SAFE_INTEGER + 2, Number.POSITIVE_INFINITY]) {
          const before = [queue.len(), queue.stats(), await tip()];
          const outcome = await settleStorage(() => queue.enqueue("k", p(1), now));
          expectEqual(outcome.ok ? "resolved" : describeStorageError(outcome.error), { error: "InvalidArgumentError", code: "invalid_argument", argument: "now" }, `${kind}: now ${now}`);
          expectEqual([queue.len(), queue.stats(), await tip()], before, `${kind}: now ${now} changed nothing`);
        }
        expectEqual(await queue.enqueue("k", p(2), Number.MAX_SAFE_INTEGER), "admit", `${kind}: now MAX_SAFE_INTEGER is accepted`);
        expectEqual(await queue.consume(), { id: 1, key: "k", payload: p(2) }, `${kind}: the key was not remembered by a refused call`);
      }
    }),
    withLedger("ledger-backed: a restart rebuilds items, remembered keys and counters by replaying the ledger", async (ledger) => {
      const queue = await EventQueue.fromLedger(ledger(), "q/main", "repair", 2);
      await queue.enqueue("a", p(1), T0);
      await queue.enqueue("b", p(2), T0);
      await queue.enqueue("c", p(3), T0); // shed
      await queue.enqueue("a", p(9), T0); // duplicate
      expectEqual(await queue.consume(), { id: 1, key: "a", payload: p(1) }, "consumed before the restart");
      const again = await EventQueue.fromLedger(ledger(), "q/main", "repair", 2);
      expectEqual(again.stats(), queue.stats(), "counters");
      expectEqual(await again.enqueue("a", p(), T0 + 1), "admit", "a is still remembered");
      expectEqual(again.len(), 1, "and not queued again");
      expectEqual(await again.consume(), { id: 2, key: "b", payload: p(2) }, "b survived the restart");
    }),
    ex("payloads are copied in and out, also from a Uint8Array whose slice() shares memory", () => {
      const queue = new EventQueue("signal", 10);
      const payload = SharedSliceBytes.from([1, 2, 3]);
      queue.enqueue("k", payload, T0);
      payload[0] = 99; // the caller reuses its buffer
      const item = queue.consume()!;
      expectEqual([...item.payload], [1, 2, 3], "the queued payload is the caller's bytes at enqueue");
    }),
    withLedger("ledger-backed: payloads are copied in and out, also from a Uint8Array whose slice() shares memory", async (ledger) => {
      const queue = await EventQueue.fromLedger(ledger(), "q/copies", "signal", 10);
      const payload = SharedSliceBytes.from([1, 2, 3]);
      await queue.enqueue("a", payload, T0);
      await queue.enqueue("b", SharedSliceBytes.from([4, 5]), T0);
      payload[0] = 99;
      const first = (await queue.consume())!;
      expectEqual([...first.payload], [1, 2, 3], "the queued payload is the caller's bytes at enqueue");
      const again = await EventQueue.fromLedger(ledger(), "q/copies", "signal", 10);
      expectEqual([...(await again.consume())!.payload], [4, 5], "the ledger holds the bytes too");
    }),
    withLedger("ledger-backed: a failed ledger append changes nothing", async (ledger) => {
      const inner = ledger();
      let failing = false;
      const flaky: Ledger = {
        append: (name, expected, payload, opts) => (failing ? Promise.reject(new Error("disk full")) : inner.append(name, expected, payload, opts)),
        read: (name, from, opts) => inner.read(name, from, opts),
        tip: (name, opts) => inner.tip(name, opts),
        delete: (name, opts) => inner.delete(name, opts),
      };
      const queue = await EventQueue.fromLedger(flaky, "q/flaky", "signal", 5);
      await queue.enqueue("a", p(1), T0);
      failing = true;
      const outcome = await settleStorage(() => queue.enqueue("b", p(2), T0));
      expectEqual(outcome.ok, false, "the enqueue rejected");
      expectEqual(await settleStorage(() => queue.consume()).then((o) => o.ok), false, "the consume rejected");
      expectEqual([queue.len(), queue.stats().signal_enqueued, queue.stats().signal_consumed], [1, 1, 0], "nothing changed");
      failing = false;
      expectEqual(await queue.enqueue("b", p(2), T0), "admit", "b was not remembered by the failed call");
    }),
    withLedger("ledger-backed: a consume whose record landed but could not be confirmed (ambiguous append, every verification read failed) hands its item to the next consume, once", async (ledger) => {
      const { ledger: lossy, faults } = lossyLedger(ledger());
      const queue = await EventQueue.fromLedger(lossy, "q/lost-reply", "signal", 10);
      expectEqual([await queue.enqueue("evt-1", p(1), T0), await queue.enqueue("evt-2", p(2), T0)], ["admit", "admit"], "enqueued");
      Object.assign(faults, { ambiguous: true, lands: true, failReads: ALL_READS });
      const failed = await settleStorage(() => queue.consume());
      faults.failReads = 0;
      expectEqual(failed.ok ? "resolved" : failed.error instanceof AppendVerifyError, true, "the consume's outcome is unknown: AppendVerifyError");
      expectEqual([queue.len(), queue.stats().signal_consumed], [2, 0], "nothing changed in memory");
      expectEqual(await queue.consume(), { id: 1, key: "evt-1", payload: p(1) }, "the next consume gets the item whose record landed");
      expectEqual(await queue.consume(), { id: 2, key: "evt-2", payload: p(2) }, "then the next item");
      expectEqual(await queue.consume(), undefined, "each item once");
      expectEqual([await queue.enqueue("evt-1", p(1), T0 + 1), queue.len()], ["admit", 0], "a resend is a duplicate, and evt-1 did reach the consumer");
      expectEqual(queue.stats(), { signal_enqueued: 2, signal_consumed: 2, signal_shed: 0, signal_duplicates: 1 }, "stats");
      const again = await EventQueue.fromLedger(ledger(), "q/lost-reply", "signal", 10);
      expectEqual([again.stats(), again.len(), await again.consume()], [queue.stats(), 0, undefined], "a replay agrees: nothing left to hand out");
    }),
    withLedger("ledger-backed: a consume whose verification read fails once reads again, and resolves with its item", async (ledger) => {
      const { ledger: lossy, faults } = lossyLedger(ledger());
      const queue = await EventQueue.fromLedger(lossy, "q/read-again", "signal", 10);
      await queue.enqueue("evt-1", p(1), T0);
      await queue.enqueue("evt-2", p(2), T0);
      Object.assign(faults, { ambiguous: true, lands: true, failReads: 1 });
      expectEqual(await queue.consume(), { id: 1, key: "evt-1", payload: p(1) }, "the record read back is this call's own");
      expectEqual([await queue.consume(), await queue.consume()], [{ id: 2, key: "evt-2", payload: p(2) }, undefined], "then evt-2, then nothing");
      expectEqual((await EventQueue.fromLedger(ledger(), "q/read-again", "signal", 10)).stats(), queue.stats(), "a replay agrees");
    }),
    withLedger("ledger-backed: an enqueue whose record landed unconfirmed is not lost, and not counted twice when its verification read is retried", async (ledger) => {
      const { ledger: lossy, faults } = lossyLedger(ledger());
      const queue = await EventQueue.fromLedger(lossy, "q/enqueue-reply", "signal", 10);
      Object.assign(faults, { ambiguous: true, lands: true, failReads: 1 });
      expectEqual(await queue.enqueue("a", p(1), T0), "admit", "resolved by reading again");
      expectEqual(queue.stats(), { signal_enqueued: 1, signal_consumed: 0, signal_shed: 0, signal_duplicates: 0 }, "one admission, no duplicate");
      Object.assign(faults, { ambiguous: true, lands: true, failReads: ALL_READS });
      const failed = await settleStorage(() => queue.enqueue("b", p(2), T0));
      faults.failReads = 0;
      expectEqual(failed.ok ? "resolved" : failed.error instanceof AppendVerifyError, true, "unknown outcome");
      expectEqual(await queue.enqueue("b", p(2), T0), "admit", "the sender's retry");
      expectEqual([await queue.consume(), await queue.consume(), await queue.consume()], [{ id: 1, key: "a", payload: p(1) }, { id: 2, key: "b", payload: p(2) }, undefined], "b queued once");
      expectEqual(queue.stats(), { signal_enqueued: 2, signal_consumed: 2, signal_shed: 0, signal_duplicates: 1 }, "the retry found b journaled: a duplicate");
    }),
    withLedger("ledger-backed: a consume reported ambiguous that did not land leaves its item queued", async (ledger) => {
      const { ledger: lossy, faults } = lossyLedger(ledger());
      const queue = await EventQueue.fromLedger(lossy, "q/not-landed", "signal", 10);
      await queue.enqueue("evt-1", p(1), T0);
      Object.assign(faults, { ambiguous: true, lands: false, failReads: 0 });
      const failed = await settleStorage(() => queue.consume());
      expectEqual(failed.ok ? "resolved" : failed.error instanceof AppendVerifyError, true, "the record is absent: still unknown (it may land late)");
      expectEqual(await queue.consume(), { id: 1, key: "evt-1", payload: p(1) }, "the item is handed out by the next consume");
      expectEqual([await queue.consume(), queue.stats().signal_consumed, await ledger().tip("q/not-landed")], [undefined, 1, 2], "once");
    }),
    withLedger("ledger-backed: across a restart, a consume whose record landed unconfirmed counts as consumed; its item is not handed out again (the at-most-once window)", async (ledger) => {
      const { ledger: lossy, faults } = lossyLedger(ledger());
      const queue = await EventQueue.fromLedger(lossy, "q/restart", "signal", 10);
      await queue.enqueue("evt-1", p(1), T0);
      await queue.enqueue("evt-2", p(2), T0);
      Object.assign(faults, { ambiguous: true, lands: true, failReads: ALL_READS });
      expectEqual((await settleStorage(() => queue.consume())).ok, false, "the consume failed, its outcome unknown");
      // The instance is gone before its next call: a reopened queue cannot tell this record from a consume
      // whose item was handed out just before a crash, so it must not hand evt-1 out.
      const reopened = await EventQueue.fromLedger(ledger(), "q/restart", "signal", 10);
      expectEqual(reopened.stats(), { signal_enqueued: 2, signal_consumed: 1, signal_shed: 0, signal_duplicates: 0 }, "evt-1 counts as consumed");
      expectEqual([await reopened.consume(), await reopened.consume()], [{ id: 2, key: "evt-2", payload: p(2) }, undefined], "evt-2 only");
      expectEqual([await reopened.enqueue("evt-1", p(1), T0 + 1), reopened.len()], ["admit", 0], "evt-1 is still remembered: a resend is a duplicate");
    }),
    withLedger("ledger-backed: two queues over one ledger lose nothing when they enqueue at once", async (ledger) => {
      const one = await EventQueue.fromLedger(ledger(), "q/shared", "signal", 100);
      const two = await EventQueue.fromLedger(ledger(), "q/shared", "signal", 100);
      await Promise.all([one.enqueue("x", p(1), T0), two.enqueue("y", p(2), T0), one.enqueue("z", p(3), T0)]);
      const rebuilt = await EventQueue.fromLedger(ledger(), "q/shared", "signal", 100);
      const keys: string[] = [];
      for (let item = await rebuilt.consume(); item !== undefined; item = await rebuilt.consume()) keys.push(item.key);
      expectEqual(keys.sort(), ["x", "y", "z"], "every admitted item was journaled");
    }),
    withLedger("ledger-backed: two queues over one ledger never hand out the same item", async (ledger) => {
      const open = () => EventQueue.fromLedger(ledger(), "q/race", "signal", 10);
      await (await open()).enqueue("only", p(1), T0);
      let [one, two] = [await open(), await open()];
      const first = await Promise.all([one.consume(), two.consume()]);
      expectEqual(first.filter((item) => item !== undefined), [{ id: 1, key: "only", payload: p(1) }], "exactly one of them gets the one item");
      const seeder = await open();
      await seeder.enqueue("x", p(2), T0);
      await seeder.enqueue("y", p(3), T0);
      [one, two] = [await open(), await open()];
      const second = await Promise.all([one.consume(), two.consume()]);
      expectEqual(second.map((item) => item?.key).sort(), ["x", "y"], "of two items, each gets a different one (the loser took the next)");
      const rebuilt = await open();
      expectEqual([rebuilt.len(), rebuilt.stats()], [0, { signal_enqueued: 3, signal_consumed: 3, signal_shed: 0, signal_duplicates: 0 }], "three handed out, once each");
    }),
    withLedger("ledger-backed: a queue hands out items another queue over the same ledger enqueued after it opened", async (ledger) => {
      const producer = await EventQueue.fromLedger(ledger(), "q/split", "signal", 10);
      const consumer = await EventQueue.fromLedger(ledger(), "q/split", "signal", 10);
      expectEqual(await consumer.consume(), undefined, "nothing yet");
      await producer.enqueue("a", p(1), T0);
      await producer.enqueue("b", p(2), T0);
      expectEqual(await consumer.consume(), { id: 1, key: "a", payload: p(1) }, "the producer's first item");
      expectEqual(await producer.consume(), { id: 2, key: "b", payload: p(2) }, "the producer, behind, catches up and takes the next");
      expectEqual(await consumer.consume(), undefined, "each item once");
    }),
    withLedger("ledger-backed: the same call from two queues at once is journaled, and counted, twice", async (ledger) => {
      const open = () => EventQueue.fromLedger(ledger(), "q/twins", "approval", 1);
      await (await open()).enqueue("k", p(1), T0);
      const [one, two] = [await open(), await open()];
      expectEqual(await Promise.all([one.enqueue("k", p(), T0 + 1), two.enqueue("k", p(), T0 + 1)]), ["admit", "admit"], "two duplicates");
      expectEqual((await open()).stats(), { approval_enqueued: 1, approval_consumed: 0, approval_shed: 0, approval_duplicates: 2 }, "both duplicates counted");
      expectEqual(await Promise.all([one.enqueue("s", p(), T0 + 2), two.enqueue("s", p(), T0 + 2)]), ["shed", "shed"], "two sheds");
      const rebuilt = await open();
      expectEqual(rebuilt.stats(), { approval_enqueued: 1, approval_consumed: 0, approval_shed: 2, approval_duplicates: 2 }, "both sheds counted");
      expectEqual(rebuilt.position, 5, "one record per call");
    }),
    withLedger("ledger-backed: records written without a nonce (the older format) still replay", async (ledger) => {
      const log = ledger();
      await log.append("q/legacy", 0, legacyRecord({ v: 1, op: "enqueue", outcome: "admitted", key: "a", now: T0 }, p(1)));
      await log.append("q/legacy", 1, legacyRecord({ v: 1, op: "enqueue", outcome: "admitted", key: "b", now: T0 }, p(2)));
      await log.append("q/legacy", 2, legacyRecord({ v: 1, op: "enqueue", outcome: "duplicate", key: "a", now: T0 + 1 }));
      await log.append("q/legacy", 3, legacyRecord({ v: 1, op: "consume", id: 1 }));
      const queue = await EventQueue.fromLedger(log, "q/legacy", "signal", 10);
      expectEqual(queue.stats(), { signal_enqueued: 2, signal_consumed: 1, signal_shed: 0, signal_duplicates: 1 }, "counters");
      await queue.enqueue("c", p(3), T0 + 2); // a new record, with a nonce, after the old ones
      const again = await EventQueue.fromLedger(log, "q/legacy", "signal", 10);
      expectEqual([await again.consume(), await again.consume(), await again.consume()], [{ id: 2, key: "b", payload: p(2) }, { id: 3, key: "c", payload: p(3) }, undefined], "items");
    }),
    withLedger("a payload over MAX_QUEUE_PAYLOAD_BYTES is refused by both queue kinds whatever the lane holds; one at the limit is accepted", async (ledger) => {
      const over = new Uint8Array(MAX_QUEUE_PAYLOAD_BYTES + 1);
      const atLimit = new Uint8Array(MAX_QUEUE_PAYLOAD_BYTES).fill(7);
      const longestKey = "\u0000".repeat(MAX_IDEM_KEY_LENGTH); // 6 bytes a character in the JSON header: the longest record
      const tip = () => ledger().tip("q/size");
      const memory = new EventQueue("signal", 1);
      const durable = await EventQueue.fromLedger(ledger(), "q/size", "signal", 1);
      for (const [kind, queue] of [["in memory", memory], ["ledger-backed", durable]] as const) {
        const refused = async (key: string, lane: string) => {
          const before = [queue.len(), queue.stats(), await tip()];
          const outcome = await settleStorage(() => queue.enqueue(key, over, T0));
          const what = `${kind}, ${lane}`;
          expectEqual(outcome.ok ? "resolved" : describeStorageError(outcome.error), { error: "InvalidArgumentError", code: "invalid_argument", argument: "payload" }, what);
          const message = outcome.ok ? "" : String((outcome.error as Error).message);
          expectEqual([message.includes(String(over.length)), message.includes(String(MAX_QUEUE_PAYLOAD_BYTES))], [true, true], `${what}: the message names the size and the limit (${message})`);
          expectEqual([queue.len(), queue.stats(), await tip()], before, `${what}: nothing changed`);
        };
        await refused("a", "empty lane");
        expectEqual(await queue.enqueue(longestKey, atLimit, T0), "admit", `${kind}: a payload at the limit, with the longest key`);
        await refused(longestKey, "a remembered key");
        await refused("b", "full lane");
        const item = await queue.consume();
        expectEqual([item?.key === longestKey, item?.payload.length, item?.payload[0]], [true, MAX_QUEUE_PAYLOAD_BYTES, 7], `${kind}: the item at the limit`);
      }
      const rebuilt = await EventQueue.fromLedger(ledger(), "q/size", "signal", 1);
      expectEqual(rebuilt.stats(), memory.stats(), "the two kinds counted the same");
    }),
    withLedger("an idempotency key of MAX_IDEM_KEY_LENGTH (1024) characters is accepted, one of 1025 is refused and changes nothing, by both queue kinds", async (ledger) => {
      expectEqual(MAX_IDEM_KEY_LENGTH, 1024, "the documented limit");
      const longest = "k".repeat(1024);
      const tooLong = "k".repeat(1025);
      const tip = () => ledger().tip("q/keys");
      const memory = new EventQueue("signal", 10);
      const durable = await EventQueue.fromLedger(ledger(), "q/keys", "signal", 10);
      for (const [kind, queue] of [["in memory", memory], ["ledger-backed", durable]] as const) {
        const before = [queue.len(), queue.stats(), await tip()];
        const outcome = await settleStorage(() => queue.enqueue(tooLong, p(1), T0));
        expectEqual(outcome.ok ? "resolved" : describeStorageError(outcome.error), { error: "InvalidArgumentError", code: "invalid_argument", argument: "key" }, `${kind}: a key of 1025 characters`);
        expectEqual([queue.len(), queue.stats(), await tip()], before, `${kind}: the refused call changed nothing`);
        expectEqual(await queue.enqueue(longest, p(2), T0), "admit", `${kind}: a key of 1024 characters`);
        expectEqual(await queue.enqueue(longest, p(3), T0), "admit", `${kind}: the 1024-character key again`);
        const item = await queue.consume();
        expectEqual([item?.key === longest, item?.payload], [true, p(2)], `${kind}: the item, queued once`);
        expectEqual(queue.stats(), { signal_enqueued: 1, signal_consumed: 1, signal_shed: 0, signal_duplicates: 1 }, `${kind}: stats`);
      }
      const rebuilt = await EventQueue.fromLedger(ledger(), "q/keys", "signal", 10);
      expectEqual([await rebuilt.enqueue(longest, p(4), T0 + 1), rebuilt.len()], ["admit", 0], "after a replay the long key is still remembered");
    }),
    withLedger("ledger-backed: a record that is not a queue record, a consume of an item not queued, or a gap fails with QueueReplayError naming the record", async (ledger) => {
      const log = ledger();
      const enqueueA = legacyRecord({ v: 1, op: "enqueue", outcome: "admitted", key: "a", now: T0 }, p(1));
      const openFails = async (from: Ledger, name: string, seq: number, what: string) => {
        const tip = await log.tip(name);
        const outcome = await settleStorage(() => EventQueue.fromLedger(from, name, "signal", 10));
        expectEqual(outcome.ok ? "resolved" : describeStorageError(outcome.error), { error: "QueueReplayError", code: "queue_replay", seq }, what);
        const error = outcome.ok ? undefined : (outcome.error as QueueReplayError);
        expectEqual(
          [error instanceof QueueReplayError, error instanceof StorageError, error?.ledger, error?.message.startsWith(`queue ledger ${JSON.stringify(name)} record ${seq}: `)],
          [true, true, name, true],
          `${what}: a StorageError naming the ledger and the record (${error?.message})`,
        );
        expectEqual(await log.tip(name), tip, `${what}: nothing was written`);
      };

      await log.append("q/foreign", 0, enqueueA);
      await log.append("q/foreign", 1, utf8Encode("not a queue record"));
      await openFails(log, "q/foreign", 2, "bytes that are not a queue record");
      await log.append("q/unknown-op", 0, legacyRecord({ v: 1, op: "purge", key: "a", now: T0 }));
      await openFails(log, "q/unknown-op", 1, "a header with an unknown op");
      await log.append("q/version", 0, legacyRecord({ v: 2, op: "enqueue", outcome: "admitted", key: "a", now: T0 }));
      await openFails(log, "q/version", 1, "a header of another version");

      await log.append("q/twice", 0, enqueueA);
      await log.append("q/twice", 1, legacyRecord({ v: 1, op: "consume", id: 1 }));
      await log.append("q/twice", 2, legacyRecord({ v: 1, op: "consume", id: 1 }));
      await openFails(log, "q/twice", 3, "a second consume of item 1");
      await log.append("q/phantom", 0, legacyRecord({ v: 1, op: "consume", id: 7 }));
      await openFails(log, "q/phantom", 1, "a consume of an item never enqueued");

      // A gap: a ledger whose reads skip record 2 (the real ledger cannot hold one).
      await log.append("q/gap", 0, enqueueA);
      await log.append("q/gap", 1, legacyRecord({ v: 1, op: "enqueue", outcome: "admitted", key: "b", now: T0 }, p(2)));
      await log.append("q/gap", 2, legacyRecord({ v: 1, op: "consume", id: 1 }));
      const skipping: Ledger = {
        append: (name, expected, payload, opts) => log.append(name, expected, payload, opts),
        tip: (name, opts) => log.tip(name, opts),
        delete: (name, opts) => log.delete(name, opts),
        read: async (name, from, opts) => {
          const cursor = await log.read(name, from, opts);
          const next = async (o?: CallOptions) => {
            const record = await cursor.next(o);
            return record?.seq === 2 ? cursor.next(o) : record;
          };
          return {
            life: cursor.life,
            next,
            close: () => cursor.close(),
            async *[Symbol.asyncIterator]() {
              for (let record = await next(); record !== undefined; record = await next()) yield record;
            },
          };
        },
      };
      await openFails(skipping, "q/gap", 3, "record 3 read right after record 1");

      // A queue already open meets the bad record when it catches up.
      const open = await EventQueue.fromLedger(log, "q/late", "signal", 10);
      await log.append("q/late", 0, utf8Encode("written by something else"));
      const outcome = await settleStorage(() => open.consume());
      expectEqual(outcome.ok ? "resolved" : describeStorageError(outcome.error), { error: "QueueReplayError", code: "queue_replay", seq: 1 }, "an open queue catching up");
      expectEqual([open.position, open.len(), await log.tip("q/late")], [0, 0, 1], "the open queue applied nothing and wrote nothing");
    }),
    withLedger("capacity 0: every new key is shed and not remembered (its retry is shed again, not a duplicate); stats count the sheds", async (ledger) => {
      const memory = new EventQueue("approval", 0);
      const durable = await EventQueue.fromLedger(ledger(), "q/zero", "approval", 0);
      for (const [kind, queue] of [["in memory", memory], ["ledger-backed", durable]] as const) {
        expectEqual(
          [await queue.enqueue("a", p(1), T0), await queue.enqueue("b", p(2), T0), await queue.enqueue("a", p(3), T0 + 1)],
          ["shed", "shed", "shed"],
          `${kind}: a, b, then a again`,
        );
        expectEqual([queue.len(), queue.isEmpty(), await queue.consume()], [0, true, undefined], `${kind}: nothing queued`);
        expectEqual(queue.stats(), { approval_enqueued: 0, approval_consumed: 0, approval_shed: 3, approval_duplicates: 0 }, `${kind}: stats`);
      }
      const roomier = await EventQueue.fromLedger(ledger(), "q/zero", "approval", 1);
      expectEqual(roomier.stats(), { approval_enqueued: 0, approval_consumed: 0, approval_shed: 3, approval_duplicates: 0 }, "the sheds were journaled");
      expectEqual([await roomier.enqueue("a", p(4), T0 + 2), roomier.len()], ["admit", 1], "reopened with room, the once-shed key is new");
    }),
    withLedger("ledger-backed: bad arguments to fromLedger (name, lane, capacity) are refused with typed errors, and nothing is written", async (ledger) => {
      const log = ledger();
      const writes: string[] = [];
      const watched: Ledger = {
        append: (name, expected, payload, opts) => {
          writes.push(`append ${name}`);
          return log.append(name, expected, payload, opts);
        },
        delete: (name, opts) => {
          writes.push(`delete ${name}`);
          return log.delete(name, opts);
        },
        read: (name, from, opts) => log.read(name, from, opts),
        tip: (name, opts) => log.tip(name, opts),
      };
      const badName = (name: string, rule: string) => ({ error: "InvalidNameError", code: "invalid_name", name, rule });
      const badArgument = (argument: string) => ({ error: "InvalidArgumentError", code: "invalid_argument", argument });
      const cases: [string, unknown, unknown, unknown, object][] = [
        ["an empty name", "", "signal", 1, badName("", "empty")],
        ["a name starting with an uppercase letter", "Q/main", "signal", 1, badName("Q/main", "segment_start")],
        ["a name with an empty segment", "q//main", "signal", 1, badName("q//main", "empty_segment")],
        ["a name that is not a string", 7, "signal", 1, badName("7", "type")],
        ["an unknown lane", "q/main", "bulk", 1, badArgument("lane")],
        ["a lane in capitals", "q/main", "Signal", 1, badArgument("lane")],
        ["no lane", "q/main", undefined, 1, badArgument("lane")],
        ["a negative capacity", "q/main", "signal", -1, badArgument("capacity")],
        ["a fractional capacity", "q/main", "signal", 1.5, badArgument("capacity")],
        ["a NaN capacity", "q/main", "signal", Number.NaN, badArgument("capacity")],
        ["a capacity past MAX_SAFE_INTEGER", "q/main", "signal", 2 ** 53, badArgument("capacity")],
        ["a capacity given as text", "q/main", "signal", "10", badArgument("capacity")],
      ];
      for (const [what, name, lane, capacity, expected] of cases) {
        const outcome = await settleStorage(() => EventQueue.fromLedger(watched, name as string, lane as QueueLane, capacity as number));
        expectEqual(outcome.ok ? "resolved" : describeStorageError(outcome.error), expected, what);
        expectEqual(writes, [], `${what}: nothing written`);
      }
      const queue = await EventQueue.fromLedger(watched, "q/main", "signal", 1);
      expectEqual([await log.tip("q/main"), await queue.enqueue("a", p(1), T0), writes], [0, "admit", ["append q/main"]], "the good arguments open the queue; its first call is the first write");
    }),
    withLedger("ledger-backed: replay applies the journaled outcomes even under another capacity", async (ledger) => {
      const queue = await EventQueue.fromLedger(ledger(), "q/cap", "signal", 3);
      for (const key of ["a", "b", "c"]) await queue.enqueue(key, p(), T0);
      const smaller = await EventQueue.fromLedger(ledger(), "q/cap", "signal", 1);
      expectEqual(smaller.len(), 3, "the three admitted items stay");
      expectEqual(await smaller.enqueue("d", p(), T0), "shed", "new admissions follow the new capacity");
    }),
  ];
}
