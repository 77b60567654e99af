/**
 * `StoreObject` by Workers RPC, from the test worker: one round trip per
 * primitive, and the typed errors arriving as data. Blobs are checked on
 * both backings: `STORES` (R2, the `STORE_BLOBS` bucket) and `STORES_SQL`
 * (the same class shown no bucket: blobs in SQLite).
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { Store } from "../../src/storage/store.js";
import { createLeaser } from "../../src/storage/leaser.js";
import { durableObjectEngine } from "../../adapters/durable-objects/engine.js";

const bytes = (...values: number[]) => new Uint8Array(values);
const text = (value: string) => new TextEncoder().encode(value);

/** The value of a successful outcome (fails the test with the error otherwise). */
function ok<T>(outcome: { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown }): T {
  if (!outcome.ok) throw new Error(`expected success, got ${JSON.stringify(outcome.error)}`);
  return outcome.value;
}

/** The error of a failed outcome. */
function failed(outcome: { readonly ok: boolean; readonly error?: unknown }): { code: string; type: string; message: string; fields: Record<string, unknown> } {
  if (outcome.ok) throw new Error("expected a storage error, got success");
  return outcome.error as { code: string; type: string; message: string; fields: Record<string, unknown> };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function stores(name: string) {
  return env.STORES.get(env.STORES.idFromName(name));
}

describe("StoreObject over RPC", () => {
  it("ledger: append, read back, tip, a conflict as data, delete", async () => {
    const stub = stores("ledger");
    expect(ok(await stub.ledgerAppend("app", "orders", 0, text("first")))).toBeUndefined();
    ok(await stub.ledgerAppend("app", "orders", 1, text("second")));
    ok(await stub.ledgerAppend("app", "orders", 2, bytes()));
    const conflict = failed(await stub.ledgerAppend("app", "orders", 1, text("late")));
    expect(conflict).toMatchObject({ code: "conflict", type: "ConflictError", fields: { name: "orders", expected: 1 } });
    expect(ok(await stub.ledgerTip("app", "orders"))).toBe(3);

    const all = ok(await stub.ledgerRead("app", "orders", 0));
    expect(all.map((r) => [r.seq, new TextDecoder().decode(r.payload)])).toEqual([
      [1, "first"],
      [2, "second"],
      [3, ""],
    ]);
    const page = ok(await stub.ledgerRead("app", "orders", 2, 1));
    expect(page.map((r) => r.seq)).toEqual([2]);

    ok(await stub.ledgerDelete("app", "orders"));
    expect(ok(await stub.ledgerTip("app", "orders"))).toBe(0);
    expect(failed(await stub.ledgerTip("app", "Bad Name"))).toMatchObject({ code: "invalid_name", type: "InvalidNameError", fields: { name: "Bad Name" } });
  });

  it("ledger: a page read at a generation is record_not_found once the ledger was deleted (and written again) since", async () => {
    const stub = stores("ledger-generation");
    ok(await stub.ledgerAppend("app", "log", 0, text("old1")));
    ok(await stub.ledgerAppend("app", "log", 1, text("old2")));
    const bound = ok(await stub.ledgerBound("app", "log"));
    expect(bound).toEqual({ tip: 2, generation: 0 });
    expect(ok(await stub.ledgerRead("app", "log", 1, 1, bound.generation)).map((r) => r.seq)).toEqual([1]);
    ok(await stub.ledgerDelete("app", "log"));
    ok(await stub.ledgerAppend("app", "log", 0, text("new1")));
    ok(await stub.ledgerAppend("app", "log", 1, text("new2")));
    expect(failed(await stub.ledgerRead("app", "log", 2, 1, bound.generation))).toMatchObject({ code: "record_not_found", type: "RecordNotFoundError", fields: { name: "log", seq: 2 } });
    expect(ok(await stub.ledgerBound("app", "log"))).toEqual({ tip: 2, generation: 1 });
    expect(ok(await stub.ledgerRead("app", "log", 2, 1, 1)).map((r) => new TextDecoder().decode(r.payload))).toEqual(["new2"]);
    expect(ok(await stub.ledgerRead("app", "log", 2)).map((r) => r.seq)).toEqual([2]); // no generation: the ledger as it is now
    ok(await stub.ledgerDelete("app", "never")); // absent: a no-op, no new generation
    expect(ok(await stub.ledgerBound("app", "never"))).toEqual({ tip: 0, generation: 0 });
  });

  it("KV: compare-and-swap by revision", async () => {
    const stub = stores("kv");
    const rev1 = ok(await stub.kvPut("app", "settings/theme", 0, text("dark")));
    expect(rev1).toBeGreaterThan(0);
    const stale = failed(await stub.kvPut("app", "settings/theme", 0, text("light")));
    expect(stale).toMatchObject({ code: "revision_conflict", type: "RevisionConflictError", fields: { key: "settings/theme", expectedRev: 0, actualRev: rev1 } });
    const rev2 = ok(await stub.kvPut("app", "settings/theme", rev1, text("light")));
    expect(rev2).toBeGreaterThan(rev1);
    const entry = ok(await stub.kvGet("app", "settings/theme"));
    expect({ value: new TextDecoder().decode(entry.value), rev: entry.rev }).toEqual({ value: "light", rev: rev2 });
    ok(await stub.kvPut("app", "settings/lang", 0, text("en")));
    expect(ok(await stub.kvKeys("app", "settings/"))).toEqual(["settings/lang", "settings/theme"]);
    ok(await stub.kvDelete("app", "settings/theme"));
    expect(failed(await stub.kvGet("app", "settings/theme"))).toMatchObject({ code: "key_not_found", fields: { key: "settings/theme" } });
  });

  it("ordered index: create, then listDue", async () => {
    const stub = stores("ordered");
    const due = { state: "due_at", unixMillis: 1_700_000_000_000 } as const;
    const rank = { ranked: true, value: 5 };
    const id = { namespace: "jobs", orderingScope: "inbox", stableKey: "job-1" };
    const created = ok(await stub.orderedCreate("app", id, "priority", text("payload"), rank, due));
    expect(created.created).toBe(true);
    expect(created.record).toMatchObject({ id, revision: 1, order: 1, deleted: false, due, rank });
    const again = ok(await stub.orderedCreate("app", id, "priority", text("other"), rank, due));
    expect(again.created).toBe(false);
    ok(await stub.orderedCreate("app", { ...id, stableKey: "job-2" }, "priority", bytes(), rank, { state: "due_at", unixMillis: 1_800_000_000_000 }));

    const page = ok(await stub.orderedListDue("app", "jobs", 1_750_000_000_000, "", 10));
    expect(page.records.map((r) => r.id.stableKey)).toEqual(["job-1"]);
    expect(new TextDecoder().decode(page.records[0]!.value)).toBe("payload");
    const ranked = ok(await stub.orderedListRanked("app", "jobs", "priority", "", 10));
    expect(ranked.records).toHaveLength(2);
    expect(failed(await stub.orderedListDue("app", "jobs", 0, "not-a-cursor", 10))).toMatchObject({ code: "invalid_ordered_cursor", fields: { kind: "due" } });
  });

  for (const [backing, namespace] of [
    ["R2", () => env.STORES],
    ["SQLite", () => env.STORES_SQL],
  ] as const) {
    it(`blobs (${backing}): put, get, same bytes again, a conflict, list, delete`, async () => {
      const ns = namespace();
      const stub = ns.get(ns.idFromName("blobs"));
      const content = new Uint8Array(300 * 1024).map((_, i) => (i * 7) & 0xff);
      ok(await stub.blobPut("app", "snap/a", content));
      ok(await stub.blobPut("app", "snap/a", content.slice()));
      expect(failed(await stub.blobPut("app", "snap/a", text("other")))).toMatchObject({ code: "blob_conflict", fields: { key: "snap/a" } });
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(text("stre"));
          controller.enqueue(text("amed"));
          controller.close();
        },
      });
      ok(await stub.blobPut("app", "snap/b", stream));

      // Two writers of one new key with different bytes, as the first calls of a fresh object: exactly one wins.
      const fresh = ns.get(ns.idFromName("blobs-race"));
      const race = await Promise.all([fresh.blobPut("app", "race", text("one")), fresh.blobPut("app", "race", text("two"))]);
      expect(race.filter((r) => r.ok)).toHaveLength(1);
      expect(failed(race.find((r) => !r.ok)!)).toMatchObject({ code: "blob_conflict" });
      const winner = await new Response(ok(await fresh.blobGet("app", "race"))).text();
      expect(["one", "two"]).toContain(winner);

      const got = new Uint8Array(await new Response(ok(await stub.blobGet("app", "snap/a"))).arrayBuffer());
      expect(got).toEqual(content);
      expect(await new Response(ok(await stub.blobGet("app", "snap/b"))).text()).toBe("streamed");
      expect(ok(await stub.blobList("app", "snap/"))).toEqual(["snap/a", "snap/b"]);
      expect(ok(await stub.blobList("app", "zz"))).toEqual([]);

      ok(await stub.blobDelete("app", "snap/a"));
      expect(failed(await stub.blobGet("app", "snap/a"))).toMatchObject({ code: "blob_not_found", fields: { key: "snap/a" } });
      expect(ok(await stub.blobList("app", ""))).toEqual(["snap/b"]);

      const inBucket = (await env.STORE_BLOBS.list({ prefix: `${ns.idFromName("blobs").toString()}/` })).objects.map((o) => o.key);
      expect(inBucket).toEqual(backing === "R2" ? [`${ns.idFromName("blobs").toString()}/snap/b`] : []);
    });
  }

  it("blobs (R2): an already aborted signal refuses put, get, delete and list before anything changes", async () => {
    const stub = env.STORES.get(env.STORES.idFromName("blobs-abort"));
    ok(await stub.blobPut("app", "kept", text("kept")));
    await runInDurableObject(stub, async (instance) => {
      const store = await (instance as unknown as { open(name: string): Promise<Store> }).open("app");
      const controller = new AbortController();
      const reason = new Error("stop");
      controller.abort(reason);
      const options = { signal: controller.signal };
      await expect(store.blobs.put("new", text("new"), options)).rejects.toBe(reason);
      await expect(store.blobs.get("kept", options)).rejects.toBe(reason);
      await expect(store.blobs.delete("kept", options)).rejects.toBe(reason);
      await expect(store.blobs.list("", options)).rejects.toBe(reason);
      expect(await store.blobs.list("")).toEqual(["kept"]);
    });
  });

  it("leases: held, fenced writes, release", async () => {
    const stub = stores("leases");
    const grant = ok(await stub.leaseAcquire("app", "jobs/nightly"));
    expect(grant).toMatchObject({ name: "jobs/nightly", epoch: 1 });
    expect(failed(await stub.leaseAcquire("app", "jobs/nightly"))).toMatchObject({ code: "lease_held", fields: { holderEpoch: 1 } });
    ok(await stub.leaseAssertHeld("app", "jobs/nightly", 1));
    ok(await stub.kvPut("app", "state", 0, text("x"), { lease: "jobs/nightly", epoch: 1 }));

    ok(await stub.leaseRelease("app", "jobs/nightly", 1));
    ok(await stub.leaseRelease("app", "jobs/nightly", 1));
    expect(failed(await stub.leaseAssertHeld("app", "jobs/nightly", 1))).toMatchObject({ code: "lease_lost" });
    expect(failed(await stub.ledgerAppend("app", "log", 0, text("y"), { lease: "jobs/nightly", epoch: 1 }))).toMatchObject({ code: "lease_lost" });
    expect(ok(await stub.leaseAcquire("app", "jobs/nightly")).epoch).toBe(2);
    ok(await stub.leaseRelease("app", "jobs/nightly", 2));
  });

  it("leases: renewed while the holder heartbeats, released once it falls silent", async () => {
    // STORES_SQL leases live 1 s (test/workers/worker.ts).
    const stub = env.STORES_SQL.get(env.STORES_SQL.idFromName("leases"));
    const grant = ok(await stub.leaseAcquire("app", "jobs/hourly"));
    expect(grant.ttlMs).toBe(1_000);
    for (let i = 0; i < 5; i++) {
      await sleep(400);
      ok(await stub.leaseAssertHeld("app", "jobs/hourly", grant.epoch));
    }
    expect(failed(await stub.leaseAcquire("app", "jobs/hourly"))).toMatchObject({ code: "lease_held" });
    await sleep(1_300);
    expect(failed(await stub.leaseAssertHeld("app", "jobs/hourly", grant.epoch))).toMatchObject({ code: "lease_lost" });
    const next = ok(await stub.leaseAcquire("app", "jobs/hourly"));
    expect(next.epoch).toBe(grant.epoch + 1);
    ok(await stub.leaseRelease("app", "jobs/hourly", next.epoch));
  });

  /**
   * A grant made by an instance since gone (evicted, redeployed): written here by a leaser of its own
   * over the object's storage, whose timers never run, so nothing but the live instance can renew it.
   */
  async function grantOfAGoneInstance(stub: DurableObjectStub, name: string, ttlMs: number): Promise<number> {
    return runInDurableObject(stub, async (_instance, state) => {
      const never = { setTimeout: () => 0, clearTimeout: () => undefined };
      const leaser = createLeaser(durableObjectEngine(state.storage), { store: "app", ttlMs, scheduler: never });
      return (await leaser.acquire(name)).epoch;
    });
  }

  it("leases: a release that reaches an instance which never held the grant frees it by its row", async () => {
    const stub = stores("leases-gone");
    const epoch = await grantOfAGoneInstance(stub, "jobs/gone", 30_000);
    expect(failed(await stub.leaseAcquire("app", "jobs/gone"))).toMatchObject({ code: "lease_held", fields: { holderEpoch: epoch } });
    ok(await stub.leaseRelease("app", "jobs/gone", epoch));
    expect(failed(await stub.kvPut("app", "state", 0, text("x"), { lease: "jobs/gone", epoch }))).toMatchObject({ code: "lease_lost" });
    expect(ok(await stub.leaseAcquire("app", "jobs/gone")).epoch).toBe(epoch + 1);
    ok(await stub.leaseRelease("app", "jobs/gone", epoch)); // the old epoch again: the later holder keeps its grant
    expect(failed(await stub.leaseAcquire("app", "jobs/gone"))).toMatchObject({ code: "lease_held", fields: { holderEpoch: epoch + 1 } });
  });

  it("leases: a heartbeat that reaches an instance which never held the grant adopts it, renewed from then on", async () => {
    // STORES_SQL leases live 1 s: without the adoption the grant runs out between the heartbeats below.
    const stub = env.STORES_SQL.get(env.STORES_SQL.idFromName("leases-adopted"));
    const epoch = await grantOfAGoneInstance(stub, "jobs/adopted", 1_000);
    for (let i = 0; i < 5; i++) {
      ok(await stub.leaseAssertHeld("app", "jobs/adopted", epoch));
      await sleep(400);
    }
    ok(await stub.kvPut("app", "state", 0, text("x"), { lease: "jobs/adopted", epoch }));
    expect(failed(await stub.leaseAcquire("app", "jobs/adopted"))).toMatchObject({ code: "lease_held" });
    ok(await stub.leaseRelease("app", "jobs/adopted", epoch));
    expect(ok(await stub.leaseAcquire("app", "jobs/adopted")).epoch).toBe(epoch + 1);
  });

  it("one object hosts one store: another name is refused", async () => {
    const stub = stores("bound");
    ok(await stub.kvPut("first", "k", 0, bytes(1)));
    expect(failed(await stub.kvGet("second", "k"))).toMatchObject({ code: "invalid_argument", fields: { argument: "store" } });
    expect(ok(await stub.kvGet("first", "k")).value).toEqual(bytes(1));
    expect(failed(await stores("bad-name").kvGet("Bad Store", "k"))).toMatchObject({ code: "invalid_name" });
  });
});
