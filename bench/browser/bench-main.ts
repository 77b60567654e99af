/// <reference lib="dom" />
import type { BenchOptions, BenchResults, ClaimCostResult, PairResult, QueuePairResult, RequestCost } from "../indexeddb-results.js";
/**
 * The IndexedDB benchmarks, as they run inside Chromium (driven by
 * bench/indexeddb-browser.ts, which prints the table). Each figure sets the
 * journal over the IndexedDB engine beside the least `idb` code that stores
 * the same records, in the same page, on the same disk, interleaved round by
 * round so both sides see the same background noise:
 *
 * 1. single-event append (strict and relaxed) vs a raw `idb` `add` of the same
 *    event record in its own transaction (same durability);
 * 2. `appendBatch` of 100 vs raw adds of the same 100 records in one
 *    transaction (strict);
 * 3. a journal-like pattern of rows through the engine (which packs them into
 *    pages) vs the same rows as raw IndexedDB records, a request each;
 * 4. claim 100 + ackBatch of them at 1,000 and at 50,000 pending events (1,000
 *    ordering keys throughout, strict; the backlog is built with a relaxed
 *    engine on the same database and topped up, untimed, after every cycle,
 *    the top-ups continuing round robin over the keys);
 * 5. append + claim + ack of N events vs workbox-background-sync's `Queue`
 *    (`pushRequest` + `shiftRequest`) of N requests carrying the same events
 *    as JSON bodies, the queue browser apps use today;
 * 6. what those figures are made of: the cost of one IndexedDB request of each
 *    kind (raw IndexedDB, no journal), of a record with three native index
 *    entries beside four records, and of the pages the engine writes.
 */
import { openDB, unwrap, type IDBPDatabase } from "idb";
import { indexedDbEngine, type IndexedDbDurability } from "../../adapters/indexeddb/index.js";
import { createJournal, createUsageEvent, newRequestId, parseConsumerId, type UsageEvent } from "../../src/index.js";
import { Queue } from "workbox-background-sync";

const capacity = { maxEvents: 10_000_000, maxDeliveryAttempts: 8, retainAcknowledgedMs: 86_400_000, policy: "refuse" } as const;
const consumer = parseConsumerId("billing");
const run = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
let serial = 0;
let observed = 1_700_000_000_000;

/** `count` events over `keys` subjects, round robin from subject `firstKey` (mod `keys`). */
function makeEvents(count: number, keys: number, firstKey = 0): UsageEvent[] {
  return Array.from({ length: count }, (_, i) => {
    observed += 1;
    return createUsageEvent({
      record: { requestId: newRequestId(observed), namespace: "acme", subject: `user-${(firstKey + i) % keys}`, data: { tokens: i % 97, model: "small" } },
      observedAt: observed,
    });
  });
}

function dbName(what: string): string {
  return `bench-${run}-${what}-${++serial}`;
}

function deleteDatabase(name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const request = indexedDB.deleteDatabase(name);
    request.onsuccess = () => resolve();
    request.onerror = () => reject(request.error ?? new Error(`could not delete ${name}`));
  });
}

/** The baseline store: one object store of events keyed by request id. */
async function rawStore(): Promise<{ db: IDBPDatabase; name: string }> {
  const name = dbName("raw");
  const db = await openDB(name, 1, {
    upgrade(database) {
      database.createObjectStore("events");
    },
  });
  return { db, name };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}


/** Single-event append vs one raw add per transaction. */
async function singleAppend(durability: IndexedDbDurability, perRound: number, rounds: number): Promise<PairResult> {
  const journalRates: number[] = [];
  const rawRates: number[] = [];
  const ratios: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const events = makeEvents(perRound, 100);
    const raw = await rawStore();
    let t0 = performance.now();
    for (const event of events) {
      const tx = raw.db.transaction("events", "readwrite", { durability });
      await Promise.all([tx.store.add(event, event.id), tx.done]);
    }
    const rawRate = (perRound / (performance.now() - t0)) * 1000;
    raw.db.close();
    await deleteDatabase(raw.name);

    const name = dbName("journal");
    const engine = indexedDbEngine({ name, durability });
    const journal = createJournal(engine, { name: "bench", capacity });
    await engine.open();
    const more = makeEvents(perRound, 100);
    t0 = performance.now();
    for (const event of more) await journal.append(event);
    const journalRate = (perRound / (performance.now() - t0)) * 1000;
    await engine.close();
    await deleteDatabase(name);
    rawRates.push(rawRate);
    journalRates.push(journalRate);
    ratios.push(journalRate / rawRate);
  }
  return { journalPerSecond: median(journalRates), rawPerSecond: median(rawRates), ratio: median(ratios), rounds, perRound };
}

