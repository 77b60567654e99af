/**
 * The persisted, order-preserving byte encoding of tuple keys in the Durable
 * Object engine's `kv.k` column.
 *
 * SQLite compares BLOBs with `memcmp` (then by length), so the encoding is
 * designed for unsigned byte order. Promises (checked by the workers tests),
 * for valid keys `a`, `b`, `p`:
 * - Order: `encodeKey(a)` sorts before `encodeKey(b)` byte-wise exactly when
 *   `compareKeys(a, b) < 0`, and they are equal exactly when
 *   `compareKeys(a, b) === 0` (`0` and `-0` share one encoding).
 * - Prefixes: `hasPrefix(a, p)` exactly when `encodeKey(p) <= encodeKey(a) <
 *   encodeKey(p) + 0x03`, so a prefix scan is one range of the primary key.
 * - Round trip: `decodeKey(encodeKey(a))` equals `a` (with `-0` read as `0`).
 *
 * Layout (format version 1; the engine's schema version guards it): each
 * element is a tag byte and a payload, and a tuple is the concatenation.
 * - Number: 0x01, then the float64's 8 bytes big-endian, with the sign bit
 *   set for non-negative numbers and every bit flipped for negative ones.
 * - String: 0x02, then each UTF-16 code unit `c` as `01 01` (c = 0),
 *   `01 02` (c = 1), `c` (2 <= c <= 0xFE) or `FF hi lo` (c >= 0xFF), then a
 *   0x00 terminator (below every unit code, so a string sorts before its
 *   extensions; unit codes are prefix-free and ordered like the units).
 *
 * In JavaScript the encoding is held as a "byte string" (one char per byte,
 * each 0..255): comparing two byte strings with `<` is the same as `memcmp`,
 * so the engine's write buffer orders keys exactly like SQLite does.
 */
import type { Key, KeyPart } from "../../src/engine.js";

const NUMBER_TAG = 0x01;
const STRING_TAG = 0x02;
/** Appended to an encoded prefix: above every element tag, so it bounds all extensions. */
export const PREFIX_END = "\x03";

const view = new DataView(new ArrayBuffer(8));
const bytes = new Uint8Array(view.buffer);

function encodeNumber(n: number): string {
  view.setFloat64(0, n === 0 ? 0 : n);
  const b = bytes;
  if (b[0]! < 0x80) {
    return String.fromCharCode(NUMBER_TAG, b[0]! | 0x80, b[1]!, b[2]!, b[3]!, b[4]!, b[5]!, b[6]!, b[7]!);
  }
  return String.fromCharCode(NUMBER_TAG, 255 - b[0]!, 255 - b[1]!, 255 - b[2]!, 255 - b[3]!, 255 - b[4]!, 255 - b[5]!, 255 - b[6]!, 255 - b[7]!);
}

function encodeString(s: string): string {
  let i = 0;
  const n = s.length;
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x02 || c >= 0xff) break;
  }
  if (i === n) return "\x02" + s + "\x00";
  let out = "\x02" + s.slice(0, i);
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x02) out += String.fromCharCode(0x01, c + 1);
    else if (c < 0xff) out += String.fromCharCode(c);
    else out += String.fromCharCode(0xff, c >> 8, c & 0xff);
  }
  return out + "\x00";
}

/** Encode a validated key (see `assertValidKey`) into its byte string. */
export function encodeKey(key: Key): string {
  let out = "";
  for (const part of key) out += typeof part === "number" ? encodeNumber(part) : encodeString(part);
  return out;
}

/** Decode a byte string written by {@link encodeKey}. Throws on anything else. */
export function decodeKey(enc: string): KeyPart[] {
  const parts: KeyPart[] = [];
  let i = 0;
  const n = enc.length;
  while (i < n) {
    const tag = enc.charCodeAt(i++);
    if (tag === NUMBER_TAG) {
      if (i + 8 > n) throw new Error("isostore durable-objects engine: truncated number in a stored key");
      const negative = enc.charCodeAt(i) < 0x80;
      for (let j = 0; j < 8; j++) {
        const byte = enc.charCodeAt(i + j);
        bytes[j] = negative ? 255 - byte : j === 0 ? byte & 0x7f : byte;
      }
      parts.push(view.getFloat64(0));
      i += 8;
    } else if (tag === STRING_TAG) {
      let text = "";
      let start = i;
      for (;;) {
        if (i >= n) throw new Error("isostore durable-objects engine: unterminated string in a stored key");
        const c = enc.charCodeAt(i);
        if (c === 0x00) {
          text += enc.slice(start, i);
          i++;
          break;
        }
        if (c === 0x01) {
          text += enc.slice(start, i) + String.fromCharCode(enc.charCodeAt(i + 1) - 1);
          i += 2;
          start = i;
        } else if (c === 0xff) {
          text += enc.slice(start, i) + String.fromCharCode((enc.charCodeAt(i + 1) << 8) | enc.charCodeAt(i + 2));
          i += 3;
          start = i;
        } else {
          i++;
        }
      }
      parts.push(text);
    } else {
      throw new Error(`isostore durable-objects engine: unknown tag ${tag} in a stored key`);
    }
  }
  return parts;
}

/** A byte string as the bytes SQLite stores (an ArrayBuffer, what `sql.exec` binds as a BLOB). */
export function toBlob(enc: string): ArrayBuffer {
  const out = new Uint8Array(enc.length);
  for (let i = 0; i < enc.length; i++) out[i] = enc.charCodeAt(i);
  return out.buffer;
}

/** The byte string of a BLOB read back from SQLite. */
export function fromBlob(blob: ArrayBuffer): string {
  const b = new Uint8Array(blob);
  let out = "";
  const CHUNK = 8192;
  for (let i = 0; i < b.length; i += CHUNK) {
    out += String.fromCharCode.apply(null, b.subarray(i, i + CHUNK) as unknown as number[]);
  }
  return out;
}
