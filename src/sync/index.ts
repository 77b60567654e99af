/**
 * `isostore/sync`: the forwarder, which drains one usage journal into another
 * (an offline browser's IndexedDB journal into the edge), and the small
 * platform seams it runs on: online state, the one-forwarder-per-origin lock,
 * backoff. Runtime-agnostic like the core: platform globals
 * (`navigator.onLine`, `navigator.locks`, `CustomEvent`) are looked up when
 * used and feature-detected, never typed through the DOM.
 *
 * @example
 * ```ts
 * import { HttpJournal } from "isostore/http";
 * import { browserOnline, createForwarder } from "isostore/sync";
 *
 * // The worker's own mode and capacity: the forwarder checks both (see `createForwarder`).
 * const edgeJournal = await HttpJournal.connect({ baseUrl: location.origin, journal: "usage", token });
 * const forwarder = createForwarder({
 *   source: localJournal,
 *   consumer: "edge",
 *   sink: edgeJournal,
 *   online: browserOnline(),
 *   lock: { name: "isostore-forwarder/usage/edge" },
 * });
 * forwarder.start();
 * ```
 */
export {
  createForwarder,
  DEFAULT_BATCH_SIZE,
  DEFAULT_FORWARDER_LEASE_MS,
  DEFAULT_POLL_INTERVAL_MS,
  DEFAULT_SINK_TIMEOUT_MS,
  type DrainOptions,
  type DrainReport,
  type Forwarder,
  type ForwarderEventMap,
  type ForwarderFailure,
  type ForwarderLockOptions,
  type ForwarderOptions,
  type ForwarderProgress,
  type ForwarderState,
} from "./forwarder.js";
export { type BatchReport, type ForwarderPhase, type ForwarderSink } from "./batch.js";
export { DEFAULT_BACKOFF, exponentialBackoff, type BackoffPolicy, type ExponentialBackoffOptions } from "./backoff.js";
export { alwaysOnline, browserOnline, type OnlineSource } from "./online.js";
export { browserLocks, localLockManager, type LockManagerLike } from "./lock.js";
export { reportListenerError, type ForwarderEvent, type ForwarderListener, type ForwarderListenerOptions } from "./events.js";
export { PossibleDuplicateError, SinkError, SinkProtocolError, SinkTimeoutError, isRetryable, type SinkErrorCode } from "./errors.js";
export type { Scheduler } from "../storage/leaser.js";
