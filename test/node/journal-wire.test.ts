/**
 * Journal errors across a process boundary (`src/journal/wire.ts`: Workers RPC
 * and the HTTP API's error bodies): a refused consumer name keeps the spec's
 * fields, `max` with `too_long` and `character` with `character`, so an
 * `HttpJournal` or `PartitionedJournal` caller reads what a local one does.
 */
import { describe, expect, it } from "vitest";
import { InvalidConsumerIdError, parseConsumerId, type JournalError } from "../../src/index.js";
import { decodeError, encodeError, type WireError } from "../../src/journal/wire.js";
import { describeError } from "../../src/testing/compare.js";
import { errorAnswer } from "../../src/worker/index.js";

function refusal(name: string): InvalidConsumerIdError {
  try {
    parseConsumerId(name);
  } catch (error) {
    if (error instanceof InvalidConsumerIdError) return error;
    throw error;
  }
  throw new Error(`${name} was accepted`);
}

/** Through JSON, as the HTTP API and structured clone carry it. */
function roundTrip(error: unknown): JournalError {
  return decodeError(JSON.parse(JSON.stringify(encodeError(error))) as WireError);
}

describe("InvalidConsumerIdError over the wire", () => {
  it.each([
    ["", { rule: "empty" }],
    ["c".repeat(64), { rule: "too_long", max: 63 }],
    ["é".repeat(32), { rule: "too_long", max: 63 }],
    ["é".repeat(31), { rule: "character", character: "é" }],
    ["Billing", { rule: "character", character: "B" }],
    ["bill😀ing", { rule: "character", character: "😀" }],
  ])("%j keeps its class, rule, fields and message", (name, fields) => {
    const local = refusal(name);
    expect(describeError(local)).toEqual({ error: "InvalidConsumerIdError", code: "invalid_consumer_id", consumer: name, ...fields });
    const remote = roundTrip(local);
    expect(remote).toBeInstanceOf(InvalidConsumerIdError);
    expect(describeError(remote)).toEqual(describeError(local));
    expect(remote.message).toBe(local.message);
    // The worker's error body carries them too.
    expect(errorAnswer(local).body.error.fields).toEqual({ consumer: name, ...fields });
  });

  it("a field of the wrong type does not rebuild the class; one a sender predating it left out does", () => {
    const long = "c".repeat(64);
    const wire = encodeError(refusal(long));
    const badMax = decodeError({ ...wire, fields: { consumer: long, rule: "too_long", max: "63" } });
    expect(badMax).not.toBeInstanceOf(InvalidConsumerIdError);
    expect([badMax.code, badMax.message]).toEqual(["invalid_consumer_id", wire.message]);
    const badCharacter = decodeError({ ...encodeError(refusal("Billing")), fields: { consumer: "Billing", rule: "character", character: 66 } });
    expect(badCharacter).not.toBeInstanceOf(InvalidConsumerIdError);
    const older = decodeError({ ...wire, fields: { consumer: long, rule: "too_long" } });
    expect(older).toBeInstanceOf(InvalidConsumerIdError);
    expect(describeError(older)).toEqual({ error: "InvalidConsumerIdError", code: "invalid_consumer_id", consumer: long, rule: "too_long" });
  });
});
