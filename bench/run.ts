/**
 * `npm run bench`: runs every benchmark in this folder and rewrites
 * BENCHMARKS.md with the machine, the versions, the date and the ratios.
 * Speed goals live here, never in unit tests.
 *
 * `BENCH_QUICK=1` runs smaller sizes (a smoke run; the file says so).
 */
import { writeFileSync } from "node:fs";
import os from "node:os";
import { claimCost, pipeline } from "./journal-memory.js";

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
    `- Date: ${new Date().toISOString()}`,
    `- Machine: ${cpu}, ${os.cpus().length} cores, ${fmt(os.totalmem() / 2 ** 30, 1)} GiB, ${os.platform()} ${os.release()}`,
    `- Node ${process.version}${quick ? " (BENCH_QUICK=1: smoke sizes, not the reference figures)" : ""}`,
    "",
  ];

  // Warm up the JIT on a small pipeline first so neither side pays it.
  await pipeline(2_000, 100);
  const pipelineEvents = quick ? 5_000 : 50_000;
  const runs = [];
  for (let i = 0; i < 3; i++) runs.push(await pipeline(pipelineEvents, 1_000));
  const best = runs.reduce((a, b) => (b.ratio > a.ratio ? b : a));
  const median = runs.map((r) => r.ratio).sort((a, b) => a - b)[1]!;
  lines.push(
    "## Usage journal over the memory engine",
    "",
    `### Pipeline: append ${fmt(pipelineEvents)} events one by one, then claim 100 + ack each until drained (1,000 ordering keys)`,
    "",
    "| run | journal events/s | bare baseline events/s | ratio |",
    "| --- | ---: | ---: | ---: |",
    ...runs.map((r, i) => `| ${i + 1} | ${fmt(r.journalPerSecond)} | ${fmt(r.baselinePerSecond)} | ${fmt(r.ratio, 3)} |`),
    "",
    `Median ratio ${fmt(median, 3)} (best ${fmt(best.ratio, 3)}); target: at least 0.25. The baseline is a Map for dedup and an array per ordering key (bench/journal-memory.ts), with no durability, no transactions, no retention, no attempts.`,
    "",
  );

  const cycles = quick ? 10 : 50;
  const small = await claimCost(1_000, 1_000, cycles);
  const large = await claimCost(quick ? 20_000 : 100_000, 1_000, cycles);
  lines.push(
    "### Claim cost as the backlog grows (claim 100 + ack 100, 1,000 ordering keys)",
    "",
    "| pending events | cycles | ms per claim+ack cycle |",
    "| ---: | ---: | ---: |",
    `| ${fmt(small.backlog)} | ${small.cycles} | ${fmt(small.msPerCycle, 2)} |`,
    `| ${fmt(large.backlog)} | ${large.cycles} | ${fmt(large.msPerCycle, 2)} |`,
    "",
    `Ratio large/small: ${fmt(large.msPerCycle / small.msPerCycle, 2)} (target: within 2x).`,
    "",
  );

  const text = [...header, ...lines].join("\n");
  writeFileSync(new URL("../BENCHMARKS.md", import.meta.url), text);
  console.log(text);
}

await main();
