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
 * - `append` goes to its key's partition; `appendBatch` is validated here
 *   (an invalid event is rejected in place), split per partition and sent
 *   concurrently; each partition's share is one transaction, and the results
 *   come back in the order of the input. If one partition fails, the batch
 *   rejects although other partitions may have stored their share: retrying
 *   the batch is safe, since appends are idempotent on the request id.
 * - `claim` fans out in rounds: what is left of `maxEvents` is split evenly
 *   over the partitions that may still have events, the remainder going to
 *   partitions from a start that rotates with every claim (so with
 *   `maxEvents < P` every partition still gets its turn); a partition that
 *   hands out less than its share leaves the rounds. At most `maxEvents`
 *   events in all; each round fills the claim or drops a partition. One in
 *   flight per key holds because a key lives in one partition. A partition
 *   the claim did not reach is still told to register the consumer (once per
 *   instance), so no partition prunes events a consumer has not seen. When a
 *   partition fails during a claim that got deliveries elsewhere, those
 *   deliveries are returned and the failure goes to `onIgnoredError`; with no
 *   delivery at all, the claim rejects. The result is merged by `observedAt`
 *   (then request id, a UUIDv7 that sorts by minting time), keeping each
 *   partition's order.
 * - A `DeliveryId` (`consumer`, `event`, `attempt`) does not name a key, so
 *   `ack`, `nack`, `extend`, `quarantine`, `release`, `discard` and
 *   `attempts` go to the partition that stores the request id: first the
 *   partition this instance saw the event in (an in-memory hint filled by
 *   `append`, `appendBatch` and `claim`, at most 10,000 ids); when there is
 *   no hint, or the hinted partition answers that it does not have the event
 *   outstanding, every partition is asked whether it stores the id (`holds`,
 *   read-only, concurrent) and the call goes to the one that does. A delivery
 *   whose event no partition stores is `not_outstanding` (`not_quarantined`
 *   for operator actions, `[]` for `attempts`). No routing record is stored,
 *   so any worker instance can route any delivery.
 * - `stats` sums the partitions (pending, in flight, quarantined, dropped) and
 *   takes the largest `oldestPendingAgeMs`; `listQuarantined` and `listAudit`
 *   merge the partitions' pages (by `quarantinedAt` / `at`, each partition
 *   keeping its own order), with cursors that carry one position per
 *   partition (`"qp1.p0.p1..."` / `"ap1.s0.s1..."`); `prune` visits the
 *   partitions in turn until `limit` is used up.
 *
 * Where P > 1 differs from one journal (by design; the P = 4 conformance run
 * lists the examples this excludes): positions, audit `seq`, capacity
 * (`maxEvents`, `dropped`) and opportunistic pruning are per partition, and
 * `stats().capacity` is the per-partition capacity; claim order across
 * partitions is by `observedAt`, not by one global position, and
 * `oldestPendingAgeMs` is the largest partition's; a request id re-used with
 * a different ordering key is detected as a conflict only when both keys
 * share a partition. With P = 1 every call is forwarded unchanged, so the
 * journal behaves exactly like `createJournal` (the full conformance suite
 * checks this).
 *
 * Time: every call sends this instance's clock reading (`options.clock`,
 * default `Date.now`) to the partition, which uses it as its journal's clock.
 *
 * Failures: an RPC call that throws (object overloaded, reset, network)
 * becomes a `BackendError` with the platform error (as a
 * `DurableObjectEngineError`) as `cause` and its `retryable`; the stub is
 * dropped and recreated on the next call.
 */
import { InvalidArgumentError, JournalError, NotOutstandingError, NotQuarantinedError } from "../../src/journal/errors.js";
import {
  BILLING_GRADE,
  checkCapacity,
  checkDeliveryId,
  checkInteger,
  checkJournalName,
  checkText,
  checkUsageEvent,
  isRequestId,
  parseConsumerId,
} from "../../src/journal/event.js";
import { MAX_BATCH_EVENTS, MAX_CLAIM_EVENTS, MAX_LEASE_MS } from "../../src/journal/journal.js";
import type {
  AppendResult,
  Attempt,
  AuditEntry,
  AuditPage,
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
} from "../../src/journal/types.js";
import { backendError } from "./errors.js";
import { partitionOf } from "./hash.js";
import type { PartitionConfig } from "./partition.js";
import { decodeBatch, decodeError, type WireBatchResult, type WireOutcome } from "./wire.js";

