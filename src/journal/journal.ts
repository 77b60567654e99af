/**
 * `createJournal`: the usage journal, implemented once over any Engine.
 *
 * This file is the public boundary: it validates every input (a refused call
 * changes nothing), opens one engine transaction per call, applies the gates
 * of `docs/journal-semantics.md`, and turns engine failures into
 * `BackendError`s with the engine's error as `cause`. The state transitions
 * themselves live in `work.ts`; the key layout in `layout.ts`. The journal
 * keeps no state outside the engine, so a new journal over the same engine
 * continues exactly where an old one stopped.
 */
import type { Engine, Entry, TransactionMode, TransactOptions } from "../engine.js";
import {
  AlreadyAcknowledgedError,
  BackendError,
  InvalidArgumentError,
  JournalError,
  NotOutstandingError,
  NotQuarantinedError,
  QuarantinedError,
} from "./errors.js";
import {
  BILLING_GRADE,
  checkCapacity,
  checkDeliveryId,
  checkJournalName,
  checkUsageEvent,
  parseConsumerId,
} from "./event.js";
import {
  MAX_BATCH_EVENTS,
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
} from "./arguments.js";
import { Layout, type EventRow, type QuarantineRow, type UnfinishedRow } from "./layout.js";
import type {
  AppendResult,
  Attempt,
  AuditPage,
  BatchAppendResult,
  Capacity,
  ClaimOptions,
  ConsumerId,
  Delivery,
  AckResult,
  DeliveryId,
  DeliveryMode,
  ExtendOptions,
  JournalStats,
  ListAuditOptions,
  ListQuarantinedOptions,
  NackOptions,
  OperatorActionOptions,
  PoisonReason,
  PruneOptions,
  QuarantinePage,
  QuarantinedEvent,
  UsageEvent,
  UsageJournal,
} from "./types.js";
import { inFlightAt, lastPart, Work, type Standing } from "./work.js";

/** Options of {@link createJournal}. */
export interface JournalOptions {
  /** Stable, low-cardinality name (1..63 of `[a-z0-9_-]`); one engine can hold many journals. */
  readonly name: string;
  /** Bounds and policy; defaults to {@link BILLING_GRADE}. */
  readonly capacity?: Capacity;
  /**
   * Wall clock for calls that take no `now` (epoch ms). Defaults to `Date.now`.
   * It also bounds a claim's pruning: a claim prunes (and registers a new
   * consumer) at the earlier of its `now` and this clock, so a claimer whose
   * clock runs ahead does not forget request ids before their window passed.
   */
  readonly clock?: () => number;
}

/** An append waiting for its group's transaction. */
interface PendingAppend {
  readonly event: UsageEvent;
  /** The clock when it was called: its pruning runs at this time. */
  readonly now: number;
  readonly resolve: (result: AppendResult) => void;
  readonly reject: (error: unknown) => void;
}

/** The hint of the transactions of `append` and `appendBatch` (see `TransactOptions.grows`). */
const GROWS: TransactOptions = { grows: true };

/** Housekeeping done by append and claim, per call. */
export const OPPORTUNISTIC_PRUNE_LIMIT = 8;
/** The largest batch `appendBatch` takes, the longest lease, nack delay or extension (12 hours), and the largest claim. */
export { deliveryBytes, MAX_BATCH_EVENTS, MAX_CLAIM_EVENTS, MAX_KEPT_ATTEMPTS, MAX_LEASE_MS } from "./arguments.js";
/** The latest epoch-ms time a journal takes (`observedAt` and every `now`): 8.64e15, the last a `Date` holds. */
export { MAX_EPOCH_MS } from "./event.js";

const QUARANTINE_CURSOR = "q1.";
/** Cursors of newest-first pages: the next page holds positions below this one. */
const QUARANTINE_NEWEST_CURSOR = "qn1.";
const AUDIT_CURSOR = "a1.";

