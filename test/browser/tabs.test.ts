/**
 * Several tabs, one database (real Chromium pages of one origin, opened by
 * the commands in tab-commands.ts):
 * - two pages claiming for the same consumer never hold the same event in
 *   flight at once, and each ordering key is delivered in append order;
 * - two pages appending at once, one awaited append at a time each, get
 *   distinct positions and lose nothing;
 * - a page reloaded in the middle of a delivery loses only its lease: every
 *   append it saw accepted is still there and is delivered.
 */
import { afterEach, describe, expect, it } from "vitest";
import { commands } from "vitest/browser";
import type { AppendedEvent, DeliveryLog } from "./tab-main.js";

const run = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
const opened: string[] = [];

async function openTab(): Promise<string> {
  const id = await commands.openTab();
  opened.push(id);
  return id;
}

afterEach(async () => {
  for (const id of opened.splice(0)) await commands.closeTab(id);
});

describe("several tabs over one IndexedDB journal (Chromium)", () => {
  it("two pages claiming for one consumer never hold the same event in flight at once, and keep per-key order", async () => {
    const db = `tabs-${run}`;
    const [a, b] = [await openTab(), await openTab()];
    const events = await commands.tabCall<AppendedEvent[]>(a, "append", [db, 120, 6, 1_700_000_000_000]);
    expect(events).toHaveLength(120);

    const [logA, logB] = await Promise.all([
      commands.tabCall<DeliveryLog[]>(a, "work", [db, "A", "billing", 4]),
      commands.tabCall<DeliveryLog[]>(b, "work", [db, "B", "billing", 4]),
    ]);
    const log = [...logA, ...logB];

    // Leases are long and nothing is nacked: every event is delivered exactly
    // once, as attempt 1. A second hand-out while in flight would show up as
    // a duplicate (or an attempt 2).
    expect(log.map((d) => d.event).sort()).toEqual(events.map((e) => e.id).sort());
    expect(log.every((d) => d.attempt === 1)).toBe(true);
    // Both tabs took part.
    expect(logA.length).toBeGreaterThan(0);
    expect(logB.length).toBeGreaterThan(0);

    // Per key: append order, and the next event of a key was handed out only
    // after the previous one's ack had started (in whichever tab).
    const byId = new Map(log.map((d) => [d.event, d]));
    for (let key = 0; key < 6; key++) {
      const ofKey = events.filter((e) => e.key === `acme/user-${key}`).map((e) => byId.get(e.id)!);
      expect(ofKey.every((d) => d.key === `acme/user-${key}`)).toBe(true);
      for (let i = 1; i < ofKey.length; i++) {
        expect(ofKey[i]!.claimedAt).toBeGreaterThan(ofKey[i - 1]!.ackStartedAt);
      }
    }
    expect(await commands.tabCall(a, "stats", [db, "billing"])).toEqual({ pending: 0, inFlight: 0 });
  });

  it("two pages appending one event at a time, at once, get distinct positions and lose nothing", async () => {
    const db = `append-tabs-${run}`;
    const [a, b] = [await openTab(), await openTab()];
    // Each page's engine commits right after its own last commit, on a version the other page keeps
    // moving: most of these commits find their view stale and run again.
    const [fromA, fromB] = await Promise.all([
      commands.tabCall<[string, number, string][]>(a, "appendEach", [db, 150, 10, 1_700_000_000_000]),
      commands.tabCall<[string, number, string][]>(b, "appendEach", [db, 150, 10, 1_800_000_000_000]),
    ]);
    const all = [...fromA, ...fromB];
    expect(all.every(([, , status]) => status === "accepted")).toBe(true);
    expect(all.map(([, position]) => position).sort((x, y) => x - y)).toEqual(Array.from({ length: 300 }, (_, i) => i + 1));
    // Each page's own appends got increasing positions, and the two pages' appends interleaved.
    for (const mine of [fromA, fromB]) {
      for (let i = 1; i < mine.length; i++) expect(mine[i]![1]).toBeGreaterThan(mine[i - 1]![1]);
      expect(mine[mine.length - 1]![1] - mine[0]![1]).toBeGreaterThan(mine.length);
    }
    const drained = await commands.tabCall<[string, number][]>(a, "drain", [db, "billing", Date.now()]);
    expect(drained.map(([id]) => id).sort()).toEqual(all.map(([id]) => id).sort());
    expect(drained.every(([, attempt]) => attempt === 1)).toBe(true);
  });

  it("a page reloaded in the middle of a delivery loses only its lease, never an accepted event", async () => {
    const db = `reload-${run}`;
    const tab = await openTab();
    const now = Date.now();
    // 20 accepted (awaited) events, then: 100 more appended one by one in the
    // background while 5 are claimed and left in flight; reload mid-way.
    const awaited = (await commands.tabCall<AppendedEvent[]>(tab, "append", [db, 20, 10, 1_700_000_000_000])).map((e) => e.id);
    expect(awaited).toHaveLength(20);
    const inFlight = await commands.tabCall<string[]>(tab, "deliverThenHang", [db, "billing", 100, 1_800_000_000_000, 5, now]);
    expect(inFlight).toHaveLength(5);
    await commands.reloadTab(tab);
    const reported = await commands.tabAccepted(tab);

    // The leases survived the reload: the in-flight events (and the rest of
    // their ordering keys) are not handed out again yet...
    const before = await commands.tabCall<[string, number][]>(tab, "drain", [db, "billing", now + 1_000]);
    expect(before.filter(([id]) => inFlight.includes(id))).toEqual([]);
    expect(before.every(([, attempt]) => attempt === 1)).toBe(true);
    // ...and come back, as attempt 2, once the leases lapsed (then their keys move on).
    const after = await commands.tabCall<[string, number][]>(tab, "drain", [db, "billing", now + 60_000]);
    expect(after.filter(([, attempt]) => attempt === 2).map(([id]) => id).sort()).toEqual([...inFlight].sort());
    expect(after.filter(([, attempt]) => attempt !== 2).every(([id, attempt]) => attempt === 1 && !inFlight.includes(id))).toBe(true);

    // Everything accepted before the reload was delivered: the 20 awaited
    // appends and every background append the page saw accepted.
    const delivered = new Set([...before, ...after].map(([id]) => id));
    expect(reported.length).toBeGreaterThan(0);
    for (const id of [...awaited, ...reported]) expect(delivered.has(id)).toBe(true);
    expect(await commands.tabCall(tab, "stats", [db, "billing"])).toEqual({ pending: 0, inFlight: 0 });
  });

});