/** The largest P. */
export const MAX_PARTITIONS = 256;
/** How many request id -> partition hints an instance keeps. */
const HINTS = 10_000;

/** The RPC surface of a `JournalPartition` stub, as this module calls it. */
export interface PartitionStub {
  hello(config: PartitionConfig): Promise<WireOutcome<void>>;
  append(config: PartitionConfig, now: number, event: UsageEvent): Promise<WireOutcome<AppendResult>>;
  appendBatch(config: PartitionConfig, now: number, events: readonly UsageEvent[]): Promise<WireOutcome<WireBatchResult[]>>;
  claim(config: PartitionConfig, now: number, consumer: ConsumerId, options: ClaimOptions): Promise<WireOutcome<Delivery[]>>;
  ack(config: PartitionConfig, now: number, delivery: DeliveryId): Promise<WireOutcome<void>>;
  quarantine(config: PartitionConfig, now: number, delivery: DeliveryId, reason: PoisonReason): Promise<WireOutcome<void>>;
  extend(config: PartitionConfig, now: number, delivery: DeliveryId, options: ExtendOptions): Promise<WireOutcome<{ leaseExpiresAt: number }>>;
  nack(config: PartitionConfig, now: number, delivery: DeliveryId, options: NackOptions): Promise<WireOutcome<void>>;
  stats(config: PartitionConfig, now: number, consumer: ConsumerId): Promise<WireOutcome<JournalStats>>;
  attempts(config: PartitionConfig, now: number, consumer: ConsumerId, requestId: string): Promise<WireOutcome<Attempt[]>>;
  listQuarantined(config: PartitionConfig, now: number, consumer: ConsumerId, options: ListQuarantinedOptions): Promise<WireOutcome<QuarantinePage>>;
  release(config: PartitionConfig, now: number, consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<WireOutcome<void>>;
  discard(config: PartitionConfig, now: number, consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<WireOutcome<void>>;
  listAudit(config: PartitionConfig, now: number, options: { readonly limit?: number; readonly after?: string | null }): Promise<WireOutcome<AuditPage>>;
  prune(config: PartitionConfig, now: number, options: PruneOptions): Promise<WireOutcome<{ pruned: number }>>;
  register(config: PartitionConfig, consumer: ConsumerId): Promise<WireOutcome<void>>;
  holds(config: PartitionConfig, requestId: string): Promise<WireOutcome<boolean>>;
}

/** The narrow part of a `DurableObjectNamespace` binding used here (pass `env.YOUR_BINDING`). */
export interface PartitionNamespace {
  idFromName(name: string): unknown;
  get(id: never): unknown;
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
}

const QUARANTINE_CURSOR = "qp1.";
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
 * A usage journal over P `JournalPartition` objects (see the module comment
 * for routing, merging and where P > 1 differs from a single journal).
 *
 * @example
 * ```ts
 * import { PartitionedJournal } from "isostore/durable-objects";
 *
 * export default {
 *   async fetch(request: Request, env: { PARTITIONS: DurableObjectNamespace }) {
 *     const journal = new PartitionedJournal(env.PARTITIONS, { name: "usage", partitions: 8 });
 *     const result = await journal.append(event); // resolves once the owning partition stored it
 *     return Response.json(result);
 *   },
 * };
 * ```
 */
export class PartitionedJournal implements UsageJournal {
  readonly name: string;
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
  private rotation = 0;
  private readonly hints = new Map<string, number>();
  private readonly registered = new Set<string>();

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
    if (this.handshake === null) {
      this.handshake = this.send(0, "open", (stub, config) => stub.hello(config));
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
    const result = await this.call(p, "append", (stub, config) => stub.append(config, now, checked));
    this.hint(checked.id, p);
    return result;
  }

  async appendBatch(events: readonly UsageEvent[]): Promise<BatchAppendResult[]> {
    const now = this.clock();
    if (this.partitions === 1) return decodeBatch(await this.call(0, "appendBatch", (stub, config) => stub.appendBatch(config, now, events)));
    const list: unknown = events;
    if (!Array.isArray(list)) throw new InvalidArgumentError("events", "must be an array of usage events");
    if (events.length > MAX_BATCH_EVENTS) {
      throw new InvalidArgumentError("events", `a batch holds at most ${MAX_BATCH_EVENTS} events, got ${events.length}`);
    }
    const results = new Array<BatchAppendResult | undefined>(events.length);
    const shares = new Map<number, { events: UsageEvent[]; indexes: number[] }>();
    events.forEach((event, index) => {
      let checked: UsageEvent;
      try {
        checked = checkUsageEvent(event);
      } catch (error) {
        if (!(error instanceof JournalError)) throw error;
        results[index] = { status: "rejected", error };
        return;
      }
      const p = this.partitionOf(checked.orderingKey.namespace, checked.orderingKey.subject);
      let share = shares.get(p);
      if (share === undefined) shares.set(p, (share = { events: [], indexes: [] }));
      share.events.push(checked);
      share.indexes.push(index);
    });
    await Promise.all(
      [...shares].map(async ([p, share]) => {
        const answers = decodeBatch(await this.call(p, "appendBatch", (stub, config) => stub.appendBatch(config, now, share.events)));
        answers.forEach((answer, i) => {
          const index = share.indexes[i]!;
          results[index] = answer;
          if (answer.status !== "rejected") this.hint(share.events[i]!.id, p);
        });
      }),
    );
    return results as BatchAppendResult[];
  }

  // ------------------------------------------------------------- claim

  async claim(consumer: ConsumerId, options: ClaimOptions): Promise<Delivery[]> {
    const now = this.clock();
    if (this.partitions === 1) return this.call(0, "claim", (stub, config) => stub.claim(config, now, consumer, options));
    const id = parseConsumerId(consumer);
    if (options === null || typeof options !== "object") throw new InvalidArgumentError("options", "claim needs { maxEvents, leaseMs, now }");
    const maxEvents = checkInteger("maxEvents", options.maxEvents, 1, MAX_CLAIM_EVENTS);
    const leaseMs = checkInteger("leaseMs", options.leaseMs, 1, MAX_LEASE_MS);
    const claimNow = checkInteger("now", options.now, 0);
    await this.ready();
    const start = this.rotation;
    this.rotation = (this.rotation + 1) % this.partitions;
    const got: Delivery[][] = this.all().map(() => []);
    const asked = new Set<number>();
    // Rounds: split what is left evenly over the partitions that may still have
    // events (the remainder from a start that rotates per claim); a partition
    // that hands out less than its share is out of events and leaves the
    // round-robin. Each round either fills the claim or drops a partition.
    let candidates = this.all();
    let left = maxEvents;
    const failures: unknown[] = [];
    for (let round = 0; left > 0 && candidates.length > 0; round++) {
      const shares = this.split(left, candidates, start + round);
      const out = new Set<number>();
      await Promise.all(
        candidates.map(async (p, i) => {
          const share = shares[i]!;
          if (share === 0) return;
          asked.add(p);
          let deliveries: Delivery[];
          try {
            deliveries = await this.send(p, "claim", (stub, config) => stub.claim(config, now, id, { maxEvents: share, leaseMs, now: claimNow }));
          } catch (error) {
            failures.push(error);
            out.add(p);
            return;
          }
          this.registered.add(`${id}#${p}`);
          got[p]!.push(...deliveries);
          for (const delivery of deliveries) this.hint(delivery.id.event, p);
          left -= deliveries.length;
          if (deliveries.length < share) out.add(p);
        }),
      );
      candidates = candidates.filter((p) => !out.has(p));
    }
    const handed = got.reduce((sum, list) => sum + list.length, 0);
    // A failing partition must not cost the deliveries others already leased:
    // they are returned, and the failure is reported to onIgnoredError. With
    // nothing to return, the (first) failure is the claim's error.
    if (failures.length > 0) {
      if (handed === 0) throw failures[0];
      for (const failure of failures) this.onIgnoredError(failure);
    }
    // A partition this claim did not reach still registers the consumer (once per instance).
    await Promise.all(
      this.all().map(async (p) => {
        if (asked.has(p) || this.registered.has(`${id}#${p}`)) return;
        await this.send(p, "register", (stub, config) => stub.register(config, id));
        this.registered.add(`${id}#${p}`);
      }),
    );
    return mergeHeads(got, (a, b) => a.event.observedAt < b.event.observedAt || (a.event.observedAt === b.event.observedAt && a.event.id < b.event.id), maxEvents).map(({ item }) => item);
  }

  /** Split `total` over `targets` evenly, the remainder going to the targets from `start` on (rotating). */
  private split(total: number, targets: readonly number[], start: number): number[] {
    const n = targets.length;
    const base = Math.floor(total / n);
    const extra = total % n;
    const first = start % n;
    return targets.map((_, i) => base + ((i - first + n) % n < extra ? 1 : 0));
  }

  // ------------------------------------------------- routed by request id

  /** The partition that stores `requestId`, asking every partition; null when none does. */
  private async lookup(requestId: string): Promise<number | null> {
    await this.ready();
    const held = await Promise.all(this.all().map((p) => this.send(p, "holds", (stub, config) => stub.holds(config, requestId))));
    const p = held.indexOf(true);
    if (p === -1) return null;
    this.hint(requestId, p);
    return p;
  }

  /**
   * Run `call` on the partition holding `requestId`: the hinted one first;
   * when it answers that it does not hold the event, (or there is no hint),
   * the one `lookup` finds. `missing` answers when no partition holds it.
   */
  private async routed<T>(requestId: string, call: (p: number) => Promise<T>, absent: (error: unknown) => boolean, missing: () => T): Promise<T> {
    if (this.partitions === 1) return call(0);
    const hinted = this.hints.get(requestId);
    if (hinted !== undefined) {
      try {
        return await call(hinted);
      } catch (error) {
        if (!absent(error)) throw error;
      }
    }
    const p = await this.lookup(requestId);
    if (p === null) return missing();
    return call(p);
  }

  private routedDelivery<T>(delivery: DeliveryId, what: string, call: (stub: PartitionStub, config: PartitionConfig, id: DeliveryId) => Promise<WireOutcome<T>>): Promise<T> {
    if (this.partitions === 1) return this.call(0, what, (stub, config) => call(stub, config, delivery));
    const id = checkDeliveryId(delivery);
    const copy: DeliveryId = { consumer: id.consumer, event: id.event, attempt: id.attempt };
    return this.routed(
      copy.event,
      (p) => this.call(p, what, (stub, config) => call(stub, config, copy)),
      (error) => error instanceof NotOutstandingError,
      () => {
        throw new NotOutstandingError(copy, "the event is not journaled");
      },
    );
  }

  ack(delivery: DeliveryId): Promise<void> {
    const now = this.clock();
    return this.routedDelivery(delivery, "ack", (stub, config, id) => stub.ack(config, now, id));
  }

  quarantine(delivery: DeliveryId, reason: PoisonReason): Promise<void> {
    const now = this.clock();
    return this.routedDelivery(delivery, "quarantine", (stub, config, id) => stub.quarantine(config, now, id, reason));
  }

  extend(delivery: DeliveryId, options: ExtendOptions): Promise<{ leaseExpiresAt: number }> {
    const now = this.clock();
    return this.routedDelivery(delivery, "extend", (stub, config, id) => stub.extend(config, now, id, options));
  }

  nack(delivery: DeliveryId, options: NackOptions): Promise<void> {
    const now = this.clock();
    return this.routedDelivery(delivery, "nack", (stub, config, id) => stub.nack(config, now, id, options));
  }

  async attempts(consumer: ConsumerId, requestId: string): Promise<Attempt[]> {
    const now = this.clock();
    if (this.partitions === 1) return this.call(0, "attempts", (stub, config) => stub.attempts(config, now, consumer, requestId));
    const id = parseConsumerId(consumer);
    if (!isRequestId(requestId)) throw new InvalidArgumentError("requestId", "must be a UUIDv7 request id");
    const p = await this.lookup(requestId);
    if (p === null) return [];
    return this.call(p, "attempts", (stub, config) => stub.attempts(config, now, id, requestId));
  }

  private operate(action: "release" | "discard", consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<void> {
    const now = this.clock();
    const send = (stub: PartitionStub, config: PartitionConfig, id: ConsumerId, opts: OperatorActionOptions) =>
      action === "release" ? stub.release(config, now, id, requestId, opts) : stub.discard(config, now, id, requestId, opts);
    if (this.partitions === 1) return this.call(0, action, (stub, config) => send(stub, config, consumer, options));
    const id = parseConsumerId(consumer);
    if (!isRequestId(requestId)) throw new InvalidArgumentError("requestId", "must be a UUIDv7 request id");
    if (options === null || typeof options !== "object") throw new InvalidArgumentError("options", `${action} needs { now }`);
    checkInteger("now", options.now, 0);
    if (options.actor !== undefined) checkText("actor", options.actor, 200);
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

  async listQuarantined(consumer: ConsumerId, options: ListQuarantinedOptions = {}): Promise<QuarantinePage> {
    const now = this.clock();
    if (this.partitions === 1) return this.call(0, "listQuarantined", (stub, config) => stub.listQuarantined(config, now, consumer, options));
    const id = parseConsumerId(consumer);
    const limit = checkInteger("limit", options.limit ?? 100, 1, 1000);
    const after = parseCursor(QUARANTINE_CURSOR, options.after, this.partitions);
    const query = options.query === undefined ? undefined : checkText("query", options.query, 200);
    await this.ready();
    const pages = await Promise.all(
      this.all().map((p) =>
        this.send(p, "listQuarantined", (stub, config) =>
          stub.listQuarantined(config, now, id, { limit, after: after[p]! > 0 ? `q1.${after[p]}` : null, ...(query === undefined ? {} : { query }) }),
        ),
      ),
    );
    const lists = pages.map((page) => page.items);
    const taken = mergeHeads<QuarantinedEvent>(lists, (a, b) => a.quarantinedAt < b.quarantinedAt, limit);
    const cursor = [...after];
    const used = this.all().map(() => 0);
    for (const { item, partition } of taken) {
      cursor[partition] = item.position;
      used[partition]! += 1;
    }
    const more = pages.some((page, p) => used[p]! < page.items.length || page.nextCursor !== null);
    return { items: taken.map(({ item }) => item), nextCursor: more ? `${QUARANTINE_CURSOR}${cursor.join(".")}` : null };
  }

  async listAudit(options: { readonly limit?: number; readonly after?: string | null } = {}): Promise<AuditPage> {
    const now = this.clock();
    if (this.partitions === 1) return this.call(0, "listAudit", (stub, config) => stub.listAudit(config, now, options));
    const limit = checkInteger("limit", options.limit ?? 100, 1, 1000);
    const after = parseCursor(AUDIT_CURSOR, options.after, this.partitions);
    await this.ready();
    const pages = await Promise.all(
      this.all().map((p) => this.send(p, "listAudit", (stub, config) => stub.listAudit(config, now, { limit, after: after[p]! > 0 ? `a1.${after[p]}` : null }))),
    );
    const taken = mergeHeads<AuditEntry>(
      pages.map((page) => page.items),
      (a, b) => a.at < b.at,
      limit,
    );
    const cursor = [...after];
    const used = this.all().map(() => 0);
    for (const { item, partition } of taken) {
      cursor[partition] = item.seq;
      used[partition]! += 1;
    }
    const more = pages.some((page, p) => used[p]! < page.items.length || page.nextCursor !== null);
    return { items: taken.map(({ item }) => item), nextCursor: more ? `${AUDIT_CURSOR}${cursor.join(".")}` : null };
  }

  async prune(options: PruneOptions): Promise<{ pruned: number }> {
    const now = this.clock();
    if (this.partitions === 1) return this.call(0, "prune", (stub, config) => stub.prune(config, now, options));
    if (options === null || typeof options !== "object") throw new InvalidArgumentError("options", "prune needs { now }");
    const pruneNow = checkInteger("now", options.now, 0);
    const limit = checkInteger("limit", options.limit ?? 1000, 1, 100_000);
    await this.ready();
    let pruned = 0;
    for (const p of this.all()) {
      if (pruned >= limit) break;
      const part = await this.send(p, "prune", (stub, config) => stub.prune(config, now, { now: pruneNow, limit: limit - pruned }));
      pruned += part.pruned;
    }
    return { pruned };
  }
}
