/**
 * A consumer registers in bounded steps (`Work.registerStep`, one engine
 * transaction each, at most `eventsPerClaim` events per call), so that
 * registering over a large journal never makes one huge transaction. These
 * tests run the journal with tiny steps (`setRegistrationSteps`) so that a
 * registration spans several transactions and several claims over a handful
 * of events, with everything else the journal does happening in between.
 *
 * What they pin:
 * - the conformance suite (the model-based case and every example) holds
 *   with one to three events per step, when each claim may finish;
 * - while the newcomer registers, its claims answer `[]` and it reads as
 *   unregistered; what it gets once its registration is done equals what a
 *   reference model gives a consumer that registered at that last claim,
 *   whatever ran in between (appends, another consumer's verdicts and the
 *   operator's, a reopen, a second registration, drops), except where the
 *   journal keeps more: no event is delivered to all (prunable,
 *   reclaimable) while a consumer registers, and those cases assert that;
 * - every row the journal keeps is consistent after each call
 *   ({@link checkLayout});
 * - each transaction of a registration writes a bounded number of rows.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import {
  AtCapacityError,
  BILLING_GRADE,
  createJournal,
  createUsageEvent,
  parseConsumerId,
  type Capacity,
  type ClaimOptions,
  type ConsumerId,
  type Delivery,
  type Engine,
  type EngineTransaction,
  type Key,
  type TransactionMode,
  type TransactOptions,
  type UsageEvent,
  type UsageJournal,
} from "../../src/index.js";
import { setRegistrationSteps, type RegistrationSteps } from "../../src/journal/journal.js";
import { Layout, Slot, type ConsumerRow, type EventRow, type HeadRow, type MetaRow, type UnfinishedRow } from "../../src/journal/layout.js";
import { JournalOracle, journalConformanceCases, virtualClock, type VirtualClock } from "../../src/testing/index.js";
import { render, renderOutcome, sameOutcome, settle, type Outcome } from "../../src/testing/compare.js";
import { Work } from "../../src/journal/work.js";
import { readingAhead } from "./support/reading-ahead.js";

const NAME = "usage";
const layout = new Layout(NAME);
const T0 = 1_700_000_000_000;
const A = parseConsumerId("a");
const B = parseConsumerId("b");
const C = parseConsumerId("c");
/** Two events per transaction, four per claim: a claim over twelve events answers `[]` twice before it delivers. */
const TINY: RegistrationSteps = { eventsPerStep: 2, eventsPerClaim: 4 };
const ROOMY: Capacity = { ...BILLING_GRADE, maxEvents: 1000 };
const LEASE = 60_000;

function requestId(n: number): string {
  return `0190c000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`;
}

/** Event `n` of ordering key `k-<key>`, observed at `observedAt`. */
function usage(n: number, key: number, observedAt: number): UsageEvent {
  return createUsageEvent({ record: { requestId: requestId(n), namespace: "ns", subject: `k-${key}`, data: { n } }, observedAt });
}

// ------------------------------------------------------------------ the rows

interface Rows {
  readonly meta: MetaRow;
  /** Every stored row, by table. */
  readonly tables: Map<string, { key: Key; value: unknown }[]>;
}

async function readRows(engine: Engine): Promise<Rows> {
  const rows = await engine.transact("readonly", (tx) => tx.scan({ prefix: layout.root }));
  const tables = new Map<string, { key: Key; value: unknown }[]>();
  for (const row of rows) {
    const table = row.key[2] as string;
    if (!tables.has(table)) tables.set(table, []);
    tables.get(table)!.push({ key: row.key.slice(3), value: row.value });
  }
  const meta = (tables.get("m")?.[0]?.value as MetaRow | undefined) ?? ({ consumers: [], stored: 0 } as unknown as MetaRow);
  return { meta, tables };
}

function rowsOf(rows: Rows, table: string): { key: Key; value: unknown }[] {
  return rows.tables.get(table) ?? [];
}

/** Whether `consumer` is registered (not only registering). */
async function isRegistered(engine: Engine, consumer: ConsumerId): Promise<boolean> {
  return (await readRows(engine)).meta.consumers.includes(consumer);
}

/** How far the registration walk of `consumer` came (the position it reads next), or null when it is not registering. */
async function walkedBelow(engine: Engine, consumer: ConsumerId): Promise<number | null> {
  const rows = await readRows(engine);
  if (!(rows.meta.registering ?? []).includes(consumer)) return null;
  const row = rowsOf(rows, "c").find((entry) => entry.key[0] === consumer)!.value as ConsumerRow;
  return row.registeredBelow!;
}

/**
 * Every invariant of `layout.ts` that registration in steps touches, over
 * the stored rows: per registered consumer exactly one of `u`, `f`, `q` per
 * stored event and counters that agree; per registering consumer `u` rows of
 * exactly the stored events below its walk's position and nothing else; per
 * consumer and key with unfinished events a head row naming the first of
 * them (or a leased one) in exactly the index its slot says; no head row
 * without unfinished events; the `p` index mirroring `u`; `x` entries only on
 * events every registered consumer finished and no registering consumer's
 * walk passed (and, while none registers, on every such event); `k` entries
 * of every stored event while a consumer is registered; the `o` index, where
 * kept, on exactly the events neither delivered to all nor quarantined.
 */
