// The Durable Objects benchmark runs inside workerd, as a vitest file of its
// own project (not part of `vitest run`): `npm run bench:durable-objects`.
// It uses the test worker (test/workers/wrangler.toml) and prints markdown.
import { readFileSync } from "node:fs";
import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

process.env["WRANGLER_SEND_METRICS"] ??= "false";

/** The installed version of a package (workerd has no access to node_modules: the bench gets them as a constant). */
const version = (name: string): string => (JSON.parse(readFileSync(new URL(`../../node_modules/${name}/package.json`, import.meta.url), "utf8")) as { version: string }).version;

export default defineConfig({
  define: {
    __BENCH_QUICK__: JSON.stringify(process.env["BENCH_QUICK"] === "1"),
    __BENCH_VERSIONS__: JSON.stringify({
      workerd: version("workerd"),
      wrangler: version("wrangler"),
      miniflare: version("miniflare"),
      vitestPoolWorkers: version("@cloudflare/vitest-pool-workers"),
      vitest: version("vitest"),
    }),
  },
  plugins: [cloudflareTest({ wrangler: { configPath: "../../test/workers/wrangler.toml" } })],
  test: {
    name: "workers-bench",
    root: import.meta.dirname,
    include: ["journal.bench.ts"],
    testTimeout: 600_000,
  },
});
