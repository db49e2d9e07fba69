import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHubPodSource, decodeDesired } from "../../../src/agent/sources/index.ts";
import type { ConfigObject } from "../../../src/api/pod-objects.ts";
import type { Pod } from "../../../src/api/types.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";

let dirs: string[] = [];
afterEach(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});

function hubPod(name: string, uid: string, extra: Record<string, unknown> = {}) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: `${name}-cam-1`,
      namespace: "default",
      uid,
      labels: { app: name },
      ownerReferences: [{ apiVersion: "apps/v1", kind: "DaemonSet", name, uid: "ds1" }],
    },
    spec: { nodeName: "cam-1", containers: [{ name: "main", image: "busybox" }], ...extra },
  };
}

function setup(clock?: FakeClock) {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-hubsource-"));
  dirs.push(dir);
  const path = join(dir, "hub", "desired.json");
  const applied: Pod[][] = [];
  const objects: ConfigObject[][] = [];
  const make = () =>
    createHubPodSource({
      nodeName: "cam-1",
      path,
      log: nullLogger,
      apply: (pods) => applied.push(pods),
      applyObjects: (list) => objects.push(list),
      ...(clock !== undefined && { clock, retrySaveMs: 5000 }),
    });
  return { dir, path, applied, objects, make };
}

describe("decodeDesired()", () => {
  test("refuses the whole state for one invalid pod, naming it and the field", () => {
    const r = decodeDesired(
      { generation: 3, pods: [hubPod("a", "u1"), { ...hubPod("b", "u2"), spec: {} }] },
      "cam-1",
    );
    expect(r).toEqual({
      ok: false,
      reason: 'pods[1] ("b-cam-1"): spec.containers: Required value',
    });
  });

  test("refuses a pod of another node, a pod without uid and duplicate names", () => {
    const other = hubPod("a", "u1", { nodeName: "cam-2" });
    expect(decodeDesired({ generation: 1, pods: [other] }, "cam-1")).toMatchObject({
      ok: false,
      reason: expect.stringContaining('spec.nodeName: Invalid value: "cam-2"'),
    });
    const noUid = hubPod("a", "");
    expect(decodeDesired({ generation: 1, pods: [noUid] }, "cam-1")).toMatchObject({
      reason: 'pods[0] ("a-cam-1"): metadata.uid: Required value',
    });
    const twice = [hubPod("a", "u1"), hubPod("a", "u2")];
    expect(decodeDesired({ generation: 1, pods: twice }, "cam-1")).toMatchObject({
      reason: "pods[1]: Duplicate value: default/a-cam-1",
    });
  });
});

describe("createHubPodSource()", () => {
  test("with nothing saved applies no pods, at generation 0", () => {
    const { make, applied } = setup();
    const source = make();
    expect(source.load()).toBe(true);
    expect(applied).toEqual([[]]);
    expect(source.generation).toBe(0);
  });

  test("saves a state (0600) before applying it, and a restarted source applies it again", () => {
    const { make, applied, path } = setup();
    const source = make();
    source.load();
    expect(source.accept({ generation: 4, pods: [hubPod("a", "u1")] })).toEqual({ ok: true });
    expect(source.generation).toBe(4);
    expect(JSON.parse(readFileSync(path, "utf8")).generation).toBe(4);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const pod = applied.at(-1)?.[0];
    expect(pod?.metadata.annotations?.["kubernetes.io/config.source"]).toBe("api");
    expect(pod?.metadata.uid).toBe("u1");
    expect(pod?.spec.containers[0]?.imagePullPolicy).toBe("Always");
    expect(pod?.metadata.ownerReferences?.[0]?.kind).toBe("DaemonSet");

    const again = make();
    expect(again.load()).toBe(true);
    expect(again.generation).toBe(4);
    expect(applied.at(-1)).toEqual(applied.at(-2) as Pod[]);
  });

  test("a refused state changes neither the file nor the pods", () => {
    const { make, applied, path } = setup();
    const source = make();
    source.load();
    source.accept({ generation: 4, pods: [hubPod("a", "u1")] });
    const before = readFileSync(path, "utf8");
    const r = source.accept({ generation: 5, pods: [{ kind: "Pod" }] });
    expect(r.ok).toBe(false);
    expect(readFileSync(path, "utf8")).toBe(before);
    expect(applied).toHaveLength(2);
    expect(source.generation).toBe(4);
  });

  test("a state that cannot be saved (the disk full) is applied all the same and saved later", () => {
    const clock = new FakeClock();
    const { make, applied, path, dir } = setup(clock);
    const source = make();
    source.load();
    source.accept({ generation: 4, pods: [hubPod("a", "u1")] });
    // The folder cannot hold the file now: every write fails, as on a full disk.
    rmSync(join(dir, "hub"), { recursive: true });
    writeFileSync(join(dir, "hub"), "");
    expect(source.accept({ generation: 5, pods: [hubPod("b", "u2")] })).toEqual({ ok: true });
    expect(source.generation).toBe(5);
    expect(applied.at(-1)?.map((p) => p.metadata.uid)).toEqual(["u2"]);
    expect(source.unsaved).toContain(`cannot save the desired state to ${path}`);
    clock.step(5000);
    expect(source.unsaved).toBeDefined();
    rmSync(join(dir, "hub"));
    clock.step(5000);
    expect(source.unsaved).toBeUndefined();
    expect(JSON.parse(readFileSync(path, "utf8")).generation).toBe(5);
    // A later state cancels the retry of an older one: the newest is what stays on disk.
    clock.step(60_000);
    expect(JSON.parse(readFileSync(path, "utf8")).generation).toBe(5);
  });

  test("an unreadable saved state applies nothing, so running hub pods are not orphans", () => {
    const { make, applied, path } = setup();
    make().accept({ generation: 4, pods: [hubPod("a", "u1")] });
    writeFileSync(path, "{not json");
    const source = make();
    expect(source.load()).toBe(false);
    expect(applied).toHaveLength(1);
    expect(source.generation).toBe(0);
  });
});

