// The Durable Objects benchmark runs inside workerd, as a vitest file of its
// own project (not part of `vitest run`): `npm run bench:durable-objects`.
// It uses the test worker (test/workers/wrangler.toml) and prints markdown.
import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

process.env["WRANGLER_SEND_METRICS"] ??= "false";

export default defineConfig({
  define: { __BENCH_QUICK__: JSON.stringify(process.env["BENCH_QUICK"] === "1") },
  plugins: [cloudflareTest({ wrangler: { configPath: "../../test/workers/wrangler.toml" } })],
  test: {
    name: "workers-bench",
    root: import.meta.dirname,
    include: ["journal.bench.ts"],
    testTimeout: 600_000,
  },
});