async function checkLayout(engine: Engine): Promise<void> {
  const rows = await readRows(engine);
  const { meta } = rows;
  const events = new Map(rowsOf(rows, "e").map((row) => [row.key[0] as number, (row.value as EventRow).event]));
  expect(meta.stored, "stored").toBe(events.size);
  const byConsumer = (table: string, consumer: string) => rowsOf(rows, table).filter((row) => row.key[0] === consumer);
  const positions = (table: string, consumer: string) => new Set(byConsumer(table, consumer).map((row) => row.key[row.key.length - 1] as number));
  const registering = meta.registering ?? [];
  expect(registering.filter((consumer) => meta.consumers.includes(consumer)), "registered and registering").toEqual([]);
  const finishedByAll = (position: number) => meta.consumers.length > 0 && meta.consumers.every((consumer) => positions("f", consumer).has(position));
  for (const consumer of [...meta.consumers, ...registering]) {
    const row = byConsumer("c", consumer)[0]?.value as ConsumerRow | undefined;
    const u = positions("u", consumer);
    const f = positions("f", consumer);
    const q = positions("q", consumer);
    if (registering.includes(consumer)) {
      const below = row!.registeredBelow!;
      expect([...u].sort((x, y) => x - y), `${consumer}'s walked events`).toEqual([...events.keys()].filter((position) => position < below).sort((x, y) => x - y));
      expect([f.size, q.size, row!.finished, row!.quarantined, row!.leased], `${consumer} finished nothing`).toEqual([0, 0, 0, 0, 0]);
      expect(byConsumer("l", consumer).length + byConsumer("w", consumer).length, `${consumer} leased nothing`).toBe(0);
    } else {
      for (const position of events.keys()) expect([u.has(position), f.has(position), q.has(position)].filter(Boolean).length, `${consumer} at ${position}`).toBe(1);
      expect(u.size + f.size + q.size, `${consumer}'s rows of deleted events`).toBe(events.size);
      expect([row?.finished ?? 0, row?.quarantined ?? 0, row?.leased ?? 0, row?.registeredBelow], `${consumer}'s counters`).toEqual([f.size, q.size, byConsumer("l", consumer).length, undefined]);
    }
    expect([...positions("p", consumer)].sort(), `${consumer}'s age index`).toEqual([...u].sort());
    // Heads: per key with unfinished events, one naming an unfinished event in the index its slot says.
    const unfinishedByKey = new Map<string, number[]>();
    for (const position of u) {
      const event = events.get(position)!;
      const text = JSON.stringify([event.orderingKey.namespace, event.orderingKey.subject]);
      unfinishedByKey.set(text, [...(unfinishedByKey.get(text) ?? []), position]);
    }
    const heads = byConsumer("h", consumer);
    expect(heads.map((head) => JSON.stringify(head.key.slice(1))).sort(), `${consumer}'s heads`).toEqual([...unfinishedByKey.keys()].sort());
    const ready = positions("r", consumer);
    const active = new Set<number>();
    for (const head of heads) {
      const { active: position, done } = head.value as HeadRow;
      const unfinished = unfinishedByKey.get(JSON.stringify(head.key.slice(1)))!;
      expect(unfinished, `${consumer}'s head ${render(head.key)}`).toContain(position);
      expect(Math.min(...unfinished), `${consumer}'s head ${render(head.key)} done`).toBeGreaterThan(done);
      const slot = (rowsOf(rows, "u").find((row) => row.key[0] === consumer && row.key[1] === position)!.value as UnfinishedRow).slot;
      if (slot !== Slot.Leased) expect(position, `${consumer}'s active event of ${render(head.key)} is its key's first`).toBe(Math.min(...unfinished));
      expect(ready.has(position), `${consumer}'s ready entry of ${position}`).toBe(slot === Slot.None || slot === Slot.Ready);
      active.add(position);
    }
    for (const position of ready) expect(active.has(position), `${consumer}'s ready entry of ${position} is active`).toBe(true);
  }
  const walkers = registering.map((consumer) => (byConsumer("c", consumer)[0]!.value as ConsumerRow).registeredBelow!);
  const delivered = new Set(rowsOf(rows, "x").map((row) => row.key[1] as number));
  for (const position of delivered) {
    expect(finishedByAll(position), `x at ${position}: finished by all`).toBe(true);
    expect(walkers.every((below) => position >= below), `x at ${position}: no walk passed it`).toBe(true);
  }
  if (registering.length === 0) for (const position of events.keys()) expect(delivered.has(position), `x at ${position}`).toBe(finishedByAll(position));
  if (meta.consumers.length > 0) expect(rowsOf(rows, "k").length, "k entries").toBe(events.size);
  if (meta.openIndexed !== false) {
    const quarantined = (position: number) => meta.consumers.some((consumer) => positions("q", consumer).has(position));
    const open = new Set(rowsOf(rows, "o").map((row) => row.key[0] as number));
    for (const position of events.keys()) expect(open.has(position), `o at ${position}`).toBe(!delivered.has(position) && !quarantined(position));
    expect(open.size, "o entries of deleted events").toBe([...events.keys()].filter((position) => open.has(position)).length);
  }
}

