/**
 * How the OrderedIndex conformance suite decides that two indexes gave "the
 * same answer": records are compared as plain data (value bytes as arrays),
 * errors by class name, `code` and the fields the spec names (never by
 * message text), and the provider-specific parts of an answer are reduced to
 * what the spec promises about them:
 *
 * - cursors: only whether one was issued (`""` means exhausted); their text is
 *   the provider's own;
 * - orders: the spec lets a provider allocate sparse orders, so a subject's
 *   orders are translated, per order scope, to the model's through the pairs
 *   learnt when each record was created (an order never seen is reported
 *   untranslated, so it cannot compare equal).
 */
import type { OrderedRecord } from "../storage/ordered/types.js";

/**
 * The error fields the spec names for the OrderedIndex (and the argument
 * error it shares); `InvalidNameError`'s `name` field is compared too.
 */
export const ORDERED_ERROR_FIELDS = [
  "code",
  "id",
  "rule",
  "kind",
  "cursorLength",
  "limit",
  "max",
  "size",
  "expectedRevision",
  "actualRevision",
  "revision",
  "due",
  "rank",
  "operation",
  "stableKeyLength",
  "argument",
] as const;

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

/** An error reduced to its class name, `code` and spec fields (minus `ignore`); other throwables by identity text. */
export function describeOrderedError(error: unknown, ignore: readonly string[] = []): Record<string, unknown> {
  if (!(error instanceof Error)) return { thrown: typeof error, value: String(error) };
  const description: Record<string, unknown> = { error: error.constructor.name };
  const fields = error as unknown as Record<string, unknown>;
  let named = false;
  for (const field of ORDERED_ERROR_FIELDS) {
    if (field in error && !ignore.includes(field)) {
      description[field] = plain(fields[field]);
      named = true;
    }
  }
  // InvalidNameError keeps the spec's `Name` field in `name` (its class name is the constructor's).
  if (typeof error.name === "string" && error.name !== error.constructor.name && !ignore.includes("name")) {
    description["name"] = error.name;
    named = true;
  }
  // An error with no spec fields (an abort reason, a TypeError) is told apart by its message.
  if (!named) description["message"] = error.message;
  return description;
}

/** Plain data: byte arrays become `{ bytes: [...] }`, `undefined` properties are dropped. */
export function plain(value: unknown): unknown {
  if (value instanceof Uint8Array) return { bytes: Array.from(value) };
  if (value instanceof Error) return describeOrderedError(value);
  if (Array.isArray(value)) return (value as unknown[]).map(plain);
  if (value !== null && typeof value === "object") {
    const copy: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) if (item !== undefined) copy[key] = plain(item);
    return copy;
  }
  if (typeof value === "number" && Object.is(value, -0)) return 0;
  return value;
}

/** Structural equality of plain data. */
export function plainEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === "number" && typeof b === "number") return Number.isNaN(a) && Number.isNaN(b);
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((item, i) => plainEqual(item, b[i]));
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  const keys = Object.keys(left);
  return keys.length === Object.keys(right).length && keys.every((key) => Object.prototype.hasOwnProperty.call(right, key) && plainEqual(left[key], right[key]));
}

/** Render plain data for a failure message. */
export function renderPlain(value: unknown): string {
  return JSON.stringify(plain(value)) ?? String(value);
}

/** The key of an order scope. */
export function scopeKey(namespace: string, orderingScope: string): string {
  return `${namespace}\u0000${orderingScope}`;
}

/**
 * Order pairs learnt from creates: per order scope, subject order -> model
 * order. The model's own orders translate to themselves.
 */
export class OrderTranslation {
  private readonly pairs = new Map<string, Map<number, number>>();
  /** The largest subject order each scope handed out. */
  private readonly lastSubject = new Map<string, number>();

  /**
   * Learn the pair of a record both sides just created. Returns a problem
   * (the subject's order is not positive, or not greater than every order the
   * scope allocated before), or `undefined`.
   */
  learn(record: OrderedRecord, modelOrder: number): string | undefined {
    const scope = scopeKey(record.id.namespace, record.id.orderingScope);
    const last = this.lastSubject.get(scope) ?? 0;
    if (!Number.isSafeInteger(record.order) || record.order <= 0) return `order ${record.order} is not a positive integer`;
    if (record.order <= last) return `order ${record.order} is not greater than ${last}, an order the scope allocated before`;
    this.lastSubject.set(scope, record.order);
    let map = this.pairs.get(scope);
    if (map === undefined) this.pairs.set(scope, (map = new Map<number, number>()));
    map.set(record.order, modelOrder);
    return undefined;
  }

  /** The model order of subject order `order` in a scope, or a marker that compares unequal. */
  translate(namespace: string, orderingScope: string, order: number): number | string {
    if (order === 0) return 0;
    return this.pairs.get(scopeKey(namespace, orderingScope))?.get(order) ?? `unknown subject order ${order}`;
  }

  /** The subject order paired with model order `modelOrder` in a scope (for passing `afterOrder` to the subject). */
  subjectOrder(namespace: string, orderingScope: string, modelOrder: number): number {
    if (modelOrder === 0) return 0;
    for (const [subject, model] of this.pairs.get(scopeKey(namespace, orderingScope)) ?? []) if (model === modelOrder) return subject;
    throw new Error(`ordered conformance: no subject order is paired with model order ${modelOrder}`);
  }

  /** The largest subject order the scope handed out (0 when none). */
  lastSubjectOrder(namespace: string, orderingScope: string): number {
    return this.lastSubject.get(scopeKey(namespace, orderingScope)) ?? 0;
  }
}

function isRecord(value: unknown): value is OrderedRecord {
  return value !== null && typeof value === "object" && "id" in value && "order" in value && "revision" in value && "rankingScope" in value;
}

/**
 * The answer of one side, reduced to what is compared: plain data, cursors as
 * issued-or-not, subject orders translated (`orders` is given for the
 * subject only).
 */
export function comparable(value: unknown, orders?: OrderTranslation, scope?: { namespace: string; orderingScope: string }): unknown {
  const walk = (item: unknown): unknown => {
    if (item instanceof Uint8Array || item instanceof Error) return plain(item);
    if (Array.isArray(item)) return (item as unknown[]).map(walk);
    if (item === null || typeof item !== "object") return plain(item);
    const copy: Record<string, unknown> = {};
    for (const [key, field] of Object.entries(item)) {
      if (field === undefined) continue;
      if (key === "nextCursor" && typeof field === "string") copy[key] = field === "" ? "" : "<cursor>";
      else if (key === "nextAfterOrder" && orders !== undefined && scope !== undefined && typeof field === "number") {
        copy[key] = orders.translate(scope.namespace, scope.orderingScope, field);
      } else copy[key] = walk(field);
    }
    if (orders !== undefined && isRecord(item)) copy["order"] = orders.translate(item.id.namespace, item.id.orderingScope, item.order);
    return copy;
  };
  return walk(value);
}
