/**
 * The Durable Objects engine's value codec (adapters/durable-objects/value-codec.ts),
 * beside the engine conformance values case that runs in workerd: -0 and an
 * own `__proto__` key survive, and rows written by the tagging before `-0` had
 * a tag (`t = 1`) read as they were written.
 */
import { describe, expect, it } from "vitest";
import { decodeValue, encodeValue } from "../../adapters/durable-objects/value-codec.js";

const roundTrip = (value: unknown): unknown => {
  const stored = encodeValue(value);
  return decodeValue(stored.text, stored.tagged);
};

describe("Durable Objects value codec", () => {
  it("keeps -0, alone and nested, and plain JSON stays untagged", () => {
    expect(Object.is(roundTrip(-0), -0)).toBe(true);
    const nested = roundTrip({ n: -0, list: [-0, 0], bytes: new Uint8Array([1]) }) as { n: number; list: number[]; bytes: Uint8Array };
    expect([Object.is(nested.n, -0), Object.is(nested.list[0], -0), Object.is(nested.list[1], 0)]).toEqual([true, true, true]);
    expect(nested.bytes).toEqual(new Uint8Array([1]));
    expect(encodeValue({ n: 0, s: "x" })).toEqual({ text: '{"n":0,"s":"x"}', tagged: 0 });
  });

  it("keeps an own __proto__ key as a key, with bytes beside it and without", () => {
    for (const value of [{ ["__proto__"]: { a: 1 }, bytes: new Uint8Array([7]) }, { ["__proto__"]: "plain" }]) {
      const back = roundTrip(value) as object;
      expect(Object.keys(back)).toEqual(Object.keys(value));
      expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
      expect(Object.getOwnPropertyDescriptor(back, "__proto__")?.value).toEqual(Object.getOwnPropertyDescriptor(value, "__proto__")?.value);
    }
  });

  it("keeps user objects that look like tags, and reads rows of the older tagging (t = 1) with $z as a plain key", () => {
    const lookalikes = { $u8: "not bytes", $z: 0, $o: { $z: 1 }, bytes: new Uint8Array([2]) };
    expect(roundTrip(lookalikes)).toEqual(lookalikes);
    expect(roundTrip({ $z: 0 })).toEqual({ $z: 0 });
    // Written by the older codec: a Uint8Array beside a user object {"$z": 0}, which it did not wrap.
    expect(decodeValue('{"bytes":{"$u8":"Aw=="},"user":{"$z":0}}', 1)).toEqual({ bytes: new Uint8Array([3]), user: { $z: 0 } });
  });
});
