/**
 * Which partition an ordering key belongs to.
 *
 * The hash is 32-bit FNV-1a over the UTF-8 bytes of `namespace + "/" +
 * subject` (the ordering key as the journal prints it), and the partition is
 * that hash modulo P. It is part of the stored format: every key of a journal
 * must keep hashing to the same partition for as long as the journal exists,
 * so this function never changes (a different function would be a new
 * format with its own name).
 */

const encoder = new TextEncoder();

/** 32-bit FNV-1a of the UTF-8 bytes of `text`, as an unsigned integer. */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of encoder.encode(text)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

/** The partition (0..partitions-1) of the ordering key `namespace/subject`. */
export function partitionOf(namespace: string, subject: string, partitions: number): number {
  return partitions === 1 ? 0 : fnv1a32(`${namespace}/${subject}`) % partitions;
}
