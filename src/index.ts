/**
 * isostore: one storage kit for browsers (IndexedDB), the edge (Durable
 * Objects) and memory. This entry point is runtime-agnostic: it imports no
 * adapter and no platform global. Adapters live behind their own subpaths
 * (`isostore/memory`, ...).
 *
 * @example
 * import { createJournal, createUsageEvent, newRequestId, parseConsumerId, BILLING_GRADE } from "isostore";
 * import { memoryEngine } from "isostore/memory";
 *
 * const journal = createJournal(memoryEngine(), { name: "usage", capacity: BILLING_GRADE });
 */
export * from "./engine.js";
export * from "./journal/types.js";
export * from "./journal/errors.js";
export {
  BILLING_GRADE,
  MAX_CONSUMER_ID_LENGTH,
  MAX_ORDERING_PART_LENGTH,
  MAX_RECORD_DATA_CHARS,
  MAX_RECORD_DATA_DEPTH,
  canonicalJson,
  checkUsageEvent,
  createUsageEvent,
  isRequestId,
  isSameFact,
  newRequestId,
  orderingKeyText,
  parseConsumerId,
  type ObservedRecord,
} from "./journal/event.js";
export {
  createJournal,
  deliveryBytes,
  MAX_BATCH_EVENTS,
  MAX_CLAIM_EVENTS,
  MAX_EPOCH_MS,
  MAX_KEPT_ATTEMPTS,
  MAX_LEASE_MS,
  OPPORTUNISTIC_PRUNE_LIMIT,
  type JournalOptions,
} from "./journal/journal.js";
export * from "./storage/index.js";
export * from "./queue/index.js";
