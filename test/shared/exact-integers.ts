/**
 * A case of the append routes' rounded-integer check that runs in both test
 * projects (test/node and test/workers), whose platforms parse JSON
 * differently: an `append-batch` with an event nested 100,000 deep (refused
 * for its depth) beside one holding a rounded literal. V8 revives
 * recursively, so checking this text with a reviver overflowed the stack in
 * workerd and the whole batch failed with a 500.
 */
import { expect } from "vitest";
import { parseConsumerId, type UsageJournal } from "../../src/index.js";

type Failure = { code: string; fields: Record<string, unknown> };

/** What the case needs of its project's app: a POST to a journal route, the journal behind it, and how events are written. */
export interface ExactIntegersApp {
  readonly journal: UsageJournal;
  readonly post: (path: string, body: string) => Promise<{ status: number; json: { results?: { status: string; error?: Failure }[] } }>;
  readonly eventText: (n: number, data: string) => string;
  readonly rid: (n: number) => string;
}

/** The deep event is rejected in place, the rounded literal's too, and the others are appended. */
export async function deepEventBesideARoundedLiteral({ journal, post, eventText, rid }: ExactIntegersApp): Promise<void> {
  const deep = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;
  const events = [eventText(1, '"1234567890123456"'), eventText(2, deep), eventText(3, `{"id":${"18446744073709551615"}}`), eventText(4, "[1]")];
  const answer = await post("append-batch", `{"events":[${events.join(",")}]}`);
  expect(answer.status).toBe(200);
  expect(answer.json.results?.map((result) => result.status)).toEqual(["accepted", "rejected", "rejected", "accepted"]);
  expect(answer.json.results?.[1]?.error).toMatchObject({ code: "invalid_event", fields: { requestId: rid(2) } });
  expect(answer.json.results?.[2]?.error).toMatchObject({ code: "invalid_event", fields: { requestId: rid(3), rule: "data" } });
  const claimed = await journal.claim(parseConsumerId("billing"), { maxEvents: 10, leaseMs: 1000, now: 1_700_000_000_000 });
  expect(claimed.map((delivery) => delivery.event.id).sort()).toEqual([rid(1), rid(4)]);
}
