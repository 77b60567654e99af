/**
 * Leaser: renewable, exclusive, epoch-fenced ownership of a name
 * (`storage-primitives.go.txt`, `Leaser`, `Lease`).
 *
 * Lease state is a fact in storage, never a timer: one row per name holding
 * the epoch of the latest grant and the time it expires (`expiresAt`, 0 once
 * released). So independent leasers over the same engine (other tabs, other
 * processes, a restarted worker) see each other, and a crashed holder simply
 * stops renewing.
 *
 * What it promises:
 * - `acquire` fails with {@link LeaseHeldError} while a live holder exists;
 *   otherwise it grants an epoch strictly greater than every earlier grant of
 *   that name (the row keeps the epoch after release and expiry).
 * - `lease.signal` aborts exactly once, with a {@link LeaseLostError}, when
 *   the holder can no longer safely assert ownership: on release, when a
 *   renewal finds the lease taken over, or when the lease's expiry passes
 *   without a successful renewal (the holder gives up at its own expiry
 *   time, before anyone else can be granted the name).
 * - `release` is idempotent, also after loss, and never frees a later holder
 *   (it only clears the row while the row still names its epoch).
 * - Writes can be fenced by an epoch: {@link Leaser.assertHeld}, and the
 *   `fence` option of ledger and KV writes, which checks inside the write's
 *   own transaction.
 *
 * Renewal runs every `renewEveryMs` (default a third of `ttlMs`) on the
 * injected scheduler and clock, so tests drive it on virtual time.
 */
import type { Engine } from "../engine.js";
import { LeaseHeldError, LeaseLostError, InvalidArgumentError } from "./errors.js";
import { holds } from "./fence.js";
import { storeLayout, type LeaseRow, type StoreLayout } from "./layout.js";
import { validateName } from "./names.js";
import { throwIfAborted, type CallOptions, type PlatformAbortSignal } from "./options.js";
import { checkCount, transact } from "./transaction.js";
import { newAbortController, type SignalSource } from "./web.js";

/**
 * Timers, injected so leases run on virtual time in tests. Defaults to the
 * global timers. A callback may return the promise of the work it started
 * (a renewal), so a virtual scheduler can wait for that work before it moves
 * the clock on; real timers ignore it.
 */
