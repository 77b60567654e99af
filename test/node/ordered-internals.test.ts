/**
 * What the engine-backed OrderedIndex promises beyond the conformance suite:
 * its byte codecs and cursor format, failing closed on any token; a listing
 * whose engine cost follows the page, not the collection; an abort that lands
 * inside the transaction rolling everything back; engine failures and corrupt
 * rows reported as typed errors; and its validators.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import type { Engine, EngineTransaction, KeyRange, ScanOptions } from "../../src/engine.js";
import { StorageBackendError, StorageError } from "../../src/storage/errors.js";
import { base64urlDecode, base64urlEncode, stableKeySortForm, utf8Decode, utf8Encode } from "../../src/storage/ordered/bytes.js";
import { decodeDueCursor, decodeRankedCursor, encodeDueCursor, encodeRankedCursor, MAX_ORDERED_CURSOR_CHARS } from "../../src/storage/ordered/cursor.js";
import {
  createOrderedIndex,
  InvalidOrderedCursorError,
  InvalidOrderedRecordError,
  MAX_ORDERED_LIMIT,
  MAX_ORDERED_VALUE_BYTES,
  MAX_STABLE_KEY_BYTES,
  validateDue,
  validateOrderedId,
  validateOrderedLimit,
  validateOrderedRecord,
  validateOrderedValue,
  validateRank,
  validateStableKey,
  type OrderedRecord,
} from "../../src/storage/ordered/index.js";
import { OrderedLayout } from "../../src/storage/ordered/layout.js";
import { compareStableKeys, OrderedOracle } from "../../src/testing/index.js";

/** Node's own encoder, as the reference for the hand-written one (the core compiles without Node typings). */
const nodeEncoder = new (globalThis as unknown as { TextEncoder: new () => { encode(text: string): Uint8Array } }).TextEncoder();
const wellFormed = (text: string) => !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text);
const fullUnicode = fc.string({ unit: "binary", maxLength: 20 }).filter(wellFormed);

describe("byte codecs", () => {
  it("UTF-8 encoding matches the platform's and decodes back", () => {
    fc.assert(
      fc.property(fullUnicode, (text) => {
        const bytes = utf8Encode(text);
        expect(Array.from(bytes)).toEqual(Array.from(nodeEncoder.encode(text)));
        expect(utf8Decode(bytes)).toBe(text);
      }),
    );
  });

  it("UTF-8 decoding refuses overlong forms, surrogates, truncations and stray bytes", () => {
    for (const bad of [[0xc0, 0x80], [0xe0, 0x80, 0x80], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82], [0x80], [0xff], [0xf0, 0x9f, 0x98]]) {
      expect(utf8Decode(Uint8Array.from(bad)), JSON.stringify(bad)).toBeUndefined();
    }
  });

  it("base64url round-trips any bytes and accepts exactly one text per byte string", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 }), (bytes) => {
        const text = base64urlEncode(bytes);
        expect(text).toMatch(/^[A-Za-z0-9_-]*$/);
        expect(Array.from(base64urlDecode(text)!)).toEqual(Array.from(bytes));
      }),
    );
    expect(base64urlDecode("AB")).toBeUndefined(); // nonzero padding bits
    expect(base64urlDecode("A")).toBeUndefined(); // impossible length
    expect(base64urlDecode("AA==")).toBeUndefined(); // padding is not part of the alphabet
  });

  it("the sort form of stable keys orders exactly like their UTF-8 bytes (code points), prefixes first", () => {
    fc.assert(
      fc.property(fullUnicode, fullUnicode, (a, b) => {
        const bySortForm = Math.sign(stableKeySortForm(a) < stableKeySortForm(b) ? -1 : stableKeySortForm(a) > stableKeySortForm(b) ? 1 : 0);
        expect(bySortForm).toBe(Math.sign(compareStableKeys(a, b)));
      }),
    );
    expect(stableKeySortForm("\ue000") < stableKeySortForm("\u{1f600}")).toBe(true);
  });
});

