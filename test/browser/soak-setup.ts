/**
 * Setup file of the `browser` project: `SOAK=1 npm test` must reach the suites
 * that run in Chromium, which has no process environment. The vitest config
 * defines `__ISOSTORE_SOAK__` from the shell's `SOAK`; this turns it into the
 * switch `isostore/testing` reads (`soakRequested`).
 */
declare const __ISOSTORE_SOAK__: boolean;

if (__ISOSTORE_SOAK__) (globalThis as { ISOSTORE_SOAK?: boolean }).ISOSTORE_SOAK = true;
