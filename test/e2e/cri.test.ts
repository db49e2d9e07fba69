// The CRI client against the real test bed: a private containerd with runc, the CNI bridge and
// the loopback registry. Needs root and `scripts/testbed start` (scripts/test does both).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type ContainerConfig,
  type CriClient,
  createCriClient,
  isNotFound,
  isUnavailable,
  type PodSandboxConfig,
} from "../../src/cri/index.ts";
import {
  eventually,
  inSubnet,
  loadTestbed,
  startContainerd,
  stopContainerd,
  uniqueName,
} from "../lib/testbed.ts";

const tb = loadTestbed();
let cri: CriClient;
const logRoot = mkdtempSync(join(tmpdir(), "fleetlet-cri-e2e-"));
const sandboxes: string[] = [];

function sandboxConfig(name: string, hostNetwork: boolean): PodSandboxConfig {
  return {
    metadata: { name, namespace: "e2e", uid: `uid-${name}`, attempt: 0 },
    hostname: hostNetwork ? "" : name,
    logDirectory: join(logRoot, name),
    labels: { "io.fleetlet.e2e": "cri" },
    linux: {
      securityContext: {
        namespaceOptions: { network: hostNetwork ? "NODE" : "POD", pid: "CONTAINER" },
      },
    },
  };
}

async function runSandbox(name: string, hostNetwork: boolean) {
  const config = sandboxConfig(name, hostNetwork);
  const { podSandboxId } = await cri.runPodSandbox({ config });
  sandboxes.push(podSandboxId);
  return { id: podSandboxId, config };
}

async function startContainer(
  sb: { id: string; config: PodSandboxConfig },
  name: string,
  command: string[],
  extra: Partial<ContainerConfig> = {},
): Promise<string> {
  await cri.pullImage({ image: { image: tb.busybox } });
  const { containerId } = await cri.createContainer({
    podSandboxId: sb.id,
    config: {
      metadata: { name, attempt: 0 },
      image: { image: tb.busybox },
      command,
      logPath: `${name}/0.log`,
      ...extra,
    },
    sandboxConfig: sb.config,
  });
  await cri.startContainer({ containerId });
  return containerId;
}

async function waitExited(containerId: string) {
  return eventually(`container ${containerId} to exit`, async () => {
    const { status } = await cri.containerStatus({ containerId });
    return status?.state === "CONTAINER_EXITED" ? status : undefined;
  });
}

beforeAll(() => {
  cri = createCriClient({ endpoint: tb.endpoint });
});

afterAll(async () => {
  for (const id of sandboxes) {
    await cri.stopPodSandbox({ podSandboxId: id }).catch(() => {});
    await cri.removePodSandbox({ podSandboxId: id }).catch(() => {});
  }
  cri.close();
  rmSync(logRoot, { recursive: true, force: true });
});

