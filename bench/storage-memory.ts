/**
 * Benchmarks of the storage primitives over the memory engine, each beside
 * the raw engine operations it needs (same engine, same run), as a ratio of
 * throughputs (primitive / raw; 1.0 means the layer costs nothing).
 *
 * 1. Ledger: N appends one by one (a readwrite transaction with a one-entry
 *    reverse scan for the tip and one put), then one full read through a
 *    cursor (readonly transactions scanning pages of 256).
 * 2. KV: N creating puts (a readwrite transaction: get the row, get and put
 *    the store's revision counter, put the row), then N gets.
 *
 * `npx tsx bench/storage-memory.ts` prints a markdown table; `bench/run.ts`
 * can import the functions.
 */
import { memoryEngine } from "../adapters/memory/index.js";
import type { Engine, Key } from "../src/engine.js";
import { createStore } from "../src/storage/store.js";

/** One comparison: operations per second through the primitive and through raw engine calls. */
export interface StorageBenchResult {
  readonly operations: number;
  readonly primitivePerSecond: number;
  readonly rawPerSecond: number;
  /** primitivePerSecond / rawPerSecond. */
  readonly ratio: number;
}

function result(operations: number, primitiveMs: number, rawMs: number): StorageBenchResult {
  const primitivePerSecond = (operations / primitiveMs) * 1000;
  const rawPerSecond = (operations / rawMs) * 1000;
  return { operations, primitivePerSecond, rawPerSecond, ratio: primitivePerSecond / rawPerSecond };
}

const payload = new Uint8Array(64).map((_, i) => i);

/** The raw engine operations of `count` appends and one full read. */
async function rawLedger(engine: Engine, count: number): Promise<void> {
  const prefix: Key = ["raw", "lr", "bench"];
  for (let expected = 0; expected < count; expected++) {
    await engine.transact("readwrite", async (tx) => {
      const last = await tx.scan({ prefix }, { reverse: true, limit: 1 });
      const tip = typeof last[0]?.key[3] === "number" ? last[0].key[3] : 0;
      if (tip !== expected) throw new Error("conflict");
      tx.put([...prefix, expected + 1], payload.slice());
    });
  }
  let read = 0;
  for (let from = 1; from <= count; from += 256) {
    const page = await engine.transact("readonly", (tx) => tx.scan<Uint8Array>({ lower: [...prefix, from], upper: [...prefix, Math.min(count, from + 255)] }));
    for (const entry of page) read += entry.value.slice().length;
  }
  if (read !== count * payload.length) throw new Error("raw read lost records");
}

/**
 * The best (smallest) of `rounds` timings of each side. The sides take turns
 * within a round, and which goes first alternates round by round (raw first
 * in even rounds, the primitive first in odd ones), so neither always runs
 * with the warmer JIT or after the other's garbage.
 */
async function bestOf(rounds: number, raw: () => Promise<void>, primitive: () => Promise<void>): Promise<{ rawMs: number; primitiveMs: number }> {
  let rawMs = Infinity;
  let primitiveMs = Infinity;
  const time = async (run: () => Promise<void>): Promise<number> => {
    const t0 = performance.now();
    await run();
    return performance.now() - t0;
  };
  for (let round = 0; round < rounds; round++) {
    if (round % 2 === 0) {
      rawMs = Math.min(rawMs, await time(raw));
      primitiveMs = Math.min(primitiveMs, await time(primitive));
    } else {
      primitiveMs = Math.min(primitiveMs, await time(primitive));
      rawMs = Math.min(rawMs, await time(raw));
    }
  }
  return { rawMs, primitiveMs };
}

/** Ledger append one by one, then a full read: operations = appends + records read (best of 3). */
export async function ledgerAppendRead(count: number): Promise<StorageBenchResult> {
  const { rawMs, primitiveMs } = await bestOf(
    3,
    async () => {
      const engine = memoryEngine();
      await rawLedger(engine, count);
      await engine.close();
    },
    async () => {
      const engine = memoryEngine();
      const { ledger } = createStore(engine, { name: "bench" });
      for (let expected = 0; expected < count; expected++) await ledger.append("bench", expected, payload);
      let read = 0;
      for await (const record of await ledger.read("bench", 1)) read += record.payload.length;
      await engine.close();
      if (read !== count * payload.length) throw new Error("ledger read lost records");
    },
  );
  return result(count * 2, primitiveMs, rawMs);
}

/** KV creating puts then gets: operations = puts + gets (best of 3). */
export async function kvPutGet(count: number): Promise<StorageBenchResult> {
  const keys = Array.from({ length: count }, (_, i) => `sessions/s${i}`);
  const { rawMs, primitiveMs } = await bestOf(
    3,
    async () => {
      const engine = memoryEngine();
      for (const key of keys) {
        await engine.transact("readwrite", async (tx) => {
          const row = await tx.get<{ rev: number }>(["raw", "kv", key]);
          if (row !== undefined) throw new Error("conflict");
          const rev = ((await tx.get<number>(["raw", "kvc"])) ?? 0) + 1;
          tx.put(["raw", "kvc"], rev);
          tx.put(["raw", "kv", key], { rev, value: payload.slice() });
        });
      }
      for (const key of keys) {
        const row = await engine.transact("readonly", (tx) => tx.get<{ rev: number; value: Uint8Array }>(["raw", "kv", key]));
        if (row === undefined) throw new Error("raw get lost a key");
        row.value.slice();
      }
      await engine.close();
    },
    async () => {
      const engine = memoryEngine();
      const { kv } = createStore(engine, { name: "bench" });
      for (const key of keys) await kv.put(key, 0, payload);
      for (const key of keys) await kv.get(key);
      await engine.close();
    },
  );
  return result(count * 2, primitiveMs, rawMs);
}

function fmt(n: number, digits = 0): string {
  return n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

/** The markdown table of one run of both benchmarks. */
export async function storageBenchTable(count: number): Promise<string> {
  const ledger = await ledgerAppendRead(count);
  const kv = await kvPutGet(count);
  return [
    `### Storage primitives over the memory engine (${fmt(count)} records / keys, 64-byte values)`,
    "",
    "| benchmark | primitive ops/s | raw engine ops/s | ratio |",
    "| --- | ---: | ---: | ---: |",
    `| ledger append + full read | ${fmt(ledger.primitivePerSecond)} | ${fmt(ledger.rawPerSecond)} | ${fmt(ledger.ratio, 3)} |`,
    `| KV put (create) + get | ${fmt(kv.primitivePerSecond)} | ${fmt(kv.rawPerSecond)} | ${fmt(kv.ratio, 3)} |`,
    "",
    "Raw: the same engine transactions written inline (bench/storage-memory.ts), without validation, options, error wrapping or copies beyond one. Best of 3 runs per side; the sides take turns, and which goes first alternates round by round (raw first in rounds 1 and 3, the primitive in round 2).",
    "",
  ].join("\n");
}

if (process.argv[1]?.endsWith("storage-memory.ts")) {
  const count = process.env.BENCH_QUICK === "1" ? 5_000 : 50_000;
  console.log(await storageBenchTable(count));
}
