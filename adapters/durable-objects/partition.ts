/**
 * `JournalPartition`: the Durable Object that is one partition of a
 * partitioned usage journal. It hosts the core journal (`createJournal`) over
 * its own SQLite engine and exposes it by Workers RPC; it is the single
 * writer of every ordering key that hashes to it, so a key's order is this
 * object's order.
 *
 * Protocol (used by `PartitionedJournal`; stable within a major version):
 * - Every call carries the journal's {@link PartitionConfig} and the caller's
 *   clock reading `now`. The first call stores `{ journal, partitions,
 *   partition }` in the object; a later call naming a different partition
 *   count (or journal) is refused with `InvalidArgumentError("partitions")`
 *   and changes nothing. Capacity is not stored: it is the caller's
 *   configuration, applied per partition.
 * - The partition never reads its own clock: the hosted journal's `clock()`
 *   returns the `now` of the call being served (the core reads its clock
 *   synchronously when a call starts). So the caller's clock (the wall clock
 *   in production, a virtual clock in tests) is the journal's clock.
 * - Answers are {@link WireOutcome}s: typed journal errors travel as data and
 *   are rebuilt by the caller (RPC does not keep error classes).
 * - Replies stay under the Workers RPC limit (32 MiB serialized): `claim`
 *   hands out at most `CLAIM_RPC_EVENTS` (125) deliveries and
 *   `listQuarantined` lists at most `QUARANTINE_RPC_ITEMS` (74) items per
 *   call, whatever a (valid) `maxEvents` / `limit` asks, so that even the
 *   largest events fit (both from `./partitioned-journal.ts`); the caller
 *   asks again for more. A claim's leases are taken before its reply is
 *   serialized, so an oversized reply would lease events nobody receives.
 *   A claim's `maxBytes` is kept as given. A claim's later RPCs say so
 *   (`continued`): their first delivery must fit `maxBytes` too, or they
 *   lease nothing, so that the RPCs of one claim together stop where one
 *   claim of the core would (see `claim`).
 *
 * Four calls go beside the journal's public surface, through the core's
 * internals (`registerContinuing` of the journal, and `Work` / `Layout`, its
 * internal layer; this file is the one place the adapter depends on them):
 * `register` (a consumer that claims anywhere must be registered in every
 * partition, or a partition it never claimed from could prune events it has
 * not seen; it prunes as that first claim would, so a registration keeps no
 * event already due, and registers in the same bounded steps), `claimable`
 * (a read-only bound of what a claim could lease: how a claim smaller than P
 * picks its partitions) and `holds` / `holdsMany` (whether the partition
 * stores a request id: how deliveries are routed and how the id registry
 * below is verified).
 *
 * The id registry (P > 1 only). Every request id has an *id home*
 * partition (FNV-1a 32 of the request id, modulo P; `PartitionedJournal.idHomeOf`), which keeps,
 * beside its journal and under its own key prefix `["idreg", journal, ...]`
 * of the same engine, one {@link RegistryEntry} per request id it reserved:
 * the ordering key, a hash of the canonical fact, `observedAt`, when it was
 * last reserved, a revision and the time it is next due for verification.
 * - `reserve` (one transaction for a list of ids, in order): an unknown id is
 *   recorded (`reserved`); the same fact again is `same` and refreshes the
 *   reservation (new revision, `reservedAt = now`); revisions come from one
 *   counter per home (`["idreg", journal, "rev"]`), so they only grow, also
 *   for an id forgotten and reserved again; a different fact is a
 *   `conflict` that changes nothing and says whether the entry is *settled*
 *   (`reservedAt + ID_SETTLE_MS <= now`). The answer also lists up to
 *   {@link REGISTRY_DUE_SCAN} entries that are due.
 * - `registryDue` lists due entries (`due <= now`, oldest first).
 * - `settleRegistry` applies verdicts the caller obtained from the entries'
 *   key partitions (`holdsMany`): an entry whose revision is unchanged, that
 *   is settled and whose event its key partition does not hold is forgotten;
 *   one whose event is still held is due again `max(retainAcknowledgedMs,
 *   ID_SETTLE_MS)` later. An entry whose revision changed meanwhile (it was
 *   reserved again, or forgotten and reserved anew: its revision is then
 *   another, never one it had before) is left alone.
 * An entry is first due at `max(observedAt + retainAcknowledgedMs,
 * reservedAt + ID_SETTLE_MS)`: not before its event could have been pruned,
 * and not while an append sent under the reservation may still be on its way.
 */
