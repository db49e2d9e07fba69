// Device plugins (the kubelet's v1beta1 API): the compiled agent serving Registration on
// kubelet.sock, and the test device plugin (test/lib/device-plugin.ts, on fleetlet's own gRPC
// stack) as a process of its own, killed and restarted like a real one; in process for the bad
// plugins. Its devices are nodes made with mknod of a major no driver has (240). Needs root and
// the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Node } from "../../src/api/node.ts";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { TestDevicePlugin } from "../lib/device-plugin.ts";
import type { DevicePluginProcessConfig } from "../lib/device-plugin-main.ts";
import { shellPodManifest } from "../lib/manifests.ts";
import { eventually, repoRoot } from "../lib/testbed.ts";

const WIDGET = "example.com/widget";
const dir = mkdtempSync("/tmp/fl-dp-");
const plugins = join(dir, "plugins");
const nodesDir = join(dir, "dev");
const ids = ["w0", "w1", "w2", "w3"];
const nodeOf = (id: string) => join(nodesDir, id);
const checkpoint = join(plugins, "kubelet_internal_checkpoint");

const agentConfig = join(dir, "agent.yaml");
const agent = new TestAgent({ args: ["--config", agentConfig] });

/** The plugin process's config: four widgets, the last first in its preference. */
const pluginConfig: DevicePluginProcessConfig = {
  dir: plugins,
  socketName: "widget.sock",
  resourceName: WIDGET,
  devices: ids.map((id) => ({ id, healthy: true })),
  preStartRequired: true,
  preferredAvailable: true,
  preference: ["w3", "w1", "w0", "w2"],
  env: "WIDGETS",
  deviceNodes: Object.fromEntries(ids.map((id) => [id, nodeOf(id)])),
};
const pluginConfigPath = join(dir, "plugin.json");

/** The test device plugin as a process; its stdout lines are kept. */
class PluginProcess {
  proc: ReturnType<typeof Bun.spawn> | undefined;
  lines: string[] = [];

  start(): void {
    writeFileSync(pluginConfigPath, JSON.stringify(pluginConfig));
    this.lines = [];
    const proc = Bun.spawn(
      [process.execPath, join(repoRoot, "test/lib/device-plugin-main.ts"), pluginConfigPath],
      { stdout: "pipe", stderr: "inherit" },
    );
    this.proc = proc;
    void (async () => {
      const decoder = new TextDecoder();
      let rest = "";
      for await (const chunk of proc.stdout) {
        rest += decoder.decode(chunk);
        const parts = rest.split("\n");
        rest = parts.pop() ?? "";
        this.lines.push(...parts);
      }
    })();
  }

  /** Waits for the `n`th "registered" line since start(). */
  registered(n = 1): Promise<unknown> {
    return eventually(`the plugin registered (${n})`, async () =>
      this.lines.filter((l) => l === "registered").length >= n ? true : undefined,
    );
  }

  /** Re-reads its config (SIGHUP): its new device list goes out. */
  reload(): void {
    writeFileSync(pluginConfigPath, JSON.stringify(pluginConfig));
    this.proc?.kill("SIGHUP");
  }

  async stop(signal: "SIGTERM" | "SIGKILL"): Promise<void> {
    this.proc?.kill(signal);
    await this.proc?.exited;
    this.proc = undefined;
  }
}

const plugin = new PluginProcess();
const inProcess: TestDevicePlugin[] = [];

async function widgets(): Promise<{ capacity?: string; allocatable?: string }> {
  const res = await agent.request(`/api/v1/nodes/${agent.nodeName}`);
  const n = (await res.json()) as Node;
  return { capacity: n.status.capacity?.[WIDGET], allocatable: n.status.allocatable?.[WIDGET] };
}

const heldIds = (pod: Pod | undefined, resource = WIDGET) =>
  (
    pod?.status?.containerStatuses?.[0]?.allocatedResourcesStatus?.find((r) => r.name === resource)
      ?.resources ?? []
  )
    .map((r) => r.resourceID)
    .sort();

const running = (p: Pod) => p.status?.phase === "Running";
const failed = (p: Pod) => p.status?.phase === "Failed";
const containerOf = (p: Pod | undefined) => p?.status?.containerStatuses?.[0];

function widgetPod(name: string, count: number, script = "sleep 3600", resource = WIDGET) {
  agent.writeManifest(
    `${name}.yaml`,
    shellPodManifest(name, agent.tb.busybox, script, {
      resources: `{limits: {${resource}: ${count}}}`,
    }),
  );
}

