/// <reference types="@cloudflare/workers-types" />
/// <reference types="@cloudflare/vitest-pool-workers/types" />
// Bindings of test/workers/wrangler.toml, as `env` from "cloudflare:workers" sees them.
import type { EngineHost, StoreObjectSqlBlobs } from "./worker.js";
import type { JournalPartition, StoreObject } from "../../adapters/durable-objects/index.js";

declare global {
  namespace Cloudflare {
    interface Env {
      PARTITIONS: DurableObjectNamespace<JournalPartition>;
      ENGINE_HOST: DurableObjectNamespace<EngineHost>;
      STORES: DurableObjectNamespace<StoreObject>;
      STORES_SQL: DurableObjectNamespace<StoreObjectSqlBlobs>;
      STORE_BLOBS: R2Bucket;
      /** "1" under `SOAK=1 npm test` (test/workers/vitest.config.ts), else "". */
      SOAK: string;
    }
  }
}