// ------------------------------------------------------- journal beside model

/**
 * The journal under test (tiny registration steps) beside the reference
 * model, on one virtual clock. Every call goes to both and must agree,
 * except a claim of a consumer whose registration is under way: the
 * journal's must answer `[]`, and the model, in which the consumer is not
 * registered yet, is not asked; the claim that finishes the registration is
 * asked of both, so the model registers the consumer there.
 */
class Beside {
  readonly engine: Engine;
  readonly time: VirtualClock = virtualClock(T0);
  readonly oracle: JournalOracle;
  journal: UsageJournal;
  /** Every delivery handed out, per consumer, in order. */
  readonly handed = new Map<ConsumerId, Delivery[]>();

  /** `readsAhead`: the journal reads ahead in groups, as over IndexedDB. */
  constructor(
    readonly capacity: Capacity,
    private readonly steps: RegistrationSteps = TINY,
    readsAhead = false,
  ) {
    this.engine = readsAhead ? readingAhead(memoryEngine()) : memoryEngine();
    this.oracle = new JournalOracle({ name: NAME, capacity, clock: this.time.clock });
    this.journal = this.open();
  }

  private open(): UsageJournal {
    const journal = createJournal(this.engine, { name: NAME, capacity: this.capacity, clock: this.time.clock });
    setRegistrationSteps(journal, this.steps);
    return journal;
  }

  /** A new journal over the same engine (a restart). */
  reopen(): void {
    this.journal = this.open();
  }

  /** Run `call` on both; they must agree (value, or error class and fields). Answers how the journal's call ended. */
  async agree(what: string, call: (journal: UsageJournal) => Promise<unknown>): Promise<Outcome> {
    const expected = await settle(() => call(this.oracle));
    const actual = await settle(() => call(this.journal));
    expect(sameOutcome(expected, actual), `${what}: model ${renderOutcome(expected)}, journal ${renderOutcome(actual)}`).toBe(true);
    await checkLayout(this.engine);
    return actual;
  }

  /** {@link agree}, answering the journal's value or rejecting with its error. */
  async both<T>(what: string, call: (journal: UsageJournal) => Promise<T>): Promise<T> {
    const actual = await this.agree(what, call);
    if (!actual.ok) throw actual.error;
    return actual.value as T;
  }

  /** What `Work.claimableAtMost` (the Durable Objects partition's `claimable`) answers, beside the model's. */
  async claimable(consumer: ConsumerId): Promise<[number, number]> {
    const now = this.time.now;
    const actual = await this.engine.transact("readonly", (tx) => new Work(tx, layout, this.capacity).claimableAtMost(consumer, now, 10));
    return [actual, this.oracle.claimableAtMost(consumer, now, 10)];
  }

  /** A claim at the clock (see the class comment). */
  async claim(consumer: ConsumerId, maxEvents: number, leaseMs = LEASE): Promise<Delivery[]> {
    const options: ClaimOptions = { maxEvents, leaseMs, now: this.time.now };
    const registered = await isRegistered(this.engine, consumer);
    let got: Delivery[];
    if (registered) got = await this.both(`claim(${consumer})`, (journal) => journal.claim(consumer, options));
    else {
      got = await this.journal.claim(consumer, options);
      await checkLayout(this.engine);
      if (await isRegistered(this.engine, consumer)) {
        const expected = await this.oracle.claim(consumer, options);
        expect(got, `the claim that registered ${consumer}`).toEqual(expected);
      } else {
        expect(got, `a claim of ${consumer} while it registers`).toEqual([]);
      }
    }
    this.handed.set(consumer, [...(this.handed.get(consumer) ?? []), ...got]);
    return got;
  }

  async append(n: number, key: number): Promise<void> {
    const event = usage(n, key, this.time.now);
    await this.both(`append(${n})`, (journal) => journal.append(event));
  }

  async ack(delivery: Delivery): Promise<void> {
    await this.both(`ack(${delivery.event.id})`, (journal) => journal.ack(delivery.id));
  }

  /** Claim and ack until the consumer is registered and its claim finds nothing; answers the events in delivery order. */
  async drain(consumer: ConsumerId): Promise<Delivery[]> {
    const drained: Delivery[] = [];
    for (;;) {
      const got = await this.claim(consumer, 3);
      if (got.length === 0 && (await isRegistered(this.engine, consumer))) return drained;
      for (const delivery of got) await this.ack(delivery);
      drained.push(...got);
    }
  }