/**
 * appendBatch of `size` vs `size` raw adds in one transaction. With
 * `registered`, a consumer is registered first (untimed), as in an app whose
 * forwarder has started: each event then also gets that consumer's rows.
 */
async function batchAppend(size: number, perRound: number, rounds: number, registered: boolean): Promise<PairResult> {
  const journalRates: number[] = [];
  const rawRates: number[] = [];
  const ratios: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const raw = await rawStore();
    const rawBatches = Array.from({ length: perRound }, () => makeEvents(size, 100));
    let t0 = performance.now();
    for (const batch of rawBatches) {
      const tx = raw.db.transaction("events", "readwrite", { durability: "strict" });
      await Promise.all([...batch.map((event) => tx.store.add(event, event.id)), tx.done]);
    }
    const rawRate = (perRound / (performance.now() - t0)) * 1000;
    raw.db.close();
    await deleteDatabase(raw.name);

    const name = dbName("journal");
    const engine = indexedDbEngine({ name });
    const journal = createJournal(engine, { name: "bench", capacity });
    await engine.open();
    if (registered) await journal.claim(consumer, { maxEvents: 1, leaseMs: 1, now: Date.now() });
    const batches = Array.from({ length: perRound }, () => makeEvents(size, 100));
    t0 = performance.now();
    for (const batch of batches) await journal.appendBatch(batch);
    const journalRate = (perRound / (performance.now() - t0)) * 1000;
    await engine.close();
    await deleteDatabase(name);
    rawRates.push(rawRate);
    journalRates.push(journalRate);
    ratios.push(journalRate / rawRate);
  }
  return { journalPerSecond: median(journalRates), rawPerSecond: median(rawRates), ratio: median(ratios), rounds, perRound };
}

/**
 * A journal-like pattern of rows (per event: one awaited `get`, then five
 * `put`s) through `engine.transact`, which packs the rows into pages, beside
 * the same rows as raw records, a request each, in one strict transaction of
 * a database of their own. The ratio is what the pages gain over a record per
 * row.
 */
async function batchPattern(perRound: number, rounds: number): Promise<PairResult> {
  const journalRates: number[] = [];
  const rawRates: number[] = [];
  const ratios: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const name = dbName("pattern");
    const engine = indexedDbEngine({ name });
    await engine.open();
    const batches = Array.from({ length: perRound * 2 }, () => makeEvents(100, 100));
    let position = 0;
    let t0 = performance.now();
    for (const batch of batches.slice(0, perRound)) {
      await engine.transact("readwrite", async (tx) => {
        for (const event of batch) {
          const known = await tx.get(["j", "bench", "i", event.id]);
          if (known !== undefined) continue;
          position++;
          tx.put(["j", "bench", "e", position], { position, event });
          tx.put(["j", "bench", "i", event.id], position);
          tx.put(["j", "bench", "k", event.orderingKey.namespace, event.orderingKey.subject, position], 0);
          tx.put(["j", "bench", "n", position], { finished: 0, quarantined: 0 });
          tx.put(["j", "bench", "o", position], 0);
        }
      });
    }
    const engineRate = (perRound / (performance.now() - t0)) * 1000;
    await engine.close();
    // The same rows as raw records, one request each, in a database of their own (later positions).
    const raw = await rawStore();
    const db = unwrap(raw.db); // raw requests, not idb's promise wrappers
    const get = (store: IDBObjectStore, key: IDBValidKey) =>
      new Promise<unknown>((resolve, reject) => {
        const request = store.get(key);
        request.onsuccess = () => resolve(request.result);
        request.onerror = () => reject(request.error ?? new Error("get failed"));
      });
    t0 = performance.now();
    for (const batch of batches.slice(perRound)) {
      const tx = db.transaction("events", "readwrite", { durability: "strict" });
      const done = new Promise<void>((resolve, reject) => {
        tx.oncomplete = () => resolve();
        tx.onabort = () => reject(tx.error ?? new Error("aborted"));
      });
      const store = tx.objectStore("events");
      for (const event of batch) {
        const known = await get(store, ["j", "bench", "i", event.id]);
        if (known !== undefined) continue;
        position++;
        store.put({ position, event }, ["j", "bench", "e", position]);
        store.put(position, ["j", "bench", "i", event.id]);
        store.put(0, ["j", "bench", "k", event.orderingKey.namespace, event.orderingKey.subject, position]);
        store.put({ finished: 0, quarantined: 0 }, ["j", "bench", "n", position]);
        store.put(0, ["j", "bench", "o", position]);
      }
      await done;
    }
    const rawRate = (perRound / (performance.now() - t0)) * 1000;
    db.close();
    await deleteDatabase(name);
    await deleteDatabase(raw.name);
    journalRates.push(engineRate);
    rawRates.push(rawRate);
    ratios.push(engineRate / rawRate);
  }
  return { journalPerSecond: median(journalRates), rawPerSecond: median(rawRates), ratio: median(ratios), rounds, perRound };
}


