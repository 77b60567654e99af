/**
 * `isostore/testing`: what an implementation of the kit's contracts is checked
 * against, exported so a third party can check its own adapter the same way.
 *
 * - {@link JournalOracle}: the reference model of the usage journal, a plain
 *   and obviously correct `UsageJournal` that follows
 *   `docs/journal-semantics.md` line by line.
 * - {@link journalConformanceCases}: the conformance suite (a model-based case
 *   that runs random call sequences against the journal under test and the
 *   oracle side by side, plus one readable example per guarantee), as
 *   runner-agnostic cases.
 * - {@link virtualClock}: the hand-driven clock the cases run on.
 *
 * The model-based case uses `fast-check`, which must be installed next to this
 * package when the suite runs.
 */
export { JournalOracle, type JournalOracleOptions, type JournalOracleSnapshot } from "./journal-oracle.js";
export {
  journalConformanceCases,
  CONFORMANCE_CLOCK_START,
  type ConformanceCase,
  type JournalConformanceOptions,
  type JournalSubject,
  type JournalSubjectFactory,
} from "./journal-conformance.js";
export { virtualClock, type VirtualClock } from "./virtual-clock.js";
export { OrderedOracle, compareStableKeys, type OrderedOracleOptions } from "./ordered-oracle.js";
export {
  orderedConformanceCases,
  type OrderedConformanceCase,
  type OrderedConformanceOptions,
  type OrderedSubject,
  type OrderedSubjectFactory,
} from "./ordered-conformance.js";
export { OrderTranslation, ORDERED_ERROR_FIELDS, describeOrderedError } from "./ordered-compare.js";
export { BlobsOracle, KvOracle, LeaseOracle, LedgerOracle } from "./storage-oracle.js";
export {
  storageConformanceCases,
  CONFORMANCE_LEASE_TTL_MS,
  type StorageConformanceOptions,
  type StorageSubject,
  type StorageSubjectFactory,
} from "./storage-conformance.js";
export { virtualScheduler, type VirtualScheduler, type VirtualSchedulerOptions } from "./storage-scheduler.js";
export { QueueOracle } from "./queue-oracle.js";
export { queueConformanceCases, type QueueConformanceOptions } from "./queue-conformance.js";
export { engineConformanceCases, type EngineConformanceOptions } from "./engine-conformance.js";
export { soakRequested } from "./soak.js";
