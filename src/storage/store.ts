/**
 * `createStore`: every storage primitive of one store, wired over one Engine.
 *
 * All keys of store `name` live under `["s", name]`, so one engine holds many
 * stores (and journals) side by side, and a store is the unit a Durable
 * Object hosts as single writer. The primitives keep no state outside the
 * engine (leases keep only their renewal timers), so a new store object over
 * the same engine continues exactly where an old one stopped.
 */
import type { Engine } from "../engine.js";
import { createBlobs } from "./blobs.js";
import { createComposite, type Composite } from "./composite.js";
import { InvalidArgumentError } from "./errors.js";
import { createKV } from "./kv.js";
import { checkScheduler, createLeaser, type Scheduler } from "./leaser.js";
import { createLedger } from "./ledger.js";
import { validateName } from "./names.js";
import { checkOptionalFunction } from "./options.js";
import { createOrderedIndex } from "./ordered/index.js";

/**
 * Options of {@link createStore}. Each is checked when the store is created
 * (a clock or callback that is not a function, a scheduler without
 * `setTimeout` / `clearTimeout` functions, a bad lease time): the store is
 * not created, and {@link InvalidArgumentError} names the option.
 */
export interface StoreOptions {
  /** The store's name (storage name grammar); one engine can hold many stores. */
  readonly name: string;
  /** Epoch ms, for lease expiry and fencing. Defaults to `Date.now`. */
  readonly clock?: () => number;
  /** Timers for lease renewal. Defaults to the global timers. */
  readonly scheduler?: Scheduler;
  /** Lease time to live (default 30 s) and renewal period (default a third of it). */
  readonly leaseTtlMs?: number;
  readonly leaseRenewEveryMs?: number;
  /** Told about lease renewals the engine failed. */
  readonly onLeaseRenewError?: (error: unknown) => void;
}

/** A {@link Composite} over one engine, with its ordered index wired. */
export interface Store extends Composite {
  readonly name: string;
}

/**
 * Wire the ledger, leaser, KV, blobs and ordered index of store `name` over
 * `engine`.
 *
 * @throws {InvalidArgumentError} naming the option, for a bad name or option.
 *
 * @example
 * ```ts
 * import { createStore } from "isostore";
 * import { memoryEngine } from "isostore/memory";
 *
 * const store = createStore(memoryEngine(), { name: "tenants/acme" });
 * await store.ledger.append("audit", 0, new TextEncoder().encode("created"));
 * const rev = await store.kv.put("settings/theme", 0, new TextEncoder().encode("dark"));
 * const lease = await store.leaser.acquire("jobs/nightly");
 * await lease.release();
 * ```
 */
export function createStore(engine: Engine, options: StoreOptions): Store {
  if (options === null || typeof options !== "object") throw new InvalidArgumentError("options", "createStore needs { name }");
  const name = validateName(options.name);
  // Checked under the store's own option names (the leaser checks them again under its names).
  const clock = checkOptionalFunction("clock", options.clock) ?? Date.now;
  checkScheduler("scheduler", options.scheduler);
  checkOptionalFunction("onLeaseRenewError", options.onLeaseRenewError);
  const composite = createComposite({
    ledger: createLedger(engine, { store: name, clock }),
    leaser: createLeaser(engine, {
      store: name,
      clock,
      scheduler: options.scheduler,
      ttlMs: options.leaseTtlMs,
      renewEveryMs: options.leaseRenewEveryMs,
      onRenewError: options.onLeaseRenewError,
    }),
    kv: createKV(engine, { store: name, clock }),
    blobs: createBlobs(engine, { store: name }),
    orderedIndex: createOrderedIndex(engine, { store: name }),
  });
  return { ...composite, name };
}
