/**
 * The worker the `workers` test project runs: it exports the adapter's
 * Durable Object classes and `EngineHost`, an empty SQLite-backed object the
 * engine tests enter with `runInDurableObject` (they build the engine over
 * its `ctx.storage` themselves), and `StoreObjectSqlBlobs`, a `StoreObject`
 * that is shown no R2 bucket (so its blobs stay in its SQLite storage).
 */
import { DurableObject } from "cloudflare:workers";
import { StoreObject } from "../../adapters/durable-objects/index.js";

export { JournalPartition, StoreObject } from "../../adapters/durable-objects/index.js";

/** A `StoreObject` without the `STORE_BLOBS` bucket (blobs in the engine), and with 1 s leases. */
export class StoreObjectSqlBlobs extends StoreObject {
  protected override readonly leaseTtlMs = 1_000;

  constructor(ctx: DurableObjectState, _env: unknown) {
    super(ctx, {});
  }
}

/** An empty SQLite-backed object, entered by tests with `runInDurableObject`. */
export class EngineHost extends DurableObject {}

export default {
  fetch(): Response {
    return new Response("isostore test worker", { status: 404 });
  },
};
