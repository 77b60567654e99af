/**
 * How the Durable Object engine stores values: JSON text in `kv.v`, with a
 * flag in `kv.t` saying whether the text needs the tagged decoding.
 *
 * The Engine's values are JSON-like data and `Uint8Array`s. Plain JSON (the
 * common case: every journal row) is stored as `JSON.stringify(value)` with
 * `t = 0` and read back with one `JSON.parse`. A value that holds a
 * `Uint8Array`, or an object with a key that the tagging uses (`$u8`, `$o`),
 * is stored with `t = 2`: each `Uint8Array` becomes `{"$u8": base64}`, each
 * `-0` (which JSON writes as `0`) becomes `{"$z": 0}`, and each object with a
 * key the tagging uses (`$u8`, `$z`, `$o`) is wrapped as `{"$o": object}`, so
 * that no user object is ever mistaken for a tag. Like JSON, it drops
 * `undefined` object properties and turns non-finite numbers into `null`.
 * An own `__proto__` key stays a key both ways (JSON.parse defines it; the
 * copies here define it rather than assign it).
 */

const U8 = "$u8";
const NEG_ZERO = "$z";
const WRAP = "$o";

/** Whether `record` has a key the tagging uses. */
function hasTagKey(record: object): boolean {
  return Object.hasOwn(record, U8) || Object.hasOwn(record, NEG_ZERO) || Object.hasOwn(record, WRAP);
}

/** Whether `value` needs the tagged form (a Uint8Array, a -0 or a tag-looking key inside). */
function needsTags(value: unknown): boolean {
  if (typeof value === "number") return Object.is(value, -0);
  if (value === null || typeof value !== "object") return false;
  if (value instanceof Uint8Array) return true;
  if (Array.isArray(value)) {
    for (const item of value as unknown[]) if (needsTags(item)) return true;
    return false;
  }
  const record = value as Record<string, unknown>;
  if (hasTagKey(record)) return true;
  for (const key in record) if (needsTags(record[key])) return true;
  return false;
}

/** Set `key` of `target` as an own property (an assignment to `__proto__` would set the prototype instead). */
function define(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

function base64(bytes: Uint8Array): string {
  let text = "";
  for (let i = 0; i < bytes.length; i += 8192) text += String.fromCharCode.apply(null, bytes.subarray(i, i + 8192) as unknown as number[]);
  return btoa(text);
}

function unbase64(text: string): Uint8Array {
  const raw = atob(text);
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}

function tag(value: unknown): unknown {
  if (Object.is(value, -0)) return { [NEG_ZERO]: 0 };
  if (value === null || typeof value !== "object") return value;
  if (value instanceof Uint8Array) return { [U8]: base64(value) };
  if (Array.isArray(value)) return (value as unknown[]).map(tag);
  const record = value as Record<string, unknown>;
  const copy: Record<string, unknown> = {};
  for (const key in record) define(copy, key, tag(record[key]));
  return hasTagKey(record) ? { [WRAP]: copy } : copy;
}

/** Decode a tagged value; `zeros` says whether `$z` is a tag (`t = 2`) or a plain key (`t = 1`, written before it was one). */
function untag(value: unknown, zeros: boolean): unknown {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return (value as unknown[]).map((item) => untag(item, zeros));
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  if (keys.length === 1 && keys[0] === U8) return unbase64(record[U8] as string);
  if (zeros && keys.length === 1 && keys[0] === NEG_ZERO) return -0;
  const inner = keys.length === 1 && keys[0] === WRAP ? (record[WRAP] as Record<string, unknown>) : record;
  const copy: Record<string, unknown> = {};
  for (const key in inner) define(copy, key, untag(inner[key], zeros));
  return copy;
}

/**
 * A value as stored: its text and how it is tagged: 0 plain JSON, 2 tagged;
 * 1 is the tagging written before `-0` had a tag (`$z` is then a plain key),
 * still read.
 */
export interface StoredValue {
  readonly text: string;
  readonly tagged: 0 | 2;
}

/** Encode a value for the `v` / `t` columns. Throws a TypeError for `undefined` (not storable). */
export function encodeValue(value: unknown): StoredValue {
  if (needsTags(value)) return { text: JSON.stringify(tag(value)), tagged: 2 };
  const text = JSON.stringify(value) as string | undefined;
  if (text === undefined) throw new TypeError("isostore durable-objects engine: a value must be JSON-like data or a Uint8Array");
  return { text, tagged: 0 };
}

/** Decode the `v` / `t` columns. */
export function decodeValue(text: string, tagged: number): unknown {
  const parsed: unknown = JSON.parse(text);
  return tagged === 0 ? parsed : untag(parsed, tagged !== 1);
}

/** UTF-8 size of `text` in bytes (what SQLite stores for a TEXT value). */
export function utf8Length(text: string): number {
  let size = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x80) size += c >= 0x800 && (c < 0xd800 || c > 0xdfff) ? 2 : 1;
  }
  return size;
}
