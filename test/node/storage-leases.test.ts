/**
 * The leaser's timing edges that need an engine held back: a renewal whose
 * transaction commits only after its holder gave the lease up at its expiry
 * must not leave the name held by nobody (acquire refused, the lost epoch's
 * fenced writes accepted) until that late renewal's expiry.
 */
import { describe, expect, it } from "vitest";
import { memoryEngine } from "../../adapters/memory/index.js";
import type { Engine } from "../../src/engine.js";
import { createStore, LeaseLostError } from "../../src/storage/index.js";
import { virtualClock, virtualScheduler } from "../../src/testing/index.js";

describe("a lease renewal that lands after its holder gave up", () => {
  it("is cleared again: another holder is granted the name and the lost epoch's fenced writes fail", async () => {
    const time = virtualClock(1_000_000);
    // The scheduler does not wait for the renewal it fired: its transaction is held back below.
    const scheduler = virtualScheduler(time, { waitForCallbacks: false });
    const inner = memoryEngine();
    let gate: Promise<void> | null = null;
    let open: () => void = () => undefined;
    const held: Engine = {
      durable: false,
      close: () => inner.close(),
      transact: async (mode, fn, options) => {
        if (gate !== null) await gate;
        return inner.transact(mode, fn, options);
      },
    };
    const options = { name: "s", clock: time.clock, scheduler, leaseTtlMs: 3_000, leaseRenewEveryMs: 1_000 };
    const holder = createStore(held, options);
    const lease = await holder.leaser.acquire("job");
    gate = new Promise<void>((resolve) => (open = resolve));
    await scheduler.advance(1_000); // the renewal starts; its transaction waits at the gate
    await scheduler.advance(2_000); // the holder's expiry: it gives the lease up
    expect(lease.signal.aborted).toBe(true);
    gate = null;
    open(); // the renewal commits now, late
    await new Promise((resolve) => setTimeout(resolve, 20));
    time.advance(500);
    const other = createStore(inner, options);
    await expect(holder.kv.put("k", 0, new Uint8Array(), { fence: { lease: "job", epoch: lease.epoch } })).rejects.toBeInstanceOf(LeaseLostError);
    await expect(holder.leaser.assertHeld("job", lease.epoch)).rejects.toBeInstanceOf(LeaseLostError);
    const next = await other.leaser.acquire("job");
    expect(next.epoch).toBe(lease.epoch + 1);
    await next.release();
  });
});