describe("cursor tokens", () => {
  const position = { rank: -7, stableKey: "User/ü 😀", orderingScope: "inbox" };

  it("decode what they encode, for the exact query only", () => {
    const ranked = encodeRankedCursor("jobs", "hot", position);
    expect(decodeRankedCursor(ranked, "jobs", "hot")).toEqual(position);
    const due = encodeDueCursor("jobs", 99, { dueAt: -5, stableKey: "k", orderingScope: "a/b" });
    expect(decodeDueCursor(due, "jobs", 99)).toEqual({ dueAt: -5, stableKey: "k", orderingScope: "a/b" });
    expect(() => decodeRankedCursor(ranked, "jobs", "cold")).toThrow(expect.objectContaining({ rule: "query_mismatch", kind: "ranked" }) as Error);
    expect(() => decodeDueCursor(due, "jobs", 98)).toThrow(expect.objectContaining({ rule: "query_mismatch", kind: "due" }) as Error);
  });

  it("classify version, kind and shape failures with the listing's kind", () => {
    const ranked = encodeRankedCursor("jobs", "hot", position);
    const payload = ranked.split(".")[2]!;
    const cases: [string, string][] = [
      [`v2.r.${payload}`, "unknown_version"],
      [`v10.r.${payload}`, "unknown_version"],
      [`v1.d.${payload}`, "wrong_kind"],
      [`v1.x.${payload}`, "malformed"],
      [`x1.r.${payload}`, "malformed"],
      [`v1.r.${payload}.extra`, "malformed"],
      ["v1.r.", "malformed"],
      [`v1.r.${base64urlEncode(utf8Encode("[1,2,3]"))}`, "malformed"],
      [`v1.r.${base64urlEncode(utf8Encode('["jobs","hot",1.5,"k","inbox"]'))}`, "malformed"],
      [`v1.r.${base64urlEncode(utf8Encode('["jobs","hot",1,"","inbox"]'))}`, "malformed"],
      [`v1.r.${base64urlEncode(utf8Encode('["jobs","hot",1,"\\ud800","inbox"]'))}`, "malformed"],
      [`v1.r.${base64urlEncode(utf8Encode('["jobs","hot",1,"k","In Box"]'))}`, "malformed"],
      [`v1.r.${"A".repeat(MAX_ORDERED_CURSOR_CHARS)}`, "malformed"],
    ];
    for (const [token, rule] of cases) {
      let caught: unknown;
      try {
        decodeRankedCursor(token, "jobs", "hot");
      } catch (error) {
        caught = error;
      }
      expect(caught, token.slice(0, 40)).toBeInstanceOf(InvalidOrderedCursorError);
      expect((caught as InvalidOrderedCursorError).rule, token.slice(0, 40)).toBe(rule);
      expect((caught as InvalidOrderedCursorError).kind).toBe("ranked");
    }
  });

  it("fail closed on any text: only InvalidOrderedCursorError, never the token in the message", () => {
    const valid = encodeDueCursor("jobs", 5, { dueAt: 1, stableKey: "secret-key", orderingScope: "inbox" });
    const mutated = fc.tuple(fc.nat({ max: valid.length - 1 }), fc.string({ minLength: 1, maxLength: 3 })).map(([at, text]) => valid.slice(0, at) + text + valid.slice(at + 1));
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: "binary", maxLength: 60 }), mutated), (token) => {
        try {
          decodeDueCursor(token, "jobs", 5);
        } catch (error) {
          expect(error).toBeInstanceOf(InvalidOrderedCursorError);
          const message = (error as Error).message;
          if (token.length > 3) expect(message.includes(token)).toBe(false);
          expect(message.includes("secret")).toBe(false);
        }
      }),
    );
  });

  it("the longest position encodes below the token bound", () => {
    const name = Array.from({ length: 256 }, () => "a").join("/").slice(0, 511);
    const key = "\u0001".repeat(MAX_STABLE_KEY_BYTES);
    const token = encodeRankedCursor(name, name, { rank: -Number.MAX_SAFE_INTEGER, stableKey: key, orderingScope: name });
    expect(token.length).toBeLessThanOrEqual(MAX_ORDERED_CURSOR_CHARS);
    expect(decodeRankedCursor(token, name, name).stableKey).toBe(key);
  });
});

