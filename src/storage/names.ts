/**
 * The storage name grammar (`storage-primitives.go.txt`, `InvalidNameError`).
 *
 * A name is one or more segments joined by single `/`; each segment matches
 * `[a-z0-9][a-z0-9_.-]*`; there is no leading or trailing `/`; the whole name
 * is at most {@link MAX_NAME_BYTES} bytes of UTF-8. Ledger names, lease names,
 * KV keys and blob keys are all names in this sense (the spec's KV and Blobs
 * are addressed by the same hierarchical names: a session catalog, workspace
 * snapshots), and every primitive checks them at its boundary, before it
 * touches the engine, so a refused call changes nothing.
 *
 * The grammar is deliberately narrow: names become engine keys, URL path
 * segments and object-store keys, and none of those can mis-parse
 * `[a-z0-9_.-]` joined by `/`. A segment can never be `.` or `..`.
 */
import { InvalidNameError, type NameRule } from "./errors.js";

/** The longest name, in bytes of UTF-8. */
export const MAX_NAME_BYTES = 512;

/** The first rule `name` breaks, or `undefined` when it is a valid name. */
export function nameRuleBroken(name: unknown): NameRule | undefined {
  if (typeof name !== "string") return "type";
  if (name.length === 0) return "empty";
  if (utf8Length(name) > MAX_NAME_BYTES) return "too_long";
  if (name.startsWith("/")) return "leading_slash";
  if (name.endsWith("/")) return "trailing_slash";
  for (const segment of name.split("/")) {
    if (segment.length === 0) return "empty_segment";
    if (!/^[a-z0-9]/.test(segment)) return "segment_start";
    if (!/^[a-z0-9][a-z0-9_.-]*$/.test(segment)) return "character";
  }
  return undefined;
}

/** Whether `name` is a valid storage name. */
export function isValidName(name: unknown): name is string {
  return nameRuleBroken(name) === undefined;
}

/**
 * Check a storage name and return it unchanged.
 *
 * @throws {InvalidNameError} naming the first rule the name breaks
 *   (`type`, `empty`, `too_long`, `leading_slash`, `trailing_slash`,
 *   `empty_segment`, `segment_start`, `character`).
 *
 * @example
 * ```ts
 * validateName("tenants/acme/orders"); // "tenants/acme/orders"
 * validateName("tenants//x");          // throws InvalidNameError (rule "empty_segment")
 * ```
 */
export function validateName(name: string): string {
  const rule = nameRuleBroken(name);
  if (rule !== undefined) throw new InvalidNameError(typeof name === "string" ? name : String(name), rule);
  return name;
}

/**
 * Check a listing prefix (`KV.keys`, `Blobs.list`). A prefix is not a name:
 * it may be empty (everything) or stop anywhere inside a name (`"orders/2"`,
 * `"orders/"`), but it must be text a name could start with, so a prefix that
 * no valid name can have is refused rather than silently matching nothing.
 */
export function validatePrefix(prefix: string): string {
  if (typeof prefix !== "string") throw new InvalidNameError(String(prefix), "type");
  if (prefix.length === 0) return prefix;
  if (utf8Length(prefix) > MAX_NAME_BYTES) throw new InvalidNameError(prefix, "too_long");
  // Any prefix of a valid name, completed with one more character, is a valid
  // name or ends with "/"; check the completed text instead.
  const completed = prefix.endsWith("/") ? `${prefix}a` : prefix;
  const rule = nameRuleBroken(completed);
  if (rule !== undefined && rule !== "too_long") throw new InvalidNameError(prefix, rule);
  return prefix;
}

/** Bytes `text` takes as UTF-8 (a lone surrogate counts as U+FFFD, 3 bytes). */
export function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}
