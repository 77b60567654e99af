/**
 * The Durable Object engine inside a real SQLite-backed object (workerd):
 * key order against `compareKeys`, reading its own writes, rollback on a
 * throw, the platform limits (row size, bound parameters), values that need
 * tagging, and idempotent schema migrations.
 */
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { durableObjectEngine, DurableObjectEngineError, MAX_ROW_BYTES, SCHEMA_VERSION } from "../../adapters/durable-objects/index.js";
import { decodeKey, encodeKey } from "../../adapters/durable-objects/key-codec.js";
import { compareKeys, type Engine, type Key } from "../../src/engine.js";

let objects = 0;

/** Run `body` inside a fresh EngineHost object, with an engine over its storage. */
function inObject<T>(body: (engine: Engine, storage: DurableObjectStorage) => Promise<T>): Promise<T> {
  const stub = env.ENGINE_HOST.get(env.ENGINE_HOST.idFromName(`engine-test-${objects++}`));
  return runInDurableObject(stub, (_instance, state) => body(durableObjectEngine(state.storage), state.storage));
}

const keyPart = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer({ min: -5, max: 5 }),
  fc.string({ maxLength: 4 }),
  fc.string({ unit: "binary", maxLength: 3 }),
  fc.constantFrom("", "\u0000", "\u0001", "\u00fe", "\u00ff", "\uffff", "a"),
);
const keyArb: fc.Arbitrary<Key> = fc.array(keyPart, { minLength: 1, maxLength: 3 });