  /** stats of every consumer must agree. */
  async sameStats(...consumers: ConsumerId[]): Promise<void> {
    for (const consumer of consumers) await this.both(`stats(${consumer})`, (journal) => journal.stats(consumer));
  }
}

/** The positions of the deliveries, per ordering key, must rise; and each event is delivered once. */
function expectOnceInKeyOrder(deliveries: readonly Delivery[], positionOf: (requestId: string) => number): void {
  const ids = deliveries.map((delivery) => delivery.event.id);
  expect(new Set(ids).size, "delivered once each").toBe(ids.length);
  const last = new Map<string, number>();
  for (const delivery of deliveries) {
    const key = JSON.stringify(delivery.event.orderingKey);
    const position = positionOf(delivery.event.id);
    expect(position, `${delivery.event.id} after the key's previous delivery`).toBeGreaterThan(last.get(key) ?? 0);
    last.set(key, position);
  }
}

// ------------------------------------------------------------------ the cases

describe("the conformance suite, registering in steps of one to three events", () => {
  // The second reads ahead, as over IndexedDB (see journal-memory.test.ts): the walk reads each chunk's rows together.
  for (const { eventsPerStep, makeEngine, label } of [
    { eventsPerStep: 1, makeEngine: () => memoryEngine(), label: "" },
    { eventsPerStep: 3, makeEngine: () => readingAhead(memoryEngine()), label: ", reading ahead" },
  ]) {
    describe(`${eventsPerStep} per step${label}`, () => {
      const cases = journalConformanceCases({
        label: `memory${label}, registering ${eventsPerStep} per step`,
        durable: false,
        canReopen: true,
        canChangeCapacity: true,
        runs: 100,
        createSubject: async (options) => {
          const engine = makeEngine();
          const open = (capacity = options.capacity) => {
            const journal = createJournal(engine, { ...options, capacity });
            // Every claim finishes the registration it goes on with: the answers are the model's.
            setRegistrationSteps(journal, { eventsPerStep, eventsPerClaim: Infinity });
            return journal;
          };
          return { journal: open(), reopen: async (changed) => open(changed?.capacity), close: () => engine.close() };
        },
      });
      for (const c of cases) it(c.name, c.run, c.timeoutMs);
    });
  }
});

