// The manifest folder as a user edits it: invalid manifests of every kind, bad edits of a running
// pod, JSON and multi-document files, ignored names, and a folder that appears late. The
// compiled agent against the real test bed; needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { eventually } from "../lib/testbed.ts";

const agent = new TestAgent();
const late = new TestAgent();
const img = agent.tb.busybox;

function pod(name: string, command = "sleep 3600", extra = ""): string {
  return `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
    - name: c
      image: ${img}
      command: ["sh", "-c", ${JSON.stringify(command)}]
${extra}`;
}

const statusOf = (p: Pod) => p.status?.containerStatuses?.find((c) => c.name === "c");
const running = (p: Pod) =>
  p.status?.phase === "Running" && statusOf(p)?.state?.running !== undefined;

interface Event {
  reason: string;
  message: string;
}

async function events(a: TestAgent): Promise<Event[]> {
  const res = await a.request("/api/v1/events");
  return ((await res.json()) as { items: Event[] }).items;
}

/** Waits for an InvalidManifest event about `file` whose message matches `what`; returns it. */
async function invalidManifestEvent(file: string, what: RegExp): Promise<string> {
  const path = join(agent.manifests, file);
  const ev = await eventually(
    `an InvalidManifest event about ${file}`,
    async () =>
      (await events(agent)).find(
        (e) => e.reason === "InvalidManifest" && e.message.includes(path) && what.test(e.message),
      ),
    15_000,
    200,
  );
  return ev.message;
}

beforeAll(async () => {
  agent.writeManifest("keeper.yaml", pod("keeper"));
  await agent.start();
}, 60_000);

afterAll(async () => {
  await agent.cleanup();
  await late.cleanup();
}, 120_000);

describe("fleetlet agent with invalid manifests (needs root and the test bed)", () => {
  const cases: [string, string, string | (() => string), RegExp][] = [
    ["bad YAML", "badyaml.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: x\n", /invalid YAML/],
    [
      "containers of the wrong type",
      "wrongtype.yaml",
      "apiVersion: v1\nkind: Pod\nmetadata: {name: wt}\nspec: {containers: 5}\n",
      /spec\.containers/,
    ],
    [
      "no containers",
      "nocontainers.yaml",
      "apiVersion: v1\nkind: Pod\nmetadata: {name: nc}\nspec: {}\n",
      /spec\.containers/,
    ],
    ["an invalid name", "badname.yaml", () => pod("Foo_Bar"), /metadata\.name/],
    [
      "a container without an image",
      "noimage.yaml",
      "apiVersion: v1\nkind: Pod\nmetadata: {name: ni}\nspec: {containers: [{name: c}]}\n",
      /spec\.containers\[0\]\.image/,
    ],
    [
      "a probe with two handlers",
      "twohandlers.yaml",
      () =>
        pod(
          "th",
          "sleep 3600",
          "      livenessProbe:\n        exec: {command: [true]}\n        tcpSocket: {port: 80}\n",
        ),
      /livenessProbe/,
    ],
    [
      "a pod named like one in an earlier file",
      "zz-duplicate.yaml",
      () => pod("keeper"),
      /already defined in manifest .*keeper\.yaml/,
    ],
    [
      "an 11 MB file",
      "huge.yaml",
      () => `${pod("huge")}# ${"x".repeat(11 * 1024 * 1024)}\n`,
      /too large/,
    ],
  ];
  for (const [what, file, text, field] of cases) {
    test(`${what} is reported as InvalidManifest naming the file and the field; other pods keep running`, async () => {
      const before = await agent.waitPod("keeper", "Running", running);
      agent.writeManifest(file, typeof text === "string" ? text : text());
      await invalidManifestEvent(file, field);
      const after = await agent.waitPod("keeper", "Running", running);
      expect(statusOf(after)?.containerID).toBe(statusOf(before)?.containerID);
      expect(agent.proc?.exitCode ?? null).toBeNull();
      agent.removeManifest(file);
    }, 30_000);
  }
});

describe("fleetlet agent reporting an invalid manifest (needs root and the test bed)", () => {
  test("its event is about manifest/FILE, and its warning is logged once", async () => {
    agent.writeManifest(
      "once.yaml",
      "apiVersion: v1\nkind: Pod\nmetadata: {name: once}\nspec: {}\n",
    );
    await invalidManifestEvent("once.yaml", /spec\.containers/);
    const event = (await agent.events()).find(
      (e) => e.reason === "InvalidManifest" && e.message.includes("once.yaml"),
    );
    expect(event?.involvedObject).toEqual({
      kind: "Manifest",
      namespace: "default",
      name: "once.yaml",
    });
    expect(agent.cli(["get", "events"]).stdout).toMatch(
      /\sWarning\s+InvalidManifest\s+manifest\/once\.yaml\s/,
    );
    const path = join(agent.manifests, "once.yaml");
    const warnings = agent.output.split("\n").filter((l) => / WARN /.test(l) && l.includes(path));
    expect(warnings).toHaveLength(1);
    agent.removeManifest("once.yaml");
  }, 30_000);
});

