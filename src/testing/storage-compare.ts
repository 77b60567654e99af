/**
 * How the storage and queue suites decide that two answers agree: values are
 * compared structurally (byte arrays by their bytes), errors by class name,
 * `code` and the fields the spec names, never by message text.
 */
import { deepEqual } from "./compare.js";

/** The error fields the storage spec names. */
export const STORAGE_ERROR_FIELDS = [
  "code",
  "name",
  "expected",
  "seq",
  "key",
  "holderEpoch",
  "epoch",
  "rule",
  "argument",
  "missing",
  "expectedRev",
  "actualRev",
] as const;

/** How a call ended. */
export type StorageOutcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown };

/** Run `call` and capture how it ended, never throwing. */
export async function settleStorage(call: () => unknown): Promise<StorageOutcome> {
  try {
    return { ok: true, value: await call() };
  } catch (error) {
    return { ok: false, error };
  }
}

/** An error reduced to what the spec promises about it. */
export function describeStorageError(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { thrown: typeof error, value: String(error) };
  const description: Record<string, unknown> = { error: error.constructor.name };
  const fields = error as unknown as Record<string, unknown>;
  for (const field of STORAGE_ERROR_FIELDS) {
    // `name` is a spec field (a ledger's or lease's name) only where it is not the class name.
    if (field === "name" && fields[field] === error.constructor.name) continue;
    if (field in error) description[field] = fields[field];
  }
  return description;
}

/** A plain-data copy: byte arrays become `{ bytes: [...] }`, errors their description. */
export function plain(value: unknown): unknown {
  if (value instanceof Error) return describeStorageError(value);
  if (value instanceof Uint8Array) return { bytes: Array.from(value) };
  if (Array.isArray(value)) return (value as unknown[]).map(plain);
  if (value !== null && typeof value === "object") {
    const copy: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) if (item !== undefined) copy[key] = plain(item);
    return copy;
  }
  return value;
}

/** Whether two outcomes agree. */
export function sameStorageOutcome(a: StorageOutcome, b: StorageOutcome): boolean {
  if (a.ok && b.ok) return deepEqual(plain(a.value), plain(b.value));
  if (!a.ok && !b.ok) return deepEqual(describeStorageError(a.error), describeStorageError(b.error));
  return false;
}

/**
 * Whether two values are the same plain data, every byte compared (and, as
 * their rendering, keys in the same order): what the examples assert with.
 * ({@link renderStorage} summarises long byte arrays, so it must not decide.)
 */
export function sameStorage(a: unknown, b: unknown): boolean {
  return JSON.stringify(plain(a)) === JSON.stringify(plain(b));
}

/** Render a value or outcome for a failure message (byte arrays longer than 16 bytes are summarised). */
export function renderStorage(value: unknown): string {
  return JSON.stringify(plain(value), (_key, item: unknown) => {
    if (item !== null && typeof item === "object" && "bytes" in item && Array.isArray((item as { bytes: unknown[] }).bytes)) {
      const bytes = (item as { bytes: number[] }).bytes;
      return bytes.length > 16 ? `<${bytes.length} bytes ${bytes.slice(0, 8).join(",")}...>` : `<${bytes.join(",")}>`;
    }
    return item;
  });
}

/** Throw a readable mismatch unless the outcomes agree. */
export function expectSameOutcome(what: string, expected: StorageOutcome, actual: StorageOutcome): void {
  if (sameStorageOutcome(expected, actual)) return;
  const show = (o: StorageOutcome) => (o.ok ? `resolved ${renderStorage(o.value)}` : `rejected ${renderStorage(describeStorageError(o.error))}`);
  throw new Error(`${what} disagrees with the reference model\n  model:   ${show(expected)}\n  subject: ${show(actual)}`);
}
