/**
 * The readable half of the queue conformance suite: one example per rule of
 * `event-queue.lean.txt` (and of the ledger-backed variant), each asserting
 * concrete values.
 */
import { MAX_IDEM_KEY_LENGTH, MAX_QUEUE_PAYLOAD_BYTES } from "../queue/checks.js";
import { EventQueue } from "../queue/event-queue.js";
import { IDEM_WINDOW_MS } from "../queue/state.js";
import type { Ledger } from "../storage/ledger.js";
import { createStore } from "../storage/store.js";
import { utf8Encode } from "../storage/web.js";
import type { ConformanceCase } from "./journal-conformance.js";
import type { QueueConformanceOptions } from "./queue-conformance.js";
import { describeStorageError, renderStorage, settleStorage } from "./storage-compare.js";
import { SharedSliceBytes } from "./storage-examples.js";

const T0 = 1_700_000_000_000;
const HOUR = 60 * 60 * 1000;
const p = (...values: number[]) => new Uint8Array(values);

function expectEqual(actual: unknown, expected: unknown, what: string): void {
  if (renderStorage(actual) !== renderStorage(expected)) {
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
    ex("no key is evicted when the clock went backwards (below the latest reading)", () => {
      const queue = new EventQueue("signal", 10);
      queue.enqueue("early", p(), T0 + 10 * HOUR);
      queue.enqueue("old", p(), T0); // the clock jumped back ten hours
      queue.consume();
      queue.consume();
      // 7 h after "old" was admitted, but still behind the latest reading: no eviction.
      expectEqual(queue.enqueue("old", p(), T0 + 7 * HOUR), "admit", "verdict");
      expectEqual(queue.len(), 0, "still remembered: not queued again");
      expectEqual(queue.stats().signal_duplicates, 1, "a duplicate");
      // Once the clock is past the latest reading again, eviction resumes.
      queue.enqueue("old", p(), T0 + 10 * HOUR);
      expectEqual(queue.len(), 1, "past the window and not behind: new again");
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
    withLedger("ledger-backed: replay applies the journaled outcomes even under another capacity", async (ledger) => {
      const queue = await EventQueue.fromLedger(ledger(), "q/cap", "signal", 3);
      for (const key of ["a", "b", "c"]) await queue.enqueue(key, p(), T0);
      const smaller = await EventQueue.fromLedger(ledger(), "q/cap", "signal", 1);
      expectEqual(smaller.len(), 3, "the three admitted items stay");
      expectEqual(await smaller.enqueue("d", p(), T0), "shed", "new admissions follow the new capacity");
    }),
  ];
}
