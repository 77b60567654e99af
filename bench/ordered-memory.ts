/**
 * Benchmark of the OrderedIndex over the memory engine: `listDue` over a
 * large collection of which a small share is due, beside the raw engine
 * operations it needs (same engine, same records, same run).
 *
 * Setup: N records (default 100,000) in one namespace, 1% due at or before
 * the bound and the rest due later, so the due index holds all N entries and
 * only N/100 are in range. Timed: paging through every due record with
 * `listDue(limit 100)`, following `nextCursor` to the end.
 *
 * The raw side does what one page needs and nothing else, by hand: in one
 * readonly transaction, a scan of the due index from the last position up to
 * the bound with limit 101 (one look-ahead row decides whether a page
 * follows) and one point read of each record row. The ratio (index time /
 * raw time) is the price of validation, cursor encoding and decoding, row
 * checks and copies; a full scan of every record row is shown for scale (what
 * a listing without the index would cost).
 *
 * `npx tsx bench/ordered-memory.ts` prints a markdown table (`BENCH_QUICK=1`:
 * 20,000 records); `bench/run.ts` can import {@link orderedListDue} and
 * {@link orderedBenchTable}.
 */
import { memoryEngine } from "../adapters/memory/index.js";
import type { Engine, Key } from "../src/engine.js";
import { createOrderedIndex } from "../src/storage/ordered/index.js";
import { OrderedLayout } from "../src/storage/ordered/layout.js";

const STORE = "bench";
const NAMESPACE = "jobs";
const NOW = 1_700_000_000_000;
const PAGE = 100;

/** One run of {@link orderedListDue}. */
export interface OrderedListDueResult {
  readonly records: number;
  readonly due: number;
  readonly pages: number;
  /** Best time (mean of 20 sweeps) to page through every due record with `listDue`. */
  readonly indexMs: number;
  /** Best time (mean of 20 sweeps) of the raw engine operations the same pages need. */
  readonly rawMs: number;
  /** indexMs / rawMs: 1.0 means the layer costs nothing beyond its engine calls. */
  readonly ratio: number;
  /** One scan over every record row, for scale. */
  readonly fullScanMs: number;
}

async function fill(engine: Engine, records: number): Promise<number> {
  const index = createOrderedIndex(engine, { store: STORE });
  let due = 0;
  for (let i = 0; i < records; i++) {
    const isDue = i % 100 === 0;
    if (isDue) due++;
    // Due ones in the past (spread over the last ~minute), the rest in the future.
    const unixMillis = isDue ? NOW - (i % 60_000) : NOW + 1 + (i % 86_400_000);
    await index.create({ namespace: NAMESPACE, orderingScope: `queue-${i % 8}`, stableKey: `job-${i}` }, "priority", new Uint8Array(16), { ranked: false, value: 0 }, { state: "due_at", unixMillis });
  }
  return due;
}

async function pageThroughIndex(engine: Engine): Promise<{ records: number; pages: number }> {
  const index = createOrderedIndex(engine, { store: STORE });
  let cursor = "";
  let records = 0;
  let pages = 0;
  do {
    const page = await index.listDue(NAMESPACE, NOW, cursor, PAGE);
    records += page.records.length;
    pages++;
    cursor = page.nextCursor;
  } while (cursor !== "");
  return { records, pages };
}

async function pageThroughRaw(engine: Engine): Promise<{ records: number; pages: number }> {
  const layout = new OrderedLayout(STORE);
  const prefix = layout.dueAll(NAMESPACE);
  let lower: Key | undefined;
  let records = 0;
  let pages = 0;
  for (;;) {
    const next = await engine.transact("readonly", async (tx) => {
      const range = lower === undefined ? { prefix, upper: [...prefix, NOW + 1], upperOpen: true } : { prefix, lower, lowerOpen: true, upper: [...prefix, NOW + 1], upperOpen: true };
      const entries = await tx.scan<string>(range, { limit: PAGE + 1 });
      const page = entries.slice(0, PAGE);
      for (const entry of page) {
        const row = await tx.get(layout.record(NAMESPACE, entry.key[entry.key.length - 1] as string, entry.value));
        if (row === undefined) throw new Error("raw read lost a record");
      }
      records += page.length;
      return entries.length > PAGE ? page[page.length - 1]!.key : undefined;
    });
    pages++;
    if (next === undefined) return { records, pages };
    lower = next;
  }
}

