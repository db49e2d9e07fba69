// The queue of agents' reports the store writes in batches (src/hub/report-queue.ts): a batch
// that was not written goes back under what was queued since.
import { describe, expect, test } from "bun:test";
import { ReportQueue } from "../../../src/hub/report-queue.ts";
import { makeEvent, makePod } from "../hubclient/fixtures.ts";

const progress = (name: string, ackedSeq: number) => ({
  ...{ name, credentialHash: "h", hubLabels: {}, joinedAt: 0, ackedSeq },
  ...{ connected: true, desiredGeneration: 0, ackedGeneration: 0 },
});

describe("ReportQueue", () => {
  test("take() empties it; putBack() restores a batch under newer entries", () => {
    const q = new ReportQueue();
    q.progress(progress("cam-1", 1));
    q.pod("cam-1", "u1", makePod("u1", "Pending"));
    q.event("cam-1", "e1", makeEvent("e1"));
    const batch = q.take();
    expect(q.size()).toBe(0);
    q.progress(progress("cam-1", 2));
    q.pod("cam-1", "u1", makePod("u1"));
    q.putBack(batch);
    const again = q.take();
    expect(again.progress.get("cam-1")?.ackedSeq).toBe(2);
    expect(again.pods.get("cam-1\u0000u1")?.pod?.status?.phase).toBe("Running");
    expect(again.events.size).toBe(1);
  });

  test("a node's pods cleared after a batch was taken drop that batch's pods of the node", () => {
    const q = new ReportQueue();
    q.pod("cam-1", "old", makePod("old"));
    q.pod("cam-2", "keep", makePod("keep"));
    const batch = q.take();
    q.clearPods("cam-1");
    q.pod("cam-1", "new", makePod("new"));
    q.putBack(batch);
    const again = q.take();
    expect([...again.pods.keys()].sort()).toEqual(["cam-1\u0000new", "cam-2\u0000keep"]);
    expect([...again.cleared]).toEqual(["cam-1"]);
  });

  test("a progress queued seq-only stays marked until another progress of the node is queued", () => {
    const q = new ReportQueue();
    q.progress(progress("cam-1", 1), true);
    q.progress(progress("cam-1", 2), true);
    q.progress(progress("cam-2", 1), true);
    q.progress(progress("cam-2", 1));
    q.progress(progress("cam-2", 2), true);
    q.progress(progress("cam-3", 1));
    const batch = q.take();
    expect([...batch.seqOnly]).toEqual(["cam-1"]);
    expect(batch.progress.get("cam-1")?.ackedSeq).toBe(2);
    expect(q.take().seqOnly.size).toBe(0);
    q.progress(progress("cam-1", 1), true);
    q.restoreProgress("cam-1", progress("cam-1", 1));
    q.progress(progress("cam-4", 1), true);
    q.forget("cam-4");
    q.progress(progress("cam-4", 2));
    expect([...q.take().seqOnly]).toEqual([]);
  });

  test("putBack() keeps a node seq-only only when its progress was so in the batch and since", () => {
    const q = new ReportQueue();
    for (const name of ["a", "b", "c", "d"]) q.progress(progress(name, 1), name !== "c");
    const batch = q.take();
    q.progress(progress("a", 2), true);
    q.progress(progress("b", 2));
    q.progress(progress("c", 2), true);
    q.progress(progress("e", 1), true);
    q.putBack(batch);
    const again = q.take();
    expect([...again.seqOnly].sort()).toEqual(["a", "d", "e"]);
    expect(again.progress.get("a")?.ackedSeq).toBe(2);
  });

  test("forget() drops everything queued of one node", () => {
    const q = new ReportQueue();
    for (const n of ["cam-1", "cam-2"]) {
      q.progress(progress(n, 1));
      q.pod(n, "u", makePod("u"));
      q.event(n, "e", makeEvent("e"));
      q.clearPods(n);
    }
    q.forget("cam-1");
    expect(q.size()).toBe(3);
    expect([...q.take().progress.keys()]).toEqual(["cam-2"]);
  });
});