function parseCursor(prefix: string, after: string | null | undefined): number {
  if (after === undefined || after === null) return 0;
  if (typeof after !== "string" || !after.startsWith(prefix)) {
    throw new InvalidArgumentError("after", "is not a cursor this journal issued");
  }
  const text = after.slice(prefix.length);
  const value = Number(text);
  if (!/^[1-9][0-9]{0,15}$/.test(text) || !Number.isSafeInteger(value)) {
    throw new InvalidArgumentError("after", "is not a cursor this journal issued");
  }
  return value;
}

/**
 * Reads a stored attempt list the way the semantics say: a lapsed running
 * attempt reads as expired. Every attempt is a copy: engines hand stored
 * values back by reference, and what a caller does with its answer must not
 * reach the rows.
 */
function readHistory(history: readonly Attempt[], now: number): Attempt[] {
  return history.map((attempt) =>
    attempt.outcome === null && attempt.leaseExpiresAt <= now
      ? { ...attempt, outcome: { kind: "expired", at: attempt.leaseExpiresAt } }
      : { ...attempt, outcome: attempt.outcome === null ? null : { ...attempt.outcome } },
  );
}

function historyOf(standing: Standing): readonly Attempt[] {
  return standing.kind === "none" ? [] : standing.row.history;
}

/**
 * Create a usage journal over an Engine.
 *
 * @example
 * import { createJournal, createUsageEvent, newRequestId, parseConsumerId, BILLING_GRADE } from "isostore";
 * import { memoryEngine } from "isostore/memory";
 *
 * const journal = createJournal(memoryEngine(), { name: "usage", capacity: BILLING_GRADE });
 * await journal.append(createUsageEvent({
 *   record: { requestId: newRequestId(), namespace: "acme", subject: "user-1", data: { tokens: 42 } },
 *   observedAt: Date.now(),
 * }));
 * const billing = parseConsumerId("billing");
 * for (const delivery of await journal.claim(billing, { maxEvents: 100, leaseMs: 30_000, now: Date.now() })) {
 *   // write delivery.event.record to the billing table, keyed by delivery.event.id, then:
 *   await journal.ack(delivery.id);
 * }
 */
export function createJournal(engine: Engine, options: JournalOptions): UsageJournal {
  return new EngineJournal(engine, options);
}

/**
 * Internal, for a journal that answers one claim with several journals'
 * claims (the partitioned journal's partitions): a claim that continues one
 * whose deliveries were handed out already, so that `maxBytes` is what is
 * left of its bound and even the first delivery must fit it. A claim
 * otherwise always returns its first delivery; this one stops before it,
 * and returns `[]`, when it does not fit. Everything else is the claim's:
 * its transaction commits the prune, the lease sweep and the quarantines of
 * events out of attempts that it met before stopping, as one claim of the
 * whole bound would. Not exported through any subpath.
 */
export function claimContinuing(journal: UsageJournal, consumer: ConsumerId, options: ClaimOptions): Promise<Delivery[]> {
  if (!(journal instanceof EngineJournal)) return Promise.reject(new TypeError("claimContinuing needs a journal made by createJournal"));
  return journal.claimWithin(consumer, options, true);
}

/**
 * How a consumer's registration walks the stored events (see `Work.registerStep`):
 * at most `eventsPerStep` per transaction, and at most `eventsPerClaim` per
 * call that registers (a claim that has walked that many without finishing
 * answers `[]`; the next call goes on where it stopped).
 */
export interface RegistrationSteps {
  readonly eventsPerStep: number;
  readonly eventsPerClaim: number;
}

/**
 * The registration steps of every journal. A step writes two to five rows
 * per event it walks (the consumer's unfinished row and its age index entry;
 * the key index entry while no consumer is registered; the head row and
 * ready entry of the first event of each key), two more for one delivered to
 * all (its `x` entry goes, an `o` entry comes); one the walk prunes (every
 * registered consumer finished it and its window passed) costs its own index
 * entries, while its event row and the consumers' finished rows go in runs,
 * one range delete each, as `prune` deletes them, so that the count does not
 * grow with the number of consumers: a few thousand rows per transaction,
 * 7,000 at most. A call walks 50 steps at most (about a second on a Durable
 * Object in local workerd).
 */
