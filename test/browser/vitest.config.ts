// The `browser` project: tests that need a real browser (IndexedDB in
// Chromium), run by vitest browser mode through Playwright with Debian's
// Chromium (/usr/bin/chromium; no browser download). Headless, one instance.
import { playwright } from "@vitest/browser-playwright";
import { defineConfig } from "vitest/config";
import { tabCommands } from "./tab-commands.js";

export default defineConfig({
  // `SOAK=1 npm test` reaches the suites in the page (see soak-setup.ts).
  define: { __ISOSTORE_SOAK__: JSON.stringify(process.env["SOAK"] === "1") },
  test: {
    name: "browser",
    include: ["**/*.test.ts"],
    setupFiles: ["./soak-setup.ts"],
    testTimeout: 60_000,
    browser: {
      enabled: true,
      headless: true,
      screenshotFailures: false,
      provider: playwright({
        launchOptions: {
          executablePath: "/usr/bin/chromium",
          args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
        },
      }),
      instances: [{ browser: "chromium" }],
      commands: tabCommands,
    },
  },
});