describe("createHubPodSource() with ConfigMaps and Secrets", () => {
  const cm = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "cfg" }, data: { a: "1" } };
  const secret = {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "creds" },
    stringData: { password: "s3cret" },
  };

  test("validates them, saves them with the pods, and hands them over before the pods", () => {
    const { path } = setup();
    const calls: string[] = [];
    let handed: ConfigObject[] = [];
    const source = createHubPodSource({
      nodeName: "cam-1",
      path,
      log: nullLogger,
      apply: (pods) => calls.push(`pods ${pods.length}`),
      applyObjects: (list) => {
        handed = list;
        calls.push(`objects ${list.length}`);
      },
    });
    const r = source.accept({
      generation: 2,
      pods: [hubPod("a", "u1")],
      configMaps: [cm],
      secrets: [secret],
    });
    expect(r).toEqual({ ok: true });
    expect(calls).toEqual(["objects 2", "pods 1"]);
    expect(handed.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([
      "ConfigMap/cfg",
      "Secret/creds",
    ]);
    expect(handed[1]?.data).toEqual({ password: Buffer.from("s3cret").toString("base64") });
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  test("a restarted source brings its objects back from disk", () => {
    const { make, objects } = setup();
    make().accept({ generation: 2, pods: [], configMaps: [cm], secrets: [secret] });
    objects.length = 0;
    expect(make().load()).toBe(true);
    expect(objects[0]?.map((o) => o.metadata.name)).toEqual(["cfg", "creds"]);
  });

  test("an invalid object refuses the whole state, naming it and the field", () => {
    const { make, objects } = setup();
    const source = make();
    source.load();
    const bad = { ...secret, data: { password: "not base64!" }, stringData: undefined };
    const r = source.accept({ generation: 3, pods: [hubPod("a", "u1")], secrets: [bad] });
    expect(r).toMatchObject({
      ok: false,
      reason: expect.stringContaining('secrets[0] ("creds"): data[password]'),
    });
    expect(objects).toHaveLength(1);
  });
});

describe("createHubPodSource() on a disk that cannot be written", () => {
  test("says each failed save of the file to the state-write reporter, then that it is written", () => {
    const clock = new FakeClock();
    const { path } = setup();
    const said: string[] = [];
    const source = createHubPodSource({
      nodeName: "cam-1",
      path,
      log: nullLogger,
      apply: () => {},
      applyObjects: () => {},
      clock,
      retrySaveMs: 5000,
      stateWrites: {
        failed: (file) => said.push(`failed ${file}`),
        succeeded: (file) => said.push(`written ${file}`),
        failing: () => [],
      },
    });
    expect(source.accept({ generation: 1, pods: [hubPod("a", "u1")] })).toEqual({ ok: true });
    // A folder in the way of the temp file fails the write as a full disk would, without root.
    mkdirSync(`${path}.tmp`);
    expect(source.accept({ generation: 2, pods: [hubPod("b", "u2")] })).toEqual({ ok: true });
    clock.step(5000);
    rmSync(`${path}.tmp`, { recursive: true });
    clock.step(5000);
    expect(said).toEqual([
      `written ${path}`,
      `failed ${path}`,
      `failed ${path}`,
      `written ${path}`,
    ]);
    expect(JSON.parse(readFileSync(path, "utf8")).generation).toBe(2);
  });
});
