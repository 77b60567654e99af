/**
 * Boundary checks of the event queue: a refused call changes nothing and
 * fails with an `InvalidArgumentError` (a `StorageError`, as the spec's
 * `Result<_, StorageError>` says).
 */
import { InvalidArgumentError } from "../storage/errors.js";
import { MAX_LEDGER_PAYLOAD_BYTES } from "../storage/ledger.js";
import { isBytes } from "../storage/web.js";
import { QUEUE_LANES, type QueueLane } from "./state.js";

/** The longest idempotency key, in UTF-16 code units. */
export const MAX_IDEM_KEY_LENGTH = 1024;

/**
 * The largest item payload, in bytes, for every queue kind: the ledger's
 * record limit less 8 KiB, room for the ledger-backed queue's record header
 * (a 4-byte length and a JSON header holding the key, at most 6 bytes per
 * UTF-16 unit when escaped, plus under 200 bytes of fields). The in-memory
 * queue holds to the same limit, so the two refuse the same calls.
 */
export const MAX_QUEUE_PAYLOAD_BYTES = MAX_LEDGER_PAYLOAD_BYTES - 8 * 1024;

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

/**
 * A payload is a `Uint8Array` of at most {@link MAX_QUEUE_PAYLOAD_BYTES}.
 * Checked on every enqueue, whatever its outcome would be (a duplicate or a
 * shed is refused too), so a call's validity never depends on the lane's
 * state.
 */
export function checkPayload(payload: unknown): Uint8Array {
  if (!isBytes(payload)) throw new InvalidArgumentError("payload", "must be a Uint8Array");
  if (payload.length > MAX_QUEUE_PAYLOAD_BYTES) {
    throw new InvalidArgumentError("payload", `is ${payload.length} bytes; a queue item holds at most ${MAX_QUEUE_PAYLOAD_BYTES}`);
  }
  return payload;
}

export function checkNow(now: unknown): number {
  if (typeof now !== "number" || !Number.isSafeInteger(now)) throw new InvalidArgumentError("now", "must be a safe integer (epoch ms)");
  return now;
}
