/**
 * The event queue conformance suite, runner-agnostic: the in-memory
 * `EventQueue` and the ledger-backed one (over an engine from the factory,
 * with restarts that rebuild it by replay) driven beside the reference model
 * ({@link QueueOracle}) with random calls, plus readable examples named after
 * each rule (`./queue-examples.ts`).
 */
import fc from "fast-check";
import type { Arbitrary, AsyncCommand } from "fast-check";
import type { DurableEventQueue } from "../queue/durable.js";
import { EventQueue } from "../queue/event-queue.js";
import { IDEM_WINDOW_MS, QUEUE_LANES, type QueueLane } from "../queue/state.js";
import type { Ledger } from "../storage/ledger.js";
import { createStore } from "../storage/store.js";
import type { ConformanceCase } from "./journal-conformance.js";
import { queueExampleCases } from "./queue-examples.js";
import { QueueOracle } from "./queue-oracle.js";
import { expectSameOutcome, settleStorage } from "./storage-compare.js";
import { soakRequested } from "./soak.js";
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
/** Clock steps: none, small, just past the window, half of it, and backwards. */
const STEPS = [0, 0, 1, 1_000, IDEM_WINDOW_MS + 1, IDEM_WINDOW_MS / 2, 7 * 60 * 60 * 1000, -5_000, -IDEM_WINDOW_MS, -2 * IDEM_WINDOW_MS];

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
}

type QueueCommand = AsyncCommand<Model, Real>;

async function agreeOn(model: Model, what: string, expected: () => unknown, actual: () => unknown): Promise<void> {
  expectSameOutcome(`queue conformance (${model.label}): ${what}`, await settleStorage(expected), await settleStorage(actual));
}

async function agreeOnState(model: Model, real: Real, after: string): Promise<void> {
  await agreeOn(model, `stats() after ${after}`, () => model.oracle.stats(), () => real.queue.stats());
  await agreeOn(model, `len() after ${after}`, () => [model.oracle.len(), model.oracle.isEmpty()], () => [real.queue.len(), real.queue.isEmpty()]);
}

function command(label: string, run: (model: Model, real: Real) => Promise<void>, check: (model: Readonly<Model>) => boolean = () => true): QueueCommand {
  return {
    check,
    run: async (model, real) => {
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
      }),
    );
  const consume = fc.constant(
    command("consume()", async (model, real) => {
      await agreeOn(model, "consume()", () => model.oracle.consume(), () => real.queue.consume());
    }),
  );
  const list = [enqueue, enqueue, enqueue, consume, consume];
  if (!durable) return list;
  const restart = fc.constantFrom(0, 0, 0, 1, 3).map((capacityChange) =>
    command(
      `restart${capacityChange ? ` with capacity ${capacityChange}` : ""}`,
      async (model, real) => {
        const capacity = capacityChange || model.oracle.capacity;
        model.oracle.capacity = capacity;
        real.queue = await real.reopen!(capacity);
      },
      () => true,
    ),
  );
  return [...list, restart];
}

async function runModel(options: QueueConformanceOptions, runs: number, durable: boolean): Promise<void> {
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom<QueueLane>(...QUEUE_LANES),
      fc.integer({ min: 0, max: 4 }),
      fc.commands(commands(durable), { maxCommands: 50 }),
      async (lane, capacity, cmds) => {
        let subject: StorageSubject | undefined;
        try {
          const model: Model = { label: options.label, oracle: new QueueOracle(lane, capacity), now: 1_700_000_000_000 };
          let real: Real;
          if (durable) {
            const opened = await options.createSubject();
            subject = opened;
            let engine = opened.engine;
            const ledger = (): Ledger => createStore(engine, { name: "queues" }).ledger;
            const reopen = async (cap: number): Promise<AnyQueue> => {
              engine = opened.reopen ? await opened.reopen() : engine;
              return durableView(await EventQueue.fromLedger(ledger(), "queue/main", lane, cap));
            };
            real = { queue: durableView(await EventQueue.fromLedger(ledger(), "queue/main", lane, capacity)), reopen };
          } else {
            real = { queue: new EventQueue(lane, capacity), reopen: undefined };
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
