/**
 * The page bookkeeping of the IndexedDB engine, without IndexedDB: cutting a
 * stretch of rows into pages, building pages from sorted rows (the schema
 * migration), finding pages by encoding, and the version-bound page cache.
 * The engine suites (conformance over default and tiny pages, two tabs,
 * migration) check the same code through IndexedDB.
 */
import { describe, expect, it } from "vitest";
import { encodeKey } from "../../src/ordered/key-encoding.js";
import type { ChangeRecord } from "./log.js";
import { DEFAULT_CACHE_BYTES, DEFAULT_CACHE_PAGES } from "./indexeddb-engine.js";
import { cachedBytes, cutPages, Page, PageBuilder, PageCache, PageSet, sizeOf, type PageLimits } from "./pages.js";

const limits: PageLimits = { maxRows: 4, maxBytes: 200 };

function rows(n: number, size = 1): { keys: string[]; values: unknown[]; sizes: number[] } {
  const keys = Array.from({ length: n }, (_, i) => `k${String(i).padStart(3, "0")}`);
  return { keys, values: keys.map((k) => k.toUpperCase()), sizes: keys.map(() => size) };
}

/** The pages' fences and rows, and that they tile `[lo, hi)` in order. */
function checkTiling(pages: Page[], lo: string, hi: string | null): void {
  expect(pages[0]!.lo).toBe(lo);
  expect(pages[pages.length - 1]!.hi).toBe(hi);
  for (let i = 0; i + 1 < pages.length; i++) expect(pages[i]!.hi).toBe(pages[i + 1]!.lo);
  for (const page of pages) for (const key of page.keys) expect(page.covers(key)).toBe(true);
}

describe("cutPages", () => {
  it("cuts greedily from the left within the row limit, and shares the last two pages' rows when the last would be nearly empty", () => {
    const r = rows(17);
    const pages = cutPages("", null, r.keys, r.values, r.sizes, { maxRows: 8, maxBytes: 1_000 });
    checkTiling(pages, "", null);
    // 8 + 8 + 1: one row is under a quarter of a page, so the last two pages share 9 rows as 5 + 4.
    expect(pages.map((p) => p.keys.length)).toEqual([8, 5, 4]);
    expect(pages.flatMap((p) => p.keys)).toEqual(r.keys);
    expect(pages.flatMap((p) => p.values)).toEqual(r.values);
  });

  it("keeps the stretch's fences: the first page keeps `lo`, the last keeps `hi`, the others start at their first row", () => {
    const r = rows(8);
    const pages = cutPages("a", "z", r.keys, r.values, r.sizes, limits);
    checkTiling(pages, "a", "z");
    expect(pages.map((p) => p.lo)).toEqual(["a", "k004"]);
  });

  it("cuts by bytes too, and gives a row larger than a page a page of its own", () => {
    const r = rows(5, 10);
    r.sizes[2] = 1_000;
    const pages = cutPages("", null, r.keys, r.values, r.sizes, limits);
    checkTiling(pages, "", null);
    expect(pages.map((p) => p.keys)).toEqual([["k000", "k001"], ["k002"], ["k003", "k004"]]);
  });

  it("makes one empty page of a stretch with no rows", () => {
    const pages = cutPages("m", null, [], [], [], limits);
    expect(pages).toHaveLength(1);
    expect(pages[0]).toMatchObject({ lo: "m", hi: null, keys: [], bytes: 0 });
  });
});

describe("PageBuilder", () => {
  it("builds pages from ascending rows, tiling the whole key space from the empty fence", () => {
    const out: Page[] = [];
    const builder = new PageBuilder(limits, (page) => out.push(page));
    const r = rows(10);
    r.keys.forEach((k, i) => builder.add(k, r.values[i], r.sizes[i]!));
    builder.finish();
    checkTiling(out, "", null);
    expect(out.map((p) => p.keys.length)).toEqual([4, 4, 2]);
    const none: Page[] = [];
    new PageBuilder(limits, (page) => none.push(page)).finish();
    expect(none).toEqual([]);
  });
});

describe("Page", () => {
  it("sets, replaces and removes rows in order, keeping its byte count", () => {
    const page = Page.empty("", null).copy();
    page.set("b", "B", 5);
    page.set("a", "A", 7);
    page.set("b", "B2", 9);
    expect(page.keys).toEqual(["a", "b"]);
    expect(page.values).toEqual(["A", "B2"]);
    expect(page.bytes).toBe(1 + 8 + 7 + 1 + 8 + 9);
    page.remove("a");
    page.remove("nope");
    expect(page.keys).toEqual(["b"]);
    expect(page.bytes).toBe(1 + 8 + 9);
    expect(Page.fromRecord("", page.toRecord()).bytes).toBe(page.bytes);
  });
});

