/**
 * The event queue conformance suite: the in-memory queue, and the
 * ledger-backed one over the memory engine (a restart is a new queue replayed
 * from the same engine), and what an instance does when its ledger is deleted
 * under it.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import type { DurableEventQueue } from "../../src/queue/durable.js";
import { EventQueue } from "../../src/queue/event-queue.js";
import { AmbiguousError, AppendVerifyError, RecordNotFoundError } from "../../src/storage/errors.js";
import type { Ledger } from "../../src/storage/ledger.js";
import { createStore } from "../../src/storage/store.js";
import { queueConformanceCases } from "../../src/testing/index.js";
import { ALL_READS, lossyLedger } from "../../src/testing/queue-examples.js";

describe("event queue (in memory, and over a ledger on the memory engine)", () => {
  const cases = queueConformanceCases({
    label: "memory",
    createSubject: async () => {
      const engine = memoryEngine();
      return { engine, reopen: async () => engine, close: () => engine.close() };
    },
  });
  for (const c of cases) it(c.name, c.run, c.timeoutMs);
});

describe("a ledger-backed queue open while its ledger is deleted and written again", () => {
  const T = 1_700_000_000_000;
  const bytes = (value: number) => new Uint8Array([value]);

  async function setup() {
    const engine = memoryEngine();
    const ledger = createStore(engine, { name: "app" }).ledger;
    const open = () => EventQueue.fromLedger(ledger, "q/main", "signal", 10);
    return { engine, ledger, open };
  }

  /**
   * `old` enqueued `oldKeys` and consumed `consumed` of them; then the ledger
   * was deleted, and `renewed` (opened after) enqueued `newKeys`.
   */
  async function purgedUnder(oldKeys: readonly string[], newKeys: readonly string[], consumed = 0) {
    const { engine, ledger, open } = await setup();
    const old = await open();
    for (const key of oldKeys) await old.enqueue(key, bytes(1), T);
    for (let i = 0; i < consumed; i++) await old.consume();
    await ledger.delete("q/main"); // purged
    const renewed = await open();
    for (const key of newKeys) await renewed.enqueue(key, bytes(2), T);
    return { engine, ledger, open, old, renewed };
  }

  /** The rejection of a call on an instance whose ledger left the life it read. */
  const lifeLost = (seq: number) => expect.objectContaining({ name: "QueueReplayError", code: "queue_replay", ledger: "q/main", seq, cause: expect.any(RecordNotFoundError) as unknown }) as Error;

  /** What a fresh replay of the ledger holds: the keys left to hand out (consumed by the replay), and the counters before that. */
  async function replay(open: () => Promise<DurableEventQueue<"signal">>) {
    const fresh = await open();
    const stats = fresh.stats();
    const left: string[] = [];
    for (let item = await fresh.consume(); item !== undefined; item = await fresh.consume()) left.push(item.key);
    return { stats, left };
  }

  it("a longer new life: the old instance hands out no purged item, consumes nothing of the new life, and fails every later call with QueueReplayError", async () => {
    const { engine, open, old } = await purgedUnder(["a", "b", "c"], ["x", "y", "z", "w"]);
    const before = old.stats();
    await expect(old.consume()).rejects.toThrow(lifeLost(4));
    await expect(old.enqueue("n", bytes(1), T)).rejects.toThrow(lifeLost(4));
    await expect(old.consume()).rejects.toThrow(lifeLost(4));
    expect([old.stats(), old.len(), old.position]).toEqual([before, 3, 3]);
    expect(await replay(open)).toEqual({ stats: { signal_enqueued: 4, signal_consumed: 0, signal_shed: 0, signal_duplicates: 0 }, left: ["x", "y", "z", "w"] });
    await engine.close();
  });

  it("a new life back at the old instance's tip (its append would not conflict): refused all the same", async () => {
    const { engine, ledger, open, old, renewed } = await purgedUnder(["a", "b"], ["x", "y"]);
    await expect(old.consume()).rejects.toThrow(lifeLost(3));
    await expect(old.enqueue("n", bytes(1), T)).rejects.toThrow(lifeLost(3));
    expect(await ledger.tip("q/main")).toBe(2);
    // The new life's instance is not disturbed.
    expect((await renewed.consume())?.key).toBe("x");
    expect(await replay(open)).toEqual({ stats: { signal_enqueued: 2, signal_consumed: 1, signal_shed: 0, signal_duplicates: 0 }, left: ["y"] });
    await engine.close();
  });

  it("an old instance with nothing queued reads none of the new life's records into its state", async () => {
    const { engine, open, old } = await purgedUnder(["a"], ["x", "y", "z"], 1);
    const before = old.stats();
    await expect(old.consume()).rejects.toThrow(lifeLost(3));
    expect([old.stats(), old.len(), old.position]).toEqual([before, 0, 2]);
    expect((await replay(open)).left).toEqual(["x", "y", "z"]);
    await engine.close();
  });

  it("deleted and not written again: the old instance writes nothing into the empty ledger", async () => {
    const { engine, ledger, old } = await purgedUnder(["a", "b"], []);
    await expect(old.enqueue("c", bytes(1), T)).rejects.toThrow(lifeLost(3));
    await expect(old.consume()).rejects.toThrow(lifeLost(3));
    expect(await ledger.tip("q/main")).toBe(0);
    await engine.close();
  });

  it("an item held for the next consume (its record landed while its call rejected) is not handed out once the ledger was found deleted", async () => {
    const { engine, ledger: inner, open } = await setup();
    const { ledger, faults } = lossyLedger(inner);
    const old = await EventQueue.fromLedger(ledger, "q/main", "signal", 10);
    await old.enqueue("a", bytes(1), T);
    Object.assign(faults, { ambiguous: true, lands: true, failReads: ALL_READS });
    await expect(old.consume()).rejects.toBeInstanceOf(AppendVerifyError);
    faults.failReads = 0;
    await (await open()).enqueue("b", bytes(2), T); // another instance writes: the old one reads its consume back and holds a
    expect(await old.enqueue("c", bytes(3), T)).toBe("admit");
    await inner.delete("q/main");
    await expect(old.enqueue("d", bytes(4), T)).rejects.toThrow(lifeLost(5));
    await expect(old.consume()).rejects.toThrow(lifeLost(5)); // not a (purged)
    await engine.close();
  });

  it("an append whose outcome is unknown while the ledger is deleted rejects with QueueReplayError, not AppendVerifyError", async () => {
    const { engine, ledger: inner } = await setup();
    let purgeOnAppend = false;
    // The append's reply is lost, and meanwhile the ledger is purged and written again.
    const ledger: Ledger = {
      ...inner,
      append: async (name, expected, payload, options) => {
        if (!purgeOnAppend) return inner.append(name, expected, payload, options);
        purgeOnAppend = false;
        await inner.delete(name);
        for (let i = 0; i < 3; i++) await inner.append(name, i, bytes(i));
        throw new AmbiguousError(name, expected, new Error("reply lost"));
      },
      read: (name, from, options) => inner.read(name, from, options),
    };
    const old = await EventQueue.fromLedger(ledger, "q/main", "signal", 10);
    await old.enqueue("a", bytes(1), T);
    purgeOnAppend = true;
    await expect(old.consume()).rejects.toThrow(lifeLost(2));
    await expect(old.consume()).rejects.toThrow(lifeLost(2));
    await engine.close();
  });
});
