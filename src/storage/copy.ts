/**
 * The one way the storage primitives copy caller bytes in and out
 * (`storage-primitives.go.txt`: payloads and values are caller-owned; copy
 * before retaining and before returning).
 *
 * Not `bytes.slice()`: the types accept any `Uint8Array`, and a subclass may
 * override `slice` to return a view of the same memory (Node's `Buffer`
 * does), so a "copy" made that way would still share the caller's bytes.
 */

/**
 * A fresh plain `Uint8Array` holding the bytes of `bytes`, sharing no memory
 * with it, whatever subclass (or realm) `bytes` comes from.
 *
 * @example
 * ```ts
 * const stored = copyBytes(Buffer.from([1, 2])); // a Uint8Array, not a Buffer view
 * ```
 */
export function copyBytes(bytes: Uint8Array): Uint8Array {
  const copy = new Uint8Array(bytes.length);
  copy.set(bytes);
  return copy;
}
