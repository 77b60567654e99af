/**
 * Twin journals for tests of data written by older code: the same traffic
 * goes to a journal whose stored layout a test then rewrites into an older
 * shape, and to a plain one; a journal reopened over the rewritten data must
 * answer exactly as the plain one, before and after more traffic.
 */
import { memoryEngine } from "../../../adapters/memory/index.js";
import type { Engine } from "../../../src/engine.js";
import { createJournal, type Capacity, type UsageJournal } from "../../../src/index.js";

/** The twins after the same `traffic`, the legacy one rewritten by `toLegacy` and reopened. */
export interface Twins {
  /** A new journal over the rewritten data. */
  readonly reopened: UsageJournal;
  readonly plain: UsageJournal;
  readonly legacyEngine: Engine;
  readonly plainEngine: Engine;
  readonly now: () => number;
  /** Move the shared clock forward. */
  advance(ms: number): void;
  close(): Promise<void>;
}

/** Run `traffic` on both twins at `start`, rewrite the legacy twin's data with `toLegacy`, and reopen it. */
export async function legacyTwins(
  capacity: Capacity,
  start: number,
  traffic: (journal: UsageJournal, now: () => number) => Promise<void>,
  toLegacy: (engine: Engine, name: string) => Promise<void>,
): Promise<Twins> {
  let time = start;
  const now = () => time;
  const legacyEngine = memoryEngine();
  const plainEngine = memoryEngine();
  const legacy = createJournal(legacyEngine, { name: "usage", capacity, clock: now });
  const plain = createJournal(plainEngine, { name: "usage", capacity, clock: now });
  await traffic(legacy, now);
  await traffic(plain, now);
  await toLegacy(legacyEngine, "usage");
  const reopened = createJournal(legacyEngine, { name: "usage", capacity, clock: now });
  return {
    reopened,
    plain,
    legacyEngine,
    plainEngine,
    now,
    advance: (ms) => {
      time += ms;
    },
    close: async () => {
      await legacyEngine.close();
      await plainEngine.close();
    },
  };
}