beforeAll(async () => {
  mkdirSync(nodesDir);
  for (const [i, id] of ids.entries()) {
    const p = Bun.spawnSync(["mknod", nodeOf(id), "c", "240", String(20 + i)]);
    if (p.exitCode !== 0) throw new Error(`mknod ${nodeOf(id)} failed`);
  }
  writeFileSync(
    agentConfig,
    `devicePluginPath: ${plugins}\ndevicePluginCallTimeout: 2s\ndevicePluginWaitTimeout: 2m\n`,
  );
  await agent.start();
}, 60_000);

afterAll(async () => {
  for (const p of inProcess) p.stop();
  await plugin.stop("SIGTERM");
  await agent.cleanup();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe("device plugins (needs root and the test bed)", () => {
  test("a plugin registers on kubelet.sock and the node shows its devices", async () => {
    await eventually("kubelet.sock served", async () => existsSync(join(plugins, "kubelet.sock")));
    plugin.start();
    await plugin.registered();
    await eventually("four widgets in the node's status", async () => {
      const w = await widgets();
      return w.capacity === "4" && w.allocatable === "4";
    });
  }, 30_000);

  test("a pod asking for 2 gets exactly the 2 preferred devices, their nodes, and the plugin's env after PreStartContainer", async () => {
    widgetPod("two", 2, `echo WIDGETS=$WIDGETS; ls ${nodesDir}; sleep 3600`);
    const pod = await agent.waitPod("two", "Running", running);
    expect(heldIds(pod)).toEqual(["w1", "w3"]);
    const out = await eventually("the pod's output", async () => {
      const r = agent.cli(["logs", pod.metadata.name]);
      return r.stdout.includes("WIDGETS=") ? r.stdout : undefined;
    });
    const env = /^WIDGETS=(.*)$/m.exec(out)?.[1]?.split(",").sort();
    expect(env).toEqual(["w1", "w3"]);
    // Only its own nodes are in the container.
    expect(out).toContain("w1\nw3\n");
    expect(out).not.toContain("w0");
    // Allocate, then PreStartContainer before the container started, with the same devices.
    const calls = plugin.lines.filter((l) => !l.startsWith("registered"));
    expect(calls.map((l) => l.split(" ")[0])).toEqual(["Allocate", "PreStartContainer"]);
    for (const l of calls) expect(l.split(" ")[1]?.split(",").sort()).toEqual(["w1", "w3"]);
  }, 60_000);

  test("a pod asking for more than is free fails with the kubelet's reason and message", async () => {
    widgetPod("greedy", 3);
    const pod = await agent.waitPod("greedy", "Failed", failed);
    expect(pod.status?.reason).toBe("UnexpectedAdmissionError");
    expect(pod.status?.message).toBe(
      `Pod was rejected: Allocate failed due to requested number of devices unavailable for ${WIDGET}. Requested: 3, Available: 2, which is unexpected`,
    );
    agent.removeManifest("greedy.yaml");
  }, 30_000);

  test("a device marked unhealthy leaves allocatable, not capacity", async () => {
    pluginConfig.devices = ids.map((id) => ({ id, healthy: id !== "w0" }));
    plugin.reload();
    await eventually("w0 out of allocatable", async () => {
      const w = await widgets();
      return w.capacity === "4" && w.allocatable === "3";
    });
    pluginConfig.devices = ids.map((id) => ({ id, healthy: true }));
    plugin.reload();
    await eventually("w0 back", async () => (await widgets()).allocatable === "4");
  }, 30_000);

  test("the plugin and the agent killed and restarted: the pod keeps its devices and runs on, and none is handed out twice", async () => {
    const before = containerOf(await agent.pod("two"));
    await plugin.stop("SIGKILL");
    // Gone: its devices are unhealthy, so nothing is allocatable, but they stay counted.
    await eventually("the widgets unhealthy", async () => {
      const w = await widgets();
      return w.capacity === "4" && w.allocatable === "0";
    });
    plugin.start();
    await plugin.registered();
    await eventually("the widgets back", async () => (await widgets()).allocatable === "4");
    expect(await agent.stop("SIGKILL")).not.toBe(0);
    await agent.start();
    // The agent removed the plugin's socket at start; the plugin saw the new kubelet.sock.
    await plugin.registered(2);
    const after = await agent.waitPod("two", "Running", running);
    expect(containerOf(after)?.containerID).toBe(before?.containerID);
    expect(containerOf(after)?.restartCount).toBe(0);
    expect(heldIds(after)).toEqual(["w1", "w3"]);
    expect(existsSync(checkpoint)).toBe(true);
    widgetPod("rest", 2);
    const rest = await agent.waitPod("rest", "Running", running);
    expect(heldIds(rest)).toEqual(["w0", "w2"]);
    agent.removeManifest("rest.yaml");
  }, 90_000);

  test("at boot a pod waits for its plugin, known from the checkpoint, and starts when it registers 30 s later", async () => {
    await plugin.stop("SIGTERM");
    await agent.stop("SIGTERM");
    widgetPod("late", 1);
    await agent.start();
    const waiting = await agent.waitPod(
      "late",
      "waiting for its device plugin",
      (p) => containerOf(p)?.state.waiting?.reason === "DevicePluginNotRegistered",
    );
    expect(waiting.status?.phase).toBe("Pending");
    expect(
      (await agent.events()).some(
        (e) =>
          e.reason === "DevicePluginNotRegistered" &&
          e.involvedObject.name === `late-${agent.nodeName}`,
      ),
    ).toBe(true);
    await Bun.sleep(30_000);
    expect((await agent.pod("late"))?.status?.phase).toBe("Pending");
    plugin.start();
    await plugin.registered();
    const pod = await agent.waitPod("late", "Running", running);
    expect(heldIds(pod)).toHaveLength(1);
    agent.removeManifest("late.yaml");
  }, 120_000);
});

describe("bad device plugins (needs root and the test bed)", () => {
  const inProc = (resourceName: string, extra: Partial<TestDevicePlugin["options"]> = {}) => {
    const p = new TestDevicePlugin({
      dir: plugins,
      socketName: `${resourceName.replace(/\W/g, "-")}.sock`,
      resourceName,
      devices: [{ id: "d0", healthy: true }],
      ...extra,
    });
    inProcess.push(p);
    return p;
  };

  test("a registration with an unsupported version or a bad resource name is refused with the kubelet's text", async () => {
    const old = inProc("example.com/old", { apiVersion: "v1alpha1" });
    await old.start();
    await expect(old.register()).rejects.toThrow(
      'requested API version "v1alpha1" is not supported by kubelet. Supported version is ["v1beta1"]',
    );
    const bad = inProc("widget");
    await bad.start();
    await expect(bad.register()).rejects.toThrow('the ResourceName "widget" is invalid');
    const native = inProc("kubernetes.io/widget");
    await native.start();
    await expect(native.register()).rejects.toThrow(
      'the ResourceName "kubernetes.io/widget" is invalid',
    );
  }, 30_000);

  test("a plugin that hangs in Allocate: the pod fails after the deadline with the reason, and the agent goes on", async () => {
    const hung = inProc("example.com/hang", { hangAllocate: true });
    await hung.start();
    await hung.register();
    await eventually("the hung plugin's device", async () => {
      const res = await agent.request(`/api/v1/nodes/${agent.nodeName}`);
      return ((await res.json()) as Node).status.allocatable?.["example.com/hang"] === "1";
    });
    widgetPod("stuck", 1, "sleep 3600", "example.com/hang");
    const pod = await agent.waitPod("stuck", "Failed", failed);
    expect(pod.status?.reason).toBe("UnexpectedAdmissionError");
    expect(pod.status?.message).toMatch(
      /^Pod was rejected: Allocate failed due to .*example\.com\/hang.*deadline of 2s exceeded.*, which is unexpected$/,
    );
    // The agent serves on: the pod holding widgets runs, and nothing of the hung pod is held.
    expect((await agent.pod("two"))?.status?.phase).toBe("Running");
    expect(heldIds(pod, "example.com/hang")).toEqual([]);
    agent.removeManifest("stuck.yaml");
  }, 60_000);

  test("a plugin listing 10,000 devices", async () => {
    const many = inProc("example.com/many", {
      devices: Array.from({ length: 10_000 }, (_, i) => ({ id: `m${i}`, healthy: true })),
    });
    await many.start();
    await many.register();
    await eventually("10,000 devices in the node's status", async () => {
      const res = await agent.request(`/api/v1/nodes/${agent.nodeName}`);
      return ((await res.json()) as Node).status.capacity?.["example.com/many"] === "10000";
    });
  }, 30_000);

  test("a malformed checkpoint is reported and rebuilt; the agent starts and its pods run on", async () => {
    const before = containerOf(await agent.pod("two"));
    await agent.stop("SIGTERM");
    writeFileSync(checkpoint, '{"Data": {"PodDeviceEntries": [{"PodUID": ');
    await agent.start();
    await plugin.registered(2);
    const after = await agent.waitPod("two", "Running", running);
    expect(containerOf(after)?.containerID).toBe(before?.containerID);
    expect(agent.output).toContain("kubelet_internal_checkpoint");
    await eventually("a checkpoint written anew", async () => {
      const text = await Bun.file(checkpoint).text();
      return text.includes('"Checksum"') ? true : undefined;
    });
  }, 60_000);
});
