import type { Engine } from "../../../src/index.js";

/**
 * `engine` without its `localReads` hint: a journal over it reads ahead in
 * groups (the IndexedDB path), so Node tests over the memory engine drive that
 * path too.
 */
export function readingAhead(engine: Engine): Engine {
  return { durable: engine.durable, transact: (mode, fn) => engine.transact(mode, fn), close: () => engine.close() };
}