/** An engine that counts what the index reads, and can fail or abort on cue. */
function instrumented(inner: Engine, hooks: { onGet?: () => void } = {}) {
  const stats = { gets: 0, scanned: 0 };
  const engine: Engine = {
    durable: inner.durable,
    close: () => inner.close(),
    transact: (mode, fn) =>
      inner.transact(mode, (tx) => {
        const wrapped: EngineTransaction = {
          get: async (key) => {
            stats.gets++;
            hooks.onGet?.();
            return tx.get(key);
          },
          put: (key, value) => tx.put(key, value),
          delete: (key) => tx.delete(key),
          scan: async <V>(range: KeyRange, options?: ScanOptions) => {
            const entries = await tx.scan<V>(range, options);
            stats.scanned += entries.length;
            return entries;
          },
        };
        return fn(wrapped);
      }),
  };
  return { engine, stats };
}

const NOT_DUE = { state: "not_due", unixMillis: 0 } as const;

describe("engine-backed OrderedIndex", () => {
  it("listDue, listRanked and listOrdered read in proportion to the page, not the collection", async () => {
    const { engine, stats } = instrumented(memoryEngine());
    const index = createOrderedIndex(engine, { store: "cost" });
    for (let i = 0; i < 2000; i++) {
      const due = i % 100 === 0 ? { state: "due_at" as const, unixMillis: i } : NOT_DUE;
      await index.create({ namespace: "ns", orderingScope: "s", stableKey: `k${i}` }, "r", new Uint8Array(), i % 100 === 0 ? { ranked: true, value: i } : { ranked: false, value: 0 }, due);
    }
    for (const list of [
      () => index.listDue("ns", 10_000, "", 5),
      () => index.listRanked("ns", "r", "", 5),
      () => index.listOrdered("ns", "s", 1000, 5),
    ]) {
      stats.gets = 0;
      stats.scanned = 0;
      const page = await list();
      expect(page.records).toHaveLength(5);
      expect(stats.scanned).toBeLessThanOrEqual(6);
      expect(stats.gets).toBeLessThanOrEqual(5);
    }
  });

  it("an abort that lands inside the transaction rolls the whole mutation back", async () => {
    let abortNow = false;
    const reason = new Error("aborted mid-transaction");
    const signal = {
      get aborted() {
        return abortNow;
      },
      reason,
      addEventListener: () => {},
      removeEventListener: () => {},
    };
    const { engine } = instrumented(memoryEngine(), { onGet: () => (abortNow = true) });
    const index = createOrderedIndex(engine, { store: "abort" });
    const id = { namespace: "ns", orderingScope: "s", stableKey: "k" };
    await expect(index.create(id, "r", new Uint8Array([1]), { ranked: true, value: 1 }, { state: "due_at", unixMillis: 1 }, { signal })).rejects.toBe(reason);
    abortNow = false;
    expect((await index.listOrdered("ns", "s", 0, 10)).records).toEqual([]);
    expect((await index.listRanked("ns", "r", "", 10)).records).toEqual([]);
    const { record } = await index.create(id, "r", new Uint8Array([1]), { ranked: true, value: 1 }, NOT_DUE);
    expect(record.order).toBe(1); // the aborted create took no order either
    abortNow = false;
    await expect(index.update(id, 1, new Uint8Array([2]), { ranked: true, value: 2 }, NOT_DUE, { signal })).rejects.toBe(reason);
    abortNow = false;
    expect(await index.get(id)).toEqual(record);
  });

  it("an engine failure becomes StorageBackendError naming the operation, with the engine's error as cause", async () => {
    const failure = new Error("disk on fire");
    const { engine } = instrumented(memoryEngine(), {
      onGet: () => {
        throw failure;
      },
    });
    const index = createOrderedIndex(engine, { store: "broken" });
    const outcome = index.get({ namespace: "ns", orderingScope: "s", stableKey: "k" });
    await expect(outcome).rejects.toBeInstanceOf(StorageBackendError);
    await expect(outcome).rejects.toMatchObject({ code: "backend", operation: "ordered.get", cause: failure });
  });

  it("a corrupt stored row or index entry is InvalidOrderedRecordError, never served", async () => {
    const engine = memoryEngine();
    const index = createOrderedIndex(engine, { store: "corrupt" });
    const layout = new OrderedLayout("corrupt");
    const id = { namespace: "ns", orderingScope: "s", stableKey: "k" };
    await engine.transact("readwrite", async (tx) => {
      tx.put(layout.record("ns", "s", "k"), { v: 1, rankingScope: "r", revision: 2, order: 1, rank: 5, dueAt: null, value: new Uint8Array(), deleted: true });
      tx.put(layout.ranked("ns", "r", 9, "ghost", "s"), "ghost");
    });
    await expect(index.get(id)).rejects.toMatchObject({ code: "invalid_ordered_record", rule: "a tombstone is unranked and not due" });
    await expect(index.listRanked("ns", "r", "", 5)).rejects.toBeInstanceOf(InvalidOrderedRecordError);
  });

  it("takes a Uint8Array from another realm (a vm context, a test environment, an iframe) as the rest of the kit does: as a value, in a stored row and in a record", async () => {
    const { runInNewContext } = await import("node:vm");
    const foreign = (bytes: number[]) => runInNewContext(`new Uint8Array(${JSON.stringify(bytes)})`) as Uint8Array;
    expect(foreign([1]) instanceof Uint8Array).toBe(false);
    const engine = memoryEngine();
    const index = createOrderedIndex(engine, { store: "realm" });
    const id = { namespace: "ns", orderingScope: "s", stableKey: "k" };
    const { record } = await index.create(id, "r", foreign([1, 2, 3]), { ranked: false, value: 0 }, NOT_DUE);
    expect(Array.from(record.value)).toEqual([1, 2, 3]);
    const updated = await index.update(id, 1, foreign([4]), { ranked: false, value: 0 }, NOT_DUE);
    expect(Array.from(updated.value)).toEqual([4]);
    // A row whose value the engine hands back from another realm is served, not reported corrupt.
    const layout = new OrderedLayout("realm");
    await engine.transact("readwrite", async (tx) => {
      tx.put(layout.record("ns", "s", "other"), { v: 1, rankingScope: "r", revision: 1, order: 2, rank: null, dueAt: null, value: foreign([5]), deleted: false });
    });
    expect(Array.from((await index.get({ ...id, stableKey: "other" })).value)).toEqual([5]);
    expect(validateOrderedValue(foreign([6])).byteLength).toBe(1);
    expect(validateOrderedRecord({ ...updated, value: foreign([7]) }).value).toHaveLength(1);
    await engine.close();
  });

  it("refuses a store that is not a storage name and a revision ceiling below 1", () => {
    const engine = memoryEngine();
    expect(() => createOrderedIndex(engine, { store: "Bad Store" })).toThrow(StorageError);
    expect(() => createOrderedIndex(engine, { store: "ok", maxRevision: 0 })).toThrow(expect.objectContaining({ code: "invalid_argument" }) as Error);
  });
});

