// One vitest run, several projects: `node` now; `workers` (workerd) and
// `browser` (real Chromium) join as their adapters land.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "node",
          include: ["src/**/*.test.ts", "adapters/memory/**/*.test.ts", "test/node/**/*.test.ts"],
          environment: "node",
          testTimeout: 60_000,
        },
      },
    ],
  },
});
