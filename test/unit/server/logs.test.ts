import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { appendFile, rm } from "node:fs/promises";
import { join } from "node:path";
import {
  containerLogPath,
  LogNotFoundError,
  parseCriLine,
  readLog,
} from "../../../src/agent/logs/index.ts";
import { ApiStatusError } from "../../../src/cli/client.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";
import {
  cri,
  type FakeAgent,
  runningStatus,
  startFakeAgent,
  tempDir,
  writeLog,
} from "./fixtures.ts";

async function collect(it: AsyncIterable<string>): Promise<string> {
  let out = "";
  for await (const chunk of it) out += chunk;
  return out;
}

let dir: string;
beforeAll(async () => {
  dir = await tempDir("logs");
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe("parseCriLine()", () => {
  test("splits a record into time, stream, partial flag and text", () => {
    expect(parseCriLine("2024-01-01T00:00:00.1Z stderr P hello world ")).toEqual({
      time: "2024-01-01T00:00:00.1Z",
      stream: "stderr",
      partial: true,
      text: "hello world ",
    });
    expect(parseCriLine("2024-01-01T00:00:00Z stdout F")?.text).toBe("");
    expect(parseCriLine("not a cri line")).toBeUndefined();
  });
});

describe("readLog()", () => {
  test("strips the CRI prefix and joins partial records into one line", async () => {
    const path = join(dir, "join.log");
    await writeLog(
      path,
      cri("a") + cri("hel", { partial: true }) + cri("lo", { stream: "stderr" }) + cri(""),
    );
    expect(await collect(readLog(path))).toBe("a\nhello\n\n");
  });

  test("timestamps prefix each joined line with the time of its first record", async () => {
    const path = join(dir, "ts.log");
    await writeLog(path, cri("x", { partial: true, sec: 1 }) + cri("y", { sec: 2 }));
    expect(await collect(readLog(path, { timestamps: true }))).toBe(
      "2024-01-01T00:00:01.000000001Z xy\n",
    );
  });

  test("tailLines returns the last N lines, counting joined partials as one", async () => {
    const path = join(dir, "tail.log");
    const lines = Array.from({ length: 5000 }, (_, i) => cri(`line ${i} ${"x".repeat(40)}`)).join(
      "",
    );
    await writeLog(path, lines + cri("part-", { partial: true }) + cri("end"));
    const out = await collect(readLog(path, { tailLines: 3 }));
    expect(out.split("\n")).toEqual([
      `line 4998 ${"x".repeat(40)}`,
      `line 4999 ${"x".repeat(40)}`,
      "part-end",
      "",
    ]);
    expect(await collect(readLog(path, { tailLines: 0 }))).toBe("");
    const all = await collect(readLog(path, { tailLines: 10_000 }));
    expect(all.split("\n")).toHaveLength(5002);
  });

  test("a trailing partial record is printed without a newline", async () => {
    const path = join(dir, "partial-end.log");
    await writeLog(path, cri("done") + cri("half", { partial: true }));
    expect(await collect(readLog(path))).toBe("done\nhalf");
  });

  test("a missing file fails with LogNotFoundError naming the path", async () => {
    const path = join(dir, "missing.log");
    const err = await collect(readLog(path)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LogNotFoundError);
    expect((err as Error).message).toBe(`log file "${path}" does not exist`);
  });

  test("follow yields lines appended later and ends when aborted", async () => {
    const path = join(dir, "follow.log");
    await writeLog(path, cri("first"));
    const ac = new AbortController();
    const it = readLog(path, { follow: true, signal: ac.signal, pollIntervalMs: 5 });
    expect((await it.next()).value).toBe("first\n");
    await appendFile(path, cri("sec", { partial: true }));
    await appendFile(path, cri("ond"));
    expect((await it.next()).value).toBe("second\n");
    const pending = it.next();
    ac.abort();
    expect((await pending).done).toBe(true);
  });
});

describe("containerLogPath()", () => {
  const pod = makePod({
    name: "web",
    uid: "u1",
    status: { phase: "Running", containerStatuses: [runningStatus("app", { restartCount: 2 })] },
  });

  test("follows kubelet's <ns>_<name>_<uid>/<container>/<restartCount>.log layout", () => {
    expect(containerLogPath("/var/log/pods", pod, "app", false)).toBe(
      "/var/log/pods/default_web_u1/app/2.log",
    );
    expect(containerLogPath("/var/log/pods", pod, "app", true)).toBe(
      "/var/log/pods/default_web_u1/app/1.log",
    );
  });

  test("has no previous file for a container that never restarted, nor any for an unknown one", () => {
    const fresh = makePod({ status: { containerStatuses: [runningStatus("app")] } });
    expect(containerLogPath("/l", fresh, "app", true)).toBeUndefined();
    expect(containerLogPath("/l", fresh, "other", false)).toBeUndefined();
  });
});

describe("GET .../pods/{name}/log", () => {
  const web = makePod({
    name: "web",
    status: { phase: "Running", containerStatuses: [runningStatus("app", { restartCount: 1 })] },
  });
  const two = makePod({
    name: "two",
    containers: [makeContainer({ name: "a" }), makeContainer({ name: "b" })],
    status: {
      phase: "Pending",
      containerStatuses: [
        runningStatus("a"),
        runningStatus("b", { state: { waiting: { reason: "ImagePullBackOff" } }, ready: false }),
      ],
    },
  });
  let agent: FakeAgent;
  let current: string;
  beforeAll(async () => {
    agent = await startFakeAgent([web, two]);
    current = containerLogPath(agent.logsDir, web, "app", false) ?? "";
    await writeLog(current, cri("now 1") + cri("now 2") + cri("now 3"));
    await writeLog(containerLogPath(agent.logsDir, web, "app", true) ?? "", cri("before"));
    await writeLog(containerLogPath(agent.logsDir, two, "a", false) ?? "", cri("from a"));
  });
  afterAll(() => agent.stop());

  test("streams the only container's log, with tailLines and previous", async () => {
    expect(await collect(agent.client.logs("default", "web"))).toBe("now 1\nnow 2\nnow 3\n");
    expect(await collect(agent.client.logs("default", "web", { tailLines: 1 }))).toBe("now 3\n");
    expect(await collect(agent.client.logs("default", "web", { previous: true }))).toBe("before\n");
    expect(await collect(agent.client.logs("default", "two", { container: "a" }))).toBe("from a\n");
  });

  test("asks for a container name when the pod has several, with kubectl's message", async () => {
    const err = await collect(agent.client.logs("default", "two")).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiStatusError);
    expect((err as ApiStatusError).status).toMatchObject({
      code: 400,
      message: "a container name must be specified for pod two, choose one of: [a b]",
    });
  });

  test("explains a container that is waiting, an unknown container and a missing previous run", async () => {
    const msg = async (name: string, q: Parameters<FakeAgent["client"]["logs"]>[2]) =>
      ((await collect(agent.client.logs("default", name, q)).catch((e: Error) => e)) as Error)
        .message;
    expect(await msg("two", { container: "b" })).toBe(
      'Error from server (BadRequest): container "b" in pod "two" is waiting to start: ImagePullBackOff',
    );
    expect(await msg("two", { container: "zz" })).toBe(
      "Error from server (BadRequest): container zz is not valid for pod two",
    );
    expect(await msg("two", { container: "a", previous: true })).toBe(
      'Error from server (BadRequest): previous terminated container "a" in pod "two" not found',
    );
    expect(await msg("nope", {})).toBe('Error from server (NotFound): pods "nope" not found');
  });

  test("follow streams appended lines until the client aborts", async () => {
    const ac = new AbortController();
    const it = agent.client.logs("default", "web", {
      follow: true,
      tailLines: 1,
      signal: ac.signal,
    });
    expect((await it.next()).value).toBe("now 3\n");
    await appendFile(current, cri("now 4"));
    expect((await it.next()).value).toBe("now 4\n");
    ac.abort();
    expect((await it.next()).done).toBe(true);
  });
});
