import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  createFileSource,
  type FileSourceDeps,
  type ManifestProblem,
} from "../../../src/agent/sources/index.ts";
import type { Pod } from "../../../src/api/index.ts";
import { FakeClock, realClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";

let root: string;
let dir: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "fleetlet-manifests-"));
  dir = join(root, "manifests");
  await mkdir(dir);
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

function podYaml(name: string, image = "nginx:1.27"): string {
  return `apiVersion: v1\nkind: Pod\nmetadata:\n  name: ${name}\nspec:\n  containers:\n    - name: app\n      image: ${image}\n`;
}

/** A pod as JSON, with no newline at its end. */
function podJson(name: string): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec: { containers: [{ name: "c", image: "x:1" }] },
  });
}

function harness(overrides: Partial<FileSourceDeps> = {}) {
  const snapshots: Pod[][] = [];
  const errors: ManifestProblem[] = [];
  const clock = new FakeClock(Date.UTC(2026, 0, 1, 12, 0, 0, 250));
  const source = createFileSource({
    path: dir,
    nodeName: "dev1",
    checkFrequencyMs: 20_000,
    clock,
    log: nullLogger,
    onSnapshot: (pods) => snapshots.push(pods),
    onError: (p) => errors.push(p),
    ...overrides,
  });
  const names = async () => (await source.relist()).map((p) => p.metadata.name).sort();
  return { source, snapshots, errors, clock, names };
}

describe("file source relist()", () => {
  test("reads YAML, JSON and multi-document files, skipping hidden, backup and swap files", async () => {
    await writeFile(join(dir, "a.yaml"), podYaml("a"));
    await writeFile(join(dir, "b.json"), podJson("b"));
    await writeFile(join(dir, "cd.yml"), `${podYaml("c")}---\n${podYaml("d")}`);
    for (const ignored of [".hidden.yaml", "a.yaml~", ".a.yaml.swp", "e.yaml.swp", "#e.yaml#"]) {
      await writeFile(join(dir, ignored), podYaml(`x${ignored.length}`));
    }
    await mkdir(join(dir, "sub"));
    await writeFile(join(dir, "sub", "f.yaml"), podYaml("f"));
    const { names, errors, snapshots } = harness();
    expect(await names()).toEqual(["a-dev1", "b-dev1", "c-dev1", "d-dev1"]);
    expect(errors).toEqual([]);
    expect(snapshots).toHaveLength(1);
  });

  test("stamps config.seen and creationTimestamp once and keeps them while the pod is unchanged", async () => {
    await writeFile(join(dir, "a.yaml"), podYaml("a"));
    const { source, clock } = harness();
    const [first] = await source.relist();
    expect(first?.metadata.annotations?.["kubernetes.io/config.seen"]).toBe(
      "2026-01-01T12:00:00.25Z",
    );
    expect(first?.metadata.creationTimestamp).toBe("2026-01-01T12:00:00Z");
    clock.step(60_000);
    const [again] = await source.relist();
    expect(again).toEqual(first as Pod);
  });

  test("rejects a file larger than the limit, naming it", async () => {
    await writeFile(join(dir, "big.yaml"), `${podYaml("big")}#${"x".repeat(200)}\n`);
    const { names, errors } = harness({ maxFileBytes: 100 });
    expect(await names()).toEqual([]);
    expect(errors[0]?.path).toBe(join(dir, "big.yaml"));
    expect(errors[0]?.message).toContain("file is too large");
  });

  test("reports a fifo and a symlink to a device as not regular files, once, without reading them", async () => {
    await writeFile(join(dir, "good.yaml"), podYaml("good"));
    await symlink("/dev/zero", join(dir, "zero.yaml"));
    expect(Bun.spawnSync(["mkfifo", join(dir, "pipe.yaml")]).exitCode).toBe(0);
    const { names, errors } = harness();
    expect(await names()).toEqual(["good-dev1"]);
    expect(await names()).toEqual(["good-dev1"]);
    expect(errors.map((e) => e.message).sort()).toEqual([
      `manifest ${join(dir, "pipe.yaml")}: not a regular file (a fifo); only regular files are read`,
      `manifest ${join(dir, "zero.yaml")}: not a regular file (a character device); only regular files are read`,
    ]);
  });

  test("reports an invalid manifest once per distinct content and leaves other pods alone", async () => {
    await writeFile(join(dir, "good.yaml"), podYaml("good"));
    await writeFile(join(dir, "bad.yaml"), "apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\n");
    const { names, errors } = harness();
    expect(await names()).toEqual(["good-dev1"]);
    expect(await names()).toEqual(["good-dev1"]);
    expect(errors).toEqual([
      {
        path: join(dir, "bad.yaml"),
        message: `manifest ${join(dir, "bad.yaml")}: pod "bad": spec: Required value`,
      },
    ]);
    await writeFile(join(dir, "bad.yaml"), "apiVersion: v1\nkind: Pod\nmetadata: {name: Bad}\n");
    await names();
    expect(errors).toHaveLength(2);
  });

  test("rejects the later file of two defining the same pod, naming both", async () => {
    await writeFile(join(dir, "a.yaml"), podYaml("web"));
    await writeFile(join(dir, "b.yaml"), podYaml("web", "busybox:1"));
    const { source, errors } = harness();
    const pods = await source.relist();
    expect(pods.map((p) => p.spec.containers[0]?.image)).toEqual(["nginx:1.27"]);
    expect(errors.map((e) => e.message)).toEqual([
      `manifest ${join(dir, "b.yaml")}: pod "default/web-dev1" is already defined in manifest ${join(dir, "a.yaml")}`,
    ]);
  });

  test("keeps the last valid pod of a file through an invalid edit, until it is valid again", async () => {
    const file = join(dir, "web.yaml");
    await writeFile(file, podYaml("web"));
    const { source, errors } = harness();
    const [valid] = await source.relist();
    await writeFile(file, podYaml("web").replace("image: nginx:1.27", "image: [oops"));
    expect(await source.relist()).toEqual([valid as Pod]);
    expect(errors[0]?.message).toContain("its last valid version keeps running");
    await writeFile(file, podYaml("web", "nginx:1.28"));
    const [edited] = await source.relist();
    expect(edited?.spec.containers[0]?.image).toBe("nginx:1.28");
    expect(edited?.metadata.uid).not.toBe(valid?.metadata.uid ?? "");
  });

  test("keeps the last valid pods of a file a writer truncated, and reports a file that stays empty", async () => {
    const file = join(dir, "web.yaml");
    await writeFile(file, podYaml("web"));
    await writeFile(join(dir, "new.yaml"), "");
    const { source, errors } = harness();
    const [valid] = await source.relist();
    expect(valid?.metadata.name).toBe("web-dev1");
    expect(errors.map((e) => e.message)).toEqual([
      `manifest ${join(dir, "new.yaml")}: the file is empty (delete it to remove its pods)`,
    ]);
    await writeFile(file, "");
    expect(await source.relist()).toEqual([valid as Pod]);
    expect(errors[1]?.message).toBe(
      `manifest ${file}: the file is empty (delete it to remove its pods); its last valid version keeps running`,
    );
    await writeFile(file, podYaml("web"));
    expect(await source.relist()).toEqual([valid as Pod]);
  });

  test("makes no pod from a file cut off mid-line (its prefix would parse), and keeps the last valid one", async () => {
    const file = join(dir, "web.yaml");
    const full = podYaml("web", "registry.example/cam:1.2");
    const cut = full.slice(0, full.indexOf("cam:1.2") + 3);
    await writeFile(join(dir, "new.yaml"), cut.replace("web", "new"));
    await writeFile(file, full);
    const { source, errors } = harness();
    const [valid] = await source.relist();
    expect(valid?.metadata.name).toBe("web-dev1");
    expect(errors[0]?.message).toStartWith(
      `manifest ${join(dir, "new.yaml")}: the file's last line has no newline: taken as not completely written`,
    );
    // An edit caught half written, or cut short by a power loss: the last valid pod runs on.
    await writeFile(file, cut);
    expect(await source.relist()).toEqual([valid as Pod]);
    await writeFile(file, `${full.slice(0, 40)}\0\0\0\0`);
    expect(await source.relist()).toEqual([valid as Pod]);
    expect(errors.at(-1)?.message).toContain("the file holds NUL bytes");
    // Complete again, and a JSON file needs no newline (cut JSON never parses).
    await writeFile(join(dir, "new.yaml"), full.replace("web", "new"));
    await writeFile(join(dir, "j.json"), podJson("j"));
    expect((await source.relist()).map((p) => p.metadata.name).sort()).toEqual([
      "j-dev1",
      "new-dev1",
      "web-dev1",
    ]);
  });

  test("removes the pods of a deleted file", async () => {
    await writeFile(join(dir, "a.yaml"), podYaml("a"));
    await writeFile(join(dir, "b.yaml"), podYaml("b"));
    const { names } = harness();
    expect(await names()).toEqual(["a-dev1", "b-dev1"]);
    await rm(join(dir, "a.yaml"));
    expect(await names()).toEqual(["b-dev1"]);
  });

  test("sends an empty snapshot while the folder does not exist, then its pods once it does", async () => {
    await rm(dir, { recursive: true });
    const { names, snapshots } = harness();
    expect(await names()).toEqual([]);
    expect(snapshots).toEqual([[]]);
    await mkdir(dir);
    await writeFile(join(dir, "a.yaml"), podYaml("a"));
    expect(await names()).toEqual(["a-dev1"]);
  });
});

