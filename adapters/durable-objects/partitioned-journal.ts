/**
 * `PartitionedJournal`: a `UsageJournal` spread over P `JournalPartition`
 * Durable Objects, reached through their namespace binding.
 *
 * Who writes what: the ordering key `namespace/subject` hashes to one
 * partition (`./hash.ts`: FNV-1a 32 of the key text, modulo P), and partition
 * p of journal `name` is the object `idFromName(scope + name + "#" + p)`. A
 * key's events therefore have exactly one writer, and its order is that
 * object's order. P is fixed when the journal is created: every partition
 * stores it, and before its first call a `PartitionedJournal` with P > 1 checks
 * it with partition 0, so opening a journal with another P is refused
 * (`InvalidArgumentError`, argument `partitions`) before anything is written.
 *
 * How each call is routed:
 * - `append` first reserves its request id at the id's *home* partition
 *   (`idHomeOf`: FNV-1a 32 of the request id, modulo P; part of the stored
 *   format like the key hash), then goes to its key's partition. The home
 *   keeps an id registry beside its journal (see "Request ids across
 *   partitions" below and `./partition.ts`). `appendBatch` is validated here
 *   (an invalid event is rejected in place), reserved per home (one call per
 *   home, concurrently, each in input order; an event refused there is
 *   `rejected` with the `EventConflictError` and not sent on), then split per
 *   key partition and sent concurrently; each partition's share is one
 *   transaction, or, when it could pass the RPC limit, a few in turn (slices
 *   of at most `RPC_BUDGET_BYTES`, 24 MiB, by a bound of each event's
 *   serialized size, `eventBytesAtMost`), and the results come back in the
 *   order of the input. If one partition fails, the batch rejects although
 *   other partitions (or earlier slices) may have stored their share:
 *   retrying the batch is safe, since appends are idempotent on the request
 *   id (and a reservation of the same fact is too).
 * - `claim` first registers the consumer in every partition not yet known to
 *   have it (`register`, concurrently, each partition pruning first as the
 *   consumer's first claim there would; known pairs are remembered, see
 *   `PartitionedJournalMemory`), before anything is leased: a consumer is
 *   registered everywhere from its first claim on, as a single journal
 *   registers it for its whole backlog, so no partition prunes an event it
 *   has not seen, even one whose claim call fails. (Over a large backlog a
 *   partition registers it over several calls, as a single journal does
 *   over several claims: the next claim goes on.) If a registration fails,
 *   the claim rejects with nothing leased. Then it fans out in rounds: what
 *   is left of `maxEvents` is split evenly over the partitions that may still
 *   have events, the remainder going to partitions from a start that rotates
 *   with every claim of the consumer (kept with the registrations, so
 *   instances sharing a memory, one per request, rotate together: with
 *   `maxEvents < P` every partition still gets its turn); a partition that
 *   hands out less than its share leaves the rounds. When less is left than
 *   there are partitions (an even split would pass some over), the
 *   partitions are first asked, concurrently and read-only, how many events
 *   a claim could lease there at most (`claimable`: ready events plus leases
 *   and waits due at the claim's `now`); those with none leave, and no share
 *   exceeds that bound. So a claim of 1 over P idle partitions is one round
 *   of P reads, not P rounds of claims; an event that becomes ready in a
 *   partition after its answer waits for the next claim. At most `maxEvents`
 *   events in all; each round fills the claim or drops a partition. A
 *   `maxBytes` is split the same way: in each round, a partition's share of
 *   the bytes left is `max(1, floor(bytesLeft x share / eventsLeft))` (so the
 *   shares add up to at most the bytes left, but for that 1-byte floor);
 *   the bytes left go down by the size (`deliveryBytes`) of what came back,
 *   and no round starts once they are 0 or less. A partition that hands out
 *   less than its share of events (stopped by its bytes, or out of events)
 *   leaves the rounds, as above. A call goes over its share of the bytes
 *   only with its first delivery, alone (a claim always returns its first),
 *   and the bytes left absorb it: every round but the last ends with bytes
 *   left, and the last one's calls stay within them but for one such
 *   delivery each. So a claim weighs at most `maxBytes` plus one delivery
 *   per partition asked in its last round. Without `maxBytes` nothing of
 *   this runs (no byte counted, the same RPCs and shares). A share is claimed in
 *   RPCs of at most `CLAIM_RPC_EVENTS` (125) deliveries, one after the
 *   other, until the share is leased, its bytes are spent or an RPC hands
 *   out less than it asked (a reply of 125 of the largest events fits the
 *   32 MiB RPC limit; the leases are taken before a reply is serialized, so
 *   a reply over it would lease events nobody receives); each is a claim at
 *   the same `now` with what is left of the share's bytes as its `maxBytes`,
 *   and a later one leases nothing when its first delivery would go over
 *   (it says it continues a claim, see `./partition.ts`), so together they
 *   lease what one claim of the share would, in its order. With P = 1,
 *   `claim` is exactly that: one share of `maxEvents` and `maxBytes`.
 *   One in flight per key holds because a key lives in one partition. When
 *   a partition fails during a claim that got deliveries elsewhere (or from
 *   its own earlier RPCs), those deliveries are returned and the failure
 *   goes to `onIgnoredError`; with no delivery at all, the claim rejects.
 *   The result is merged by `observedAt` (then request id, a UUIDv7 that
 *   sorts by minting time), keeping each partition's order.
 * - A `DeliveryId` (`consumer`, `event`, `attempt`) does not name a key, so
 *   `ack`, `nack`, `extend`, `quarantine`, `release`, `discard` and
 *   `attempts` go to the partition that stores the request id: first the
 *   partition this instance saw the event in (an in-memory hint filled by
 *   `append`, `appendBatch`, `claim` and lookups, at most 10,000 ids, the
 *   oldest evicted first); when there is no hint, or the hinted partition
 *   refuses the delivery as `not_outstanding` without saying that it stores
 *   the event ("the event is not journaled"; an expired lease, an old
 *   attempt or a discarded event is its answer, given as is: see
 *   `mayBeElsewhere`), every partition is asked whether it stores the id
 *   (`holds`, read-only, concurrent) and the call goes to the one that does.
 *   An id is stored in at most one partition, so the partition that says so
 *   settles the route even when others fail to answer; only when none says
 *   so and one failed does the call fail, with that partition's error (a
 *   `BackendError`, `retryable` as the platform said). A delivery
 *   whose event no partition stores is `not_outstanding` (`not_quarantined`
 *   for operator actions, `[]` for `attempts`). `ackBatch` reads the hints of
 *   its deliveries once, before it awaits anything, and routes by that copy
 *   (other calls may evict hints meanwhile), locates the rest with
 *   `holdsMany`, and answers per delivery: one it cannot locate because a
 *   partition failed, or whose partition's ack call failed, gets that error
 *   in place, the others are acked. No routing record is stored, so any
 *   worker instance can route any delivery.
 * - `stats` sums the partitions' depths (pending, in flight, quarantined,
 *   dropped) and takes the largest `oldestPendingAgeMs`, but its `capacity`
 *   is not summed: it is each partition's (as `journal.capacity` is), so the
 *   journal as a whole holds up to P x `maxEvents`, and `pending` may exceed
 *   `capacity.maxEvents` without any partition being full (nor does
 *   `pending` below it mean a key's partition has room).
 * - `listQuarantined` and `listAudit` merge the partitions' pages: each
 *   partition's items in its own order (position, descending for
 *   `order: "newest"`; audit `seq`), the partitions interleaved by
 *   `event.observedAt` then request id (the order of claims; newest first
 *   for `order: "newest"`) and by `at` for the audit log. So a page is in
 *   `observedAt` (`at`) order across the journal as long as each partition's
 *   order agrees with it; a late replay stays at its position in its
 *   partition (see `listQuarantined`). Each partition is asked for a share of
 *   the page (about 1.5 x `limit` / P), and again, for twice as much, only
 *   when the merge took all it gave and it has more, so a page reads about
 *   1.5 x `limit` + 2P items (at most P x that share + 2 x `limit`), not
 *   P x `limit`, and is still full unless the listing ended. Cursors carry
 *   one position per partition (`"qp1.p0.p1..."`, `"qpn1...."` for newest
 *   first, `"ap1.s0.s1..."`). No quarantine ask is for more than
 *   `QUARANTINE_RPC_ITEMS` (74) items, so that a reply of the largest items
 *   (event and 32 attempts with the longest errors) fits the RPC limit; a
 *   share over it is read in several asks (with P = 1, the page is read in
 *   such asks, each from the cursor the previous one returned). Audit
 *   entries are small: a page of 1000 is one ask.
 * - `prune` visits the partitions in turn until `limit` is used up, from a
 *   start that rotates with every prune (kept with the claim rotations, see
 *   `PartitionedJournalMemory`: with a small `limit`, a busy partition 0
 *   does not take every prune), then verifies up to 256 due registry entries
 *   per partition (below).
 *
 * Request ids across partitions (P > 1). A request id is one event in the
 * whole journal, as in a single journal: appending an id the journal holds
 * under a different record (another ordering key, so maybe another
 * partition, or other data) is `EventConflictError` and changes nothing; the
 * same record again is `already_present` (answered by the key partition). The
 * id home's registry holds, per reserved id, the ordering key, a SHA-256 of
 * the canonical fact (`[namespace, subject, data]`), `observedAt`, when it
 * was last reserved (`reservedAt`), a revision and when it is next due for
 * verification. Reserving an unknown id records it; the same fact refreshes
 * it (`reservedAt`, revision); another fact is a conflict. A crash between
 * the reservation and the append is safe: the retry finds its own fact and
 * goes on.
 *
 * When the registry forgets an id (the exact rule): an entry is forgotten
 * only when (1) it is *settled*, `reservedAt + ID_SETTLE_MS <= now` (5
 * minutes on the journal's clock: an append sent under a reservation is
 * assumed to reach its key partition within that time or never), and (2) the
 * ordering key's partition answers that it does not store the id (`holdsMany`),
 * and (3) the entry was not reserved again in between (its revision is
 * unchanged). Entries are verified when they are due, first at
 * `max(observedAt + retainAcknowledgedMs, reservedAt + ID_SETTLE_MS)` (an
 * event cannot be pruned earlier) and, while the event is still stored,
 * every `max(retainAcknowledgedMs, ID_SETTLE_MS)` after: by `prune` (up to
 * 256 per partition per call), and after an append whose reservation answer
 * listed due entries (up to 8 per home partition; failures go to
 * `onIgnoredError`). Those entries are other events', so the append, once
 * stored, waits for their verification at most `APPEND_VERIFY_WAIT_MS`
 * (250 ms) and then answers, the verification going on in the background (a
 * slow key partition of an unrelated entry does not slow the append). A
 * Worker may cut that background work off when its request ends; that is
 * safe: an entry not settled stays due, and a later append to its home or
 * `prune` verifies it. A conflict with a settled entry is verified on the
 * spot, and when the event is gone the entry is taken over (forgotten and
 * reserved again). A revision is never reused (each home draws them from
 * one counter), so a late verdict about a forgotten entry cannot forget the
 * entry that took its id over. Consequences:
 * - the registry holds about one entry per stored event, plus the ids
 *   appended in the last `max(retainAcknowledgedMs, ID_SETTLE_MS)` or so;
 *   nothing is forgotten while its event is stored (an unacknowledged or
 *   quarantined event keeps its id reserved for as long as it is stored);
 * - within `ID_SETTLE_MS` of its last reservation, an id is a conflict for
 *   any other record even if its event is not stored: after the key
 *   partition refused it (`at_capacity`, a failure) or pruned it. A single
 *   journal would accept the other record there; this one refuses (the
 *   same record still goes through). After that time the answers are a
 *   single journal's;
 * - the rule relies on `ID_SETTLE_MS`: an append RPC delayed longer than
 *   that after its reservation, racing a different record under the same id
 *   that took the reservation over, could store both. Clocks of the
 *   instances must agree to well within `ID_SETTLE_MS`.
 * Cost: an append is two RPCs (home, then key partition) and a SHA-256.
 *
 * Where P > 1 differs from one journal (by design; the P = 4 conformance run
 * lists the examples this excludes, and `partitioned-model.test.ts` checks
 * random sequences against P reference models behind the same routing):
 * positions, audit `seq`, capacity (`maxEvents`, `dropped`) and
 * opportunistic pruning are per partition, and `stats().capacity` (like
 * `journal.capacity`) is the per-partition capacity while the depths beside
 * it are journal-wide sums; claim order across partitions is by
 * `observedAt`, not by one global position; a quarantine listing is each
 * partition's position order interleaved by `observedAt` (not "oldest
 * position first" across the journal: positions collide), the audit log
 * each partition's `seq` order interleaved by `at`; `oldestPendingAgeMs` is
 * the largest partition's (which is the journal's: each partition reports
 * its earliest observed pending event); a request id whose event is no
 * longer stored stays reserved for its record up to `ID_SETTLE_MS` (above);
 * a claim's `maxBytes` is split over the partitions with its events (see
 * `claim` above), so a claim may return fewer deliveries than one journal
 * would (a partition stops at its share of the bytes while another had room
 * left), and may go over `maxBytes`, by at most one delivery per partition
 * (a call goes over its share only with its first delivery, alone, and only
 * those of the last round are not absorbed by the bytes left; see `claim`
 * above): the answer weighs at most `maxBytes` plus its P largest
 * deliveries. With P = 1 every call is forwarded unchanged (no registry), so
 * the journal behaves exactly like `createJournal` (the full conformance
 * suite checks this; a claim is within `maxBytes` unless it is a single
 * delivery), except that a claim or a quarantine page too large for one RPC
 * is read in several (the same deliveries and items, see above), and
 * that an `appendBatch`, one
 * transaction and so one RPC, must serialize within 32 MiB (else it fails
 * with a `BackendError` and stores nothing): about 200 of the largest
 * events do.
 *
 * Time: every call sends this instance's clock reading (`options.clock`,
 * default `Date.now`) to the partition, which uses it as its journal's clock.
 *
 * Failures: an RPC call that throws (object overloaded, reset, network)
 * becomes a `BackendError` with the platform error (as a
 * `DurableObjectEngineError`) as `cause` and its `retryable`; the stub is
 * dropped and recreated on the next call.
 */