/// <reference types="@cloudflare/workers-types" />
import { DurableObject } from "cloudflare:workers";
import { checkNow, MAX_CLAIM_EVENTS } from "../../src/journal/arguments.js";
import { claimContinuing, createJournal, registerContinuing } from "../../src/journal/journal.js";
import { InvalidArgumentError } from "../../src/journal/errors.js";
import { checkCapacity, checkInteger, checkJournalName, checkText, MAX_EPOCH_MS, MAX_ORDERING_PART_LENGTH, parseConsumerId } from "../../src/journal/event.js";
import { Layout } from "../../src/journal/layout.js";
import { Work } from "../../src/journal/work.js";
import type {
  AppendResult,
  Attempt,
  AuditPage,
  ListAuditOptions,
  Capacity,
  ClaimOptions,
  ConsumerId,
  Delivery,
  DeliveryId,
  ExtendOptions,
  JournalStats,
  ListQuarantinedOptions,
  NackOptions,
  OperatorActionOptions,
  PoisonReason,
  PruneOptions,
  QuarantinePage,
  UsageEvent,
  UsageJournal,
} from "../../src/journal/types.js";
import type { Engine } from "../../src/engine.js";
import { isRequestId } from "../../src/journal/event.js";
import type { EngineTransaction, Key } from "../../src/engine.js";
import { durableObjectEngine } from "./engine.js";
import { CLAIM_RPC_EVENTS, MAX_PARTITIONS, QUARANTINE_RPC_ITEMS } from "./partitioned-journal.js";
import { encodeAcks, encodeBatch, toWire, type WireAckResult, type WireBatchResult, type WireOutcome } from "./wire.js";

/**
 * How long (ms, on the journal's clock) a request id's reservation protects it
 * after it was last reserved, whatever its key partition says: an append sent
 * under a reservation is assumed to reach its key partition within this time
 * or never. Also the shortest interval between two verifications of one entry.
 */
export const ID_SETTLE_MS = 5 * 60 * 1000;
/** How many due registry entries a `reserve` answer lists at most. */
export const REGISTRY_DUE_SCAN = 8;

/** What `reserve` is told about one event. */
export interface IdReservation {
  readonly requestId: string;
  readonly namespace: string;
  readonly subject: string;
  /** Hash of the canonical fact (namespace, subject, canonical data): equal exactly for the same fact. */
  readonly fact: string;
  readonly observedAt: number;
}

/** One id registry row, at `["idreg", journal, "r", requestId]`. */
export interface RegistryEntry {
  readonly namespace: string;
  readonly subject: string;
  readonly fact: string;
  readonly observedAt: number;
  /** The `now` of the last reservation of this id. */
  readonly reservedAt: number;
  /**
   * Drawn from the home's revision counter by every reservation (so it grows
   * with each one, also across a forget: an id forgotten and reserved again
   * never gets a revision it had before): a verdict about an older revision
   * is ignored.
   */
  readonly rev: number;
  /** When the entry is next verified (also indexed at `["idreg", journal, "d", due, requestId]`). */
  readonly due: number;
}

/** A registry entry that is due for verification, as the caller needs it. */
export interface DueEntry {
  readonly requestId: string;
  readonly namespace: string;
  readonly subject: string;
  readonly rev: number;
}

/** The outcome of reserving one id. */
export type ReserveResult =
  | { readonly status: "reserved" }
  | { readonly status: "same" }
  | {
      readonly status: "conflict";
      /** `reservedAt + ID_SETTLE_MS <= now`: the entry may be forgotten if its key partition does not hold the event. */
      readonly settled: boolean;
      readonly namespace: string;
      readonly subject: string;
      readonly rev: number;
    };

/** The answer of `reserve`. */
export interface ReserveAnswer {
  readonly results: readonly ReserveResult[];
  /** Up to {@link REGISTRY_DUE_SCAN} due entries of this partition's registry (opportunistic verification). */
  readonly due: readonly DueEntry[];
}

/** A verdict on a due (or conflicting) entry: whether its key partition holds the event. */
export interface RegistryVerdict {
  readonly requestId: string;
  readonly rev: number;
  readonly held: boolean;
}

