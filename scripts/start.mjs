// `npm start`: the isostore Worker on localhost with local durable storage
// (.wrangler/state), the operator UI built into web/dist, and a dev token.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { portIsFree, ROOT, startDevWorker } from "./dev-worker.mjs";

const port = Number(process.env.PORT ?? 8787);
const varsFile = join(ROOT, ".dev.vars");

/** The dev token in .dev.vars, created (with every scope) when none is configured. */
function devToken() {
  const text = existsSync(varsFile) ? readFileSync(varsFile, "utf8") : "";
  const line = text.split("\n").find((entry) => entry.startsWith("ISOSTORE_TOKENS="));
  if (line) {
    const json = line.slice("ISOSTORE_TOKENS=".length).replace(/^'(.*)'$/, "$1");
    const tokens = JSON.parse(json);
    return { token: tokens[0]?.token, created: false };
  }
  const token = `dev-${randomBytes(24).toString("hex")}`;
  const tokens = [{ name: "dev", token, scopes: ["append:*", "consume", "operate", "store:*"] }];
  writeFileSync(varsFile, `${text}${text === "" || text.endsWith("\n") ? "" : "\n"}ISOSTORE_TOKENS='${JSON.stringify(tokens)}'\n`, { mode: 0o600 });
  return { token, created: true };
}

// Before building: a build empties web/dist, which a worker already running on the port serves.
if (!(await portIsFree(port))) {
  console.error(`isostore: port ${port} on 127.0.0.1 is in use (is \`npm start\` already running?). Stop it, or start on another port: PORT=8788 npm start`);
  process.exit(1);
}
console.log("isostore: building the operator UI and the offline example (web/dist)...");
for (const root of ["web", "examples/offline"]) execFileSync(join(ROOT, "node_modules", ".bin", "vite"), ["build", root], { cwd: ROOT, stdio: "inherit" });
const { token, created } = devToken();
console.log("isostore: starting the worker (wrangler dev, local storage in .wrangler/state)...");
const worker = await startDevWorker({ port, persistTo: join(ROOT, ".wrangler", "state"), stdio: "inherit", logLevel: "info" });
console.log(`
isostore is running
  API:        ${worker.url}/v1   (OpenAPI: ${worker.url}/v1/openapi.json)
  UI:         ${worker.url}/
  example:    ${worker.url}/example/   (offline-first journaling in the browser)
  dev token:  ${token}${created ? "   (new; saved in .dev.vars)" : "   (from .dev.vars)"}
  try:        curl -H "Authorization: Bearer ${token}" ${worker.url}/v1/journals
Ctrl-C stops it.`);
const stop = () => void worker.stop().then(() => process.exit(0));
// wrangler runs in its own process group (so that Ctrl-C reaches it once, through us): stop it
// on every signal that ends us, a closed terminal (SIGHUP) too, and on any other exit.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, stop);
process.on("exit", () => {
  try {
    process.kill(-worker.child.pid, "SIGTERM");
  } catch {
    // already gone
  }
});
await new Promise((resolveExit) => worker.child.once("exit", resolveExit));
process.exit(1);
