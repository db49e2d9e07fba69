// BeatWatch (src/hub/dead-holders.ts): where each replica process's beat was last seen to move,
// on this replica's monotonic clock, and which processes are dead by it.
import { describe, expect, test } from "bun:test";
import { BeatWatch } from "../../../src/hub/dead-holders.ts";

const beats = (o: Record<string, number>) => new Map(Object.entries(o));

describe("BeatWatch", () => {
  test("a process is dead once its beat has not moved for longer than the threshold", () => {
    const w = new BeatWatch();
    w.observe(beats({ a: 1, b: 1 }), 0, 3000);
    w.observe(beats({ a: 2, b: 1 }), 2000, 3000);
    w.observe(beats({ a: 3, b: 1 }), 4000, 3000);
    expect(w.dead([], 4000, 4000)).toEqual(new Map());
    w.observe(beats({ a: 4, b: 1 }), 6000, 3000);
    expect(w.dead([], 6000, 5000)).toEqual(new Map([["b", 1]]));
  });

  test("a holder with no beat is timed from when it was first asked about", () => {
    const w = new BeatWatch();
    w.observe(beats({ me: 1 }), 0, 3000);
    expect(w.dead(["gone"], 0, 5000)).toEqual(new Map());
    w.observe(beats({ me: 2 }), 2000, 3000);
    w.observe(beats({ me: 3 }), 4000, 3000);
    expect(w.dead(["gone"], 4000, 5000)).toEqual(new Map());
    w.observe(beats({ me: 4 }), 6000, 3000);
    expect(w.dead(["gone"], 6000, 5000)).toEqual(new Map([["gone", undefined]]));
    // Asked no more (its sessions were released): forgotten, and timed afresh if asked again.
    expect(w.dead([], 6000, 5000)).toEqual(new Map());
    expect(w.dead(["gone"], 6000, 5000)).toEqual(new Map());
  });

  test("a process whose row went away is timed from then", () => {
    const w = new BeatWatch();
    w.observe(beats({ me: 1, a: 7 }), 0, 3000);
    w.observe(beats({ me: 2 }), 2000, 3000);
    w.observe(beats({ me: 3 }), 4000, 3000);
    w.observe(beats({ me: 4 }), 6000, 3000);
    expect(w.dead(["a"], 6000, 5000)).toEqual(new Map());
    w.observe(beats({ me: 5 }), 8000, 3000);
    expect(w.dead(["a"], 8000, 5000)).toEqual(new Map([["a", undefined]]));
  });

  test("after a gap in its own reads (this replica was stopped), every process is timed afresh", () => {
    const w = new BeatWatch();
    w.observe(beats({ me: 1, a: 1 }), 0, 3000);
    w.observe(beats({ me: 2, a: 1 }), 60_000, 3000);
    expect(w.dead(["a"], 60_000, 5000)).toEqual(new Map());
    w.observe(beats({ me: 3, a: 1 }), 62_000, 3000);
    w.observe(beats({ me: 4, a: 1 }), 64_000, 3000);
    w.observe(beats({ me: 5, a: 1 }), 66_000, 3000);
    expect(w.dead(["a"], 66_000, 5000)).toEqual(new Map([["a", 1]]));
  });
});