describe("durable object engine", () => {
  it("stores keys in compareKeys order and decodes them back", async () => {
    fc.assert(
      fc.property(keyArb, keyArb, (a, b) => {
        const ea = encodeKey(a);
        const eb = encodeKey(b);
        const byBytes = ea < eb ? -1 : ea > eb ? 1 : 0;
        expect(byBytes).toBe(Math.sign(compareKeys(a, b)));
        expect(compareKeys(decodeKey(ea), a)).toBe(0);
      }),
      { numRuns: 2000 },
    );
    await inObject(async (engine) => {
      const keys = fc.sample(keyArb, { numRuns: 300, seed: 7 });
      await engine.transact("readwrite", async (tx) => {
        keys.forEach((key, i) => tx.put(key, i));
      });
      const unique = new Map(keys.map((key) => [encodeKey(key), key]));
      const expected = [...unique.values()].sort(compareKeys);
      const forward = await engine.transact("readonly", (tx) => tx.scan({}));
      expect(forward.length).toBe(expected.length);
      forward.forEach((entry, i) => expect(compareKeys(entry.key, expected[i]!)).toBe(0));
      const backward = await engine.transact("readonly", (tx) => tx.scan({}, { reverse: true, limit: 5 }));
      expect(backward.map((entry) => entry.key)).toEqual(expected.slice(-5).reverse().map((key) => decodeKey(encodeKey(key))));
    });
  });

  it("scans prefixes and bounds the way inRange does, merging the transaction's own writes", async () => {
    await inObject(async (engine) => {
      await engine.transact("readwrite", async (tx) => {
        for (let i = 0; i < 10; i++) tx.put(["a", i], `stored-${i}`);
        tx.put(["a"], "prefix itself");
        tx.put(["b", 0], "other");
      });
      const seen = await engine.transact("readwrite", async (tx) => {
        tx.delete(["a", 0]);
        tx.delete(["a", 1]);
        tx.put(["a", 2], "overwritten");
        tx.put(["a", 4.5], "new");
        expect(await tx.get(["a", 0])).toBeUndefined();
        expect(await tx.get(["a", 2])).toBe("overwritten");
        const first = await tx.scan({ prefix: ["a"] }, { limit: 3 });
        const last = await tx.scan({ prefix: ["a"], upper: ["a", 5], upperOpen: true }, { limit: 2, reverse: true });
        const bounded = await tx.scan({ prefix: ["a"], lower: ["a", 4], lowerOpen: true, upper: ["a", 6] });
        return { first, last, bounded };
      });
      expect(seen.first).toEqual([
        { key: ["a"], value: "prefix itself" },
        { key: ["a", 2], value: "overwritten" },
        { key: ["a", 3], value: "stored-3" },
      ]);
      expect(seen.last.map((entry) => entry.key)).toEqual([["a", 4.5], ["a", 4]]);
      expect(seen.bounded.map((entry) => entry.key)).toEqual([["a", 4.5], ["a", 5], ["a", 6]]);
    });
  });

  it("rolls back every write of a body that throws, and of a body whose call failed", async () => {
    await inObject(async (engine) => {
      await engine.transact("readwrite", async (tx) => tx.put(["k"], 1));
      await expect(
        engine.transact("readwrite", async (tx) => {
          tx.put(["k"], 2);
          tx.put(["other"], 3);
          throw new Error("boom");
        }),
      ).rejects.toThrow("boom");
      await expect(
        engine.transact("readwrite", async (tx) => {
          tx.put(["k"], 4);
          try {
            tx.put([Number.NaN], 5);
          } catch {
            // swallowed by the body: the transaction still fails
          }
        }),
      ).rejects.toThrow(/finite number/);
      await expect(engine.transact("readonly", async (tx) => tx.put(["k"], 6))).rejects.toThrow(/readonly/);
      const entries = await engine.transact("readonly", (tx) => tx.scan({}));
      expect(entries).toEqual([{ key: ["k"], value: 1 }]);
    });
  });

  it("runs bodies one at a time in call order (serializable)", async () => {
    await inObject(async (engine) => {
      await engine.transact("readwrite", async (tx) => tx.put(["n"], 0));
      const increments = Array.from({ length: 20 }, () =>
        engine.transact("readwrite", async (tx) => {
          const n = (await tx.get<number>(["n"]))!;
          await Promise.resolve();
          tx.put(["n"], n + 1);
          return n;
        }),
      );
      expect(await Promise.all(increments)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    });
  });

  it("writes more rows than one statement may bind (100 parameters) in one transaction", async () => {
    await inObject(async (engine) => {
      await engine.transact("readwrite", async (tx) => {
        for (let i = 0; i < 500; i++) tx.put(["row", i], { i });
      });
      await engine.transact("readwrite", async (tx) => {
        for (let i = 0; i < 500; i += 2) tx.delete(["row", i]);
      });
      const left = await engine.transact("readonly", (tx) => tx.scan({ prefix: ["row"] }));
      expect(left.length).toBe(250);
      expect(left[0]).toEqual({ key: ["row", 1], value: { i: 1 } });
    });
  });

  it("refuses a row over the 2 MB limit with a typed error and writes nothing", async () => {
    await inObject(async (engine) => {
      const big = "x".repeat(MAX_ROW_BYTES);
      const outcome = engine.transact("readwrite", async (tx) => {
        tx.put(["small"], 1);
        tx.put(["big"], big);
      });
      await expect(outcome).rejects.toBeInstanceOf(DurableObjectEngineError);
      await expect(outcome).rejects.toMatchObject({ code: "value_too_large", retryable: false });
      const fits = "y".repeat(1024 * 1024);
      await engine.transact("readwrite", async (tx) => tx.put(["fits"], fits));
      const entries = await engine.transact("readonly", (tx) => tx.scan({}));
      expect(entries.map((entry) => entry.key)).toEqual([["fits"]]);
    });
  });

  it("round-trips Uint8Array values and objects whose keys look like its tags", async () => {
    await inObject(async (engine) => {
      const values = [
        new Uint8Array([0, 1, 2, 255]),
        { bytes: new Uint8Array([9]), list: [new Uint8Array(0), "s"] },
        { $u8: "not bytes" },
        { $o: { $u8: "AA==" } },
        { plain: [1, "two", null, true, { nested: 1.5 }] },
      ];
      await engine.transact("readwrite", async (tx) => values.forEach((value, i) => tx.put(["v", i], value)));
      const read = await engine.transact("readonly", (tx) => tx.scan({ prefix: ["v"] }));
      expect(read.map((entry) => entry.value)).toEqual(values);
    });
  });

  it("migrates its schema once and reopens over existing data", async () => {
    await inObject(async (engine, storage) => {
      await engine.transact("readwrite", async (tx) => tx.put(["kept"], true));
      await engine.close();
      await expect(engine.transact("readonly", (tx) => tx.get(["kept"]))).rejects.toMatchObject({ code: "closed" });
      const again = durableObjectEngine(storage);
      expect(await again.transact("readonly", (tx) => tx.get(["kept"]))).toBe(true);
      const version = storage.sql.exec<{ version: number }>("SELECT version FROM _isostore_schema").toArray();
      expect(version).toEqual([{ version: SCHEMA_VERSION }]);
      storage.sql.exec("UPDATE _isostore_schema SET version = ?", SCHEMA_VERSION + 1);
      expect(() => durableObjectEngine(storage)).toThrow(/schema/);
    });
  });
});
