/**
 * The storage primitives conformance suite against the memory engine. A
 * restart is a new store over the same engine (the primitives keep no state
 * outside it).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { BlobsOracle, KvOracle, LedgerOracle, storageConformanceCases } from "../../src/testing/index.js";
import { SharedSliceBytes } from "../../src/testing/storage-examples.js";
import { commandsUpTo } from "../../src/testing/soak.js";
import { AmbiguousError, RecordNotFoundError } from "../../src/storage/errors.js";
import { appendDefinite, MAX_LEDGER_PAYLOAD_BYTES, readRecord, type Ledger } from "../../src/storage/ledger.js";
import { createStore } from "../../src/storage/store.js";

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

describe("ledger appends given a life (the engine ledger)", () => {
  const bytes = (...values: number[]) => new Uint8Array(values);
  async function records(ledger: Ledger, name: string): Promise<number[][]> {
    const out: number[][] = [];
    for await (const record of await ledger.read(name, 0)) out.push([record.seq, ...record.payload]);
    return out;
  }
  async function lifeOf(ledger: Ledger, name: string): Promise<number> {
    const cursor = await ledger.read(name, 0);
    await cursor.close();
    return cursor.life;
  }

  it("land in that life only: a ledger deleted and rewritten back to the same tip refuses them with RecordNotFoundError, writing nothing", async () => {
    const engine = memoryEngine();
    const ledger = createStore(engine, { name: "app" }).ledger;
    const first = await lifeOf(ledger, "log");
    await ledger.append("log", 0, bytes(1), { life: first }); // a never-written ledger is in its first life
    await ledger.append("log", 1, bytes(2), { life: first });
    await ledger.delete("log");
    const second = await lifeOf(ledger, "log");
    expect(second).not.toBe(first);
    // Deleted, not written again: refused, even at expected 0 where the tip alone would accept it.
    await expect(ledger.append("log", 0, bytes(9), { life: first })).rejects.toMatchObject({ code: "record_not_found", name: "log", seq: 1 });
    await expect(ledger.append("log", 2, bytes(9), { life: first })).rejects.toBeInstanceOf(RecordNotFoundError);
    expect(await ledger.tip("log")).toBe(0);
    // Written again back to the tip the old life's writer read: still refused.
    await ledger.append("log", 0, bytes(3), { life: second });
    await ledger.append("log", 1, bytes(4));
    await expect(ledger.append("log", 2, bytes(9), { life: first })).rejects.toMatchObject({ code: "record_not_found", seq: 3 });
    // appendDefinite passes the refusal on (definite: nothing landed), also when it would read the record back.
    await expect(appendDefinite(ledger, "log", 2, bytes(9), { life: first })).rejects.toBeInstanceOf(RecordNotFoundError);
    const ambiguous: Ledger = { ...ledger, append: (name, expected) => Promise.reject(new AmbiguousError(name, expected)), read: (n, f, o) => ledger.read(n, f, o) };
    await expect(appendDefinite(ambiguous, "log", 1, bytes(4), { life: first })).rejects.toMatchObject({ code: "append_verify_failed", cause: expect.any(RecordNotFoundError) as unknown });
    await expect(appendDefinite(ambiguous, "log", 1, bytes(4), { life: second })).resolves.toBeUndefined(); // the same bytes, read back in its own life
    expect(await records(ledger, "log")).toEqual([
      [1, 3],
      [2, 4],
    ]);
    // The current life appends as before; a conflict is still a conflict.
    await ledger.append("log", 2, bytes(5), { life: second });
    await expect(ledger.append("log", 2, bytes(9), { life: second })).rejects.toMatchObject({ code: "conflict" });
    expect(await ledger.tip("log")).toBe(3);
    await engine.close();
  });
});

describe("the model-based runs of the conformance suites", () => {
  it("draw command sequences up to their maximum length (fast-check's default size stops at about ten)", () => {
    const noop = fc.constant({ check: () => true, run: async () => {}, toString: () => "noop" });
    const lengths = fc.sample(fc.commands([noop], commandsUpTo(40)), { numRuns: 300, seed: 42 }).map((commands) => [...commands].length);
    expect(Math.max(...lengths)).toBeGreaterThan(30);
    expect(lengths.reduce((sum, n) => sum + n, 0) / lengths.length).toBeGreaterThan(10);
  });
});

describe("the engine ledger's payload limit (this implementation's choice: the spec names none)", () => {
  it("is 1 MiB: a payload of 1,048,576 bytes is stored and read back whole, one of 1,048,577 is InvalidArgumentError { argument: payload } and lands nothing", async () => {
    expect(MAX_LEDGER_PAYLOAD_BYTES).toBe(1_048_576);
    const engine = memoryEngine();
    try {
      const ledger = createStore(engine, { name: "app" }).ledger;
      await expect(ledger.append("log", 0, new Uint8Array(1_048_577))).rejects.toMatchObject({ name: "InvalidArgumentError", code: "invalid_argument", argument: "payload" });
      expect(await ledger.tip("log")).toBe(0);
      const atLimit = new Uint8Array(1_048_576).map((_, i) => i % 251);
      await ledger.append("log", 0, atLimit);
      const stored = await readRecord(ledger, "log", 1);
      expect(stored.payload.length).toBe(1_048_576);
      expect(Buffer.compare(Buffer.from(stored.payload), Buffer.from(atLimit))).toBe(0);
      await expect(ledger.append("log", 1, new Uint8Array(1_048_577))).rejects.toMatchObject({ code: "invalid_argument", argument: "payload" });
      expect(await ledger.tip("log")).toBe(1);
    } finally {
      await engine.close();
    }
  });
});