import { BackendError, EventConflictError, InvalidArgumentError, JournalError, NotOutstandingError, NotQuarantinedError } from "../../src/journal/errors.js";
import {
  BILLING_GRADE,
  canonicalJson,
  checkCapacity,
  checkDeliveryId,
  checkInteger,
  checkJournalName,
  checkUsageEvent,
  MAX_ORDERING_PART_LENGTH,
  MAX_RECORD_DATA_CHARS,
  parseConsumerId,
} from "../../src/journal/event.js";
import type {
  AppendResult,
  Attempt,
  AuditEntry,
  AuditPage,
  ListAuditOptions,
  BatchAppendResult,
  Capacity,
  ClaimOptions,
  ConsumerId,
  Delivery,
  DeliveryId,
  DeliveryMode,
  ExtendOptions,
  JournalStats,
  ListQuarantinedOptions,
  NackOptions,
  OperatorActionOptions,
  PoisonReason,
  PruneOptions,
  QuarantinedEvent,
  QuarantinePage,
  UsageEvent,
  UsageJournal,
  AckResult,
} from "../../src/journal/types.js";
import {
  checkAckBatch,
  checkAttempts,
  checkBatch,
  checkClaim,
  checkExtend,
  checkListAudit,
  checkListQuarantined,
  checkNack,
  checkOperatorAction,
  checkPrune,
  checkQuarantine,
  deliveryBytes,
  MAX_KEPT_ATTEMPTS,
} from "../../src/journal/arguments.js";
import { waitOutMarks } from "../../src/cause-chain.js";
import { backendError } from "./errors.js";
import { fnv1a32, partitionOf } from "./hash.js";
import type { DueEntry, IdReservation, PartitionConfig, RegistryVerdict, ReserveAnswer } from "./partition.js";
import { decodeAcks, decodeBatch, decodeError, type WireAckResult, type WireBatchResult, type WireOutcome } from "./wire.js";

/** The largest P. */
export const MAX_PARTITIONS = 256;
/** How many due id-registry entries `prune` verifies per partition and call. */
const REGISTRY_PRUNE_SCAN = 256;

/**
 * How long (ms, real time) an append waits for the opportunistic verification
 * of due registry entries its reservation answer listed before it answers; the
 * verification goes on in the background after that (see `verifyQuietly`).
 */
export const APPEND_VERIFY_WAIT_MS = 250;

/** The most ids one `holdsMany` or `settleRegistry` call carries (what a partition accepts). */
const REGISTRY_CALL_MAX = 1000;

/**
 * The most bytes one RPC between a `PartitionedJournal` and a partition is
 * meant to carry each way. Workers RPC refuses to serialize an argument list
 * or a return value over 32 MiB; this budget leaves a quarter of that spare.
 * A claim or a listing whose reply would not fit is asked for in several
 * RPCs, each small enough in the worst case ({@link CLAIM_RPC_EVENTS},
 * {@link QUARANTINE_RPC_ITEMS}), and an `appendBatch` share is sent in
 * slices measured against it ({@link eventBytesAtMost}).
 */
export const RPC_BUDGET_BYTES = 24 * 1024 * 1024;
/**
 * Serialized bytes per character of an event's `data` (its canonical JSON),
 * at most. Structured clone stores a string that is not Latin-1 at 2 bytes
 * per UTF-16 unit, a number that is not a small integer at 9 bytes (at least
 * 3 characters and a separator in JSON) and a nested array at 5 bytes for
 * its 2 brackets; measured, no shape of `data` passes 2.5. 3 leaves a margin.
 */
const DATA_BYTES_PER_CHAR = 3;
/** Serialized bytes per UTF-16 unit of a string, at most (2 when any unit is not Latin-1). */
const STRING_BYTES_PER_UNIT = 2;
/** An event's fixed part (its ids, field names, tags, `observedAt`), at most: measured about 200 bytes. */
const EVENT_FIXED_BYTES = 1024;
/** What a delivery or a quarantined event adds around its event (consumer, ids, numbers, reason), at most. */
const ITEM_FIXED_BYTES = 1024;
/** The longest nack `error` an attempt keeps (what `nack` accepts; characters). */
const MAX_NACK_ERROR_CHARS = 2000;
/** One kept attempt (numbers, outcome, nack error), at most. */
const ATTEMPT_BYTES = STRING_BYTES_PER_UNIT * MAX_NACK_ERROR_CHARS + 256;

/**
 * An upper bound of the bytes a checked event takes in a structured-clone
 * serialization (an RPC argument or reply): its namespace and subject appear
 * twice (ordering key and record), its `data` is bounded through the length
 * of its JSON. `event` must be checked (`checkUsageEvent`): its `data` is
 * then parsed canonical JSON.
 */
export function eventBytesAtMost(event: UsageEvent): number {
  const { namespace, subject, data } = event.record;
  return DATA_BYTES_PER_CHAR * JSON.stringify(data).length + 2 * STRING_BYTES_PER_UNIT * (namespace.length + subject.length) + EVENT_FIXED_BYTES;
}

