/**
 * The Engine conformance suite against the memory engine. "Reopen" is the
 * same engine: its storage is the engine object itself.
 */
import { describe, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { engineConformanceCases } from "../../src/testing/index.js";

describe("engine conformance: memory", () => {
  const cases = engineConformanceCases({
    label: "memory",
    durable: false,
    createEngine: () => memoryEngine(),
    reopen: async (engine) => engine,
  });
  for (const c of cases) it(c.name, c.run, c.timeoutMs);
});
