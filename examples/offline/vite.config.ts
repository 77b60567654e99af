/**
 * Build of the offline example page into `web/dist/example/`, so the dev worker
 * (`npm start`) serves it at `/example/` beside the operator UI. Runs after the
 * UI's build (which empties `web/dist`). No inline script or style: the worker
 * serves it under `Content-Security-Policy: default-src 'self'`.
 */
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

export default defineConfig({
  root: import.meta.dirname,
  base: "./",
  publicDir: false,
  logLevel: "warn",
  build: {
    outDir: fileURLToPath(new URL("../../web/dist/example", import.meta.url)),
    emptyOutDir: true,
    target: "es2022",
    modulePreload: false,
    assetsInlineLimit: 0,
    sourcemap: false,
  },
});
