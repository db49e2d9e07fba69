// How the agent says that a state file cannot be written (a full disk): a log line naming the file
// and the error, a Warning event on the node at a bounded rate, and a Normal event once written.
import { describe, expect, test } from "bun:test";
import { createEventRecorder } from "../../../src/agent/events/index.ts";
import {
  createStateWrites,
  FAILED_TO_WRITE_STATE,
  reportedWrite,
  STATE_WRITTEN,
} from "../../../src/agent/events/state-writes.ts";
import { FileWriteError } from "../../../src/util/atomic-file.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { createLogger } from "../../../src/util/log.ts";

const FILE = "/var/lib/fleetlet/hub/outbox";

function enospc(): FileWriteError {
  const cause = Object.assign(new Error("ENOSPC: no space left on device, write"), {
    code: "ENOSPC",
  });
  return new FileWriteError(FILE, "ENOSPC", cause);
}

function setup() {
  const clock = new FakeClock();
  const lines: string[] = [];
  const logger = createLogger({ format: "json", write: (l) => lines.push(l) });
  const recorder = createEventRecorder({ clock, nodeName: "dev1" });
  const writes = createStateWrites({
    clock,
    logger,
    recorder,
    nodeName: "dev1",
    intervalMs: 60_000,
  });
  const events = () =>
    recorder.list().map((e) => ({
      kind: e.involvedObject.kind,
      name: e.involvedObject.name,
      type: e.type,
      reason: e.reason,
      message: e.message,
      count: e.count,
    }));
  const logs = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  return { clock, writes, events, logs };
}

/** Lets the events recorded from a microtask land. */
const settle = () => Promise.resolve();

describe("state write reports", () => {
  test("a failed write is logged with its file and error and said as a node Warning event", async () => {
    const { writes, events, logs } = setup();
    writes.failed(FILE, enospc());
    await settle();
    expect(events()).toEqual([
      {
        kind: "Node",
        name: "dev1",
        type: "Warning",
        reason: FAILED_TO_WRITE_STATE,
        message: `cannot write ${FILE}: ENOSPC: no space left on device, write`,
        count: 1,
      },
    ]);
    expect(logs()).toMatchObject([
      {
        level: "warn",
        file: FILE,
        error: `cannot write ${FILE}: ENOSPC: no space left on device, write`,
      },
    ]);
    expect(writes.failing()).toEqual([FILE]);
  });

  test("repeats within the interval are counted, not said; after it they are said with the count", async () => {
    const { clock, writes, events, logs } = setup();
    for (let i = 0; i < 100; i++) writes.failed(FILE, enospc());
    await settle();
    expect(events().map((e) => e.count)).toEqual([1]);
    expect(logs().length).toBe(1);
    clock.step(60_000);
    writes.failed(FILE, enospc());
    await settle();
    expect(events().map((e) => e.count)).toEqual([2]);
    expect(logs().at(-1)).toMatchObject({ file: FILE, failuresSinceLastSaid: 99 });
  });

  test("each file is said on its own", async () => {
    const { writes, events } = setup();
    writes.failed(FILE, enospc());
    writes.failed("/var/lib/fleetlet/hub/desired.json", new Error("EIO: i/o error, write"));
    await settle();
    expect(events().map((e) => e.message)).toEqual([
      `cannot write ${FILE}: ENOSPC: no space left on device, write`,
      "cannot write /var/lib/fleetlet/hub/desired.json: EIO: i/o error, write",
    ]);
  });

  test("the first success after failures is said once as StateWritten; successes alone say nothing", async () => {
    const { writes, events, logs } = setup();
    writes.succeeded(FILE);
    await settle();
    expect(events()).toEqual([]);
    writes.failed(FILE, enospc());
    writes.succeeded(FILE);
    writes.succeeded(FILE);
    await settle();
    expect(events().map((e) => [e.type, e.reason, e.message])).toEqual([
      [
        "Warning",
        FAILED_TO_WRITE_STATE,
        `cannot write ${FILE}: ENOSPC: no space left on device, write`,
      ],
      ["Normal", STATE_WRITTEN, `${FILE} is written again`],
    ]);
    expect(logs().map((l) => l.level)).toEqual(["warn", "info"]);
    expect(writes.failing()).toEqual([]);
  });

  test("the event is recorded after the failing write returns, never inside it", async () => {
    const { writes, events } = setup();
    let inside = -1;
    expect(() =>
      reportedWrite(writes, FILE, () => {
        throw enospc();
      }),
    ).toThrow(FileWriteError);
    inside = events().length;
    await settle();
    expect({ inside, after: events().length }).toEqual({ inside: 0, after: 1 });
  });
});
