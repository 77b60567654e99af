/**
 * How many page reads a checkpoint's flush makes to find the pages of the
 * rows it writes (`PagedTransaction.loadPagesOf`), with a cold cache, over
 * fake-indexeddb: the reads follow the pages the rows fall on, not the rows.
 *
 * The defect: rows were grouped by their key without its last element, and
 * each group's first unknown row probed per round (two requests). A key
 * ending in two numbers (`["j", name, "p", consumer, observedAt, pos]`, the
 * `t`, `l`, `w` and `x` indexes alike) made every row a group of its own: a
 * registration step writing 1,000 such rows on a handful of pages probed
 * 1,000 times (2,000 requests; registering over 100k events made 200,283).
 * And a group spread over many pages (the `h` rows of 100 keys) took a round
 * per few pages, one after the other.
 *
 * The counts are IndexedDB requests on the `pages` store (the engine reads
 * nothing else there), and rounds are bursts of them issued together.
 */
import { IDBFactory, IDBKeyRange, IDBObjectStore } from "fake-indexeddb";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BILLING_GRADE, createJournal, createUsageEvent, parseConsumerId, type Key, type UsageEvent } from "../../src/index.js";
import { IndexedDbEngine } from "./indexeddb-engine.js";
import type { LogLimits } from "./log.js";
import { PAGES_STORE } from "./schema.js";

/** The read methods of `IDBObjectStore` the engine may call. */
const READS = ["get", "getAll", "getAllKeys", "getAllRecords", "openCursor", "openKeyCursor", "count"] as const;

/** Page reads issued, and bursts of them (requests issued in one synchronous stretch: a round). */
const reads = { requests: 0, rounds: 0 };
let inBurst = false;
const originals = new Map<string, unknown>();

beforeEach(() => {
  const proto = IDBObjectStore.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
  for (const name of READS) {
    const original = proto[name];
    if (typeof original !== "function") continue;
    originals.set(name, original);
    proto[name] = function (this: IDBObjectStore, ...args: unknown[]): unknown {
      if (this.name === PAGES_STORE) {
        reads.requests++;
        if (!inBurst) {
          inBurst = true;
          reads.rounds++;
          queueMicrotask(() => (inBurst = false));
        }
      }
      return original.apply(this, args);
    };
  }
});

afterEach(() => {
  const proto = IDBObjectStore.prototype as unknown as Record<string, unknown>;
  for (const [name, original] of originals) proto[name] = original;
  originals.clear();
});

/** Start counting from zero. */
function count(): typeof reads {
  reads.requests = 0;
  reads.rounds = 0;
  return reads;
}

/** A 4 KiB log: every commit of these tests checkpoints (a registration step does at the default limits too, once the log holds a step or two). */
const SMALL_LOG: LogLimits = { records: 2, bytes: 4096 };

function engineOn(factory: IDBFactory, name: string): IndexedDbEngine {
  return new IndexedDbEngine({ name, durability: "relaxed", platform: () => ({ indexedDB: factory, IDBKeyRange }), logLimits: SMALL_LOG });
}

const T0 = 1_700_000_000_000;

function usage(n: number, key: number): UsageEvent {
  const requestId = `0190c000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`;
  return createUsageEvent({ record: { requestId, namespace: "ns", subject: `k-${key}`, data: { n } }, observedAt: T0 + n });
}

describe("a checkpoint finds its rows' pages with reads that follow the pages, not the rows", () => {
  it("registers a consumer over 1,000 events with a cold cache in a few dozen page reads (2,008 before)", async () => {
    const factory = new IDBFactory();
    const capacity = { ...BILLING_GRADE, maxEvents: 10_000 };
    let engine = engineOn(factory, "registration");
    let journal = createJournal(engine, { name: "usage", capacity, clock: () => T0 });
    // A registered consumer first, so that the newcomer's registration walks events that have `u` and `p` rows of another.
    expect(await journal.claim(parseConsumerId("a"), { maxEvents: 1, leaseMs: 60_000, now: T0 })).toEqual([]);
    await journal.appendBatch(Array.from({ length: 1000 }, (_, n) => usage(n, n % 100)));
    await engine.close();
    // A new engine: nothing cached. One claim registers (one step of 1,000 events: 1,000 `u` and `p` rows, 100 `h`
    // and `r` rows) and claims, in one transaction whose flush checkpoints.
    engine = engineOn(factory, "registration");
    journal = createJournal(engine, { name: "usage", capacity, clock: () => T0 + 1000 });
    const counted = count();
    const deliveries = await journal.claim(parseConsumerId("b"), { maxEvents: 10, leaseMs: 60_000, now: T0 + 1000 });
    const { requests } = counted;
    expect(deliveries.map((d) => d.event.record.data)).toEqual(Array.from({ length: 10 }, (_, n) => ({ n })));
    // The walk's reads (1,000 events, eight pages per request) and the flush's: a probe or two per group, whose
    // rows fall on a few adjacent pages (10 requests in all). Before: a probe per `p` row.
    expect(requests).toBeLessThanOrEqual(30);
    await engine.close();
  });

  /** Store `stored` (value 0) with checkpoints, then write `written` (value 1) in one transaction of a new engine; the page reads of that write. */
  async function coldWrite(name: string, stored: readonly Key[], written: readonly Key[]): Promise<{ requests: number; rounds: number }> {
    const factory = new IDBFactory();
    let engine = engineOn(factory, name);
    for (let i = 0; i < stored.length; i += 2000) {
      await engine.transact("readwrite", async (tx) => {
        for (const key of stored.slice(i, i + 2000)) tx.put(key, 0);
      });
    }
    await engine.close();
    engine = engineOn(factory, name);
    const counted = count();
    await engine.transact("readwrite", async (tx) => {
      for (const key of written) tx.put(key, 1);
    });
    const outcome = { ...counted };
    // What was written is there, and nothing else changed.
    const rows = await engine.transact("readonly", (tx) => tx.scan<number>({ prefix: ["j"] }));
    expect(rows.length).toBe(new Set([...stored, ...written].map((key) => JSON.stringify(key))).size);
    expect(rows.filter((row) => row.value === 1).length).toBe(written.length);
    await engine.close();
    return outcome;
  }

  const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

  it("writes 1,000 adjacent rows whose keys end in a time and a position with a handful of reads (2,000 before)", async () => {
    // 20,000 age index entries (some 160 pages); 1,000 adjacent ones change, on some 8 pages.
    const stored = range(20_000).map((i): Key => ["j", "u", "p", "a", T0 + i, i]);
    const { requests, rounds } = await coldWrite("adjacent", stored, stored.slice(5000, 6000));
    expect(requests).toBeLessThanOrEqual(12);
    expect(rounds).toBeLessThanOrEqual(3);
  });

  it("writes 100 rows of one index spread over 100 pages in a few rounds (29 before), with a read per page at most", async () => {
    // 20,000 head rows (some 160 pages); every 200th changes: 100 rows, each on a page of its own.
    const stored = range(20_000).map((i): Key => ["j", "u", "h", "a", "ns", `k-${String(i).padStart(6, "0")}`]);
    const written = range(100).map((i) => stored[i * 200]!);
    const { requests, rounds } = await coldWrite("spread", stored, written);
    expect(rounds).toBeLessThanOrEqual(4);
    expect(requests).toBeLessThanOrEqual(100);
  });
});
