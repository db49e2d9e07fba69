import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { hashContainer } from "../../../src/agent/kuberuntime/index.ts";
import type {
  ContainerConfig,
  CreateContainerRequest,
  RunPodSandboxRequest,
  StopContainerRequest,
} from "../../../src/cri/index.ts";
import { CriError, GrpcStatus } from "../../../src/cri/index.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";
import { makeHarness } from "./harness.ts";

let h: ReturnType<typeof makeHarness>;
afterEach(() => h?.cleanup());

const created = () => h.cri.callsOf("createContainer") as CreateContainerRequest[];
const running = (name: string) =>
  [...h.cri.containers.values()].filter(
    (c) => c.config.metadata.name === name && c.state === "CONTAINER_RUNNING",
  );

describe("syncPod() of a new pod", () => {
  test("runs a sandbox and starts the container with the runtime contract's labels and annotations", async () => {
    h = makeHarness();
    const pod = makePod({
      name: "cam",
      containers: [
        makeContainer({
          name: "web",
          command: ["sleep"],
          args: ["$(T)"],
          env: [{ name: "T", value: "9" }],
        }),
      ],
    });
    const result = await h.sync(pod);
    expect(result.errors).toEqual([]);
    const sb = (h.cri.callsOf("runPodSandbox") as RunPodSandboxRequest[])[0]?.config;
    expect(sb?.metadata).toEqual({
      name: "cam",
      namespace: "default",
      uid: "uid-default-cam",
      attempt: 0,
    });
    expect(existsSync(sb?.logDirectory ?? "")).toBe(true);
    const cfg = created()[0]?.config as ContainerConfig;
    expect(cfg.metadata).toEqual({ name: "web", attempt: 0 });
    expect(cfg.logPath).toBe("web/0.log");
    expect(cfg.command).toEqual(["sleep"]);
    expect(cfg.args).toEqual(["9"]);
    expect(cfg.image.image).toMatch(/^sha256:/);
    expect(cfg.labels?.["io.kubernetes.container.name"]).toBe("web");
    expect(cfg.labels?.["io.fleetlet.managed"]).toBe("true");
    expect(cfg.annotations?.["io.kubernetes.container.hash"]).toBe(
      hashContainer(pod.spec.containers[0] as never),
    );
    expect(cfg.annotations?.["io.kubernetes.container.restartCount"]).toBe("0");
    const termination = cfg.mounts?.find((m) => m.containerPath === "/dev/termination-log");
    expect(termination?.hostPath).toBe(
      join(h.deps.rootDir, "pods/uid-default-cam/containers/web/0000abcd"),
    );
    expect(existsSync(termination?.hostPath ?? "")).toBe(true);
    const hosts = cfg.mounts?.find((m) => m.containerPath === "/etc/hosts")?.hostPath ?? "";
    expect(readFileSync(hosts, "utf8")).toContain("\tcam\n");
    expect(h.reasons()).toEqual(["Pulled", "Created", "Started"]);
    expect(h.events[1]).toEqual({
      type: "Normal",
      reason: "Created",
      message: "Created container: web",
      fieldPath: "spec.containers{web}",
    });
  });

  test("rebuilds the pod from the runtime and then needs nothing more", async () => {
    h = makeHarness();
    const pod = makePod({ name: "cam" });
    await h.sync(pod);
    const status = await h.rm.getPodStatus("uid-default-cam", "cam", "default");
    expect(status.sandboxes).toHaveLength(1);
    expect(status.ips[0]).toMatch(/^10\.88\./);
    expect(status.containers).toMatchObject([
      {
        name: "app",
        state: "running",
        restartCount: 0,
        hash: hashContainer(pod.spec.containers[0] as never),
      },
    ]);
    h.cri.calls.length = 0;
    await h.rm.syncPod(pod, status);
    expect(h.cri.calls.map((c) => c.method)).toEqual([]);
    expect(await h.rm.getPods()).toMatchObject([
      {
        uid: "uid-default-cam",
        name: "cam",
        namespace: "default",
        sandboxes: [{ id: status.sandboxes[0]?.id, state: "ready" }],
        containers: [{ name: "app", state: "running" }],
      },
    ]);
  });

  test("maps env fieldRefs, and reports a bad one as CreateContainerConfigError", async () => {
    h = makeHarness();
    const pod = makePod({
      containers: [
        makeContainer({
          env: [
            { name: "IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
            { name: "BAD", valueFrom: { fieldRef: { fieldPath: "spec.nope" } } },
          ],
        }),
      ],
    });
    const result = await h.sync(pod);
    expect(result.waiting.get("app")?.reason).toBe("CreateContainerConfigError");
    expect(result.errors[0]?.message).toStartWith('Cannot start container "app" of pod "web": ');
    expect(h.events.at(-1)).toMatchObject({ type: "Warning", reason: "Failed" });
  });

  test("status.podIP is the sandbox's IP, read after RunPodSandbox; host-network pods skip the read", async () => {
    h = makeHarness();
    const withIP = (name: string, hostNetwork: boolean) =>
      makePod({
        name,
        spec: { containers: [], hostNetwork },
        containers: [
          makeContainer({
            env: [{ name: "IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } }],
          }),
        ],
      });
    const envIP = () =>
      created()
        .at(-1)
        ?.config.envs?.find((e) => e.key === "IP")?.value;
    expect((await h.sync(withIP("bridged", false))).errors).toEqual([]);
    expect(h.cri.callsOf("podSandboxStatus")).toHaveLength(1);
    const sandboxIP = [...h.cri.sandboxes.values()][0]?.ip;
    expect(sandboxIP).toBeTruthy();
    expect(envIP()).toBe(sandboxIP);
    expect((await h.sync(withIP("host", true))).errors).toEqual([]);
    expect(h.cri.callsOf("podSandboxStatus")).toHaveLength(1);
    expect(envIP()).toBe("192.168.1.2");
  });

  test("reports RunContainerError when StartContainer fails", async () => {
    h = makeHarness();
    h.cri.failNext(
      "startContainer",
      new CriError({
        rpc: "StartContainer",
        grpcStatus: GrpcStatus.UNKNOWN,
        runtimeMessage: "exec: not found",
      }),
    );
    const result = await h.sync(makePod());
    expect(result.waiting.get("app")).toEqual({
      reason: "RunContainerError",
      message: "CRI StartContainer failed: exec: not found",
    });
  });

  test("reports a sandbox that cannot be created and starts no container", async () => {
    h = makeHarness();
    h.cri.failNext("runPodSandbox", new Error("cni: no IP left"));
    const result = await h.sync(makePod());
    expect(result.errors).toMatchObject([
      { action: "createSandbox", reason: "CreatePodSandboxError" },
    ]);
    expect(h.reasons()).toEqual(["FailedCreatePodSandBox"]);
    expect(created()).toHaveLength(0);
  });
});

describe("syncPod() with maxParallelStarts", () => {
  const seenAt = (name: string, second: number) =>
    makePod({
      name,
      metadata: {
        name,
        annotations: { "kubernetes.io/config.seen": `2024-05-01T10:00:0${second}.5Z` },
      },
    });
  const sandboxesRun = () =>
    (h.cri.callsOf("runPodSandbox") as RunPodSandboxRequest[]).map((r) => r.config.metadata.name);

  test("a freed slot goes to the pod seen first; a pod killed while it waits starts nothing", async () => {
    h = makeHarness({ maxParallelStarts: 1 });
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    h.cri.setHook(async (method, request) => {
      if (
        method === "runPodSandbox" &&
        (request as RunPodSandboxRequest).config.metadata.name === "x"
      )
        await held;
    });
    const x = h.rm.syncPod(seenAt("x", 9), undefined);
    while (sandboxesRun().length === 0) await new Promise((r) => setTimeout(r, 1));
    const ac = new AbortController();
    const killed = h.rm.syncPod(seenAt("k", 0), undefined, { signal: ac.signal });
    const newer = h.rm.syncPod(seenAt("newer", 5), undefined);
    const older = h.rm.syncPod(seenAt("older", 1), undefined);
    await new Promise((r) => setTimeout(r, 10));
    expect(sandboxesRun()).toEqual(["x"]);
    ac.abort(new Error("pod is being killed"));
    const k = await killed;
    expect(k.errors.map((e) => e.reason)).toEqual(["CreatePodSandboxError"]);
    expect(k.errors[0]?.message).toContain("pod is being killed");
    release();
    for (const r of await Promise.all([x, newer, older])) expect(r.errors).toEqual([]);
    expect(sandboxesRun()).toEqual(["x", "older", "newer"]);
    expect(running("app")).toHaveLength(3);
  });
});

describe("syncPod() restarts", () => {
  test("backs off a crash-looping container, doubling the delay", async () => {
    h = makeHarness();
    const pod = makePod({ containers: [makeContainer({ name: "web" })] });
    await h.sync(pod);
    const crash = () => h.cri.exitContainer(running("web")[0]?.id ?? "", 1);
    crash();
    expect((await h.sync(pod)).waiting.size).toBe(0);
    expect(running("web")[0]?.config.metadata.attempt).toBe(1);
    crash();
    const waiting = (await h.sync(pod)).waiting.get("web");
    expect(waiting).toEqual({
      reason: "CrashLoopBackOff",
      message: "back-off 10s restarting failed container=web pod=web_default(uid-default-web)",
    });
    expect(h.events.at(-1)).toMatchObject({
      type: "Warning",
      reason: "BackOff",
      message: "Back-off restarting failed container web in pod web_default(uid-default-web)",
    });
    h.clock.step(10_000);
    expect((await h.sync(pod)).waiting.size).toBe(0);
    crash();
    h.clock.step(10_000);
    expect((await h.sync(pod)).waiting.get("web")?.message).toStartWith("back-off 20s ");
    h.clock.step(10_000);
    await h.sync(pod);
    const cfg = running("web")[0]?.config;
    expect(cfg?.metadata.attempt).toBe(3);
    expect(cfg?.annotations?.["io.kubernetes.container.restartCount"]).toBe("3");
    // The three dead instances stay: removing them is the container GC's job, not the sync's.
    expect(h.cri.containers.size).toBe(4);
    expect(h.cri.callsOf("removeContainer")).toHaveLength(0);
  });

  test("kills and restarts a container whose spec changed", async () => {
    h = makeHarness();
    const pod = makePod({ containers: [makeContainer({ name: "web" })] });
    await h.sync(pod);
    const changed = makePod({ containers: [makeContainer({ name: "web", args: ["new"] })] });
    await h.sync(changed);
    expect(h.events.find((e) => e.reason === "Killing")?.message).toBe(
      "Container web definition changed, will be restarted",
    );
    expect(running("web")[0]?.config.args).toEqual(["new"]);
    expect(running("web")[0]?.config.metadata.attempt).toBe(1);
  });

  test("kills a container that failed its liveness probe with the probe's grace period", async () => {
    h = makeHarness();
    const pod = makePod({
      containers: [
        makeContainer({
          livenessProbe: { exec: { command: ["true"] }, terminationGracePeriodSeconds: 5 },
        }),
      ],
    });
    await h.sync(pod);
    const id = running("app")[0]?.id ?? "";
    await h.sync(pod, { livenessFailed: new Set([id]) });
    expect((h.cri.callsOf("stopContainer") as StopContainerRequest[])[0]).toEqual({
      containerId: id,
      timeout: 5,
    });
    expect(running("app")).toHaveLength(1);
  });

  test("creates a new sandbox and restarts every container when the sandbox died", async () => {
    h = makeHarness();
    const pod = makePod({
      containers: [makeContainer({ name: "a" }), makeContainer({ name: "b" })],
    });
    await h.sync(pod);
    const first = [...h.cri.sandboxes.keys()][0] ?? "";
    h.cri.killSandbox(first);
    await h.sync(pod);
    expect(h.reasons()).toContain("SandboxChanged");
    const sandboxes = h.cri.callsOf("runPodSandbox") as RunPodSandboxRequest[];
    expect(sandboxes.map((s) => s.config.metadata.attempt)).toEqual([0, 1]);
    expect(running("a")).toHaveLength(1);
    expect(running("b")).toHaveLength(1);
    expect(running("a")[0]?.podSandboxId).not.toBe(first);
  });

  test("creates a new sandbox when the dead one cannot be stopped (after a power cut), once its containers are stopped", async () => {
    h = makeHarness();
    const pod = makePod({ containers: [makeContainer({ name: "a" })] });
    await h.sync(pod);
    const first = [...h.cri.sandboxes.keys()][0] ?? "";
    const teardown = () =>
      new CriError({
        rpc: "StopPodSandbox",
        grpcStatus: GrpcStatus.UNKNOWN,
        runtimeMessage: "failed to destroy network for sandbox: unexpected end of JSON input",
      });
    // The sandbox died while its container still ran, and that container cannot be stopped:
    // the sync ends there, without a new sandbox.
    h.cri.killSandbox(first);
    h.cri.failNext("stopContainer", new Error("shim is stuck"));
    h.cri.failNext("stopPodSandbox", teardown());
    const blocked = await h.sync(pod);
    expect(blocked.errors.map((e) => e.reason)).toEqual(["KillPodError"]);
    expect(h.cri.callsOf("runPodSandbox")).toHaveLength(1);
    // Once its container is stopped nothing of the pod runs: the stop of the dead sandbox still
    // fails, and the pod goes on in a new one.
    h.cri.failNext("stopPodSandbox", teardown());
    const result = await h.sync(pod);
    expect(result.errors).toEqual([]);
    expect(h.events.find((e) => e.reason === "FailedKillPod")?.message).toContain(
      `Cannot stop sandbox ${first} of pod "web": CRI StopPodSandbox failed: failed to destroy network`,
    );
    expect(running("a")).toHaveLength(1);
    expect(running("a")[0]?.podSandboxId).not.toBe(first);
  });

  test("runs init containers one at a time before the app containers", async () => {
    h = makeHarness();
    const pod = makePod({
      initContainers: [makeContainer({ name: "i0" }), makeContainer({ name: "i1" })],
      containers: [makeContainer({ name: "web" })],
    });
    const started = () => created().map((c) => c.config.metadata.name);
    await h.sync(pod);
    expect(started()).toEqual(["i0"]);
    await h.sync(pod);
    expect(started()).toEqual(["i0"]);
    h.cri.exitContainer(running("i0")[0]?.id ?? "", 0);
    await h.sync(pod);
    h.cri.exitContainer(running("i1")[0]?.id ?? "", 0);
    await h.sync(pod);
    expect(started()).toEqual(["i0", "i1", "web"]);
    expect(h.events.find((e) => e.fieldPath === "spec.initContainers{i1}")).toBeDefined();
  });

  test("kills the container and reports PostStartHookError when its postStart hook fails", async () => {
    h = makeHarness();
    h.cri.execHandler = () => ({ exitCode: 2, stderr: "nope" });
    const pod = makePod({
      containers: [
        makeContainer({ lifecycle: { postStart: { exec: { command: ["sh", "-c", "exit 2"] } } } }),
      ],
    });
    const result = await h.sync(pod);
    expect(result.waiting.get("app")?.reason).toBe("PostStartHookError");
    expect(h.reasons()).toEqual(["Pulled", "Created", "Started", "FailedPostStartHook", "Killing"]);
    expect(h.events[3]?.message).toStartWith(
      'Exec lifecycle hook ([sh -c exit 2]) for Container "app" in Pod "web_default(uid-default-web)" failed',
    );
    expect(running("app")).toHaveLength(0);
  });
});

describe("killPod() and removePod()", () => {
  test("runs preStop hooks, stops containers with the grace period left, then the sandbox", async () => {
    h = makeHarness();
    const pod = makePod({
      containers: [
        makeContainer({ lifecycle: { preStop: { exec: { command: ["touch", "/x"] } } } }),
      ],
      spec: { terminationGracePeriodSeconds: 7 },
    });
    await h.sync(pod);
    const status = await h.rm.getPodStatus("uid-default-web", "web", "default");
    const [runningPod] = await h.rm.getPods();
    await h.rm.killPod(pod, runningPod as never);
    expect(h.cri.callsOf("execSync")).toMatchObject([{ cmd: ["touch", "/x"] }]);
    expect(h.cri.callsOf("stopContainer")).toEqual([
      { containerId: status.containers[0]?.id, timeout: 7 },
    ]);
    expect([...h.cri.sandboxes.values()].map((s) => s.state)).toEqual(["SANDBOX_NOTREADY"]);
    expect(h.reasons().at(-1)).toBe("Killing");
  });

  test("stops an orphan with the grace period and preStop hook recorded in its annotations", async () => {
    h = makeHarness();
    const pod = makePod({
      containers: [makeContainer({ lifecycle: { preStop: { exec: { command: ["bye"] } } } })],
      spec: { terminationGracePeriodSeconds: 9 },
    });
    await h.sync(pod);
    const [runningPod] = await h.rm.getPods();
    await h.rm.killPod(undefined, runningPod as never);
    expect(h.cri.callsOf("execSync")).toMatchObject([{ cmd: ["bye"] }]);
    expect((h.cri.callsOf("stopContainer") as StopContainerRequest[])[0]?.timeout).toBe(9);
  });

  test("gives containers at least 2 seconds unless a grace period override is given", async () => {
    h = makeHarness();
    const pod = makePod({ spec: { terminationGracePeriodSeconds: 0 } });
    await h.sync(pod);
    const [runningPod] = await h.rm.getPods();
    await h.rm.killPod(pod, runningPod as never);
    expect((h.cri.callsOf("stopContainer") as StopContainerRequest[])[0]?.timeout).toBe(2);
    await h.sync(makePod({ name: "other" }));
    const other = (await h.rm.getPods()).find((p) => p.name === "other");
    await h.rm.killPod(undefined, other as never, 0);
    expect((h.cri.callsOf("stopContainer") as StopContainerRequest[])[1]?.timeout).toBe(0);
  });

  test("removePod leaves no container, sandbox or log folder", async () => {
    h = makeHarness();
    const pod = makePod();
    await h.sync(pod);
    const [runningPod] = await h.rm.getPods();
    await h.rm.killPod(pod, runningPod as never);
    await h.rm.removePod(runningPod as never);
    expect(h.cri.containers.size).toBe(0);
    expect(h.cri.sandboxes.size).toBe(0);
    expect(existsSync(join(h.deps.podLogsDir, "default_web_uid-default-web"))).toBe(false);
    expect(await h.rm.getPods()).toEqual([]);
  });
});

describe("removeContainer() racing the container GC", () => {
  test("a container the runtime no longer has is removed already: removePod goes on to the sandbox", async () => {
    h = makeHarness();
    const pod = makePod();
    await h.sync(pod);
    const [runningPod] = await h.rm.getPods();
    await h.rm.killPod(pod, runningPod as never);
    // The container GC removed it between the listing and this call (containerd: NotFound).
    h.cri.failNext(
      "removeContainer",
      new CriError({
        rpc: "RemoveContainer",
        grpcStatus: GrpcStatus.NOT_FOUND,
        runtimeMessage: "get container info: container not found",
      }),
    );
    await h.rm.removePod(runningPod as never);
    expect(h.cri.sandboxes.size).toBe(0);
  });
});