describe("validators", () => {
  it("return canonical copies", () => {
    const id = { namespace: "ns", orderingScope: "s", stableKey: "K/ü" };
    expect(validateOrderedId(id)).toEqual(id);
    expect(validateOrderedId(id)).not.toBe(id);
    expect(validateRank({ ranked: true, value: -0 })).toEqual({ ranked: true, value: 0 });
    expect(Object.is(validateRank({ ranked: true, value: -0 }).value, 0)).toBe(true);
    expect(validateDue({ state: "due_at", unixMillis: -1 })).toEqual({ state: "due_at", unixMillis: -1 });
    expect(validateStableKey("\u{1f600}".repeat(MAX_STABLE_KEY_BYTES / 4))).toHaveLength(MAX_STABLE_KEY_BYTES / 2);
    expect(validateOrderedLimit(1)).toBe(1);
    expect(validateOrderedValue(new Uint8Array(3)).byteLength).toBe(3);
  });

  it("refuse what the TypeScript types would, when called from JavaScript", () => {
    expect(() => validateStableKey(42 as unknown as string)).toThrow(expect.objectContaining({ code: "invalid_stable_key", rule: "type" }) as Error);
    expect(() => validateRank(null as unknown as { ranked: boolean; value: number })).toThrow(expect.objectContaining({ rule: "type" }) as Error);
    expect(() => validateRank({ ranked: 1 as unknown as boolean, value: 1 })).toThrow(expect.objectContaining({ rule: "ranked" }) as Error);
    expect(() => validateDue("soon" as unknown as typeof NOT_DUE)).toThrow(expect.objectContaining({ code: "invalid_due", rule: "type" }) as Error);
    expect(() => validateOrderedValue([1, 2] as unknown as Uint8Array)).toThrow(expect.objectContaining({ code: "invalid_argument", argument: "value" }) as Error);
    expect(() => validateOrderedId(null as unknown as { namespace: string; orderingScope: string; stableKey: string })).toThrow(expect.objectContaining({ argument: "id" }) as Error);
  });

  it("validateOrderedRecord checks the invariants that cross fields", () => {
    const good: OrderedRecord = {
      id: { namespace: "ns", orderingScope: "s", stableKey: "k" },
      rankingScope: "r",
      revision: 1,
      order: 1,
      due: NOT_DUE,
      rank: { ranked: false, value: 0 },
      value: new Uint8Array(),
      deleted: true,
    };
    expect(validateOrderedRecord(good)).toBe(good);
    for (const bad of [{ ...good, revision: 0 }, { ...good, order: 0 }, { ...good, rank: { ranked: true, value: 1 } }, { ...good, due: { state: "due_at" as const, unixMillis: 1 } }]) {
      expect(() => validateOrderedRecord(bad)).toThrow(InvalidOrderedRecordError);
    }
  });
});

