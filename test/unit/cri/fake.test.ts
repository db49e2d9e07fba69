import { beforeEach, describe, expect, test } from "bun:test";
import {
  CriError,
  createFakeRuntime,
  type FakeRuntime,
  isNotFound,
  isUnavailable,
  normalizeImageRef,
  type PodSandboxConfig,
} from "../../../src/cri/index.ts";

let now = 1_000;
let rt: FakeRuntime;

function sandboxConfig(
  name: string,
  attempt = 0,
  labels: Record<string, string> = {},
): PodSandboxConfig {
  return {
    metadata: { name, uid: `uid-${name}`, namespace: "default", attempt },
    logDirectory: `/var/log/pods/${name}`,
    labels: { "io.kubernetes.pod.name": name, ...labels },
  };
}

async function runPod(name: string, labels: Record<string, string> = {}) {
  const config = sandboxConfig(name, 0, labels);
  const { podSandboxId } = await rt.runPodSandbox({ config });
  return { podSandboxId, config };
}

async function startContainer(name: string, podName = "pod") {
  const { podSandboxId, config } = await runPod(podName);
  const { containerId } = await rt.createContainer({
    podSandboxId,
    sandboxConfig: config,
    config: {
      metadata: { name, attempt: 0 },
      image: { image: "busybox" },
      labels: { "io.kubernetes.container.name": name },
      logPath: `${name}/0.log`,
    },
  });
  await rt.startContainer({ containerId });
  return { podSandboxId, containerId, config };
}

beforeEach(() => {
  now = 1_000;
  rt = createFakeRuntime({ now: () => now });
  rt.images.add("busybox");
});

describe("FakeRuntime containers", () => {
  test("moves a container CREATED → RUNNING → EXITED with timestamps from the clock", async () => {
    const { containerId } = await startContainer("web");
    now = 2_000;
    rt.exitContainer(containerId, 1);
    const { status } = await rt.containerStatus({ containerId });
    expect(status?.state).toBe("CONTAINER_EXITED");
    expect(status?.exitCode).toBe(1);
    expect(status?.reason).toBe("Error");
    expect(status?.createdAt).toBe(1_000 * 1e6);
    expect(status?.startedAt).toBe(1_000 * 1e6);
    expect(status?.finishedAt).toBe(2_000 * 1e6);
    expect(status?.logPath).toBe("/var/log/pods/pod/web/0.log");
  });

  test("reports OOMKilled and Completed reasons as containerd does", async () => {
    const a = await startContainer("a", "p1");
    const b = await startContainer("b", "p2");
    rt.exitContainer(a.containerId, 137, "OOMKilled");
    rt.exitContainer(b.containerId, 0);
    expect((await rt.containerStatus({ containerId: a.containerId })).status?.reason).toBe(
      "OOMKilled",
    );
    expect((await rt.containerStatus({ containerId: b.containerId })).status?.reason).toBe(
      "Completed",
    );
  });

  test("refuses to start a container twice", async () => {
    const { containerId } = await startContainer("web");
    await expect(rt.startContainer({ containerId })).rejects.toThrow(
      "CRI StartContainer failed: container is in CONTAINER_RUNNING state",
    );
  });

  test("stopContainer() kills a running container with exit code 137 and is idempotent", async () => {
    const { containerId } = await startContainer("web");
    await rt.stopContainer({ containerId, timeout: 30 });
    await rt.stopContainer({ containerId, timeout: 30 });
    const { status } = await rt.containerStatus({ containerId });
    expect([status?.state, status?.exitCode]).toEqual(["CONTAINER_EXITED", 137]);
  });

  test("refuses a second container with the same name and attempt, like containerd's name index", async () => {
    const { podSandboxId, config } = await startContainer("web");
    const again = rt.createContainer({
      podSandboxId,
      sandboxConfig: config,
      config: { metadata: { name: "web", attempt: 0 }, image: { image: "busybox" } },
    });
    await expect(again).rejects.toThrow(/failed to reserve name "web_pod_default_uid-pod_0"/);
  });

  test("createContainer() fails with NotFound when the image is not present", async () => {
    const { podSandboxId, config } = await runPod("p");
    const err = await rt
      .createContainer({
        podSandboxId,
        sandboxConfig: config,
        config: { metadata: { name: "x", attempt: 0 }, image: { image: "nginx" } },
      })
      .catch((e) => e);
    expect(isNotFound(err)).toBe(true);
  });

  test("missing containers: status and stop are NotFound, remove succeeds", async () => {
    expect(isNotFound(await rt.containerStatus({ containerId: "nope" }).catch((e) => e))).toBe(
      true,
    );
    expect(isNotFound(await rt.stopContainer({ containerId: "nope" }).catch((e) => e))).toBe(true);
    await rt.removeContainer({ containerId: "nope" });
  });

  test("resolves a unique id prefix like containerd", async () => {
    const { containerId } = await startContainer("web");
    const { status } = await rt.containerStatus({
      containerId: containerId.slice(0, 10),
    });
    expect(status?.id).toBe(containerId);
  });

  test("execSync() answers from execHandler for running containers only", async () => {
    const { containerId } = await startContainer("web");
    rt.execHandler = (_c, cmd) => ({ exitCode: cmd[0] === "true" ? 0 : 1, stdout: cmd.join(" ") });
    const res = await rt.execSync({ containerId, cmd: ["false", "x"], timeout: 1 });
    expect([res.exitCode, new TextDecoder().decode(res.stdout)]).toEqual([1, "false x"]);
    rt.exitContainer(containerId, 0);
    await expect(rt.execSync({ containerId, cmd: ["true"] })).rejects.toThrow(/CONTAINER_EXITED/);
  });
});