describe("CRI client against containerd (needs root and the test bed)", () => {
  test("Version and Status report containerd, runtime v1 and ready conditions", async () => {
    const v = await cri.version({ version: "v1" });
    expect(v.runtimeName).toBe("containerd");
    expect(v.runtimeApiVersion).toBe("v1");
    const { status } = await cri.status({});
    const conditions = Object.fromEntries(
      (status?.conditions ?? []).map((c) => [c.type, c.status]),
    );
    expect(conditions).toEqual({ RuntimeReady: true, NetworkReady: true });
  });

  test("a host-network sandbox runs a container that is created, started, stopped and removed", async () => {
    const sb = await runSandbox(uniqueName("host"), true);
    const { status: sbStatus } = await cri.podSandboxStatus({ podSandboxId: sb.id });
    expect(sbStatus?.state).toBe("SANDBOX_READY");
    expect(sbStatus?.linux?.namespaces?.options?.network).toBe("NODE");

    const id = await startContainer(sb, "sleeper", ["sleep", "300"]);
    const running = await cri.containerStatus({ containerId: id });
    expect(running.status?.state).toBe("CONTAINER_RUNNING");
    expect(running.status?.metadata?.name).toBe("sleeper");

    await cri.stopContainer({ containerId: id, timeout: 1 });
    const stopped = await cri.containerStatus({ containerId: id });
    expect(stopped.status?.state).toBe("CONTAINER_EXITED");
    await cri.removeContainer({ containerId: id });
    const err = await cri.containerStatus({ containerId: id }).catch((e) => e);
    expect(isNotFound(err)).toBe(true);
  }, 60_000);

  test("an unchanged container listed again is the same object, whatever order containerd sends its labels in; a change is seen", async () => {
    const sb = await runSandbox(uniqueName("list"), true);
    // Many labels and annotations: containerd writes map entries in a random order each time.
    const many = Object.fromEntries(
      Array.from({ length: 12 }, (_, i) => [`io.fleetlet.e2e/k${i}`, `v${i}`]),
    );
    const id = await startContainer(sb, "listed", ["sleep", "300"], {
      labels: many,
      annotations: many,
    });
    const find = async () => {
      const { containers } = await cri.listContainers({ filter: { podSandboxId: sb.id } });
      const c = containers.find((x) => x.id === id);
      if (c === undefined) throw new Error("container not listed");
      return c;
    };
    const first = await find();
    expect(first.labels).toEqual(many);
    for (let i = 0; i < 5; i++) expect(await find()).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
    await cri.stopContainer({ containerId: id, timeout: 1 });
    const stopped = await find();
    expect(stopped.state).toBe("CONTAINER_EXITED");
    expect(stopped.labels).toEqual(many);
  }, 60_000);

  test("a bridge-network sandbox gets an IP on the test bed's CNI subnet", async () => {
    const sb = await runSandbox(uniqueName("bridge"), false);
    const { status } = await cri.podSandboxStatus({ podSandboxId: sb.id });
    expect(inSubnet(status?.network?.ip ?? "", tb.cniSubnet)).toBe(true);
    const id = await startContainer(sb, "ip", ["sleep", "300"]);
    const out = await cri.execSync({
      containerId: id,
      cmd: ["ip", "-4", "addr", "show", "eth0"],
      timeout: 5,
    });
    expect(new TextDecoder().decode(out.stdout)).toContain(status?.network?.ip ?? "none");
  }, 60_000);

  test("ExecSync returns stdout, stderr and the exit code", async () => {
    const sb = await runSandbox(uniqueName("exec"), true);
    const id = await startContainer(sb, "exec", ["sleep", "300"]);
    const res = await cri.execSync({
      containerId: id,
      cmd: ["sh", "-c", "echo out; echo err >&2; exit 7"],
      timeout: 5,
    });
    expect(new TextDecoder().decode(res.stdout)).toBe("out\n");
    expect(new TextDecoder().decode(res.stderr)).toBe("err\n");
    expect(res.exitCode).toBe(7);
  }, 60_000);

  test("container output lands in the log file in the CRI log format", async () => {
    const name = uniqueName("logs");
    const sb = await runSandbox(name, true);
    const id = await startContainer(sb, "talker", ["sh", "-c", "echo hello; echo oops >&2"]);
    await waitExited(id);
    const text = readFileSync(join(logRoot, name, "talker/0.log"), "utf8");
    const lines = text.trim().split("\n").sort();
    expect(lines).toHaveLength(2);
    for (const line of lines)
      expect(line).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+(Z|[+-]\d\d:\d\d) (stdout|stderr) F /);
    expect(lines.some((l) => / stdout F hello$/.test(l))).toBe(true);
    expect(lines.some((l) => / stderr F oops$/.test(l))).toBe(true);
  }, 60_000);

  test("a container exiting 3 reports exit code 3 and reason Error", async () => {
    const sb = await runSandbox(uniqueName("exit3"), true);
    const id = await startContainer(sb, "fail", ["sh", "-c", "exit 3"]);
    const status = await waitExited(id);
    expect(status.exitCode).toBe(3);
    expect(status.reason).toBe("Error");
    // containerd may stamp startedAt after a process that exits at once has already finished,
    // so only check that both are set and close together.
    expect(status.startedAt).toBeGreaterThan(0);
    expect(Math.abs(status.finishedAt - status.startedAt)).toBeLessThan(60e9);
  }, 60_000);

  test("a 32 MiB memory limit kills a memory hog with reason OOMKilled", async () => {
    const sb = await runSandbox(uniqueName("oom"), true);
    const id = await startContainer(
      sb,
      "hog",
      ["dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=1"],
      {
        linux: { resources: { memoryLimitInBytes: 32 * 1024 * 1024 } },
      },
    );
    const status = await waitExited(id);
    expect(status.reason).toBe("OOMKilled");
    expect(status.exitCode).toBe(137);
  }, 60_000);

  test("PullImage of a published image returns its reference and ImageStatus finds it", async () => {
    const { imageRef } = await cri.pullImage({ image: { image: tb.busyboxV2 } });
    expect(imageRef).toMatch(/^sha256:[0-9a-f]{64}$/);
    const { image } = await cri.imageStatus({ image: { image: tb.busyboxV2 } });
    expect(image?.repoTags).toContain(tb.busyboxV2);
    expect(image?.size).toBeGreaterThan(0);
  }, 60_000);

  test("PullImage of a missing image fails with a not-found error naming it", async () => {
    const err = await cri.pullImage({ image: { image: tb.missingImage } }).catch((e) => e);
    expect(isNotFound(err)).toBe(true);
    expect(String(err.message)).toContain("does-not-exist");
  }, 60_000);

  test("ImageFsInfo reports the image filesystem's usage", async () => {
    // containerd measures the snapshotter's usage periodically: a fresh one reports 0 at first.
    const fs = await eventually(
      "ImageFsInfo to report used bytes",
      async () => {
        const res = await cri.imageFsInfo({});
        const first = res.imageFilesystems[0];
        return (first?.usedBytes?.value ?? 0) > 0 ? first : undefined;
      },
      30_000,
      500,
    );
    expect(fs.fsId?.mountpoint).toContain(tb.dir);
    expect(fs.usedBytes?.value).toBeGreaterThan(0);
  }, 40_000);
});

describe("CRI client across a containerd restart (needs root and the test bed)", () => {
  test("calls fail as Unavailable while containerd is down and work again after, with the same client", async () => {
    await cri.version({});
    await stopContainerd(tb);
    const err = await cri.version({}, { timeoutMs: 3000 }).catch((e) => e);
    expect(isUnavailable(err)).toBe(true);
    startContainerd();
    const v = await eventually("the client to reach containerd again", () =>
      cri.version({}, { timeoutMs: 2000 }).catch(() => undefined),
    );
    expect(v.runtimeName).toBe("containerd");
  }, 60_000);
});
