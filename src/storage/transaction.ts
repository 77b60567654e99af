/**
 * One engine transaction per primitive call, with the storage failure
 * contract: the options' signal is checked before the transaction and again
 * just before it commits (an aborted call changes nothing); storage errors and
 * the abort reason pass through; anything else the engine throws becomes a
 * {@link StorageBackendError} naming the operation, with the engine's error as
 * `cause`. The body awaits nothing but engine calls.
 */
import type { Engine, EngineTransaction, TransactionMode } from "../engine.js";
import { InvalidArgumentError, StorageBackendError, StorageError } from "./errors.js";
import { throwIfAborted, type CallOptions } from "./options.js";

export async function transact<T>(
  engine: Engine,
  mode: TransactionMode,
  operation: string,
  options: CallOptions | undefined,
  body: (tx: EngineTransaction) => Promise<T>,
): Promise<T> {
  throwIfAborted(options);
  try {
    return await engine.transact(mode, async (tx) => {
      const result = await body(tx);
      throwIfAborted(options);
      return result;
    });
  } catch (error) {
    if (error instanceof StorageError) throw error;
    const signal = options?.signal;
    if (signal?.aborted && error === signal.reason) throw error;
    throw new StorageBackendError(operation, error);
  }
}

/** Check that `value` is a safe integer of at least `min`. */
export function checkCount(argument: string, value: unknown, min: number): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min) {
    throw new InvalidArgumentError(argument, `must be a safe integer >= ${min}`);
  }
  return value;
}
