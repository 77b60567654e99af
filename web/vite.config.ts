/**
 * Build of the quarantine review page: `web/index.html` + `web/src/main.ts`
 * bundled into `web/dist/` as exactly three files (`index.html`, `app.js`,
 * `app.css`) that the worker serves at `/` under
 * `Content-Security-Policy: default-src 'self'`. So: no inline script or
 * style, no module-preload polyfill, nothing inlined as a data: URL, relative
 * asset paths.
 *
 * Build: `npx vite build web` (this file is picked up as the config of root `web/`).
 */
import { defineConfig } from "vite";

export default defineConfig({
  root: import.meta.dirname,
  base: "./",
  publicDir: false,
  logLevel: "warn",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    modulePreload: false,
    assetsInlineLimit: 0,
    cssCodeSplit: false,
    sourcemap: false,
    // Readable output: small enough unminified, and reviewable in the browser as served.
    minify: false,
    rolldownOptions: {
      output: {
        entryFileNames: "app.js",
        chunkFileNames: "app-[name].js",
        assetFileNames: (asset) => (asset.names.some((name) => name.endsWith(".css")) ? "app.css" : "[name][extname]"),
      },
    },
  },
});
