/**
 * The storage primitives', OrderedIndex's and event queue's conformance
 * suites against `durableObjectEngine(ctx.storage)` inside a real
 * SQLite-backed object (`EngineHost`, entered with `runInDurableObject`), as
 * the journal suite runs in `journal-engine.test.ts`. Every subject starts
 * from empty storage (the object's table is emptied), and a restart is a new
 * engine over the same storage: what an evicted object does when it starts
 * again. The random runs are the suites' defaults (60 / 100 / 100; the
 * whole file takes a few seconds in workerd).
 */
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { describe, it } from "vitest";
import { durableObjectEngine, type Engine } from "../../adapters/durable-objects/index.js";
import { createOrderedIndex } from "../../src/storage/ordered/index.js";
import { orderedConformanceCases, queueConformanceCases, storageConformanceCases, type OrderedSubjectFactory, type StorageSubjectFactory } from "../../src/testing/index.js";

/** The storage of the object the running case is inside. */
let storage: DurableObjectStorage | null = null;

/** An engine over the running case's object, emptied (the engine creates its table first). */
function freshEngine(): { readonly host: DurableObjectStorage; readonly engine: Engine } {
  if (storage === null) throw new Error("a conformance case ran outside its object");
  const host = storage;
  const engine = durableObjectEngine(host);
  host.sql.exec("DELETE FROM _isostore_kv");
  return { host, engine };
}

const storageSubjects: StorageSubjectFactory = async () => {
  const { host, engine } = freshEngine();
  return { engine, reopen: async () => durableObjectEngine(host), close: () => engine.close() };
};

const orderedSubjects: OrderedSubjectFactory = async ({ maxRevision }) => {
  const { host, engine } = freshEngine();
  const open = (over: Engine) => createOrderedIndex(over, maxRevision === undefined ? { store: "conformance" } : { store: "conformance", maxRevision });
  return { index: open(engine), reopen: async () => open(durableObjectEngine(host)), close: () => engine.close() };
};

interface Case {
  readonly name: string;
  readonly run: () => Promise<void>;
  readonly timeoutMs?: number;
}

/** Each case runs whole inside its own object. */
function register(prefix: string, cases: readonly Case[]): void {
  cases.forEach((c, index) => {
    it(
      c.name,
      async () => {
        const stub = env.ENGINE_HOST.get(env.ENGINE_HOST.idFromName(`${prefix}-${index}`));
        await runInDurableObject(stub, async (_instance, state) => {
          storage = state.storage;
          try {
            await c.run();
          } finally {
            storage = null;
          }
        });
      },
      c.timeoutMs,
    );
  });
}

describe("storage primitives over the durable object engine", () => {
  register("primitives", storageConformanceCases({ label: "durable-objects engine", createSubject: storageSubjects }));
});

describe("OrderedIndex over the durable object engine", () => {
  register(
    "ordered",
    orderedConformanceCases({ label: "durable-objects engine", canReopen: true, supportsMaxRevision: true, createSubject: orderedSubjects }),
  );
});

describe("event queue over a ledger on the durable object engine", () => {
  register("queue", queueConformanceCases({ label: "durable-objects engine", createSubject: storageSubjects }));
});
