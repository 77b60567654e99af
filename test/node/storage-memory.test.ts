/**
 * The storage primitives conformance suite against the memory engine. A
 * restart is a new store over the same engine (the primitives keep no state
 * outside it).
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { BlobsOracle, KvOracle, LedgerOracle, storageConformanceCases } from "../../src/testing/index.js";
import { SharedSliceBytes } from "../../src/testing/storage-examples.js";
import type { RecordNotFoundError } from "../../src/storage/errors.js";

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

describe("the storage reference models", () => {
  it("a cursor opened before a delete may answer a prefix of its own records then RecordNotFoundError, never the new ones", () => {
    const ledger = new LedgerOracle();
    for (let i = 0; i < 3; i++) ledger.append("log", i, new Uint8Array([i]));
    const opened = ledger.open("log", 1);
    const seqs = (yielded: number) => {
      const answer = ledger.drainAnswer(opened, yielded);
      return [answer.records.map((r) => [r.seq, r.payload[0]]), answer.end === "drained" ? "drained" : [answer.end.constructor.name, (answer.end as RecordNotFoundError).seq]];
    };
    ledger.append("log", 3, new Uint8Array([3]));
    expect(seqs(0)).toEqual([[[1, 0], [2, 1], [3, 2]], "drained"]); // not deleted: every record it was bounded at
    ledger.delete("log");
    ledger.append("log", 0, new Uint8Array([9]));
    expect(seqs(0)).toEqual([[], ["RecordNotFoundError", 1]]);
    expect(seqs(2)).toEqual([[[1, 0], [2, 1]], ["RecordNotFoundError", 3]]);
    expect(seqs(3)).toEqual([[[1, 0], [2, 1], [3, 2]], "drained"]);
    expect(ledger.read("log", 1).map((r) => r.payload[0])).toEqual([9]);
  });


  it("copy bytes in and out, also from a Uint8Array whose slice() shares memory (like Node's Buffer)", () => {
    const ledger = new LedgerOracle();
    const payload = SharedSliceBytes.from([1, 2]);
    ledger.append("log", 0, payload);
    payload.fill(9);
    ledger.read("log", 1)[0]!.payload.fill(8);
    expect([...ledger.read("log", 1)[0]!.payload]).toEqual([1, 2]);

    const kv = new KvOracle();
    const value = SharedSliceBytes.from([3, 4]);
    kv.put("k", 0, value);
    value.fill(9);
    kv.get("k").value.fill(8);
    expect([...kv.get("k").value]).toEqual([3, 4]);

    const blobs = new BlobsOracle();
    const content = SharedSliceBytes.from([5, 6]);
    blobs.put("b", content);
    content.fill(9);
    blobs.get("b").fill(8);
    expect([...blobs.get("b")]).toEqual([5, 6]);
  });
});
