/**
 * The journal conformance suite against `PartitionedJournal` over real
 * `JournalPartition` objects, through Workers RPC.
 *
 * Each subject is a journal named as the suite asks, in a scope of its own
 * (`scope` prefixes the partitions' object names), so every subject starts
 * on fresh objects. The suite's virtual clock is the PartitionedJournal's
 * clock: its reading travels with every RPC call and is the partitions'
 * journal clock. "Reopen" is a new PartitionedJournal over the same objects
 * (a new worker instance).
 */
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { PartitionedJournal } from "../../adapters/durable-objects/index.js";
import type { Capacity } from "../../src/index.js";
import { journalConformanceCases, type JournalSubjectFactory, soakRequested } from "../../src/testing/index.js";

let scopes = 0;

function factory(partitions: number): JournalSubjectFactory {
  return async (options) => {
    const scope = `conformance-p${partitions}-${scopes++}/`;
    // A caller sends its capacity with every call: reopening under other bounds is a new caller's.
    const open = (changed?: { readonly capacity?: Capacity }) => new PartitionedJournal(env.PARTITIONS, { ...options, ...changed, partitions, scope });
    return { journal: open(), reopen: async (changed) => open(changed), close: async () => {} };
  };
}

describe("partitioned journal, P = 1", () => {
  for (const c of journalConformanceCases({ label: "partitioned P=1", durable: true, canReopen: true, canChangeCapacity: true, runs: soakRequested() ? 300 : 60, createSubject: factory(1) })) {
    it(c.name, c.run, c.timeoutMs);
  }
});

/**
 * With P = 4 the suite's example cases run too, except those whose expected
 * values depend on what a partitioned journal does per partition by design
 * (see `adapters/durable-objects/partitioned-journal.ts`, "Where P > 1
 * differs"). The model-based case is one of them: the reference model
 * numbers positions, audit entries and capacity journal-wide; its
 * partition-aware counterpart (P reference models behind the same routing) is
 * `partitioned-model.test.ts`. Per-key order, one in flight per key, "nothing
 * accepted is lost" and request-id conflicts across partitions are checked in
 * `partitioned.test.ts`.
 */
const PER_PARTITION_BY_DESIGN: Record<string, string> = {
  "random operation sequences agree with the reference model": "positions, audit seq and capacity are per partition",
  "extend keeps a long delivery leased; a stale attempt cannot extend": "a claim of 1 takes from the partition whose turn it is, not the first position",
  "operator actions are in the audit log": "audit seq is per partition",
  "listQuarantined pages with cursors and filters by request id, ordering key and reason": "positions and cursors are per partition",
  "listQuarantined lists newest first on request, with cursors of its own": "positions and cursors are per partition",
  "refuse: a full journal refuses with at_capacity and journals nothing": "capacity is per partition",
  "a full journal reclaims delivered events inside their window before refusing": "capacity and positions are per partition",
  "drop_oldest drops the oldest unacknowledged event and counts dropped": "capacity and positions are per partition",
  "drop_oldest drops the event waiting longest in the journal (appended first), whatever its observedAt": "capacity and positions are per partition",
  "drop_oldest never drops a quarantined event; an all-poison journal refuses": "capacity and positions are per partition",
  "drop_oldest drops the oldest event even in flight; its key waits until that lease would have run out": "capacity and positions are per partition",
  "drop_oldest's hold on a key outlasts later drops of its events and the key running empty": "capacity and positions are per partition",
  "prune with a limit forgets the events observed first": "prune visits partitions in turn",
  "appending and claiming prune at most 8 finished events on the way, once per batch": "opportunistic pruning is per partition",
  "a new consumer sees the whole retained backlog as its own depth": "claim order across partitions is by observedAt",
  "the oldest pending age is that of the event observed earliest: a late replay counts from when it happened": "claim order across partitions is by observedAt",
  "appendBatch is per-event: a bad event is rejected, the rest accepted": "capacity and positions are per partition",
  "a new journal over the same storage continues where the old one stopped": "positions are per partition",
  "maxBytes: a claim stops before the delivery that would take it over the bound, and always returns the first":
    "maxBytes is split over the partitions like maxEvents, and each partition's call returns its first delivery: the example's four events are in four partitions, so its first claim returns all four (over maxBytes by at most one delivery per partition, by design; partitioned.test.ts checks the split)",
  "after its window an event's key is forgotten, however far pruning came: another record under its id is not a conflict":
    "the journal-wide id registry keeps an id for ID_SETTLE_MS after its event leaves a partition (docs/journal-semantics.md)",
};

describe("partitioned journal, P = 4 (the examples that do not depend on journal-wide numbering)", () => {
  const cases = journalConformanceCases({ label: "partitioned P=4", durable: true, canReopen: true, runs: soakRequested() ? 100 : 1, createSubject: factory(4) });
  for (const c of cases) {
    if (c.name in PER_PARTITION_BY_DESIGN) continue;
    it(c.name, c.run, c.timeoutMs);
  }
  it("excludes only cases the suite still has", () => {
    const names = new Set(cases.map((c) => c.name));
    expect(Object.keys(PER_PARTITION_BY_DESIGN).filter((name) => !names.has(name))).toEqual([]);
  });
});
