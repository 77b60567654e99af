/**
 * Example tests of the memory engine, one (or a few) per promise it makes:
 * key order, scans, atomic rollback, own writes, serialization, readonly,
 * dead handles, key validation, close, by-reference values, balance.
 */
import { describe, expect, it } from "vitest";
import {
  InvalidKeyError,
  type Engine,
  type EngineTransaction,
  type Entry,
  type Key,
  type KeyRange,
  compareKeys,
} from "../../src/engine.js";
import { memoryEngine } from "./index.js";
import { MemoryEngine } from "./memory-engine.js";

/** Put every key (value = its index) in one transaction. */
async function putAll(engine: Engine, keys: readonly Key[]): Promise<void> {
  await engine.transact("readwrite", async (tx) => {
    keys.forEach((k, i) => tx.put(k, i));
  });
}

async function scanAll(engine: Engine, range: KeyRange = {}, reverse = false): Promise<Entry[]> {
  return engine.transact("readonly", (tx) => tx.scan(range, { reverse }));
}

async function keysOf(engine: Engine, range: KeyRange = {}, reverse = false): Promise<Key[]> {
  return (await scanAll(engine, range, reverse)).map((e) => e.key);
}

describe("memoryEngine: basics", () => {
  it("is not durable", () => {
    expect(memoryEngine().durable).toBe(false);
  });

  it("puts, gets, overwrites and deletes", async () => {
    const engine = memoryEngine();
    await engine.transact("readwrite", async (tx) => {
      tx.put(["a"], 1);
      tx.put(["a"], 2);
      tx.put(["b"], 3);
      tx.delete(["b"]);
      tx.delete(["never"]);
    });
    await engine.transact("readonly", async (tx) => {
      expect(await tx.get(["a"])).toBe(2);
      expect(await tx.get(["b"])).toBeUndefined();
    });
    expect(await scanAll(engine)).toEqual([{ key: ["a"], value: 2 }]);
  });

  it("resolves transact with the body's result", async () => {
    const engine = memoryEngine();
    await expect(engine.transact("readonly", async () => 42)).resolves.toBe(42);
  });
});

describe("memoryEngine: key order", () => {
  it("orders numbers before strings, numbers by value, strings by UTF-16 code units, prefixes first", async () => {
    const engine = memoryEngine();
    const expected: Key[] = [
      [-1e308],
      [-2.5],
      [-1],
      [0],
      [0, 0],
      [0, "a"],
      [0.5],
      [1],
      [10],
      [""],
      ["", ""],
      ["\u0000"],
      ["A"],
      ["B"],
      ["a"],
      ["a", 1],
      ["a", "b"],
      ["a\u0000"],
      ["ab"],
      ["b"],
      ["\u00ff"],
      ["\u0100"],
      ["\ud800"],
      ["\udc00"],
      ["\uffff"],
    ];
    const shuffled = [...expected].reverse();
    shuffled.push(...expected.filter((_, i) => i % 2 === 0));
    await putAll(engine, shuffled);
    expect(await keysOf(engine)).toEqual(expected);
    expect(await keysOf(engine, {}, true)).toEqual([...expected].reverse());
  });

  it("treats 0 and -0 as the same key, keeping the key of the latest put", async () => {
    const engine = memoryEngine();
    await engine.transact("readwrite", async (tx) => {
      tx.put([0], "zero");
      tx.put([-0], "minus zero");
      expect(await tx.get([0])).toBe("minus zero");
    });
    const entries = await scanAll(engine);
    expect(entries).toHaveLength(1);
    expect(Object.is(entries[0]!.key[0], -0)).toBe(true);
  });

  it("returns the original key tuples from scans, not their encodings", async () => {
    const engine = memoryEngine();
    await putAll(engine, [["x", 1, "y"]]);
    const [entry] = await scanAll(engine);
    expect(entry).toEqual({ key: ["x", 1, "y"], value: 0 });
  });
});

