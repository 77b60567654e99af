/**
 * The forwarder's reading of a failed send (src/sync/errors.ts): a journal
 * `backend` error whose causes carry the marks of a full or overloaded
 * storage object was refused before anything committed; any other `backend`
 * error may have followed a commit (a lost reply), so a resend of its events
 * is checked for `possible_duplicate`.
 */
import { describe, expect, it } from "vitest";
import { BackendError, EventConflictError } from "../../src/index.js";
import { isOutcomeUnknown } from "../../src/sync/errors.js";

describe("isOutcomeUnknown for journal errors", () => {
  it("a backend error is an unknown outcome unless a cause carries the marks of a full or overloaded object, at any depth", () => {
    expect(isOutcomeUnknown(new BackendError("lost reply", { cause: new Error("Network connection lost."), retryable: true }))).toBe(true);
    expect(isOutcomeUnknown(new BackendError("overloaded", { cause: { overloaded: true } }))).toBe(false);
    expect(isOutcomeUnknown(new BackendError("full", { cause: { code: "storage_full" } }))).toBe(false);
    const deep = new BackendError("full", { cause: new Error("rpc failed", { cause: Object.assign(new Error("SQLITE_FULL"), { code: "storage_full" }) }) });
    expect(isOutcomeUnknown(deep)).toBe(false);
  });

  it("a typed refusal other than backend is not an unknown outcome", () => {
    expect(isOutcomeUnknown(new EventConflictError("0190f200-0000-7000-8000-000000000001"))).toBe(false);
  });
});
