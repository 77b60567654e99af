// Checks that every subpath in package.json "exports" resolves from a clean
// build (`npm run build`) and exposes what its entry promises, the way a user
// importing the published package would see it.
import { readFileSync, existsSync } from "node:fs";

const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
const expected = {
  ".": ["createJournal", "createUsageEvent", "newRequestId", "parseConsumerId", "BILLING_GRADE", "JournalError", "compareKeys"],
  "./memory": ["memoryEngine"],
  "./testing": ["journalConformanceCases", "JournalOracle", "virtualClock", "engineConformanceCases", "storageConformanceCases", "orderedConformanceCases", "queueConformanceCases"],
  "./indexeddb": ["indexedDbEngine", "requestPersistentStorage", "IndexedDbEngineError", "SCHEMA_VERSION"],
  "./http": ["HttpJournal", "HttpError"],
  "./worker": ["createApp", "checkTokens", "ApiError", "STATUS_OF", "usageJournal"],
  "./sync": ["createForwarder", "exponentialBackoff", "browserOnline", "browserLocks"],
};
const importsOnlyInWorkerd = new Set(["./durable-objects"]);
let failed = false;
for (const [subpath, target] of Object.entries(pkg.exports)) {
  if (subpath === "./package.json") continue;
  const types = new URL(`../${target.types}`, import.meta.url);
  if (!existsSync(types)) {
    console.error(`${subpath}: missing declarations ${target.types}`);
    failed = true;
  }
  const specifier = subpath === "." ? pkg.name : `${pkg.name}/${subpath.slice(2)}`;
  if (importsOnlyInWorkerd.has(subpath)) {
    // Its entry imports `cloudflare:workers`, which only workerd resolves:
    // check that the built files are there; the workers project runs them.
    const code = new URL(`../${target.default}`, import.meta.url);
    if (!existsSync(code)) {
      console.error(`${subpath}: missing ${target.default}`);
      failed = true;
    }
    console.log(`${specifier}: built (loads in workerd only)`);
    continue;
  }
  const module = await import(specifier);
  for (const name of expected[subpath] ?? []) {
    if (!(name in module)) {
      console.error(`${specifier}: does not export ${name}`);
      failed = true;
    }
  }
  console.log(`${specifier}: ${Object.keys(module).length} exports`);
}
if (failed) process.exit(1);
