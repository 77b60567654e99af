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
 *   time, before anyone else can be granted the name). A renewal whose
 *   transaction commits only after that is cleared again, so the name is
 *   not held by nobody until the late renewal's expiry.
 * - `release` is idempotent, also after loss, and never frees a later holder
 *   (it only clears the row while the row still names its epoch).
 * - Writes can be fenced by an epoch: {@link Leaser.assertHeld}, and the
 *   `fence` option of ledger and KV writes, which checks inside the write's
 *   own transaction.
 *
 * Renewal runs every `renewEveryMs` (default a third of `ttlMs`) on the
 * injected scheduler and clock, so tests drive it on virtual time. Beside it,
 * a second timer stands at the lease's expiry as the holder knows it (the
 * expiry it wrote, computed from the clock read before the write) and is
 * moved on by each successful renewal: when it fires, the holder gives up
 * whatever its renewal is doing, so a renewal that never settles, or an
 * `onRenewError` that throws, cannot keep the signal from aborting.
 */
import type { Engine } from "../engine.js";
import { LeaseHeldError, LeaseLostError, InvalidArgumentError } from "./errors.js";
import { holds } from "./fence.js";
import { storeLayout, type LeaseRow, type StoreLayout } from "./layout.js";
import { validateName } from "./names.js";
import { checkOptionalFunction, throwIfAborted, type CallOptions, type PlatformAbortSignal } from "./options.js";
import { checkCount, transact } from "./transaction.js";
import { newAbortController, type SignalSource } from "./web.js";

/**
 * Timers, injected so leases run on virtual time in tests. Defaults to the
 * global timers. A callback may return the promise of the work it started
 * (a renewal), so a virtual scheduler can wait for that work before it moves
 * the clock on; real timers ignore it. A scheduler need not wait: the lease
 * gives up at its expiry on a timer of its own, whatever a renewal does.
 */