describe("the limits this implementation chose (the spec names MaxStableKeyBytes and the others without values)", () => {
  it("are a 1024-byte stable key, a 1,048,576-byte value and a listing limit of 1000", () => {
    expect([MAX_STABLE_KEY_BYTES, MAX_ORDERED_VALUE_BYTES, MAX_ORDERED_LIMIT]).toEqual([1024, 1_048_576, 1000]);
  });

  it.each([
    ["engine-backed", () => createOrderedIndex(memoryEngine(), { store: "limits" })],
    ["reference model", () => new OrderedOracle()],
  ] as const)("hold at exactly those values (%s): the largest of each is accepted, one more is refused", async (_label, open) => {
    const index = open();
    const id = (stableKey: string) => ({ namespace: "ns", orderingScope: "s", stableKey });
    const unranked = { ranked: false, value: 0 };
    for (const key of ["k".repeat(1024), "é".repeat(512)]) {
      expect((await index.create(id(key), "r", new Uint8Array(), unranked, NOT_DUE)).created).toBe(true);
      expect((await index.get(id(key))).id.stableKey).toBe(key);
    }
    for (const key of ["k".repeat(1025), `${"é".repeat(512)}k`]) {
      await expect(index.get(id(key))).rejects.toMatchObject({ code: "invalid_stable_key", rule: "too_long", stableKeyLength: 1025 });
    }
    const largest = new Uint8Array(1_048_576).fill(7);
    expect((await index.create(id("big"), "r", largest, unranked, NOT_DUE)).created).toBe(true);
    expect((await index.get(id("big"))).value.byteLength).toBe(1_048_576);
    await expect(index.update(id("big"), 1, new Uint8Array(1_048_577), unranked, NOT_DUE)).rejects.toMatchObject({ code: "ordered_value_too_large", size: 1_048_577, max: 1_048_576 });
    expect((await index.listOrdered("ns", "s", 0, 1000)).records).toHaveLength(3);
    await expect(index.listOrdered("ns", "s", 0, 1001)).rejects.toMatchObject({ code: "invalid_ordered_limit", limit: 1001, max: 1000 });
    await expect(index.listRanked("ns", "r", "", 1001)).rejects.toMatchObject({ code: "invalid_ordered_limit", limit: 1001, max: 1000 });
    await expect(index.listDue("ns", 0, "", 1001)).rejects.toMatchObject({ code: "invalid_ordered_limit", limit: 1001, max: 1000 });
  });
});