/**
 * The cost of one request of each kind, on raw IndexedDB: `perRound` requests
 * issued together in one transaction (strict for writes), timed from the
 * first request to the transaction's completion, median of `rounds` rounds.
 * Keys and values are shaped like the journal's: 4-5 element array keys, `0`
 * for an index row, an event row for an event.
 */
async function requestCosts(perRound: number, rounds: number): Promise<RequestCost[]> {
  const name = dbName("requests");
  const db = await openDB(name, 1, {
    upgrade(database) {
      database.createObjectStore("rows");
      const indexed = database.createObjectStore("indexed");
      for (const index of ["a", "b", "c"]) indexed.createIndex(index, index);
    },
  });
  const events = makeEvents(perRound, 100);
  const eventKey = (position: number) => ["j", "n", "e", position];
  const putEvents = (os: IDBObjectStore, base: number): void => {
    for (let i = 0; i < perRound; i++) os.put({ position: base + i, event: events[i]! }, eventKey(base + i));
  };
  const transaction = (store: "rows" | "indexed", mode: IDBTransactionMode, body: (os: IDBObjectStore) => void): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const tx = (db as unknown as IDBDatabase).transaction(store, mode, { durability: "strict" });
      body(tx.objectStore(store));
      tx.oncomplete = () => resolve();
      tx.onabort = () => reject(tx.error ?? new Error("the transaction aborted"));
    });
  let next = 0;
  const costs: RequestCost[] = [];
  /**
   * Microseconds per unit of `body`'s work (one transaction), median over the
   * rounds; `setup` runs untimed before each round, in its own transaction.
   */
  const time = async (
    what: string,
    per: string,
    store: "rows" | "indexed",
    mode: IDBTransactionMode,
    body: (os: IDBObjectStore, base: number) => void,
    setup?: (os: IDBObjectStore, base: number) => void,
  ): Promise<void> => {
    const samples: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const base = (next += perRound);
      if (setup) await transaction("rows", "readwrite", (os) => setup(os, base));
      const t0 = performance.now();
      await transaction(store, mode, (os) => body(os, base));
      samples.push(((performance.now() - t0) * 1000) / perRound);
    }
    costs.push({ what, per, microseconds: median(samples), perRound, rounds });
  };
  await time("warm-up", "request", "rows", "readwrite", putEvents);
  costs.length = 0;
  await time("`put` of a new index row (value `0`)", "request", "rows", "readwrite", (os, base) => {
    for (let i = 0; i < perRound; i++) os.put(0, ["j", "n", "r", "billing", base + i]);
  });
  await time("`put` of a new event row", "request", "rows", "readwrite", putEvents);
  await time(
    "`delete` of a stored event row",
    "request",
    "rows",
    "readwrite",
    (os, base) => {
      for (let i = 0; i < perRound; i++) os.delete(eventKey(base + i));
    },
    putEvents,
  );
  await time(
    "`get` of a stored event row (all issued together)",
    "request",
    "rows",
    "readonly",
    (os, base) => {
      for (let i = 0; i < perRound; i++) os.get(eventKey(base + i));
    },
    putEvents,
  );
  await time(
    "range read (one `getAll`) of stored event rows",
    "row",
    "rows",
    "readonly",
    (os, base) => {
      os.getAll(IDBKeyRange.bound(eventKey(base), eventKey(base + perRound - 1)));
    },
    putEvents,
  );
  await time("an event row and three index rows: four `put`s", "event", "rows", "readwrite", (os, base) => {
    for (let i = 0; i < perRound; i++) {
      const event = events[i]!;
      os.put({ position: base + i, event }, eventKey(base + i));
      os.put(base + i, ["j", "n", "i", event.id]);
      os.put(0, ["j", "n", "k", "acme", event.orderingKey.subject, base + i]);
      os.put(0, ["j", "n", "r", "billing", base + i]);
    }
  });
  await time("an event row carrying three native index entries: one `put`", "event", "indexed", "readwrite", (os, base) => {
    for (let i = 0; i < perRound; i++) {
      const event = events[i]!;
      os.put(
        { position: base + i, event, a: ["i", event.id], b: ["k", "acme", event.orderingKey.subject, base + i], c: ["r", "billing", base + i] },
        eventKey(base + i),
      );
    }
  });
  // What the engine writes instead of rows: pages (see adapters/indexeddb/pages.ts), shaped like its records.
  const indexPage = {
    h: null,
    k: Array.from({ length: 128 }, (_, i) => `\u0002j\u0000\u0002n\u0000\u0002r\u0000\u0002billing\u0000\u0001${String(i).padStart(8, "0")}`),
    v: Array.from({ length: 128 }, () => 0),
    s: Array.from({ length: 128 }, () => 9),
  };
  const eventPage = {
    h: null,
    k: events.slice(0, 40).map((_, i) => `\u0002j\u0000\u0002n\u0000\u0002e\u0000\u0001${String(i).padStart(8, "0")}`),
    v: events.slice(0, 40).map((event, i) => ({ position: i, event })),
    s: events.slice(0, 40).map(() => 400),
  };
  await time("`put` of a page of 128 index rows (about 5 KB)", "request", "rows", "readwrite", (os, base) => {
    for (let i = 0; i < perRound; i++) os.put(indexPage, ["page", base + i]);
  });
  await time("`put` of a page of 40 event rows (about 16 KB)", "request", "rows", "readwrite", (os, base) => {
    for (let i = 0; i < perRound; i++) os.put(eventPage, ["page", base + i]);
  });
  db.close();
  await deleteDatabase(name);
  return costs;
}