describe("memoryEngine: scan ranges", () => {
  const keys: Key[] = [["a"], ["a", 1], ["a", 2], ["a", 2, "x"], ["a", 3], ["a", "z"], ["ab"], ["b"], [1], [2]];

  async function filled(): Promise<Engine> {
    const engine = memoryEngine();
    await putAll(engine, keys);
    return engine;
  }

  it("honours prefix (the prefix key itself included, longer strings excluded)", async () => {
    const engine = await filled();
    expect(await keysOf(engine, { prefix: ["a"] })).toEqual([["a"], ["a", 1], ["a", 2], ["a", 2, "x"], ["a", 3], ["a", "z"]]);
    expect(await keysOf(engine, { prefix: ["a", 2] })).toEqual([["a", 2], ["a", 2, "x"]]);
    expect(await keysOf(engine, { prefix: ["zz"] })).toEqual([]);
  });

  it("treats an empty prefix as every key", async () => {
    const engine = await filled();
    expect(await keysOf(engine, { prefix: [] })).toHaveLength(keys.length);
  });

  it("honours lower/upper with open and closed ends", async () => {
    const engine = await filled();
    expect(await keysOf(engine, { lower: ["a", 2], upper: ["a", 3] })).toEqual([["a", 2], ["a", 2, "x"], ["a", 3]]);
    expect(await keysOf(engine, { lower: ["a", 2], lowerOpen: true, upper: ["a", 3], upperOpen: true })).toEqual([
      ["a", 2, "x"],
    ]);
    expect(await keysOf(engine, { upper: [2] })).toEqual([[1], [2]]);
    expect(await keysOf(engine, { lower: ["ab"] })).toEqual([["ab"], ["b"]]);
    // An upper bound excludes the keys that extend it.
    expect(await keysOf(engine, { lower: ["a", 1], upper: ["a", 2] })).toEqual([["a", 1], ["a", 2]]);
  });

  it("intersects prefix with lower/upper", async () => {
    const engine = await filled();
    expect(await keysOf(engine, { prefix: ["a"], lower: ["a", 2], lowerOpen: true })).toEqual([
      ["a", 2, "x"],
      ["a", 3],
      ["a", "z"],
    ]);
    expect(await keysOf(engine, { prefix: ["a"], upper: ["b"] })).toHaveLength(6);
    expect(await keysOf(engine, { prefix: ["a"], lower: [0], upper: ["a", 1] })).toEqual([["a"], ["a", 1]]);
    // Bounds equal to the prefix: the open flag decides whether the prefix key itself is in.
    expect(await keysOf(engine, { prefix: ["a", 2], lower: ["a", 2], lowerOpen: true })).toEqual([["a", 2, "x"]]);
    expect(await keysOf(engine, { prefix: ["a", 2], lower: ["a", 2] })).toEqual([["a", 2], ["a", 2, "x"]]);
    expect(await keysOf(engine, { prefix: ["a", 2], upper: ["a", 2], upperOpen: true })).toEqual([]);
    expect(await keysOf(engine, { prefix: ["a", 2], upper: ["a", 2] })).toEqual([["a", 2]]);
  });

  it("returns nothing for an empty or inverted range", async () => {
    const engine = await filled();
    expect(await keysOf(engine, { lower: ["b"], upper: ["a"] })).toEqual([]);
    expect(await keysOf(engine, { lower: ["b"], upper: ["a"] }, true)).toEqual([]);
    expect(await keysOf(engine, { lower: ["b"], lowerOpen: true, upper: ["b"] })).toEqual([]);
  });

  it("honours limit and reverse", async () => {
    const engine = await filled();
    await engine.transact("readonly", async (tx) => {
      expect((await tx.scan({ prefix: ["a"] }, { limit: 2 })).map((e) => e.key)).toEqual([["a"], ["a", 1]]);
      expect((await tx.scan({ prefix: ["a"] }, { limit: 2, reverse: true })).map((e) => e.key)).toEqual([
        ["a", "z"],
        ["a", 3],
      ]);
      expect((await tx.scan({ upper: ["a", 2], upperOpen: true }, { reverse: true })).map((e) => e.key)).toEqual([
        ["a", 1],
        ["a"],
        [2],
        [1],
      ]);
      expect(await tx.scan({}, { limit: 100 })).toHaveLength(keys.length);
    });
  });

  it("refuses a limit that is not a positive integer with a RangeError", async () => {
    const engine = await filled();
    for (const limit of [0, -1, 1.5, NaN, Infinity]) {
      await expect(engine.transact("readonly", (tx) => tx.scan({}, { limit }))).rejects.toBeInstanceOf(RangeError);
    }
  });
});

