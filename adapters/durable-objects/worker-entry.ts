/**
 * The development worker (`wrangler dev` at the repository root): it exports
 * the Durable Object classes the root `wrangler.toml` declares. The HTTP API
 * over the journal is a later piece of work; until then `fetch` answers 404.
 */
export { JournalPartition } from "./partition.js";
export { StoreObject } from "./store-object.js";

export default {
  fetch(): Response {
    return new Response("isostore: no HTTP API yet\n", { status: 404 });
  },
};