const REGISTRATION_STEPS: RegistrationSteps = { eventsPerStep: 1_000, eventsPerClaim: 50_000 };

/**
 * Internal, for tests: give `journal` other registration steps than the
 * default (1,000 events per step, 50,000 per call): small ones make a
 * registration span several transactions and several claims over a handful
 * of events; `eventsPerClaim: Infinity` lets every call finish it. Not
 * exported through any subpath.
 */
export function setRegistrationSteps(journal: UsageJournal, steps: RegistrationSteps): void {
  if (!(journal instanceof EngineJournal)) throw new TypeError("setRegistrationSteps needs a journal made by createJournal");
  if (!Number.isSafeInteger(steps.eventsPerStep) || steps.eventsPerStep < 1) throw new RangeError("eventsPerStep must be a positive integer");
  if (!(steps.eventsPerClaim >= 1)) throw new RangeError("eventsPerClaim must be at least 1");
  journal.registrationSteps = { eventsPerStep: steps.eventsPerStep, eventsPerClaim: steps.eventsPerClaim };
}

/**
 * Internal, for a journal that registers a consumer without claiming (a
 * partition of the partitioned journal, before a claim leases anywhere):
 * what a claim of `consumer` at `now` does before it claims, in the same
 * steps (`now` null: an older caller without a time, whose registration
 * prunes nothing). Answers whether the consumer is registered now; false
 * when its registration walked `eventsPerClaim` events in this call without
 * finishing (the next call, or a claim, goes on). Not exported through any
 * subpath.
 */
export function registerContinuing(journal: UsageJournal, consumer: ConsumerId, now: number | null): Promise<boolean> {
  if (!(journal instanceof EngineJournal)) return Promise.reject(new TypeError("registerContinuing needs a journal made by createJournal"));
  return journal.registerWithin(consumer, now);
}

class EngineJournal implements UsageJournal {
  readonly name: string;
  readonly capacity: Capacity;
  readonly mode: DeliveryMode;
  private readonly layout: Layout;
  private readonly clock: () => number;
  /** See {@link setRegistrationSteps}. */
  registrationSteps: RegistrationSteps = REGISTRATION_STEPS;

  constructor(
    private readonly engine: Engine,
    options: JournalOptions,
  ) {
    this.name = checkJournalName(options.name);
    this.capacity = checkCapacity(options.capacity ?? BILLING_GRADE);
    this.clock = options.clock ?? Date.now;
    this.mode = engine.durable ? "billing_grade" : "telemetry_grade";
    this.layout = new Layout(this.name);
  }

  /**
   * One engine transaction; engine failures become BackendError, journal errors pass through.
   * Appends pass {@link GROWS} (the only calls that grow the journal without bound): an engine
   * may refuse them early when storage is nearly full, keeping room for the calls that free it.
   */
  private async run<T>(mode: TransactionMode, body: (work: Work) => Promise<T>, options?: TransactOptions): Promise<T> {
    try {
      return await this.engine.transact(mode, async (tx) => {
        const work = new Work(tx, this.layout, this.capacity, this.engine.localReads !== true, mode === "readwrite");
        const result = await body(work);
        work.flush();
        return result;
      }, options);
    } catch (error) {
      if (error instanceof JournalError) throw error;
      const message = error instanceof Error ? error.message : String(error);
      const retryable = typeof error === "object" && error !== null && (error as { retryable?: unknown }).retryable === true;
      throw new BackendError(message, { cause: error, retryable });
    }
  }

  /**
   * Appends waiting for the group in flight to commit (see {@link append}).
   * Null while no append transaction is running.
   */
  private waitingAppends: PendingAppend[] | null = null;

