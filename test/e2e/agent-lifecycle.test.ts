// The life of a static pod's containers end to end: crash-loop back-off, init containers, lifecycle
// hooks and graceful termination, env and the downward API, image pull policies and failures,
// host network and host ports. The compiled agent against the test bed's containerd and registry.
// Needs root and the test bed (scripts/test starts both).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ContainerStatus, Event, Pod } from "../../src/api/types.ts";
import { createCriClient } from "../../src/cri/index.ts";
import { TestAgent } from "../lib/agent.ts";
import { eventually, inSubnet } from "../lib/testbed.ts";

const agent = new TestAgent();
const img = agent.tb.busybox;
const hostDir = join(agent.dir, "host");
const cri = createCriClient({ endpoint: agent.tb.endpoint });

function manifest(name: string, spec: string, meta = ""): string {
  return `apiVersion: v1\nkind: Pod\nmetadata:\n  name: ${name}\n${meta}spec:\n${spec}`;
}

/** One container entry of a `containers:` or `initContainers:` list. */
function ctr(name: string, command: string, extra = "", image = img): string {
  return `    - name: ${name}\n      image: ${image}\n      command: ["sh", "-c", ${JSON.stringify(command)}]\n${extra}`;
}

const appStatus = (pod: Pod, name: string): ContainerStatus | undefined =>
  pod.status?.containerStatuses?.find((c) => c.name === name);
const initStatus = (pod: Pod, name: string): ContainerStatus | undefined =>
  pod.status?.initContainerStatuses?.find((c) => c.name === name);
const fullName = (name: string) => `${name}-${agent.nodeName}`;

async function podEvents(name: string): Promise<Event[]> {
  const sel = encodeURIComponent(`involvedObject.name=${fullName(name)}`);
  const res = await agent.request(`/api/v1/namespaces/default/events?fieldSelector=${sel}`);
  return ((await res.json()) as { items: Event[] }).items;
}

function waitEvent(name: string, reason: string, timeoutMs = 30_000): Promise<Event> {
  return eventually(
    `a ${reason} event of pod ${name}`,
    async () => (await podEvents(name)).find((e) => e.reason === reason),
    timeoutMs,
    200,
  );
}

/** The STATUS column of `fleetlet get pod NAME`. */
function cliStatus(name: string): string {
  const r = agent.cli(["get", "pod", fullName(name)]);
  const row = r.stdout.trim().split("\n")[1] ?? "";
  return row.trim().split(/\s+/)[2] ?? `(exit ${r.code}: ${r.stderr.trim()})`;
}

async function removeAndWaitGone(file: string, name: string): Promise<void> {
  agent.removeManifest(file);
  await eventually(`pod ${name} to be gone`, async () => (await agent.pod(name)) === undefined);
}

/** Ids of the pod's containers in the runtime, newest first. */
async function containerIds(name: string): Promise<string[]> {
  const { containers } = await cri.listContainers({
    filter: { labelSelector: { "io.kubernetes.pod.name": fullName(name) } },
  });
  return containers.sort((a, b) => b.createdAt - a.createdAt).map((c) => c.id);
}

/** Whether the runtime still runs the container (false once it exited or was removed). */
async function isRunning(id: string): Promise<boolean> {
  try {
    return (await cri.containerStatus({ containerId: id })).status?.state === "CONTAINER_RUNNING";
  } catch {
    return false;
  }
}

/** Seconds since boot, the clock containers and the host share (/proc/uptime). */
const uptime = () => Number(readFileSync("/proc/uptime", "utf8").split(" ")[0]);

beforeAll(async () => {
  mkdirSync(hostDir, { recursive: true });
  await agent.start();
}, 30_000);
afterAll(async () => {
  cri.close();
  await agent.cleanup();
}, 60_000);