/** The largest event any journal accepts, in serialized bytes at most (from the limits of `src/journal/event.ts`). */
const MAX_EVENT_BYTES = DATA_BYTES_PER_CHAR * MAX_RECORD_DATA_CHARS + 2 * STRING_BYTES_PER_UNIT * 2 * MAX_ORDERING_PART_LENGTH + EVENT_FIXED_BYTES;

/**
 * The most deliveries one `claim` RPC asks a partition for (and a partition
 * hands out in one reply): as many of the largest deliveries as fit
 * {@link RPC_BUDGET_BYTES} (125). A claim for more is made in several RPCs.
 */
export const CLAIM_RPC_EVENTS = Math.floor(RPC_BUDGET_BYTES / (MAX_EVENT_BYTES + ITEM_FIXED_BYTES));

/**
 * The most quarantined events one `listQuarantined` RPC asks a partition for
 * (and a partition lists in one reply): as many of the largest items (the
 * largest event and `MAX_KEPT_ATTEMPTS` attempts with the longest nack
 * errors) as fit {@link RPC_BUDGET_BYTES} (74). A longer page is read in
 * several RPCs.
 */
export const QUARANTINE_RPC_ITEMS = Math.floor(RPC_BUDGET_BYTES / (MAX_EVENT_BYTES + ITEM_FIXED_BYTES + MAX_KEPT_ATTEMPTS * ATTEMPT_BYTES));

/**
 * Consecutive slices of `items` whose bounds (`bytesOf`) add up to at most
 * `budget` each (an item over `budget` alone is a slice of its own), in order.
 */
function byteSlices<T>(items: readonly T[], bytesOf: (item: T) => number, budget: number): T[][] {
  const out: T[][] = [];
  let slice: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const size = bytesOf(item);
    if (slice.length > 0 && bytes + size > budget) {
      out.push(slice);
      slice = [];
      bytes = 0;
    }
    slice.push(item);
    bytes += size;
  }
  if (slice.length > 0) out.push(slice);
  return out;
}

/** `items` in consecutive slices of at most `size`. */
function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** Group `items` by `keyOf`, keeping their order within each group. */
function groupBy<T>(items: readonly T[], keyOf: (item: T) => number): Map<number, T[]> {
  const groups = new Map<number, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    let group = groups.get(key);
    if (group === undefined) groups.set(key, (group = []));
    group.push(item);
  }
  return groups;
}

const encoder = new TextEncoder();

/**
 * What the id home is told about an event: its ordering key, `observedAt`,
 * and the SHA-256 (hex) of the canonical JSON of `[namespace, subject, data]`,
 * which is equal exactly when `isSameFact` is true.
 */
async function reservationOf(event: UsageEvent): Promise<IdReservation> {
  const { namespace, subject, data } = event.record;
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(canonicalJson([namespace, subject, data]))));
  let fact = "";
  for (const byte of digest) fact += byte.toString(16).padStart(2, "0");
  return { requestId: event.id, namespace, subject, fact, observedAt: event.observedAt };
}
/** How many request id -> partition hints an instance keeps. */
const HINTS = 10_000;

/**
 * Whether a partition's refusal of a delivery leaves open that another
 * partition stores its event: a `not_outstanding` whose journal did not find
 * the event stored (`NotOutstandingError.eventStored`, carried over the wire;
 * false from a partition that predates it, so the delivery is then looked
 * up, as before). An expired lease, an older attempt, a discarded event are
 * answered where the event is, and no other partition can answer otherwise.
 */
function mayBeElsewhere(error: unknown): boolean {
  return error instanceof NotOutstandingError && !error.eventStored;
}

/** `error` as a journal error: what `send` throws already is one; anything else becomes a `BackendError` around it. */
function asJournalError(error: unknown): JournalError {
  return error instanceof JournalError ? error : new BackendError(error instanceof Error ? error.message : String(error), { cause: error });
}

