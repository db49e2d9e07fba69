import { describe, expect, test } from "bun:test";
import { type BusMessage, createLocalBus } from "../../../src/hub/bus.ts";
import { decodeBusMessage, encodeBusMessage } from "../../../src/hub/bus-codec.ts";

describe("createLocalBus()", () => {
  test("delivers each message at once to the subscribers of its type, in order", () => {
    const bus = createLocalBus();
    const desired: string[] = [];
    const changes: number[] = [];
    bus.subscribe("desired", (m) => desired.push(m.node));
    bus.subscribe("changes", (m) => changes.push(m.rv));
    bus.publish({ type: "desired", node: "a" });
    expect(desired).toEqual(["a"]);
    bus.publish({ type: "changes", rv: 1 });
    bus.publish({ type: "desired", node: "b" });
    bus.publish({ type: "changes", rv: 2 });
    expect(desired).toEqual(["a", "b"]);
    expect(changes).toEqual([1, 2]);
  });

  test("stops delivering to a subscriber that unsubscribed, and never reports a gap", async () => {
    const bus = createLocalBus();
    const seen: BusMessage[] = [];
    let gaps = 0;
    bus.onGap(() => gaps++);
    const off = bus.subscribe("taken", (m) => seen.push(m));
    bus.publish({ type: "taken", node: "a", replica: "hub-a", epoch: 1 });
    off();
    bus.publish({ type: "taken", node: "a", replica: "hub-b", epoch: 2 });
    await bus.close();
    expect(seen).toEqual([{ type: "taken", node: "a", replica: "hub-a", epoch: 1 }]);
    expect(gaps).toBe(0);
  });

  test("lets what a subscriber throws reach the publisher, as before", () => {
    const bus = createLocalBus();
    bus.subscribe("desired", () => {
      throw new Error("boom");
    });
    expect(() => bus.publish({ type: "desired", node: "a" })).toThrow("boom");
  });
});

describe("bus messages on NATS (bus-codec)", () => {
  const messages: [BusMessage, string, string][] = [
    [{ type: "changes", rv: 42 }, "fleet.changes", '{"rv":42}'],
    [
      { type: "changes", rv: 43, origin: "0b7e-a1" },
      "fleet.changes",
      '{"rv":43,"origin":"0b7e-a1"}',
    ],
    [{ type: "desired", node: "cam-1" }, "fleet.node.cam-1.desired", "{}"],
    [{ type: "desired", node: "cam.site-2.x" }, "fleet.node.cam.site-2.x.desired", "{}"],
    [
      { type: "taken", node: "cam.1", replica: "hub-a", epoch: 7 },
      "fleet.node.cam.1.taken",
      '{"replica":"hub-a","epoch":7}',
    ],
  ];
  test.each(messages)("encodes %o on its subject and decodes it back", (m, subject, body) => {
    expect(encodeBusMessage(m)).toEqual({ ok: true, subject, body });
    expect(decodeBusMessage(subject, body)).toEqual({ ok: true, message: m });
  });

  test("refuses to send for a node whose name is not a DNS-1123 subdomain", () => {
    for (const node of ["", "a.*", "a b", "A", "a..b", ">"]) {
      const e = encodeBusMessage({ type: "desired", node });
      expect(e.ok).toBe(false);
      if (!e.ok) expect(e.reason).toContain("invalid node name");
    }
  });

  test("drops unknown fields of a newer replica's body", () => {
    expect(decodeBusMessage("fleet.changes", '{"rv":3,"from":"hub-c"}')).toEqual({
      ok: true,
      message: { type: "changes", rv: 3 },
    });
  });

  const malformed: [string, string, string, string][] = [
    ["a body that is not JSON", "fleet.changes", "not json", "body is not JSON"],
    ["a body that is not an object", "fleet.changes", "[]", "expected object"],
    ["a negative rv", "fleet.changes", '{"rv":-1}', "rv"],
    ["a fractional rv", "fleet.changes", '{"rv":1.5}', "rv"],
    ["an rv in a string", "fleet.changes", '{"rv":"7"}', "rv"],
    ["an empty origin", "fleet.changes", '{"rv":7,"origin":""}', "origin"],
    ["a body over 4 KiB", "fleet.changes", `{"rv":1,"p":"${"x".repeat(5000)}"}`, "over the limit"],
    ["a desired of null", "fleet.node.a.desired", "null", "expected object"],
    ["a taken without epoch", "fleet.node.a.taken", '{"replica":"hub-a"}', "epoch"],
    ["a taken of no replica", "fleet.node.a.taken", '{"replica":"","epoch":1}', "replica"],
    ["a node name that is not DNS-1123", "fleet.node.A_B.desired", "{}", "invalid node name"],
    ["a subject without node", "fleet.node.desired", "{}", "invalid node name"],
  ];
  test.each(malformed)("refuses %s, saying why", (_, subject, body, why) => {
    const d = decodeBusMessage(subject, body);
    expect(d.ok).toBe(false);
    if (!d.ok && d.ignore !== true) expect(d.reason).toContain(why);
    else throw new Error("refused quietly, without a reason");
  });

  test("leaves other subjects under fleet.node alone, quietly", () => {
    expect(decodeBusMessage("fleet.node.a.stream", "{}")).toEqual({ ok: false, ignore: true });
    expect(decodeBusMessage("fleet.other", "{}")).toEqual({ ok: false, ignore: true });
  });
});
