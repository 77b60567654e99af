/**
 * A partition's RPC methods check what they are sent before they read or
 * store anything: `PartitionedJournal` sends well-formed calls, but any
 * caller of the binding (a buggy front Worker, a mismatched deployment) may
 * send anything. A malformed call is refused as `invalid_argument` and
 * changes nothing: in particular the first call to a new object, which
 * stores the journal's configuration, and a reservation, which the id
 * registry stores as given.
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { BILLING_GRADE, newRequestId } from "../../src/index.js";
import type { JournalPartition } from "../../adapters/durable-objects/index.js";

const T0 = 1_700_000_000_000;
const good = { journal: "usage", partitions: 4, partition: 0, capacity: BILLING_GRADE };
let objects = 0;

/** A new partition object (no configuration stored yet), typed loosely: the calls below send what the types forbid. */
function fresh(): Record<string, (...args: unknown[]) => Promise<{ ok: boolean; value?: unknown; error?: { code: string; fields: Record<string, unknown> } }>> {
  const stub: DurableObjectStub<JournalPartition> = env.PARTITIONS.get(env.PARTITIONS.idFromName(`partition-arguments-${objects++}`));
  return stub as unknown as ReturnType<typeof fresh>;
}

describe("a partition's RPC arguments", () => {
  it("a malformed configuration is refused and not stored: the next correct call opens the object", async () => {
    const bad: [string, unknown][] = [
      ["name", { ...good, journal: "Bad Name!" }],
      ["partitions", { ...good, partitions: "4" }],
      ["partitions", { ...good, partitions: 0 }],
      ["partitions", { ...good, partitions: Number.NaN }],
      ["partitions", { ...good, partitions: 257 }],
      ["partition", { ...good, partition: 9 }],
      ["partition", { ...good, partition: -1 }],
      ["capacity", { ...good, capacity: "x" }],
      ["config", null],
      ["config", "usage"],
    ];
    for (const [argument, config] of bad) {
      const partition = fresh();
      const refused = await partition["hello"]!(config);
      expect(refused, JSON.stringify(config)).toMatchObject({ ok: false, error: { code: "invalid_argument", fields: { argument } } });
      expect(await partition["hello"]!(good), JSON.stringify(config)).toEqual({ ok: true, value: undefined });
    }
  });

  it("a reservation with fields the registry cannot keep is refused, and the correct one for the same id is reserved", async () => {
    const partition = fresh();
    const requestId = newRequestId(T0);
    const item = { requestId, namespace: "ns", subject: "s", fact: "f".repeat(64), observedAt: T0 };
    const bad: [string, unknown][] = [
      ["namespace", { ...item, namespace: { x: 1 } }],
      ["namespace", { ...item, namespace: "" }],
      ["subject", { ...item, subject: ["s"] }],
      ["subject", { ...item, subject: "s".repeat(257) }],
      ["fact", { ...item, fact: null }],
      ["fact", { ...item, fact: "" }],
      ["observedAt", { ...item, observedAt: 8.64e17 }],
      ["observedAt", { ...item, observedAt: Number.NaN }],
      ["observedAt", { ...item, observedAt: "1700000000000" }],
    ];
    for (const [argument, sent] of bad) {
      expect(await partition["reserve"]!(good, T0, [sent]), JSON.stringify(sent)).toMatchObject({ ok: false, error: { code: "invalid_argument", fields: { argument } } });
    }
    expect(await partition["reserve"]!(good, T0 + 1000, [item])).toMatchObject({ ok: true, value: { results: [{ status: "reserved" }] } });
  });

  it("lookups take strings and verdicts take a revision and a boolean", async () => {
    const partition = fresh();
    for (const requestId of [123, { a: 1 }, null]) {
      expect(await partition["holds"]!(good, requestId)).toMatchObject({ ok: false, error: { code: "invalid_argument", fields: { argument: "requestId" } } });
    }
    expect(await partition["holdsMany"]!(good, [newRequestId(T0), null])).toMatchObject({ ok: false, error: { code: "invalid_argument", fields: { argument: "requestId" } } });
    expect(await partition["holds"]!(good, "not a request id")).toEqual({ ok: true, value: false });
    const requestId = newRequestId(T0);
    for (const [argument, verdict] of [
      ["rev", { requestId, rev: "1", held: false }],
      ["held", { requestId, rev: 1, held: "false" }],
    ] as const) {
      expect(await partition["settleRegistry"]!(good, T0, [verdict])).toMatchObject({ ok: false, error: { code: "invalid_argument", fields: { argument } } });
    }
    expect(await partition["settleRegistry"]!(good, T0, [{ requestId, rev: 1, held: false }])).toEqual({ ok: true, value: { forgotten: 0 } });
  });
});
