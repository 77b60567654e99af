/**
 * The append routes of `createApp` refuse, inside workerd, an integer literal
 * in an event's `data` that a double cannot hold exactly (a Go or Rust `u64`
 * counter): it would be journaled as another number. Here the check reads
 * each literal's source text (`context.source` of a `JSON.parse` reviver),
 * which workerd gives; where it is missing (Node 20) it scans the text instead
 * (`src/worker/exact-json.ts`, test/node/worker-exact-integers.test.ts).
 * What `JSON.stringify` writes (2^60 as `1152921504606847000`) is accepted;
 * an integer literal written otherwise beyond 2^53 - 1 is not, even one a
 * double holds exactly (`1152921504606846976`, 2^60 in full): it would be
 * delivered as `1152921504606847000`, another integer to a `u64` consumer.
 */
import { describe, expect, it } from "vitest";
import { deepEventBesideARoundedLiteral } from "../shared/exact-integers.js";
import { memoryEngine } from "../../adapters/memory/index.js";
import { createJournal, parseConsumerId } from "../../src/index.js";
import { createApp } from "../../src/worker/index.js";
import { roundedDataByScan, roundedDataBySource, SOURCE_TEXT_ACCESS, type RoundedData } from "../../src/worker/exact-json.js";

const TOKEN = "exact-integers-token-0123456";
const t0 = 1_700_000_000_000;
const rid = (n: number) => `0190b000-0000-7000-8000-${n.toString(16).padStart(12, "0")}`;

function setup() {
  const journal = createJournal(memoryEngine(), { name: "usage" });
  const app = createApp({ journals: { usage: journal }, auth: { tokens: [{ name: "ops", token: TOKEN, scopes: ["append:*", "consume"] }] } });
  const post = async (path: string, body: string) => {
    const response = await app.fetch(
      new Request(`http://isostore.test/v1/journals/usage/${path}`, { method: "POST", headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" }, body }),
    );
    type Answer = { result?: { status: string }; results?: { status: string; error?: { code: string; fields: Record<string, unknown>; message: string } }[]; error?: { code: string; message: string; fields: Record<string, unknown> } };
    return { status: response.status, json: await response.json<Answer>() };
  };
  return { journal, post };
}

/** An event's JSON with `data` written as given (the literal's text kept). */
const eventText = (n: number, data: string) => `{"record":{"requestId":"${rid(n)}","namespace":"acme","subject":"s-${n}","data":${data}},"observedAt":${t0}}`;

describe("integer literals a double cannot hold, in event data (workerd)", () => {
  it("the platform gives a reviver the source text", () => {
    expect(SOURCE_TEXT_ACCESS).toBe(true);
  });

  it("the scan used where there is no source text answers as the source text does", () => {
    const holders = (found: RoundedData | null, pick: (body: unknown) => readonly object[]) => (found === null ? null : pick(found.body).map((holder) => found.holders.get(holder)));
    const records = (body: unknown) => (body as { events: { record: object }[] }).events.map((event) => event.record);
    // An integer key is revived first; a duplicate key's earlier value is gone; an escaped key is its value.
    const cases: [string, (string | undefined)[]][] = [
      [`{"events":[${eventText(1, '{"a":1}')},${eventText(2, '{"b":18446744073709551615,"0":9007199254740993}')},${eventText(3, '"18446744073709551615"')}]}`, [undefined, "9007199254740993", undefined]],
      [`{"events":[${eventText(1, '{"a":[18446744073709551615],"a":[1]}')},${eventText(2, "1152921504606847000")},${eventText(4, "[1152921504606846976]")}]}`, [undefined, undefined, "1152921504606846976"]],
      [`{"events":[{"record":{"\\u0064ata":-18446744073709551615,"data":1,"data":100000000000000000000000}}]}`, ["100000000000000000000000"]],
    ];
    for (const [text, expected] of cases) {
      expect(holders(roundedDataBySource(text), records), text).toEqual(expected);
      expect(holders(roundedDataByScan(text), records), text).toEqual(expected);
    }
  });

  it("append refuses a rounded literal as invalid_event (rule data) and journals nothing; JSON.stringify's numbers pass", async () => {
    const { journal, post } = setup();
    for (const data of ['{"bytes":9007199254740993}', '{"id":[1,{"x":18446744073709551615}]}', "-18446744073709551615", '{"n":100000000000000000000000}']) {
      const refused = await post("append", `{"event":${eventText(1, data)}}`);
      expect(refused.status, data).toBe(400);
      expect(refused.json.error?.code).toBe("invalid_event");
      expect(refused.json.error?.fields).toMatchObject({ requestId: rid(1), rule: "data" });
      expect(refused.json.error?.message).toMatch(/as strings/);
    }
    expect((await journal.stats(parseConsumerId("billing"))).pending).toBe(0);
    // What JSON.stringify writes is always taken: unsafe but exact (2^60), a safe integer, a fraction, an exponent.
    const sent = { big: 2 ** 60, max: Number.MAX_SAFE_INTEGER, huge: 1e300, fraction: 9007199254740993.5, sixteen: 1234567890123456 };
    const accepted = await post("append", JSON.stringify({ event: { record: { requestId: rid(2), namespace: "acme", subject: "s", data: sent }, observedAt: t0 } }));
    expect(accepted.status).toBe(200);
    expect(accepted.json.result?.status).toBe("accepted");
    // The rounded number is no longer the "same fact" as another literal: the first was never journaled.
    const other = await post("append", `{"event":${eventText(1, '{"bytes":9007199254740992}')}}`);
    expect(other.json.result?.status).toBe("accepted");
    expect((await post("append", `{"event":${eventText(1, '{"bytes":9007199254740993}')}}`)).json.error?.code).toBe("invalid_event");
  });

  it("append-batch with an event nested 100,000 deep (refused for its depth) rejects it in place beside a rounded literal, and appends the others", async () => {
    await deepEventBesideARoundedLiteral({ ...setup(), eventText, rid });
  });

  it("append-batch rejects such an event in place and appends the others", async () => {
    const { journal, post } = setup();
    const events = [eventText(1, '{"a":1}'), eventText(2, '{"id":18446744073709551615}'), eventText(3, "1152921504606847000"), eventText(4, "[1152921504606846976]")];
    const answer = await post("append-batch", `{"events":[${events.join(",")}]}`);
    expect(answer.status).toBe(200);
    expect(answer.json.results?.map((result) => result.status)).toEqual(["accepted", "rejected", "accepted", "rejected"]);
    for (const [index, n] of [[1, 2], [3, 4]] as const) {
      expect(answer.json.results?.[index]?.error).toMatchObject({ code: "invalid_event", fields: { requestId: rid(n), rule: "data" } });
    }
    const claimed = await journal.claim(parseConsumerId("billing"), { maxEvents: 10, leaseMs: 1000, now: t0 });
    expect(claimed.map((delivery) => delivery.event.id).sort()).toEqual([rid(1), rid(3)]);
  });
});