describe("container restarts and CrashLoopBackOff (needs root and the test bed)", () => {
  test("a container that exits at once is restarted with doubling gaps and shows CrashLoopBackOff", async () => {
    agent.writeManifest("crash.yaml", manifest("crash", `  containers:\n${ctr("c", "exit 1")}`));
    // startedAt of each run, by container id, read from state and lastState while it loops.
    const started = new Map<string, number>();
    let message = "";
    let cliSawBackOff = false;
    await eventually(
      "five runs of the crashing container",
      async () => {
        const pod = await agent.pod("crash");
        const s = pod && appStatus(pod, "c");
        for (const t of [s?.state.terminated, s?.lastState.terminated]) {
          if (t?.containerID && t.startedAt) started.set(t.containerID, Date.parse(t.startedAt));
        }
        if (s?.state.waiting?.reason === "CrashLoopBackOff") {
          if (s.state.waiting.message?.startsWith("back-off 2s")) message = s.state.waiting.message;
          if (!cliSawBackOff) cliSawBackOff = cliStatus("crash") === "CrashLoopBackOff";
        }
        return started.size >= 5;
      },
      75_000,
      100,
    );
    const runs = [...started.values()].sort((a, b) => a - b);
    const gaps = runs.slice(1).map((t, i) => (t - (runs[i] as number)) / 1000);
    // startedAt has second precision, floored, so a gap of at least d seconds reads as >= d.
    expect(gaps[1]).toBeGreaterThanOrEqual(1);
    expect(gaps[2]).toBeGreaterThanOrEqual(2);
    expect(gaps[3]).toBeGreaterThanOrEqual(4);
    expect(gaps[3] as number).toBeGreaterThan(gaps[1] as number);
    const pod = (await agent.pod("crash")) as Pod;
    expect(message).toBe(
      `back-off 2s restarting failed container=c pod=${fullName("crash")}_default(${pod.metadata.uid})`,
    );
    expect(cliSawBackOff).toBe(true);
    const backOff = (await podEvents("crash")).find((e) => e.reason === "BackOff");
    expect(backOff?.message).toBe(
      `Back-off restarting failed container c in pod ${fullName("crash")}_default(${pod.metadata.uid})`,
    );
    await removeAndWaitGone("crash.yaml", "crash");
  }, 100_000);
});

describe("init containers (needs root and the test bed)", () => {
  const initSpec = (policy: string, secondInit: string) =>
    `  restartPolicy: ${policy}\n  terminationGracePeriodSeconds: 1\n  volumes:\n    - name: w\n      emptyDir: {}\n  initContainers:\n${ctr("one", "echo one >> /w/order; sleep 2", "      volumeMounts: [{ name: w, mountPath: /w }]\n")}${ctr("two", secondInit, "      volumeMounts: [{ name: w, mountPath: /w }]\n")}  containers:\n${ctr(
      "app",
      "cat /w/order; sleep 3600",
      // The postStart hook holds the app container's start for 2 s, so PodInitializing is seen.
      `      volumeMounts: [{ name: w, mountPath: /w }]\n      lifecycle:\n        postStart:\n          exec:\n            command: ["sleep", "2"]\n`,
    )}`;

  test("init containers run one by one in order and the pod goes Init:0/2, Init:1/2, PodInitializing, Running", async () => {
    agent.writeManifest(
      "init.yaml",
      manifest("init", initSpec("Always", "echo two >> /w/order; sleep 2")),
    );
    const seen: string[] = [];
    await eventually(
      "the init pod to be Running",
      () => {
        const s = cliStatus("init");
        if (seen.at(-1) !== s) seen.push(s);
        return s === "Running";
      },
      45_000,
      100,
    );
    const order = ["Init:0/2", "Init:1/2", "PodInitializing", "Running"];
    expect(seen.filter((s) => order.includes(s))).toEqual(order);
    const logs = agent.cli(["logs", fullName("init")]);
    expect(logs.stdout).toBe("one\ntwo\n");
    await removeAndWaitGone("init.yaml", "init");
  }, 60_000);

  test("a failing init container fails a restartPolicy Never pod (Init:Error)", async () => {
    agent.writeManifest("initnever.yaml", manifest("initnever", initSpec("Never", "exit 5")));
    const pod = await agent.waitPod("initnever", "Failed", (p) => p.status?.phase === "Failed");
    expect(initStatus(pod, "two")?.state.terminated?.exitCode).toBe(5);
    expect(appStatus(pod, "app")?.containerID).toBeUndefined();
    expect(cliStatus("initnever")).toBe("Init:Error");
    await removeAndWaitGone("initnever.yaml", "initnever");
  }, 60_000);

  test("a failing init container of a restartPolicy Always pod loops in Init:CrashLoopBackOff and the app never starts", async () => {
    agent.writeManifest("initloop.yaml", manifest("initloop", initSpec("Always", "exit 5")));
    const pod = await agent.waitPod(
      "initloop",
      "in init back-off",
      (p) => initStatus(p, "two")?.state.waiting?.reason === "CrashLoopBackOff",
      45_000,
    );
    expect(initStatus(pod, "two")?.restartCount).toBeGreaterThanOrEqual(1);
    expect(pod.status?.phase).toBe("Pending");
    expect(appStatus(pod, "app")?.containerID).toBeUndefined();
    expect(appStatus(pod, "app")?.state.waiting?.reason).toBe("PodInitializing");
    await eventually("get pods to show Init:CrashLoopBackOff", () =>
      cliStatus("initloop") === "Init:CrashLoopBackOff" ? true : undefined,
    );
    await removeAndWaitGone("initloop.yaml", "initloop");
  }, 60_000);
});