describe("FakeRuntime sandboxes", () => {
  test("stopPodSandbox() stops its running containers; removePodSandbox() removes them", async () => {
    const { podSandboxId, containerId } = await startContainer("web");
    await rt.stopPodSandbox({ podSandboxId });
    expect((await rt.podSandboxStatus({ podSandboxId })).status?.state).toBe("SANDBOX_NOTREADY");
    expect((await rt.containerStatus({ containerId })).status?.state).toBe("CONTAINER_EXITED");
    await rt.removePodSandbox({ podSandboxId });
    await rt.removePodSandbox({ podSandboxId });
    expect((await rt.listContainers({})).containers).toEqual([]);
    expect(isNotFound(await rt.podSandboxStatus({ podSandboxId }).catch((e) => e))).toBe(true);
  });

  test("gives a pod-network sandbox an IP and a host-network sandbox none", async () => {
    const pod = await rt.runPodSandbox({ config: sandboxConfig("a") });
    const host = await rt.runPodSandbox({
      config: {
        ...sandboxConfig("b"),
        linux: { securityContext: { namespaceOptions: { network: "NODE" } } },
      },
    });
    expect((await rt.podSandboxStatus(pod)).status?.network?.ip).toMatch(/^10\.88\./);
    expect((await rt.podSandboxStatus(host)).status?.network?.ip).toBe("");
  });

  test("allows a new sandbox for the same pod with the next attempt only", async () => {
    await rt.runPodSandbox({ config: sandboxConfig("a", 0) });
    await expect(rt.runPodSandbox({ config: sandboxConfig("a", 0) })).rejects.toThrow(
      /reserve name/,
    );
    await rt.runPodSandbox({ config: sandboxConfig("a", 1) });
  });
});

describe("FakeRuntime filters", () => {
  test("listPodSandbox() filters by id prefix, state and every selector label", async () => {
    const a = await runPod("a", { tier: "edge", app: "cam" });
    const b = await runPod("b", { tier: "edge" });
    await rt.stopPodSandbox({ podSandboxId: b.podSandboxId });
    const ids = async (filter: object) =>
      (await rt.listPodSandbox({ filter })).items.map((s) => s.metadata?.name);
    expect(await ids({})).toEqual(["a", "b"]);
    expect(await ids({ labelSelector: { tier: "edge" } })).toEqual(["a", "b"]);
    expect(await ids({ labelSelector: { tier: "edge", app: "cam" } })).toEqual(["a"]);
    expect(await ids({ state: { state: "SANDBOX_NOTREADY" } })).toEqual(["b"]);
    expect(await ids({ id: a.podSandboxId })).toEqual(["a"]);
    expect(await ids({ id: "no-such-id" })).toEqual([]);
  });

  test("listContainers() filters by sandbox, state and labels", async () => {
    const one = await startContainer("web", "p1");
    const two = await startContainer("db", "p2");
    rt.exitContainer(two.containerId, 0);
    const names = async (filter: object) =>
      (await rt.listContainers({ filter })).containers.map((c) => c.metadata?.name);
    expect(await names({ podSandboxId: one.podSandboxId })).toEqual(["web"]);
    expect(await names({ state: { state: "CONTAINER_EXITED" } })).toEqual(["db"]);
    expect(await names({ labelSelector: { "io.kubernetes.container.name": "web" } })).toEqual([
      "web",
    ]);
    expect(await names({ id: two.containerId, state: { state: "CONTAINER_RUNNING" } })).toEqual([]);
  });
});

