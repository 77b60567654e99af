/**
 * Typed errors of the storage primitives (`storage-primitives.go.txt`).
 *
 * Every error a storage primitive throws on purpose is a {@link StorageError}:
 * an `Error` subclass with a stable `code` string (a metric dimension and the
 * key the HTTP layer maps to a status), the fields the spec names, and `cause`
 * where the spec has `Unwrap`. Codes never change meaning; new ones may be
 * added (the OrderedIndex errors live in `./ordered/` and extend the same base).
 *
 * Messages are for people: they quote names and keys (bounded, escaped) but
 * never payload bytes, and never anything the spec says must not be rendered
 * (opaque cursors, stable keys).
 */

/** Base class of every storage error. Narrow on `code` (or `instanceof`). */
export class StorageError extends Error {
  /** Stable, machine-readable classification; never changes meaning. */
  readonly code: string;
  constructor(code: string, message: string, options?: { readonly cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "StorageError";
    this.code = code;
  }
}

/**
 * Several spec errors have a field called `name` (the ledger's, the lease's,
 * the refused name), which in JavaScript is also where an error keeps its
 * class name. The spec's field wins: `err.name` is the ledger name and
 * `code` / `instanceof` identify the error. So that stack traces still start
 * with the class name, the stack is rendered (V8 renders it lazily) while the
 * class name is in place, and only then is `name` set to the spec's value.
 */
function nameWithSpecField(error: StorageError & { name: string }, className: string, specName: string): void {
  error.name = className;
  void error.stack;
  error.name = specName;
  SPEC_NAMED.add(error);
}

/** The errors whose `name` is the spec's `Name` field (see {@link nameWithSpecField}). */
const SPEC_NAMED = new WeakSet<object>();

/**
 * Whether `error.name` holds the spec's `Name` field (the name it is about)
 * rather than the class name: true for the errors that have one, even when
 * that name happens to be spelled like the class (a ledger called
 * `"ConflictError"`), so that a wire encoding keeps it.
 */
export function hasSpecName(error: object): boolean {
  return SPEC_NAMED.has(error);
}

/** Longest piece of caller text quoted in a message; the field keeps all of it. */
const QUOTE_LIMIT = 96;

/**
 * Render caller-supplied text for an error message: JSON-escaped (so control
 * characters cannot forge log lines) and cut at a bound (so a megabyte of bad
 * input does not become a megabyte of log).
 */
export function quote(text: unknown): string {
  const s = typeof text === "string" ? text : String(text);
  const cut = s.length > QUOTE_LIMIT ? `${s.slice(0, QUOTE_LIMIT)}…` : s;
  return JSON.stringify(cut);
}

/**
 * A name broke the storage grammar: one or more segments joined by single
 * `/`, each `[a-z0-9][a-z0-9_.-]*`, no leading or trailing `/`, at most 512
 * bytes of UTF-8. `rule` names the broken rule (see {@link NameRule}).
 */
export class InvalidNameError extends StorageError {
  declare readonly code: "invalid_name";
  /** The refused name (kept whole; the message quotes a bounded prefix). */
  declare readonly name: string;
  /** Which rule the name broke. */
  readonly rule: NameRule;
  constructor(name: string, rule: NameRule) {
    super("invalid_name", `invalid storage name ${quote(name)}: ${NAME_RULE_TEXT[rule]}`);
    nameWithSpecField(this, "InvalidNameError", name);
    this.rule = rule;
  }
}
Object.defineProperty(InvalidNameError.prototype, Symbol.toStringTag, { value: "InvalidNameError" });

/** The rules of the storage name grammar, as {@link InvalidNameError.rule} reports them. */
export type NameRule = "type" | "empty" | "too_long" | "leading_slash" | "trailing_slash" | "empty_segment" | "segment_start" | "character";

const NAME_RULE_TEXT: Record<NameRule, string> = {
  type: "a name must be a string",
  empty: "a name must not be empty",
  too_long: "a name is at most 512 bytes of UTF-8",
  leading_slash: "a name must not start with '/'",
  trailing_slash: "a name must not end with '/'",
  empty_segment: "segments are joined by single '/' (no '//')",
  segment_start: "each segment starts with [a-z0-9]",
  character: "each segment is [a-z0-9][a-z0-9_.-]*",
};

/** An argument other than a name is out of its range. `argument` names it. */
export class InvalidArgumentError extends StorageError {
  declare readonly code: "invalid_argument";
  readonly argument: string;
  /** `cause`: what made the argument unusable when it failed on its own (a content stream that errored). */
  constructor(argument: string, message: string, cause?: unknown) {
    super("invalid_argument", `${argument}: ${message}`, cause === undefined ? undefined : { cause });
    this.name = "InvalidArgumentError";
    this.argument = argument;
  }
}

/**
 * The storage engine failed (or a stored row was unreadable). A definite
 * failure: nothing was written. `cause` is the engine's error. A networked
 * store whose write got no answer (the write may have landed) throws
 * {@link AmbiguousError} instead; this error is then only for reads and for
 * failures it knows happened before anything was written.
 */
export class StorageBackendError extends StorageError {
  declare readonly code: "backend";
  /** The primitive operation that failed, e.g. `ledger.append`. */
  readonly operation: string;
  constructor(operation: string, cause: unknown) {
    super("backend", `storage backend failed during ${operation}`, { cause });
    this.name = "StorageBackendError";
    this.operation = operation;
  }
}

// ---------------------------------------------------------------- Ledger

/**
 * A ledger compare-and-swap failed: the caller appended at the wrong expected
 * sequence (the tip had moved, or had not reached `expected`). Definite: the
 * record did not land.
 */
export class ConflictError extends StorageError {
  declare readonly code: "conflict";
  /** The ledger's name. */
  declare readonly name: string;
  readonly expected: number;
  constructor(name: string, expected: number) {
    super("conflict", `ledger ${quote(name)}: append at expected ${expected} conflicts with the tip`);
    nameWithSpecField(this, "ConflictError", name);
    this.expected = expected;
  }
}

/** The writes {@link AmbiguousError} can report, by operation name. */
export type AmbiguousOperation = "ledger.append" | "ledger.delete" | "kv.put" | "kv.delete" | "blobs.put" | "blobs.delete";

/**
 * A write whose acknowledgement was lost or timed out: it may or may not have
 * been committed. Only networked backends throw it; the engine-backed
 * primitives never do. `cause` is the transport or timeout error, when there
 * is one.
 *
 * The spec's `AmbiguousError` is the ledger append's (`operation`
 * `"ledger.append"`, the default): the record may or may not have been
 * committed at `expected + 1`; resolve it with `appendDefinite`. A networked
 * store reports its other writes' unknown outcomes with the same class:
 * `operation` names the write, `name` is the ledger name or the KV / blob key
 * it addressed, and `expected` is the append's expected tip, the KV put's
 * `expectedRev`, or 0 (deletes and blob puts have none). Read back before
 * acting on it: e.g. a KV put retried with the same `expectedRev` after its
 * first try landed is a `RevisionConflictError`.
 */
export class AmbiguousError extends StorageError {
  declare readonly code: "ambiguous";
  /** The ledger's name (or, for a KV or blob write, the key). */
  declare readonly name: string;
  readonly expected: number;
  /** The write whose outcome is unknown. */
  readonly operation: AmbiguousOperation;
  constructor(name: string, expected: number, cause?: unknown, operation: AmbiguousOperation = "ledger.append") {
    const what = operation === "ledger.append" ? `ledger ${quote(name)}: append at expected ${expected}` : `${operation} of ${quote(name)}`;
    super("ambiguous", `${what} has an unknown outcome`, cause === undefined ? undefined : { cause });
    nameWithSpecField(this, "AmbiguousError", name);
    this.expected = expected;
    this.operation = operation;
  }
}

/**
 * `appendDefinite` could not read the record at `seq` to resolve an ambiguous
 * or conflicting append. Fail closed: treat the outcome as unknown. `cause`
 * is the read failure.
 */
export class AppendVerifyError extends StorageError {
  declare readonly code: "append_verify_failed";
  /** The ledger's name. */
  declare readonly name: string;
  readonly seq: number;
  constructor(name: string, seq: number, cause: unknown) {
    super("append_verify_failed", `ledger ${quote(name)}: could not read record ${seq} to verify an append; its outcome is unknown`, { cause });
    nameWithSpecField(this, "AppendVerifyError", name);
    this.seq = seq;
  }
}

/** A ledger has no record at `seq`. */
export class RecordNotFoundError extends StorageError {
  declare readonly code: "record_not_found";
  /** The ledger's name. */
  declare readonly name: string;
  readonly seq: number;
  constructor(name: string, seq: number) {
    super("record_not_found", `ledger ${quote(name)} has no record ${seq}`);
    nameWithSpecField(this, "RecordNotFoundError", name);
    this.seq = seq;
  }
}

// ---------------------------------------------------------------- Leaser

/** `acquire` was refused: another holder owns the lease at `holderEpoch`. */
export class LeaseHeldError extends StorageError {
  declare readonly code: "lease_held";
  /** The lease's name. */
  declare readonly name: string;
  readonly holderEpoch: number;
  constructor(name: string, holderEpoch: number) {
    super("lease_held", `lease ${quote(name)} is held at epoch ${holderEpoch}`);
    nameWithSpecField(this, "LeaseHeldError", name);
    this.holderEpoch = holderEpoch;
  }
}

/** A write fenced by the lease at `epoch` was refused: that lease was lost, expired or taken over. */
export class LeaseLostError extends StorageError {
  declare readonly code: "lease_lost";
  /** The lease's name. */
  declare readonly name: string;
  readonly epoch: number;
  constructor(name: string, epoch: number) {
    super("lease_lost", `lease ${quote(name)} at epoch ${epoch} is no longer held`);
    nameWithSpecField(this, "LeaseLostError", name);
    this.epoch = epoch;
  }
}

// ---------------------------------------------------------------- KV

/** A KV key is absent. */
export class KeyNotFoundError extends StorageError {
  declare readonly code: "key_not_found";
  readonly key: string;
  constructor(key: string) {
    super("key_not_found", `kv key ${quote(key)} not found`);
    this.name = "KeyNotFoundError";
    this.key = key;
  }
}

/**
 * A KV compare-and-swap failed: the key's current revision is not
 * `expectedRev` (`expectedRev` 0 means "must be absent"). The spec names no
 * KV conflict type; this one mirrors `OrderedRevisionConflictError`.
 * `actualRev` is the revision observed (0 when the key is absent).
 */
export class RevisionConflictError extends StorageError {
  declare readonly code: "revision_conflict";
  readonly key: string;
  readonly expectedRev: number;
  readonly actualRev: number;
  constructor(key: string, expectedRev: number, actualRev: number) {
    super("revision_conflict", `kv key ${quote(key)}: expected revision ${expectedRev}, found ${actualRev}`);
    this.name = "RevisionConflictError";
    this.key = key;
    this.expectedRev = expectedRev;
    this.actualRev = actualRev;
  }
}

// ---------------------------------------------------------------- Blobs

/** A blob `put` found `key` holding different content; the original is untouched. */
export class BlobConflictError extends StorageError {
  declare readonly code: "blob_conflict";
  readonly key: string;
  constructor(key: string) {
    super("blob_conflict", `blob ${quote(key)} already exists with different content`);
    this.name = "BlobConflictError";
    this.key = key;
  }
}

/** A blob is absent at `key`. */
export class BlobNotFoundError extends StorageError {
  declare readonly code: "blob_not_found";
  readonly key: string;
  constructor(key: string) {
    super("blob_not_found", `blob ${quote(key)} not found`);
    this.name = "BlobNotFoundError";
    this.key = key;
  }
}

// ---------------------------------------------------------------- Composite

/** The parts of a composite, in the spec's field order. */
export type CompositePart = "Ledger" | "Leaser" | "KV" | "Blobs" | "OrderedIndex";

/** `createComposite` was handed missing primitives; `missing` names them in field order. */
export class IncompleteCompositeError extends StorageError {
  declare readonly code: "incomplete_composite";
  readonly missing: readonly CompositePart[];
  constructor(missing: readonly CompositePart[]) {
    super("incomplete_composite", `storage composite is missing: ${missing.join(", ")}`);
    this.name = "IncompleteCompositeError";
    this.missing = [...missing];
  }
}
