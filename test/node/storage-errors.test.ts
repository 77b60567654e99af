/**
 * Engine-independent rules of the storage primitives: the name grammar as a
 * property against the spec's regular expression, the shape of the typed
 * errors, and how engine failures surface.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { newByteStream } from "../../src/storage/web.js";
import {
  AppendVerifyError,
  ConflictError,
  createStore,
  InvalidNameError,
  LeaseHeldError,
  MAX_NAME_BYTES,
  StorageBackendError,
  StorageError,
  validateName,
  type Engine,
} from "../../src/index.js";

const GRAMMAR = /^[a-z0-9][a-z0-9_.-]*(\/[a-z0-9][a-z0-9_.-]*)*$/;
const utf8Bytes = (text: string) => new TextEncoder().encode(text).length;

describe("storage name grammar", () => {
  it("accepts exactly the names the spec's grammar describes, up to 512 bytes", () => {
    const alphabet = fc.constantFrom(..."ab09_.-/A é".split(""));
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: alphabet, maxLength: 12 }), fc.string({ unit: alphabet, minLength: 500, maxLength: 520 })), (name) => {
        const valid = GRAMMAR.test(name) && utf8Bytes(name) <= MAX_NAME_BYTES;
        let accepted = true;
        try {
          validateName(name);
        } catch (error) {
          expect(error).toBeInstanceOf(InvalidNameError);
          accepted = false;
        }
        expect(accepted).toBe(valid);
      }),
      { numRuns: 2000 },
    );
  });

  it("counts the limit in UTF-8 bytes", () => {
    expect(() => validateName("a".repeat(512))).not.toThrow();
    expect(() => validateName("a".repeat(513))).toThrow(expect.objectContaining({ rule: "too_long" }) as Error);
  });
});

describe("storage errors", () => {
  it("are StorageErrors with a stable code, the spec's fields, and a stack that starts with the class name", () => {
    const conflict = new ConflictError("orders/acme", 4);
    expect(conflict).toBeInstanceOf(StorageError);
    expect(conflict).toBeInstanceOf(Error);
    expect({ code: conflict.code, name: conflict.name, expected: conflict.expected }).toEqual({ code: "conflict", name: "orders/acme", expected: 4 });
    expect(conflict.stack?.split("\n")[0]).toMatch(/^ConflictError: /);
    const held = new LeaseHeldError("jobs/a", 7);
    expect({ code: held.code, name: held.name, holderEpoch: held.holderEpoch }).toEqual({ code: "lease_held", name: "jobs/a", holderEpoch: 7 });
  });

  it("carry their cause where the spec has Unwrap", () => {
    const cause = new Error("network");
    expect(new AppendVerifyError("log", 3, cause).cause).toBe(cause);
  });

  it("quote a refused name bounded and escaped", () => {
    const error = new InvalidNameError(`x\n${"y".repeat(5000)}`, "character");
    expect(error.message.length).toBeLessThan(300);
    expect(error.message).not.toContain("\n");
    expect(error.name.length).toBe(5002);
  });
});

describe("engine failures", () => {
  it("surface as StorageBackendError naming the operation, with the engine's error as cause, and change nothing", async () => {
    const inner = memoryEngine();
    const failure = new Error("disk on fire");
    let failing = false;
    const engine: Engine = {
      durable: false,
      close: () => inner.close(),
      transact: (mode, fn) => (failing ? Promise.reject(failure) : inner.transact(mode, fn)),
    };
    const store = createStore(engine, { name: "s" });
    await store.ledger.append("log", 0, new Uint8Array([1]));
    failing = true;
    const error = await store.ledger.append("log", 1, new Uint8Array([2])).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StorageBackendError);
    expect(error).toMatchObject({ code: "backend", operation: "ledger.append", cause: failure });
    failing = false;
    expect(await store.ledger.tip("log")).toBe(1);
    await engine.close();
  });
});

describe("argument checks", () => {
  it("refuse an object that only claims to be a Uint8Array (Symbol.toStringTag), as payload, value and blob, changing nothing", async () => {
    const engine = memoryEngine();
    const store = createStore(engine, { name: "app" });
    const fake = { length: 2, 0: 65, 1: 66, [Symbol.toStringTag]: "Uint8Array" } as unknown as Uint8Array;
    await expect(store.kv.put("k", 0, fake)).rejects.toMatchObject({ code: "invalid_argument" });
    await expect(store.ledger.append("log", 0, fake)).rejects.toMatchObject({ code: "invalid_argument" });
    await expect(store.blobs.put("b", fake)).rejects.toMatchObject({ code: "invalid_argument" });
    expect(await store.kv.keys("")).toEqual([]);
    expect(await store.ledger.tip("log")).toBe(0);
    expect(await store.blobs.list("")).toEqual([]);
    // A real one from another realm's constructor is still bytes.
    const { runInNewContext } = await import("node:vm");
    const foreign = runInNewContext("new Uint8Array([65, 66])") as Uint8Array;
    expect(foreign instanceof Uint8Array).toBe(false);
    expect(await store.kv.put("k", 0, foreign)).toBe(1);
    await engine.close();
  });

  it("refuse a lease ttl too short to renew before it runs out", () => {
    const engine = memoryEngine();
    expect(() => createStore(engine, { name: "app", leaseTtlMs: 1 })).toThrow(expect.objectContaining({ code: "invalid_argument" }));
    expect(() => createStore(engine, { name: "app", leaseTtlMs: 3, leaseRenewEveryMs: 3 })).toThrow(expect.objectContaining({ code: "invalid_argument" }));
    expect(() => createStore(engine, { name: "app", leaseTtlMs: 2 })).not.toThrow();
  });
});

describe("a blob whose content stream fails", () => {
  it("is refused with a typed error carrying the stream's error, and nothing is stored", async () => {
    const engine = memoryEngine();
    const store = createStore(engine, { name: "app" });
    const broken = new Error("upload broke off");
    let pulls = 0;
    const stream = newByteStream({
      pull: async (controller) => {
        await Promise.resolve();
        if (pulls++ === 0) controller.enqueue(new Uint8Array([1, 2, 3]));
        else controller.error(broken);
      },
    });
    const refusal = await store.blobs.put("snap", stream).then(
      () => null,
      (error: unknown) => error,
    );
    expect(refusal).toBeInstanceOf(StorageError);
    expect(refusal).toMatchObject({ code: "invalid_argument", argument: "content", cause: broken });
    expect(await store.blobs.list("")).toEqual([]);
    await engine.close();
  });
});
