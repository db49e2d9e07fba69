// Static pods end to end: the compiled agent, the test bed's containerd and registry, manifests
// written to a real folder. Needs root and the test bed (scripts/test starts both).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { eventually } from "../lib/testbed.ts";

const agent = new TestAgent();
const img = agent.tb.busybox;

function manifest(name: string, spec: string, extraMeta = ""): string {
  return `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
${extraMeta}spec:
${spec}`;
}

const container = (name: string, command: string, extra = "") => `    - name: ${name}
      image: ${img}
      command: ["sh", "-c", ${JSON.stringify(command)}]
${extra}`;

const status = (pod: Pod, name: string) =>
  pod.status?.containerStatuses?.find((c) => c.name === name);

beforeAll(() => agent.start(), 30_000);
afterAll(() => agent.cleanup(), 60_000);

describe("fleetlet agent with a manifest folder (needs root and the test bed)", () => {
  test("a manifest written to the folder becomes a Running pod with kubelet's identity", async () => {
    agent.writeManifest(
      "sleeper.yaml",
      manifest(
        "sleeper",
        `  terminationGracePeriodSeconds: 1\n  containers:\n${container("main", "sleep 3600")}`,
      ),
    );
    const pod = await agent.waitPod("sleeper", "Running", (p) => p.status?.phase === "Running");
    expect(pod.metadata.name).toBe(`sleeper-${agent.nodeName}`);
    expect(pod.metadata.namespace).toBe("default");
    expect(pod.metadata.annotations?.["kubernetes.io/config.source"]).toBe("file");
    expect(pod.metadata.annotations?.["kubernetes.io/config.hash"]).toBe(pod.metadata.uid);
    expect(pod.spec.nodeName).toBe(agent.nodeName);
    const c = status(pod, "main");
    expect(c?.state?.running?.startedAt).toBeDefined();
    expect(c?.containerID).toMatch(/^containerd:\/\/[0-9a-f]{64}$/);
    expect(c?.ready).toBe(true);
    expect(pod.status?.qosClass).toBe("BestEffort");
    expect(pod.status?.conditions?.find((x) => x.type === "Ready")?.status).toBe("True");
  }, 60_000);

  test("editing a manifest replaces the pod: the old one terminates, the new one runs", async () => {
    const before = await agent.waitPod("sleeper", "Running", (p) => p.status?.phase === "Running");
    agent.writeManifest(
      "sleeper.yaml",
      manifest(
        "sleeper",
        `  terminationGracePeriodSeconds: 1\n  containers:\n${container("main", "sleep 3601")}`,
        '  labels:\n    edited: "yes"\n',
      ),
    );
    const after = await agent.waitPod(
      "sleeper",
      "replaced and Running",
      (p) => p.metadata.uid !== before.metadata.uid && p.status?.phase === "Running",
    );
    expect(after.metadata.labels?.edited).toBe("yes");
    expect(status(after, "main")?.containerID).not.toBe(status(before, "main")?.containerID);
    const pods = await agent.pods();
    expect(pods.filter((p) => p.metadata.name === `sleeper-${agent.nodeName}`)).toHaveLength(1);
  }, 60_000);

  test("deleting a manifest stops and removes its pod", async () => {
    agent.removeManifest("sleeper.yaml");
    await eventually(
      "the sleeper pod to be gone",
      async () => (await agent.pod("sleeper")) === undefined,
      30_000,
    );
  }, 60_000);

  test("restartPolicy Always keeps restarting a failing container, with a rising restartCount", async () => {
    agent.writeManifest(
      "always.yaml",
      manifest("always", `  restartPolicy: Always\n  containers:\n${container("c", "exit 1")}`),
    );
    const pod = await agent.waitPod(
      "always",
      "restarted twice",
      (p) => (status(p, "c")?.restartCount ?? 0) >= 2,
      45_000,
    );
    expect(pod.status?.phase).toBe("Running");
    expect(status(pod, "c")?.lastState?.terminated?.exitCode).toBe(1);
    agent.removeManifest("always.yaml");
  }, 60_000);

  test("restartPolicy OnFailure restarts after a failure and ends Succeeded", async () => {
    agent.writeManifest(
      "onfailure.yaml",
      manifest(
        "onfailure",
        `  restartPolicy: OnFailure\n  volumes:\n    - name: s\n      emptyDir: {}\n  containers:\n${container("c", "if [ -f /s/once ]; then exit 0; fi; touch /s/once; exit 2", "      volumeMounts:\n        - { name: s, mountPath: /s }\n")}`,
      ),
    );
    const pod = await agent.waitPod(
      "onfailure",
      "Succeeded",
      (p) => p.status?.phase === "Succeeded",
      45_000,
    );
    expect(status(pod, "c")?.restartCount).toBe(1);
    expect(status(pod, "c")?.state?.terminated?.reason).toBe("Completed");
  }, 60_000);

  test("restartPolicy Never leaves a failed container Failed with restartCount 0", async () => {
    agent.writeManifest(
      "never.yaml",
      manifest("never", `  restartPolicy: Never\n  containers:\n${container("c", "exit 3")}`),
    );
    const pod = await agent.waitPod("never", "Failed", (p) => p.status?.phase === "Failed", 30_000);
    expect(status(pod, "c")?.restartCount).toBe(0);
    expect(status(pod, "c")?.state?.terminated?.exitCode).toBe(3);
    expect(status(pod, "c")?.state?.terminated?.reason).toBe("Error");
  }, 60_000);

  test("an invalid manifest is reported naming the file and field, and other pods are untouched", async () => {
    agent.writeManifest(
      "good.yaml",
      manifest("good", `  containers:\n${container("c", "sleep 3600")}`),
    );
    const good = await agent.waitPod("good", "Running", (p) => p.status?.phase === "Running");
    agent.writeManifest("bad.yaml", manifest("bad", `  containers:\n    - name: c\n`));
    const events = await eventually(
      "an InvalidManifest event",
      async () => {
        const res = await agent.request("/api/v1/events");
        const list = (await res.json()) as { items: { reason: string; message: string }[] };
        return (
          list.items.find(
            (e) => e.reason === "InvalidManifest" && e.message.includes("bad.yaml"),
          ) ?? undefined
        );
      },
      15_000,
    );
    expect(events.message).toContain("spec.containers[0].image");
    const still = await agent.pod("good");
    expect(status(still as Pod, "c")?.containerID).toBe(status(good, "c")?.containerID);
    agent.removeManifest("bad.yaml");
  }, 60_000);

  test("fleetlet get pods prints kubectl's columns and statuses", async () => {
    const r = agent.cli(["get", "pods"]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE$/);
    expect(r.stdout).toMatch(new RegExp(`good-${agent.nodeName}\\s+1/1\\s+Running\\s+0\\s+\\d+s`));
    expect(r.stdout).toMatch(new RegExp(`never-${agent.nodeName}\\s+0/1\\s+Error\\s+0`));
    expect(r.stdout).toMatch(new RegExp(`onfailure-${agent.nodeName}\\s+0/1\\s+Completed\\s+1`));
  });

  test("a restarted agent (kill -9) keeps running containers with the same IDs", async () => {
    const before = await agent.waitPod("good", "Running", (p) => p.status?.phase === "Running");
    await agent.stop("SIGKILL");
    await agent.start();
    const after = await agent.waitPod(
      "good",
      "Running again",
      (p) => status(p, "c")?.state?.running !== undefined,
    );
    expect(after.metadata.uid).toBe(before.metadata.uid);
    expect(status(after, "c")?.containerID).toBe(status(before, "c")?.containerID);
    expect(status(after, "c")?.restartCount).toBe(0);
  }, 60_000);
});
