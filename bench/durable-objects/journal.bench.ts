/**
 * Benchmarks of the Durable Objects adapter, in workerd (local, one process):
 * `npm run bench:durable-objects` prints a markdown
 * section for BENCHMARKS.md. `BENCH_QUICK=1` runs smaller sizes.
 *
 * Timing: workerd only advances the clock at I/O, so every figure is taken
 * by the caller around an RPC (or `runInDurableObject`) that does many
 * operations inside the object, never inside the object itself.
 */
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { it } from "vitest";
import { durableObjectEngine, PartitionedJournal, type DurableObjectStorageHandle } from "../../adapters/durable-objects/index.js";
import { decodeKey, fromBlob } from "../../adapters/durable-objects/key-codec.js";
import { createJournal, createUsageEvent, parseConsumerId, type Capacity, type UsageEvent } from "../../src/index.js";

/** Set by bench/durable-objects/vitest.config.ts from `BENCH_QUICK=1` (workerd has no process.env here). */
declare const __BENCH_QUICK__: boolean;
/** Set by bench/durable-objects/vitest.config.ts: the versions this run depends on, read from node_modules. */
declare const __BENCH_VERSIONS__: { readonly workerd: string; readonly wrangler: string; readonly miniflare: string; readonly vitestPoolWorkers: string; readonly vitest: string };
const quick = __BENCH_QUICK__;
const billing = parseConsumerId("billing");
const ROOMY: Capacity = { maxEvents: 10_000_000, maxDeliveryAttempts: 8, retainAcknowledgedMs: 86_400_000, policy: "refuse" };
let ids = 0;

function event(subject: string, now: number): UsageEvent {
  const n = ++ids;
  const requestId = `0190e000-0000-7000-8${(n >>> 28).toString(16).padStart(3, "0")}-${(n & 0xfffffff).toString(16).padStart(12, "0")}`;
  return createUsageEvent({ record: { requestId, namespace: "acme", subject, data: { tokens: n % 1000, model: "m-1" } }, observedAt: now });
}

/** `size` events over `keys` subjects, round robin from subject `firstKey` (mod `keys`). */
function batch(size: number, keys: number, firstKey = 0): UsageEvent[] {
  return Array.from({ length: size }, (_, i) => event(`user-${(firstKey + i) % keys}`, 1_700_000_000_000));
}

async function timed(run: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await run();
  return performance.now() - start;
}

function host(name: string) {
  return env.ENGINE_HOST.get(env.ENGINE_HOST.idFromName(name));
}

