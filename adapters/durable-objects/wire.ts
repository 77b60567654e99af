/**
 * What crosses the RPC boundary between `PartitionedJournal` and a
 * `JournalPartition`, and how typed journal errors survive it.
 *
 * Workers RPC structured-clones arguments and results; a thrown Error keeps
 * its message but not its class or fields. So a partition never throws a
 * journal error across RPC: it answers with a {@link WireOutcome}, and every
 * `JournalError` (thrown, or inside a batch result) travels as a
 * {@link WireError} that {@link decodeError} rebuilds into the same class with
 * the same code, spec fields and message.
 */
import {
  AlreadyAcknowledgedError,
  AtCapacityError,
  BackendError,
  EventConflictError,
  InvalidArgumentError,
  InvalidConsumerIdError,
  InvalidEventError,
  JournalError,
  NotOutstandingError,
  NotQuarantinedError,
  QuarantinedError,
} from "../../src/journal/errors.js";
import type { BatchAppendResult, Capacity, DeliveryId } from "../../src/journal/types.js";

/** A journal error as plain data. */
export interface WireError {
  readonly name: string;
  readonly code: string;
  readonly message: string;
  readonly retryable: boolean;
  readonly fields: Record<string, unknown>;
}

/** The answer of every partition call: a value, or a journal error as data. */
export type WireOutcome<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: WireError };

const FIELDS = ["key", "delivery", "pending", "capacity", "rule", "argument", "consumer", "requestId"] as const;

/** A journal error as data. Any other error becomes a `BackendError` first (keeping `retryable`). */
export function encodeError(error: unknown): WireError {
  const journalError =
    error instanceof JournalError
      ? error
      : new BackendError(error instanceof Error ? error.message : String(error), {
          cause: error,
          retryable: typeof error === "object" && error !== null && (error as { retryable?: unknown }).retryable === true,
        });
  const fields: Record<string, unknown> = {};
  const source = journalError as unknown as Record<string, unknown>;
  for (const field of FIELDS) if (field in journalError) fields[field] = source[field];
  return { name: journalError.name, code: journalError.code, message: journalError.message, retryable: journalError.retryable, fields };
}

/** Rebuild the typed journal error a {@link WireError} describes. */
export function decodeError(wire: WireError): JournalError {
  const f = wire.fields;
  let error: JournalError;
  switch (wire.name) {
    case "AtCapacityError":
      error = new AtCapacityError(f["pending"] as number, f["capacity"] as Capacity);
      break;
    case "EventConflictError":
      error = new EventConflictError(f["key"] as string);
      break;
    case "NotOutstandingError":
      error = new NotOutstandingError(f["delivery"] as DeliveryId);
      break;
    case "QuarantinedError":
      error = new QuarantinedError(f["delivery"] as DeliveryId);
      break;
    case "AlreadyAcknowledgedError":
      error = new AlreadyAcknowledgedError(f["delivery"] as DeliveryId);
      break;
    case "NotQuarantinedError":
      error = new NotQuarantinedError(f["consumer"] as string, f["requestId"] as string);
      break;
    case "InvalidEventError":
      error = new InvalidEventError(f["requestId"] as string, f["rule"] as string, "");
      break;
    case "InvalidConsumerIdError":
      error = new InvalidConsumerIdError(f["consumer"] as string, f["rule"] as "empty" | "too_long" | "character", "");
      break;
    case "InvalidArgumentError":
      error = new InvalidArgumentError(f["argument"] as string, "");
      break;
    default:
      error = new BackendError("", { retryable: wire.retryable });
  }
  error.message = wire.message;
  return error;
}

/** Run `call` and answer with a {@link WireOutcome}. */
export async function toWire<T>(call: () => Promise<T>): Promise<WireOutcome<T>> {
  try {
    return { ok: true, value: await call() };
  } catch (error) {
    return { ok: false, error: encodeError(error) };
  }
}

/** Batch results with their errors as data. */
export type WireBatchResult = Exclude<BatchAppendResult, { status: "rejected" }> | { readonly status: "rejected"; readonly error: WireError };

export function encodeBatch(results: readonly BatchAppendResult[]): WireBatchResult[] {
  return results.map((result) => (result.status === "rejected" ? { status: "rejected", error: encodeError(result.error) } : result));
}

export function decodeBatch(results: readonly WireBatchResult[]): BatchAppendResult[] {
  return results.map((result) => (result.status === "rejected" ? { status: "rejected", error: decodeError(result.error) } : result));
}