/** Ordering keys of the claim-cost backlog. */
const CLAIM_KEYS = 1000;

/**
 * claim 100 + one ackBatch of them with `backlog` events pending over
 * {@link CLAIM_KEYS} ordering keys. The events' subjects continue round robin
 * over the keys from one append to the next (backlog and top-ups), so a
 * top-up of 100 goes to the next 100 keys, and the backlog spans every key
 * throughout (checked after the cycles).
 */
async function claimCost(backlog: number, cycles: number): Promise<ClaimCostResult> {
  const name = dbName("claim");
  let now = 1_800_000_000_000;
  const clock = () => now;
  let nextKey = 0;
  const spread = (count: number): UsageEvent[] => {
    const events = makeEvents(count, CLAIM_KEYS, nextKey);
    nextKey = (nextKey + count) % CLAIM_KEYS;
    return events;
  };
  // Build the backlog fast (relaxed), then measure on a strict engine over the same database.
  const setup = indexedDbEngine({ name, durability: "relaxed" });
  const setupJournal = createJournal(setup, { name: "bench", capacity, clock });
  for (let done = 0; done < backlog; done += 1000) await setupJournal.appendBatch(spread(Math.min(1000, backlog - done)));
  await setupJournal.claim(consumer, { maxEvents: 1, leaseMs: 1, now }); // register outside the timing
  await setup.close();

  const engine = indexedDbEngine({ name });
  const journal = createJournal(engine, { name: "bench", capacity, clock });
  const times: number[] = [];
  const claimTimes: number[] = [];
  for (let i = 0; i < cycles; i++) {
    now += 10;
    const t0 = performance.now();
    const batch = await journal.claim(consumer, { maxEvents: 100, leaseMs: 30_000, now });
    const t1 = performance.now();
    await journal.ackBatch(batch.map((delivery) => delivery.id)); // a consumer acks the batch it finished in one call
    times.push(performance.now() - t0);
    claimTimes.push(t1 - t0);
    if (batch.length !== 100) throw new Error(`expected a full claim, got ${batch.length}`);
    await journal.appendBatch(spread(100));
  }
  // Untimed: the backlog still spans every key (the consumer's head rows: one per key with unfinished events).
  const keys = (await engine.transact("readonly", (tx) => tx.scan({ prefix: ["j", "bench", "h", consumer] }))).length;
  if (keys !== Math.min(CLAIM_KEYS, backlog)) throw new Error(`after the cycles the backlog spans ${keys} ordering keys, not ${Math.min(CLAIM_KEYS, backlog)}`);
  await engine.close();
  await deleteDatabase(name);
  return {
    backlog,
    cycles,
    keys,
    msPerCycle: times.reduce((a, b) => a + b, 0) / cycles,
    medianMsPerCycle: median(times),
    medianClaimMs: median(claimTimes),
    medianAckMs: median(times.map((total, i) => total - claimTimes[i]!)),
  };
}