  /**
   * Append one event. Group commit: while an append transaction is running,
   * further appends wait and then commit together in one transaction (in call
   * order, each with its own pruning and its own clock reading), so a burst
   * of concurrent appends pays for one commit instead of one each; on engines
   * with a durable commit per transaction (IndexedDB strict, Durable Objects)
   * that is most of an append's cost. A lone append runs at once, alone. If a
   * group's transaction fails for any reason (one of its events refused,
   * the engine failing), nothing of it was written and its appends run again
   * one transaction each, so every caller gets exactly the answer (and the
   * atomicity) of its own transaction.
   */
  append(event: UsageEvent): Promise<AppendResult> {
    let resolve!: (result: AppendResult) => void;
    let reject!: (error: unknown) => void;
    const promise = new Promise<AppendResult>((onResult, onError) => {
      resolve = onResult;
      reject = onError;
    });
    let pending: PendingAppend;
    try {
      pending = { event: checkUsageEvent(event), now: this.clock(), resolve, reject };
    } catch (error) {
      reject(error);
      return promise;
    }
    if (this.waitingAppends !== null) {
      this.waitingAppends.push(pending);
    } else {
      this.waitingAppends = [];
      void this.commitAppends([pending]);
    }
    return promise;
  }

  /** Commit `group`, then the appends that arrived meanwhile, until none wait. */
  private async commitAppends(group: PendingAppend[]): Promise<void> {
    for (;;) {
      if (group.length === 1) await this.appendAlone(group[0]!);
      else await this.appendGroup(group);
      const waiting = this.waitingAppends ?? [];
      if (waiting.length === 0) {
        this.waitingAppends = null;
        return;
      }
      group = waiting.splice(0, MAX_BATCH_EVENTS);
    }
  }

  /** One append in its own transaction; settles its caller. */
  private async appendAlone(pending: PendingAppend): Promise<void> {
    try {
      pending.resolve(
        await this.run("readwrite", async (work) => {
          // One round for what the append reads, on engines with round trips.
          await work.readAheadForAppend([pending.event], { now: pending.now, limit: OPPORTUNISTIC_PRUNE_LIMIT });
          await work.prune(pending.now, OPPORTUNISTIC_PRUNE_LIMIT);
          const outcome = await work.append(pending.event, pending.now);
          // Thrown inside the transaction: a refused append changes nothing, not even its pruning.
          if (outcome instanceof JournalError) throw outcome;
          return outcome;
        }, GROWS),
      );
    } catch (error) {
      pending.reject(error);
    }
  }

  /** Several appends in one transaction, as if each ran alone in turn; settles every caller. */
  private async appendGroup(group: readonly PendingAppend[]): Promise<void> {
    let results: AppendResult[];
    try {
      results = await this.run("readwrite", async (work) => {
        await work.readAheadForAppend(
          group.map((pending) => pending.event),
          { now: group[0]!.now, limit: OPPORTUNISTIC_PRUNE_LIMIT },
        );
        const accepted: AppendResult[] = [];
        for (const pending of group) {
          await work.prune(pending.now, OPPORTUNISTIC_PRUNE_LIMIT);
          const outcome = await work.append(pending.event, pending.now);
          // A refusal must change nothing, not even its own pruning: undo the group.
          if (outcome instanceof JournalError) throw outcome;
          accepted.push(outcome);
        }
        return accepted;
      }, GROWS);
    } catch {
      for (const pending of group) await this.appendAlone(pending);
      return;
    }
    group.forEach((pending, i) => pending.resolve(results[i]!));
  }