describe("fleetlet agent with edits of a running pod's manifest (needs root and the test bed)", () => {
  test("an invalid edit keeps the last valid pod running until the file is fixed, then it is replaced", async () => {
    agent.writeManifest("edited.yaml", pod("edited"));
    const first = await agent.waitPod("edited", "Running", running);
    agent.writeManifest(
      "edited.yaml",
      pod("edited").replace(`image: ${img}`, "image: 5\n      ports: 7"),
    );
    const message = await invalidManifestEvent("edited.yaml", /spec\.containers\[0\]\.image/);
    expect(message).toContain("last valid version keeps running");
    await Bun.sleep(2500); // a full relist of the folder later: still the same container
    const kept = await agent.waitPod("edited", "Running", running);
    expect(kept.metadata.uid).toBe(first.metadata.uid);
    expect(statusOf(kept)?.containerID).toBe(statusOf(first)?.containerID);
    agent.writeManifest("edited.yaml", pod("edited", "sleep 3601"));
    const fixed = await agent.waitPod(
      "edited",
      "replaced",
      (p) => p.metadata.uid !== first.metadata.uid && running(p),
    );
    expect(statusOf(fixed)?.containerID).not.toBe(statusOf(first)?.containerID);
  }, 60_000);

  test("an invalid edit outlives an agent killed and started again: the last valid pod keeps its container", async () => {
    agent.writeManifest("survivor.yaml", pod("survivor"));
    const first = await agent.waitPod("survivor", "Running", running);
    agent.writeManifest("survivor.yaml", pod("survivor").replace("containers:", "containers: 7"));
    await invalidManifestEvent("survivor.yaml", /survivor/);
    await agent.stop("SIGKILL");
    await agent.start();
    await invalidManifestEvent("survivor.yaml", /last valid version keeps running/);
    await Bun.sleep(2500); // a full relist of the folder later: still the same container
    const kept = await agent.waitPod("survivor", "Running", running);
    expect(kept.metadata.uid).toBe(first.metadata.uid);
    expect(statusOf(kept)?.containerID).toBe(statusOf(first)?.containerID);
    expect(statusOf(kept)?.restartCount).toBe(0);
    agent.removeManifest("survivor.yaml");
    await eventually(
      "the survivor pod to be gone",
      async () => (await agent.pod("survivor")) === undefined,
    );
  }, 60_000);

  test("a file truncated in place and written a moment later keeps its pod's container", async () => {
    const file = join(agent.manifests, "inplace.yaml");
    writeFileSync(file, pod("inplace"));
    const first = await agent.waitPod("inplace", "Running", running);
    // As `cmd > file` does: the shell truncates the file, the command writes it later.
    writeFileSync(file, "");
    await invalidManifestEvent("inplace.yaml", /the file is empty/);
    await Bun.sleep(2500); // a full relist of the folder later: still the same container
    writeFileSync(file, pod("inplace"));
    await Bun.sleep(500);
    const kept = await agent.waitPod("inplace", "Running", running);
    expect(kept.metadata.uid).toBe(first.metadata.uid);
    expect(statusOf(kept)?.containerID).toBe(statusOf(first)?.containerID);
    agent.removeManifest("inplace.yaml");
  }, 60_000);

  test("an invalid edit, then deleting the file, removes the pod", async () => {
    await agent.waitPod("edited", "Running", running);
    agent.writeManifest("edited.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: edited\n");
    await invalidManifestEvent("edited.yaml", /invalid YAML/);
    expect(running((await agent.pod("edited")) as Pod)).toBe(true);
    agent.removeManifest("edited.yaml");
    await eventually(
      "the edited pod to be gone",
      async () => (await agent.pod("edited")) === undefined,
      30_000,
    );
  }, 60_000);
});

describe("fleetlet agent manifest formats and names (needs root and the test bed)", () => {
  test("a JSON manifest runs its pod", async () => {
    const json = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "fromjson" },
      spec: {
        hostNetwork: true,
        terminationGracePeriodSeconds: 1,
        containers: [{ name: "c", image: img, command: ["sleep", "3600"] }],
      },
    };
    agent.writeManifest("fromjson.json", JSON.stringify(json));
    await agent.waitPod("fromjson", "Running", running);
    agent.removeManifest("fromjson.json");
  }, 60_000);

  test("a multi-document YAML file runs one pod per document", async () => {
    agent.writeManifest("multi.yaml", `${pod("multi-one")}---\n${pod("multi-two")}`);
    await agent.waitPod("multi-one", "Running", running);
    await agent.waitPod("multi-two", "Running", running);
    agent.removeManifest("multi.yaml");
  }, 60_000);

  test("hidden files and editor temp files are ignored", async () => {
    const names = [".hidden.yaml", "edit.yaml~", "#edit.yaml#", ".edit.yaml.swp", "edit.yaml.tmp"];
    for (const [i, name] of names.entries()) {
      writeFileSync(join(agent.manifests, name), pod(`ignored${i}`));
    }
    agent.writeManifest("marker.yaml", pod("marker"));
    await agent.waitPod("marker", "Running", running);
    await Bun.sleep(2500); // one full relist of the folder later
    const podNames = (await agent.pods()).map((p) => p.metadata.name);
    expect(podNames.filter((n) => n.startsWith("ignored"))).toEqual([]);
    const evs = await events(agent);
    for (const name of names) expect(evs.some((e) => e.message.includes(name))).toBe(false);
    for (const name of names) rmSync(join(agent.manifests, name));
    agent.removeManifest("marker.yaml");
  }, 60_000);
});

describe("fleetlet agent started before its manifest folder exists (needs root and the test bed)", () => {
  test("a manifest written while the folder did not exist is picked up once the folder appears", async () => {
    rmSync(late.manifests, { recursive: true, force: true });
    await late.start();
    const staging = join(late.dir, "staging");
    mkdirSync(staging);
    writeFileSync(join(staging, "late.yaml"), pod("late"));
    await Bun.sleep(1000);
    expect(await late.pods()).toEqual([]);
    renameSync(staging, late.manifests);
    await late.waitPod("late", "Running", running);
  }, 60_000);
});
