// The hub outbox on a disk that fills up and frees again (injected file calls): entries stay in
// memory, the failure is reported once per file, the file is never appended to after a torn line,
// and once space returns one rewrite puts everything on disk again.
import { afterEach, describe, expect, test } from "bun:test";
import { appendFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { StateWrites } from "../../../src/agent/events/state-writes.ts";
import { type OutboxFiles, openOutbox } from "../../../src/agent/hubclient/outbox.ts";
import { writeFileAtomic } from "../../../src/util/atomic-file.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makeEvent, makePod, tempDir } from "./fixtures.ts";

let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
});

function enospc(): Error {
  return Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
}

/** Real file calls while `full` is false; while it is, an append writes half its line (a torn
 * line, as a full ext4 leaves it) and a rewrite fails whole. */
function disk() {
  const state = { full: false, appends: 0, rewrites: 0 };
  const files: OutboxFiles = {
    append(path, text) {
      state.appends++;
      if (!state.full) return appendFileSync(path, text);
      appendFileSync(path, text.slice(0, Math.floor(text.length / 2)));
      throw enospc();
    },
    replace(path, text) {
      state.rewrites++;
      if (state.full) throw enospc();
      writeFileAtomic(path, text);
    },
  };
  return { state, files };
}

function recordingReporter() {
  const said: string[] = [];
  const reporter: StateWrites = {
    failed: (file, err) => said.push(`failed ${file}: ${(err as Error).message}`),
    succeeded: (file) => said.push(`ok ${file}`),
    failing: () => [],
  };
  return { said, reporter };
}

function setup() {
  const t = tempDir();
  cleanups.push(t.cleanup);
  const path = join(t.dir, "hub", "outbox");
  const d = disk();
  const r = recordingReporter();
  let now = 0;
  const open = () =>
    openOutbox({
      path,
      logger: nullLogger,
      files: d.files,
      stateWrites: r.reporter,
      now: () => now,
      retryMs: 1000,
    });
  return { path, d, r, open, step: (ms: number) => (now += ms) };
}

/** Every line of the file parses (nothing torn). */
function lines(path: string): unknown[] {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l));
}

describe("the hub outbox on a full disk", () => {
  test("keeps entries in memory, reports the file, and rewrites it whole when space returns", () => {
    const { path, d, r, open, step } = setup();
    const ob = open();
    ob.push({ type: "event", event: makeEvent("before") });
    d.state.full = true;
    ob.push({ type: "pod.upsert", uid: "u1", pod: makePod("u1") });
    ob.push({ type: "event", event: makeEvent("during") });
    expect(ob.entries().map((m) => m.seq)).toEqual([1, 2, 3]);
    expect(r.said.filter((s) => s.startsWith("failed"))).toContain(
      `failed ${path}: ENOSPC: no space left on device, write`,
    );
    // After the torn append, nothing more is appended: only rewrites, spaced by retryMs.
    expect(d.state.appends).toBe(2);
    d.state.full = false;
    ob.push({ type: "event", event: makeEvent("soon") });
    expect(d.state.appends).toBe(2);
    step(1000);
    ob.push({ type: "event", event: makeEvent("after") });
    expect(r.said.at(-1)).toBe(`ok ${path}`);
    expect(lines(path).length).toBe(6);
    const again = open();
    expect(again.entries().map((m) => m.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(again.lastSeq).toBe(5);
  });

  test("with a timer, a quiet outbox rewrites itself once space returns, with no new entry", () => {
    const { path, d, r } = setup();
    const clock = new FakeClock();
    const ob = openOutbox({
      ...{ path, logger: nullLogger, files: d.files, stateWrites: r.reporter, retryMs: 1000 },
      now: () => clock.now(),
      setTimer: (ms, fn) => clock.setTimer(ms, fn),
    });
    ob.push({ type: "event", event: makeEvent("before") });
    d.state.full = true;
    ob.push({ type: "event", event: makeEvent("during") });
    // The timer tries again every second while the disk stays full.
    clock.step(3000);
    expect(d.state.rewrites).toBe(1 + 3);
    expect(r.said.at(-1)).toStartWith("failed");
    d.state.full = false;
    clock.step(1000);
    expect(r.said.at(-1)).toBe(`ok ${path}`);
    expect(lines(path).length).toBe(3);
    clock.step(5000);
    expect(d.state.rewrites).toBe(1 + 4);
  });

  test("a restart while the disk is full finds every line before the torn one", () => {
    const { d, open } = setup();
    const ob = open();
    ob.push({ type: "event", event: makeEvent("a") });
    ob.push({ type: "event", event: makeEvent("b") });
    d.state.full = true;
    ob.push({ type: "event", event: makeEvent("c") });
    ob.push({ type: "event", event: makeEvent("d") });
    d.state.full = false;
    const again = open();
    expect(again.entries().map((m) => m.seq)).toEqual([1, 2]);
    // The restart's rewrite leaves a file whose every line parses.
    again.push({ type: "event", event: makeEvent("e") });
    expect(
      open()
        .entries()
        .map((m) => m.seq),
    ).toEqual([1, 2, 3]);
  });

  test("acks while the disk is full are kept and written with the rewrite", () => {
    const { d, open, step } = setup();
    const ob = open();
    for (const n of ["a", "b", "c"]) ob.push({ type: "event", event: makeEvent(n) });
    d.state.full = true;
    ob.ack(2);
    expect(ob.entries().map((m) => m.seq)).toEqual([3]);
    d.state.full = false;
    step(1000);
    ob.push({ type: "event", event: makeEvent("d") });
    const again = open();
    expect(again.ackedSeq).toBe(2);
    expect(again.entries().map((m) => m.seq)).toEqual([3, 4]);
  });
});