/**
 * Where a home's revision counter starts (the revision before its first):
 * above any revision an entry reached when revisions were counted per entry
 * (from 1 at each first reservation, one more per reservation again), so
 * that an entry stored then and forgotten now is never succeeded by one with
 * the same revision.
 */
const FIRST_REVISION_COUNTER = 2 ** 32;

/** The id registry's keys and transitions inside one transaction. */
class IdRegistry {
  /** The home's revision counter as this transaction left it (read on first use). */
  private lastRev: number | undefined;

  constructor(
    private readonly tx: EngineTransaction,
    private readonly journal: string,
    private readonly retainMs: number,
  ) {}

  /**
   * The next revision of this home: one more than the last one it issued, to
   * whatever entry. Revisions are never reused, so a verdict about an entry
   * that was forgotten (a delayed `settleRegistry`) cannot match the entry
   * that took its id over, and forget it while its event is stored.
   */
  private async nextRev(): Promise<number> {
    const key: Key = ["idreg", this.journal, "rev"];
    this.lastRev ??= (await this.tx.get<number>(key)) ?? FIRST_REVISION_COUNTER;
    this.lastRev += 1;
    this.tx.put(key, this.lastRev);
    return this.lastRev;
  }

  private entryKey(requestId: string): Key {
    return ["idreg", this.journal, "r", requestId];
  }

  private dueKey(due: number, requestId: string): Key {
    return ["idreg", this.journal, "d", due, requestId];
  }

  private write(requestId: string, entry: RegistryEntry, previous: RegistryEntry | undefined): void {
    if (previous !== undefined && previous.due !== entry.due) this.tx.delete(this.dueKey(previous.due, requestId));
    if (previous === undefined || previous.due !== entry.due) this.tx.put(this.dueKey(entry.due, requestId), 0);
    this.tx.put(this.entryKey(requestId), entry);
  }

  async reserve(item: IdReservation, now: number): Promise<ReserveResult> {
    const entry = await this.tx.get<RegistryEntry>(this.entryKey(item.requestId));
    if (entry === undefined) {
      const due = Math.max(item.observedAt + this.retainMs, now + ID_SETTLE_MS);
      const fresh: RegistryEntry = { namespace: item.namespace, subject: item.subject, fact: item.fact, observedAt: item.observedAt, reservedAt: now, rev: await this.nextRev(), due };
      this.write(item.requestId, fresh, undefined);
      return { status: "reserved" };
    }
    if (entry.fact === item.fact && entry.namespace === item.namespace && entry.subject === item.subject) {
      const reservedAt = Math.max(entry.reservedAt, now);
      this.write(item.requestId, { ...entry, reservedAt, rev: await this.nextRev(), due: Math.max(entry.due, reservedAt + ID_SETTLE_MS) }, entry);
      return { status: "same" };
    }
    return { status: "conflict", settled: entry.reservedAt + ID_SETTLE_MS <= now, namespace: entry.namespace, subject: entry.subject, rev: entry.rev };
  }

  async due(now: number, limit: number): Promise<DueEntry[]> {
    const prefix: Key = ["idreg", this.journal, "d"];
    const index = await this.tx.scan({ prefix, upper: [...prefix, now + 1], upperOpen: true }, { limit });
    const out: DueEntry[] = [];
    for (const { key } of index) {
      const requestId = key[key.length - 1] as string;
      const entry = await this.tx.get<RegistryEntry>(this.entryKey(requestId));
      if (entry !== undefined) out.push({ requestId, namespace: entry.namespace, subject: entry.subject, rev: entry.rev });
    }
    return out;
  }

  /** Apply one verdict; true when the entry was forgotten. */
  async settle(verdict: RegistryVerdict, now: number): Promise<boolean> {
    const entry = await this.tx.get<RegistryEntry>(this.entryKey(verdict.requestId));
    if (entry === undefined || entry.rev !== verdict.rev) return false;
    if (!verdict.held && entry.reservedAt + ID_SETTLE_MS <= now) {
      this.tx.delete(this.dueKey(entry.due, verdict.requestId));
      this.tx.delete(this.entryKey(verdict.requestId));
      return true;
    }
    const due = Math.max(entry.due, now + Math.max(this.retainMs, ID_SETTLE_MS));
    this.write(verdict.requestId, { ...entry, due }, entry);
    return false;
  }
}

function checkList<T>(what: string, list: unknown, max: number): readonly T[] {
  if (!Array.isArray(list) || list.length > max) throw new InvalidArgumentError(what, `must be an array of at most ${max} items`);
  return list as readonly T[];
}

