/**
 * The continuation cursors of `listRanked` and `listDue`: opaque, versioned
 * tokens bound to the exact query that issued them.
 *
 * A token is `v1.<kind>.<payload>`: a version, a kind letter (`r` ranked, `d`
 * due) and the unpadded base64url of a JSON array holding the query binding
 * and the frozen position of the last record returned:
 *
 * - ranked: `[namespace, rankingScope, rank, stableKey, orderingScope]`
 * - due:    `[namespace, dueAtOrBefore, dueAt, stableKey, orderingScope]`
 *
 * Callers must treat tokens as opaque; the format may change under a new
 * version. Decoding fails closed, in this order: not a string, too long, not
 * three parts, a bad version field (`malformed`); another version
 * (`unknown_version`); a bad kind field (`malformed`); the other kind
 * (`wrong_kind`); an undecodable payload or a position that is not one a page
 * could have ended on (`malformed`); a binding other than the live request's
 * (`query_mismatch`). The binding is compared, never trusted: the scan uses
 * the live namespace, scope and bound. A cursor conveys position, not
 * authority.
 */
import { isValidName } from "../names.js";
import { base64urlDecode, base64urlEncode, utf8Decode, utf8Encode } from "./bytes.js";
import { InvalidOrderedCursorError } from "./errors.js";
import type { OrderedCursorKind } from "./types.js";
import { isValidStableKey } from "./validate.js";

/** The version every token this code issues carries. */
export const ORDERED_CURSOR_VERSION = "v1";

/**
 * The longest token accepted, in characters. The longest token this code can
 * issue (three 512-byte names and a 1024-byte stable key of control
 * characters, JSON-escaped, then base64url) is about 13,000 characters.
 */
export const MAX_ORDERED_CURSOR_CHARS = 16_384;

const KIND_LETTER: Record<OrderedCursorKind, string> = { ranked: "r", due: "d" };

/** Where a ranked page stopped: the last record's (rank, stableKey, orderingScope). */
export interface RankedPosition {
  readonly rank: number;
  readonly stableKey: string;
  readonly orderingScope: string;
}

/** Where a due page stopped: the last record's (dueAt, stableKey, orderingScope). */
export interface DuePosition {
  readonly dueAt: number;
  readonly stableKey: string;
  readonly orderingScope: string;
}

function encode(kind: OrderedCursorKind, payload: readonly unknown[]): string {
  return `${ORDERED_CURSOR_VERSION}.${KIND_LETTER[kind]}.${base64urlEncode(utf8Encode(JSON.stringify(payload)))}`;
}

/** The token that resumes a ranked query after `position`. */
export function encodeRankedCursor(namespace: string, rankingScope: string, position: RankedPosition): string {
  return encode("ranked", [namespace, rankingScope, position.rank, position.stableKey, position.orderingScope]);
}

/** The token that resumes a due query after `position`. */
export function encodeDueCursor(namespace: string, dueAtOrBefore: number, position: DuePosition): string {
  return encode("due", [namespace, dueAtOrBefore, position.dueAt, position.stableKey, position.orderingScope]);
}

/** Check version and kind, and return the decoded payload array. */
function open(kind: OrderedCursorKind, token: string): unknown[] {
  const malformed = () => new InvalidOrderedCursorError(kind, token, "malformed");
  if (typeof token !== "string" || token.length > MAX_ORDERED_CURSOR_CHARS) throw malformed();
  const parts = token.split(".");
  if (parts.length !== 3) throw malformed();
  const [version, letter, payload] = parts as [string, string, string];
  if (!/^v[1-9][0-9]{0,8}$/.test(version)) throw malformed();
  if (version !== ORDERED_CURSOR_VERSION) throw new InvalidOrderedCursorError(kind, token, "unknown_version");
  if (letter !== "r" && letter !== "d") throw malformed();
  if (letter !== KIND_LETTER[kind]) throw new InvalidOrderedCursorError(kind, token, "wrong_kind");
  const bytes = payload.length === 0 ? undefined : base64urlDecode(payload);
  const json = bytes === undefined ? undefined : utf8Decode(bytes);
  if (json === undefined) throw malformed();
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    // A payload that is not JSON is simply malformed; the parse error says nothing more.
    throw malformed();
  }
  if (!Array.isArray(value) || value.length !== 5) throw malformed();
  return value as unknown[];
}

function isPosition(value: unknown, stableKey: unknown, orderingScope: unknown): boolean {
  return typeof value === "number" && Number.isSafeInteger(value) && isValidStableKey(stableKey) && isValidName(orderingScope);
}

/**
 * Decode a `listRanked` token issued for exactly `(namespace, rankingScope)`.
 *
 * @throws {InvalidOrderedCursorError} of kind `ranked`.
 */
export function decodeRankedCursor(token: string, namespace: string, rankingScope: string): RankedPosition {
  const [boundNamespace, boundScope, rank, stableKey, orderingScope] = open("ranked", token);
  if (typeof boundNamespace !== "string" || typeof boundScope !== "string" || !isPosition(rank, stableKey, orderingScope)) {
    throw new InvalidOrderedCursorError("ranked", token, "malformed");
  }
  if (boundNamespace !== namespace || boundScope !== rankingScope) throw new InvalidOrderedCursorError("ranked", token, "query_mismatch");
  return { rank: rank as number, stableKey: stableKey as string, orderingScope: orderingScope as string };
}

/**
 * Decode a `listDue` token issued for exactly `(namespace, dueAtOrBefore)`.
 *
 * @throws {InvalidOrderedCursorError} of kind `due`.
 */
export function decodeDueCursor(token: string, namespace: string, dueAtOrBefore: number): DuePosition {
  const [boundNamespace, boundDue, dueAt, stableKey, orderingScope] = open("due", token);
  if (typeof boundNamespace !== "string" || typeof boundDue !== "number" || !Number.isSafeInteger(boundDue) || !isPosition(dueAt, stableKey, orderingScope)) {
    throw new InvalidOrderedCursorError("due", token, "malformed");
  }
  if (boundNamespace !== namespace || boundDue !== dueAtOrBefore) throw new InvalidOrderedCursorError("due", token, "query_mismatch");
  return { dueAt: dueAt as number, stableKey: stableKey as string, orderingScope: orderingScope as string };
}
