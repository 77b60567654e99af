/// <reference types="@cloudflare/workers-types" />
/// <reference types="@cloudflare/vitest-pool-workers/types" />
// Bindings of test/workers/wrangler.toml, as `env` from "cloudflare:workers" sees them.
import type { EngineHost } from "./worker.js";
import type { JournalPartition } from "../../adapters/durable-objects/index.js";

declare global {
  namespace Cloudflare {
    interface Env {
      PARTITIONS: DurableObjectNamespace<JournalPartition>;
      ENGINE_HOST: DurableObjectNamespace<EngineHost>;
    }
  }
}
