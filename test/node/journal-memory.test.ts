/**
 * The journal conformance suite against the memory engine: the model-based
 * run beside the reference model, and one example per guarantee of the spec.
 * "Reopen" is a new journal over the same engine (the journal keeps no state
 * outside it).
 */
import { describe, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { createJournal } from "../../src/index.js";
import { journalConformanceCases } from "../../src/testing/index.js";

describe("usage journal over the memory engine", () => {
  const cases = journalConformanceCases({
    label: "memory",
    durable: false,
    canReopen: true,
    createSubject: async (options) => {
      const engine = memoryEngine();
      return {
        journal: createJournal(engine, options),
        reopen: async () => createJournal(engine, options),
        close: () => engine.close(),
      };
    },
  });
  for (const c of cases) it(c.name, c.run, c.timeoutMs);
});