describe("memoryEngine: atomicity", () => {
  it("rolls back every write when the body throws", async () => {
    const engine = memoryEngine();
    await putAll(engine, [["keep"], ["overwrite"], ["remove"]]);
    const before = await scanAll(engine);
    const boom = new Error("boom");
    await expect(
      engine.transact("readwrite", async (tx) => {
        tx.put(["new"], "n");
        tx.put(["overwrite"], "changed");
        tx.delete(["remove"]);
        tx.put(["remove"], "back with another value");
        tx.delete(["new"]);
        tx.put(["new"], "again");
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(await scanAll(engine)).toEqual(before);
  });

  it("rolls back when the body rejects after awaiting, and rejects with the same (even non-Error) value", async () => {
    const engine = memoryEngine();
    const reason = { not: "an Error" };
    await expect(
      engine.transact("readwrite", async (tx) => {
        tx.put(["a"], 1);
        await tx.get(["a"]);
        tx.put(["b"], 2);
        await tx.scan({});
        // eslint-disable-next-line @typescript-eslint/only-throw-error -- the point of the test
        throw reason;
      }),
    ).rejects.toBe(reason);
    expect(await scanAll(engine)).toEqual([]);
  });

  it("rolls back when the body throws synchronously (not an async function)", async () => {
    const engine = memoryEngine();
    const boom = new Error("sync");
    await expect(
      engine.transact("readwrite", (tx) => {
        tx.put(["a"], 1);
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(await scanAll(engine)).toEqual([]);
  });

  it("commits everything when the body resolves", async () => {
    const engine = memoryEngine();
    await putAll(engine, [["a"], ["b"]]);
    expect(await keysOf(engine)).toEqual([["a"], ["b"]]);
  });

  it("keeps working after a rollback (the index stays consistent)", async () => {
    const engine = new MemoryEngine({ chunkCapacity: 4 });
    const keys = Array.from({ length: 200 }, (_, i): Key => ["k", i]);
    await putAll(engine, keys.slice(0, 100));
    await expect(
      engine.transact("readwrite", async (tx) => {
        for (const k of keys) tx.put(k, "x");
        for (const k of keys.slice(0, 150)) tx.delete(k);
        throw new Error("undo all of it");
      }),
    ).rejects.toThrow("undo all of it");
    engine.inspectIndex().check();
    expect(engine.inspectIndex().size).toBe(100);
    expect(await scanAll(engine)).toEqual(keys.slice(0, 100).map((key, i) => ({ key, value: i })));
  });
});

describe("memoryEngine: own writes", () => {
  it("shows a transaction its own writes through get and scan", async () => {
    const engine = memoryEngine();
    await putAll(engine, [["a"], ["c"]]);
    await engine.transact("readwrite", async (tx) => {
      tx.put(["b"], "B");
      tx.delete(["c"]);
      tx.put(["a"], "A");
      expect(await tx.get(["b"])).toBe("B");
      expect(await tx.get(["c"])).toBeUndefined();
      expect(await tx.scan({})).toEqual([
        { key: ["a"], value: "A" },
        { key: ["b"], value: "B" },
      ]);
    });
  });
});

describe("memoryEngine: serialization", () => {
  it("runs concurrent transactions one at a time, in call order", async () => {
    const engine = memoryEngine();
    const log: string[] = [];
    const body =
      (name: string) =>
      async (tx: EngineTransaction): Promise<number | undefined> => {
        log.push(`${name} start`);
        const seen = await tx.get<number>(["counter"]);
        await tx.scan({});
        await tx.get(["other"]);
        tx.put(["counter"], (seen ?? 0) + 1);
        log.push(`${name} end`);
        return seen;
      };
    const results = await Promise.all([
      engine.transact("readwrite", body("t1")),
      engine.transact("readwrite", body("t2")),
      engine.transact("readonly", async (tx) => {
        log.push("r start");
        const v = await tx.get(["counter"]);
        log.push("r end");
        return v;
      }),
      engine.transact("readwrite", body("t3")),
    ]);
    expect(log).toEqual(["t1 start", "t1 end", "t2 start", "t2 end", "r start", "r end", "t3 start", "t3 end"]);
    expect(results).toEqual([undefined, 1, 2, 2]);
  });

  it("does not start a transaction before the previous one settled, even when it fails", async () => {
    const engine = memoryEngine();
    const first = engine.transact("readwrite", async (tx) => {
      tx.put(["x"], 1);
      await tx.get(["x"]);
      throw new Error("first fails");
    });
    const second = engine.transact("readonly", (tx) => tx.get(["x"]));
    await expect(first).rejects.toThrow("first fails");
    await expect(second).resolves.toBeUndefined();
  });

  it("settles a long queue in call order, whatever its bodies return or throw", async () => {
    const engine = memoryEngine();
    const n = 10_000;
    const order: number[] = [];
    const calls = Array.from({ length: n }, (_, i) => {
      const kind = i % 4;
      return engine.transact("readwrite", ((tx: EngineTransaction) => {
        order.push(i);
        tx.put(["q", i], i);
        if (kind === 0) throw new Error(`sync ${i}`);
        if (kind === 1) return i; // not a promise
        if (kind === 2) return Promise.reject(new Error(`async ${i}`));
        return tx.get(["q", i]);
      }) as (tx: EngineTransaction) => Promise<number | undefined>);
    });
    const settled = await Promise.allSettled(calls);
    expect(order).toEqual(Array.from({ length: n }, (_, i) => i));
    settled.forEach((result, i) => {
      expect(result.status).toBe(i % 4 === 0 || i % 4 === 2 ? "rejected" : "fulfilled");
      if (result.status === "fulfilled") expect(result.value).toBe(i);
    });
    const kept = await keysOf(engine, { prefix: ["q"] });
    expect(kept).toEqual(Array.from({ length: n }, (_, i): Key => ["q", i]).filter((_, i) => i % 4 === 1 || i % 4 === 3));
  });

  it("does not run the body inside the transact call itself", async () => {
    const engine = memoryEngine();
    let ran = false;
    const done = engine.transact("readonly", async () => {
      ran = true;
    });
    expect(ran).toBe(false);
    await done;
    expect(ran).toBe(true);
  });
});

describe("memoryEngine: readonly", () => {
  it("refuses put and delete in a readonly transaction with a TypeError thrown from the call", async () => {
    const engine = memoryEngine();
    await putAll(engine, [["a"]]);
    let putError: unknown;
    let deleteError: unknown;
    const rejection = await engine
      .transact("readonly", async (tx) => {
        try {
          tx.put(["b"], 1);
        } catch (error) {
          putError = error;
        }
        try {
          tx.delete(["a"]);
        } catch (error) {
          deleteError = error;
        }
      })
      .then(
        () => "resolved",
        (error: unknown) => error,
      );
    // The first failed call is what `transact` rejects with.
    expect(rejection).toBe(putError);
    expect(putError).toBeInstanceOf(TypeError);
    expect(deleteError).toBeInstanceOf(TypeError);
    expect(await keysOf(engine)).toEqual([["a"]]);
  });
});

describe("memoryEngine: failed calls", () => {
  it("throws InvalidKeyError from the call for an invalid key", async () => {
    const engine = memoryEngine();
    // (A falsy scan bound, like `null`, counts as absent, as in `inRange`.)
    const invalid: unknown[] = [[], [NaN], [Infinity], ["a", -Infinity], [null], [{}], [true], ["a", undefined], "a", 1];
    for (const key of invalid) {
      const calls: [string, (tx: EngineTransaction) => unknown][] = [
        ["get", (tx) => tx.get(key as Key)],
        ["put", (tx) => tx.put(key as Key, 1)],
        ["delete", (tx) => tx.delete(key as Key)],
        ["scan lower", (tx) => tx.scan({ lower: key as Key })],
        ["scan upper", (tx) => tx.scan({ upper: key as Key })],
        ["scan prefix", (tx) => tx.scan({ prefix: key as Key })],
      ];
      for (const [name, call] of calls) {
        let thrown: unknown;
        const rejection = await engine
          .transact("readwrite", async (tx) => {
            try {
              call(tx);
            } catch (error) {
              thrown = error;
            }
          })
          .then(
            () => "resolved",
            (error: unknown) => error,
          );
        if (name === "scan prefix" && Array.isArray(key) && key.length === 0) {
          // An empty prefix is allowed: it means every key.
          expect(rejection).toBe("resolved");
          continue;
        }
        expect(thrown).toBeInstanceOf(InvalidKeyError);
        expect(rejection).toBe(thrown);
      }
    }
    await expect(engine.transact("readonly", (tx) => tx.scan({ prefix: [NaN] }))).rejects.toBeInstanceOf(InvalidKeyError);
  });

  it("throws synchronously from the call, before returning a promise", async () => {
    const engine = memoryEngine();
    const thrown: unknown[] = [];
    await expect(
      engine.transact("readonly", async (tx) => {
        try {
          void tx.get([]);
        } catch (error) {
          thrown.push(error);
        }
        try {
          void tx.scan({}, { limit: 0 });
        } catch (error) {
          thrown.push(error);
        }
      }),
    ).rejects.toBeInstanceOf(InvalidKeyError);
    expect(thrown).toHaveLength(2);
    expect(thrown[0]).toBeInstanceOf(InvalidKeyError);
    expect(thrown[1]).toBeInstanceOf(RangeError);
  });

  it("rolls the transaction back after a failed call even when the body catches the error", async () => {
    const engine = memoryEngine();
    await putAll(engine, [["a"]]);
    let caught: unknown;
    await expect(
      engine.transact("readwrite", async (tx) => {
        tx.put(["b"], 1);
        tx.delete(["a"]);
        try {
          tx.put(["c", NaN], 1);
        } catch (error) {
          caught = error;
        }
        tx.put(["d"], 1);
        return "the body thinks it succeeded";
      }),
    ).rejects.toSatisfy((error) => error === caught && error instanceof InvalidKeyError);
    expect(await scanAll(engine)).toEqual([{ key: ["a"], value: 0 }]);
  });

  it("rejects with the body's own error when it throws after a failed call", async () => {
    const engine = memoryEngine();
    const mine = new Error("mine");
    await expect(
      engine.transact("readonly", async (tx) => {
        try {
          tx.put(["a"], 1);
        } catch {
          // ignored on purpose
        }
        throw mine;
      }),
    ).rejects.toBe(mine);
  });
});

describe("memoryEngine: stale handles", () => {
  it("refuses every call on a handle once its body settled", async () => {
    const engine = memoryEngine();
    let stale: EngineTransaction | undefined;
    await engine.transact("readwrite", async (tx) => {
      stale = tx;
      tx.put(["a"], 1);
    });
    const tx = stale!;
    expect(() => tx.get(["a"])).toThrow(/already finished/);
    expect(() => tx.put(["b"], 1)).toThrow(/already finished/);
    expect(() => tx.delete(["a"])).toThrow(/already finished/);
    expect(() => tx.scan({})).toThrow(/already finished/);
    expect(await keysOf(engine)).toEqual([["a"]]);
  });

  it("refuses a handle of a rolled-back transaction too, and a late write changes nothing", async () => {
    const engine = memoryEngine();
    let stale: EngineTransaction | undefined;
    let lateError: unknown;
    await expect(
      engine.transact("readwrite", async (tx) => {
        stale = tx;
        throw new Error("fails");
      }),
    ).rejects.toThrow("fails");
    try {
      stale!.put(["late"], 1);
    } catch (error) {
      lateError = error;
    }
    expect(lateError).toBeInstanceOf(Error);
    expect(await scanAll(engine)).toEqual([]);
  });
});

describe("memoryEngine: close", () => {
  it("rejects transact after close with an error saying the engine is closed", async () => {
    const engine = memoryEngine();
    await engine.close();
    await expect(engine.transact("readonly", async () => 1)).rejects.toThrow(/closed/);
    await expect(engine.close()).resolves.toBeUndefined();
  });

  it("lets transactions queued before close finish, and refuses the ones after", async () => {
    const engine = memoryEngine();
    const queued = [
      engine.transact("readwrite", async (tx) => {
        tx.put(["a"], 1);
        await tx.get(["a"]);
        return "first";
      }),
      engine.transact("readonly", (tx) => tx.get(["a"])),
    ];
    const closing = engine.close();
    const late = engine.transact("readonly", async () => "late");
    await expect(Promise.all(queued)).resolves.toEqual(["first", 1]);
    await expect(closing).resolves.toBeUndefined();
    await expect(late).rejects.toThrow(/closed/);
  });

  it("rejects an unknown mode or a missing body", async () => {
    const engine = memoryEngine();
    await expect(engine.transact("writeonly" as "readonly", async () => 1)).rejects.toBeInstanceOf(TypeError);
    await expect(engine.transact("readonly", undefined as unknown as () => Promise<void>)).rejects.toBeInstanceOf(
      TypeError,
    );
  });
});

describe("memoryEngine: values and keys", () => {
  it("stores values by reference: get and scan return the very object that was put", async () => {
    const engine = memoryEngine();
    const value = { nested: { list: [1, 2] } };
    const bytes = new Uint8Array([1, 2, 3]);
    await engine.transact("readwrite", async (tx) => {
      tx.put(["v"], value);
      tx.put(["b"], bytes);
    });
    await engine.transact("readonly", async (tx) => {
      expect(await tx.get(["v"])).toBe(value);
      expect(await tx.get(["b"])).toBe(bytes);
      expect((await tx.scan({ prefix: ["v"] }))[0]!.value).toBe(value);
    });
  });

  it("copies keys on put, so that reusing the key array changes nothing", async () => {
    const engine = memoryEngine();
    const key: (string | number)[] = ["a", 1];
    await engine.transact("readwrite", async (tx) => {
      tx.put(key, "v");
      key[1] = 2;
    });
    expect(await scanAll(engine)).toEqual([{ key: ["a", 1], value: "v" }]);
  });

  it("keeps the key of the latest put across 0 / -0 overwrites, and restores it on rollback", async () => {
    const engine = memoryEngine();
    await engine.transact("readwrite", async (tx) => tx.put(["z", -0], "minus"));
    await engine.transact("readwrite", async (tx) => tx.put(["z", 0], "plus"));
    let [entry] = await scanAll(engine);
    expect(Object.is(entry!.key[1], 0)).toBe(true);
    await expect(
      engine.transact("readwrite", async (tx) => {
        tx.put(["z", -0], "minus again");
        throw new Error("undo");
      }),
    ).rejects.toThrow("undo");
    [entry] = await scanAll(engine);
    expect(entry).toEqual({ key: ["z", 0], value: "plus" });
    expect(Object.is(entry!.key[1], 0)).toBe(true);
  });

  it("returns keys from scans that are not the caller's arrays", async () => {
    const engine = memoryEngine();
    const key: Key = ["a", 1];
    await engine.transact("readwrite", async (tx) => tx.put(key, "v"));
    await engine.transact("readwrite", async (tx) => tx.put(key, "w"));
    const [entry] = await scanAll(engine);
    expect(entry!.key).not.toBe(key);
    expect(entry).toEqual({ key: ["a", 1], value: "w" });
  });

  it("does not change entries a scan already returned when the key is overwritten", async () => {
    const engine = memoryEngine();
    await putAll(engine, [["a"]]);
    const before = await scanAll(engine);
    await engine.transact("readwrite", async (tx) => tx.put(["a"], "new"));
    expect(before).toEqual([{ key: ["a"], value: 0 }]);
  });
});

describe("memoryEngine: ordered trie", () => {
  it("keeps the entry count and the trie's shape when overwriting existing keys", async () => {
    const engine = new MemoryEngine({ chunkCapacity: 4 });
    await putAll(engine, Array.from({ length: 50 }, (_, i): Key => [i]));
    const { size, height } = engine.inspectIndex();
    await engine.transact("readwrite", async (tx) => {
      for (let i = 0; i < 50; i++) tx.put([i], "again");
    });
    expect(engine.inspectIndex()).toMatchObject({ size, height });
    engine.inspectIndex().check();
  });

  it("keeps an emptied node as a tombstone that a later put revives, and compacts tombstones once they outnumber live siblings", async () => {
    const engine = new MemoryEngine({ chunkCapacity: 4 });
    await putAll(engine, Array.from({ length: 1000 }, (_, i): Key => ["p", i]));
    // A key under one sibling runs empty and comes back, again and again: its node stays (no Map delete and set).
    for (let round = 0; round < 50; round++) {
      await engine.transact("readwrite", async (tx) => {
        tx.put(["p", 5, "x"], round);
      });
      await engine.transact("readwrite", async (tx) => {
        tx.delete(["p", 5, "x"]);
      });
      expect(engine.inspectIndex().tombstones).toBe(1);
    }
    expect(await keysOf(engine, { prefix: ["p", 5] })).toEqual([["p", 5]]);
    // 501 siblings deleted: tombstones outnumber the 499 live ones and are compacted away (the one under
    // ["p", 5] stays, beside that node's entry); 99 more stay as tombstones, ["p", 5] among them, which drops its own.
    await engine.transact("readwrite", async (tx) => {
      for (let i = 0; i < 501; i++) tx.delete(["p", 999 - i]);
    });
    expect(engine.inspectIndex().tombstones).toBe(1);
    await engine.transact("readwrite", async (tx) => {
      for (let i = 0; i < 99; i++) tx.delete(["p", i]);
    });
    expect(engine.inspectIndex()).toMatchObject({ size: 400, tombstones: 99 });
    expect((await keysOf(engine)).map((k) => k[1])).toEqual(Array.from({ length: 400 }, (_, i) => i + 99));
    expect(await keysOf(engine, { lower: ["p", 50], upper: ["p", 100] })).toEqual([["p", 99], ["p", 100]]);
    expect(await keysOf(engine, { prefix: ["p"] }, true)).toHaveLength(400);
    await engine.transact("readwrite", async (tx) => {
      tx.deleteRange!({ prefix: ["p"] });
    });
    expect(engine.inspectIndex()).toMatchObject({ size: 0, height: 0, tombstones: 0 });
  });

  it("stays sound and ordered through inserts and deletes in scrambled order, and ends with the root alone", async () => {
    for (const chunkCapacity of [4, 256]) {
      const engine = new MemoryEngine({ chunkCapacity });
      const n = 10_000;
      // Numbers and strings under one node, and keys of two lengths.
      const keys = Array.from({ length: n }, (_, i): Key => {
        const k = (i * 7919) % n;
        return k % 3 === 0 ? ["k", `s${k}`] : k % 3 === 1 ? ["k", k] : ["k", k, "x"];
      });
      await putAll(engine, keys);
      const index = engine.inspectIndex();
      index.check();
      expect(index.size).toBe(n);
      expect(index.height).toBe(3);
      const scanned = await keysOf(engine);
      expect(scanned).toEqual([...keys].sort(compareKeys));
      expect(await keysOf(engine, {}, true)).toEqual([...scanned].reverse());
      await engine.transact("readwrite", async (tx) => {
        for (let i = 0; i < n; i++) tx.delete(keys[(i * 104729) % n]!);
      });
      const after = engine.inspectIndex();
      after.check();
      expect(after.size).toBe(0);
      expect(after.height).toBe(0);
      expect(await scanAll(engine)).toEqual([]);
    }
  });
});
