/**
 * Setup file of the `workers` project: `SOAK=1 npm test` must reach the suites
 * that run inside workerd, which has no process environment of the shell.
 * The vitest config passes `SOAK` as a binding of the test worker; this
 * turns it into the switch `isostore/testing` reads (`soakRequested`).
 */
import { env } from "cloudflare:workers";

if (env.SOAK === "1") (globalThis as { ISOSTORE_SOAK?: boolean }).ISOSTORE_SOAK = true;