describe("a consumer registering in steps", () => {
  it("answers [] and reads as unregistered until its walk is done, then gets what a model registering it at that claim gives, whatever ran in between", async () => {
    const pair = new Beside(ROOMY);
    await pair.claim(A, 1); // a registers over the empty journal, at once
    for (let n = 1; n <= 12; n++) await pair.append(n, n % 3);
    expect(await pair.claim(B, 5)).toEqual([]);
    expect(await walkedBelow(pair.engine, B)).toBe(5); // two steps of two events
    // Registering, b is not registered: the answers of a consumer that never claimed.
    await pair.sameStats(A, B);
    expect(await pair.claimable(B)).toEqual([0, 0]); // its walk wrote ready entries: not claimable yet
    await pair.both("attempts(b)", (journal) => journal.attempts(B, requestId(1)));
    await pair.both("listQuarantined(b)", (journal) => journal.listQuarantined(B));
    await expect(pair.both("ack(b)", (journal) => journal.ack({ consumer: B, event: requestId(1), attempt: 1 }))).rejects.toMatchObject({ code: "not_outstanding" });
    await expect(pair.both("release(b)", (journal) => journal.release(B, requestId(1), { now: pair.time.now }))).rejects.toMatchObject({ code: "not_quarantined" });
    // Appends to a key the walk passed and to a new one; a's verdicts and the operator's.
    await pair.append(13, 0);
    await pair.append(14, 9);
    pair.time.advance(1000);
    const [first, second, third] = await pair.claim(A, 3);
    await pair.ack(first!);
    await pair.both("quarantine", (journal) => journal.quarantine(second!.id, "rejected"));
    await pair.both("quarantine", (journal) => journal.quarantine(third!.id, "malformed"));
    expect(await pair.claim(B, 5)).toEqual([]);
    expect(await walkedBelow(pair.engine, B)).toBe(9);
    await pair.both("release", (journal) => journal.release(A, second!.event.id, { now: pair.time.now, actor: "op" }));
    await pair.both("discard", (journal) => journal.discard(A, third!.event.id, { now: pair.time.now, actor: "op" }));
    // A restart: the walk goes on where it stopped.
    pair.reopen();
    expect(await pair.claim(B, 5)).toEqual([]);
    expect(await walkedBelow(pair.engine, B)).toBe(13);
    await pair.append(15, 1);
    await pair.sameStats(A, B);
    const got = await pair.claim(B, 5); // walks 13 to 15, registers b and claims, in the model too
    expect(got.map((delivery) => delivery.event.id)).toEqual([1, 2, 3, 14].map(requestId));
    expect(await walkedBelow(pair.engine, B)).toBeNull();
    await pair.sameStats(A, B);
    pair.time.advance(LEASE);
    expect(await pair.claimable(B)).toEqual([4, 4]);
    pair.time.advance(-LEASE);
    for (const delivery of got) await pair.ack(delivery);
    const drainedB = [...got, ...(await pair.drain(B))];
    const drainedA = await pair.drain(A);
    await pair.sameStats(A, B);
    // Nothing lost: b got every event once, a every one it had not finished, each key in order.
    expect(drainedB.map((delivery) => delivery.event.id).sort()).toEqual(Array.from({ length: 15 }, (_, i) => requestId(i + 1)));
    expectOnceInKeyOrder(drainedB, positionOf);
    expectOnceInKeyOrder(
      pair.handed.get(A)!.filter((delivery) => delivery.id.attempt === 1),
      positionOf,
    );
    expect(drainedA.length).toBe(13); // all but the acked and the discarded
  });

  it("registers two consumers at the same time, each as the model registers it at the claim that finishes", async () => {
    const pair = new Beside(ROOMY);
    for (let n = 1; n <= 10; n++) await pair.append(n, n % 4);
    // No consumer registered: b's walk builds the key index, and c's until b or c is registered.
    expect(await pair.claim(B, 2)).toEqual([]);
    expect(await pair.claim(C, 2)).toEqual([]);
    await pair.append(11, 1);
    expect(await pair.claim(C, 2)).toEqual([]);
    expect([await walkedBelow(pair.engine, B), await walkedBelow(pair.engine, C)]).toEqual([5, 9]);
    const gotC = await pair.claim(C, 2); // walks 9 to 11: c is the first registered
    expect(gotC.map((delivery) => delivery.event.id)).toEqual([1, 2].map(requestId));
    for (const delivery of gotC) await pair.ack(delivery);
    expect(await pair.claim(B, 2)).toEqual([]);
    await pair.append(12, 3);
    const gotB = await pair.claim(B, 2); // walks 9 to 12
    expect(gotB.map((delivery) => delivery.event.id)).toEqual([1, 2].map(requestId));
    for (const delivery of gotB) await pair.ack(delivery);
    const drainedB = [...gotB, ...(await pair.drain(B))];
    const drainedC = [...gotC, ...(await pair.drain(C))];
    await pair.sameStats(B, C);
    for (const drained of [drainedB, drainedC]) {
      expect(drained.map((delivery) => delivery.event.id).sort()).toEqual(Array.from({ length: 12 }, (_, i) => requestId(i + 1)));
      expectOnceInKeyOrder(drained, positionOf);
    }
  });

  it("keeps its backlog through drop_oldest drops of events its walk passed (its active events among them) and of events it has not reached", async () => {
    const pair = new Beside({ ...BILLING_GRADE, maxEvents: 9, policy: "drop_oldest" });
    await pair.claim(A, 1);
    // Keys 0, 1, 2, 0, 1, 2, ...: b's walk over 1 to 4 makes 1, 2 and 3 its active events.
    for (let n = 1; n <= 9; n++) await pair.append(n, (n - 1) % 3);
    expect(await pair.claim(B, 3)).toEqual([]);
    expect(await walkedBelow(pair.engine, B)).toBe(5);
    const headsOfB = async () => {
      const rows = await readRows(pair.engine);
      const head = (key: number) => (rowsOf(rows, "h").find((row) => row.key[0] === B && row.key[2] === `k-${key}`)?.value as HeadRow | undefined)?.active;
      return [head(0), head(1), head(2)];
    };
    // Drops 1 (key 0's next event, 4, was walked: it takes the turn) and 2 (key 1's next, 5, was not:
    // no head row until the walk reaches it, which makes 5 the key's active event).
    await pair.append(10, 5);
    await pair.append(11, 5);
    expect(await headsOfB()).toEqual([4, undefined, 3]);
    expect(await pair.claim(B, 3)).toEqual([]);
    expect(await walkedBelow(pair.engine, B)).toBe(9);
    expect(await headsOfB()).toEqual([4, 5, 3]);
    // Drops 3 to 6, all walked: the turns pass to 7 and 8; key 2's next, 9, was not walked.
    for (let n = 12; n <= 15; n++) await pair.append(n, 6);
    expect(await headsOfB()).toEqual([7, 8, undefined]);
    // Drops 7 and 8 (walked, the last of their keys) and 9 (not walked: b has no row of it).
    for (let n = 16; n <= 18; n++) await pair.append(n, 7);
    expect(await headsOfB()).toEqual([undefined, undefined, undefined]);
    await pair.sameStats(A, B);
    const drainedB = await pair.drain(B);
    await pair.sameStats(A, B);
    expect((await pair.journal.stats(B)).dropped).toBe(9);
    expect(drainedB.map((delivery) => delivery.event.id).sort()).toEqual(Array.from({ length: 9 }, (_, i) => requestId(i + 10)));
    expectOnceInKeyOrder(drainedB, positionOf);
  });
});