  async appendBatch(events: readonly UsageEvent[]): Promise<BatchAppendResult[]> {
    const checked = checkBatch(events);
    const now = this.clock();
    return this.run("readwrite", async (work) => {
      const valid = checked.filter((event): event is UsageEvent => !(event instanceof JournalError));
      await work.readAheadForAppend(valid, { now, limit: OPPORTUNISTIC_PRUNE_LIMIT });
      await work.prune(now, OPPORTUNISTIC_PRUNE_LIMIT);
      const results: BatchAppendResult[] = [];
      for (const event of checked) {
        const outcome = event instanceof JournalError ? event : await work.append(event, now);
        results.push(outcome instanceof JournalError ? { status: "rejected", error: outcome } : outcome);
      }
      return results;
    }, GROWS);
  }

  claim(consumer: ConsumerId, options: ClaimOptions): Promise<Delivery[]> {
    return this.claimWithin(consumer, options, false);
  }

  /**
   * A claim; with `firstMustFit`, see {@link claimContinuing}. A consumer's
   * first claims register it first (see {@link whenRegistered}): one that
   * did not finish within its budget answers `[]`.
   */
  async claimWithin(consumer: ConsumerId, options: ClaimOptions, firstMustFit: boolean): Promise<Delivery[]> {
    const { consumer: id, maxEvents, leaseMs, now, maxBytes } = checkClaim(consumer, options);
    // Pruning forgets idempotency keys, so it never runs ahead of the journal's clock: a claimer whose
    // clock is fast (its `now` later than ours) prunes, and registers a consumer, at our clock instead.
    const pruneAt = Math.min(now, this.clock());
    const deliveries = await this.whenRegistered(
      id,
      pruneAt,
      async (work) => {
        await work.sweep(id, now);
        return work.claim(id, maxEvents, leaseMs, now, maxBytes, firstMustFit);
      },
      (work) => work.prune(pruneAt, OPPORTUNISTIC_PRUNE_LIMIT),
    );
    return deliveries ?? [];
  }

  /** See {@link registerContinuing}. */
  async registerWithin(consumer: ConsumerId, now: number | null): Promise<boolean> {
    const id = parseConsumerId(consumer);
    return (await this.whenRegistered(id, now, async () => true)) ?? false;
  }

  /**
   * Run `registered` in a transaction in which `consumer` is registered, and
   * answer what it answers; `first`, when given, runs before, in the first
   * transaction only. A consumer not registered yet registers first, in steps of
   * `eventsPerStep` events (`Work.registerStep`), each its own transaction,
   * so that no transaction writes rows for more than that many events (one
   * engine transaction per call would hold a million events' rows at once);
   * `registered` then runs in the transaction of the step that finished.
   * After `eventsPerClaim` events without finishing, it answers null and
   * `registered` does not run: the next call goes on from there. The steps
   * prune at `pruneAt` (null: nothing).
   */
  private async whenRegistered<T>(
    consumer: string,
    pruneAt: number | null,
    registered: (work: Work) => Promise<T>,
    first?: (work: Work) => Promise<unknown>,
  ): Promise<T | null> {
    const { eventsPerStep, eventsPerClaim } = this.registrationSteps;
    let walked = 0;
    for (let step = 0; ; step++) {
      const outcome = await this.run("readwrite", async (work): Promise<{ readonly done: T } | { readonly walked: number }> => {
        if (step === 0 && first) await first(work);
        if (!(await work.isRegistered(consumer))) {
          const progress = await work.registerStep(consumer, pruneAt, Math.min(eventsPerStep, eventsPerClaim - walked));
          if (!progress.registered) return { walked: progress.walked };
        }
        return { done: await registered(work) };
      });
      if ("done" in outcome) return outcome.done;
      walked += outcome.walked;
      if (walked >= eventsPerClaim) return null;
    }
  }

