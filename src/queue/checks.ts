/**
 * Boundary checks of the event queue: a refused call changes nothing and
 * fails with an `InvalidArgumentError` (a `StorageError`, as the spec's
 * `Result<_, StorageError>` says).
 */
import { InvalidArgumentError } from "../storage/errors.js";
import { isBytes } from "../storage/web.js";
import { QUEUE_LANES, type QueueLane } from "./state.js";

/** The longest idempotency key, in UTF-16 code units. */
export const MAX_IDEM_KEY_LENGTH = 1024;

export function checkLane(lane: unknown): QueueLane {
  if (!QUEUE_LANES.includes(lane as QueueLane)) throw new InvalidArgumentError("lane", `must be one of ${QUEUE_LANES.join(", ")}`);
  return lane as QueueLane;
}

export function checkCapacity(capacity: unknown): number {
  if (typeof capacity !== "number" || !Number.isSafeInteger(capacity) || capacity < 0) {
    throw new InvalidArgumentError("capacity", "must be a safe integer >= 0");
  }
  return capacity;
}

export function checkKey(key: unknown): string {
  if (typeof key !== "string" || key.length === 0 || key.length > MAX_IDEM_KEY_LENGTH) {
    throw new InvalidArgumentError("key", `must be a non-empty string of at most ${MAX_IDEM_KEY_LENGTH} characters`);
  }
  return key;
}

export function checkPayload(payload: unknown): Uint8Array {
  if (!isBytes(payload)) throw new InvalidArgumentError("payload", "must be a Uint8Array");
  return payload;
}

export function checkNow(now: unknown): number {
  if (typeof now !== "number" || !Number.isSafeInteger(now)) throw new InvalidArgumentError("now", "must be a safe integer (epoch ms)");
  return now;
}
