/**
 * The event queue conformance suite, runner-agnostic: the in-memory
 * `EventQueue` and the ledger-backed one (over an engine from the factory,
 * with restarts that rebuild it by replay) driven beside the reference model
 * ({@link QueueOracle}) with random calls, plus readable examples named after
 * each rule (`./queue-examples.ts`). The ledger-backed run also injects the
 * faults of a networked ledger: an append that commits (or not) but reports
 * `AmbiguousError`, and reads that fail, as `AppendVerifyError` comes of them.
 */
import fc from "fast-check";
import type { Arbitrary, AsyncCommand } from "fast-check";
import type { DurableEventQueue } from "../queue/durable.js";
import { EventQueue } from "../queue/event-queue.js";
import { IDEM_WINDOW_MS, QUEUE_LANES, type QueueItem, type QueueLane } from "../queue/state.js";
import type { Ledger } from "../storage/ledger.js";
import { createStore } from "../storage/store.js";
import type { ConformanceCase } from "./journal-conformance.js";
import { ALL_READS, lossyLedger, queueExampleCases, type LedgerFaults } from "./queue-examples.js";
import { QueueOracle } from "./queue-oracle.js";
import { expectSameOutcome, settleStorage } from "./storage-compare.js";
import { commandsUpTo, soakRequested } from "./soak.js";
import type { StorageSubject, StorageSubjectFactory } from "./storage-conformance.js";

/** What {@link queueConformanceCases} needs. */
export interface QueueConformanceOptions {
  readonly label: string;
  /** Fresh, empty storage for the ledger-backed queue. */
  readonly createSubject: StorageSubjectFactory;
  /** Random sequences per model-based case. Default 100, or 5000 at soak size (`soakRequested()`). */
  readonly runs?: number;
  readonly seed?: number;
}

const KEYS = ["evt-1", "evt-2", "evt-3", "evt-4", "evt-5", "evt-6", ""];
/** A year: a reading this far ahead (a clock in the wrong unit, a bad NTP step) and the return from it. */
const FAR = 365 * 24 * 60 * 60 * 1000;
/**
 * Clock steps: none, small, just past the window, half of it, and backwards (two producers whose clocks differ
 * by 50 ms, a larger step back, a window or two back); rarely a year ahead or back.
 */
const STEPS = [0, 0, 1, 1_000, IDEM_WINDOW_MS + 1, IDEM_WINDOW_MS / 2, 7 * 60 * 60 * 1000, 50, -50, -5_000, -IDEM_WINDOW_MS, -2 * IDEM_WINDOW_MS, FAR, -FAR];

/**
 * The queue conformance cases.
 *
 * @example
 * ```ts
 * for (const c of queueConformanceCases({ label: "memory", createSubject })) it(c.name, c.run, c.timeoutMs);
 * ```
 */
export function queueConformanceCases(options: QueueConformanceOptions): ConformanceCase[] {
  const runs = options.runs ?? (soakRequested() ? 5000 : 100);
  const timeoutMs = 60_000 + runs * 300;
  return [
    { name: "random enqueue and consume calls on the in-memory queue agree with the reference model", run: () => runModel(options, runs, false), timeoutMs },
    { name: "random calls and restarts on the ledger-backed queue agree with the reference model", run: () => runModel(options, runs, true), timeoutMs },
    ...queueExampleCases(options),
  ];
}

interface Model {
  readonly label: string;
  readonly oracle: QueueOracle;
  now: number;
  /**
   * Items the ledger-backed queue holds for its next consume: consumed in the
   * ledger by a call that rejected not knowing it. Lost on a restart (the
   * documented at-most-once window); the reference model has no such thing.
   */
  held: QueueItem[];
  /**
   * How many of `held` (the last ones) the queue has not read back from the
   * ledger yet: it holds only the others, and learns of these at its next
   * read of the ledger.
   */
  unread: number;
  /**
   * What the ledger-backed queue's state shows after a call whose record
   * landed while it rejected: the state before that record, until its next
   * call reads the ledger. Lossy calls wait until it has.
   */
  lagging: { readonly stats: unknown; readonly len: unknown } | undefined;
}

interface AnyQueue {
  enqueue(key: string, payload: Uint8Array, now: number): unknown;
  consume(): unknown;
  stats(): unknown;
  len(): number;
  isEmpty(): boolean;
}

