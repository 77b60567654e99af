/**
 * Lease fencing inside a write's own transaction.
 *
 * A write fenced by `{ lease, epoch }` commits only if, in the same engine
 * transaction, the lease row still names `epoch` as a live holder; otherwise
 * it fails with {@link LeaseLostError} and writes nothing. Checking in the
 * write's transaction (not before it) is what makes the fence hold: there is
 * no window between the check and the write in which a newer holder could
 * take over.
 */
import type { EngineTransaction } from "../engine.js";
import { InvalidArgumentError, LeaseLostError } from "./errors.js";
import type { LeaseRow, StoreLayout } from "./layout.js";
import { validateName } from "./names.js";
import { checkCount } from "./transaction.js";

/** The lease a write is fenced by: its name and the epoch the writer was granted. */
export interface LeaseFence {
  readonly lease: string;
  readonly epoch: number;
}

/** Validate a fence at the call boundary (before any transaction). */
export function checkFence(fence: LeaseFence | undefined): LeaseFence | undefined {
  if (fence === undefined) return undefined;
  if (fence === null || typeof fence !== "object") throw new InvalidArgumentError("options.fence", "must be { lease, epoch }");
  return { lease: validateName(fence.lease), epoch: checkCount("options.fence.epoch", fence.epoch, 1) };
}

/** Whether `row` says the holder at `epoch` still owns the lease at `now`. */
export function holds(row: LeaseRow | undefined, epoch: number, now: number): boolean {
  return row !== undefined && row.epoch === epoch && row.expiresAt > now;
}

/** Inside a transaction: throw {@link LeaseLostError} unless `fence` is still held at `now`. */
export async function assertFence(tx: EngineTransaction, layout: StoreLayout, fence: LeaseFence | undefined, now: number): Promise<void> {
  if (fence === undefined) return;
  const row = await tx.get<LeaseRow>(layout.lease(fence.lease));
  if (!holds(row, fence.epoch, now)) throw new LeaseLostError(fence.lease, fence.epoch);
}