describe("file source run()", () => {
  test("sees a new file quickly through fs.watch", async () => {
    const { source, snapshots } = harness({ clock: realClock, checkFrequencyMs: 60_000 });
    const ac = new AbortController();
    const running = source.run(ac.signal);
    try {
      await waitFor(() => snapshots.length === 1, 2_000);
      await writeFile(join(dir, "a.yaml"), podYaml("a"));
      await waitFor(() => snapshots.at(-1)?.length === 1, 2_000);
      expect(snapshots.at(-1)?.[0]?.metadata.name).toBe("a-dev1");
    } finally {
      ac.abort();
      await running;
    }
  });

  test("heals a missed change with the periodic relist", async () => {
    const clock = new FakeClock();
    const noWatch = () => ({ close: () => {}, onError: () => {} });
    const { source, snapshots } = harness({ clock, watchDir: noWatch });
    const ac = new AbortController();
    const running = source.run(ac.signal);
    await waitFor(() => snapshots.length === 1 && clock.pending === 1, 2_000);
    await writeFile(join(dir, "a.yaml"), podYaml("a"));
    clock.step(19_999);
    await Bun.sleep(20);
    expect(snapshots).toHaveLength(1);
    clock.step(1);
    await waitFor(() => snapshots.length === 2, 2_000);
    expect(snapshots[1]?.map((p) => p.metadata.name)).toEqual(["a-dev1"]);
    ac.abort();
    await running;
  });
});

async function waitFor(cond: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await Bun.sleep(5);
  }
}