  /** Find the event and this consumer's standing on it, or refuse as not outstanding. */
  private async locate(work: Work, delivery: DeliveryId): Promise<{ event: UsageEvent; position: number; standing: Standing }> {
    // Reads go out in two rounds (engines with request round trips wait twice, not six times).
    const [registered, position] = await Promise.all([work.isRegistered(delivery.consumer), work.positionOf(delivery.event)]);
    if (!registered) throw new NotOutstandingError(delivery, "the consumer never claimed");
    if (position === undefined) throw new NotOutstandingError(delivery, "the event is not journaled");
    const [standing, event] = await Promise.all([work.standing(delivery.consumer, position), work.eventAt(position), work.consumerRow(delivery.consumer)]);
    return { event, position, standing };
  }

  /** The whole of one ack inside a transaction; refusals are thrown before anything is written. */
  private async ackIn(work: Work, id: DeliveryId, now: number): Promise<void> {
    const { event, position, standing } = await this.locate(work, id);
    if (standing.kind === "finished") {
      if (standing.row.status === "acked") return;
      throw new NotOutstandingError(id, "an operator discarded the event", true);
    }
    if (standing.kind === "quarantined") throw new QuarantinedError(id);
    if (standing.kind === "none" || standing.row.attempts === 0) throw new NotOutstandingError(id, "the event was never delivered to this consumer", true);
    await work.ackUnfinished(id.consumer, event, position, standing.row, now);
  }

  async ack(delivery: DeliveryId): Promise<void> {
    const id = checkDeliveryId(delivery);
    const now = this.clock();
    await this.run("readwrite", (work) => this.ackIn(work, id, now));
  }

  async ackBatch(deliveries: readonly DeliveryId[]): Promise<AckResult[]> {
    const ids = checkAckBatch(deliveries);
    const now = this.clock();
    return this.run("readwrite", async (work) => {
      const valid = ids.filter((id): id is DeliveryId => !(id instanceof JournalError));
      if (valid.length > 1) {
        await work.readAheadForAck(valid);
        work.deferLeaseDeletes();
      }
      const results: AckResult[] = [];
      for (const id of ids) {
        if (id instanceof JournalError) {
          results.push({ ok: false, error: id });
          continue;
        }
        try {
          await this.ackIn(work, id, now);
          results.push({ ok: true });
        } catch (error) {
          // A refusal wrote nothing (ackIn checks before it writes); an engine failure ends the whole batch.
          if (!(error instanceof JournalError) || error.code === "backend") throw error;
          results.push({ ok: false, error });
        }
      }
      await work.flushLeaseDeletes();
      return results;
    });
  }

  async quarantine(delivery: DeliveryId, reason: PoisonReason): Promise<void> {
    const id = checkQuarantine(delivery, reason).delivery;
    const now = this.clock();
    await this.run("readwrite", async (work) => {
      const { event, position, standing } = await this.locate(work, id);
      if (standing.kind === "finished") {
        if (standing.row.status === "acked") throw new AlreadyAcknowledgedError(id);
        throw new NotOutstandingError(id, "an operator discarded the event", true);
      }
      if (standing.kind === "quarantined") return;
      if (standing.kind === "none" || standing.row.attempts === 0) throw new NotOutstandingError(id, "the event was never delivered to this consumer", true);
      await work.quarantineUnfinished(id.consumer, event, position, standing.row, reason, now, now);
    });
  }

  /** Gates of extend and nack: the delivery must be the current attempt of a running lease. */
  private async current(work: Work, delivery: DeliveryId, now: number): Promise<{ event: UsageEvent; position: number; row: UnfinishedRow }> {
    const { event, position, standing } = await this.locate(work, delivery);
    if (standing.kind === "finished") {
      if (standing.row.status === "acked") throw new AlreadyAcknowledgedError(delivery);
      throw new NotOutstandingError(delivery, "an operator discarded the event", true);
    }
    if (standing.kind === "quarantined") throw new QuarantinedError(delivery);
    if (standing.kind === "none" || delivery.attempt !== standing.row.attempts || !inFlightAt(standing.row, now)) {
      throw new NotOutstandingError(delivery, "it is not the current attempt of a running lease", true);
    }
    return { event, position, row: standing.row };
  }