export interface Scheduler {
  setTimeout(callback: () => unknown, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The default lease time to live (30 s). */
export const DEFAULT_LEASE_TTL_MS = 30_000;

/**
 * A granted lease. While it is held, a renewal timer and an expiry timer are
 * scheduled on the leaser's scheduler (with the global timers that keeps a
 * Node process alive): release it, or let it be lost, when done.
 */
export interface Lease {
  readonly name: string;
  /** The grant's epoch: strictly greater than every earlier grant of this name. */
  readonly epoch: number;
  /** Aborts once (reason: {@link LeaseLostError}) when ownership is lost: release, expiry, takeover. */
  readonly signal: PlatformAbortSignal;
  /**
   * Give the lease up. Idempotent, also after loss; never frees a later
   * holder. Once a release has succeeded, a later call resolves at once, even
   * with an aborted signal (there is nothing left to do).
   */
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
  /** Epoch ms. Defaults to `Date.now`. A function, else {@link InvalidArgumentError}. */
  readonly clock?: (() => number) | undefined;
  /** Defaults to the global `setTimeout` / `clearTimeout`. Both must be functions, else {@link InvalidArgumentError}. */
  readonly scheduler?: Scheduler | undefined;
  /** How long a grant or renewal lasts. Default {@link DEFAULT_LEASE_TTL_MS}. */
  readonly ttlMs?: number | undefined;
  /**
   * How often a holder renews; less than `ttlMs`. Default `ttlMs / 3`. A
   * holder renews at least every 2^31 - 1 ms (about 24.8 days, the longest
   * delay timers take), whatever this says.
   */
  readonly renewEveryMs?: number | undefined;
  /**
   * Told about a renewal the engine failed (the lease is kept until its
   * expiry, and retried). What it throws is ignored: renewal goes on, and the
   * lease is still given up at its expiry.
   */
  readonly onRenewError?: ((error: unknown) => void) | undefined;
}

/** The host's own `setTimeout` and `clearTimeout`, as a {@link Scheduler}: the default of every timer user. */
export function globalScheduler(): Scheduler {
  const host = globalThis as unknown as { setTimeout: (callback: () => void, ms: number) => unknown; clearTimeout: (handle: unknown) => void };
  return { setTimeout: (callback, ms) => host.setTimeout(() => void callback(), ms), clearTimeout: (handle) => host.clearTimeout(handle) };
}

/**
 * Check a `scheduler` option when it is given: an object whose `setTimeout`
 * and `clearTimeout` are functions.
 *
 * @throws {InvalidArgumentError} naming `argument` otherwise.
 * @internal
 */
export function checkScheduler(argument: string, scheduler: Scheduler | undefined): Scheduler | undefined {
  if (scheduler === undefined) return undefined;
  if (scheduler === null || typeof scheduler !== "object" || typeof scheduler.setTimeout !== "function" || typeof scheduler.clearTimeout !== "function") {
    throw new InvalidArgumentError(argument, "must be an object with setTimeout and clearTimeout functions");
  }
  return scheduler;
}

/**
 * The longest delay timers take: Node, browsers and workerd run a
 * `setTimeout` of more than 2^31 - 1 ms after 1 ms instead.
 */
export const MAX_TIMER_DELAY_MS = 0x7fffffff;

/**
 * `ms` as a timer delay: not negative, and at most {@link MAX_TIMER_DELAY_MS}
 * (a lease of a month waits in steps: a timer that fires before its time
 * sets the next).
 */
function timerDelay(ms: number): number {
  return Math.min(MAX_TIMER_DELAY_MS, Math.max(0, ms));
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
  const layout = storeLayout(options);
  // At least 2 ms: a lease renews strictly before it runs out, every whole millisecond or more.
  const ttlMs = checkCount("ttlMs", options.ttlMs ?? DEFAULT_LEASE_TTL_MS, 2);
  const renewEveryMs = checkCount("renewEveryMs", options.renewEveryMs ?? Math.max(1, Math.floor(ttlMs / 3)), 1);
  if (renewEveryMs >= ttlMs) throw new InvalidArgumentError("renewEveryMs", "must be less than ttlMs");
  // Checked here, not at first use: acquire commits its grant before it arms the lease's timers.
  const clock = checkOptionalFunction("clock", options.clock) ?? Date.now;
  const scheduler = checkScheduler("scheduler", options.scheduler) ?? globalScheduler();
  const onRenewError = checkOptionalFunction("onRenewError", options.onRenewError) ?? (() => undefined);
  return new EngineLeaser(engine, { layout, clock, scheduler, ttlMs, renewEveryMs, onRenewError });
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

  /** See {@link adoptLease}. */
  async adopt(name: string, epoch: number): Promise<Lease> {
    validateName(name);
    checkCount("epoch", epoch, 1);
    const { layout, clock, ttlMs } = this.config;
    const now = clock();
    const expiresAt = await transact(this.engine, "readwrite", "leaser.adopt", undefined, async (tx) => {
      const row = await tx.get<LeaseRow>(layout.lease(name));
      if (!holds(row, epoch, now)) throw new LeaseLostError(name, epoch);
      tx.put(layout.lease(name), { epoch, expiresAt: now + ttlMs } satisfies LeaseRow);
      return now + ttlMs;
    });
    return new HeldLease(this.engine, this.config, name, epoch, expiresAt);
  }

  /** See {@link releaseLease}. */
  async releaseEpoch(name: string, epoch: number): Promise<void> {
    validateName(name);
    checkCount("epoch", epoch, 1);
    await clearGrant(this.engine, this.config.layout, name, epoch);
  }
}

/**
 * Take over, in this process, the renewal of a grant made elsewhere (by
 * another instance of a Durable Object, since evicted or redeployed): while
 * the row still names `epoch` unexpired, it is renewed now and from then on
 * like a grant of this leaser's own; else {@link LeaseLostError}. What a host
 * that keeps its holders' grants in memory uses when a holder's heartbeat
 * reaches an instance that never held the grant: a grant must not depend on
 * one instance staying alive (the spec's "Acquire and Release must remain
 * correct across independent calls").
 *
 * @throws TypeError when `leaser` was not made by {@link createLeaser}.
 */
export function adoptLease(leaser: Leaser, name: string, epoch: number): Promise<Lease> {
  return engineLeaser(leaser).adopt(name, epoch);
}

/**
 * Give up the grant at `epoch` by its row alone, with no {@link Lease} in
 * hand (one made by an instance since gone): the row is cleared while it
 * still names `epoch`, so a later holder is never freed. Idempotent.
 *
 * @throws TypeError when `leaser` was not made by {@link createLeaser}.
 */
export function releaseLease(leaser: Leaser, name: string, epoch: number): Promise<void> {
  return engineLeaser(leaser).releaseEpoch(name, epoch);
}

function engineLeaser(leaser: Leaser): EngineLeaser {
  if (!(leaser instanceof EngineLeaser)) throw new TypeError("needs a leaser made by createLeaser");
  return leaser;
}

/** Clear the row of `name` while it still names the grant at `epoch` unreleased (never a later holder's): one transaction. */
function clearGrant(engine: Engine, layout: StoreLayout, name: string, epoch: number, options?: CallOptions): Promise<void> {
  return transact(engine, "readwrite", "lease.release", options, async (tx) => {
    const row = await tx.get<LeaseRow>(layout.lease(name));
    if (row !== undefined && row.epoch === epoch && row.expiresAt !== 0) {
      tx.put(layout.lease(name), { epoch, expiresAt: 0 } satisfies LeaseRow);
    }
  });
}

class HeldLease implements Lease {
  readonly signal: PlatformAbortSignal;
  private readonly controller: SignalSource;
  private renewTimer: unknown;
  /** Stands at {@link expiresAt}: gives the lease up then, whatever a renewal in flight does. */
  private expiryTimer: unknown;
  private released = false;
  /** Set when {@link release} begins (it clears the row itself). */
  private releasing = false;

  constructor(
    private readonly engine: Engine,
    private readonly config: LeaserConfig,
    readonly name: string,
    readonly epoch: number,
    /**
     * Until when this holder may assert ownership, as far as it knows: the
     * expiry it wrote, computed from the clock read before the write, so no
     * one else can be granted the name before it.
     */
    private expiresAt: number,
  ) {
    this.controller = newAbortController();
    this.signal = this.controller.signal as unknown as PlatformAbortSignal;
    this.armExpiry();
    this.scheduleRenewal();
  }

  private get lost(): boolean {
    return this.controller.signal.aborted;
  }

  private scheduleRenewal(): void {
    const delay = timerDelay(Math.min(this.config.renewEveryMs, this.expiresAt - this.config.clock()));
    // tick() never rejects (renewal failures go to onRenewError), so handing its promise to the scheduler is safe.
    this.renewTimer = this.config.scheduler.setTimeout(() => this.tick(), delay);
  }

  /** (Re)arm the expiry timer at {@link expiresAt}. */
  private armExpiry(): void {
    if (this.expiryTimer !== undefined) this.config.scheduler.clearTimeout(this.expiryTimer);
    const delay = timerDelay(this.expiresAt - this.config.clock());
    this.expiryTimer = this.config.scheduler.setTimeout(() => this.expire(), delay);
  }

  private expire(): void {
    this.expiryTimer = undefined;
    if (this.lost) return;
    if (this.config.clock() >= this.expiresAt) this.lose();
    else this.armExpiry(); // woke before the clock reached the expiry (a real timer's rounding): wait out the rest
  }

  /** Renew, or give up when the expiry passed or the row names someone else. Never throws. */
  private async tick(): Promise<void> {
    this.renewTimer = undefined;
    if (this.lost) return;
    const now = this.config.clock();
    if (now >= this.expiresAt) return this.lose();
    const { layout, ttlMs } = this.config;
    let renewed: boolean;
    try {
      renewed = await transact(this.engine, "readwrite", "lease.renew", undefined, async (tx) => {
        const row = await tx.get<LeaseRow>(layout.lease(this.name));
        if (!holds(row, this.epoch, now)) return false;
        tx.put(layout.lease(this.name), { epoch: this.epoch, expiresAt: now + ttlMs } satisfies LeaseRow);
        return true;
      });
    } catch (error) {
      this.reportRenewError(error);
      if (!this.lost) this.scheduleRenewal(); // retried until it succeeds or the expiry timer gives the lease up
      return;
    }
    // Released, or given up at its expiry, while the renewal ran: stay lost. A release clears the
    // row after the renewal (transactions run in order); a holder that gave up at its expiry clears
    // what a renewal that landed late wrote, so that nobody holds the name while no one can use it.
    if (this.lost) {
      if (renewed && !this.releasing) await this.clearAfterLoss();
      return;
    }
    if (!renewed) return this.lose();
    this.expiresAt = now + ttlMs;
    this.armExpiry();
    this.scheduleRenewal();
  }

  /** Clear the row a renewal wrote after this holder gave the lease up at its expiry (failures go to `onRenewError`: the row then runs out at that renewal's expiry). */
  private async clearAfterLoss(): Promise<void> {
    try {
      await clearGrant(this.engine, this.config.layout, this.name, this.epoch);
    } catch (error) {
      this.reportRenewError(error);
    }
  }

  private reportRenewError(error: unknown): void {
    try {
      this.config.onRenewError(error);
    } catch {
      // Deliberately ignored: the callback is where renewal failures are told, so
      // there is nowhere further to tell its own failure, and it must neither
      // reject the timer's promise (an unhandled rejection) nor stop renewal.
    }
  }

  private lose(): void {
    for (const timer of [this.renewTimer, this.expiryTimer]) if (timer !== undefined) this.config.scheduler.clearTimeout(timer);
    this.renewTimer = undefined;
    this.expiryTimer = undefined;
    if (!this.lost) this.controller.abort(new LeaseLostError(this.name, this.epoch));
  }

  async release(options?: CallOptions): Promise<void> {
    // Idempotent: once released there is nothing to do, whatever the signal says.
    if (this.released) return;
    throwIfAborted(options);
    // Stop asserting ownership first: from here on this holder does no more work under the lease.
    this.releasing = true;
    this.lose();
    // Only our own grant is cleared; a later holder's row is left alone.
    await clearGrant(this.engine, this.config.layout, this.name, this.epoch, options);
    this.released = true;
  }
}
