/**
 * `npm run bench`: runs every benchmark in this folder and rewrites
 * BENCHMARKS.md with the machine, the versions, the date and the ratios.
 * Speed goals live here, never in unit tests.
 *
 * `BENCH_QUICK=1` runs smaller sizes (a smoke run; the file says so).
 * `BENCH_RUNTIMES=0` skips the real-runtime benchmarks (Chromium, workerd, `wrangler dev`),
 * which run as child processes and print their own markdown sections.
 */
import { writeFileSync } from "node:fs";
import os from "node:os";
import { spawnSync } from "node:child_process";
import { commitLabel } from "./commit.js";
import { BASELINE_RUNS, claimCost, pipeline } from "./journal-memory.js";
import { orderedBenchTable } from "./ordered-memory.js";
import { storageBenchTable } from "./storage-memory.js";

const quick = process.env.BENCH_QUICK === "1";

function fmt(n: number, digits = 0): string {
  return n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

async function main(): Promise<void> {
  const lines: string[] = [];
  const cpu = os.cpus()[0]?.model ?? "unknown CPU";
  const header = [
    "# Benchmarks",
    "",
    "Written by `npm run bench` (bench/run.ts); do not edit by hand. Ratios compare figures taken in the same run.",
    "",
    `- Commit: ${commitLabel()}`,
    `- Date: ${new Date().toISOString()} (the run's start; each section gives the date it was measured)`,
    `- Machine: ${cpu}, ${os.cpus().length} cores, ${fmt(os.totalmem() / 2 ** 30, 1)} GiB, ${os.platform()} ${os.release()}`,
    `- Node ${process.version}${quick ? " (BENCH_QUICK=1: smoke sizes, not the reference figures)" : ""}`,
    "",
  ];
  const memoryDate = new Date().toISOString();

  // Warm up the JIT on a small pipeline first so neither side pays it.
  await pipeline(2_000, 100);
  const pipelineEvents = quick ? 5_000 : 50_000;
  const pipelineKeys = 1_000;
  const runs = [];
  for (let i = 0; i < 3; i++) runs.push(await pipeline(pipelineEvents, pipelineKeys));
  const best = runs.reduce((a, b) => (b.ratio > a.ratio ? b : a));
  const median = runs.map((r) => r.ratio).sort((a, b) => a - b)[1]!;
  lines.push(
    "## Usage journal over the memory engine",
    "",
    `- Date: ${memoryDate}; Node ${process.version}, in this process (the journal, storage primitive and OrderedIndex tables below)`,
    "",
    `### Pipeline: append ${fmt(pipelineEvents)} events one by one, then claim 100 + ack each until drained (${fmt(pipelineKeys)} ordering keys)`,
    "",
    `| run | journal events/s | bare baseline events/s (median of ${BASELINE_RUNS}) | ratio | engine alone events/s (journal's transactions replayed) | engine alone / baseline | journal / engine alone | least engine work events/s | least engine work / baseline | least store work events/s | least store work / baseline |`,
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...runs.map(
      (r, i) =>
        `| ${i + 1} | ${fmt(r.journalPerSecond)} | ${fmt(r.baselinePerSecond)} | ${fmt(r.ratio, 3)} | ${fmt(r.replayPerSecond)} | ${fmt(r.replayPerSecond / r.baselinePerSecond, 3)} | ${fmt(r.journalPerSecond / r.replayPerSecond, 2)} | ${fmt(r.leastPerSecond)} | ${fmt(r.leastPerSecond / r.baselinePerSecond, 3)} | ${fmt(r.leastStorePerSecond)} | ${fmt(r.leastStorePerSecond / r.baselinePerSecond, 3)} |`,
    ),
    "",
    `Median ratio ${fmt(median, 3)} (best ${fmt(best.ratio, 3)}); target: at least 0.25 (${median >= 0.25 ? "met" : "NOT met"}). The baseline is a Map for dedup and an array per ordering key (bench/journal-memory.ts), with no durability, no transactions, no retention, no attempts; it takes a few ms, so each run times it ${BASELINE_RUNS} times (a fresh baseline each time) and uses the median (its timings ranged ${runs.map((r, i) => `${fmt(r.baselineRange.min)} to ${fmt(r.baselineRange.max)} events/s in run ${i + 1}`).join(", ")}). After the timing every side's deliveries are checked: each event delivered exactly once (the run throws otherwise).`,
    "",
    `Engine alone: the engine transactions the journal ran (${fmt(runs[0]!.transactionsPerEvent, 2)} per event, ${fmt(runs[0]!.callsPerEvent, 1)} engine calls per event), recorded in an untimed run and replayed on a fresh memory engine with no journal code, each read awaited as the journal awaits it; the replay is checked to rebuild the journal's data. It is the most the journal could reach over this engine and this layout if its own code cost nothing: its ratio to the baseline bounds the journal's. "journal / engine alone" is the share of the journal's time the engine takes.`,
    "",
    `Least engine work: the same events through the fewest engine calls we can see for this pipeline's answers, on a fresh memory engine (bench/journal-memory.ts, \`leastEngineWork\`): per event one append transaction (read the request id; write the event, the id and an ordering-key entry), a lease write in a claim transaction per 100, and one ack transaction (read the lease, delete it, write a finished mark); ${fmt(runs[0]!.leastCallsPerEvent, 2)} engine calls and ${fmt(runs[0]!.leastTransactionsPerEvent, 2)} transactions per event (counted as the journal's are, in a recorded untimed run), no attempt history, retention, counters or per-key turn. We know of no layout that keeps the journal's rules and does much less, so its ratio to the baseline is about the most a journal over this engine could reach, its layout cut to the bone and its own code free.`,
    "",
    `Least store work: the same rows, reads and writes as least engine work, done straight on the memory engine's ordered store (\`OrderedTrie\`, \`leastStoreWork\`), synchronously: no Engine API, no transaction, no undo log, no promise inside a step, one \`await\` per append, claim and ack as a caller of an asynchronous journal pays. It bounds every journal that keeps rows like these in that store, whatever engine API it had (synchronous reads included) and however little code it ran: a journal that also keeps the spec's rules (attempts, retention, counters, the per-key turn) writes more rows than this and runs code besides.`,
    "",
  );

  const cycles = quick ? 10 : 50;
  const rounds: { small: Awaited<ReturnType<typeof claimCost>>; large: Awaited<ReturnType<typeof claimCost>> }[] = [];
  for (let round = 0; round < 3; round++) {
    // Alternate which backlog goes first, so drift in the machine's state falls on both.
    const first = round % 2 === 0;
    const a = await claimCost(first ? 1_000 : quick ? 20_000 : 100_000, 1_000, cycles);
    const b = await claimCost(first ? (quick ? 20_000 : 100_000) : 1_000, 1_000, cycles);
    rounds.push(first ? { small: a, large: b } : { small: b, large: a });
  }
  const ratios = rounds.map((r) => r.large.medianMsPerCycle / r.small.medianMsPerCycle);
  const medianRatio = [...ratios].sort((x, y) => x - y)[1]!;
  lines.push(
    `### Claim cost as the backlog grows (claim 100 + ack 100, ${fmt(rounds[0]!.small.keys)} ordering keys)`,
    "",
    "| round | pending events | cycles | mean ms per claim+ack cycle | median ms | ratio of medians (large/small) |",
    "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ...rounds.flatMap((r, i) => [
      `| ${i + 1} | ${fmt(r.small.backlog)} | ${r.small.cycles} | ${fmt(r.small.msPerCycle, 2)} | ${fmt(r.small.medianMsPerCycle, 2)} | |`,
      `| ${i + 1} | ${fmt(r.large.backlog)} | ${r.large.cycles} | ${fmt(r.large.msPerCycle, 2)} | ${fmt(r.large.medianMsPerCycle, 2)} | ${fmt(ratios[i]!, 2)} |`,
    ]),
    "",
    `Median ratio large/small over the rounds: ${fmt(medianRatio, 2)} (target: within 2x). Medians per cycle, because a garbage collection pause lands on a few cycles of either run. The backlog spans all ${fmt(rounds[0]!.small.keys)} keys throughout: its top-ups continue round robin over the keys (checked after each run).`,
    "",
  );

  lines.push(await storageBenchTable(quick ? 2_000 : 20_000), "");
  lines.push("### OrderedIndex: listDue over records with 1% due", "", await orderedBenchTable(quick ? 20_000 : 100_000), "");

  if (process.env.BENCH_RUNTIMES !== "0") {
    lines.push(runtimeSection("npx", ["tsx", "bench/indexeddb-browser.ts"], "## Usage journal over the IndexedDB engine"));
    lines.push(runtimeSection("npx", ["vitest", "run", "-c", "bench/durable-objects/vitest.config.ts"], "## Durable Objects adapter"));
    lines.push(runtimeSection("npx", ["tsx", "bench/http.ts"], "## Usage journal over HTTP"));
    lines.push(runtimeSection("npx", ["tsx", "bench/forwarding.ts"], "## Forwarding and the usage middleware"));
  }

  const text = [...header, ...lines].join("\n");
  writeFileSync(new URL("../BENCHMARKS.md", import.meta.url), text);
  console.log(text);
}

/** Run a real-runtime benchmark and keep the markdown it prints from `heading` on. */
function runtimeSection(command: string, args: string[], heading: string): string {
  const run = spawnSync(command, args, { encoding: "utf8", env: { ...process.env, WRANGLER_SEND_METRICS: "false" }, maxBuffer: 64 * 2 ** 20 });
  const output = `${run.stdout ?? ""}`;
  const start = output.indexOf(heading);
  if (run.status !== 0 || start < 0) {
    return `${heading}\n\nNot measured in this run: \`${command} ${args.join(" ")}\` exited with ${String(run.status)}.\n`;
  }
  // Keep the section, without the test runner's own lines after it.
  const section = output.slice(start).split("\n");
  const end = section.findIndex((line, i) => i > 0 && /^\s*(✓|×|Test Files|stdout \||\x1b)/u.test(line));
  return `${(end > 0 ? section.slice(0, end) : section).join("\n").trimEnd()}\n`;
}

await main();