describe("PageSet and PageCache", () => {
  const a = new Page("", "f", ["a"], [1], [1], 10);
  const f = new Page("f", "m", ["f"], [2], [1], 10);
  const m = new Page("m", null, ["m"], [3], [1], 10);

  it("finds the page holding an encoding only when that page is present, and a page's predecessor by its fence", () => {
    const set = new PageSet();
    set.add(m);
    set.add(a);
    expect(set.containing("b")).toBe(a);
    expect(set.containing("g")).toBeUndefined(); // f's page is not in the set
    expect(set.containing("zz")).toBe(m);
    expect(set.before("f")).toBe(a);
    expect(set.before("m")).toBeUndefined();
    set.add(f);
    expect(set.before("m")).toBe(f);
    expect(set.all().map((p) => p.lo)).toEqual(["", "f", "m"]);
    set.remove("f");
    expect(set.containing("g")).toBeUndefined();
  });

  it("drops the pages used longest ago beyond its capacity, and installs a commit only over its base version", () => {
    const cache = new PageCache(2);
    cache.catchUp(null, 1, [{ version: 1, record: { checkpoint: true } }]);
    cache.add(a);
    cache.add(f);
    expect(cache.containing("b")).toBe(a); // a is now the most recently used
    cache.add(m); // evicts f
    expect(cache.at("f")).toBeUndefined();
    expect(cache.at("")).toBe(a);
    cache.install(1, [f], ["m"]);
    expect(cache.version).toBe(2);
    expect(cache.at("m")).toBeUndefined();
    expect(cache.at("f")).toBe(f);
    cache.install(1, [m], []); // not over its base: forget everything
    expect(cache.version).toBeNull();
    expect(cache.size).toBe(0);
  });

  it("is bounded by estimated bytes as well as pages: by default 32 MiB whatever the page count, a page larger than the bound not kept at all", () => {
    const MiB = 1024 * 1024;
    const cache = new PageCache(DEFAULT_CACHE_PAGES, DEFAULT_CACHE_BYTES);
    expect(DEFAULT_CACHE_BYTES).toBe(32 * MiB);
    cache.catchUp(null, 1, [{ version: 1, record: { checkpoint: true } }]);
    // 100 pages of one 1 MiB row each (a row larger than a page gets a page of its own): 32 MiB at most are kept.
    const big = (i: number): Page => {
      const enc = `p${String(i).padStart(3, "0")}`;
      return new Page(enc, `p${String(i + 1).padStart(3, "0")}`, [enc], [new Uint8Array(MiB)], [MiB], enc.length + 8 + MiB);
    };
    for (let i = 0; i < 100; i++) cache.add(big(i));
    expect(cache.bytes).toBeLessThanOrEqual(32 * MiB);
    expect(cache.all().reduce((sum, page) => sum + cachedBytes(page), 0)).toBe(cache.bytes);
    expect(cache.size).toBe(31);
    // The pages used longest ago went first.
    expect(cache.at("p068")).toBeUndefined();
    expect(cache.at("p069")?.lo).toBe("p069");
    // Touching one keeps it over the pages added after it.
    cache.add(big(100));
    expect(cache.at("p069")?.lo).toBe("p069");
    expect(cache.at("p070")).toBeUndefined();
    // A page larger than the whole bound is not kept, and the older version of it at its fence goes.
    const huge = new Page("p080", "p081", ["p080"], [new Uint8Array(40 * MiB)], [40 * MiB], 40 * MiB + 12);
    cache.add(huge);
    expect(cache.at("p080")).toBeUndefined();
    expect(cache.bytes).toBe(cache.all().reduce((sum, page) => sum + cachedBytes(page), 0));
    // Removing and resetting keep the count exact.
    cache.remove("p099");
    expect(cache.bytes).toBe(cache.all().reduce((sum, page) => sum + cachedBytes(page), 0));
    cache.reset();
    expect([cache.size, cache.bytes]).toEqual([0, 0]);
  });

  it("catches up with the log: change records keep the pages, a checkpoint among them forgets them, a gap is refused", () => {
    const cache = new PageCache(8);
    const e = (text: string): string => encodeKey([text]);
    const put = (enc: string, value: unknown): ChangeRecord => ({ c: [], r: [[enc, 9, value]] });
    cache.catchUp(null, 3, [
      { version: 1, record: put(e("a"), 1) }, // before the checkpoint: already in the pages
      { version: 2, record: { checkpoint: true } },
      { version: 3, record: put(e("b"), 2) },
    ]);
    expect(cache.version).toBe(3);
    expect(cache.log.records).toBe(1);
    expect(cache.log.rows.find(e("a"))).toBeUndefined();
    expect(cache.log.rows.find(e("b"))?.value).toBe(2);
    cache.add(a);
    // Change records only: applied in order, pages kept (a clear hides the pages, a later row survives it).
    cache.catchUp(3, 5, [
      { version: 4, record: { c: [{ lower: e("a"), lowerOpen: false, upper: e("c"), upperOpen: false }], r: [] } },
      { version: 5, record: { c: [], r: [[e("bb"), 9, 3], [e("z")]] } },
    ]);
    expect(cache.at("")).toBe(a);
    expect(cache.log.rows.find(e("b"))).toBeUndefined();
    expect(cache.log.rows.find(e("bb"))?.value).toBe(3);
    expect(cache.log.rows.find(e("z"))?.deleted).toBe(true);
    expect(cache.log.hides(e("abc"))).toBe(true);
    expect(cache.log.hides(e("d"))).toBe(false);
    expect(cache.log.records).toBe(3);
    // A checkpoint among the records: the pages changed.
    cache.catchUp(5, 7, [
      { version: 6, record: { checkpoint: true } },
      { version: 7, record: put(e("q"), 4) },
    ]);
    expect(cache.size).toBe(0);
    expect(cache.log.records).toBe(1);
    expect(cache.log.hides(e("abc"))).toBe(false);
    // Records missing without a checkpoint: the stored log is damaged.
    expect(() => cache.catchUp(7, 9, [{ version: 9, record: put(e("r"), 5) }])).toThrow(/inconsistent/);
  });
});

describe("sizeOf", () => {
  it("estimates structured data and refuses functions and symbols with a DataCloneError", () => {
    expect(sizeOf("abcd")).toBe(8);
    expect(sizeOf(new Uint8Array(100))).toBe(116);
    expect(sizeOf({ a: [1, "x"], b: null })).toBeGreaterThan(sizeOf({ a: [1] }));
    expect(() => sizeOf({ nested: [() => 1] })).toThrow(expect.objectContaining({ name: "DataCloneError" }) as Error);
    expect(() => sizeOf(Symbol("s"))).toThrow(expect.objectContaining({ name: "DataCloneError" }) as Error);
  });
});
