/**
 * `npx tsx bench/http.ts`: what the HTTP API costs. Prints a markdown section
 * for BENCHMARKS.md (`npm run bench` runs it as a child process, like the other
 * real-runtime benchmarks).
 *
 * Three ways to append the same kind of events, same client calls, same run:
 * - HTTP: `HttpJournal` in Node -> `wrangler dev` on 127.0.0.1 (the real
 *   worker of wrangler.toml: the `usage` journal, a `PartitionedJournal` over
 *   4 `JournalPartition` Durable Objects with local SQLite storage, started
 *   with `startDevWorker` on a fresh `--persist-to` directory; each append
 *   reserves its request id at its id-home partition, one more Durable Object
 *   call, before its key's partition stores it);
 * - in-process app: `HttpJournal` whose fetch is `createApp(...).fetch` over a
 *   memory-engine journal, in this process (Hono routing, zod validation,
 *   JSON both ways, no socket, no Durable Objects);
 * - direct: a memory-engine journal (`createJournal(memoryEngine())`,
 *   `BILLING_GRADE` capacity, `telemetry_grade` mode) called in this process: the in-process baseline Node has.
 *
 * Figures: `appendBatch` of 100 events per call (one `append-batch` request
 * over HTTP); single `append`s awaited one after another (one `append`
 * request each; client batching off); 16 concurrent callers of single
 * `append`s, each on its own ordering key, with client batching off (16
 * requests in flight) and on (the default: appends issued in the same turn
 * travel as one `append-batch`). Each figure is the median of 3 rounds,
 * interleaved across the three sides, after a warm-up.
 *
 * `BENCH_QUICK=1` runs smaller sizes (a smoke run; the output says so).
 */
import { readFileSync, rmSync } from "node:fs";
import os from "node:os";
import { memoryEngine } from "../adapters/memory/index.js";
import { startDevWorker } from "../scripts/dev-worker.mjs";
import { HttpJournal, type FetchLike } from "../src/http/index.js";
import { BILLING_GRADE, createJournal, createUsageEvent, newRequestId, type UsageEvent, type UsageJournal } from "../src/index.js";
import { createApp } from "../src/worker/index.js";

const quick = process.env.BENCH_QUICK === "1";
const ROUNDS = 3;
const BATCHES = quick ? 10 : 100;
const SEQUENTIAL = quick ? 100 : 1_000;
const CONCURRENCY = 16;
const PER_CALLER = quick ? 20 : 100;
const TOKEN = "bench-http-token-0123456789abcdef";
const TOKENS = [{ name: "bench", token: TOKEN, scopes: ["append:*", "consume", "operate"] as const }];

function version(path: string): string {
  return (JSON.parse(readFileSync(new URL(`../node_modules/${path}/package.json`, import.meta.url), "utf8")) as { version: string }).version;
}

