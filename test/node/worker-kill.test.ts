/**
 * End to end: the real worker (`wrangler dev`, local Durable Object storage)
 * killed with SIGKILL in the middle of a stream of appends, then restarted on
 * the same storage.
 *
 * Several ordering keys append concurrently through `HttpJournal` from Node,
 * each key sequentially (the next append of a key starts once the previous
 * one resolved), with retries off so a failure is seen as it happened. Once
 * enough appends resolved, the wrangler process group gets SIGKILL (the
 * appends in flight then fail); the worker is started again with the same
 * `--persist-to` directory, and each key appends a few more events. Then a
 * fresh consumer claims (and acks) everything, and:
 * - every append that resolved (a 2xx) is there exactly once;
 * - an append that failed is there at most once;
 * - per key, the claim order is the order in which the appends resolved,
 *   with a failed append, when it is there, in the place it was sent.
 *
 * The default journals of wrangler.toml apply: `usage` with 4 partitions.
 */
import { existsSync, rmSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { build } from "vite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevWorker, type DevWorker } from "../../scripts/dev-worker.mjs";
import { HttpJournal } from "../../src/http/index.js";
import { BILLING_GRADE, createUsageEvent, newRequestId, parseConsumerId, type UsageEvent } from "../../src/index.js";

const webRoot = fileURLToPath(new URL("../../web/", import.meta.url));
const TOKEN = "worker-kill-test-token-0123456789";
const TOKENS = [{ name: "kill-test", token: TOKEN, scopes: ["append:*", "consume", "operate"] }];
const KEYS = 8;
/** Appends resolved before the kill (across keys). */
const RESOLVED_BEFORE_KILL = 160;
/** Appends per key after the restart. */
const AFTER_RESTART = 5;

function client(worker: DevWorker): HttpJournal {
  return new HttpJournal({ baseUrl: worker.url, journal: "usage", token: TOKEN, capacity: BILLING_GRADE, mode: "billing_grade", retry: { attempts: 1 } });
}

interface KeyLog {
  readonly subject: string;
  /** Request ids in the order their appends resolved (sequential per key, so also the order sent). */
  readonly resolved: string[];
  /** Request ids whose append failed, and how many appends of the key had resolved before each was sent. */
  readonly failed: { readonly id: string; readonly after: number }[];
}

function eventFor(log: KeyLog, n: number): UsageEvent {
  return createUsageEvent({ record: { requestId: newRequestId(), namespace: "kill", subject: log.subject, data: { n } }, observedAt: Date.now() });
}

describe("worker killed with SIGKILL mid-stream, restarted on the same storage", () => {
  const workers: DevWorker[] = [];
  let persistTo = "";

  beforeAll(async () => {
    // `npm test` builds web/dist first; the root wrangler.toml serves it as assets.
    if (!existsSync(new URL("dist/index.html", `file://${webRoot}`))) await build({ configFile: `${webRoot}vite.config.ts`, logLevel: "warn" });
  }, 120_000);

  afterAll(async () => {
    for (const worker of workers) await worker.stop("SIGKILL");
    if (persistTo !== "") rmSync(persistTo, { recursive: true, force: true });
  });

  it(
    "keeps every resolved append exactly once and in per-key order",
    async () => {
      const t0 = Date.now();
      const first = await startDevWorker({ tokens: TOKENS });
      workers.push(first);
      persistTo = first.persistTo;
      const startedMs = Date.now() - t0;
      const before = client(first);

      const logs: KeyLog[] = Array.from({ length: KEYS }, (_, k) => ({ subject: `key-${k}`, resolved: [], failed: [] }));
      let resolvedTotal = 0;
      let enough: () => void = () => {};
      const enoughResolved = new Promise<void>((resolve) => (enough = resolve));
      // Each key appends until its first failure (the kill); a failed append is not retried.
      const streams = logs.map(async (log) => {
        for (let n = 0; ; n++) {
          const event = eventFor(log, n);
          let status: string;
          try {
            status = (await before.append(event)).status;
          } catch {
            log.failed.push({ id: event.id, after: log.resolved.length });
            return;
          }
          expect(status).toBe("accepted");
          log.resolved.push(event.id);
          if (++resolvedTotal === RESOLVED_BEFORE_KILL) enough();
        }
      });
      await enoughResolved;
      const killAt = Date.now();
      await first.stop("SIGKILL");
      await Promise.all(streams);
      const killedMs = Date.now() - killAt;
      const resolvedBeforeKill = logs.reduce((sum, log) => sum + log.resolved.length, 0);
      const failedAtKill = logs.reduce((sum, log) => sum + log.failed.length, 0);
      expect(resolvedBeforeKill).toBeGreaterThanOrEqual(RESOLVED_BEFORE_KILL);
      // The kill hit the stream in the middle: every key had an append in flight, and it failed.
      expect(failedAtKill).toBe(KEYS);

      const t1 = Date.now();
      const second = await startDevWorker({ tokens: TOKENS, persistTo });
      workers.push(second);
      const restartedMs = Date.now() - t1;
      const after = client(second);
      await Promise.all(
        logs.map(async (log) => {
          for (let n = 0; n < AFTER_RESTART; n++) {
            const event = eventFor(log, 1_000_000 + n);
            await after.append(event);
            log.resolved.push(event.id);
          }
        }),
      );

      // A consumer that never claimed before sees the whole journal; drain it, noting per-key order.
      const consumer = parseConsumerId(`kill-check-${Date.now().toString(36)}`);
      const claimedByKey = new Map<string, string[]>();
      const counts = new Map<string, number>();
      let rounds = 0;
      for (;;) {
        const deliveries = await after.claim(consumer, { maxEvents: 1000, leaseMs: 60_000, now: Date.now() });
        if (deliveries.length === 0) break;
        rounds += 1;
        for (const delivery of deliveries) {
          const key = delivery.event.orderingKey.subject;
          const list = claimedByKey.get(key) ?? [];
          list.push(delivery.event.id);
          claimedByKey.set(key, list);
          counts.set(delivery.event.id, (counts.get(delivery.event.id) ?? 0) + 1);
        }
        const acked = await after.ackBatch(deliveries.map((delivery) => delivery.id));
        expect(acked.every((result) => result.ok)).toBe(true);
      }

      let failedPresent = 0;
      for (const log of logs) {
        const claimed = claimedByKey.get(log.subject) ?? [];
        for (const id of log.resolved) expect(counts.get(id), `resolved append ${id} of ${log.subject}`).toBe(1);
        for (const failure of log.failed) expect(counts.get(failure.id) ?? 0).toBeLessThanOrEqual(1);
        // Expected order: the resolved appends, with each failed one that is present where it was sent.
        const expected = [...log.resolved];
        for (const failure of [...log.failed].reverse()) if (counts.has(failure.id)) expected.splice(failure.after, 0, failure.id);
        failedPresent += log.failed.filter((failure) => counts.has(failure.id)).length;
        expect(claimed, `claim order of ${log.subject}`).toEqual(expected);
      }
      // Nothing else is in the journal (fresh storage; only this test's events).
      expect([...claimedByKey.keys()].sort()).toEqual(logs.map((log) => log.subject).sort());

      const total = logs.reduce((sum, log) => sum + log.resolved.length, 0);
      console.log(
        `worker kill: started in ${startedMs} ms; ${resolvedBeforeKill} appends resolved over ${KEYS} keys in ${killAt - t0 - startedMs} ms, then SIGKILL ` +
          `(${failedAtKill} in flight failed, ${killedMs} ms to fail them all); restarted in ${restartedMs} ms; ${KEYS * AFTER_RESTART} more appends; ` +
          `drained ${total + failedPresent} events in ${rounds} claim rounds (${failedPresent} of the ${failedAtKill} failed appends were journaled); total ${Date.now() - t0} ms`,
      );
    },
    180_000,
  );
});
