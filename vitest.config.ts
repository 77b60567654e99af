// One vitest run, several projects: `node` (inline below) plus one config
// file per real runtime under test/<runtime>/vitest.config.ts (`workers` runs
// in workerd, `browser` in real Chromium). Each adapter's folder owns its own.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "node",
          include: ["src/**/*.test.ts", "adapters/**/*.node.test.ts", "adapters/memory/**/*.test.ts", "test/node/**/*.test.ts"],
          environment: "node",
          testTimeout: 60_000,
        },
      },
      "test/*/vitest.config.ts",
    ],
  },
});
