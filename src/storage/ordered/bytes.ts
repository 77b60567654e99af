/**
 * Small byte codecs the OrderedIndex needs, written out here because the
 * core compiles without DOM or Node typings (no `TextEncoder`, `btoa` or
 * `Buffer`): strict UTF-8, unpadded base64url, and the hex "sort form" of a
 * stable key.
 *
 * Why a sort form: the spec orders stable keys the way Go compares strings,
 * by their UTF-8 bytes (which is code-point order), while engines order
 * strings by UTF-16 code units. The two disagree when a key holds a character
 * at or above U+E000 next to one beyond U+FFFF. The lowercase hex of the
 * UTF-8 bytes is plain ASCII, orders exactly like the bytes, and keeps the
 * prefix rule (a shorter key that is a prefix sorts first), so index keys
 * built from it sort as the spec says on every engine.
 */

/** The UTF-8 bytes of a string without lone surrogates (they would encode as U+FFFD). */
export function utf8Encode(text: string): Uint8Array {
  const out: number[] = [];
  for (let i = 0; i < text.length; i++) {
    let c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
      } else c = 0xfffd;
    } else if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 0x3f));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 0x3f), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f));
  }
  return Uint8Array.from(out);
}

/** Decode UTF-8 strictly: `undefined` for any invalid, overlong or surrogate sequence. */
export function utf8Decode(bytes: Uint8Array): string | undefined {
  let text = "";
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i]!;
    let cp: number;
    let need: number;
    let min: number;
    if (b < 0x80) {
      text += String.fromCharCode(b);
      i++;
      continue;
    } else if (b >= 0xc2 && b <= 0xdf) {
      cp = b & 0x1f;
      need = 1;
      min = 0x80;
    } else if (b >= 0xe0 && b <= 0xef) {
      cp = b & 0x0f;
      need = 2;
      min = 0x800;
    } else if (b >= 0xf0 && b <= 0xf4) {
      cp = b & 0x07;
      need = 3;
      min = 0x10000;
    } else return undefined;
    for (let k = 1; k <= need; k++) {
      const next = bytes[i + k];
      if (next === undefined || (next & 0xc0) !== 0x80) return undefined;
      cp = (cp << 6) | (next & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return undefined;
    text += String.fromCodePoint(cp);
    i += need + 1;
  }
  return text;
}

const BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/** Unpadded base64url (RFC 4648 section 5). */
export function base64urlEncode(bytes: Uint8Array): string {
  let out = "";
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out += BASE64URL[n >> 18]! + BASE64URL[(n >> 12) & 63]! + BASE64URL[(n >> 6) & 63]! + BASE64URL[n & 63]!;
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i]! << 16;
    out += BASE64URL[n >> 18]! + BASE64URL[(n >> 12) & 63]!;
  } else if (rest === 2) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
    out += BASE64URL[n >> 18]! + BASE64URL[(n >> 12) & 63]! + BASE64URL[(n >> 6) & 63]!;
  }
  return out;
}

/**
 * Decode unpadded base64url strictly: `undefined` for a character outside
 * the alphabet, an impossible length, or nonzero padding bits (so every byte
 * string has exactly one accepted text).
 */
export function base64urlDecode(text: string): Uint8Array | undefined {
  if (text.length % 4 === 1) return undefined;
  const values: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const v = BASE64URL.indexOf(text[i]!);
    if (v < 0) return undefined;
    values.push(v);
  }
  const out: number[] = [];
  let i = 0;
  for (; i + 3 < values.length; i += 4) {
    const n = (values[i]! << 18) | (values[i + 1]! << 12) | (values[i + 2]! << 6) | values[i + 3]!;
    out.push(n >> 16, (n >> 8) & 255, n & 255);
  }
  const rest = values.length - i;
  if (rest === 2) {
    const n = (values[i]! << 18) | (values[i + 1]! << 12);
    if ((n & 0xffff) !== 0) return undefined;
    out.push(n >> 16);
  } else if (rest === 3) {
    const n = (values[i]! << 18) | (values[i + 1]! << 12) | (values[i + 2]! << 6);
    if ((n & 0xff) !== 0) return undefined;
    out.push(n >> 16, (n >> 8) & 255);
  }
  return Uint8Array.from(out);
}

const HEX = "0123456789abcdef";

const HEX_BYTE: readonly string[] = Array.from({ length: 256 }, (_, byte) => HEX[byte >> 4]! + HEX[byte & 15]!);

/** The sort form of a stable key: lowercase hex of its UTF-8 bytes (orders like the bytes). */
export function stableKeySortForm(stableKey: string): string {
  let out = "";
  for (let i = 0; i < stableKey.length; i++) {
    const c = stableKey.charCodeAt(i);
    // The common case, ASCII, without building the byte array.
    if (c < 0x80) out += HEX_BYTE[c]!;
    else {
      // Everything else through the one UTF-8 encoder (a whole surrogate pair at once).
      const wide = c >= 0xd800 && c <= 0xdbff && i + 1 < stableKey.length ? 2 : 1;
      for (const byte of utf8Encode(stableKey.slice(i, i + wide))) out += HEX_BYTE[byte]!;
      i += wide - 1;
    }
  }
  return out;
}