// workbox's Queue is written for a service worker: its constructor and every
// pushRequest test `'sync' in self.registration`, which throws in a page
// (there is no `registration`). A registration object without `sync` selects
// workbox's own fallback path (the one `forceSyncFallback` takes): no
// Background Sync registration per push. That leaves out a cost the queue
// has in a real service worker, so it can only flatter workbox.
if (!("registration" in globalThis)) Object.defineProperty(globalThis, "registration", { value: {}, configurable: true });
let queues = 0;

/**
 * append + claim + ack of `perRound` events (single `append`s, then claims
 * of up to 100, each acknowledged with one `ackBatch`, until nothing is pending) vs
 * workbox's Queue: `pushRequest` of `perRound` POST requests whose bodies are
 * the same events as JSON, then `shiftRequest` until the queue is empty.
 * Both sides start from an open, empty store with the consumer registered
 * (untimed); events and requests are built before the clock starts. The
 * order of the two sides alternates round by round. Throughput counts
 * events (requests) through the whole cycle per second.
 *
 * workbox stores each push in a transaction with relaxed durability (and
 * deletes with the browser's default, relaxed since Chromium 121), and takes three
 * transactions per request (add; cursor read; delete). The journal takes one
 * per append, one per claim of up to 100, one per ack; `durability` picks
 * its commits' durability ("strict", the billing-grade default, or "relaxed",
 * workbox's).
 */