  async extend(delivery: DeliveryId, options: ExtendOptions): Promise<{ leaseExpiresAt: number }> {
    const { delivery: id, leaseMs, now } = checkExtend(delivery, options);
    return this.run("readwrite", async (work) => {
      const { position, row } = await this.current(work, id, now);
      const leaseExpiresAt = now + leaseMs;
      work.extendLease(id.consumer, position, row, leaseExpiresAt);
      return { leaseExpiresAt };
    });
  }

  async nack(delivery: DeliveryId, options: NackOptions): Promise<void> {
    const { delivery: id, retryAfterMs, error, now } = checkNack(delivery, options);
    await this.run("readwrite", async (work) => {
      const { event, position, row } = await this.current(work, id, now);
      await work.nackCurrent(id.consumer, event, position, row, error, now, now + retryAfterMs);
    });
  }

  async stats(consumer: ConsumerId): Promise<JournalStats> {
    const id = parseConsumerId(consumer);
    const now = this.clock();
    return this.run("readonly", async (work) => {
      const meta = await work.meta();
      const base = { dropped: meta.dropped, capacity: this.capacity };
      // The oldest pending event is the one observed earliest (a late replay included), read
      // from the indexes by observedAt; data written before them is read in full (see Work.ageIndexed).
      const indexed = await work.ageIndexed();
      const age = (observedAt: number | null): number | null => (observedAt === null ? null : Math.max(0, now - observedAt));
      if (!meta.consumers.includes(id)) {
        let earliest: number | null = null;
        if (indexed) {
          const [first] = await work.tx.scan({ prefix: work.layout.observedAll() }, { limit: 1 });
          if (first) earliest = first.key[first.key.length - 2] as number;
        } else {
          await work.walk<EventRow>({ prefix: work.layout.events() }, (entry) => {
            if (earliest === null || entry.value.event.observedAt < earliest) earliest = entry.value.event.observedAt;
            return true;
          });
        }
        return { pending: meta.stored, inFlight: 0, quarantined: 0, oldestPendingAgeMs: age(earliest), ...base };
      }
      const row = await work.consumerRow(id);
      const leasedPrefix = work.layout.leasedAll(id);
      const lapsed = await work.tx.scan({ prefix: leasedPrefix, upper: [...leasedPrefix, now, Number.MAX_VALUE] });
      const inFlight = row.leased - lapsed.length;
      let earliest: number | null = null;
      if (indexed) {
        // In observedAt order; only events in flight are passed over.
        await work.walk(
          { prefix: work.layout.unfinishedByAgeAll(id) },
          async (entry) => {
            const unfinished = await work.tx.get<UnfinishedRow>(work.layout.unfinished(id, lastPart(entry.key)));
            if (unfinished === undefined) throw new Error(`journal layout is inconsistent: an age index entry without its unfinished row (position ${lastPart(entry.key)})`);
            if (inFlightAt(unfinished, now)) return true;
            earliest = unfinished.observedAt;
            return false;
          },
          4,
        );
      } else {
        await work.walk<UnfinishedRow>({ prefix: work.layout.unfinishedAll(id) }, (entry) => {
          if (!inFlightAt(entry.value, now) && (earliest === null || entry.value.observedAt < earliest)) earliest = entry.value.observedAt;
          return true;
        });
      }
      return { pending: (await work.unfinishedCount(id)) - inFlight, inFlight, quarantined: row.quarantined, oldestPendingAgeMs: age(earliest), ...base };
    });
  }

  async attempts(consumer: ConsumerId, requestId: string): Promise<Attempt[]> {
    const { consumer: id, requestId: request } = checkAttempts(consumer, requestId);
    const now = this.clock();
    return this.run("readonly", async (work) => {
      if (!(await work.isRegistered(id))) return [];
      const position = await work.positionOf(request);
      if (position === undefined) return [];
      return readHistory(historyOf(await work.standing(id, position)), now);
    });
  }

