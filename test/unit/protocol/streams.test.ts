import { describe, expect, test } from "bun:test";
import { decodeAgentStreamMessage, decodeHubStreamMessage } from "../../../src/protocol/streams.ts";

describe("stream message decoding", () => {
  test("a type that is not a string is refused by name, even one whose toString is not a function", () => {
    // Found by the property campaign (scripts/fuzz 100 169520612): String() of such a value threw.
    const value = JSON.parse('{"type":{"toString":0},"id":3}') as Record<string, unknown>;
    for (const decode of [decodeHubStreamMessage, decodeAgentStreamMessage]) {
      const d = decode(value);
      expect(d.ok).toBe(false);
      expect(d.ok === false && d.reason).toStartWith("bad stream message: ");
      expect(d.ok === false && d.id).toBe(3);
    }
  });
});
