/**
 * The RPC wire format between `PartitionedJournal` and `JournalPartition` is
 * the core's (`src/journal/wire.ts`), shared with the HTTP API.
 */
export * from "../../src/journal/wire.js";
