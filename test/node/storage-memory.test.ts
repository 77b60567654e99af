/**
 * The storage primitives conformance suite against the memory engine. A
 * restart is a new store over the same engine (the primitives keep no state
 * outside it).
 */
import { describe, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { storageConformanceCases } from "../../src/testing/index.js";

describe("storage primitives over the memory engine", () => {
  const cases = storageConformanceCases({
    label: "memory",
    createSubject: async () => {
      const engine = memoryEngine();
      return { engine, reopen: async () => engine, close: () => engine.close() };
    },
  });
  for (const c of cases) it(c.name, c.run, c.timeoutMs);
});