/** A journal with tiny registration steps over a memory engine, without a model (where the journal keeps more than the model). */
function alone(capacity: Capacity, steps: RegistrationSteps = TINY) {
  const engine = memoryEngine();
  const time = virtualClock(T0);
  const journal = createJournal(engine, { name: NAME, capacity, clock: time.clock });
  setRegistrationSteps(journal, steps);
  const claimAll = async (consumer: ConsumerId): Promise<Delivery[]> => {
    const got = await journal.claim(consumer, { maxEvents: 100, leaseMs: LEASE, now: time.now });
    await checkLayout(engine);
    return got;
  };
  const ackAll = async (deliveries: readonly Delivery[]): Promise<void> => {
    for (const delivery of deliveries) await journal.ack(delivery.id);
    await checkLayout(engine);
  };
  return { engine, time, journal, claimAll, ackAll };
}

describe("retention while a consumer registers", () => {
  const windowed: Capacity = { ...ROOMY, retainAcknowledgedMs: 1000 };

  it("prunes no event the walk passed; one delivered to all that it has not reached is pruned once its window has passed", async () => {
    const { engine, time, journal, claimAll, ackAll } = alone(windowed);
    await claimAll(A);
    // Twenty events of twenty keys, all acked by a: delivered to every registered consumer.
    for (let n = 1; n <= 20; n++) await journal.append(usage(n, n, T0));
    await ackAll(await claimAll(A));
    time.now = T0 + 10;
    expect(await claimAll(B)).toEqual([]); // walks 1 to 4, inside their window: b's now
    time.now = T0 + 5000; // every window has passed
    // A registration at this prune would keep nothing (all delivered to a); b's walk has passed 1 to 4.
    expect(await journal.prune({ now: time.now, limit: 100 })).toEqual({ pruned: 16 });
    await checkLayout(engine);
    const got = await claimAll(B);
    expect(got.map((delivery) => delivery.event.id)).toEqual([1, 2, 3, 4].map(requestId));
    await ackAll(got);
    expect(await journal.prune({ now: time.now, limit: 100 })).toEqual({ pruned: 4 });
  });

  it("the walk prunes, as it reaches them, the events prunable at the claim's time", async () => {
    const { engine, time, journal, claimAll, ackAll } = alone(windowed, { eventsPerStep: 2, eventsPerClaim: 100 });
    await claimAll(A);
    for (let n = 1; n <= 20; n++) await journal.append(usage(n, n, T0));
    await ackAll(await claimAll(A));
    setRegistrationSteps(journal, { eventsPerStep: 2, eventsPerClaim: 4 });
    time.now = T0 + 10;
    expect(await claimAll(B)).toEqual([]); // walks 1 to 4
    setRegistrationSteps(journal, { eventsPerStep: 2, eventsPerClaim: 100 });
    time.now = T0 + 5000;
    // The claim prunes 8 (5 to 12) before its steps; its walk prunes 13 to 20, and b registers with 1 to 4.
    const got = await claimAll(B);
    expect(got.map((delivery) => delivery.event.id)).toEqual([1, 2, 3, 4].map(requestId));
    const rows = await readRows(engine);
    expect(rowsOf(rows, "e").map((row) => row.key[0])).toEqual([1, 2, 3, 4]);
  });

  it("reclaims for room no event finished while a consumer registers; one delivered to all before it began and not reached yet is reclaimed as before", async () => {
    const { engine, journal, claimAll, ackAll } = alone({ ...BILLING_GRADE, maxEvents: 6 });
    await claimAll(A);
    for (let n = 1; n <= 6; n++) await journal.append(usage(n, n, T0));
    const handed = await claimAll(A);
    await ackAll(handed.filter((delivery) => delivery.event.id !== requestId(4))); // 1, 2, 3, 5 and 6 delivered to all
    expect(await claimAll(B)).toEqual([]); // walks 1 to 4: those are b's now
    await ackAll(handed.filter((delivery) => delivery.event.id === requestId(4))); // a is done with 4: b is not
    // 5 and 6, not reached by b's walk, are delivered to all: room, as they were before b came.
    expect(await journal.append(usage(7, 7, T0))).toEqual({ status: "accepted", position: 7 });
    expect(await journal.append(usage(8, 8, T0))).toEqual({ status: "accepted", position: 8 });
    await checkLayout(engine);
    // 1 to 4 are b's, 4 finished by a while b registered: a registration at this append would have given 4 up.
    await expect(journal.append(usage(9, 9, T0))).rejects.toBeInstanceOf(AtCapacityError);
    const gotB = await claimAll(B); // walks 7 and 8, registers, claims
    expect(gotB.map((delivery) => delivery.event.id)).toEqual([1, 2, 3, 4, 7, 8].map(requestId));
    await ackAll(gotB);
    await ackAll(await claimAll(A)); // 7 and 8
    expect(await journal.append(usage(9, 9, T0))).toEqual({ status: "accepted", position: 9 });
    await checkLayout(engine);
  });

  it("under drop_oldest, an event the others finished is not reclaimed once the walk passed it: a full journal drops the oldest open event instead, counted", async () => {
    const { engine, journal, claimAll, ackAll } = alone({ ...BILLING_GRADE, maxEvents: 4, policy: "drop_oldest" }, { eventsPerStep: 1, eventsPerClaim: 2 });
    await claimAll(A);
    for (let n = 1; n <= 4; n++) await journal.append(usage(n, n, T0));
    const handed = await claimAll(A);
    await ackAll(handed.filter((delivery) => delivery.event.id === requestId(2))); // 2 delivered to all
    expect(await claimAll(B)).toEqual([]); // walks 1 and 2: both b's now, 2 no longer delivered to all
    // Full: a registration at this append would reclaim 2; the journal counts b from its first claim and drops 1.
    expect(await journal.append(usage(5, 5, T0))).toEqual({ status: "accepted", position: 5 });
    expect((await journal.stats(A)).dropped).toBe(1);
    expect(await journal.attempts(A, requestId(1))).toEqual([]);
    await checkLayout(engine);
    let gotB = await claimAll(B);
    if (gotB.length === 0) gotB = await claimAll(B);
    expect(gotB.map((delivery) => delivery.event.id)).toEqual([2, 3, 4, 5].map(requestId));
  });
});

