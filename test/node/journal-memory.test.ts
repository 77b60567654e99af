/**
 * The journal conformance suite against the memory engine: the model-based
 * run beside the reference model, and one example per guarantee of the spec.
 * "Reopen" is a new journal over the same engine (the journal keeps no state
 * outside it).
 *
 * The memory engine says its reads are local (`Engine.localReads`), so the
 * journal reads one key at a time over it. The second run hides that hint,
 * so the same suite also drives the read-ahead path (grouped reads, cached
 * scans) that IndexedDB takes, here in the fast lane.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import {
  BackendError,
  createJournal,
  createUsageEvent,
  newRequestId,
  parseConsumerId,
  type DeliveryId,
  type Engine,
  type EngineTransaction,
  type UsageEvent,
} from "../../src/index.js";
import { journalConformanceCases, virtualClock } from "../../src/testing/index.js";
import { readingAhead } from "./support/reading-ahead.js";

const variants: { label: string; title: string; makeEngine: () => Engine }[] = [
  { label: "memory", title: "usage journal over the memory engine", makeEngine: () => memoryEngine() },
  { label: "memory, reading ahead", title: "usage journal over the memory engine, reading ahead", makeEngine: () => readingAhead(memoryEngine()) },
];

for (const { label, title, makeEngine } of variants) {
  describe(title, () => {
    const cases = journalConformanceCases({
      label,
      durable: false,
      canReopen: true,
      canChangeCapacity: true,
      createSubject: async (options) => {
        const engine = makeEngine();
        return {
          journal: createJournal(engine, options),
          reopen: async (changed) => createJournal(engine, { ...options, ...changed }),
          close: () => engine.close(),
        };
      },
    });
    for (const c of cases) it(c.name, c.run, c.timeoutMs);
  });
}

describe("createJournal without a capacity", () => {
  it("uses BILLING_GRADE: 1,000,000 events, 8 attempts, 24 h retention, refuse", async () => {
    const engine = memoryEngine();
    try {
      const journal = createJournal(engine, { name: "usage" });
      const spec = { maxEvents: 1_000_000, maxDeliveryAttempts: 8, retainAcknowledgedMs: 86_400_000, policy: "refuse" };
      expect(journal.capacity).toEqual(spec);
      expect((await journal.stats(parseConsumerId("billing"))).capacity).toEqual(spec);
    } finally {
      await engine.close();
    }
  });
});

describe("batches with holes (sparse arrays)", () => {
  it("refuse each hole in place with a typed error, as the reference model does, and store the rest", async () => {
    const engine = memoryEngine();
    try {
      const journal = createJournal(engine, { name: "usage" });
      const event = createUsageEvent({ record: { requestId: newRequestId(), namespace: "acme", subject: "user-1", data: { n: 1 } }, observedAt: 1 });
      const events: UsageEvent[] = [];
      events[1] = event;
      const results = await journal.appendBatch(events);
      expect(results).toMatchObject([{ status: "rejected", error: { code: "invalid_event" } }, { status: "accepted", position: 1 }]);
      const deliveries: DeliveryId[] = [];
      deliveries[2] = (await journal.claim(parseConsumerId("billing"), { maxEvents: 1, leaseMs: 1000, now: 1 }))[0]!.id;
      const acks = await journal.ackBatch(deliveries);
      expect(acks).toMatchObject([{ ok: false, error: { code: "invalid_argument" } }, { ok: false, error: { code: "invalid_argument" } }, { ok: true }]);
    } finally {
      await engine.close();
    }
  });
});

/** `inner`, whose transactions fail any read of a key that mentions `failing.text` (while it is set) with `failing.error()`. */
function failingOnKey(inner: Engine): Engine & { failing: { text: string | null; error: () => Error } } {
  const failing: { text: string | null; error: () => Error } = { text: null, error: () => new Error("disk on fire") };
  const hit = (key: unknown) => failing.text !== null && JSON.stringify(key).includes(failing.text);
  return {
    durable: inner.durable,
    ...(inner.localReads === undefined ? {} : { localReads: inner.localReads }),
    failing,
    close: () => inner.close(),
    transact: (mode, fn, options) =>
      inner.transact(
        mode,
        (tx) => {
          const wrapped: EngineTransaction = {
            get: async (key) => {
              if (hit(key)) throw failing.error();
              return tx.get(key);
            },
            put: (key, value) => tx.put(key, value),
            delete: (key) => tx.delete(key),
            scan: async (range, scanOptions) => {
              if (hit(range)) throw failing.error();
              return tx.scan(range, scanOptions);
            },
            ...(tx.deleteRange ? { deleteRange: (range: Parameters<NonNullable<EngineTransaction["deleteRange"]>>[0]) => tx.deleteRange!(range) } : {}),
          };
          return fn(wrapped);
        },
        options,
      ),
  };
}

describe("ackBatch over an engine that fails on one delivery's key", () => {
  it.each([
    ["an engine error", () => new Error("disk on fire")],
    ["a BackendError from the engine", () => new BackendError("disk on fire")],
  ])("rejects the whole call with code backend and acknowledges none of the batch (%s)", async (_label, error) => {
    const t0 = 1_700_000_000_000;
    const time = virtualClock(t0);
    const engine = failingOnKey(memoryEngine());
    try {
      const journal = createJournal(engine, { name: "usage", clock: time.clock });
      const billing = parseConsumerId("billing");
      const events = [1, 2, 3].map((n) => createUsageEvent({ record: { requestId: newRequestId(t0 + n), namespace: "acme", subject: `user-${n}`, data: { n } }, observedAt: t0 }));
      await journal.appendBatch(events);
      const ids = (await journal.claim(billing, { maxEvents: 10, leaseMs: 1000, now: t0 })).map((delivery) => delivery.id);
      expect(ids).toHaveLength(3);
      const before = await journal.stats(billing);
      expect(before).toMatchObject({ pending: 0, inFlight: 3 });

      engine.failing.error = error;
      engine.failing.text = events[1]!.id; // the second delivery's reads fail
      await expect(journal.ackBatch(ids)).rejects.toMatchObject({ code: "backend" });
      engine.failing.text = null;

      expect(await journal.stats(billing)).toEqual(before);
      for (const event of events) expect((await journal.attempts(billing, event.id)).map((attempt) => attempt.outcome)).toEqual([null]);
      expect(await journal.ackBatch(ids)).toEqual([{ ok: true }, { ok: true }, { ok: true }]);
      expect(await journal.stats(billing)).toMatchObject({ pending: 0, inFlight: 0 });
    } finally {
      await engine.close();
    }
  });
});