describe("lifecycle hooks and graceful termination (needs root and the test bed)", () => {
  test("a failing postStart exec hook kills the container, which is restarted", async () => {
    agent.writeManifest(
      "poststart.yaml",
      manifest(
        "poststart",
        `  terminationGracePeriodSeconds: 1\n  containers:\n${ctr("c", "sleep 3600", `      lifecycle:\n        postStart:\n          exec:\n            command: ["sh", "-c", "exit 7"]\n`)}`,
      ),
    );
    const ev = await waitEvent("poststart", "FailedPostStartHook");
    expect(ev.message).toContain("exited with 7");
    expect(ev.involvedObject.fieldPath).toBe("spec.containers{c}");
    await agent.waitPod(
      "poststart",
      "restarted",
      (p) => (appStatus(p, "c")?.restartCount ?? 0) >= 1,
    );
    await removeAndWaitGone("poststart.yaml", "poststart");
  }, 60_000);

  test("a preStop exec hook runs before the container is stopped", async () => {
    const spec = `  terminationGracePeriodSeconds: 5\n  volumes:\n    - name: h\n      hostPath: { path: ${hostDir}, type: Directory }\n  containers:\n${ctr("c", "sleep 3600", `      volumeMounts: [{ name: h, mountPath: /h }]\n      lifecycle:\n        preStop:\n          exec:\n            command: ["sh", "-c", "echo stopping > /h/prestop"]\n`)}`;
    agent.writeManifest("prestop.yaml", manifest("prestop", spec));
    await agent.waitPod("prestop", "Running", (p) => p.status?.phase === "Running");
    const [id] = await containerIds("prestop");
    expect(existsSync(join(hostDir, "prestop"))).toBe(false);
    agent.removeManifest("prestop.yaml");
    await eventually("the preStop hook's file", () => existsSync(join(hostDir, "prestop")));
    expect(readFileSync(join(hostDir, "prestop"), "utf8")).toBe("stopping\n");
    // `sleep` ignores nothing: had the hook run after the stop, exec would have found no process.
    await eventually("the container to stop", async () => !(await isRunning(id as string)));
  }, 60_000);

  /** Starts a container whose TERM trap writes the uptime to the host then runs `onTerm`,
   * removes its manifest, and returns seconds from TERM to the runtime reporting it dead. */
  async function timeToKill(name: string, grace: number, onTerm: string): Promise<number> {
    const file = `/h/${name}-term`;
    const script = `trap 'cat /proc/uptime > ${file}; ${onTerm}' TERM; while true; do sleep 0.1; done`;
    const spec = `  terminationGracePeriodSeconds: ${grace}\n  volumes:\n    - name: h\n      hostPath: { path: ${hostDir} }\n  containers:\n${ctr("c", script, "      volumeMounts: [{ name: h, mountPath: /h }]\n")}`;
    agent.writeManifest(`${name}.yaml`, manifest(name, spec));
    await agent.waitPod(name, "Running", (p) => p.status?.phase === "Running");
    const [id] = await containerIds(name);
    agent.removeManifest(`${name}.yaml`);
    const dead = await eventually(
      `pod ${name}'s container to stop`,
      async () => ((await isRunning(id as string)) ? undefined : uptime()),
      45_000,
      50,
    );
    const term = Number(readFileSync(join(hostDir, `${name}-term`), "utf8").split(" ")[0]);
    return dead - term;
  }

  test("a container that ignores TERM is killed after terminationGracePeriodSeconds (3 s)", async () => {
    const seconds = await timeToKill("ignoreterm", 3, "true");
    expect(seconds).toBeGreaterThanOrEqual(2.5);
    expect(seconds).toBeLessThan(8);
  }, 60_000);

  test("a container that exits on TERM stops at once, well within its 30 s grace period", async () => {
    const seconds = await timeToKill("exitonterm", 30, "exit 0");
    expect(seconds).toBeLessThan(2);
  }, 60_000);
});

