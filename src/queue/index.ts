/**
 * The event queue (`event-queue.lean.txt`): {@link EventQueue}, in memory or
 * journaled to a ledger ({@link EventQueue.fromLedger}).
 */
export { EventQueue } from "./event-queue.js";
export { DurableEventQueue, QueueReplayError } from "./durable.js";
export { IDEM_WINDOW_MS, QUEUE_LANES, type Admission, type QueueCounter, type QueueItem, type QueueLane, type QueueStats } from "./state.js";
export { MAX_IDEM_KEY_LENGTH, MAX_QUEUE_PAYLOAD_BYTES } from "./checks.js";
