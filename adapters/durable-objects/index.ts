/**
 * `isostore/durable-objects`: the kit on Cloudflare Durable Objects.
 *
 * - {@link durableObjectEngine}: the Engine over a SQLite-backed object's
 *   `ctx.storage` (one writer per object; transactions applied atomically
 *   with `transactionSync`; durable, so journals over it are billing-grade).
 * - {@link JournalPartition}: the Durable Object class that is one partition
 *   of a journal, hosting the core journal by Workers RPC.
 * - {@link PartitionedJournal}: a `UsageJournal` over P partitions, reached
 *   through their namespace binding: one writer per ordering key.
 * - {@link StoreObject}: the Durable Object hosting one store's storage
 *   primitives by RPC, and {@link StoreObjectClient}: that store as a
 *   `RemoteStore` (typed errors rebuilt), e.g. for the HTTP store routes.
 *
 * Errors below the journal are {@link DurableObjectEngineError}s (code,
 * `retryable`, `cause`); the journals report them as `BackendError`.
 *
 * Wrangler: declare `JournalPartition` (and any object that hosts an engine)
 * with `new_sqlite_classes`, e.g.
 * ```toml
 * [[durable_objects.bindings]]
 * name = "PARTITIONS"
 * class_name = "JournalPartition"
 *
 * [[migrations]]
 * tag = "v1"
 * new_sqlite_classes = ["JournalPartition"]
 * ```
 * and re-export the class from the worker's entry: `export { JournalPartition } from "isostore/durable-objects";`.
 */
export { durableObjectEngine, MAX_BOUND_PARAMETERS, MAX_ROW_BYTES, SCHEMA_VERSION, type DurableObjectStorageHandle, type SqlHandle } from "./engine.js";
export { DurableObjectEngineError, type DurableObjectEngineErrorCode } from "./errors.js";
export { JournalPartition, type PartitionConfig } from "./partition.js";
export { StoreObject, type StoreObjectEnv, type StoreOutcome, type StoreWireError, type StoreLeaseGrant } from "./store-object.js";
export { decodeStoreError, encodeStoreError } from "./store-object.js";
export { StoreObjectClient, type StoreObjectNamespace, type StoreObjectStub } from "./store-client.js";
export { PartitionedJournal, PartitionedJournalMemory, MAX_PARTITIONS, type PartitionedJournalOptions, type PartitionNamespace, type PartitionStub } from "./partitioned-journal.js";
export { partitionOf, fnv1a32 } from "./hash.js";
export type { Engine } from "../../src/engine.js";