export interface Scheduler {
  setTimeout(callback: () => unknown, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The default lease time to live (30 s). */
export const DEFAULT_LEASE_TTL_MS = 30_000;

/**
 * A granted lease. While it is held, a renewal timer is scheduled on the
 * leaser's scheduler (with the global timers that keeps a Node process
 * alive): release it, or let it be lost, when done.
 */
export interface Lease {
  readonly name: string;
  /** The grant's epoch: strictly greater than every earlier grant of this name. */
  readonly epoch: number;
  /** Aborts once (reason: {@link LeaseLostError}) when ownership is lost: release, expiry, takeover. */
  readonly signal: PlatformAbortSignal;
  /** Give the lease up. Idempotent, also after loss; never frees a later holder. */
  release(options?: CallOptions): Promise<void>;
}

/** Grants leases by name. */
export interface Leaser {
  /**
   * Take the lease `name`.
   *
   * @throws {LeaseHeldError} while another holder owns it (`holderEpoch` is theirs).
   */
  acquire(name: string, options?: CallOptions): Promise<Lease>;
  /**
   * Check, now, that the holder at `epoch` still owns `name`.
   *
   * @throws {LeaseLostError} when it does not.
   */
  assertHeld(name: string, epoch: number, options?: CallOptions): Promise<void>;
}

/** Options of {@link createLeaser}. */
export interface LeaserOptions {
  /** The store's name (storage name grammar): keys live under `["s", store]`. */
  readonly store: string;
  /** Epoch ms. Defaults to `Date.now`. */
  readonly clock?: (() => number) | undefined;
  /** Defaults to the global `setTimeout` / `clearTimeout`. */
  readonly scheduler?: Scheduler | undefined;
  /** How long a grant or renewal lasts. Default {@link DEFAULT_LEASE_TTL_MS}. */
  readonly ttlMs?: number | undefined;
  /** How often a holder renews; less than `ttlMs`. Default `ttlMs / 3`. */
  readonly renewEveryMs?: number | undefined;
  /** Told about a renewal the engine failed (the lease is kept until its expiry, and retried). */
  readonly onRenewError?: ((error: unknown) => void) | undefined;
}

function globalScheduler(): Scheduler {
  const host = globalThis as unknown as { setTimeout: (callback: () => void, ms: number) => unknown; clearTimeout: (handle: unknown) => void };
  return { setTimeout: (callback, ms) => host.setTimeout(() => void callback(), ms), clearTimeout: (handle) => host.clearTimeout(handle) };
}

/**
 * A {@link Leaser} over an Engine. Usually reached through `createStore`.
 *
 * @example
 * ```ts
 * const { leaser, ledger } = createStore(memoryEngine(), { name: "app" });
 * const lease = await leaser.acquire("workers/compactor");
 * lease.signal.addEventListener("abort", () => stopWork());
 * await ledger.append("compactions", tip, payload, { fence: { lease: lease.name, epoch: lease.epoch } });
 * await lease.release();
 * ```
 */
export function createLeaser(engine: Engine, options: LeaserOptions): Leaser {
  // At least 2 ms: a lease renews strictly before it runs out, every whole millisecond or more.
  const ttlMs = checkCount("ttlMs", options.ttlMs ?? DEFAULT_LEASE_TTL_MS, 2);
  const renewEveryMs = checkCount("renewEveryMs", options.renewEveryMs ?? Math.max(1, Math.floor(ttlMs / 3)), 1);
  if (renewEveryMs >= ttlMs) throw new InvalidArgumentError("renewEveryMs", "must be less than ttlMs");
  return new EngineLeaser(engine, {
    layout: storeLayout(options),
    clock: options.clock ?? Date.now,
    scheduler: options.scheduler ?? globalScheduler(),
    ttlMs,
    renewEveryMs,
    onRenewError: options.onRenewError ?? (() => undefined),
  });
}

interface LeaserConfig {
  readonly layout: StoreLayout;
  readonly clock: () => number;
  readonly scheduler: Scheduler;
  readonly ttlMs: number;
  readonly renewEveryMs: number;
  readonly onRenewError: (error: unknown) => void;
}

class EngineLeaser implements Leaser {
  constructor(
    private readonly engine: Engine,
    private readonly config: LeaserConfig,
  ) {}

  async acquire(name: string, options?: CallOptions): Promise<Lease> {
    validateName(name);
    throwIfAborted(options);
    const { layout, clock, ttlMs } = this.config;
    const now = clock();
    const granted = await transact(this.engine, "readwrite", "leaser.acquire", options, async (tx) => {
      const row = await tx.get<LeaseRow>(layout.lease(name));
      if (row !== undefined && row.expiresAt > now) throw new LeaseHeldError(name, row.epoch);
      const next: LeaseRow = { epoch: (row?.epoch ?? 0) + 1, expiresAt: now + ttlMs };
      tx.put(layout.lease(name), next);
      return next;
    });
    return new HeldLease(this.engine, this.config, name, granted.epoch, granted.expiresAt);
  }

  async assertHeld(name: string, epoch: number, options?: CallOptions): Promise<void> {
    validateName(name);
    checkCount("epoch", epoch, 1);
    throwIfAborted(options);
    const now = this.config.clock();
    const row = await transact(this.engine, "readonly", "leaser.assertHeld", options, (tx) => tx.get<LeaseRow>(this.config.layout.lease(name)));
    if (!holds(row, epoch, now)) throw new LeaseLostError(name, epoch);
  }
}

class HeldLease implements Lease {
  readonly signal: PlatformAbortSignal;
  private readonly controller: SignalSource;
  private timer: unknown;
  private released = false;

  constructor(
    private readonly engine: Engine,
    private readonly config: LeaserConfig,
    readonly name: string,
    readonly epoch: number,
    /** Until when this holder may assert ownership, as far as it knows. */
    private expiresAt: number,
  ) {
    this.controller = newAbortController();
    this.signal = this.controller.signal as unknown as PlatformAbortSignal;
    this.schedule();
  }

  private get lost(): boolean {
    return this.controller.signal.aborted;
  }

  private schedule(): void {
    const delay = Math.max(0, Math.min(this.config.renewEveryMs, this.expiresAt - this.config.clock()));
    // tick() never rejects (renewal failures go to onRenewError), so handing its promise to the scheduler is safe.
    this.timer = this.config.scheduler.setTimeout(() => this.tick(), delay);
  }

  /** Renew, or give up when the expiry passed or the row names someone else. Never throws. */
  private async tick(): Promise<void> {
    this.timer = undefined;
    if (this.lost) return;
    const now = this.config.clock();
    if (now >= this.expiresAt) return this.lose();
    const { layout, ttlMs } = this.config;
    try {
      const renewed = await transact(this.engine, "readwrite", "lease.renew", undefined, async (tx) => {
        const row = await tx.get<LeaseRow>(layout.lease(this.name));
        if (!holds(row, this.epoch, now)) return false;
        tx.put(layout.lease(this.name), { epoch: this.epoch, expiresAt: now + ttlMs } satisfies LeaseRow);
        return true;
      });
      if (!renewed) return this.lose();
      this.expiresAt = now + ttlMs;
    } catch (error) {
      this.config.onRenewError(error);
    }
    if (!this.lost) this.schedule();
  }

  private lose(): void {
    if (this.timer !== undefined) this.config.scheduler.clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.lost) this.controller.abort(new LeaseLostError(this.name, this.epoch));
  }

  async release(options?: CallOptions): Promise<void> {
    throwIfAborted(options);
    if (this.released) return;
    // Stop asserting ownership first: from here on this holder does no more work under the lease.
    this.lose();
    const { layout } = this.config;
    await transact(this.engine, "readwrite", "lease.release", options, async (tx) => {
      const row = await tx.get<LeaseRow>(layout.lease(this.name));
      // Only our own grant is cleared; a later holder's row is left alone.
      if (row !== undefined && row.epoch === this.epoch && row.expiresAt !== 0) {
        tx.put(layout.lease(this.name), { epoch: this.epoch, expiresAt: 0 } satisfies LeaseRow);
      }
    });
    this.released = true;
  }
}