function fmt(n: number, digits = 0): string {
  return n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

let rowsPerEvent = 0;
/** Rows the journal wrote in the last round, by layout table (`src/journal/layout.ts`). */
const rowKinds = new Map<string, number>();

it("durable objects benchmark", async () => {
  const lines: string[] = ["## Durable Objects adapter (workerd, local)", ""];
  const v = __BENCH_VERSIONS__;
  lines.push(
    `- Date: ${new Date().toISOString()}`,
    `- workerd ${v.workerd} through @cloudflare/vitest-pool-workers ${v.vitestPoolWorkers} (miniflare ${v.miniflare}, wrangler ${v.wrangler} reading test/workers/wrangler.toml; vitest ${v.vitest})`,
    "- Written by `npm run bench:durable-objects` (bench/durable-objects/journal.bench.ts).",
    "",
    `One local workerd process, SQLite on local disk${quick ? "; BENCH_QUICK=1 smoke sizes" : ""}.`,
    "",
  );

  // 1. appendBatch of 100 into one object vs raw INSERTs of the same rows in the same object.
  const batches = quick ? 10 : 40;
  const rounds = 7;
  const journalMs: number[] = [];
  const rawMs: number[] = [];
  const sameRowsMs: number[] = [];
  const stub = host("bench-append");
  await runInDurableObject(stub, (_instance, state) => {
    state.storage.sql.exec("CREATE TABLE IF NOT EXISTS raw_events (id TEXT PRIMARY KEY, namespace TEXT, subject TEXT, data TEXT, observed_at INTEGER)");
    state.storage.sql.exec("CREATE TABLE IF NOT EXISTS raw_kv (k BLOB PRIMARY KEY, v TEXT NOT NULL, t INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID");
  });
  // Rows in the journal's table and in the "same rows" table of `stub`.
  const rowCounts = () =>
    runInDurableObject(stub, (_instance, state) => {
      const exists = (table: string) => state.storage.sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", table).toArray().length > 0;
      // The journal's table is created by its first write.
      const count = (table: string) => (exists(table) ? Number(state.storage.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`).one().n) : 0);
      return { journal: count("_isostore_kv"), raw: count("raw_kv") };
    });
  // One scratch object records the journal's rows for every round, so its positions continue
  // round after round as those of the journal in `stub` do: the replay then inserts new rows as
  // the journal does (a fresh object per round would restart at position 1 and overwrite them).
  const recorder = host("bench-record");
  for (let round = 0; round < rounds + 1; round++) {
    const forJournal = Array.from({ length: batches }, () => batch(100, 10));
    const forRaw = Array.from({ length: batches }, () => batch(100, 10));
    // The rows the journal writes for each batch (recorded in the scratch object),
    // to replay as plain single-row INSERTs: the "same rows" baseline.
    const rows: unknown[][][] = [];
    await runInDurableObject(recorder, async (_instance, state) => {
      let current: unknown[][] = [];
      const recording: DurableObjectStorageHandle = {
        sql: {
          exec: (query: string, ...bindings: unknown[]) => {
            if (query.startsWith("INSERT OR REPLACE INTO _isostore_kv")) for (let i = 0; i < bindings.length; i += 3) current.push(bindings.slice(i, i + 3));
            return state.storage.sql.exec(query, ...bindings);
          },
        },
        transactionSync: (closure) => state.storage.transactionSync(closure),
      };
      const journal = createJournal(durableObjectEngine(recording), { name: "bench", capacity: ROOMY });
      for (const events of forRaw) {
        current = [];
        await journal.appendBatch(events);
        rows.push(current);
      }
    });
    const before = await rowCounts();
    const j = await timed(() =>
      runInDurableObject(stub, async (_instance, state) => {
        const journal = createJournal(durableObjectEngine(state.storage), { name: "bench", capacity: ROOMY });
        for (const events of forJournal) await journal.appendBatch(events);
      }),
    );
    const r = await timed(() =>
      runInDurableObject(stub, (_instance, state) => {
        for (const events of forRaw) {
          state.storage.transactionSync(() => {
            for (const e of events) {
              state.storage.sql.exec(
                "INSERT INTO raw_events (id, namespace, subject, data, observed_at) VALUES (?, ?, ?, ?, ?)",
                e.id,
                e.orderingKey.namespace,
                e.orderingKey.subject,
                JSON.stringify(e.record.data),
                e.observedAt,
              );
            }
          });
        }
      }),
    );
    const same = await timed(() =>
      runInDurableObject(stub, (_instance, state) => {
        for (const batchRows of rows) {
          state.storage.transactionSync(() => {
            for (const row of batchRows) state.storage.sql.exec("INSERT OR REPLACE INTO raw_kv (k, v, t) VALUES (?, ?, ?)", ...row);
          });
        }
      }),
    );
    // Untimed: the replay added as many new rows to its table as the journal did to its own.
    const after = await rowCounts();
    if (after.raw - before.raw !== after.journal - before.journal) {
      throw new Error(`round ${round}: the journal added ${after.journal - before.journal} rows to its table, the "same rows" replay ${after.raw - before.raw} (of ${rows.flat().length} written)`);
    }
    rowsPerEvent = rows.reduce((sum, list) => sum + list.length, 0) / (batches * 100);
    rowKinds.clear();
    for (const row of rows.flat()) {
      const kind = String(decodeKey(fromBlob(row[0] as ArrayBuffer))[2]);
      rowKinds.set(kind, (rowKinds.get(kind) ?? 0) + 1);
    }
    if (round > 0) {
      journalMs.push(j);
      rawMs.push(r);
      sameRowsMs.push(same);
    }
  }
  const perJournal = (batches * 100) / (median(journalMs) / 1000);
  const perRaw = (batches * 100) / (median(rawMs) / 1000);
  const perSameRows = (batches * 100) / (median(sameRowsMs) / 1000);
  // End to end: the same through RPC from the worker to a JournalPartition (P = 1).
  const rpc = new PartitionedJournal(env.PARTITIONS, { name: "bench", partitions: 1, capacity: ROOMY, scope: "bench-rpc/" });
  await rpc.appendBatch(batch(100, 10));
  const rpcBatches = Array.from({ length: batches }, () => batch(100, 10));
  const rpcMs = await timed(async () => {
    for (const events of rpcBatches) await rpc.appendBatch(events);
  });
  const perRpc = (batches * 100) / (rpcMs / 1000);
  lines.push(
    "### appendBatch(100) into one object vs raw `sql.exec` INSERTs",
    "",
    `${batches} batches of 100 events per round, median of ${rounds} rounds. Raw paths: one \`transactionSync\` per batch, one single-row \`sql.exec\` INSERT per row, in the same object. "Same rows" replays exactly the rows the journal writes for those events, recorded by a journal in a scratch object whose positions continue round after round as the measured journal's do, so the replay inserts new rows as the journal does (checked each round: both tables grow by the same number of rows) (${fmt(rowsPerEvent, 2)} rows per event; by layout table: ${[...rowKinds].map(([kind, count]) => `\`${kind}\` ${fmt(count / (batches * 100), 2)}`).join(", ")}); "1 row per event" is a plain events table.`,
    "",
    "| path | events/s |",
    "| --- | ---: |",
    `| raw \`sql.exec\` INSERT, 1 row per event | ${fmt(perRaw)} |`,
    `| raw \`sql.exec\` INSERT of the same rows the journal writes | ${fmt(perSameRows)} |`,
    `| \`createJournal(durableObjectEngine(ctx.storage)).appendBatch\` in the object | ${fmt(perJournal)} |`,
    `| \`PartitionedJournal\` (P = 1) \`appendBatch\` over RPC | ${fmt(perRpc)} |`,
    "",
    `Ratio journal / raw same rows: **${fmt(median(sameRowsMs.map((ms, i) => ms / journalMs[i]!)), 2)}** (median of the per-round ratios; rounds ranged ${fmt(Math.min(...sameRowsMs.map((ms, i) => ms / journalMs[i]!)), 2)} to ${fmt(Math.max(...sameRowsMs.map((ms, i) => ms / journalMs[i]!)), 2)}; target >= 0.5); journal / raw 1 row per event: **${fmt(median(rawMs.map((ms, i) => ms / journalMs[i]!)), 2)}**.`,
    "",
  );

  // 2. 50 concurrent single appends into one partition.
  const single = new PartitionedJournal(env.PARTITIONS, { name: "bench", partitions: 1, capacity: ROOMY, scope: "bench-single/" });
  await single.append(event("warm", 1_700_000_000_000));
  const waves = quick ? 4 : 20;
  const concurrentMs = await timed(async () => {
    for (let w = 0; w < waves; w++) await Promise.all(Array.from({ length: 50 }, (_, i) => single.append(event(`user-${i}`, 1_700_000_000_000))));
  });
  const sequentialMs = await timed(async () => {
    for (let i = 0; i < 200; i++) await single.append(event(`user-${i % 50}`, 1_700_000_000_000));
  });
  lines.push(
    "### Single appends into one partition",
    "",
    "| pattern | events/s |",
    "| --- | ---: |",
    `| 50 concurrent \`append\` calls (x${waves}) | ${fmt((waves * 50) / (concurrentMs / 1000))} |`,
    `| 200 sequential \`append\` calls | ${fmt(200 / (sequentialMs / 1000))} |`,
    "",
    `Concurrent / sequential: **${fmt((waves * 50) / (concurrentMs / 1000) / (200 / (sequentialMs / 1000)), 2)}**. The journal commits appends that arrive while an append transaction is still running together (group commit); inside an object a transaction runs on SQLite synchronously, so appends arriving by separate RPCs overlap that way only as the runtime interleaves them. Each RPC answer waits for its write to be confirmed (output gate). For throughput batch with \`appendBatch\` (one transaction per partition share).`,
    "",
  );

  // 3. claim + ack at 1,000 and at 100,000 pending events in one partition:
  // rounds of a few cycles, the sizes alternating, each round topped up
  // (untimed) so the backlog stays at its size; the median round per size.
  const sizes = quick ? [1_000, 10_000] : [1_000, 100_000];
  const claimRounds = quick ? 3 : 7;
  const cyclesPerRound = 5;
  const claimKeys = 1000;
  // Per object, the next subject: each fill continues round robin over the keys, so a top-up goes to the
  // next keys (the ones the last claims emptied, at backlog = keys) and the backlog spans every key throughout.
  const nextKey = new Map<ReturnType<typeof host>, number>();
  const fill = async (object: ReturnType<typeof host>, count: number, register: boolean): Promise<void> => {
    for (let filled = 0; filled < count; ) {
      const chunk = Math.min(count - filled, 5_000);
      const events = Array.from({ length: chunk / 100 }, () => {
        const first = nextKey.get(object) ?? 0;
        nextKey.set(object, (first + 100) % claimKeys);
        return batch(100, claimKeys, first);
      });
      await runInDurableObject(object, async (_instance, state) => {
        const journal = createJournal(durableObjectEngine(state.storage), { name: "bench", capacity: ROOMY });
        if (register && filled === 0) await journal.claim(billing, { maxEvents: 1, leaseMs: 1, now: 1_700_000_000_000 }); // register first
        for (const events100 of events) await journal.appendBatch(events100);
      });
      filled += chunk;
    }
  };
  const objects = sizes.map((size) => host(`bench-claim-${size}`));
  for (const [i, size] of sizes.entries()) {
    await fill(objects[i]!, size, true);
    // One untimed cycle first, so both sizes are measured warm; then back to the size.
    await runInDurableObject(objects[i]!, async (_instance, state) => {
      // The journal's clock is the claims' (acks read it): each ack lands inside its lease, the normal path.
      const journal = createJournal(durableObjectEngine(state.storage), { name: "bench", capacity: ROOMY, clock: () => 1_700_000_000_000 });
      for (const delivery of await journal.claim(billing, { maxEvents: 100, leaseMs: 60_000, now: 1_700_000_000_000 })) await journal.ack(delivery.id);
    });
    await fill(objects[i]!, 100, false);
  }
  const samples: number[][] = sizes.map(() => []);
  let clock = 1_700_000_000_001;
  for (let round = 0; round < claimRounds; round++) {
    for (const [i, object] of objects.entries()) {
      const ms = await timed(() =>
        runInDurableObject(object, async (_instance, state) => {
          // Acks read the journal's clock: the claims' time, so each lands inside its lease (not a recovery ack).
          const journal = createJournal(durableObjectEngine(state.storage), { name: "bench", capacity: ROOMY, clock: () => clock });
          for (let c = 0; c < cyclesPerRound; c++) {
            const deliveries = await journal.claim(billing, { maxEvents: 100, leaseMs: 60_000, now: clock++ });
            if (deliveries.length !== 100) throw new Error(`expected a full claim of 100, got ${deliveries.length}`);
            for (const delivery of deliveries) await journal.ack(delivery.id);
          }
        }),
      );
      samples[i]!.push((ms * 1000) / (cyclesPerRound * 100));
      await fill(object, cyclesPerRound * 100, false);
    }
  }
  // Untimed: each backlog still spans every key (the consumer's head rows: one per key with unfinished events).
  for (const [i, object] of objects.entries()) {
    const keys = await runInDurableObject(object, async (_instance, state) =>
      (await durableObjectEngine(state.storage).transact("readonly", (tx) => tx.scan({ prefix: ["j", "bench", "h", billing] }))).length,
    );
    if (keys !== Math.min(claimKeys, sizes[i]!)) throw new Error(`after the rounds the ${fmt(sizes[i]!)} backlog spans ${keys} ordering keys, not ${Math.min(claimKeys, sizes[i]!)}`);
  }
  const perEvent = samples.map(median);
  const claimRows = sizes.map((size, i) => `| ${fmt(size)} | ${fmt(perEvent[i]!, 1)} | ${fmt(1e6 / perEvent[i]!)} | ${fmt(Math.min(...samples[i]!), 1)} to ${fmt(Math.max(...samples[i]!), 1)} |`);
  lines.push(
    `### claim(100) + 100 acks in one partition, by backlog (${fmt(claimKeys)} ordering keys)`,
    "",
    "| pending events | µs per claimed+acked event (median round) | events/s | rounds ranged (µs) |",
    "| ---: | ---: | ---: | ---: |",
    ...claimRows,
    "",
    `Ratio largest / smallest backlog: **${fmt(perEvent[perEvent.length - 1]! / perEvent[0]!, 2)}** (target: within 2x). ${claimRounds} rounds of ${cyclesPerRound} cycles (claim 100, then 100 acks) per size, the sizes alternating round by round; after each round the backlog is topped up, untimed, to its size (each timed claim must return 100), the top-ups continuing round robin over the keys, so the backlog spans all ${fmt(claimKeys)} keys throughout (checked after the rounds).`,
    "",
  );

  // 4. P = 1 vs P = 4 under 4 concurrent producers.
  const producerBatches = quick ? 5 : 25;
  const throughput: number[] = [];
  for (const partitions of [1, 4]) {
    const scope = `bench-p${partitions}/`;
    const producers = Array.from({ length: 4 }, () => new PartitionedJournal(env.PARTITIONS, { name: "bench", partitions, capacity: ROOMY, scope }));
    await producers[0]!.append(event("warm", 1_700_000_000_000));
    const work = producers.map(() => Array.from({ length: producerBatches }, () => batch(50, 64)));
    const ms = await timed(() =>
      Promise.all(
        producers.map(async (producer, i) => {
          for (const events of work[i]!) await producer.appendBatch(events);
        }),
      ),
    );
    throughput.push((4 * producerBatches * 50) / (ms / 1000));
  }
  lines.push(
    "### P = 1 vs P = 4, 4 concurrent producers",
    "",
    `Each producer sends ${producerBatches} batches of 50 events over 64 keys.`,
    "",
    "| partitions | events/s |",
    "| ---: | ---: |",
    `| 1 | ${fmt(throughput[0]!)} |`,
    `| 4 | ${fmt(throughput[1]!)} |`,
    "",
    `Ratio P=4 / P=1: **${fmt(throughput[1]! / throughput[0]!, 2)}**.`,
    "",
    "Locally every object runs in the same workerd process on a shared 2-core machine, and with P = 4 each batch of 50 is split into up to 4 RPCs of about 12 events, each paying its own call and write confirmation: so P = 4 is slower here, and this figure says nothing about scaling. On Cloudflare each object is single-threaded and objects scale horizontally, each placed and run independently (Durable Objects FAQ, \"How much work can a single Durable Object do?\"; the limits page caps storage at 10 GB per object, rows at 2 MB and bound parameters at 100 per query), so at P = 1 a journal's append throughput is bounded by one object's request rate and write latency. More partitions spread that load over more objects, so the bound should rise with P while producers spread over many keys and send batches large enough that each partition's share stays well above one event; how much it rises is not measured here (this local run cannot show it; it needs a deployed worker). The price is per-partition positions and capacity, a fan-out of P calls per claim, stats and list, P lookups for a delivery this worker instance has not seen (none when instances share a `PartitionedJournalMemory`), and one more call per append or batch share: the reservation of each request id at its id-home partition, which is what makes a request id re-used under another ordering key a conflict at any P.",
    "",
  );
  console.log(`\n${lines.join("\n")}`);
});
