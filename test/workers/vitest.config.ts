// The `workers` project: tests that run inside workerd (Durable Objects with
// SQLite storage), through @cloudflare/vitest-pool-workers' `cloudflareTest`.
import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

process.env["WRANGLER_SEND_METRICS"] ??= "false";

export default defineConfig({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: "./wrangler.toml" },
      // `SOAK=1 npm test` reaches the suites running inside workerd: a binding
      // of the test worker, copied onto the test's `process.env` by soak-setup.ts.
      miniflare: { bindings: { SOAK: process.env["SOAK"] ?? "" } },
    }),
  ],
  test: {
    name: "workers",
    include: ["**/*.test.ts"],
    setupFiles: ["./soak-setup.ts"],
    testTimeout: 60_000,
  },
});
