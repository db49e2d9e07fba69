import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPodSync, type PodRuntime } from "../../../src/agent/podsync/index.ts";
import { createStatusManager } from "../../../src/agent/status/index.ts";
import type { ContainerState, Pod } from "../../../src/api/types.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

/** A pod-sync whose runtime sync calls `during` (which reports pull progress) before it ends
 * with `waiting`; every status published is kept. */
function setup(
  pod: Pod,
  during: (report: (container: string, message: string) => void, clock: FakeClock) => void,
  waiting = new Map<string, { reason: string; message: string }>(),
) {
  const clock = new FakeClock();
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-podsync-pull-"));
  const statusManager = createStatusManager({ clock });
  const published: ContainerState["waiting"][][] = [];
  const runtime: PodRuntime = {
    getPods: async () => [],
    getPodStatus: async () => ({
      uid: pod.metadata.uid as string,
      name: pod.metadata.name,
      namespace: "default",
      ips: [],
      sandboxes: [],
      containers: [],
      timestamp: clock.monotonic(),
    }),
    getPodStatusAfter: async (before) => before,
    syncPod: async (_pod, _status, opts) => {
      if (opts.onPullProgress) during(opts.onPullProgress, clock);
      return { waiting, changes: { sandboxes: [], containers: [] } };
    },
    killPod: async () => {},
    removePod: async () => {},
  };
  const sync = createPodSync({
    runtime,
    statusManager: {
      ...statusManager,
      setPodStatus: (uid, status) => {
        published.push(
          [...(status.initContainerStatuses ?? []), ...(status.containerStatuses ?? [])].map(
            (c) => c.state.waiting,
          ),
        );
        return statusManager.setPodStatus(uid, status);
      },
    },
    clock,
    logger: nullLogger,
    rootDir: dir,
    hostIP: () => "192.168.1.2",
    updateCache: () => {},
    isDesired: () => true,
    hasActions: () => true,
  });
  return { sync, published, done: () => rmSync(dir, { recursive: true }) };
}

const web = makeContainer({ name: "web", image: "busybox" });

describe("pod sync while a pull runs", () => {
  test("publishes the pull's figures as the container's waiting message, at most every 5 s, and the sync's end replaces them", async () => {
    const pod = makePod({ name: "p", containers: [web] });
    const at = (s: number) => `Pulling image "busybox": ${s}.0 MiB of 9.0 MiB`;
    const failed = new Map([["web", { reason: "ErrImagePull", message: "pull cancelled" }]]);
    const t = setup(
      pod,
      (report, clock) => {
        for (let s = 1; s <= 8; s++) {
          report("web", at(s));
          clock.step(1000);
        }
      },
      failed,
    );
    await t.sync.syncPod(pod, "create");
    // The sync's first publication, the figures at 1 s and 6 s, the sync's last.
    expect(t.published).toEqual([
      [{ reason: "ContainerCreating" }],
      [{ reason: "ContainerCreating", message: at(1) }],
      [{ reason: "ContainerCreating", message: at(6) }],
      [{ reason: "ErrImagePull", message: "pull cancelled" }],
    ]);
    t.done();
  });

  test("shows the figures over the last sync's failure while the pull is tried again, and PodInitializing in a pod with init containers", async () => {
    const init = makeContainer({ name: "init", image: "busybox" });
    const pod = makePod({ name: "p", containers: [web], initContainers: [init] });
    const backOff = new Map([["init", { reason: "ErrImagePull", message: "pull cancelled" }]]);
    const t = setup(pod, (report) => report("init", 'Pulling image "busybox": 0 B'), backOff);
    await t.sync.syncPod(pod, "create");
    t.published.length = 0;
    await t.sync.syncPod(pod, "sync");
    expect(t.published[0]?.[0]).toEqual({ reason: "ErrImagePull", message: "pull cancelled" });
    expect(t.published[1]?.[0]).toEqual({
      reason: "PodInitializing",
      message: 'Pulling image "busybox": 0 B',
    });
    t.done();
  });
});