interface Real {
  queue: AnyQueue;
  readonly reopen: ((capacity: number) => Promise<AnyQueue>) | undefined;
  /** The faults the ledger under the ledger-backed queue injects. */
  readonly faults: LedgerFaults | undefined;
}

type QueueCommand = AsyncCommand<Model, Real>;

async function agreeOn(model: Model, what: string, expected: () => unknown, actual: () => unknown): Promise<void> {
  expectSameOutcome(`queue conformance (${model.label}): ${what}`, await settleStorage(expected), await settleStorage(actual));
}

function stateOf(oracle: QueueOracle): { stats: unknown; len: unknown } {
  return { stats: oracle.stats(), len: [oracle.len(), oracle.isEmpty()] };
}

async function agreeOnState(model: Model, real: Real, after: string): Promise<void> {
  const expected = model.lagging ?? stateOf(model.oracle);
  await agreeOn(model, `stats() after ${after}`, () => expected.stats, () => real.queue.stats());
  await agreeOn(model, `len() after ${after}`, () => expected.len, () => [real.queue.len(), real.queue.isEmpty()]);
}

/**
 * A command. One that `reads` the ledger (every call that gets to the ledger and has no fault injected, and
 * a restart) leaves the ledger-backed queue up to date with it.
 */
function command(
  label: string,
  run: (model: Model, real: Real) => Promise<void>,
  check: (model: Readonly<Model>) => boolean = () => true,
  reads: boolean | ((model: Readonly<Model>) => boolean) = true,
): QueueCommand {
  return {
    check,
    run: async (model, real) => {
      if (typeof reads === "function" ? reads(model) : reads) {
        model.lagging = undefined;
        model.unread = 0;
      }
      await run(model, real);
      await agreeOnState(model, real, label);
    },
    toString: () => label,
  };
}

function commands(durable: boolean): Arbitrary<QueueCommand>[] {
  const enqueue = fc
    .record({ key: fc.oneof({ arbitrary: fc.nat({ max: 5 }), weight: 20 }, { arbitrary: fc.constant(6), weight: 1 }), step: fc.nat({ max: STEPS.length - 1 }), byte: fc.nat({ max: 255 }) })
    .map(({ key, step, byte }) =>
      command(`enqueue(${JSON.stringify(KEYS[key])}, [${byte}], now${STEPS[step]! >= 0 ? "+" : ""}${STEPS[step]})`, async (model, real) => {
        model.now += STEPS[step]!;
        const k = KEYS[key]!;
        const payload = new Uint8Array([byte]);
        const now = model.now;
        await agreeOn(model, `enqueue(${JSON.stringify(k)}, ${now})`, () => model.oracle.enqueue(k, payload, now), () => real.queue.enqueue(k, payload, now));
      }, undefined, KEYS[key] !== ""), // a bad key is refused before the ledger
    );
  const consume = fc.constant(
    command(
      "consume()",
      async (model, real) => {
        await agreeOn(model, "consume()", () => model.held.shift() ?? model.oracle.consume(), () => real.queue.consume());
      },
      undefined,
      // An item the queue holds is handed out without an append, so without reading the ledger (a lag
      // stays); holding none (nothing held, or only items it has not read back), it appends, and reads.
      (model) => model.held.length <= model.unread,
    ),
  );
  const list = [enqueue, enqueue, enqueue, consume, consume];
  if (!durable) return list;
  // A lost reply: the append commits (or not) and reports AmbiguousError, and the next reads fail (none, the
  // verifying one, or all of them for the rest of the call). A call that cannot learn its outcome rejects with
  // AppendVerifyError; a consume's item that landed so is handed out by the next consume.
  const fault = fc.record({ lands: fc.boolean(), failReads: fc.constantFrom(0, 1, ALL_READS) });
  const rejects = (code: string) => ({ rejected: code });
  const outcomeOf = async (call: () => Promise<unknown>): Promise<unknown> => {
    try {
      return await call();
    } catch (error) {
      return rejects(String((error as { code?: unknown }).code));
    }
  };
  const lossy = (label: string, faults: { lands: boolean; failReads: number }, expected: (model: Model) => unknown, actual: (real: Real, now: number) => Promise<unknown>) =>
    command(`${label} with a lost reply (${faults.lands ? "landed" : "not landed"}, ${faults.failReads === ALL_READS ? "all" : faults.failReads} reads failing)`, async (model, real) => {
      Object.assign(real.faults!, { ambiguous: true, ...faults });
      try {
        const before = stateOf(model.oracle);
        const outcome = expected(model);
        // Landed, and the call rejected: the queue has not read its own record yet.
        if (faults.lands && typeof outcome === "object" && outcome !== null && "rejected" in outcome) model.lagging = before;
        await agreeOn(model, label, () => outcome, () => outcomeOf(() => actual(real, model.now)));
      } finally {
        Object.assign(real.faults!, { ambiguous: false, failReads: 0 });
      }
    }, (model) => model.lagging === undefined, false);
  const lossyEnqueue = fc.record({ key: fc.nat({ max: 5 }), byte: fc.nat({ max: 255 }), faults: fault }).map(({ key, byte, faults }) =>
    lossy(
      `enqueue(${JSON.stringify(KEYS[key])}, [${byte}], now)`,
      faults,
      (model) => {
        if (!faults.lands) return rejects("append_verify_failed");
        const verdict = model.oracle.enqueue(KEYS[key]!, new Uint8Array([byte]), model.now);
        return faults.failReads === ALL_READS ? rejects("append_verify_failed") : verdict;
      },
      async (real, now) => real.queue.enqueue(KEYS[key]!, new Uint8Array([byte]), now),
    ),
  );
  const lossyConsume = fault.map((faults) =>
    lossy(
      "consume()",
      faults,
      (model) => {
        const held = model.held.shift();
        if (held !== undefined) return held; // handed out without an append
        if (model.oracle.len() === 0) return faults.failReads > 0 ? rejects("backend") : undefined; // reads the ledger first
        if (!faults.lands) return rejects("append_verify_failed");
        const item = model.oracle.consume();
        if (faults.failReads !== ALL_READS) return item; // read back as its own
        model.held.push(item!);
        model.unread += 1;
        return rejects("append_verify_failed");
      },
      async (real) => real.queue.consume(),
    ),
  );
  const restart = fc.constantFrom(0, 0, 0, 1, 3).map((capacityChange) =>
    command(
      `restart${capacityChange ? ` with capacity ${capacityChange}` : ""}`,
      async (model, real) => {
        const capacity = capacityChange || model.oracle.capacity;
        model.oracle.capacity = capacity;
        model.held = []; // the new instance never learns of them
        model.unread = 0;
        real.queue = await real.reopen!(capacity);
      },
      () => true,
    ),
  );
  return [...list, restart, lossyEnqueue, lossyConsume];
}

