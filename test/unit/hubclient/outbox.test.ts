import { afterEach, describe, expect, test } from "bun:test";
import { appendFileSync, mkdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { openOutbox } from "../../../src/agent/hubclient/outbox.ts";
import { createLogger } from "../../../src/util/log.ts";
import { makeEvent, makePod, outboxAt, tempDir } from "./fixtures.ts";

let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
});
function dir(): string {
  const t = tempDir();
  cleanups.push(t.cleanup);
  return t.dir;
}

describe("openOutbox()", () => {
  test("assigns increasing seqs and returns entries in seq order", () => {
    const ob = outboxAt(dir());
    expect(ob.push({ type: "event", event: makeEvent("a") }).seq).toBe(1);
    expect(ob.push({ type: "pod.upsert", uid: "u1", pod: makePod("u1") }).seq).toBe(2);
    expect(ob.entries().map((m) => m.seq)).toEqual([1, 2]);
    expect(ob.nextAfter(1)?.seq).toBe(2);
    expect(ob.nextAfter(2)).toBeUndefined();
  });

  test("coalesces pod changes per uid, the newest winning with a new seq", () => {
    const ob = outboxAt(dir());
    ob.push({ type: "pod.upsert", uid: "u1", pod: makePod("u1", "Pending") });
    ob.push({ type: "pod.upsert", uid: "u2", pod: makePod("u2") });
    ob.push({ type: "pod.upsert", uid: "u1", pod: makePod("u1", "Running") });
    ob.push({ type: "pod.delete", uid: "u2" });
    expect(ob.entries().map((m) => [m.type, m.seq])).toEqual([
      ["pod.upsert", 3],
      ["pod.delete", 4],
    ]);
    expect(ob.reported().has("u1")).toBe(true);
    expect(ob.reported().has("u2")).toBe(false);
  });

  test("keeps one node report and one entry per event name", () => {
    const ob = outboxAt(dir());
    ob.push({ type: "event", event: makeEvent("e1", 1) });
    ob.push({ type: "event", event: makeEvent("e1", 2) });
    expect(ob.eventCount).toBe(1);
    expect(ob.size).toBe(1);
  });

  test("drops the oldest events beyond maxEvents and counts them until taken", () => {
    const ob = outboxAt(dir(), 3);
    ob.push({ type: "pod.upsert", uid: "u1", pod: makePod("u1") });
    for (let i = 0; i < 10; i++) ob.push({ type: "event", event: makeEvent(`e${i}`) });
    expect(ob.eventCount).toBe(3);
    expect(ob.dropped).toBe(7);
    const names = ob.entries().flatMap((m) => (m.type === "event" ? [m.event.metadata.name] : []));
    expect(names).toEqual(["e7", "e8", "e9"]);
    expect(ob.entries()[0]?.type).toBe("pod.upsert");
    expect(ob.takeDropped()).toBe(7);
    expect(ob.takeDropped()).toBe(0);
  });

  test("forgets acknowledged entries", () => {
    const ob = outboxAt(dir());
    for (let i = 0; i < 5; i++) ob.push({ type: "event", event: makeEvent(`e${i}`) });
    ob.ack(3);
    expect(ob.ackedSeq).toBe(3);
    expect(ob.entries().map((m) => m.seq)).toEqual([4, 5]);
    ob.ack(2);
    expect(ob.ackedSeq).toBe(3);
  });

  test("keeps seqs, stream id, entries, acks and the drop count across a restart", () => {
    const d = dir();
    const ob = outboxAt(d, 2);
    for (let i = 0; i < 5; i++) ob.push({ type: "event", event: makeEvent(`e${i}`) });
    ob.push({ type: "pod.upsert", uid: "u1", pod: makePod("u1") });
    ob.ack(4);
    const again = outboxAt(d, 2);
    expect(again.streamId).toBe(ob.streamId);
    expect(again.lastSeq).toBe(6);
    expect(again.ackedSeq).toBe(4);
    expect(again.entries().map((m) => m.seq)).toEqual([5, 6]);
    expect(again.dropped).toBe(3);
    expect(again.reported().has("u1")).toBe(true);
    expect(again.push({ type: "event", event: makeEvent("next") }).seq).toBe(7);
  });

  test("a new outbox file gets a new stream id", () => {
    expect(outboxAt(dir()).streamId).not.toBe(outboxAt(dir()).streamId);
  });

  test("a new stream has a new id and seqs from 1, keeps the waiting events in order and drops the pods, the node and what was reported, across a restart too", () => {
    const d = dir();
    const ob = outboxAt(d);
    ob.push({ type: "pod.upsert", uid: "u1", pod: makePod("u1") });
    ob.push({ type: "event", event: makeEvent("e1") });
    ob.push({ type: "node.patch", status: {} });
    ob.push({ type: "event", event: makeEvent("e2") });
    ob.ack(1);
    const old = ob.streamId;
    ob.newStream();
    const seen = (o: typeof ob) => ({
      stream: o.streamId === old ? "old" : "new",
      entries: o.entries().map((m) => `${m.type} ${m.seq}`),
      lastSeq: o.lastSeq,
      ackedSeq: o.ackedSeq,
      reported: [...o.reported().keys()],
    });
    const expected = {
      stream: "new",
      entries: ["event 1", "event 2"],
      lastSeq: 2,
      ackedSeq: 0,
      reported: [],
    };
    expect(seen(ob)).toEqual(expected);
    expect(seen(outboxAt(d))).toEqual(expected);
  });

  test("skips a torn last line left by a crash", () => {
    const d = dir();
    const ob = outboxAt(d);
    ob.push({ type: "event", event: makeEvent("a") });
    appendFileSync(join(d, "hub", "outbox"), '{"t":"m","m":{"type":"ev');
    const again = outboxAt(d);
    expect(again.entries().map((m) => m.seq)).toEqual([1]);
    expect(again.push({ type: "event", event: makeEvent("b") }).seq).toBe(2);
  });

  test("keeps its file bounded by compacting while events churn", () => {
    const d = dir();
    const ob = outboxAt(d, 10);
    for (let i = 0; i < 5000; i++) {
      ob.push({ type: "event", event: makeEvent(`e${i}`) });
      ob.push({ type: "pod.upsert", uid: "u1", pod: makePod("u1", i % 2 ? "Running" : "Pending") });
    }
    expect(ob.size).toBe(11);
    expect(statSync(join(d, "hub", "outbox")).size).toBeLessThan(200 * 1024);
    const lines = readFileSync(join(d, "hub", "outbox"), "utf8").split("\n").length;
    expect(lines).toBeLessThan(2000);
  });

  test("a file it cannot write (a full disk) is logged once per failure run, and rewritten whole when it can", () => {
    const d = dir();
    const lines: string[] = [];
    const logger = createLogger({ write: (line) => lines.push(line) });
    const path = join(d, "hub", "outbox");
    let now = 0;
    const ob = openOutbox({ path, maxEvents: 1000, logger, now: () => now, retryMs: 1000 });
    ob.push({ type: "event", event: makeEvent("before") });
    // A folder where the file should be: every append and rewrite fails from now on.
    rmSync(path);
    mkdirSync(path);
    for (let i = 0; i < 10; i++) {
      now += 500;
      ob.push({ type: "event", event: makeEvent(`full${i}`) });
    }
    expect(lines.filter((l) => l.includes("the hub outbox"))).toHaveLength(1);
    rmSync(path, { recursive: true });
    now += 1000;
    ob.push({ type: "pod.upsert", uid: "u1", pod: makePod("u1") });
    // Nothing pushed while the disk was full is missing from the file.
    const again = outboxAt(d);
    expect(again.entries().map((m) => m.seq)).toEqual(ob.entries().map((m) => m.seq));
    expect(again.eventCount).toBe(11);
  });

  test("writes its file with mode 0600", () => {
    const d = dir();
    outboxAt(d).push({ type: "event", event: makeEvent("a") });
    expect(statSync(join(d, "hub", "outbox")).mode & 0o777).toBe(0o600);
  });
});
