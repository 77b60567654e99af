/**
 * Composite: the storage primitives assembled where dependencies are wired
 * (`storage-primitives.go.txt`, `Composite`, `NewComposite`).
 *
 * `createComposite` refuses a missing primitive with
 * {@link IncompleteCompositeError}, naming every missing one in the spec's
 * field order (Ledger, Leaser, KV, Blobs, OrderedIndex). The OrderedIndex is
 * the one part that may be left out; {@link Composite.requireOrderedIndex} is
 * how code that needs it says so.
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
  /** Optional; pass `undefined` (or leave it out) for a composite without one. */
  readonly orderedIndex?: OrderedIndex | undefined;
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
 * ```
 */
export function createComposite(parts: CompositeParts): Composite {
  const given = (parts ?? {}) as Partial<Record<keyof CompositeParts, unknown>>;
  const missing = REQUIRED.filter(([field]) => missingValue(given[field])).map(([, part]) => part);
  if ("orderedIndex" in given && given.orderedIndex === null) missing.push("OrderedIndex");
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
