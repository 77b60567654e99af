/**
 * The append routes of `createApp`, run on Node, refuse an integer literal in
 * an event's `data` that a double cannot hold exactly (a Go or Rust `u64`
 * counter), as they do in workerd (test/workers/worker-exact-integers.test.ts):
 * where `JSON.parse` gives a reviver no source text (Node 20) the check scans
 * the text for the literals (`src/worker/exact-json.ts`), so the app does not
 * journal another number than the one sent. What `JSON.stringify` writes (2^60
 * as `1152921504606847000`) is accepted.
 */
import { describe, expect, it } from "vitest";
import { deepEventBesideARoundedLiteral } from "../shared/exact-integers.js";
import { memoryEngine } from "../../adapters/memory/index.js";
import { createJournal, parseConsumerId } from "../../src/index.js";
import { createApp } from "../../src/worker/index.js";

const TOKEN = "exact-integers-token-0123456";
const U64 = "18446744073709551615";
const t0 = 1_700_000_000_000;
const rid = (n: number) => `0190b000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`;
const billing = parseConsumerId("billing");

type Failure = { code: string; message: string; fields: Record<string, unknown> };
type Answer = { result?: { status: string }; results?: { status: string; error?: Failure }[]; error?: Failure };

function setup() {
  const journal = createJournal(memoryEngine(), { name: "usage" });
  const app = createApp({ journals: { usage: journal }, auth: { tokens: [{ name: "ops", token: TOKEN, scopes: ["append:*", "consume"] }] } });
  const post = async (path: string, body: string) => {
    const response = await app.fetch(
      new Request(`http://isostore.test/v1/journals/usage/${path}`, { method: "POST", headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" }, body }),
    );
    return { status: response.status, json: JSON.parse(await response.text()) as Answer };
  };
  return { journal, post };
}

/** An event's JSON with `data` written as given (the literal's text kept, as a Go producer writes it). */
const eventText = (n: number, data: string) => `{"record":{"requestId":"${rid(n)}","namespace":"acme","subject":"s-${n}","data":${data}},"observedAt":${t0}}`;

describe("integer literals a double cannot hold, in event data (Node)", () => {
  it("append refuses a u64 literal as invalid_event (rule data) and journals nothing", async () => {
    const { journal, post } = setup();
    for (const data of [U64, `{"id":${U64}}`, `{"id":[1,{"x":${U64}}]}`, `-${U64}`, '{"bytes":9007199254740993}', '{"n":100000000000000000000000}', "[1152921504606846976]"]) {
      const refused = await post("append", `{"event":${eventText(1, data)}}`);
      expect(refused.status, data).toBe(400);
      expect(refused.json.error?.code, data).toBe("invalid_event");
      expect(refused.json.error?.fields, data).toMatchObject({ requestId: rid(1), rule: "data" });
      expect(refused.json.error?.message, data).toMatch(/as strings/);
    }
    expect((await journal.stats(billing)).pending).toBe(0);
  });

  it("append takes what JSON.stringify writes (2^60 as 1152921504606847000), and u64 digits in a string", async () => {
    const { journal, post } = setup();
    const accepted = await post("append", `{"event":${eventText(1, "1152921504606847000")}}`);
    expect(accepted.status).toBe(200);
    expect(accepted.json.result?.status).toBe("accepted");
    const sent = { big: 2 ** 60, max: Number.MAX_SAFE_INTEGER, huge: 1e300, fraction: 9007199254740993.5, text: U64, [U64]: 1 };
    const stringified = await post("append", JSON.stringify({ event: { record: { requestId: rid(2), namespace: "acme", subject: "s", data: sent }, observedAt: t0 } }));
    expect(stringified.status).toBe(200);
    expect(stringified.json.result?.status).toBe("accepted");
    const claimed = await journal.claim(billing, { maxEvents: 10, leaseMs: 1000, now: t0 });
    expect(claimed.map((delivery) => delivery.event.record.data)).toEqual([2 ** 60, sent]);
  });

  it("append-batch with an event nested 100,000 deep (refused for its depth) rejects it in place beside a rounded literal, and appends the others", async () => {
    await deepEventBesideARoundedLiteral({ ...setup(), eventText, rid });
  });

  it("append-batch rejects such an event in place and appends the others", async () => {
    const { journal, post } = setup();
    const events = [eventText(1, '{"a":1}'), eventText(2, `{"id":${U64}}`), eventText(3, "1152921504606847000"), eventText(4, "[1152921504606846976]"), eventText(5, `"${U64}"`)];
    const answer = await post("append-batch", `{"events":[${events.join(",")}]}`);
    expect(answer.status).toBe(200);
    expect(answer.json.results?.map((result) => result.status)).toEqual(["accepted", "rejected", "accepted", "rejected", "accepted"]);
    for (const [index, n] of [[1, 2], [3, 4]] as const) {
      expect(answer.json.results?.[index]?.error).toMatchObject({ code: "invalid_event", fields: { requestId: rid(n), rule: "data" } });
    }
    const claimed = await journal.claim(billing, { maxEvents: 10, leaseMs: 1000, now: t0 });
    expect(claimed.map((delivery) => delivery.event.id).sort()).toEqual([rid(1), rid(3), rid(5)]);
  });
});