  async listQuarantined(consumer: ConsumerId, options: ListQuarantinedOptions = {}): Promise<QuarantinePage> {
    const { consumer: id, limit, query, order, ...rest } = checkListQuarantined(consumer, options);
    const newest = order === "newest";
    const cursorPrefix = newest ? QUARANTINE_NEWEST_CURSOR : QUARANTINE_CURSOR;
    const after = parseCursor(cursorPrefix, rest.after);
    const now = this.clock();
    return this.run("readonly", async (work) => {
      if (!(await work.isRegistered(id))) return { items: [], nextCursor: null };
      const items: QuarantinedEvent[] = [];
      let more = false;
      const prefix = work.layout.quarantinedAll(id);
      const range = newest ? (after === 0 ? { prefix } : { prefix, upper: [...prefix, after], upperOpen: true }) : { prefix, lower: [...prefix, after], lowerOpen: true };
      const visit = async (entry: Entry<QuarantineRow>) => {
        const position = lastPart(entry.key);
        const event = await work.eventAt(position);
        const row = entry.value;
        const haystacks = [event.id, `${event.orderingKey.namespace}/${event.orderingKey.subject}`, row.reason];
        if (query !== "" && !haystacks.some((text) => text.toLowerCase().includes(query))) return true;
        if (items.length === limit) {
          more = true;
          return false;
        }
        items.push({ consumer: id, event, position, reason: row.reason, quarantinedAt: row.quarantinedAt, attempts: readHistory(row.history, now) });
        return true;
      };
      await work.walk<QuarantineRow>(range, visit, undefined, newest);
      const last = items[items.length - 1];
      return { items, nextCursor: more && last ? `${cursorPrefix}${last.position}` : null };
    });
  }

  /** Gates of release and discard. */
  private async quarantinedFor(work: Work, consumer: ConsumerId, requestId: string): Promise<{ event: UsageEvent; position: number; row: QuarantineRow }> {
    if (await work.isRegistered(consumer)) {
      const position = await work.positionOf(requestId);
      if (position !== undefined) {
        const standing = await work.standing(consumer, position);
        if (standing.kind === "quarantined") return { event: await work.eventAt(position), position, row: standing.row };
      }
    }
    throw new NotQuarantinedError(consumer, requestId);
  }

  private async operate(action: "release" | "discard", consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<void> {
    const { consumer: id, requestId: request, now, actor } = checkOperatorAction(action, consumer, requestId, options);
    await this.run("readwrite", async (work) => {
      const { event, position, row } = await this.quarantinedFor(work, id, request);
      if (action === "release") await work.release(id, event, position, row, now);
      else await work.discard(id, event, position, row);
      await work.recordAudit({ at: now, action, consumer: id, requestId: request, reason: row.reason, actor });
    });
  }

  release(consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<void> {
    return this.operate("release", consumer, requestId, options);
  }

  discard(consumer: ConsumerId, requestId: string, options: OperatorActionOptions): Promise<void> {
    return this.operate("discard", consumer, requestId, options);
  }

  async listAudit(options: ListAuditOptions = {}): Promise<AuditPage> {
    const { limit, requestId, ...rest } = checkListAudit(options);
    const after = parseCursor(AUDIT_CURSOR, rest.after);
    return this.run("readonly", async (work) => {
      const entries = await work.auditEntries(after, limit + 1, requestId);
      // Copies: the engine's values are the stored rows.
      const items = entries.slice(0, limit).map((entry) => ({ ...entry }));
      const last = items[items.length - 1];
      return { items, nextCursor: entries.length > limit && last ? `${AUDIT_CURSOR}${last.seq}` : null };
    });
  }

  async prune(options: PruneOptions): Promise<{ pruned: number }> {
    const { now, limit } = checkPrune(options);
    const pruned = await this.run("readwrite", (work) => work.prune(now, limit));
    return { pruned };
  }
}