async function versusWorkbox(durability: IndexedDbDurability, arrival: "sequential" | "concurrent", perRound: number, rounds: number): Promise<QueuePairResult> {
  const journalRates: number[] = [];
  const workboxRates: number[] = [];
  const ratios: number[] = [];
  // Per-event ms of each side's two phases (enqueue; dequeue + settle), per round.
  const phases = { journalAppend: [] as number[], journalClaimAck: [] as number[], workboxPush: [] as number[], workboxShift: [] as number[] };
  const url = new URL("/usage-events", location.href).href;
  for (let round = 0; round < rounds; round++) {
    const measureWorkbox = async (): Promise<number> => {
      // Queue names are unique per page; all queues share workbox's one database.
      const queue = new Queue(`bench-${run}-${++queues}`, { onSync: async () => {} });
      await queue.size(); // opens workbox's database outside the timing
      const requests = makeEvents(perRound, 100).map(
        (event) => new Request(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(event) }),
      );
      const t0 = performance.now();
      if (arrival === "sequential") for (const request of requests) await queue.pushRequest({ request });
      else await Promise.all(requests.map((request) => queue.pushRequest({ request })));
      const t1 = performance.now();
      let shifted = 0;
      while ((await queue.shiftRequest()) !== undefined) shifted++;
      const t2 = performance.now();
      const rate = (perRound / (t2 - t0)) * 1000;
      phases.workboxPush.push((t1 - t0) / perRound);
      phases.workboxShift.push((t2 - t1) / perRound);
      if (shifted !== perRound) throw new Error(`workbox shifted ${shifted} of ${perRound} requests`);
      return rate;
    };
    const measureJournal = async (): Promise<number> => {
      const name = dbName("versus-workbox");
      const engine = indexedDbEngine({ name, durability });
      const journal = createJournal(engine, { name: "bench", capacity });
      await journal.claim(consumer, { maxEvents: 1, leaseMs: 1, now: Date.now() }); // opens and registers the consumer, untimed
      const events = makeEvents(perRound, 100);
      const t0 = performance.now();
      if (arrival === "sequential") for (const event of events) await journal.append(event);
      else await Promise.all(events.map((event) => journal.append(event)));
      const t1 = performance.now();
      let acked = 0;
      for (;;) {
        const batch = await journal.claim(consumer, { maxEvents: 100, leaseMs: 60_000, now: Date.now() });
        if (batch.length === 0) break;
        await journal.ackBatch(batch.map((delivery) => delivery.id)); // a consumer acks the batch it finished in one call
        acked += batch.length;
      }
      const t2 = performance.now();
      const rate = (perRound / (t2 - t0)) * 1000;
      phases.journalAppend.push((t1 - t0) / perRound);
      phases.journalClaimAck.push((t2 - t1) / perRound);
      if (acked !== perRound) throw new Error(`the journal delivered ${acked} of ${perRound} events`);
      await engine.close();
      await deleteDatabase(name);
      return rate;
    };
    let workboxRate: number;
    let journalRate: number;
    if (round % 2 === 0) {
      workboxRate = await measureWorkbox();
      journalRate = await measureJournal();
    } else {
      journalRate = await measureJournal();
      workboxRate = await measureWorkbox();
    }
    workboxRates.push(workboxRate);
    journalRates.push(journalRate);
    ratios.push(journalRate / workboxRate);
  }
  return {
    journalPerSecond: median(journalRates),
    workboxPerSecond: median(workboxRates),
    ratio: median(ratios),
    rounds,
    perRound,
    durability,
    arrival,
    msPerEvent: {
      journalAppend: median(phases.journalAppend),
      journalClaimAck: median(phases.journalClaimAck),
      workboxPush: median(phases.workboxPush),
      workboxShift: median(phases.workboxShift),
    },
  };
}

async function runAll(options: BenchOptions): Promise<BenchResults> {
  const q = options.quick;
  // Warm up the JIT and the database machinery on both sides first.
  await singleAppend("relaxed", 50, 1);
  const strict = await singleAppend("strict", q ? 50 : 200, 3);
  const relaxed = await singleAppend("relaxed", q ? 50 : 200, 3);
  const batch = await batchAppend(100, q ? 10 : 30, 3, false);
  const batchRegistered = await batchAppend(100, q ? 10 : 30, 3, true);
  const pattern = await batchPattern(q ? 10 : 30, 3);
  const small = await claimCost(1_000, q ? 5 : 20);
  const large = await claimCost(q ? 10_000 : 50_000, q ? 5 : 20);
  const workbox: QueuePairResult[] = [];
  for (const arrival of ["sequential", "concurrent"] as const) {
    for (const durability of ["strict", "relaxed"] as const) workbox.push(await versusWorkbox(durability, arrival, q ? 50 : 200, q ? 3 : 9));
  }
  const requests = await requestCosts(q ? 100 : 400, q ? 3 : 5);
  return { userAgent: navigator.userAgent, strict, relaxed, batch, batchRegistered, pattern, small, large, workbox, requests };
}

(globalThis as { isostoreBench?: typeof runAll }).isostoreBench = runAll;