function checkRequestIds(list: readonly { readonly requestId: unknown }[]): void {
  for (const item of list) {
    if (item === null || typeof item !== "object" || !isRequestId(item.requestId)) throw new InvalidArgumentError("requestId", "must be a UUIDv7 request id");
  }
}

/**
 * The fields of `reserve`'s items, which the registry stores as given: the
 * ordering key's parts as an event's are, the fact's hash a string, and
 * `observedAt` a clock reading (an entry is due from it: one past the
 * largest reading would never be verified, and stay for good).
 */
function checkReservations(list: readonly IdReservation[]): void {
  checkRequestIds(list);
  for (const item of list) {
    for (const field of ["namespace", "subject"] as const) {
      const part: unknown = item[field];
      if (typeof part !== "string" || part.length === 0 || part.length > MAX_ORDERING_PART_LENGTH) {
        throw new InvalidArgumentError(field, `must be a non-empty string of at most ${MAX_ORDERING_PART_LENGTH} characters`);
      }
    }
    if (checkText("fact", item.fact, 256).length === 0) throw new InvalidArgumentError("fact", "must be a non-empty string");
    checkInteger("observedAt", item.observedAt, 0, MAX_EPOCH_MS);
  }
}

/** The verdicts of `settleRegistry`: a revision is a safe integer, `held` a boolean (a string "false" is not). */
function checkVerdicts(list: readonly RegistryVerdict[]): void {
  checkRequestIds(list);
  for (const verdict of list) {
    checkInteger("rev", verdict.rev, 0);
    if (typeof verdict.held !== "boolean") throw new InvalidArgumentError("held", "must be a boolean");
  }
}

/**
 * The configuration a call carries, checked before anything is read or
 * stored (`PartitionedJournal` checks its own; another caller of the binding
 * may send anything): the first call to a new object stores it, so a
 * malformed one, refused or not, would have locked the object out of every
 * correct call for good.
 */
function checkConfig(config: unknown): PartitionConfig {
  if (config === null || typeof config !== "object") throw new InvalidArgumentError("config", "needs { journal, partitions, partition, capacity }");
  const { journal, partitions, partition, capacity } = config as Record<string, unknown>;
  const count = checkInteger("partitions", partitions, 1, MAX_PARTITIONS);
  return { journal: checkJournalName(journal), partitions: count, partition: checkInteger("partition", partition, 0, count - 1), capacity: checkCapacity(capacity as Capacity) };
}

/** A request id to look up: a string (one that is no UUIDv7 is simply not stored). */
function checkLookupId(requestId: unknown): string {
  return checkText("requestId", requestId, 256);
}

/** What every call tells a partition about the journal it belongs to. */
export interface PartitionConfig {
  /** The journal's name. */
  readonly journal: string;
  /** P: how many partitions the journal has (fixed when it is created). */
  readonly partitions: number;
  /** Which one this object is (0..P-1). */
  readonly partition: number;
  /** Capacity, applied to this partition alone. */
  readonly capacity: Capacity;
}

/** What a partition stores about itself. */
interface StoredConfig {
  readonly journal: string;
  readonly partitions: number;
  readonly partition: number;
}

const CONFIG_KEY = ["p", "config"];

/**
 * One partition of a partitioned usage journal (declare it with
 * `new_sqlite_classes` and bind it as a Durable Object namespace; address it
 * only through `PartitionedJournal`).
 *
 * @example
 * // wrangler.toml: a binding `PARTITIONS` of class_name "JournalPartition",
 * // and a migration with new_sqlite_classes = ["JournalPartition"].
 * import { parseConsumerId } from "isostore";
 * import { PartitionedJournal, PartitionedJournalMemory } from "isostore/durable-objects";
 * export { JournalPartition } from "isostore/durable-objects";
 *
 * const memory = new PartitionedJournalMemory();
 * export default {
 *   async fetch(request: Request, env: { PARTITIONS: DurableObjectNamespace }): Promise<Response> {
 *     const journal = new PartitionedJournal(env.PARTITIONS, { name: "usage", partitions: 4, memory });
 *     return Response.json(await journal.stats(parseConsumerId("billing")));
 *   },
 * };
 */
