/**
 * How typed journal errors cross a process boundary: Workers RPC between
 * `PartitionedJournal` and a `JournalPartition`, and the HTTP API between the
 * worker and `HttpJournal`.
 *
 * Structured clone and JSON keep an Error's message but not its class or
 * fields. So a journal error travels as a {@link WireError} (plain data) that
 * {@link decodeError} rebuilds into the same class with the same code, spec
 * fields and message. Decoding never trusts its input: a field of the wrong
 * type rebuilds a plain `JournalError` with the same code, and an unknown code
 * a retryable-as-sent `BackendError`.
 *
 * An error's cause never travels (its text is the sender's internals), except
 * for the marks that say waiting out fixes the failure (a full or overloaded
 * storage object, {@link WaitOutMarks}): the worker answers those with a 503
 * and `Retry-After`, and must do so for a partition's error as for its own.
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
  type JournalErrorCode,
  NotOutstandingError,
  NotQuarantinedError,
  QuarantinedError,
} from "./errors.js";
import { waitOutCause, waitOutMarks, type WaitOutMarks } from "../cause-chain.js";
import type { AckResult, BatchAppendResult, Capacity, DeliveryId } from "./types.js";

/** A journal error as plain data. */
export interface WireError {
  readonly name: string;
  readonly code: string;
  readonly message: string;
  readonly retryable: boolean;
  readonly fields: Record<string, unknown>;
  /**
   * What the error's causes say waiting out fixes (`code` `"storage_full"`,
   * `overloaded: true`), only when one does; {@link decodeError} rebuilds it
   * as the error's `cause`. Absent from senders that predate it.
   */
  readonly cause?: WaitOutMarks;
}

/** The answer of every partition call: a value, or a journal error as data. */
export type WireOutcome<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: WireError };

/** The spec fields an error carries over the wire (each only when the error has it: `max` and `character` belong to one rule each). */
const FIELDS = ["key", "delivery", "eventStored", "pending", "capacity", "rule", "argument", "consumer", "requestId", "max", "character"] as const;

/**
 * A journal error as data. Any other error becomes a `BackendError` first
 * (keeping `retryable`). Of the cause, only its {@link WaitOutMarks} are sent.
 */
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
  const marks = waitOutMarks(journalError);
  return {
    name: journalError.name,
    code: journalError.code,
    message: journalError.message,
    retryable: journalError.retryable,
    fields,
    ...(marks === undefined ? {} : { cause: marks }),
  };
}

const CODES: ReadonlySet<string> = new Set<JournalErrorCode>([
  "at_capacity",
  "conflict",
  "not_outstanding",
  "quarantined",
  "already_acknowledged",
  "not_quarantined",
  "backend",
  "invalid_event",
  "invalid_consumer_id",
  "invalid_argument",
]);

const isText = (value: unknown): value is string => typeof value === "string";
const isDelivery = (value: unknown): value is DeliveryId =>
  typeof value === "object" && value !== null && isText((value as DeliveryId).consumer) && isText((value as DeliveryId).event) && Number.isSafeInteger((value as DeliveryId).attempt);
const isCapacity = (value: unknown): value is Capacity =>
  typeof value === "object" &&
  value !== null &&
  ["maxEvents", "maxDeliveryAttempts", "retainAcknowledgedMs"].every((field) => Number.isSafeInteger((value as Record<string, unknown>)[field])) &&
  ((value as Capacity).policy === "refuse" || (value as Capacity).policy === "drop_oldest");

/** The typed error `wire` describes, or null when its fields do not fit its class. */
function rebuild(wire: WireError, cause: Error | undefined): JournalError | null {
  const f: Record<string, unknown> = typeof wire.fields === "object" && wire.fields !== null ? wire.fields : {};
  switch (wire.name) {
    case "AtCapacityError":
      return Number.isSafeInteger(f["pending"]) && isCapacity(f["capacity"]) ? new AtCapacityError(f["pending"] as number, f["capacity"]) : null;
    case "EventConflictError":
      return isText(f["key"]) ? new EventConflictError(f["key"]) : null;
    case "NotOutstandingError":
      // `eventStored` absent (a sender that predates it) reads as false: "does not say".
      return isDelivery(f["delivery"]) ? new NotOutstandingError(f["delivery"], undefined, f["eventStored"] === true) : null;
    case "QuarantinedError":
      return isDelivery(f["delivery"]) ? new QuarantinedError(f["delivery"]) : null;
    case "AlreadyAcknowledgedError":
      return isDelivery(f["delivery"]) ? new AlreadyAcknowledgedError(f["delivery"]) : null;
    case "NotQuarantinedError":
      return isText(f["consumer"]) && isText(f["requestId"]) ? new NotQuarantinedError(f["consumer"], f["requestId"]) : null;
    case "InvalidEventError":
      return isText(f["requestId"]) && isText(f["rule"]) ? new InvalidEventError(f["requestId"], f["rule"], "") : null;
    case "InvalidConsumerIdError": {
      const rule = f["rule"];
      if (!isText(f["consumer"]) || (rule !== "empty" && rule !== "too_long" && rule !== "character")) return null;
      // `max` comes with too_long, `character` with character: of its type when sent; absent from a
      // sender that predates them (the class is rebuilt without it).
      const max = f["max"];
      const character = f["character"];
      if (rule === "too_long" && max !== undefined && !Number.isSafeInteger(max)) return null;
      if (rule === "character" && character !== undefined && !isText(character)) return null;
      return new InvalidConsumerIdError(f["consumer"], rule, "", {
        ...(rule === "too_long" && max !== undefined ? { max: max as number } : {}),
        ...(rule === "character" && isText(character) ? { character } : {}),
      });
    }
    case "InvalidArgumentError":
      return isText(f["argument"]) ? new InvalidArgumentError(f["argument"], "") : null;
    case "BackendError":
      return new BackendError("", { retryable: wire.retryable === true, cause });
    default:
      return null;
  }
}

/**
 * Rebuild the typed journal error a {@link WireError} describes (same class,
 * code, fields and message). Input that does not describe a known error
 * class becomes a plain `JournalError` with its code when the code is known,
 * else a `BackendError`; `retryable` is kept as sent. A backend error's
 * {@link WaitOutMarks}, when sent, come back as its `cause` (an `Error`
 * carrying just those marks); marks that are not well formed are ignored.
 */
export function decodeError(wire: WireError): JournalError {
  const code = typeof wire === "object" && wire !== null && isText(wire.code) && CODES.has(wire.code) ? (wire.code as JournalErrorCode) : "backend";
  const retryable = typeof wire === "object" && wire !== null && wire.retryable === true;
  const cause = typeof wire === "object" && wire !== null ? waitOutCause(wire.cause) : undefined;
  let error = typeof wire === "object" && wire !== null ? rebuild(wire, cause) : null;
  if (error === null || error.code !== code) {
    error = code === "backend" ? new BackendError("", { retryable, cause }) : new JournalError(code, "", { retryable });
  }
  error.message = typeof wire === "object" && wire !== null && isText(wire.message) ? wire.message : `journal error \`${code}\``;
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

/** Ack results with their errors as data. */
export type WireAckResult = { readonly ok: true } | { readonly ok: false; readonly error: WireError };

export function encodeAcks(results: readonly AckResult[]): WireAckResult[] {
  return results.map((result) => (result.ok ? result : { ok: false, error: encodeError(result.error) }));
}

export function decodeAcks(results: readonly WireAckResult[]): AckResult[] {
  return results.map((result) => (result.ok ? { ok: true } : { ok: false, error: decodeError(result.error) }));
}