function fmt(n: number, digits = 0): string {
  return n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

let sequence = 0;
function event(subject: string): UsageEvent {
  const now = Date.now();
  return createUsageEvent({ record: { requestId: newRequestId(now), namespace: "bench", subject, data: { tokens: sequence++ % 1000, model: "m-1" } }, observedAt: now });
}

/** One side of the comparison: a journal to append to, with batching on or off. */
interface Side {
  readonly name: string;
  /** Client batching off: every `append` is its own call (its own request over HTTP). */
  readonly single: UsageJournal;
  /** Client batching on (the `HttpJournal` default; the direct journal has none). */
  readonly batched: UsageJournal;
}

type Figure = (journal: Side) => Promise<number>;

/** Events per second of `appendBatch` calls of 100. */
const batchFigure: Figure = async (side) => {
  const batches = Array.from({ length: BATCHES }, (_, b) => Array.from({ length: 100 }, (_, i) => event(`batch-${b % 8}-${i % 25}`)));
  const t0 = performance.now();
  for (const batch of batches) {
    const results = await side.single.appendBatch(batch);
    if (results.some((result) => result.status === "rejected")) throw new Error(`${side.name}: a batch event was rejected`);
  }
  return (BATCHES * 100) / ((performance.now() - t0) / 1000);
};

/** Appends per second, one awaited after another. */
const sequentialFigure: Figure = async (side) => {
  const events = Array.from({ length: SEQUENTIAL }, (_, i) => event(`seq-${i % 16}`));
  const t0 = performance.now();
  for (const e of events) await side.single.append(e);
  return SEQUENTIAL / ((performance.now() - t0) / 1000);
};

/** Appends per second of 16 concurrent callers, each appending sequentially on its own key. */
const concurrentFigure =
  (batched: boolean): Figure =>
  async (side) => {
    const journal = batched ? side.batched : side.single;
    const callers = Array.from({ length: CONCURRENCY }, (_, c) => Array.from({ length: PER_CALLER }, () => event(`caller-${c}`)));
    const t0 = performance.now();
    await Promise.all(
      callers.map(async (events) => {
        for (const e of events) await journal.append(e);
      }),
    );
    return (CONCURRENCY * PER_CALLER) / ((performance.now() - t0) / 1000);
  };

const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function main(): Promise<void> {
  const worker = await startDevWorker({ tokens: TOKENS });
  try {
    const httpClient = (batching: boolean) =>
      new HttpJournal({ baseUrl: worker.url, journal: "usage", token: TOKEN, capacity: BILLING_GRADE, mode: "billing_grade", retry: { attempts: 1 }, ...(batching ? {} : { batching: false }) });
    const http: Side = { name: "HTTP", single: httpClient(false), batched: httpClient(true) };

    const appJournal = createJournal(memoryEngine(), { name: "usage", capacity: { ...BILLING_GRADE, maxEvents: 10_000_000 } });
    const app = createApp({ journals: { usage: appJournal }, auth: { tokens: TOKENS } });
    const appFetch: FetchLike = async (url, init) => app.fetch(new Request(url, init));
    const appClient = (batching: boolean) =>
      new HttpJournal({ baseUrl: "http://in-process.test", journal: "usage", token: TOKEN, fetch: appFetch, capacity: appJournal.capacity, mode: appJournal.mode, retry: { attempts: 1 }, ...(batching ? {} : { batching: false }) });
    const inProcess: Side = { name: "in-process app", single: appClient(false), batched: appClient(true) };

    const memory = createJournal(memoryEngine(), { name: "usage", capacity: { ...BILLING_GRADE, maxEvents: 10_000_000 } });
    const direct: Side = { name: "direct", single: memory, batched: memory };

    const sides = [http, inProcess, direct];
    const figures: { label: string; unit: string; figure: Figure }[] = [
      { label: "`appendBatch` of 100 events per call (HTTP: one `append-batch` request per call), calls one after another", unit: "events/s", figure: batchFigure },
      { label: "single `append`, one awaited after another (HTTP: one `append` request each, client batching off)", unit: "appends/s", figure: sequentialFigure },
      { label: `${CONCURRENCY} concurrent callers of single \`append\`, each on its own key (HTTP: ${CONCURRENCY} \`append\` requests in flight, client batching off)`, unit: "appends/s", figure: concurrentFigure(false) },
      { label: `${CONCURRENCY} concurrent callers of single \`append\`, client batching on (the \`HttpJournal\` default: same-turn appends share one \`append-batch\` request)`, unit: "appends/s", figure: concurrentFigure(true) },
    ];

    // Warm-up: JIT, connections, and the Durable Objects' first open.
    for (const side of sides) {
      await side.single.append(event("warm-up"));
      await side.single.appendBatch(Array.from({ length: 100 }, (_, i) => event(`warm-up-${i % 10}`)));
    }

    const rows: string[] = [];
    for (const { label, unit, figure } of figures) {
      const runs = new Map<string, number[]>(sides.map((side) => [side.name, []]));
      for (let round = 0; round < ROUNDS; round++) for (const side of sides) runs.get(side.name)!.push(await figure(side));
      const [h, a, d] = sides.map((side) => median(runs.get(side.name)!)) as [number, number, number];
      rows.push(`| ${label} | ${fmt(h)} ${unit} | ${fmt(a)} ${unit} | ${fmt(d)} ${unit} | ${fmt(h / d, 4)} | ${fmt(h / a, 3)} |`);
    }

    const cpu = os.cpus()[0]?.model ?? "unknown CPU";
    console.log(
      [
        "## Usage journal over HTTP (`wrangler dev` on localhost)",
        "",
        `- Date: ${new Date().toISOString()}`,
        `- Machine: ${cpu}, ${os.cpus().length} cores, ${os.platform()} ${os.release()}; Node ${process.version}; wrangler ${version("wrangler")}, workerd ${version("@cloudflare/workerd-linux-64")}, hono ${version("hono")}${quick ? " (BENCH_QUICK=1: smoke sizes, not the reference figures)" : ""}`,
        "- Written by `npx tsx bench/http.ts`. Columns: **HTTP** is `HttpJournal` in Node calling `wrangler dev` on 127.0.0.1 (the worker of wrangler.toml: journal `usage`, a `PartitionedJournal` over 4 Durable Objects with local SQLite storage, so each answer waits for a durable write); " +
          "**in-process app** is the same `HttpJournal` calls with `createApp(...).fetch` as its fetch, over a memory-engine journal in the same process (routing, validation and JSON both ways; no socket, no Durable Objects); " +
          "**direct** is a memory-engine journal (`BILLING_GRADE` capacity; its mode is `telemetry_grade`, the memory engine not being durable) called in process, the in-process baseline available in Node; it never batches (the client batching rows batch on the HTTP sides only). " +
          "HTTP / direct is what the HTTP layer, the network hop, workerd, Durable Object storage and the partitioning (below) cost together; HTTP / in-process app compares two sides that both do the HTTP layer's work (routing, validation, JSON), so it is what the socket, workerd and Durable Object storage add, and the partitioning: the HTTP side's journal is a 4-partition `PartitionedJournal`, whose `append` first reserves the request id at the id's home partition, one more Durable Object call before the one to the key's partition (an `appendBatch` makes one such call per home partition its events' ids fall in), where the in-process app's journal is a single memory-engine journal. " +
          `Median of ${ROUNDS} interleaved rounds; sizes: ${BATCHES} batches of 100, ${fmt(SEQUENTIAL)} sequential appends, ${CONCURRENCY} callers x ${PER_CALLER} appends.`,
        "",
        "| figure | HTTP (wrangler dev) | in-process app (memory journal) | direct (memory journal) | ratio HTTP / direct | ratio HTTP / in-process app |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        ...rows,
        "",
      ].join("\n"),
    );
  } finally {
    await worker.stop();
    rmSync(worker.persistTo, { recursive: true, force: true });
  }
}

await main();