async function runModel(options: QueueConformanceOptions, runs: number, durable: boolean): Promise<void> {
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom<QueueLane>(...QUEUE_LANES),
      fc.integer({ min: 0, max: 4 }),
      fc.commands(commands(durable), commandsUpTo(50)),
      async (lane, capacity, cmds) => {
        let subject: StorageSubject | undefined;
        try {
          const model: Model = { label: options.label, oracle: new QueueOracle(lane, capacity), now: 1_700_000_000_000, held: [], unread: 0, lagging: undefined };
          let real: Real;
          if (durable) {
            const opened = await options.createSubject();
            subject = opened;
            let engine = opened.engine;
            const faults: LedgerFaults = { ambiguous: false, lands: true, failReads: 0 };
            const ledger = (): Ledger => lossyLedger(createStore(engine, { name: "queues" }).ledger, faults).ledger;
            const reopen = async (cap: number): Promise<AnyQueue> => {
              engine = opened.reopen ? await opened.reopen() : engine;
              return durableView(await EventQueue.fromLedger(ledger(), "queue/main", lane, cap));
            };
            real = { queue: durableView(await EventQueue.fromLedger(ledger(), "queue/main", lane, capacity)), reopen, faults };
          } else {
            real = { queue: new EventQueue(lane, capacity), reopen: undefined, faults: undefined };
          }
          await fc.asyncModelRun(() => ({ model, real }), cmds);
        } finally {
          await subject?.close();
        }
      },
    ),
    { numRuns: runs, ...(options.seed === undefined ? {} : { seed: options.seed }) },
  );
}

/** The durable queue as the model's shape (its enqueue and consume return promises, which `agreeOn` awaits). */
function durableView(queue: DurableEventQueue): AnyQueue {
  return {
    enqueue: (key, payload, now) => queue.enqueue(key, payload, now),
    consume: () => queue.consume(),
    stats: () => queue.stats(),
    len: () => queue.len(),
    isEmpty: () => queue.isEmpty(),
  };
}