export class JournalPartition<Env = unknown> extends DurableObject<Env> {
  private readonly engine: Engine;
  private journal: UsageJournal | null = null;
  private checked: StoredConfig | null = null;
  private capacity: Capacity | null = null;
  /** The `now` of the call being started (read by the journal's clock). */
  private callNow: number | undefined;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.engine = durableObjectEngine(ctx.storage);
  }

  /** The hosted journal, after checking (and on first use storing) the configuration. */
  private async open(sent: PartitionConfig): Promise<UsageJournal> {
    const config = checkConfig(sent);
    const checked = this.checked;
    if (checked === null || checked.journal !== config.journal || checked.partitions !== config.partitions || checked.partition !== config.partition) {
      const wanted: StoredConfig = { journal: config.journal, partitions: config.partitions, partition: config.partition };
      const stored = await this.engine.transact("readwrite", async (tx) => {
        const existing = await tx.get<StoredConfig>(CONFIG_KEY);
        if (existing === undefined) tx.put(CONFIG_KEY, wanted);
        return existing ?? wanted;
      });
      if (stored.journal !== wanted.journal || stored.partitions !== wanted.partitions || stored.partition !== wanted.partition) {
        throw new InvalidArgumentError(
          "partitions",
          `journal \`${stored.journal}\` was created with ${stored.partitions} partitions (this object is partition ${stored.partition}); ` +
            `it cannot be opened with ${wanted.partitions} (as \`${wanted.journal}\` partition ${wanted.partition})`,
        );
      }
      this.checked = stored;
      this.journal = null;
    }
    if (this.journal === null || !sameCapacity(this.capacity, config.capacity)) {
      this.capacity = checkCapacity(config.capacity);
      this.journal = createJournal(this.engine, { name: config.journal, capacity: this.capacity, clock: () => this.callNow ?? Date.now() });
    }
    return this.journal;
  }

  /** Serve one journal call with the caller's clock reading. */
  private serve<T>(config: PartitionConfig, now: number, call: (journal: UsageJournal) => Promise<T>): Promise<WireOutcome<T>> {
    return toWire(async () => {
      // The caller's clock reading is the journal's clock for this call: checked like any `now`
      // (a bad one, NaN or 1e300, would prune acknowledged events still inside their window).
      const at = checkNow("now", now);
      const journal = await this.open(config);
      this.callNow = at;
      let pending: Promise<T>;
      try {
        pending = call(journal);
      } finally {
        this.callNow = undefined;
      }
      return pending;
    });
  }

  async append(config: PartitionConfig, now: number, event: UsageEvent): Promise<WireOutcome<AppendResult>> {
    return this.serve(config, now, (journal) => journal.append(event));
  }

  async appendBatch(config: PartitionConfig, now: number, events: readonly UsageEvent[]): Promise<WireOutcome<WireBatchResult[]>> {
    return this.serve(config, now, async (journal) => encodeBatch(await journal.appendBatch(events)));
  }

  /**
   * A claim of the hosted journal, of at most {@link CLAIM_RPC_EVENTS}
   * events whatever `maxEvents` asks (a valid larger one is lowered): the
   * leases are taken before the reply is serialized, so a reply over the RPC
   * limit would lease events nobody receives. `maxBytes` is kept as given.
   *
   * `continued` says that this RPC continues a claim whose earlier RPCs
   * handed out deliveries, and that `maxBytes` is what is left of its bound:
   * then the first delivery must fit it too (`claimContinuing`). A claim of
   * the core always hands out its first delivery, but the first of a later
   * RPC is not the claim's first, and one claim of the core would stop
   * before it. When it does not fit the answer is `[]` and nothing is
   * leased; the claim's prune, sweep and quarantines of events out of
   * attempts met on the way commit, as in one claim of the core.
   */
  async claim(config: PartitionConfig, now: number, consumer: ConsumerId, options: ClaimOptions, continued = false): Promise<WireOutcome<Delivery[]>> {
    const within = lowered(options, "maxEvents", CLAIM_RPC_EVENTS, MAX_CLAIM_EVENTS);
    if (continued === true) return this.serve(config, now, (journal) => claimContinuing(journal, consumer, within));
    return this.serve(config, now, (journal) => journal.claim(consumer, within));
  }

  async ack(config: PartitionConfig, now: number, delivery: DeliveryId): Promise<WireOutcome<void>> {
    return this.serve(config, now, (journal) => journal.ack(delivery));
  }

  async ackBatch(config: PartitionConfig, now: number, deliveries: readonly DeliveryId[]): Promise<WireOutcome<WireAckResult[]>> {
    return this.serve(config, now, async (journal) => encodeAcks(await journal.ackBatch(deliveries)));
  }

  async quarantine(config: PartitionConfig, now: number, delivery: DeliveryId, reason: PoisonReason): Promise<WireOutcome<void>> {
    return this.serve(config, now, (journal) => journal.quarantine(delivery, reason));
  }

  async extend(config: PartitionConfig, now: number, delivery: DeliveryId, options: ExtendOptions): Promise<WireOutcome<{ leaseExpiresAt: number }>> {
    return this.serve(config, now, (journal) => journal.extend(delivery, options));
  }

  async nack(config: PartitionConfig, now: number, delivery: DeliveryId, options: NackOptions): Promise<WireOutcome<void>> {
    return this.serve(config, now, (journal) => journal.nack(delivery, options));
  }

  async stats(config: PartitionConfig, now: number, consumer: ConsumerId): Promise<WireOutcome<JournalStats>> {
    return this.serve(config, now, (journal) => journal.stats(consumer));
  }

  async attempts(config: PartitionConfig, now: number, consumer: ConsumerId, requestId: string): Promise<WireOutcome<Attempt[]>> {
    return this.serve(config, now, (journal) => journal.attempts(consumer, requestId));
  }

  /**
   * A page of the hosted journal's quarantine listing, of at most
   * {@link QUARANTINE_RPC_ITEMS} items (a valid larger `limit`, or the
   * default 100, is lowered; the page then has a cursor when more follow).
   */
  async listQuarantined(config: PartitionConfig, now: number, consumer: ConsumerId, options: ListQuarantinedOptions): Promise<WireOutcome<QuarantinePage>> {
    return this.serve(config, now, (journal) => journal.listQuarantined(consumer, lowered(options, "limit", QUARANTINE_RPC_ITEMS, 1000, 100)));
  }

  async release(config: PartitionConfig, now: number, consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<WireOutcome<void>> {
    return this.serve(config, now, (journal) => journal.release(consumer, requestId, options));
  }

  async discard(config: PartitionConfig, now: number, consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<WireOutcome<void>> {
    return this.serve(config, now, (journal) => journal.discard(consumer, requestId, options));
  }

  async listAudit(config: PartitionConfig, now: number, options: ListAuditOptions): Promise<WireOutcome<AuditPage>> {
    return this.serve(config, now, (journal) => journal.listAudit(options));
  }

  async prune(config: PartitionConfig, now: number, options: PruneOptions): Promise<WireOutcome<{ pruned: number }>> {
    return this.serve(config, now, (journal) => journal.prune(options));
  }

  /** Check (and on first use store) the configuration; nothing else. */
  async hello(config: PartitionConfig): Promise<WireOutcome<void>> {
    return toWire(async () => {
      await this.open(config);
    });
  }

  /**
   * Register `consumer` here if it is not: what its first claim at `now` (the
   * claim's `now`) would do, without claiming (`registerContinuing`). Like
   * that claim's registration, it prunes every event whose window has passed
   * at `now` (as its walk reaches it), so a consumer registering after an
   * event's window does not bring the event back. Without `now` (an older
   * caller), it only registers. Answers whether the consumer is registered
   * here now: over a large backlog a registration takes several calls (each
   * walks a bounded number of events; a claim here goes on with it too).
   */
  async register(config: PartitionConfig, consumer: ConsumerId, now?: number): Promise<WireOutcome<boolean>> {
    return toWire(async () => {
      const id = parseConsumerId(consumer);
      const pruneAt = now === undefined ? null : checkNow("now", now);
      return registerContinuing(await this.open(config), id, pruneAt);
    });
  }

  /**
   * Id registry: reserve request ids, in order, in one transaction (see the
   * module comment). A conflict changes nothing.
   */
  async reserve(config: PartitionConfig, now: number, items: readonly IdReservation[]): Promise<WireOutcome<ReserveAnswer>> {
    return toWire(async () => {
      const list = checkList<IdReservation>("items", items, 1000);
      checkReservations(list);
      checkNow("now", now);
      const journal = await this.open(config);
      return this.engine.transact("readwrite", async (tx) => {
        const registry = new IdRegistry(tx, journal.name, journal.capacity.retainAcknowledgedMs);
        const results: ReserveResult[] = [];
        for (const item of list) results.push(await registry.reserve(item, now));
        return { results, due: await registry.due(now, REGISTRY_DUE_SCAN) };
      });
    });
  }

  /** Id registry: up to `limit` (1..1000) entries due for verification at `now`, oldest first. */
  async registryDue(config: PartitionConfig, now: number, limit: number): Promise<WireOutcome<DueEntry[]>> {
    return toWire(async () => {
      if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) throw new InvalidArgumentError("limit", "must be an integer from 1 to 1000");
      checkNow("now", now);
      const journal = await this.open(config);
      return this.engine.transact("readonly", (tx) => new IdRegistry(tx, journal.name, journal.capacity.retainAcknowledgedMs).due(now, limit));
    });
  }

  /** Id registry: apply verdicts (forget what is settled and not held, reschedule the rest); answers how many entries were forgotten. */
  async settleRegistry(config: PartitionConfig, now: number, verdicts: readonly RegistryVerdict[]): Promise<WireOutcome<{ forgotten: number }>> {
    return toWire(async () => {
      const list = checkList<RegistryVerdict>("verdicts", verdicts, 1000);
      checkVerdicts(list);
      checkNow("now", now);
      const journal = await this.open(config);
      return this.engine.transact("readwrite", async (tx) => {
        const registry = new IdRegistry(tx, journal.name, journal.capacity.retainAcknowledgedMs);
        let forgotten = 0;
        for (const verdict of list) if (await registry.settle(verdict, now)) forgotten++;
        return { forgotten };
      });
    });
  }

  /**
   * At least as many events as `claim(consumer, { maxEvents: limit, now })`
   * could lease here, capped at `limit` (one read transaction; see
   * `Work.claimableAtMost`): how a claim smaller than P finds the partitions
   * worth asking without asking each in turn. 0 for a consumer not
   * registered here (it has nothing ready yet).
   */
  async claimable(config: PartitionConfig, consumer: ConsumerId, now: number, limit: number): Promise<WireOutcome<number>> {
    return toWire(async () => {
      const id = parseConsumerId(consumer);
      const at = checkNow("now", now);
      const cap = checkInteger("limit", limit, 1, MAX_CLAIM_EVENTS);
      const journal = await this.open(config);
      return this.engine.transact("readonly", async (tx) => new Work(tx, new Layout(journal.name), journal.capacity).claimableAtMost(id, at, cap));
    });
  }

  /** Whether this partition stores each of these request ids (one read transaction). */
  async holdsMany(config: PartitionConfig, requestIds: readonly string[]): Promise<WireOutcome<boolean[]>> {
    return toWire(async () => {
      const list = checkList<string>("requestIds", requestIds, 1000).map(checkLookupId);
      const journal = await this.open(config);
      return this.engine.transact("readonly", async (tx) => {
        const work = new Work(tx, new Layout(journal.name), journal.capacity);
        return Promise.all(list.map(async (requestId) => (await work.positionOf(requestId)) !== undefined));
      });
    });
  }

  /** Whether this partition stores an event with this request id. */
  async holds(config: PartitionConfig, requestId: string): Promise<WireOutcome<boolean>> {
    return toWire(async () => {
      const id = checkLookupId(requestId);
      const journal = await this.open(config);
      return this.engine.transact("readonly", async (tx) => {
        const work = new Work(tx, new Layout(journal.name), journal.capacity);
        return (await work.positionOf(id)) !== undefined;
      });
    });
  }
}

/**
 * `options` with its count `field` (`fallback` when absent) lowered to
 * `most` when it is a valid count above it (at most `max`, the largest the
 * journal accepts); anything else is left for the journal to check and
 * refuse as it would.
 */
function lowered<T extends object, K extends keyof T & string>(options: T, field: K, most: number, max: number, fallback?: number): T {
  if (options === null || typeof options !== "object") return options;
  const value = options[field] ?? fallback;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value <= most || value > max) return options;
  return { ...options, [field]: most };
}

function sameCapacity(a: Capacity | null, b: Capacity): boolean {
  return (
    a !== null &&
    b !== null &&
    typeof b === "object" &&
    a.maxEvents === b.maxEvents &&
    a.maxDeliveryAttempts === b.maxDeliveryAttempts &&
    a.retainAcknowledgedMs === b.retainAcknowledgedMs &&
    a.policy === b.policy
  );
}
