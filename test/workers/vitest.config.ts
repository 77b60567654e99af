// The `workers` project: tests that run inside workerd (Durable Objects with
// SQLite storage), through @cloudflare/vitest-pool-workers' `cloudflareTest`.
import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

process.env["WRANGLER_SEND_METRICS"] ??= "false";

export default defineConfig({
  plugins: [cloudflareTest({ wrangler: { configPath: "./wrangler.toml" } })],
  test: {
    name: "workers",
    include: ["**/*.test.ts"],
    testTimeout: 60_000,
  },
});
