/**
 * The event queue conformance suite: the in-memory queue, and the
 * ledger-backed one over the memory engine (a restart is a new queue replayed
 * from the same engine).
 */
import { describe, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { queueConformanceCases } from "../../src/testing/index.js";

describe("event queue (in memory, and over a ledger on the memory engine)", () => {
  const cases = queueConformanceCases({
    label: "memory",
    createSubject: async () => {
      const engine = memoryEngine();
      return { engine, reopen: async () => engine, close: () => engine.close() };
    },
  });
  for (const c of cases) it(c.name, c.run, c.timeoutMs);
});
