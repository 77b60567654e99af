/**
 * The worker the `workers` test project runs: it exports the adapter's
 * Durable Object classes and `EngineHost`, an empty SQLite-backed object the
 * engine tests enter with `runInDurableObject` (they build the engine over
 * its `ctx.storage` themselves).
 */
import { DurableObject } from "cloudflare:workers";

export { JournalPartition } from "../../adapters/durable-objects/index.js";

/** An empty SQLite-backed object, entered by tests with `runInDurableObject`. */
export class EngineHost extends DurableObject {}

export default {
  fetch(): Response {
    return new Response("isostore test worker", { status: 404 });
  },
};
