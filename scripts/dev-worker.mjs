// Start the isostore Worker with `wrangler dev` on localhost, with local durable
// storage, and wait until it answers. Used by `npm start` (scripts/start.mjs) and by
// the tests that need the real worker (end to end, UI), so both run it the same way.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** A free TCP port on 127.0.0.1. */
export function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
  });
}

/** Whether `port` on 127.0.0.1 is free to listen on (false when another server holds it). */
export function portIsFree(port) {
  return new Promise((resolveFree) => {
    const server = createServer();
    server.unref();
    server.once("error", () => resolveFree(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolveFree(true)));
  });
}

/**
 * Run the worker. Options:
 * - `port` (default: a free one), `persistTo` (default: a fresh temp directory),
 * - `tokens`: the ISOSTORE_TOKENS array (written to a private env file; the
 *   repository's `.dev.vars` is used when absent),
 * - `vars`: more Worker vars (e.g. `{ ISOSTORE_JOURNALS: "{...}" }`),
 * - `stdio`: "inherit" to show wrangler's output, else it is kept (see `output()`),
 * - `timeoutMs`: how long to wait for /v1/health (default 90 s).
 * Answers `{ url, port, persistTo, child, output(), stop(signal) }`; `stop` kills
 * the process group and resolves when it exited.
 */
export async function startDevWorker(options = {}) {
  const port = options.port ?? (await freePort());
  // Another server on the port would answer the health check below for a wrangler that then fails to listen.
  if (!(await portIsFree(port))) throw new Error(`port ${port} on 127.0.0.1 is in use (another \`npm start\`?); free it or choose another with PORT=`);
  const persistTo = options.persistTo ?? mkdtempSync(join(tmpdir(), "isostore-dev-"));
  const args = ["dev", "--ip", "127.0.0.1", "--port", String(port), "--persist-to", persistTo, "--inspector-port", String(await freePort()), "--show-interactive-dev-session=false", "--log-level", options.logLevel ?? "warn"];
  const env = { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true", NO_COLOR: "1" };
  if (options.tokens || options.vars) {
    const file = join(mkdtempSync(join(tmpdir(), "isostore-env-")), "dev.env");
    const lines = Object.entries({ ...(options.vars ?? {}), ...(options.tokens ? { ISOSTORE_TOKENS: JSON.stringify(options.tokens) } : {}) }).map(
      ([key, value]) => `${key}='${String(value).replaceAll("'", "")}'`,
    );
    writeFileSync(file, `${lines.join("\n")}\n`, { mode: 0o600 });
    args.push("--env-file", file);
  }
  const child = spawn(join(ROOT, "node_modules", ".bin", "wrangler"), args, {
    cwd: ROOT,
    env,
    detached: true,
    stdio: options.stdio === "inherit" ? ["ignore", "inherit", "inherit"] : ["ignore", "pipe", "pipe"],
  });
  let log = "";
  child.stdout?.on("data", (chunk) => (log = (log + chunk).slice(-20_000)));
  child.stderr?.on("data", (chunk) => (log = (log + chunk).slice(-20_000)));
  const exited = new Promise((resolveExit) => child.once("exit", (code, signal) => resolveExit({ code, signal })));
  let gone = false;
  void exited.then(() => (gone = true));
  const url = `http://127.0.0.1:${port}`;
  const stop = async (signal = "SIGTERM") => {
    if (!gone) {
      try {
        process.kill(-child.pid, signal);
      } catch {
        // already gone
      }
    }
    await exited;
  };
  const deadline = Date.now() + (options.timeoutMs ?? 90_000);
  for (;;) {
    if (gone) throw new Error(`wrangler dev exited before it answered:\n${log}`);
    try {
      const answer = await fetch(`${url}/v1/health`);
      // Ours only while our wrangler still runs (it exits when it cannot listen).
      if (answer.ok && !gone) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop("SIGKILL");
      throw new Error(`wrangler dev did not answer on ${url} in time:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return { url, port, persistTo, child, output: () => log, stop };
}