describe("normalizeImageRef()", () => {
  test.each([
    ["busybox", "docker.io/library/busybox:latest"],
    ["busybox:1.36", "docker.io/library/busybox:1.36"],
    ["library/busybox", "docker.io/library/busybox:latest"],
    ["docker.io/busybox", "docker.io/library/busybox:latest"],
    ["registry.k8s.io/pause:3.6", "registry.k8s.io/pause:3.6"],
    ["127.0.0.1:5055/fleetlet-test/busybox", "127.0.0.1:5055/fleetlet-test/busybox:latest"],
    ["localhost/app@sha256:abc", "localhost/app@sha256:abc"],
  ])("normalizes %s to %s like containerd", (ref, want) => {
    expect(normalizeImageRef(ref)).toBe(want);
  });
});

describe("FakeRuntime images", () => {
  test("normalizes names, so busybox, docker.io/library/busybox:latest and the id are the same image", async () => {
    const { image } = await rt.imageStatus({
      image: { image: "docker.io/library/busybox:latest" },
    });
    expect(image?.repoTags).toEqual(["docker.io/library/busybox:latest"]);
    expect((await rt.imageStatus({ image: { image: image?.id ?? "" } })).image?.id).toBe(image?.id);
    expect((await rt.imageStatus({ image: { image: "busybox:1.36" } })).image).toBeNull();
  });

  test("pullImage() copies from the fake registry, fails NotFound otherwise, and checks credentials", async () => {
    rt.images.addToRegistry("127.0.0.1:5000/app:v1");
    rt.images.addToRegistry("127.0.0.1:5000/private:v1", {
      credentials: { username: "u", password: "p" },
    });
    const { imageRef } = await rt.pullImage({ image: { image: "127.0.0.1:5000/app:v1" } });
    expect(
      (await rt.listImages({ filter: { image: { image: "127.0.0.1:5000/app:v1" } } })).images[0]
        ?.id,
    ).toBe(imageRef);
    expect(isNotFound(await rt.pullImage({ image: { image: "nginx" } }).catch((e) => e))).toBe(
      true,
    );
    const priv = { image: "127.0.0.1:5000/private:v1" };
    await expect(rt.pullImage({ image: priv })).rejects.toThrow(/401 Unauthorized/);
    await rt.pullImage({ image: priv, auth: { auth: btoa("u:p") } });
    await rt.removeImage({ image: priv });
    await rt.removeImage({ image: priv });
    expect((await rt.imageStatus({ image: priv })).image).toBeNull();
  });
});

describe("FakeRuntime test controls", () => {
  test("records every call with a copy of its request", async () => {
    const req = { version: "v1" };
    await rt.version(req);
    req.version = "changed";
    await rt.status({});
    expect(rt.calls).toEqual([
      { method: "version", request: { version: "v1" } },
      { method: "status", request: {} },
    ]);
    expect(rt.callsOf("status")).toEqual([{}]);
  });

  test("failNext() fails only the next call of that method, which is still recorded", async () => {
    const injected = new CriError({ rpc: "Version", grpcStatus: 2, runtimeMessage: "boom" });
    rt.failNext("version", injected);
    await expect(rt.version({})).rejects.toBe(injected);
    await rt.version({});
    expect(rt.callsOf("version").length).toBe(2);
  });

  test("setUnavailable() makes every call fail with Unavailable until it is back", async () => {
    rt.setUnavailable(true);
    expect(isUnavailable(await rt.listPodSandbox({}).catch((e) => e))).toBe(true);
    rt.setUnavailable(false);
    await rt.listPodSandbox({});
  });

  test("setHook() sees each call and can fail it", async () => {
    const seen: string[] = [];
    rt.setHook((method) => {
      seen.push(method);
      if (method === "status") throw new Error("hooked");
    });
    await rt.version({});
    await expect(rt.status({})).rejects.toThrow("hooked");
    expect(seen).toEqual(["version", "status"]);
  });

  test("throws a clear error for what it does not implement", async () => {
    await expect(rt.containerStats({ containerId: "x" })).rejects.toThrow(
      "not implemented by the fake runtime: ContainerStats",
    );
    await expect(rt.listPodSandboxStats({})).rejects.toThrow(/ListPodSandboxStats/);
  });

  test("returned objects are copies of its state", async () => {
    const { podSandboxId } = await runPod("a", { app: "x" });
    const [item] = (await rt.listPodSandbox({})).items;
    if (item) item.labels.app = "changed";
    expect((await rt.podSandboxStatus({ podSandboxId })).status?.labels.app).toBe("x");
  });
});
