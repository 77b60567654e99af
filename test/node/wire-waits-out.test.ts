/**
 * A full or overloaded Durable Object is a failure that waiting out fixes:
 * the worker answers it with a 503, `Retry-After` and `retryable` (so a
 * forwarder holds its batch instead of charging the events' attempts). In the
 * shipped worker such an error crosses RPC first (a `JournalPartition`'s
 * answer, `encodeError` -> `decodeError`; a `StoreObject`'s,
 * `encodeStorageError` -> `decodeStorageError`), and must answer as it would
 * in-process: the wire carries the cause's `storage_full` / `overloaded`
 * marks, and nothing else of it.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { backendError } from "../../adapters/durable-objects/errors.js";
import { BackendError, type JournalError } from "../../src/index.js";
import { decodeError, encodeError, type WireError } from "../../src/journal/wire.js";
import { StorageBackendError, type StorageError } from "../../src/storage/errors.js";
import { errorAnswer } from "../../src/worker/errors.js";
import { decodeStorageError, encodeStorageError } from "../../src/worker/stores.js";

const SECRET = "SQLITE_FULL: database or disk is full (at /srv/partition.ts:412)";

/** The platform's errors that waiting out fixes, and one that it does not. */
const full = () => new Error(SECRET);
const overloaded = () => Object.assign(new Error("Durable Object is overloaded."), { overloaded: true, retryable: true });
const broken = () => new Error("internal error; reference = x");

/** Through structured clone / JSON, as RPC and HTTP carry it. */
const carried = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

/** The parts of an HTTP answer that tell a client whether to wait and retry. */
function verdict(error: unknown): [number, string | undefined, boolean] {
  const answer = errorAnswer(error);
  return [answer.status, answer.headers["retry-after"], answer.body.error.retryable];
}

afterEach(() => vi.restoreAllMocks());

describe("waiting out across the journal partition RPC wire (encodeError / decodeError)", () => {
  it("a full or overloaded partition's backend error answers 503 + Retry-After + retryable through the wire, as in-process", () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    for (const platform of [full, overloaded]) {
      const local = backendError(platform(), "append");
      const remote = decodeError(carried(encodeError(local)));
      expect(remote).toBeInstanceOf(BackendError);
      expect(remote.retryable).toBe(false); // still not retried at once
      expect(verdict(local)[0]).toBe(503);
      expect(verdict(remote)).toEqual(verdict(local));
    }
    // A DurableObjectEngineError thrown bare (not a journal error) by the partition answers the same.
    const bare = backendError(full(), "append").cause;
    expect(verdict(decodeError(carried(encodeError(bare))))[0]).toBe(503);
  });

  it("sends only the marks of the cause, and a failure that waiting does not fix stays a 500", () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const wire = carried(encodeError(backendError(full(), "append")));
    expect(wire.cause).toEqual({ code: "storage_full" }); // not the cause's message, nor its other fields
    expect(carried(encodeError(backendError(overloaded(), "get"))).cause).toEqual({ overloaded: true });
    const plain = encodeError(backendError(broken(), "append"));
    expect("cause" in plain).toBe(false);
    expect(verdict(decodeError(carried(plain)))).toEqual([500, undefined, false]);
  });

  it("decodes a payload without the marks (an older partition) as before, and ignores malformed marks", () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const { cause: _, ...old } = carried(encodeError(backendError(full(), "append")));
    const decoded: JournalError = decodeError(old);
    expect(decoded.cause).toBeUndefined();
    expect(verdict(decoded)).toEqual([500, undefined, false]);
    for (const cause of [{ code: "platform" }, { overloaded: "yes" }, "storage_full", null]) {
      expect(verdict(decodeError({ ...old, cause } as unknown as WireError))).toEqual([500, undefined, false]);
    }
  });
});

describe("waiting out across the store object wire (encodeStorageError / decodeStorageError)", () => {
  it("a full or overloaded store object's backend error answers 503 + Retry-After + retryable through the wire, as in-process", () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    for (const platform of [full, overloaded]) {
      const local = new StorageBackendError("kv.put", backendError(platform(), "put").cause);
      const remote = decodeStorageError(carried(encodeStorageError(local)));
      expect(remote).toBeInstanceOf(StorageBackendError);
      expect(verdict(local)[0]).toBe(503);
      expect(verdict(remote)).toEqual(verdict(local));
      // A thrown value that is not a storage error (an engine error, bare) answers the same.
      expect(verdict(decodeStorageError(carried(encodeStorageError(backendError(platform(), "put").cause))))).toEqual(verdict(local));
    }
  });

  it("a failure that waiting does not fix stays a 500; a payload without the marks decodes as before", () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const plain = carried(encodeStorageError(new StorageBackendError("kv.put", backendError(broken(), "put").cause)));
    expect(plain.fields).not.toHaveProperty("causeCode");
    expect(plain.fields).not.toHaveProperty("overloaded");
    expect(verdict(decodeStorageError(plain))).toEqual([500, undefined, false]);
    const wire = carried(encodeStorageError(new StorageBackendError("kv.put", backendError(full(), "put").cause)));
    expect(wire.fields).toMatchObject({ causeCode: "storage_full" });
    const { causeCode: _, ...older } = wire.fields;
    const decoded: StorageError = decodeStorageError({ ...wire, fields: older });
    expect(verdict(decoded)).toEqual([500, undefined, false]);
    expect(verdict(decodeStorageError({ ...wire, fields: { ...older, causeCode: "platform", overloaded: 1 } }))).toEqual([500, undefined, false]);
  });
});
