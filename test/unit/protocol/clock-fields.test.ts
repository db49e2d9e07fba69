import { describe, expect, test } from "bun:test";
import { decodeAgentMessage, decodeHubMessage } from "../../../src/protocol/index.ts";

const hello = {
  type: "hello",
  protocolVersion: 1,
  nodeName: "dev1",
  agentVersion: "1",
  streamId: "s1",
};

describe("the clock fields of hello and hb (docs/protocol.md, Clock skew)", () => {
  test.each([
    ["hb with clock and rttMs", { type: "hb", clock: 1_700_000_000_000, rttMs: 12 }],
    ["hb at the epoch (a board without a real-time clock)", { type: "hb", clock: 0 }],
    ["hb with neither (an older agent)", { type: "hb" }],
    ["hello with clock", { ...hello, clock: 86_400_000 }],
  ])("decodeAgentMessage() takes %s", (_name, message) => {
    const r = decodeAgentMessage(JSON.stringify(message));
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.message).toEqual(message as never);
  });

  test.each([
    ["a negative clock", { type: "hb", clock: -1 }],
    ["a clock in text", { type: "hb", clock: "2026-01-01" }],
    ["a fractional clock", { ...hello, clock: 1.5 }],
    ["a round trip over an hour", { type: "hb", rttMs: 3_600_001 }],
  ])("decodeAgentMessage() refuses %s as malformed", (_name, message) => {
    const r = decodeAgentMessage(JSON.stringify(message));
    expect(r.ok ? "ok" : r.code).toBe("malformed");
  });

  test("the hub's hb answer without the fields still decodes on the agent", () => {
    expect(decodeHubMessage('{"type":"hb"}')).toEqual({ ok: true, message: { type: "hb" } });
  });
});