describe("env and the downward API (needs root and the test bed)", () => {
  test("values, $(VAR) expansion and fieldRefs reach the container's environment", async () => {
    const ref = (path: string) => `\n          valueFrom: { fieldRef: { fieldPath: "${path}" } }`;
    const env = [
      ["A", `\n          value: alpha`],
      ["B", `\n          value: "$(A)-beta-$(NOPE)"`],
      ["POD_NAME", ref("metadata.name")],
      ["POD_NS", ref("metadata.namespace")],
      ["POD_UID", ref("metadata.uid")],
      ["NODE", ref("spec.nodeName")],
      ["POD_IP", ref("status.podIP")],
      ["HOST_IP", ref("status.hostIP")],
      ["TIER", ref("metadata.labels['tier']")],
    ]
      .map(([n, v]) => `        - name: ${n}${v}`)
      .join("\n");
    const spec = `  terminationGracePeriodSeconds: 1\n  containers:\n${ctr("c", "echo B=$B; sleep 3600", `      env:\n${env}\n`)}`;
    agent.writeManifest("env.yaml", manifest("env", spec, "  labels:\n    tier: edge\n"));
    const pod = await agent.waitPod("env", "Running", (p) => p.status?.phase === "Running");
    const r = agent.cli(["exec", fullName("env"), "--", "env"]);
    expect(r.code).toBe(0);
    const vars = new Map(
      r.stdout.split("\n").map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
    );
    expect(vars.get("A")).toBe("alpha");
    expect(vars.get("B")).toBe("alpha-beta-$(NOPE)");
    expect(vars.get("POD_NAME")).toBe(fullName("env"));
    expect(vars.get("POD_NS")).toBe("default");
    expect(vars.get("POD_UID")).toBe(pod.metadata.uid as string);
    expect(vars.get("NODE")).toBe(agent.nodeName);
    expect(inSubnet(vars.get("POD_IP") ?? "", agent.tb.cniSubnet)).toBe(true);
    expect(vars.get("POD_IP")).toBe(pod.status?.podIP as string);
    expect(vars.get("HOST_IP")).toBe(pod.status?.hostIP as string);
    expect(vars.get("TIER")).toBe("edge");
    await eventually("the log line", () =>
      agent.cli(["logs", fullName("env")]).stdout === "B=alpha-beta-$(NOPE)\n" ? true : undefined,
    );
    await removeAndWaitGone("env.yaml", "env");
  }, 60_000);
});

