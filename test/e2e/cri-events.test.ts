// The CRI client's container event stream against the real containerd (1.6 here: it answers
// UNIMPLEMENTED to CRI GetContainerEvents, so the client reads containerd's own event service on
// the same socket). Needs root and the test bed.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type ContainerConfig,
  type ContainerEvent,
  type ContainerEventSource,
  type CriError,
  createCriClient,
  type PodSandboxConfig,
} from "../../src/cri/index.ts";
import {
  eventually,
  loadTestbed,
  startContainerd,
  stopContainerd,
  uniqueName,
} from "../lib/testbed.ts";

const tb = loadTestbed();
const cri = createCriClient({ endpoint: tb.endpoint });
const logRoot = mkdtempSync(join(tmpdir(), "fleetlet-cri-events-e2e-"));
const sandboxes: string[] = [];

afterAll(async () => {
  for (const id of sandboxes) {
    await cri.stopPodSandbox({ podSandboxId: id }).catch(() => {});
    await cri.removePodSandbox({ podSandboxId: id }).catch(() => {});
  }
  cri.close();
  rmSync(logRoot, { recursive: true, force: true });
});

function watch(signal: AbortSignal) {
  const events: ContainerEvent[] = [];
  const sources: ContainerEventSource[] = [];
  const ended = new Promise<CriError>((resolve) =>
    cri.containerEvents(
      { onOpen: (s) => sources.push(s), onEvent: (e) => events.push(e), onEnd: resolve },
      signal,
    ),
  );
  return { events, sources, ended };
}

async function container(command: string[], extra: Partial<ContainerConfig> = {}) {
  const name = uniqueName("events");
  const config: PodSandboxConfig = {
    metadata: { name, namespace: "e2e", uid: `uid-${name}`, attempt: 0 },
    logDirectory: join(logRoot, name),
    linux: { securityContext: { namespaceOptions: { network: "NODE", pid: "CONTAINER" } } },
  };
  const { podSandboxId } = await cri.runPodSandbox({ config });
  sandboxes.push(podSandboxId);
  await cri.pullImage({ image: { image: tb.busybox } });
  const { containerId } = await cri.createContainer({
    podSandboxId,
    config: {
      metadata: { name: "c", attempt: 0 },
      image: { image: tb.busybox },
      command,
      logPath: "c.log",
      ...extra,
    },
    sandboxConfig: config,
  });
  await cri.startContainer({ containerId });
  return containerId;
}

const saw = (events: ContainerEvent[], containerId: string, kind: string) =>
  events.some((e) => e.containerId === containerId && e.kind === kind);

describe("CRI container events from containerd 1.6 (needs root and the test bed)", () => {
  test("an exit and an OOM kill arrive as events, exec exits do not; a containerd restart ends the stream, and a new one works", async () => {
    const ac = new AbortController();
    try {
      const first = watch(ac.signal);
      await eventually("the stream to fall back to containerd's events", () =>
        first.sources.includes("containerd"),
      );
      expect(first.sources).toEqual(["cri", "containerd"]);
      await Bun.sleep(100); // containerd registers the subscriber
      const sleeper = await container(["sleep", "3600"]);
      const out = await cri.execSync({ containerId: sleeper, cmd: ["true"], timeout: 5 });
      expect(out.exitCode).toBe(0);
      const exiting = await container(["sh", "-c", "exit 3"]);
      await eventually("the exit event", () => saw(first.events, exiting, "exited"));
      const hog = await container(["sh", "-c", "x=a; while true; do x=$x$x; done"], {
        linux: { resources: { memoryLimitInBytes: 32 * 1024 * 1024 } },
      });
      await eventually(
        "the OOM and exit events",
        () => saw(first.events, hog, "oom") && saw(first.events, hog, "exited"),
      );
      // the exec's process exited, the sleeper did not
      expect(first.events.filter((e) => e.containerId === sleeper)).toEqual([]);
      await stopContainerd(tb);
      startContainerd();
      expect((await first.ended).code).toBe("Unavailable");
      const second = await eventually("a new stream after the restart", async () => {
        const w = watch(ac.signal);
        const early = await Promise.race([w.ended, Bun.sleep(300).then(() => "open" as const)]);
        return early === "open" ? w : undefined;
      });
      expect(second.sources).toEqual(["containerd"]);
      const again = await container(["sh", "-c", "exit 4"]);
      await eventually("the exit event on the new stream", () =>
        saw(second.events, again, "exited"),
      );
      ac.abort();
      expect((await second.ended).code).toBe("Cancelled");
    } finally {
      ac.abort();
    }
  }, 60_000);
});
