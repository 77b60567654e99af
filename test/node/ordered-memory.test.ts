/**
 * The OrderedIndex conformance suite against the memory engine (the
 * model-based run beside the reference model, and one example per rule), and
 * the reference model against its own suite as a harness self-check.
 * "Reopen" is a new index over the same engine (the index keeps no state
 * outside it).
 */
import { describe, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { createOrderedIndex } from "../../src/storage/ordered/index.js";
import { OrderedOracle, orderedConformanceCases, type OrderedSubjectFactory, soakRequested } from "../../src/testing/index.js";

const memorySubjects: OrderedSubjectFactory = async ({ maxRevision }) => {
  const engine = memoryEngine();
  const open = () => createOrderedIndex(engine, maxRevision === undefined ? { store: "conformance" } : { store: "conformance", maxRevision });
  return { index: open(), reopen: async () => open(), close: () => engine.close() };
};

describe("OrderedIndex over the memory engine", () => {
  for (const c of orderedConformanceCases({ label: "memory", canReopen: true, supportsMaxRevision: true, createSubject: memorySubjects })) {
    it(c.name, c.run, c.timeoutMs);
  }
});

describe("OrderedOracle against its own conformance suite", () => {
  const oracleSubjects: OrderedSubjectFactory = async ({ maxRevision }) => {
    const index = new OrderedOracle(maxRevision === undefined ? {} : { maxRevision });
    // The oracle is its own storage: a "new index over the same storage" is the same instance.
    return { index, reopen: async () => index, close: async () => {} };
  };
  for (const c of orderedConformanceCases({ label: "oracle", canReopen: true, supportsMaxRevision: true, runs: soakRequested() ? 1000 : 20, createSubject: oracleSubjects })) {
    it(c.name, c.run, c.timeoutMs);
  }
});
