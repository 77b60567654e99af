/** Shared by the HttpJournal tests: the typed error a call rejects with. */
import { expect } from "vitest";
import { JournalError } from "../../../src/index.js";

/** The error `promise` rejects with, checked to be a `JournalError` (failing the test if it resolves). */
export async function rejection(promise: Promise<unknown>): Promise<JournalError> {
  const outcome = await promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  if (!("error" in outcome)) throw new Error(`expected a rejection, got ${JSON.stringify(outcome.value)}`);
  expect(outcome.error).toBeInstanceOf(JournalError);
  return outcome.error as JournalError;
}