// ------------------------------------------------------------------ property

type Op =
  | { readonly t: "append"; readonly key: number }
  | { readonly t: "claim"; readonly consumer: 0 | 1 | 2; readonly maxEvents: number }
  | { readonly t: "verdict"; readonly kind: "ack" | "quarantine" | "nack"; readonly index: number }
  | { readonly t: "operator"; readonly kind: "release" | "discard"; readonly index: number }
  | { readonly t: "reopen" }
  | { readonly t: "advance"; readonly ms: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ t: fc.constant("append" as const), key: fc.nat({ max: 4 }) }) },
  { weight: 4, arbitrary: fc.record({ t: fc.constant("claim" as const), consumer: fc.constantFrom<0 | 1 | 2>(0, 0, 1, 2), maxEvents: fc.integer({ min: 1, max: 3 }) }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant("verdict" as const), kind: fc.constantFrom<"ack" | "quarantine" | "nack">("ack", "ack", "quarantine", "nack"), index: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("operator" as const), kind: fc.constantFrom<"release" | "discard">("release", "discard"), index: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("reopen" as const) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant("advance" as const), ms: fc.integer({ min: 0, max: 2000 }) }) },
);

describe("registration in steps (property)", () => {
  it("interleaved with appends, another consumer's and the operator's calls and restarts, gives the newcomers every event once, in each key's order, as the model does", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({ eventsPerStep: fc.integer({ min: 1, max: 3 }), eventsPerClaim: fc.integer({ min: 1, max: 5 }) }),
        fc.boolean(),
        fc.array(fc.nat({ max: 4 }), { maxLength: 10 }),
        fc.array(opArb, { maxLength: 40 }),
        async (steps, readsAhead, initialKeys, ops) => {
          const pair = new Beside(ROOMY, steps, readsAhead);
          await pair.claim(A, 1); // a is registered from the start; b and c register along the way
          let appended = 0;
          for (const key of initialKeys) await pair.append(++appended, key);
          const outstanding: Delivery[] = [];
          const quarantined: string[] = [];
          for (const op of ops) {
            switch (op.t) {
              case "append":
                await pair.append(++appended, op.key);
                break;
              case "claim": {
                const consumer = [A, B, C][op.consumer]!;
                const got = await pair.claim(consumer, op.maxEvents);
                // The newcomers finish what they get at once: each event must reach them once.
                if (consumer === A) outstanding.push(...got);
                else for (const delivery of got) await pair.ack(delivery);
                break;
              }
              case "verdict": {
                if (outstanding.length === 0) break;
                const [delivery] = outstanding.splice(op.index % outstanding.length, 1);
                const id = delivery!.id;
                if (op.kind === "ack") await pair.agree("ack", (journal) => journal.ack(id));
                else if (op.kind === "nack") await pair.agree("nack", (journal) => journal.nack(id, { retryAfterMs: 500, error: "no", now: pair.time.now }));
                else if ((await pair.agree("quarantine", (journal) => journal.quarantine(id, "rejected"))).ok) quarantined.push(id.event);
                break;
              }
              case "operator": {
                if (quarantined.length === 0) break;
                const [requestId] = quarantined.splice(op.index % quarantined.length, 1);
                await pair.agree(op.kind, (journal) => journal[op.kind](A, requestId!, { now: pair.time.now }));
                break;
              }
              case "reopen":
                pair.reopen();
                break;
              case "advance":
                pair.time.advance(op.ms);
                break;
            }
          }
          for (const consumer of [B, C]) {
            await pair.drain(consumer);
            const handed = pair.handed.get(consumer) ?? [];
            expect(handed.map((delivery) => delivery.event.id).sort()).toEqual(Array.from({ length: appended }, (_, i) => requestId(i + 1)));
            expectOnceInKeyOrder(handed, positionOf);
          }
          await pair.sameStats(A, B, C);
        },
      ),
      { numRuns: 100 },
    );
  }, 120_000);
});

