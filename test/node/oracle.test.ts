// A harness self-check: the reference model passes its own conformance
// examples, and the model-based case (oracle against oracle) runs clean.
import { describe, expect, it } from "vitest";
import type { Capacity } from "../../src/index.js";
import { JournalOracle, journalConformanceCases, type JournalSubjectFactory, soakRequested } from "../../src/testing/index.js";

function oracleSubjects(durable: boolean): JournalSubjectFactory {
  return async ({ name, capacity, clock }) => {
    const journal = new JournalOracle({ name, capacity, clock, durable });
    // The oracle is its own storage: a "new journal over the same storage" is the same state
    // (under other bounds when asked: `withCapacity`, chained from the latest one opened).
    let latest = journal;
    const reopen = async (changed?: { readonly capacity?: Capacity }) => (latest = latest.withCapacity(changed?.capacity ?? capacity));
    return { journal, reopen, close: async () => {} };
  };
}

describe("JournalOracle against its own conformance suite", () => {
  for (const c of journalConformanceCases({ label: "oracle", durable: false, canReopen: true, canChangeCapacity: true, runs: soakRequested() ? 2000 : 50, createSubject: oracleSubjects(false) })) {
    it(c.name, c.run, c.timeoutMs);
  }
});

describe("JournalOracle, durable", () => {
  const cases = journalConformanceCases({ label: "oracle-durable", durable: true, createSubject: oracleSubjects(true) });
  const mode = cases.find((c) => c.name === "mode is billing_grade only for durable storage");
  it("mode is billing_grade for durable storage", async () => {
    if (mode === undefined) throw new Error("the mode case is missing");
    await mode.run();
  });
});

describe("JournalOracle without a capacity", () => {
  it("uses BILLING_GRADE: 1,000,000 events, 8 attempts, 24 h retention, refuse", () => {
    const oracle = new JournalOracle({ name: "usage" });
    expect(oracle.capacity).toEqual({ maxEvents: 1_000_000, maxDeliveryAttempts: 8, retainAcknowledgedMs: 86_400_000, policy: "refuse" });
  });
});