async function fullScan(engine: Engine): Promise<number> {
  const layout = new OrderedLayout(STORE);
  const rows = await engine.transact("readonly", (tx) => tx.scan({ prefix: [...layout.root, "r"] }));
  return rows.length;
}

/**
 * Page through every due record of `records` (1% due) with `listDue`, and
 * through the same pages with raw engine calls; best of `rounds`, the sides
 * alternating.
 */
export async function orderedListDue(records = 100_000, rounds = 5): Promise<OrderedListDueResult> {
  const engine = memoryEngine();
  const due = await fill(engine, records);
  let indexMs = Infinity;
  let rawMs = Infinity;
  let fullScanMs = Infinity;
  let pages = 0;
  // Each timing repeats the sweep so that it lasts long enough to measure.
  const sweeps = 20;
  for (let round = 0; round < rounds; round++) {
    let t0 = performance.now();
    let raw = { records: 0, pages: 0 };
    for (let i = 0; i < sweeps; i++) raw = await pageThroughRaw(engine);
    rawMs = Math.min(rawMs, (performance.now() - t0) / sweeps);
    t0 = performance.now();
    let listed = { records: 0, pages: 0 };
    for (let i = 0; i < sweeps; i++) listed = await pageThroughIndex(engine);
    indexMs = Math.min(indexMs, (performance.now() - t0) / sweeps);
    if (listed.records !== due || raw.records !== due || listed.pages !== raw.pages) {
      throw new Error(`expected ${due} due records, listDue gave ${listed.records} in ${listed.pages} pages, raw ${raw.records} in ${raw.pages}`);
    }
    pages = listed.pages;
    t0 = performance.now();
    if ((await fullScan(engine)) !== records) throw new Error("the full scan lost records");
    fullScanMs = Math.min(fullScanMs, performance.now() - t0);
  }
  await engine.close();
  return { records, due, pages, indexMs, rawMs, ratio: indexMs / rawMs, fullScanMs };
}

function fmt(n: number, digits = 0): string {
  return n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

/** The markdown row of one result (see {@link ORDERED_BENCH_HEADER}). */
export function orderedBenchRow(result: OrderedListDueResult): string {
  return `| listDue, ${fmt(result.records)} records, ${fmt(result.due)} due, pages of ${PAGE} (${result.pages} pages) | ${fmt(result.indexMs, 2)} | ${fmt(result.rawMs, 2)} | ${fmt(result.ratio, 2)} | ${fmt(result.fullScanMs, 2)} |`;
}

/** The header of the table {@link orderedBenchRow} rows belong to. */
export const ORDERED_BENCH_HEADER = [
  "| OrderedIndex over the memory engine | listDue ms | raw engine ms | ratio (index / raw) | full record scan ms (no index, for scale) |",
  "| --- | ---: | ---: | ---: | ---: |",
].join("\n");

/** The whole markdown table for `records` records. */
export async function orderedBenchTable(records = 100_000): Promise<string> {
  await orderedListDue(Math.min(records, 5_000), 2); // warm up the JIT on both sides
  return `${ORDERED_BENCH_HEADER}\n${orderedBenchRow(await orderedListDue(records))}`;
}

const invokedDirectly = typeof process !== "undefined" && process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].replace(/\\/g, "/"));
if (invokedDirectly) console.log(await orderedBenchTable(process.env["BENCH_QUICK"] === "1" ? 20_000 : 100_000));
