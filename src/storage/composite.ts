/**
 * Composite: the storage primitives assembled where dependencies are wired
 * (`storage-primitives.go.txt`, `Composite`, `NewComposite`,
 * `NewCompositeWithOrderedIndex`).
 *
 * `createComposite` refuses a missing primitive with
 * {@link IncompleteCompositeError}, naming every missing one in the spec's
 * field order (Ledger, Leaser, KV, Blobs, OrderedIndex). The OrderedIndex is
 * the one part that may be left out; {@link Composite.requireOrderedIndex} is
 * how code that needs it says so.
 *
 * One function serves both of the spec's constructors: parts without an
 * `orderedIndex` property are `NewComposite` (no ordered index); parts with
 * one are `NewCompositeWithOrderedIndex`, which requires it, so an
 * `orderedIndex` that is `undefined` or `null` is reported missing like any
 * other part rather than silently building a composite without it.
 */
import { IncompleteCompositeError, type CompositePart } from "./errors.js";
import type { Blobs } from "./blobs.js";
import type { KV } from "./kv.js";
import type { Leaser } from "./leaser.js";
import type { Ledger } from "./ledger.js";
import type { OrderedIndex } from "./ordered/types.js";

/** The parts handed to {@link createComposite}. */
export interface CompositeParts {
  readonly ledger: Ledger;
  readonly leaser: Leaser;
  readonly kv: KV;
  readonly blobs: Blobs;
  /**
   * Leave it out for a composite without one (`NewComposite`). When the
   * property is present it must hold an index (`NewCompositeWithOrderedIndex`):
   * `undefined` or `null` is refused as missing.
   */
  readonly orderedIndex?: OrderedIndex;
}

/** The storage primitives, wired. */
export interface Composite {
  readonly ledger: Ledger;
  readonly leaser: Leaser;
  readonly kv: KV;
  readonly blobs: Blobs;
  readonly orderedIndex: OrderedIndex | undefined;
  /**
   * The ordered index.
   *
   * @throws {IncompleteCompositeError} with `missing: ["OrderedIndex"]` when the composite has none.
   */
  requireOrderedIndex(): OrderedIndex;
}

const REQUIRED: readonly (readonly [keyof CompositeParts, CompositePart])[] = [
  ["ledger", "Ledger"],
  ["leaser", "Leaser"],
  ["kv", "KV"],
  ["blobs", "Blobs"],
];

function missingValue(value: unknown): boolean {
  return value === undefined || value === null;
}

/**
 * Assemble a {@link Composite}.
 *
 * @throws {IncompleteCompositeError} naming the missing parts in field order.
 *
 * @example
 * ```ts
 * const composite = createComposite({ ledger, leaser, kv, blobs });   // no ordered index
 * composite.requireOrderedIndex();                                     // throws IncompleteCompositeError ["OrderedIndex"]
 * createComposite({ ledger, leaser } as CompositeParts);               // throws IncompleteCompositeError ["KV", "Blobs"]
 * createComposite({ ledger, leaser, kv, blobs, orderedIndex: maybe! }); // throws ["OrderedIndex"] when maybe is undefined
 * ```
 */
export function createComposite(parts: CompositeParts): Composite {
  const given = (parts ?? {}) as Partial<Record<keyof CompositeParts, unknown>>;
  const missing = REQUIRED.filter(([field]) => missingValue(given[field])).map(([, part]) => part);
  // An own `orderedIndex` property asks for the composite WITH an ordered index: undefined is as missing as null.
  if (Object.prototype.hasOwnProperty.call(given, "orderedIndex") && missingValue(given.orderedIndex)) missing.push("OrderedIndex");
  if (missing.length > 0) throw new IncompleteCompositeError(missing);
  const orderedIndex = parts.orderedIndex ?? undefined;
  return {
    ledger: parts.ledger,
    leaser: parts.leaser,
    kv: parts.kv,
    blobs: parts.blobs,
    orderedIndex,
    requireOrderedIndex(): OrderedIndex {
      if (orderedIndex === undefined) throw new IncompleteCompositeError(["OrderedIndex"]);
      return orderedIndex;
    },
  };
}
