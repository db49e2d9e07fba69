import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdir, mkdtemp, readdir, rm, stat, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createFileSource, type ManifestProblem } from "../../../src/agent/sources/index.ts";
import { createLastValidStore } from "../../../src/agent/sources/last-valid.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { createLogger, nullLogger } from "../../../src/util/log.ts";

let root: string;
let dir: string;
let state: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "fleetlet-last-valid-"));
  dir = join(root, "manifests");
  state = join(root, "state", "manifests");
  await mkdir(dir);
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

function podYaml(name: string, image = "nginx:1.27"): string {
  return `apiVersion: v1\nkind: Pod\nmetadata:\n  name: ${name}\nspec:\n  containers:\n    - name: app\n      image: ${image}\n`;
}

const INVALID = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n  containers: 7\n";

/** A file source as one agent run has it: its own memory, the state folder on disk. */
function agentRun() {
  const errors: ManifestProblem[] = [];
  const source = createFileSource({
    path: dir,
    nodeName: "dev1",
    checkFrequencyMs: 20_000,
    clock: new FakeClock(Date.UTC(2026, 0, 1)),
    log: nullLogger,
    onSnapshot: () => {},
    onError: (p) => errors.push(p),
    lastValid: createLastValidStore(state, nullLogger),
  });
  const pods = async () =>
    (await source.relist()).map((p) => ({
      name: p.metadata.name,
      uid: p.metadata.uid,
      image: p.spec.containers[0]?.image,
    }));
  return { pods, errors };
}

describe("the manifest folder's last valid versions across agent restarts", () => {
  test("a file invalid at start runs the version last used before the restart, with the same uid", async () => {
    const file = join(dir, "a.yaml");
    await writeFile(file, podYaml("a", "nginx:1"));
    const before = await agentRun().pods();
    await writeFile(file, podYaml("a", "nginx:2"));
    const newest = await agentRun().pods();
    expect(newest[0]?.image).toBe("nginx:2");
    expect(newest[0]?.uid).not.toBe(before[0]?.uid);

    await writeFile(file, INVALID);
    const restarted = agentRun();
    expect(await restarted.pods()).toEqual(newest);
    expect(restarted.errors).toHaveLength(1);
    expect(restarted.errors[0]?.message).toContain("its last valid version keeps running");
  });

  test("so does a file a power cut left with NUL bytes or cut off mid-line", async () => {
    const file = join(dir, "a.yaml");
    await writeFile(file, podYaml("a"));
    const before = await agentRun().pods();
    for (const cut of [Buffer.alloc(40), podYaml("a").slice(0, -3)]) {
      await writeFile(file, cut);
      expect(await agentRun().pods()).toEqual(before);
    }
  });

  test("a file deleted takes its saved version with it: made again invalid, it runs nothing", async () => {
    const file = join(dir, "a.yaml");
    await writeFile(file, podYaml("a"));
    const run = agentRun();
    expect(await run.pods()).toHaveLength(1);
    expect(await readdir(state)).toHaveLength(1);
    await unlink(file);
    expect(await run.pods()).toEqual([]);
    expect(await readdir(state)).toEqual([]);
    await writeFile(file, INVALID);
    expect(await agentRun().pods()).toEqual([]);
  });

  test("a file deleted while the agent was down loses its saved version at the first relist", async () => {
    await writeFile(join(dir, "a.yaml"), podYaml("a"));
    await writeFile(join(dir, "b.yaml"), podYaml("b"));
    await agentRun().pods();
    expect(await readdir(state)).toHaveLength(2);
    await unlink(join(dir, "b.yaml"));
    expect((await agentRun().pods()).map((p) => p.name)).toEqual(["a-dev1"]);
    expect(await readdir(state)).toHaveLength(1);
    await writeFile(join(dir, "b.yaml"), INVALID);
    expect((await agentRun().pods()).map((p) => p.name)).toEqual(["a-dev1"]);
  });

  test("a version that parses but loses its name to an earlier file is not saved as last valid", async () => {
    await writeFile(join(dir, "a.yaml"), podYaml("a"));
    await writeFile(join(dir, "b.yaml"), podYaml("b"));
    const run = agentRun();
    await run.pods();
    await writeFile(join(dir, "b.yaml"), podYaml("a", "busybox:1"));
    const names = (await run.pods()).map((p) => `${p.name} ${p.image}`);
    expect(names).toEqual(["a-dev1 nginx:1.27", "b-dev1 nginx:1.27"]);
    await writeFile(join(dir, "b.yaml"), INVALID);
    const after = (await agentRun().pods()).map((p) => `${p.name} ${p.image}`);
    expect(after).toEqual(["a-dev1 nginx:1.27", "b-dev1 nginx:1.27"]);
  });

  test("a save that fails (the state folder cannot be written) is made again at the next relist", async () => {
    await mkdir(join(root, "state"));
    await writeFile(state, "in the way");
    const file = join(dir, "a.yaml");
    await writeFile(file, podYaml("a"));
    const run = agentRun();
    const shown = await run.pods();
    await rm(state);
    await run.pods();
    await writeFile(file, INVALID);
    expect(await agentRun().pods()).toEqual(shown);
  });

  test("a saved copy that is not one is ignored: the file source goes on", async () => {
    const file = join(dir, "a.yaml");
    await writeFile(file, podYaml("a"));
    await agentRun().pods();
    const [copy] = await readdir(state);
    await writeFile(join(state, copy ?? ""), "{not json");
    await writeFile(file, INVALID);
    const run = agentRun();
    expect(await run.pods()).toEqual([]);
    expect(run.errors).toHaveLength(1);
  });
});

describe("createLastValidStore()", () => {
  test("writes a copy 0600 and only when its content changes", async () => {
    const store = createLastValidStore(state, nullLogger);
    store.save("/m/a.yaml", "one\n");
    const [name] = await readdir(state);
    const first = await stat(join(state, name ?? ""));
    expect(first.mode & 0o777).toBe(0o600);
    createLastValidStore(state, nullLogger).save("/m/a.yaml", "one\n");
    store.save("/m/a.yaml", "one\n");
    expect((await stat(join(state, name ?? ""))).ino).toBe(first.ino);
    store.save("/m/a.yaml", "two\n");
    expect((await stat(join(state, name ?? ""))).ino).not.toBe(first.ino);
    expect(createLastValidStore(state, nullLogger).load("/m/a.yaml")).toBe("two\n");
  });

  test("a folder it cannot write is logged and nothing throws", async () => {
    await mkdir(join(root, "state"));
    await writeFile(state, "a file where the folder would be");
    const lines: string[] = [];
    const store = createLastValidStore(state, createLogger({ write: (l) => lines.push(l) }));
    store.save("/m/a.yaml", "one\n");
    expect(store.load("/m/a.yaml")).toBeUndefined();
    expect(lines.join("\n")).toContain("cannot save the last valid version of a manifest");
  });
});
