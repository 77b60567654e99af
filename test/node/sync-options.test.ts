/**
 * `createForwarder` and `exponentialBackoff` refuse bad options with a typed
 * `InvalidArgumentError` naming the option (or `InvalidConsumerIdError` for
 * the consumer), before anything runs.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import { createJournal, InvalidArgumentError, InvalidConsumerIdError, type UsageJournal } from "../../src/index.js";
import { browserLocks, createForwarder, exponentialBackoff, localLockManager, type ForwarderOptions } from "../../src/sync/index.js";

const source: UsageJournal = createJournal(memoryEngine(), { name: "local" });
const sink: UsageJournal = createJournal(memoryEngine(), { name: "edge" });
/** The source's methods, bound, but `ackBatch`. */
const withoutAckBatch = Object.fromEntries(
  (["claim", "ack", "nack", "quarantine", "extend", "stats", "attempts", "listQuarantined"] as const).map((method) => [method, source[method].bind(source)]),
);
const base: ForwarderOptions = { source, consumer: "edge", sink, scheduler: { setTimeout: () => 0, clearTimeout: () => undefined } };

function refusal(make: () => unknown): { name: string; argument?: string; code?: string } {
  try {
    make();
  } catch (error) {
    return error as { name: string; argument?: string; code?: string };
  }
  throw new Error("expected a refusal");
}

describe("forwarder options", () => {
  const bad: [string, Partial<Record<keyof ForwarderOptions, unknown>>, string][] = [
    ["batchSize 0", { batchSize: 0 }, "batchSize"],
    ["batchSize over the appendBatch limit", { batchSize: 1001 }, "batchSize"],
    ["batchSize not an integer", { batchSize: 2.5 }, "batchSize"],
    ["leaseMs 1 (no room for a heartbeat)", { leaseMs: 1 }, "leaseMs"],
    ["leaseMs over 12 h", { leaseMs: 12 * 60 * 60 * 1000 + 1 }, "leaseMs"],
    ["leaseMs a string", { leaseMs: "30000" }, "leaseMs"],
    ["heartbeatMs not shorter than the lease", { leaseMs: 1000, heartbeatMs: 1000 }, "heartbeatMs"],
    ["sinkTimeoutMs 0", { sinkTimeoutMs: 0 }, "sinkTimeoutMs"],
    ["pollIntervalMs negative", { pollIntervalMs: -1 }, "pollIntervalMs"],
    ["backoff.initialMs 0", { backoff: { initialMs: 0 } }, "backoff.initialMs"],
    ["backoff.maxMs below initialMs", { backoff: { initialMs: 5000, maxMs: 1000 } }, "backoff.maxMs"],
    ["backoff.multiplier below 1", { backoff: { multiplier: 0.5 } }, "backoff.multiplier"],
    ["backoff.jitter above 1", { backoff: { jitter: 2 } }, "backoff.jitter"],
    ["backoff.random not a function", { backoff: { random: 0.5 } }, "backoff.random"],
    ["source without claim", { source: { ...sink, claim: undefined } }, "source"],
    ["source without ackBatch (what the sink holds is acknowledged in one call)", { source: withoutAckBatch }, "source"],
    ["sink without appendBatch", { sink: {} }, "sink"],
    ["clock not a function", { clock: 5 }, "clock"],
    ["scheduler without clearTimeout", { scheduler: { setTimeout: () => 0 } }, "scheduler"],
    ["online without subscribe", { online: { isOnline: () => true } }, "online"],
    ["lock name empty", { lock: { name: "", manager: localLockManager() } }, "lock.name"],
    ["lock name starting with -", { lock: { name: "-x", manager: localLockManager() } }, "lock.name"],
    ["lock manager without request", { lock: { name: "x", manager: {} } }, "lock.manager"],
    ["onListenerError not a function", { onListenerError: "log" }, "onListenerError"],
    ["allowTelemetrySink not a boolean", { allowTelemetrySink: "yes" }, "allowTelemetrySink"],
    ["a telemetry_grade sink for a billing_grade source", { source: { ...withoutAckBatch, ackBatch: source.ackBatch.bind(source), mode: "billing_grade" }, sink: { appendBatch: sink.appendBatch.bind(sink), mode: "telemetry_grade" } }, "sink"],
  ];
  for (const [what, options, argument] of bad) {
    it(`refuses ${what} with InvalidArgumentError(${argument})`, () => {
      const error = refusal(() => createForwarder({ ...base, ...options } as ForwarderOptions));
      expect(error).toBeInstanceOf(InvalidArgumentError);
      expect(error).toMatchObject({ code: "invalid_argument", argument });
    });
  }

  it.skipIf(browserLocks() !== null)("refuses a lock without a manager where there is no navigator.locks", () => {
    expect(refusal(() => createForwarder({ ...base, lock: { name: "x" } }))).toMatchObject({ code: "invalid_argument", argument: "lock.manager" });
  });

  it("takes a telemetry_grade sink for a billing_grade source with allowTelemetrySink: true, and a sink that reports no mode", () => {
    const billingSource = { ...withoutAckBatch, ackBatch: source.ackBatch.bind(source), mode: "billing_grade" } as unknown as UsageJournal;
    const telemetrySink = { appendBatch: sink.appendBatch.bind(sink), mode: "telemetry_grade" as const };
    expect(createForwarder({ ...base, source: billingSource, sink: telemetrySink, allowTelemetrySink: true }).consumer).toBe("edge");
    expect(createForwarder({ ...base, source: billingSource, sink: { appendBatch: sink.appendBatch.bind(sink) } }).consumer).toBe("edge");
    expect(createForwarder({ ...base, source: billingSource, sink: { ...telemetrySink, mode: "billing_grade" } }).consumer).toBe("edge");
  });

  it("refuses a missing options object", () => {
    expect(refusal(() => createForwarder(undefined as unknown as ForwarderOptions))).toMatchObject({ code: "invalid_argument", argument: "options" });
  });

  it("refuses a bad consumer name with InvalidConsumerIdError", () => {
    const error = refusal(() => createForwarder({ ...base, consumer: "Edge Sync" }));
    expect(error).toBeInstanceOf(InvalidConsumerIdError);
    expect(error).toMatchObject({ code: "invalid_consumer_id" });
  });

  it("accepts the defaults and reports a stopped state before start", () => {
    const forwarder = createForwarder(base);
    expect(forwarder.consumer).toBe("edge");
    expect(forwarder.progress).toEqual({
      state: "stopped",
      forwarded: 0,
      quarantined: 0,
      retried: 0,
      batches: 0,
      pending: null,
      quarantinedInSource: null,
      lastError: null,
      nextRetryAt: null,
      consecutiveFailures: 0,
    });
  });

  it("refuses drain({ maxBatches: 0 })", async () => {
    await expect(createForwarder(base).drain({ maxBatches: 0 })).rejects.toMatchObject({ code: "invalid_argument", argument: "maxBatches" });
  });
});

describe("exponentialBackoff options", () => {
  it("refuses a non-object", () => {
    expect(refusal(() => exponentialBackoff(7 as never))).toMatchObject({ code: "invalid_argument", argument: "backoff" });
  });
  it("defaults the cap up to initialMs when only initialMs is given above the default cap", () => {
    expect(exponentialBackoff({ initialMs: 120_000, jitter: 0 }).delayMs(3)).toBe(120_000);
  });
});
