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
 *
 * Two calls go beside the journal's public surface, through the core's
 * `Work` / `Layout` (the journal's internal layer; this file is the one place
 * the adapter depends on it): `register` (a consumer that claimed anywhere
 * must be registered in every partition, or a partition it never claimed
 * from could prune events it has not seen) and `holds` (whether the
 * partition stores a request id: how deliveries are routed).
 */
/// <reference types="@cloudflare/workers-types" />
import { DurableObject } from "cloudflare:workers";
import { createJournal } from "../../src/journal/journal.js";
import { InvalidArgumentError } from "../../src/journal/errors.js";
import { checkCapacity, parseConsumerId } from "../../src/journal/event.js";
import { Layout } from "../../src/journal/layout.js";
import { Work } from "../../src/journal/work.js";
import type {
  AppendResult,
  Attempt,
  AuditPage,
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
import { durableObjectEngine } from "./engine.js";
import { encodeBatch, toWire, type WireBatchResult, type WireOutcome } from "./wire.js";

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
  private async open(config: PartitionConfig): Promise<UsageJournal> {
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
      const journal = await this.open(config);
      this.callNow = now;
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

  async claim(config: PartitionConfig, now: number, consumer: ConsumerId, options: ClaimOptions): Promise<WireOutcome<Delivery[]>> {
    return this.serve(config, now, (journal) => journal.claim(consumer, options));
  }

  async ack(config: PartitionConfig, now: number, delivery: DeliveryId): Promise<WireOutcome<void>> {
    return this.serve(config, now, (journal) => journal.ack(delivery));
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

  async listQuarantined(config: PartitionConfig, now: number, consumer: ConsumerId, options: ListQuarantinedOptions): Promise<WireOutcome<QuarantinePage>> {
    return this.serve(config, now, (journal) => journal.listQuarantined(consumer, options));
  }

  async release(config: PartitionConfig, now: number, consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<WireOutcome<void>> {
    return this.serve(config, now, (journal) => journal.release(consumer, requestId, options));
  }

  async discard(config: PartitionConfig, now: number, consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<WireOutcome<void>> {
    return this.serve(config, now, (journal) => journal.discard(consumer, requestId, options));
  }

  async listAudit(config: PartitionConfig, now: number, options: { readonly limit?: number; readonly after?: string | null }): Promise<WireOutcome<AuditPage>> {
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

  /** Register `consumer` here if it is not (what its first claim would do, without claiming). */
  async register(config: PartitionConfig, consumer: ConsumerId): Promise<WireOutcome<void>> {
    return toWire(async () => {
      const id = parseConsumerId(consumer);
      const journal = await this.open(config);
      await this.engine.transact("readwrite", async (tx) => {
        const work = new Work(tx, new Layout(journal.name), journal.capacity);
        if (!(await work.isRegistered(id))) await work.register(id);
        work.flush();
      });
    });
  }

  /** Whether this partition stores an event with this request id. */
  async holds(config: PartitionConfig, requestId: string): Promise<WireOutcome<boolean>> {
    return toWire(async () => {
      const journal = await this.open(config);
      return this.engine.transact("readonly", async (tx) => {
        const work = new Work(tx, new Layout(journal.name), journal.capacity);
        return (await work.positionOf(requestId)) !== undefined;
      });
    });
  }
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
