// Helpers for e2e tests of deploying from the hub: the CLI against a TestHub, DaemonSet YAML,
// and reading the hub's rollout view.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PodStatus } from "../../src/api/types.ts";
import type { RolloutView } from "../../src/hub/deploy/status.ts";
import type { TestHub } from "./hub.ts";
import { fleetletBin } from "./testbed.ts";

/** Runs `fleetlet ARGS --hub URL --token T` and returns its exit code and output. */
export function hubCli(hub: TestHub, args: string[]) {
  const p = Bun.spawnSync([fleetletBin, ...args, "--hub", hub.url, "--token", hub.operatorToken], {
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

/** The same, without blocking the test's event loop (for commands that wait). */
export async function hubCliAsync(hub: TestHub, args: string[]) {
  const p = Bun.spawn([fleetletBin, ...args, "--hub", hub.url, "--token", hub.operatorToken], {
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([
    new Response(p.stdout).text(),
    new Response(p.stderr).text(),
    p.exited,
  ]);
  return { code, stdout, stderr };
}

export interface DaemonSetYaml {
  name: string;
  image: string;
  command?: string;
  nodeSelector?: Record<string, string>;
  annotations?: Record<string, string>;
  minReadySeconds?: number;
  /** Extra YAML under the container (indented by the caller's needs: 8 spaces). */
  container?: string;
  /** Extra YAML under the pod spec (6 spaces). */
  podSpec?: string;
}

/** A DaemonSet manifest. */
export function daemonSetYaml(d: DaemonSetYaml): string {
  const map = (m: Record<string, string> | undefined, indent: string) =>
    Object.entries(m ?? {})
      .map(([k, v]) => `${indent}${k}: ${JSON.stringify(v)}\n`)
      .join("");
  return `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: ${d.name}
${d.annotations ? `  annotations:\n${map(d.annotations, "    ")}` : ""}spec:
  selector:
    matchLabels:
      app: ${d.name}
${d.minReadySeconds !== undefined ? `  minReadySeconds: ${d.minReadySeconds}\n` : ""}  updateStrategy:
    rollingUpdate:
      maxUnavailable: 1
  template:
    metadata:
      labels:
        app: ${d.name}
    spec:
      terminationGracePeriodSeconds: 1
${d.nodeSelector ? `      nodeSelector:\n${map(d.nodeSelector, "        ")}` : ""}${d.podSpec ?? ""}      containers:
        - name: main
          image: ${d.image}
          command: ["sh", "-c", ${JSON.stringify(d.command ?? "sleep 3600")}]
${d.container ?? ""}`;
}

/** Writes `text` to a fresh temp file and returns its path. */
export function tempManifest(name: string, text: string): string {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-apply-e2e-"));
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

/** The hub's rollout view of a DaemonSet. */
export async function rolloutView(hub: TestHub, name: string): Promise<RolloutView> {
  const res = await hub.api(`/apis/apps/v1/namespaces/default/daemonsets/${name}/rollout`);
  if (res.status !== 200) throw new Error(`rollout view: HTTP ${res.status}: ${await res.text()}`);
  return (await res.json()) as RolloutView;
}

/** What a device reports of a pod of its desired state: Ready, or its container crash-looping. */
export function reportedStatus(crash: boolean): PodStatus {
  if (!crash) return { phase: "Running", conditions: [{ type: "Ready", status: "True" }] };
  return {
    phase: "Running",
    containerStatuses: [
      {
        name: "main",
        state: { waiting: { reason: "CrashLoopBackOff" } },
        lastState: { terminated: { exitCode: 1, reason: "Error" } },
        ready: false,
        restartCount: 2,
        image: "busybox",
        imageID: "",
      },
    ],
  };
}
