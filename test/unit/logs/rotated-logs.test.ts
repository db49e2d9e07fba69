import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { appendFile, mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  logExists,
  readLog,
  removeContainerLogs,
  rotatedPath,
  rotationStamp,
} from "../../../src/agent/logs/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { until } from "../../lib/until.ts";
import { cri, tempDir } from "../server/fixtures.ts";

let dir: string;
let log: string;
beforeEach(async () => {
  dir = await tempDir("rotated-logs");
  await mkdir(join(dir, "c"));
  log = join(dir, "c", "0.log");
});
afterEach(() => rm(dir, { recursive: true, force: true }));

const lines = (...n: number[]) => n.map((i) => cri(`line ${i}`)).join("");
const expected = (...n: number[]) => n.map((i) => `line ${i}\n`).join("");

/** Takes chunks from a followed log until `want` has been seen whole (or 2000 chunks). */
async function readUntil(it: AsyncGenerator<string>, want: string): Promise<string> {
  let out = "";
  for (let i = 0; i < 2000 && !out.includes(want); i++) {
    const next = await it.next();
    if (next.done) break;
    out += next.value;
  }
  return out;
}

/** What a rotation does: the current file renamed with a stamp, a new one made by the runtime. */
async function rotate(stamp: string): Promise<string> {
  const rotated = `${log}.${stamp}`;
  await rename(log, rotated);
  return rotated;
}

async function gzip(path: string): Promise<void> {
  await writeFile(`${path}.gz`, Bun.gzipSync(await readFile(path)));
  await rm(path);
}

describe("rotated log names", () => {
  test("rotationStamp() is Go's 20060102-150405 in local time", () => {
    const at = new Date(2026, 1, 3, 4, 5, 6).getTime();
    expect(rotationStamp(at)).toBe("20260203-040506");
    expect(rotatedPath("/l/c/0.log", at)).toBe("/l/c/0.log.20260203-040506");
  });

  test("removeContainerLogs() removes the current and rotated files of that log only", async () => {
    await writeFile(log, "12345");
    await writeFile(`${log}.20260101-000000`, "123");
    await writeFile(`${log}.20250101-000000.gz`, "12");
    await writeFile(join(dir, "c", "1.log"), "other run");
    expect(await removeContainerLogs(log)).toBe(10);
    expect(await readdir(join(dir, "c"))).toEqual(["1.log"]);
  });
});

describe("readLog() across rotation", () => {
  test("follow reads what was written to the old file after the rename, then the new file", async () => {
    await writeFile(log, lines(1, 2));
    const ac = new AbortController();
    const it = readLog(log, { follow: true, signal: ac.signal, pollIntervalMs: 2 });
    expect(await readUntil(it, "line 2\n")).toBe(expected(1, 2));
    const rotated = await rotate("20260101-000000");
    await appendFile(rotated, lines(3)); // the runtime still writes there until it reopens
    await writeFile(log, lines(4));
    await appendFile(log, lines(5));
    expect(await readUntil(it, "line 5\n")).toBe(expected(3, 4, 5));
    ac.abort();
    await it.return(undefined);
  });

  test("follow reads the old file once more a poll after the log was reopened (the runtime's last write)", async () => {
    const clock = new FakeClock();
    const settle = () => until("the reader to wait for its next poll", () => clock.pending > 0);
    await writeFile(log, lines(1));
    const ac = new AbortController();
    const it = readLog(log, { follow: true, signal: ac.signal, pollIntervalMs: 100, clock });
    expect((await it.next()).value).toBe(expected(1));
    const pending = it.next();
    await settle();
    const old = await rotate("20260101-000000");
    await writeFile(log, lines(3));
    clock.step(100); // the reader sees the new file, and waits one more poll
    await settle();
    await appendFile(old, lines(2)); // written by the runtime just before it switched files
    clock.step(100);
    expect((await pending).value).toBe(expected(2));
    expect((await it.next()).value).toBe(expected(3));
    ac.abort();
    await it.return(undefined);
  });

  test("follow catches up over several rotations, the file it was on since gzipped", async () => {
    await writeFile(log, lines(1));
    const ac = new AbortController();
    const it = readLog(log, { follow: true, signal: ac.signal, pollIntervalMs: 2 });
    expect(await readUntil(it, "line 1\n")).toBe(expected(1));
    // While the reader waits: two rotations; the first rotated file is compressed by the second.
    await appendFile(log, lines(2));
    const first = await rotate("20260101-000000");
    await writeFile(log, lines(3, 4));
    await gzip(first);
    await rotate("20260101-000100");
    await writeFile(log, lines(5));
    expect(await readUntil(it, "line 5\n")).toBe(expected(2, 3, 4, 5));
    ac.abort();
    await it.return(undefined);
  });

  test("follow reads every rotated file left when the one it was on has been deleted", async () => {
    await writeFile(log, lines(1));
    const ac = new AbortController();
    const it = readLog(log, { follow: true, signal: ac.signal, pollIntervalMs: 2 });
    expect(await readUntil(it, "line 1\n")).toBe(expected(1));
    await rm(await rotate("20260101-000000"));
    await writeFile(log, lines(2));
    await rotate("20260101-000100");
    await writeFile(log, lines(3));
    expect(await readUntil(it, "line 3\n")).toBe(expected(2, 3));
    ac.abort();
    await it.return(undefined);
  });

  test("tailLines reaches into the rotated files, plain and gzipped, when the current one has fewer", async () => {
    await writeFile(log, lines(1, 2, 3));
    await gzip(await rotate("20260101-000000"));
    await writeFile(log, lines(4, 5, 6));
    await rotate("20260101-000100");
    await writeFile(log, lines(7));
    let out = "";
    for await (const chunk of readLog(log, { tailLines: 5 })) out += chunk;
    expect(out).toBe(expected(3, 4, 5, 6, 7));
    out = "";
    for await (const chunk of readLog(log, { tailLines: 100 })) out += chunk;
    expect(out).toBe(expected(1, 2, 3, 4, 5, 6, 7));
  });

  test("reads the newest rotated file while the runtime has not reopened the log yet", async () => {
    await writeFile(log, lines(1));
    await rotate("20260101-000000");
    expect(existsSync(log)).toBe(false);
    expect(await logExists(log)).toBe(true);
    let out = "";
    for await (const chunk of readLog(log)) out += chunk;
    expect(out).toBe(expected(1));
    await rm(`${log}.20260101-000000`);
    expect(await logExists(log)).toBe(false);
  });
});