// ------------------------------------------------------------------ bounds

interface Written {
  readonly mode: TransactionMode;
  rows: number;
  /** Gets and scans that reached the engine (a read answered by the journal's read-ahead cache does not). */
  reads: number;
}

/** `inner`, counting the rows each committed transaction writes (puts and deletes; a range delete counts one). */
function counting(inner: Engine, log: Written[]): Engine {
  return {
    durable: inner.durable,
    ...(inner.localReads === undefined ? {} : { localReads: inner.localReads }),
    close: () => inner.close(),
    async transact<T>(mode: TransactionMode, fn: (tx: EngineTransaction) => Promise<T>, options?: TransactOptions): Promise<T> {
      const written: Written = { mode, rows: 0, reads: 0 };
      const result = await inner.transact(
        mode,
        (tx) => {
          written.rows = 0;
          written.reads = 0;
          return fn({
            get: (key) => (written.reads++, tx.get(key)),
            scan: (range, scanOptions) => (written.reads++, tx.scan(range, scanOptions)),
            put: (key, value) => (written.rows++, tx.put(key, value)),
            delete: (key) => (written.rows++, tx.delete(key)),
            ...(tx.deleteRange ? { deleteRange: (range) => (written.rows++, tx.deleteRange!(range)) } : {}),
          });
        },
        options,
      );
      log.push(written);
      return result;
    },
  };
}

describe("the transactions of a registration", () => {
  it("write a bounded number of rows each: 5,000 events register in steps of 1,000", async () => {
    const log: Written[] = [];
    const engine = counting(memoryEngine(), log);
    const journal = createJournal(engine, { name: NAME, capacity: BILLING_GRADE, clock: () => T0 });
    for (let n = 0; n < 5000; n += 1000) {
      await journal.appendBatch(Array.from({ length: 1000 }, (_, i) => usage(n + i + 1, (n + i) % 50, T0)));
    }
    log.length = 0;
    // The first consumer: its walk writes the key index too (three rows per event, and two per key and step).
    const got = await journal.claim(B, { maxEvents: 10, leaseMs: LEASE, now: T0 });
    expect(got.length).toBe(10);
    const writing = log.filter((written) => written.mode === "readwrite");
    expect(writing.length).toBe(5);
    for (const written of writing) expect(written.rows).toBeLessThanOrEqual(3_500);
    expect(writing.reduce((sum, written) => sum + written.rows, 0)).toBeGreaterThan(15_000);
  });

  it("stay bounded whatever the number of consumers when the walk prunes: 8 registered consumers, 3,000 events past their window", async () => {
    // Read ahead as over IndexedDB, where every read that reaches the engine is a request round trip.
    const log: Written[] = [];
    const engine = counting(readingAhead(memoryEngine()), log);
    let now = T0;
    const journal = createJournal(engine, { name: NAME, capacity: { ...BILLING_GRADE, retainAcknowledgedMs: 1000 }, clock: () => now });
    const consumers = Array.from({ length: 8 }, (_, i) => parseConsumerId(`c${i}`));
    for (const consumer of consumers) await journal.claim(consumer, { maxEvents: 1, leaseMs: LEASE, now });
    for (let n = 0; n < 3000; n += 500) {
      await journal.appendBatch(Array.from({ length: 500 }, (_, i) => usage(n + i + 1, (n + i) % 50, T0)));
    }
    for (const consumer of consumers) {
      for (let got = await journal.claim(consumer, { maxEvents: 1000, leaseMs: LEASE, now }); got.length > 0; got = await journal.claim(consumer, { maxEvents: 1000, leaseMs: LEASE, now })) {
        await journal.ackBatch(got.map((delivery) => delivery.id));
      }
    }
    now = T0 + 5000; // every event is delivered to all and past its window: the walk prunes each one
    log.length = 0;
    expect(await journal.claim(B, { maxEvents: 10, leaseMs: LEASE, now })).toEqual([]);
    const writing = log.filter((written) => written.mode === "readwrite");
    expect(writing.length).toBe(3);
    // Per pruned event its own rows (id, observed, key order, delivered entry), the runs of event rows and of
    // each consumer's finished rows one range delete each: not one finished row per consumer and event
    // (about 13,000 rows and 9,000 reads a step, one by one, when the walk pruned event by event).
    for (const written of writing) {
      expect(written.rows).toBeLessThanOrEqual(4_500);
      expect(written.reads).toBeLessThanOrEqual(400);
    }
    expect(await journal.stats(consumers[0]!)).toMatchObject({ pending: 0, inFlight: 0, quarantined: 0 });
    const rows = await engine.transact("readonly", (tx) => tx.scan({ prefix: layout.root }, { keysOnly: true }));
    expect(rows.filter((row) => ["e", "f", "x", "i", "t", "k"].includes(row.key[2] as string))).toEqual([]);
  });
});

function positionOf(id: string): number {
  return parseInt(id.slice(-12), 16);
}
