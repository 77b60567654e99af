/// <reference lib="dom" />
import { IndexedDbEngine, platformFromGlobals } from "../../adapters/indexeddb/indexeddb-engine.js";
import { createJournal, createUsageEvent, newRequestId, parseConsumerId } from "../../src/index.js";
const capacity = { maxEvents: 10_000_000, maxDeliveryAttempts: 8, retainAcknowledgedMs: 86_400_000, policy: "refuse" } as const;
let n = 0;
function ev(i: number) { return createUsageEvent({ record: { requestId: newRequestId(), namespace: "acme", subject: `user-${i % 100}`, data: { tokens: i } }, observedAt: 1_700_000_000_000 + n++ }); }
function median(v: number[]) { const s = [...v].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]!; }
async function probe() {
  const out: string[] = [];
  for (const [maxRows, maxBytes] of [[128, 16384], [64, 8192], [32, 4096], [128, 16384]] as const) {
    const engine = new IndexedDbEngine({ name: `p-${Math.random()}`, durability: "strict", platform: platformFromGlobals, pageLimits: { maxRows, maxBytes } });
    const journal = createJournal(engine, { name: "bench", capacity });
    const consumer = parseConsumerId("billing");
    await journal.claim(consumer, { maxEvents: 1, leaseMs: 1, now: Date.now() });
    for (let i = 0; i < 100; i++) await journal.append(ev(i));
    const s: number[] = [];
    for (let i = 0; i < 200; i++) { const t = performance.now(); await journal.append(ev(i)); s.push(performance.now() - t); }
    const g: number[] = [];
    for (let i = 0; i < 50; i++) { const t = performance.now(); await engine.transact("readwrite", (tx) => tx.get(["x"])); g.push(performance.now() - t); }
    const p1: number[] = [];
    for (let i = 0; i < 50; i++) { const t = performance.now(); await engine.transact("readwrite", async (tx) => { tx.put(["x", i], i); }); p1.push(performance.now() - t); }
    let t = performance.now();
    for (let c = 0; c < 3; c++) { const b = await journal.claim(consumer, { maxEvents: 100, leaseMs: 60_000, now: Date.now() }); await journal.ackBatch(b.map((d) => d.id)); }
    const ca = (performance.now() - t) / 3;
    out.push(`rows ${maxRows} bytes ${maxBytes}: append median ${median(s).toFixed(2)} ms; rw tx with a get ${median(g).toFixed(2)}; rw tx 1 put ${median(p1).toFixed(2)}; claim+ack ${ca.toFixed(1)}`);
    await engine.close();
  }
  return out.join("\n");
}
(globalThis as { probe?: unknown }).probe = probe;
