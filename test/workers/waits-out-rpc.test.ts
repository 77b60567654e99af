/**
 * A real `JournalPartition` / `StoreObject` whose storage is full or
 * overloaded, reached over Workers RPC (`PartitionedJournal`,
 * `StoreObjectClient`): the worker answers the error as it would in-process,
 * a 503 with `Retry-After` and `retryable` (waited out), not a 500.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { PartitionedJournal, StoreObjectClient } from "../../adapters/durable-objects/index.js";
import { platformError } from "../../adapters/durable-objects/errors.js";
import type { Engine } from "../../src/engine.js";
import { createUsageEvent } from "../../src/index.js";
import { errorAnswer } from "../../src/worker/index.js";

/** What the platform throws when an object's storage is full, and when it is overloaded. */
const FAILURES = {
  full: () => platformError(new Error("SQLITE_FULL: database or disk is full"), "commit"),
  overloaded: () => platformError(Object.assign(new Error("Durable Object is overloaded."), { overloaded: true, retryable: true }), "get"),
};

/** Make the object behind `stub` fail every transaction with `failure` (its engine swapped in place). */
async function breakStorage(stub: DurableObjectStub, failure: () => Error): Promise<void> {
  await runInDurableObject(stub, (instance: unknown) => {
    const object = instance as { engine: Engine };
    object.engine = { ...object.engine, transact: () => Promise.reject(failure()) };
  });
}

function verdict(error: unknown): [number, string | undefined, boolean] {
  const answer = errorAnswer(error);
  return [answer.status, answer.headers["retry-after"], answer.body.error.retryable];
}

afterEach(() => vi.restoreAllMocks());

describe("a full or overloaded Durable Object over RPC answers 503 + Retry-After + retryable", () => {
  for (const [kind, failure] of Object.entries(FAILURES)) {
    const a = kind === "full" ? "a full" : "an overloaded";
    it(`${a} JournalPartition, through PartitionedJournal`, async () => {
      vi.spyOn(console, "error").mockImplementation(() => undefined);
      const journal = new PartitionedJournal(env.PARTITIONS, { name: "usage", partitions: 1, scope: `waits-out-${crypto.randomUUID()}/` });
      await breakStorage(env.PARTITIONS.get(env.PARTITIONS.idFromName(journal.objectName(0))), failure);
      const event = createUsageEvent({ record: { requestId: "0190c000-0000-7000-8000-000000000001", namespace: "acme", subject: "a", data: {} }, observedAt: 1 });
      const error: unknown = await journal.append(event).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: "backend", retryable: false });
      expect(verdict(error)).toEqual([503, expect.any(String), true]);
    });

    it(`${a} StoreObject, through StoreObjectClient`, async () => {
      vi.spyOn(console, "error").mockImplementation(() => undefined);
      const name = `tests/${crypto.randomUUID()}`;
      await breakStorage(env.STORES.get(env.STORES.idFromName(name)), failure);
      const error: unknown = await new StoreObjectClient(env.STORES, name).kv.put("a", 0, new TextEncoder().encode("1")).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: "backend" });
      expect(verdict(error)).toEqual([503, expect.any(String), true]);
    });
  }
});
