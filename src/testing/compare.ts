/**
 * How the conformance suite decides that two journals gave "the same answer":
 * values are compared structurally (frozen or not, whatever their prototype
 * chain says about arrays and plain objects), and errors by class name,
 * `code` and the fields the spec names, never by message text.
 */

/** The error fields the spec names; two errors agree when these do. */
export const ERROR_SPEC_FIELDS = ["code", "key", "delivery", "pending", "capacity", "rule", "argument", "consumer", "requestId", "max", "character"] as const;

/** How a call ended. */
export type Outcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown };

/** Run `call` and capture how it ended, never throwing. */
export async function settle(call: () => Promise<unknown>): Promise<Outcome> {
  try {
    return { ok: true, value: await call() };
  } catch (error) {
    return { ok: false, error };
  }
}

/** An error reduced to what the spec promises about it: class name, code and named fields. */
export function describeError(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { thrown: typeof error, value: String(error) };
  const description: Record<string, unknown> = { error: error.constructor.name };
  const fields = error as unknown as Record<string, unknown>;
  for (const field of ERROR_SPEC_FIELDS) {
    if (field in error) description[field] = normalize(fields[field]);
  }
  return description;
}

/**
 * A plain-data copy of `value` in which every error is replaced by its
 * {@link describeError} and object properties holding `undefined` are left
 * out (they do not survive JSON either).
 */
export function normalize(value: unknown): unknown {
  if (value instanceof Error) return describeError(value);
  if (Array.isArray(value)) return (value as unknown[]).map(normalize);
  if (value !== null && typeof value === "object") {
    const copy: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      if (item !== undefined) copy[key] = normalize(item);
    }
    return copy;
  }
  return value;
}

/** Structural equality of two values; frozen and non-frozen objects alike, errors as {@link describeError}. */
export function deepEqual(a: unknown, b: unknown): boolean {
  return plainEqual(normalize(a), normalize(b));
}

function plainEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === "number" && typeof b === "number") return Number.isNaN(a) && Number.isNaN(b);
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((item, index) => plainEqual(item, b[index]));
  }
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  const keys = Object.keys(left);
  if (keys.length !== Object.keys(right).length) return false;
  return keys.every((key) => Object.prototype.hasOwnProperty.call(right, key) && plainEqual(left[key], right[key]));
}

/** Whether two outcomes agree: both resolved with equal values, or both rejected with equal error descriptions. */
export function sameOutcome(a: Outcome, b: Outcome): boolean {
  if (a.ok && b.ok) return deepEqual(a.value, b.value);
  if (!a.ok && !b.ok) return deepEqual(describeError(a.error), describeError(b.error));
  return false;
}

/** Render a value for a failure message. */
export function render(value: unknown): string {
  const text = JSON.stringify(normalize(value));
  return text === undefined ? String(value) : text;
}

/** Render an outcome for a failure message (a rejection also shows its message). */
export function renderOutcome(outcome: Outcome): string {
  if (outcome.ok) return `resolved ${render(outcome.value)}`;
  const message = outcome.error instanceof Error ? ` (message: ${JSON.stringify(outcome.error.message)})` : "";
  return `rejected ${render(describeError(outcome.error))}${message}`;
}