/** The RPC surface of a `JournalPartition` stub, as this module calls it. */
export interface PartitionStub {
  hello(config: PartitionConfig): Promise<WireOutcome<void>>;
  append(config: PartitionConfig, now: number, event: UsageEvent): Promise<WireOutcome<AppendResult>>;
  appendBatch(config: PartitionConfig, now: number, events: readonly UsageEvent[]): Promise<WireOutcome<WireBatchResult[]>>;
  claim(config: PartitionConfig, now: number, consumer: ConsumerId, options: ClaimOptions, continued?: boolean): Promise<WireOutcome<Delivery[]>>;
  ack(config: PartitionConfig, now: number, delivery: DeliveryId): Promise<WireOutcome<void>>;
  ackBatch(config: PartitionConfig, now: number, deliveries: readonly DeliveryId[]): Promise<WireOutcome<WireAckResult[]>>;
  quarantine(config: PartitionConfig, now: number, delivery: DeliveryId, reason: PoisonReason): Promise<WireOutcome<void>>;
  extend(config: PartitionConfig, now: number, delivery: DeliveryId, options: ExtendOptions): Promise<WireOutcome<{ leaseExpiresAt: number }>>;
  nack(config: PartitionConfig, now: number, delivery: DeliveryId, options: NackOptions): Promise<WireOutcome<void>>;
  stats(config: PartitionConfig, now: number, consumer: ConsumerId): Promise<WireOutcome<JournalStats>>;
  attempts(config: PartitionConfig, now: number, consumer: ConsumerId, requestId: string): Promise<WireOutcome<Attempt[]>>;
  listQuarantined(config: PartitionConfig, now: number, consumer: ConsumerId, options: ListQuarantinedOptions): Promise<WireOutcome<QuarantinePage>>;
  release(config: PartitionConfig, now: number, consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<WireOutcome<void>>;
  discard(config: PartitionConfig, now: number, consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<WireOutcome<void>>;
  listAudit(config: PartitionConfig, now: number, options: ListAuditOptions): Promise<WireOutcome<AuditPage>>;
  prune(config: PartitionConfig, now: number, options: PruneOptions): Promise<WireOutcome<{ pruned: number }>>;
  /** Whether the consumer is registered now (true); an older partition answers nothing (it registers in one call). */
  register(config: PartitionConfig, consumer: ConsumerId, now?: number): Promise<WireOutcome<boolean | undefined>>;
  claimable(config: PartitionConfig, consumer: ConsumerId, now: number, limit: number): Promise<WireOutcome<number>>;
  holds(config: PartitionConfig, requestId: string): Promise<WireOutcome<boolean>>;
  holdsMany(config: PartitionConfig, requestIds: readonly string[]): Promise<WireOutcome<boolean[]>>;
  reserve(config: PartitionConfig, now: number, items: readonly IdReservation[]): Promise<WireOutcome<ReserveAnswer>>;
  registryDue(config: PartitionConfig, now: number, limit: number): Promise<WireOutcome<DueEntry[]>>;
  settleRegistry(config: PartitionConfig, now: number, verdicts: readonly RegistryVerdict[]): Promise<WireOutcome<{ forgotten: number }>>;
}

/** The narrow part of a `DurableObjectNamespace` binding used here (pass `env.YOUR_BINDING`). */
export interface PartitionNamespace {
  idFromName(name: string): unknown;
  get(id: never): unknown;
}

/** What instances of one journal learn and may share (never platform objects: those belong to one request). */
interface LearnedState {
  /** Partition 0 confirmed P. */
  checkedP: boolean;
  /** Request id -> partition (at most 10,000, oldest forgotten first). */
  readonly hints: Map<string, number>;
  /** `consumer#partition` registrations already made. */
  readonly registered: Set<string>;
  /** Consumer -> the partition its next claim starts its fan-out from. */
  readonly rotations: Map<string, number>;
  /** The partition the next `prune` starts from. */
  pruneStart: number;
}

function newLearnedState(): LearnedState {
  return { checkedP: false, hints: new Map(), registered: new Set(), rotations: new Map(), pruneStart: 0 };
}

/**
 * Memory shared by the `PartitionedJournal` instances of one isolate: a
 * Worker that makes a journal per request (Durable Object stubs may not cross
 * requests) keeps, across requests, what the instances learned: that P was
 * checked (no `hello` call per request), the request id -> partition hints
 * (acks go straight to their partition), the consumers registered (no
 * `register` calls before a claim), where each consumer's next claim
 * starts (without it, every new instance starts at partition 0, and with
 * `maxEvents < P` a busy partition 0 would be served ahead of the others on
 * every request) and where the next `prune` starts (likewise: with a small
 * `limit`, a busy partition 0 would take every prune). Plain data only, so
 * it may outlive any request.
 *
 * One memory serves the journals of ONE binding (one partitions namespace):
 * it tells journals apart by scope, name and P only, so two bindings holding
 * journals of the same scope and name must not share a memory (give each its
 * own, or the journals distinct scopes). Shared, what was learned about one
 * would be taken as true of the other: a consumer registered in one would
 * skip its registration in the other, so the other's events could be pruned
 * before it saw them, and a P checked in one would not be checked in the
 * other.
 *
 * @example
 * const memory = new PartitionedJournalMemory(); // module scope: one per isolate
 * export default {
 *   fetch(request: Request, env: Env) {
 *     const journal = new PartitionedJournal(env.PARTITIONS, { name: "usage", partitions: 4, memory });
 *     // ...
 *   },
 * };
 */
export class PartitionedJournalMemory {
  private readonly states = new Map<string, LearnedState>();
  /** The state of one journal (by scope, name and P). */
  for(journal: string): LearnedState {
    let state = this.states.get(journal);
    if (state === undefined) {
      state = newLearnedState();
      this.states.set(journal, state);
    }
    return state;
  }
}

/** Options of {@link PartitionedJournal}. */
export interface PartitionedJournalOptions {
  /** The journal's name (1..63 of `[a-z0-9_-]`). */
  readonly name: string;
  /** P, 1..256; fixed when the journal is created. */
  readonly partitions: number;
  /** Capacity of EACH partition; defaults to `BILLING_GRADE`. */
  readonly capacity?: Capacity;
  /** The journal's clock (epoch ms); its reading is sent with every call. Defaults to `Date.now`. */
  readonly clock?: () => number;
  /**
   * Prefix of the partitions' object names (default `""`): journals with the
   * same name in different scopes (tenants, test runs) are separate objects.
   */
  readonly scope?: string;
  /**
   * Receives the failure of a partition during a claim that still returned
   * deliveries from other partitions (so they are not lost to the caller
   * until their lease runs out). Defaults to `console.warn`.
   */
  readonly onIgnoredError?: (error: unknown) => void;
  /** Share what instances learn across requests of one isolate (see {@link PartitionedJournalMemory}). */
  readonly memory?: PartitionedJournalMemory;
}

const QUARANTINE_CURSOR = "qp1.";
const QUARANTINE_NEWEST_CURSOR = "qpn1.";
const AUDIT_CURSOR = "ap1.";

/** Parse a merged cursor: one non-negative position per partition. */
function parseCursor(prefix: string, after: string | null | undefined, partitions: number): number[] {
  if (after === undefined || after === null) return new Array<number>(partitions).fill(0);
  const parts = typeof after === "string" && after.startsWith(prefix) ? after.slice(prefix.length).split(".") : [];
  if (parts.length !== partitions || !parts.every((part) => /^(0|[1-9][0-9]{0,15})$/.test(part) && Number.isSafeInteger(Number(part)))) {
    throw new InvalidArgumentError("after", "is not a cursor this journal issued");
  }
  return parts.map(Number);
}

/**
 * Whether event `a` comes before event `b` across partitions: observed
 * earlier, or at the same time with the smaller request id (a UUIDv7 sorts
 * by minting time). The order of merged claims and quarantine listings.
 */
function observedBefore(a: UsageEvent, b: UsageEvent): boolean {
  return a.observedAt < b.observedAt || (a.observedAt === b.observedAt && a.id < b.id);
}

/**
 * Merge per-partition lists, keeping each list's order and taking, at every
 * step, the head that `before` puts first (ties: lower partition).
 */
function mergeHeads<T>(lists: readonly (readonly T[])[], before: (a: T, b: T) => boolean, take: number): { item: T; partition: number }[] {
  const heads = lists.map(() => 0);
  const out: { item: T; partition: number }[] = [];
  while (out.length < take) {
    let best = -1;
    for (let p = 0; p < lists.length; p++) {
      const item = lists[p]![heads[p]!];
      if (item === undefined) continue;
      if (best === -1 || before(item, lists[best]![heads[best]!]!)) best = p;
    }
    if (best === -1) break;
    out.push({ item: lists[best]![heads[best]!]!, partition: best });
    heads[best]! += 1;
  }
  return out;
}

/**
 * How much a merged listing first asks each partition for, for a page of
 * `limit`: the even share `ceil(limit / P)`, half as much again, and one more
 * (at most `limit`). A listing's items are spread over the partitions by the
 * key hash, so a page seldom takes more than this from one partition; one
 * that gives out all it was asked for is asked again (see {@link mergedPage}).
 */
function firstShare(limit: number, partitions: number): number {
  const even = Math.ceil(limit / partitions);
  return Math.min(limit, even + Math.ceil(even / 2) + 1);
}

/**
 * One page of one partition's listing, as a merged listing asks for it: at
 * most `limit` items after the partition's own position / seq `after` (0:
 * from the start), in the partition's order; `nextCursor` null when nothing
 * follows them.
 */
type PartitionPager<T> = (p: number, after: number, limit: number) => Promise<{ readonly items: readonly T[]; readonly nextCursor: string | null }>;

/**
 * One merged page of at most `limit` items from P partitions' cursor pages:
 * each partition's items in its own order from its cursor `after[p]` on, and
 * at every step the head `before` puts first (ties: lower partition), as
 * {@link mergeHeads} merges. `cursorOf` is an item's position / seq in its
 * partition.
 *
 * Why not ask every partition for `limit` and keep `limit`: a page would read
 * P x `limit` items (with P = 64 and `limit` 1000, 64,000 quarantined events
 * with their attempt histories) and paging through N items would cost about
 * N x P. Instead each partition is first asked for {@link firstShare}, all
 * at once. When the merge has taken every item fetched from a partition
 * that has more (its page had a `nextCursor`), that partition's next item
 * might come first, so before going on the merge asks it again, from its
 * last fetched item, for twice its previous ask (at most what the page still
 * lacks); the partitions that ran dry together are asked together. So:
 * - the page is full (`limit` items) unless every partition ran out, as a
 *   single journal's page is; nothing is skipped or repeated, since each
 *   partition is read in its order and resumes after the last item taken;
 * - a page reads at most P x `firstShare` + 2 x `limit` items (a partition
 *   asked again has given out everything it was asked for before, so what
 *   it is asked for in all is at most twice what it gives the page plus its
 *   first ask): with P = 64 and `limit` 1000, at most 1,600 + 2,000 instead
 *   of 64,000; usually one round of calls, a few more when the page comes
 *   from a few partitions.
 *
 * Returns the items, the composite cursor (per partition, the position / seq
 * of the last item taken from it, else `after[p]`) and whether more may
 * follow (a partition has fetched items left or a further page).
 */
async function mergedPage<T>(
  after: readonly number[],
  limit: number,
  fetch: PartitionPager<T>,
  before: (a: T, b: T) => boolean,
  cursorOf: (item: T) => number,
): Promise<{ items: T[]; cursor: number[]; more: boolean }> {
  const partitions = after.length;
  const fetched: (readonly T[])[] = after.map(() => []);
  const heads = after.map(() => 0);
  const fetchedTo = [...after];
  const cursor = [...after];
  const asked = after.map(() => 0);
  // Whether a partition has nothing after what was fetched from it (a page without `nextCursor`).
  const done = after.map(() => false);
  const items: T[] = [];
  while (items.length < limit) {
    const dry = after.flatMap((_, p) => (!done[p] && heads[p] === fetched[p]!.length ? [p] : []));
    if (dry.length > 0) {
      const left = limit - items.length;
      await Promise.all(
        dry.map(async (p) => {
          const share = Math.min(left, asked[p] === 0 ? firstShare(limit, partitions) : 2 * asked[p]!);
          asked[p] = share;
          const page = await fetch(p, fetchedTo[p]!, share);
          fetched[p] = page.items;
          heads[p] = 0;
          const last = page.items[page.items.length - 1];
          if (last !== undefined) fetchedTo[p] = cursorOf(last);
          // An empty page with a cursor would not move on: taken as the end.
          done[p] = page.nextCursor === null || last === undefined;
        }),
      );
      continue;
    }
    let best = -1;
    for (let p = 0; p < partitions; p++) {
      const item = fetched[p]![heads[p]!];
      if (item === undefined) continue;
      if (best === -1 || before(item, fetched[best]![heads[best]!]!)) best = p;
    }
    if (best === -1) break;
    const item = fetched[best]![heads[best]!]!;
    items.push(item);
    cursor[best] = cursorOf(item);
    heads[best]! += 1;
  }
  const more = after.some((_, p) => heads[p]! < fetched[p]!.length || !done[p]);
  return { items, cursor, more };
}

/**
 * A usage journal over P `JournalPartition` objects (see the module comment
 * for routing, merging and where P > 1 differs from a single journal). Its
 * `capacity`, and the `capacity` its `stats` report, is each partition's:
 * `stats` sums the depths over the partitions but not the capacity, so with
 * P > 1 the journal holds up to P x `maxEvents`, and an append meets the
 * capacity policy when its key's own partition is full. Quarantine listings
 * and the audit log are merged in `observedAt` / `at` order partition by
 * partition (see `listQuarantined`). A claim's `maxBytes` is split over the
 * partitions like its `maxEvents`, so with P > 1 a claim may return fewer
 * deliveries than one journal would and may pass `maxBytes` by at most one
 * delivery per partition (see `claim`). A Worker makes one per request; give
 * them a shared {@link PartitionedJournalMemory}, or each starts over (checks
 * P, registers claiming consumers, starts its claims at partition 0).
 *
 * @example
 * ```ts
 * import { PartitionedJournal, PartitionedJournalMemory } from "isostore/durable-objects";
 *
 * const memory = new PartitionedJournalMemory(); // module scope: one per isolate
 * export default {
 *   async fetch(request: Request, env: { PARTITIONS: DurableObjectNamespace }) {
 *     const journal = new PartitionedJournal(env.PARTITIONS, { name: "usage", partitions: 8, memory });
 *     const result = await journal.append(event); // resolves once the owning partition stored it
 *     return Response.json(result);
 *   },
 * };
 * ```
 */
export class PartitionedJournal implements UsageJournal {
  readonly name: string;
  /** The capacity of EACH partition (also what `stats` reports): with P > 1 the journal holds up to P x `maxEvents`. */
  readonly capacity: Capacity;
  /** Durable Object storage outlives the process and an append resolves after the write is durable. */
  readonly mode: DeliveryMode = "billing_grade";
  readonly partitions: number;
  private readonly clock: () => number;
  private readonly scope: string;
  private readonly onIgnoredError: (error: unknown) => void;
  private readonly configs: PartitionConfig[];
  private readonly stubs: (PartitionStub | undefined)[];
  private handshake: Promise<void> | null = null;
  /** What this instance learned (hints, registrations, claim rotations, a checked P); shared between instances through `options.memory`. */
  private readonly learned: LearnedState;
  private get hints(): Map<string, number> {
    return this.learned.hints;
  }
  private get registered(): Set<string> {
    return this.learned.registered;
  }

  constructor(
    private readonly namespace: PartitionNamespace,
    options: PartitionedJournalOptions,
  ) {
    if (options === null || typeof options !== "object") throw new InvalidArgumentError("options", "needs { name, partitions }");
    this.name = checkJournalName(options.name);
    this.partitions = checkInteger("partitions", options.partitions, 1, MAX_PARTITIONS);
    this.capacity = checkCapacity(options.capacity ?? BILLING_GRADE);
    this.clock = options.clock ?? Date.now;
    this.scope = options.scope ?? "";
    this.onIgnoredError = options.onIgnoredError ?? ((error) => console.warn("isostore PartitionedJournal:", error));
    this.configs = Array.from({ length: this.partitions }, (_, partition) => ({ journal: this.name, partitions: this.partitions, partition, capacity: this.capacity }));
    this.stubs = new Array<PartitionStub | undefined>(this.partitions).fill(undefined);
    this.learned = options.memory ? options.memory.for(`${this.scope}${this.name}#${this.partitions}`) : newLearnedState();
  }

  /** The object name of partition `p` (what `idFromName` gets). */
  objectName(p: number): string {
    return `${this.scope}${this.name}#${p}`;
  }

  /** The partition an ordering key belongs to. */
  partitionOf(namespace: string, subject: string): number {
    return partitionOf(namespace, subject, this.partitions);
  }

  private stub(p: number): PartitionStub {
    let stub = this.stubs[p];
    if (stub === undefined) {
      stub = this.namespace.get(this.namespace.idFromName(this.objectName(p)) as never) as PartitionStub;
      this.stubs[p] = stub;
    }
    return stub;
  }

  /** One RPC to partition `p`; platform failures become BackendError, journal errors are rebuilt. */
  private async send<T>(p: number, what: string, call: (stub: PartitionStub, config: PartitionConfig) => Promise<WireOutcome<T>>): Promise<T> {
    let outcome: WireOutcome<T>;
    try {
      outcome = await call(this.stub(p), this.configs[p]!);
    } catch (error) {
      this.stubs[p] = undefined; // a stub that threw is recreated
      throw backendError(error, `${what} on partition ${p} of journal \`${this.name}\``);
    }
    if (!outcome.ok) throw decodeError(outcome.error);
    return outcome.value;
  }

  /** With P > 1: check P with partition 0 once, before any other call creates a partition. */
  private async ready(): Promise<void> {
    if (this.partitions === 1) return;
    if (this.learned.checkedP) return;
    if (this.handshake === null) {
      this.handshake = this.send(0, "open", (stub, config) => stub.hello(config)).then(() => {
        this.learned.checkedP = true;
      });
      this.handshake.catch(() => {
        this.handshake = null; // try again on the next call
      });
    }
    await this.handshake;
  }

  private async call<T>(p: number, what: string, call: (stub: PartitionStub, config: PartitionConfig) => Promise<WireOutcome<T>>): Promise<T> {
    await this.ready();
    return this.send(p, what, call);
  }

  private hint(requestId: string, p: number): void {
    if (this.partitions === 1) return;
    this.hints.delete(requestId);
    this.hints.set(requestId, p);
    if (this.hints.size > HINTS) {
      const oldest = this.hints.keys().next();
      if (oldest.done !== true) this.hints.delete(oldest.value);
    }
  }

  /** Every partition index. */
  private all(): number[] {
    return Array.from({ length: this.partitions }, (_, p) => p);
  }

  // ------------------------------------------------------------ append

  async append(event: UsageEvent): Promise<AppendResult> {
    const now = this.clock();
    if (this.partitions === 1) return this.call(0, "append", (stub, config) => stub.append(config, now, event));
    const checked = checkUsageEvent(event);
    const p = this.partitionOf(checked.orderingKey.namespace, checked.orderingKey.subject);
    await this.ready();
    const { refused, due } = await this.reserve(now, [checked]);
    const error = refused[0];
    if (error !== undefined && error !== null) throw error;
    const result = await this.send(p, "append", (stub, config) => stub.append(config, now, checked));
    this.hint(checked.id, p);
    await this.verifyQuietly(now, due);
    return result;
  }

  async appendBatch(events: readonly UsageEvent[]): Promise<BatchAppendResult[]> {
    const now = this.clock();
    if (this.partitions === 1) return decodeBatch(await this.call(0, "appendBatch", (stub, config) => stub.appendBatch(config, now, events)));
    const results = new Array<BatchAppendResult | undefined>(events.length);
    const valid: { event: UsageEvent; index: number }[] = [];
    checkBatch(events).forEach((event, index) => {
      if (event instanceof JournalError) results[index] = { status: "rejected", error: event };
      else valid.push({ event, index });
    });
    await this.ready();
    // Reserve every id at its id home first; an event refused there is rejected and not sent on.
    const { refused, due } = await this.reserve(
      now,
      valid.map(({ event }) => event),
    );
    const shares = new Map<number, { event: UsageEvent; index: number }[]>();
    valid.forEach(({ event: checked, index }, i) => {
      const error = refused[i];
      if (error !== undefined && error !== null) {
        results[index] = { status: "rejected", error };
        return;
      }
      const p = this.partitionOf(checked.orderingKey.namespace, checked.orderingKey.subject);
      let share = shares.get(p);
      if (share === undefined) shares.set(p, (share = []));
      share.push({ event: checked, index });
    });
    // Each share in slices that fit an RPC (in order, one after the other), the shares concurrently.
    await Promise.all(
      [...shares].map(async ([p, share]) => {
        for (const slice of byteSlices(share, ({ event }) => eventBytesAtMost(event), RPC_BUDGET_BYTES)) {
          const events = slice.map(({ event }) => event);
          const answers = decodeBatch(await this.send(p, "appendBatch", (stub, config) => stub.appendBatch(config, now, events)));
          slice.forEach(({ event, index }, i) => {
            const answer = answers[i];
            if (answer === undefined) throw new BackendError(`partition ${p} answered an append batch with too few results`);
            results[index] = answer;
            if (answer.status !== "rejected") this.hint(event.id, p);
          });
        }
      }),
    );
    await this.verifyQuietly(now, due);
    return results as BatchAppendResult[];
  }

  // ------------------------------------------------------- id registry

  /** The id home partition of a request id (where its reservation is kept). */
  idHomeOf(requestId: string): number {
    return this.partitions === 1 ? 0 : fnv1a32(requestId) % this.partitions;
  }

  /**
   * Reserve the events' request ids at their id homes (one call per home,
   * concurrently, each in input order). `refused[i]` is the conflict of
   * `events[i]`, or null when it may go on to its key partition. A conflict
   * with a settled entry whose key partition does not hold the event takes
   * the entry over (forget it, reserve again, once). `due` lists, per home,
   * the due entries the answers named, for {@link verifyQuietly}.
   */
  private async reserve(now: number, events: readonly UsageEvent[]): Promise<{ refused: (JournalError | null)[]; due: Map<number, DueEntry[]> }> {
    const items = await Promise.all(events.map((event) => reservationOf(event)));
    const refused = events.map((): JournalError | null => null);
    const due = new Map<number, DueEntry[]>();
    const round = async (indexes: readonly number[]): Promise<{ index: number; entry: DueEntry }[]> => {
      const byHome = groupBy(indexes, (i) => this.idHomeOf(events[i]!.id));
      const stale: { index: number; entry: DueEntry }[] = [];
      await Promise.all(
        [...byHome].map(async ([home, list]) => {
          const answer = await this.send(home, "reserve", (stub, config) => stub.reserve(config, now, list.map((i) => items[i]!)));
          if (answer.due.length > 0) due.set(home, [...answer.due]);
          answer.results.forEach((result, k) => {
            const index = list[k]!;
            if (result.status !== "conflict") return;
            refused[index] = new EventConflictError(events[index]!.id);
            if (result.settled) stale.push({ index, entry: { requestId: events[index]!.id, namespace: result.namespace, subject: result.subject, rev: result.rev } });
          });
        }),
      );
      return stale;
    };
    const stale = await round(events.map((_, i) => i));
    if (stale.length > 0) {
      // The entry is settled: it names the event's true partition unless the event is gone.
      const unique = new Map<string, DueEntry>();
      for (const { entry } of stale) unique.set(entry.requestId, entry);
      const gone = await this.verify(now, [...unique.values()]);
      const retry = stale.filter(({ entry }) => gone.has(entry.requestId)).map(({ index }) => index);
      if (retry.length > 0) {
        for (const index of retry) refused[index] = null;
        await round(retry); // a second conflict is final
      }
    }
    return { refused, due };
  }

  /**
   * Verify registry entries: ask their key partitions whether they hold the
   * events (`holdsMany`, concurrently), then tell each id home (`settleRegistry`).
   * Returns the ids whose entries were forgotten.
   */
  private async verify(now: number, entries: readonly DueEntry[]): Promise<Set<string>> {
    const byKey = groupBy(entries, (entry) => this.partitionOf(entry.namespace, entry.subject));
    const held = new Map<string, boolean>();
    await Promise.all(
      [...byKey].flatMap(([p, all]) =>
        chunks(all, REGISTRY_CALL_MAX).map(async (list) => {
          const answers = await this.send(p, "holdsMany", (stub, config) => stub.holdsMany(config, list.map((entry) => entry.requestId)));
          list.forEach((entry, k) => held.set(entry.requestId, answers[k] === true));
        }),
      ),
    );
    const byHome = groupBy(entries, (entry) => this.idHomeOf(entry.requestId));
    const gone = new Set<string>();
    await Promise.all(
      [...byHome].flatMap(([home, all]) =>
        chunks(all, REGISTRY_CALL_MAX).map(async (list) => {
          const verdicts: RegistryVerdict[] = list.map((entry) => ({ requestId: entry.requestId, rev: entry.rev, held: held.get(entry.requestId) === true }));
          await this.send(home, "settleRegistry", (stub, config) => stub.settleRegistry(config, now, verdicts));
          for (const verdict of verdicts) if (!verdict.held) gone.add(verdict.requestId);
        }),
      ),
    );
    return gone;
  }

  /**
   * Opportunistic registry verification after an append, of what the
   * reservation answers listed (at most 8 per home, `REGISTRY_DUE_SCAN`);
   * failures go to `onIgnoredError`. The entries are other events' (due ones
   * of the same id homes), so the append, already stored, does not wait on
   * them: it waits at most {@link APPEND_VERIFY_WAIT_MS}, then answers while
   * the verification goes on in the background. A Worker may cut such a
   * promise off when its request ends; nothing is lost then: an entry that
   * was not settled stays due, and the next append to its home or `prune`
   * verifies it.
   */
  private async verifyQuietly(now: number, due: Map<number, DueEntry[]>): Promise<void> {
    const entries = [...due.values()].flat();
    if (entries.length === 0) return;
    const verification = this.verify(now, entries).then(
      () => undefined,
      (error: unknown) => {
        try {
          this.onIgnoredError(error);
        } catch {
          // A sink that throws has nowhere to report to: the verification's failure is dropped.
        }
      },
    );
    let timer: ReturnType<typeof setTimeout> | undefined;
    const waited = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, APPEND_VERIFY_WAIT_MS);
    });
    try {
      await Promise.race([verification, waited]);
    } finally {
      if (timer !== undefined) clearTimeout(timer);
    }
  }

  // ------------------------------------------------------------- claim

  /**
   * With P = 1: one claim of the core, in RPCs small enough for the RPC
   * limit (the same deliveries, so within `maxBytes` unless there is one).
   * With P > 1: the fan-out of the module comment. `maxEvents` and
   * `maxBytes` are split over the partitions in rounds, each partition's
   * share of the bytes left in proportion to its share of the events left
   * (at least 1 byte), and no round starts once they are spent. A
   * partition's call always returns its first delivery, so the answer may
   * pass `maxBytes`, by at most one delivery per partition asked in the last
   * round (earlier rounds' excess is taken off the bytes left); and a
   * partition that stops at its share may leave out deliveries one journal
   * would have returned. What is not returned is not leased.
   * Without `maxBytes`, nothing is counted and the fan-out is unchanged.
   */
  async claim(consumer: ConsumerId, options: ClaimOptions): Promise<Delivery[]> {
    const now = this.clock();
    const { consumer: id, maxEvents, leaseMs, now: claimNow, maxBytes } = checkClaim(consumer, options);
    if (this.partitions === 1) {
      // In RPCs of at most CLAIM_RPC_EVENTS, one after the other: the same deliveries as one claim of the core.
      const { deliveries, failure } = await this.claimFrom(0, id, maxEvents, maxBytes, leaseMs, now, claimNow);
      if (failure !== null) {
        if (deliveries.length === 0) throw failure.error;
        this.onIgnoredError(failure.error);
      }
      return deliveries;
    }
    await this.ready();
    // Registering prunes, and pruning forgets request ids: never at a claimer's clock that runs ahead of ours.
    await this.registerEverywhere(id, Math.min(claimNow, now));
    const start = this.learned.rotations.get(id) ?? 0;
    this.learned.rotations.set(id, (start + 1) % this.partitions);
    const got: Delivery[][] = this.all().map(() => []);
    // Rounds: split what is left evenly over the partitions that may still have
    // events (the remainder from a start that rotates per claim of the
    // consumer); a partition that hands out less than its share is out of
    // events and leaves the round-robin. Each round either fills the claim or
    // drops a partition. When fewer events are left than partitions (an even
    // split would skip some), the partitions are first asked, at once and
    // read-only, how many they could hand out at most (`claimable`): those
    // with none leave, and no share exceeds what a partition said, so a small
    // claim over idle partitions costs two parallel rounds, not one per
    // partition. With maxBytes, the bytes left are split like the events
    // left (a partition's share of them in proportion to its share of the
    // events, at least 1 byte), and no round starts once they are spent: a
    // round's calls stay within the bytes left but for one first delivery
    // each, so a claim passes maxBytes by at most one delivery per partition
    // (those of its last round). Without it, bytesLeft stays Infinity.
    let candidates = this.all();
    let left = maxEvents;
    let bytesLeft = maxBytes;
    let caps: Map<number, number> | null = null;
    const failures: unknown[] = [];
    const drop = (out: ReadonlySet<number>) => (candidates = candidates.filter((p) => !out.has(p)));
    for (let round = 0; left > 0 && bytesLeft > 0 && candidates.length > 0; ) {
      const out = new Set<number>();
      if (caps === null && left < candidates.length) {
        const probed = new Map<number, number>();
        await Promise.all(
          candidates.map(async (p) => {
            try {
              probed.set(p, await this.send(p, "claimable", (stub, config) => stub.claimable(config, id, claimNow, left)));
            } catch (error) {
              failures.push(error);
              probed.set(p, 0);
            }
            if (probed.get(p) === 0) out.add(p);
          }),
        );
        caps = probed;
        drop(out);
        continue;
      }
      const shares = this.split(left, candidates, caps, (start + round) % this.partitions);
      const [eventsThisRound, bytesThisRound] = [left, bytesLeft];
      await Promise.all(
        candidates.map(async (p, i) => {
          const share = shares[i]!;
          if (share === 0) return;
          // Infinity without maxBytes; the shares of a round add up to at most its bytes left, but for the 1-byte floor.
          const budget = Math.max(1, Math.floor((bytesThisRound * share) / eventsThisRound));
          const { deliveries, bytes, failure } = await this.claimFrom(p, id, share, budget, leaseMs, now, claimNow);
          got[p]!.push(...deliveries);
          left -= deliveries.length;
          bytesLeft -= bytes;
          const cap = caps?.get(p);
          if (cap !== undefined) caps!.set(p, cap - deliveries.length);
          if (failure !== null) failures.push(failure.error);
          if (failure !== null || deliveries.length < share || cap === deliveries.length) out.add(p);
        }),
      );
      drop(out);
      round++;
    }
    const handed = got.reduce((sum, list) => sum + list.length, 0);
    // A failing partition must not cost the deliveries others already leased:
    // they are returned, and the failure is reported to onIgnoredError. With
    // nothing to return, a failure is the claim's error: one that says nothing
    // committed (a full or overloaded object's marks) only when every failure
    // says so, since a caller may repeat a claim that committed nothing, and
    // another partition may have leased events and lost its reply.
    if (failures.length > 0) {
      if (handed === 0) throw failures.find((failure) => waitOutMarks(failure) === undefined) ?? failures[0];
      for (const failure of failures) this.onIgnoredError(failure);
    }
    return mergeHeads(got, (a, b) => observedBefore(a.event, b.event), maxEvents).map(({ item }) => item);
  }

  /**
   * Claim up to `count` events of partition `p` within `budget` bytes (a
   * claim's `maxBytes`, `Infinity` for none), in RPCs of at most
   * {@link CLAIM_RPC_EVENTS} deliveries one after the other (a reply of the
   * largest events must fit the RPC limit: the leases are taken before the
   * reply is serialized), until `count` are leased, the budget is spent or
   * an RPC hands out fewer than it asked for. Each RPC is a claim of the
   * partition's journal at the same `now`, with what is left of the budget
   * as its `maxBytes`, so together they lease what one claim of `count`
   * within `budget` would: the first ready events in position order, one per
   * key (a later RPC finds the keys of the earlier ones in flight), in that
   * order, stopping before the first delivery that would go over the budget
   * unless it is the very first. A later RPC says it is one (`continued`),
   * so the partition leases nothing when its first delivery would go over.
   * So `bytes` (the deliveries' {@link deliveryBytes}; 0 without a budget,
   * which counts nothing) is at most `budget`, or is the size of the one
   * delivery returned. When an RPC fails, what the earlier ones leased is
   * kept and the failure is returned beside it. Hints are filled.
   */
  private async claimFrom(
    p: number,
    consumer: ConsumerId,
    count: number,
    budget: number,
    leaseMs: number,
    now: number,
    claimNow: number,
  ): Promise<{ deliveries: Delivery[]; bytes: number; failure: { error: unknown } | null }> {
    const deliveries: Delivery[] = [];
    const bounded = budget !== Infinity;
    let bytes = 0;
    while (deliveries.length < count && bytes < budget) {
      const ask = Math.min(count - deliveries.length, CLAIM_RPC_EVENTS);
      const options: ClaimOptions = bounded ? { maxEvents: ask, leaseMs, now: claimNow, maxBytes: budget - bytes } : { maxEvents: ask, leaseMs, now: claimNow };
      const continued = bounded && deliveries.length > 0;
      let got: Delivery[];
      try {
        got = await this.call(p, "claim", (stub, config) => (continued ? stub.claim(config, now, consumer, options, true) : stub.claim(config, now, consumer, options)));
      } catch (error) {
        return { deliveries, bytes, failure: { error } };
      }
      for (const delivery of got) {
        deliveries.push(delivery);
        if (bounded) bytes += deliveryBytes(delivery);
        this.hint(delivery.id.event, p);
      }
      if (got.length < ask) break;
    }
    return { deliveries, bytes, failure: null };
  }

  /**
   * Register `consumer` in every partition not known to have it (concurrently),
   * and remember the pairs whose registration finished; each partition prunes
   * at the claim's `now`, as the consumer's first claim there would. A claim
   * calls this before it leases anything, so a failure here rejects the claim
   * before any event is leased (none waits out a lease with nobody to deliver
   * it to); and a partition whose claim call fails afterwards has the
   * consumer registered all the same, so it keeps every event the consumer
   * has not seen. Over a large backlog a partition registers the consumer in
   * bounded steps, over several calls: from the first on it keeps what the
   * consumer has not seen, and until the last it has nothing to hand out;
   * the next claim goes on with it (as does a claim call there).
   */
  private async registerEverywhere(consumer: ConsumerId, now: number): Promise<void> {
    await Promise.all(
      this.all().map(async (p) => {
        if (this.registered.has(`${consumer}#${p}`)) return;
        const registered = await this.send(p, "register", (stub, config) => stub.register(config, consumer, now));
        if (registered !== false) this.registered.add(`${consumer}#${p}`);
      }),
    );
  }

  /**
   * Split `total` over `targets` (partitions, ascending) as evenly as their
   * `caps` allow (none gets more than its cap; no caps: no bound), the
   * remainder going to the targets from partition `from` on (rotating).
   */
  private split(total: number, targets: readonly number[], caps: ReadonlyMap<number, number> | null, from: number): number[] {
    const n = targets.length;
    const shares = targets.map(() => 0);
    const start = Math.max(0, targets.findIndex((p) => p >= from));
    let left = total;
    for (let grew = true; left > 0 && grew; ) {
      grew = false;
      for (let k = 0; k < n && left > 0; k++) {
        const i = (start + k) % n;
        if (caps === null || shares[i]! < (caps.get(targets[i]!) ?? 0)) {
          shares[i]!++;
          left--;
          grew = true;
        }
      }
    }
    return shares;
  }

  // ------------------------------------------------- routed by request id

  /**
   * The partition that stores `requestId`, asking every partition (`holds`,
   * concurrently); null when none does. An id is stored in at most one
   * partition, so a partition that says it holds the id settles the answer
   * whatever the others do: a partition that fails (overloaded, reset) does
   * not hold up an id another one holds. When none holds it and one failed,
   * that partition's error is thrown (the first in partition order, with its
   * `retryable`): the id may be stored there.
   */
  private async lookup(requestId: string): Promise<number | null> {
    await this.ready();
    const held = await Promise.allSettled(this.all().map((p) => this.send(p, "holds", (stub, config) => stub.holds(config, requestId))));
    const p = held.findIndex((answer) => answer.status === "fulfilled" && answer.value === true);
    if (p !== -1) {
      this.hint(requestId, p);
      return p;
    }
    const failed = held.find((answer) => answer.status === "rejected");
    if (failed !== undefined) throw failed.reason;
    return null;
  }

  /**
   * Run `call` on the partition holding `requestId`: the hinted one first;
   * when it answers that it may not hold the event (`elsewhere`), or there is
   * no hint, the one `lookup` finds. `missing` answers when no partition holds
   * it. A hinted partition's answer that says it stores the event stands (a
   * lookup would find that same partition).
   */
  private async routed<T>(requestId: string, call: (p: number) => Promise<T>, elsewhere: (error: unknown) => boolean, missing: () => T): Promise<T> {
    if (this.partitions === 1) return call(0);
    const hinted = this.hints.get(requestId);
    if (hinted !== undefined) {
      try {
        return await call(hinted);
      } catch (error) {
        if (!elsewhere(error)) throw error;
      }
    }
    const p = await this.lookup(requestId);
    if (p === null) return missing();
    return call(p);
  }

  /**
   * A call on one delivery, sent to the partition that stores its event. With P > 1
   * `check` (the call's own argument check) runs first, as the core runs it, so that a
   * bad argument is refused as such rather than as `not_outstanding` when no partition
   * stores the event; with P = 1 the partition checks everything.
   */
  private async routedDelivery<T>(
    delivery: DeliveryId,
    what: string,
    call: (stub: PartitionStub, config: PartitionConfig, id: DeliveryId) => Promise<WireOutcome<T>>,
    check?: () => unknown,
  ): Promise<T> {
    if (this.partitions === 1) return this.call(0, what, (stub, config) => call(stub, config, delivery));
    const id = checkDeliveryId(delivery);
    check?.();
    const copy: DeliveryId = { consumer: id.consumer, event: id.event, attempt: id.attempt };
    return this.routed(
      copy.event,
      (p) => this.call(p, what, (stub, config) => call(stub, config, copy)),
      mayBeElsewhere,
      () => {
        throw new NotOutstandingError(copy, "the event is not journaled");
      },
    );
  }

  ack(delivery: DeliveryId): Promise<void> {
    const now = this.clock();
    return this.routedDelivery(delivery, "ack", (stub, config, id) => stub.ack(config, now, id));
  }

  /**
   * Many acks in one call per partition: each delivery goes to the partition
   * its hint names (the hints are read once, before anything is awaited, into
   * this call's own routes: hints other calls add meanwhile may evict them
   * from the shared map, but not from the routes), else the one `holdsMany`
   * finds (all partitions asked at once, for every unhinted id together);
   * each partition acks its share in one transaction. A delivery a hinted
   * partition reports `not_outstanding` without saying it stores the event
   * (see {@link mayBeElsewhere}) is located again once (a hint can only be
   * stale when its id was forgotten and reused). A delivery no partition
   * stores is `not_outstanding`; one no partition said it stores while a
   * partition failed to answer gets that partition's error, and the
   * deliveries of a partition whose ack call fails get its error: each in
   * place, the others acked all the same.
   */
  async ackBatch(deliveries: readonly DeliveryId[]): Promise<AckResult[]> {
    const now = this.clock();
    if (this.partitions === 1) return decodeAcks(await this.call(0, "ackBatch", (stub, config) => stub.ackBatch(config, now, deliveries)));
    const checked = checkAckBatch(deliveries);
    const results: (AckResult | undefined)[] = checked.map((entry) => (entry instanceof JournalError ? { ok: false, error: entry } : undefined));
    const open = checked.flatMap((entry, index) => (entry instanceof JournalError ? [] : [{ index, id: { consumer: entry.consumer, event: entry.event, attempt: entry.attempt } }]));
    if (open.length === 0) return results as AckResult[];
    // This call's routes, from the hints as they are now (before any await).
    const hinted = new Map<string, number>();
    for (const { id } of open) {
      const p = this.hints.get(id.event);
      if (p !== undefined) hinted.set(id.event, p);
    }
    await this.ready();

    type Entry = { index: number; id: DeliveryId };
    /** Ack `pending` where `routes` says; a delivery without a route is `failure` (a partition did not answer) or not journaled. Returns the refusals that may be elsewhere. */
    const settle = async (pending: readonly Entry[], routes: ReadonlyMap<string, number>, failure: JournalError | null): Promise<Entry[]> => {
      const shares = new Map<number, Entry[]>();
      for (const entry of pending) {
        const p = routes.get(entry.id.event);
        if (p === undefined) results[entry.index] = { ok: false, error: failure ?? new NotOutstandingError(entry.id, "the event is not journaled") };
        else {
          const share = shares.get(p);
          if (share) share.push(entry);
          else shares.set(p, [entry]);
        }
      }
      const again: Entry[] = [];
      await Promise.all(
        [...shares].map(async ([p, share]) => {
          let answers: AckResult[];
          try {
            answers = decodeAcks(await this.send(p, "ackBatch", (stub, config) => stub.ackBatch(config, now, share.map((entry) => entry.id))));
            if (answers.length < share.length) throw new BackendError(`partition ${p} answered an ack batch with too few results`);
          } catch (error) {
            for (const entry of share) results[entry.index] = { ok: false, error: asJournalError(error) };
            return;
          }
          share.forEach((entry, i) => {
            const answer = answers[i]!;
            if (!answer.ok && mayBeElsewhere(answer.error)) again.push(entry);
            results[entry.index] = answer;
          });
        }),
      );
      return again;
    };

    const first = await this.locateMany(open.filter((entry) => !hinted.has(entry.id.event)).map((entry) => entry.id.event));
    const routes = new Map([...hinted, ...first.found]);
    const retry = await settle(open, routes, first.failure);
    // Hinted deliveries refused as maybe not stored there: locate them for certain and try once more.
    const stale = retry.filter((entry) => !first.found.has(entry.id.event));
    if (stale.length > 0) {
      for (const entry of stale) if (this.hints.get(entry.id.event) === hinted.get(entry.id.event)) this.hints.delete(entry.id.event);
      const again = await this.locateMany(stale.map((entry) => entry.id.event));
      // Found nowhere: the hinted partition's refusal stands, unless a partition failed to answer.
      await settle(
        stale.filter((entry) => again.found.has(entry.id.event) || again.failure !== null),
        again.found,
        again.failure,
      );
    }
    return results as AckResult[];
  }

  /**
   * The partition of each request id any partition stores (`holdsMany` on
   * every partition at once); hints are filled. An id is stored in at most
   * one partition, so a `true` settles its partition whatever the others
   * answer; `failure` is the error of the first partition (in partition
   * order) that failed to answer, null when all did: an id not `found` may
   * then be stored there.
   */
  private async locateMany(requestIds: readonly string[]): Promise<{ found: Map<string, number>; failure: JournalError | null }> {
    const found = new Map<string, number>();
    const unique = [...new Set(requestIds)];
    if (unique.length === 0) return { found, failure: null };
    const asked = await Promise.allSettled(
      this.all().map(async (p) => {
        for (const list of chunks(unique, REGISTRY_CALL_MAX)) {
          const held = await this.send(p, "holdsMany", (stub, config) => stub.holdsMany(config, list));
          list.forEach((requestId, i) => {
            if (held[i] === true) found.set(requestId, p);
          });
        }
      }),
    );
    for (const [requestId, p] of found) this.hint(requestId, p);
    const failed = asked.find((answer) => answer.status === "rejected");
    return { found, failure: failed === undefined ? null : asJournalError(failed.reason) };
  }

  quarantine(delivery: DeliveryId, reason: PoisonReason): Promise<void> {
    const now = this.clock();
    return this.routedDelivery(delivery, "quarantine", (stub, config, id) => stub.quarantine(config, now, id, reason), () => checkQuarantine(delivery, reason));
  }

  extend(delivery: DeliveryId, options: ExtendOptions): Promise<{ leaseExpiresAt: number }> {
    const now = this.clock();
    return this.routedDelivery(delivery, "extend", (stub, config, id) => stub.extend(config, now, id, options), () => checkExtend(delivery, options));
  }

  nack(delivery: DeliveryId, options: NackOptions): Promise<void> {
    const now = this.clock();
    return this.routedDelivery(delivery, "nack", (stub, config, id) => stub.nack(config, now, id, options), () => checkNack(delivery, options));
  }

  async attempts(consumer: ConsumerId, requestId: string): Promise<Attempt[]> {
    const now = this.clock();
    if (this.partitions === 1) return this.call(0, "attempts", (stub, config) => stub.attempts(config, now, consumer, requestId));
    const { consumer: id } = checkAttempts(consumer, requestId);
    const p = await this.lookup(requestId);
    if (p === null) return [];
    return this.call(p, "attempts", (stub, config) => stub.attempts(config, now, id, requestId));
  }

  private async operate(action: "release" | "discard", consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<void> {
    const now = this.clock();
    const send = (stub: PartitionStub, config: PartitionConfig, id: ConsumerId, opts: OperatorActionOptions) =>
      action === "release" ? stub.release(config, now, id, requestId, opts) : stub.discard(config, now, id, requestId, opts);
    if (this.partitions === 1) return this.call(0, action, (stub, config) => send(stub, config, consumer, options));
    const { consumer: id } = checkOperatorAction(action, consumer, requestId, options);
    return this.routed(
      requestId,
      (p) => this.call(p, action, (stub, config) => send(stub, config, id, options)),
      (error) => error instanceof NotQuarantinedError,
      () => {
        throw new NotQuarantinedError(id, requestId);
      },
    );
  }

  release(consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<void> {
    return this.operate("release", consumer, requestId, options);
  }

  discard(consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<void> {
    return this.operate("discard", consumer, requestId, options);
  }

  // ---------------------------------------------------------- merged reads

  /**
   * With P > 1: the depths (`pending`, `inFlight`, `quarantined`, `dropped`)
   * summed over the partitions, the largest `oldestPendingAgeMs`, and
   * `capacity` as each partition has it, not summed (the type has no room
   * for P; the journal holds up to P x `maxEvents`, and an append meets the
   * capacity policy when its key's partition is full, whatever the sum).
   */
  async stats(consumer: ConsumerId): Promise<JournalStats> {
    const now = this.clock();
    if (this.partitions === 1) return this.call(0, "stats", (stub, config) => stub.stats(config, now, consumer));
    const id = parseConsumerId(consumer);
    await this.ready();
    const all = await Promise.all(this.all().map((p) => this.send(p, "stats", (stub, config) => stub.stats(config, now, id))));
    let oldest: number | null = null;
    for (const part of all) if (part.oldestPendingAgeMs !== null) oldest = Math.max(oldest ?? 0, part.oldestPendingAgeMs);
    return {
      pending: all.reduce((sum, part) => sum + part.pending, 0),
      inFlight: all.reduce((sum, part) => sum + part.inFlight, 0),
      quarantined: all.reduce((sum, part) => sum + part.quarantined, 0),
      oldestPendingAgeMs: oldest,
      dropped: all.reduce((sum, part) => sum + part.dropped, 0),
      capacity: this.capacity,
    };
  }

  /**
   * With P > 1: one merged page of the partitions' quarantined events (see
   * {@link mergedPage}; each partition is asked for a share of the page, not
   * all of it). The order: each partition's events in its position order
   * (descending with `order: "newest"`), the partitions interleaved by
   * `event.observedAt`, then request id, as claims are (newest first: the
   * latest first): at every step, the partition whose next event was
   * observed first (last) gives it. When each partition appended its events
   * in the order they were observed, the usual case, a page is in
   * `observedAt` order across the journal; a late replay (appended after
   * events observed later) stays at its position in its partition, so it and
   * its partition's events behind it come later than their `observedAt`
   * alone would put them. Positions collide across partitions, so they
   * cannot order the journal; `quarantinedAt` is no order of a partition's
   * list (an event is quarantined whenever its delivery fails). The cursor
   * holds one position per partition, so paging is stable: nothing is
   * skipped or repeated across pages, and an event quarantined meanwhile at a
   * position a partition has passed is not listed, as in a single journal.
   */
  async listQuarantined(consumer: ConsumerId, options: ListQuarantinedOptions = {}): Promise<QuarantinePage> {
    const now = this.clock();
    const { consumer: id, limit, query, order, after: cursorText } = checkListQuarantined(consumer, options);
    if (this.partitions === 1) {
      // The page in RPCs of at most QUARANTINE_RPC_ITEMS, each from the cursor the previous one returned.
      const items: QuarantinedEvent[] = [];
      let after = cursorText ?? null;
      for (;;) {
        const ask = Math.min(limit - items.length, QUARANTINE_RPC_ITEMS);
        const page = await this.call(0, "listQuarantined", (stub, config) =>
          stub.listQuarantined(config, now, id, { limit: ask, after, order, ...(query === "" ? {} : { query }) }),
        );
        items.push(...page.items);
        // An empty page that names a cursor would not move on: taken as the end of this page.
        if (page.nextCursor === null || items.length >= limit || page.items.length === 0) return { items, nextCursor: page.nextCursor };
        after = page.nextCursor;
      }
    }
    const newest = order === "newest";
    const prefix = newest ? QUARANTINE_NEWEST_CURSOR : QUARANTINE_CURSOR;
    const after = parseCursor(prefix, cursorText, this.partitions);
    await this.ready();
    const page = await mergedPage<QuarantinedEvent>(
      after,
      limit,
      (p, from, share) =>
        this.send(p, "listQuarantined", (stub, config) =>
          stub.listQuarantined(config, now, id, {
            // A share over what one reply may carry is read in several asks (mergedPage asks again when it is used up).
            limit: Math.min(share, QUARANTINE_RPC_ITEMS),
            order,
            after: from > 0 ? `${newest ? "qn1." : "q1."}${from}` : null,
            ...(query === "" ? {} : { query }),
          }),
        ),
      newest ? (a, b) => observedBefore(b.event, a.event) : (a, b) => observedBefore(a.event, b.event),
      (item) => item.position,
    );
    return { items: page.items, nextCursor: page.more ? `${prefix}${page.cursor.join(".")}` : null };
  }

  /**
   * With P > 1: one merged page of the partitions' audit logs (see
   * {@link mergedPage}). The order: each partition's entries in its `seq`
   * order, the partitions interleaved by `at` (ties: lower partition). When
   * the operator actions were recorded with non-decreasing `now` (one clock),
   * the page is in `at` order across the journal. `seq` is per partition, and
   * the cursor holds one `seq` per partition.
   */
  async listAudit(options: ListAuditOptions = {}): Promise<AuditPage> {
    const now = this.clock();
    if (this.partitions === 1) return this.call(0, "listAudit", (stub, config) => stub.listAudit(config, now, options));
    const { limit, after: cursorText, requestId } = checkListAudit(options);
    const only = requestId === undefined ? {} : { requestId };
    const after = parseCursor(AUDIT_CURSOR, cursorText, this.partitions);
    await this.ready();
    const page = await mergedPage<AuditEntry>(
      after,
      limit,
      (p, from, share) => this.send(p, "listAudit", (stub, config) => stub.listAudit(config, now, { limit: share, after: from > 0 ? `a1.${from}` : null, ...only })),
      (a, b) => a.at < b.at,
      (entry) => entry.seq,
    );
    return { items: page.items, nextCursor: page.more ? `${AUDIT_CURSOR}${page.cursor.join(".")}` : null };
  }

  async prune(options: PruneOptions): Promise<{ pruned: number }> {
    const now = this.clock();
    if (this.partitions === 1) return this.call(0, "prune", (stub, config) => stub.prune(config, now, options));
    const { now: pruneNow, limit } = checkPrune(options);
    await this.ready();
    // From a start that rotates with every prune (shared through the memory, as claims rotate).
    const start = this.learned.pruneStart % this.partitions;
    this.learned.pruneStart = (start + 1) % this.partitions;
    let pruned = 0;
    for (let k = 0; k < this.partitions; k++) {
      const p = (start + k) % this.partitions;
      if (pruned >= limit) break;
      const part = await this.send(p, "prune", (stub, config) => stub.prune(config, now, { now: pruneNow, limit: limit - pruned }));
      pruned += part.pruned;
    }
    // The id registries: verify what is due (at the journal's clock, on which reservations are dated).
    const due = await Promise.all(this.all().map((p) => this.send(p, "registryDue", (stub, config) => stub.registryDue(config, now, Math.min(limit, REGISTRY_PRUNE_SCAN)))));
    const entries = due.flat();
    if (entries.length > 0) await this.verify(now, entries);
    return { pruned };
  }
}