describe("images and pull policies (needs root and the test bed)", () => {
  const single = (image: string, extra = "") =>
    `  terminationGracePeriodSeconds: 1\n  containers:\n${ctr("c", "sleep 3600", extra, image)}`;

  test("imagePullPolicy Never with an image that is not present waits with ErrImageNeverPull", async () => {
    const image = `${agent.tb.registry}/fleetlet-test/never-pulled:v1`;
    agent.writeManifest(
      "neverpull.yaml",
      manifest("neverpull", single(image, "      imagePullPolicy: Never\n")),
    );
    const pod = await agent.waitPod(
      "neverpull",
      "waiting with ErrImageNeverPull",
      (p) => appStatus(p, "c")?.state.waiting?.reason === "ErrImageNeverPull",
    );
    expect(appStatus(pod, "c")?.state.waiting?.message).toContain(image);
    expect((await podEvents("neverpull")).some((e) => e.reason === "Pulling")).toBe(false);
    expect(cliStatus("neverpull")).toBe("ErrImageNeverPull");
    await removeAndWaitGone("neverpull.yaml", "neverpull");
  }, 60_000);

  test("a missing image shows ErrImagePull, then ImagePullBackOff, with Failed and BackOff events", async () => {
    agent.writeManifest("missing.yaml", manifest("missing", single(agent.tb.missingImage)));
    const reasons: string[] = [];
    let cliSaw = "";
    // Through the pod watch, which sees every change of the status: ErrImagePull may last only
    // until the next sync, which finds the pull backing off.
    await agent.watchPod("missing", "to show ErrImagePull then ImagePullBackOff", (seen) => {
      const r = appStatus(seen.at(-1) as Pod, "c")?.state.waiting?.reason;
      if (r && reasons.at(-1) !== r) reasons.push(r);
      if (r === "ImagePullBackOff" && cliSaw === "") cliSaw = cliStatus("missing");
      return reasons.includes("ImagePullBackOff") && cliSaw !== "";
    });
    expect(reasons.indexOf("ErrImagePull")).toBeGreaterThanOrEqual(0);
    expect(reasons.indexOf("ErrImagePull")).toBeLessThan(reasons.indexOf("ImagePullBackOff"));
    expect(["ImagePullBackOff", "ErrImagePull"]).toContain(cliSaw);
    const events = await podEvents("missing");
    const failed = events.find(
      (e) => e.reason === "Failed" && e.message.includes("Failed to pull"),
    );
    expect(failed?.type).toBe("Warning");
    expect(failed?.message).toContain(agent.tb.missingImage);
    expect(events.some((e) => e.reason === "Failed" && e.message === "Error: ErrImagePull")).toBe(
      true,
    );
    const backOff = events.find((e) => e.reason === "BackOff");
    expect(backOff?.message).toBe(`Back-off pulling image "${agent.tb.missingImage}"`);
    await removeAndWaitGone("missing.yaml", "missing");
  }, 60_000);

  test("IfNotPresent with an image already present starts without pulling it again", async () => {
    agent.writeManifest("present.yaml", manifest("present", single(img)));
    await agent.waitPod("present", "Running", (p) => p.status?.phase === "Running");
    const events = await podEvents("present");
    expect(events.some((e) => e.reason === "Pulling")).toBe(false);
    expect(events.find((e) => e.reason === "Pulled")?.message).toBe(
      `Container image "${img}" already present on machine`,
    );
    await removeAndWaitGone("present.yaml", "present");
  }, 60_000);

  test("image: busybox (docker.io, tag latest: pull Always) is pulled through the registry mirror and runs", async () => {
    agent.writeManifest("dockerhub.yaml", manifest("dockerhub", single("busybox")));
    const pod = await agent.waitPod("dockerhub", "Running", (p) => p.status?.phase === "Running");
    // containerd 1.6 reports the image by its first tag, which may be the test bed's other
    // name for the same busybox; the imageID is the pulled digest either way.
    expect(appStatus(pod, "c")?.imageID).toMatch(/@sha256:[0-9a-f]{64}$/);
    const events = await podEvents("dockerhub");
    expect(events.find((e) => e.reason === "Pulling")?.message).toBe('Pulling image "busybox"');
    expect(events.find((e) => e.reason === "Pulled")?.message).toMatch(
      /^Successfully pulled image "busybox" in /,
    );
    await removeAndWaitGone("dockerhub.yaml", "dockerhub");
  }, 60_000);
});

describe("host network and host ports (needs root and the test bed)", () => {
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const httpd = (text: string, listen: string) =>
    `mkdir -p /tmp/www && echo ${text} > /tmp/www/index.html && exec httpd -f -p ${listen} -h /tmp/www`;
  const get = (url: string) =>
    eventually(`${url} to answer`, async () => (await fetch(url)).text(), 20_000, 200);

  test("a hostNetwork pod's server answers on the host's 127.0.0.1", async () => {
    const spec = `  hostNetwork: true\n  terminationGracePeriodSeconds: 1\n  containers:\n${ctr("web", httpd("hello-host", `127.0.0.1:${port}`))}`;
    agent.writeManifest("hostnet.yaml", manifest("hostnet", spec));
    const pod = await agent.waitPod("hostnet", "Running", (p) => p.status?.phase === "Running");
    expect(pod.status?.podIP).toBe(pod.status?.hostIP as string);
    expect(await get(`http://127.0.0.1:${port}/`)).toBe("hello-host\n");
    await removeAndWaitGone("hostnet.yaml", "hostnet");
  }, 60_000);

  test("a bridge pod's hostPort answers on the host's 127.0.0.1 (portmap)", async () => {
    const hostPort = port + 1;
    const spec = `  terminationGracePeriodSeconds: 1\n  containers:\n${ctr("web", httpd("hello-port", "8080"), `      ports:\n        - { containerPort: 8080, hostPort: ${hostPort} }\n`)}`;
    agent.writeManifest("hostport.yaml", manifest("hostport", spec));
    const pod = await agent.waitPod("hostport", "Running", (p) => p.status?.phase === "Running");
    expect(inSubnet(pod.status?.podIP ?? "", agent.tb.cniSubnet)).toBe(true);
    expect(await get(`http://${pod.status?.podIP}:8080/`)).toBe("hello-port\n");
    expect(await get(`http://127.0.0.1:${hostPort}/`)).toBe("hello-port\n");
    await removeAndWaitGone("hostport.yaml", "hostport");
  }, 60_000);
});
