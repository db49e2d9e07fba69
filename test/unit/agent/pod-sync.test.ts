import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PodStatus } from "../../../src/agent/kubecontainer/types.ts";
import {
  type CachedStatus,
  createPodSync,
  type DevicePreparation,
  type PodRuntime,
  type PodSyncDeps,
} from "../../../src/agent/podsync/index.ts";
import { createStatusManager } from "../../../src/agent/status/index.ts";
import type { Pod } from "../../../src/api/types.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makePod } from "../../lib/builders.ts";

const T0 = Date.UTC(2024, 4, 1, 10, 0, 0);
/** The monotonic reading of a FakeClock started at T0: what cache entries are timed by. */
const M0 = new FakeClock(T0).monotonic();
const noChanges = () => ({ sandboxes: [], containers: [] });

function runningStatus(pod: Pod, at: number): PodStatus {
  return {
    uid: pod.metadata.uid as string,
    name: pod.metadata.name,
    namespace: "default",
    ips: ["10.0.0.2"],
    sandboxes: [
      {
        id: "sb1",
        state: "ready",
        createdAt: at,
        attempt: 0,
        ips: ["10.0.0.2"],
      } as PodStatus["sandboxes"][number],
    ],
    containers: [],
    timestamp: at,
  };
}

/** A pod-sync over a runtime that counts status reads and a cache the test fills. */
function setup(opts: { acts: boolean }, extra: Partial<PodSyncDeps> = {}) {
  const clock = new FakeClock(T0);
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-podsync-"));
  const reads: string[] = [];
  const planned: PodStatus[] = [];
  const cache = new Map<string, CachedStatus>();
  const pod = makePod({ name: "web" });
  /** readPending() of the pod as the runtime saw it, per call. */
  const pending: string[] = [];
  const seePending = (call: string) =>
    pending.push(`${call}:${sync.readPending(pod.metadata.uid as string)}`);
  let runtimeSync: PodRuntime["syncPod"] | undefined;
  const readStatus = async () => {
    reads.push("status");
    seePending("status");
    return runningStatus(pod, clock.now());
  };
  const runtime: PodRuntime = {
    getPods: async () => [],
    getPodStatus: readStatus,
    getPodStatusAfter: readStatus,
    syncPod: async (p, status, o) => {
      if (runtimeSync) return runtimeSync(p, status, o);
      planned.push(status);
      seePending("sync");
      clock.step(5);
      return { waiting: new Map(), changes: noChanges() };
    },
    killPod: async () => {
      seePending("kill");
    },
    removePod: async () => {},
  };
  const sync = createPodSync({
    runtime,
    statusManager: createStatusManager({ clock }),
    clock,
    logger: nullLogger,
    rootDir: dir,
    hostIP: () => "192.168.1.2",
    updateCache: (uid, status) => cache.set(uid, { status, timestamp: status.timestamp }),
    isDesired: () => true,
    cachedStatus: (uid) => cache.get(uid),
    hasActions: () => opts.acts,
    ...extra,
  });
  return {
    clock,
    dir,
    reads,
    planned,
    cache,
    pending,
    pod,
    sync,
    setRuntimeSync: (f: PodRuntime["syncPod"]) => {
      runtimeSync = f;
    },
    done: () => rmSync(dir, { recursive: true }),
  };
}

describe("createPodSync() settled()", () => {
  test("marks the status read back after acting only when it leaves nothing more to do", async () => {
    for (const leftover of [false, true]) {
      // The plan from the empty status acts; the one from the status read back has `leftover`.
      const s = setup(
        { acts: true },
        { hasActions: (_pod, status) => status.sandboxes.length === 0 || leftover },
      );
      await s.sync.syncPod(s.pod, "create");
      const uid = s.pod.metadata.uid as string;
      const read = s.cache.get(uid)?.status as PodStatus;
      expect({ leftover, settled: s.sync.settled(uid, read) }).toEqual({
        leftover,
        settled: !leftover,
      });
      expect(s.sync.settled(uid, { ...read })).toBe(false);
      s.done();
    }
  });
});

describe("createPodSync() readPending()", () => {
  test("is true while a sync acts on the pod and reads its status after, false once done", async () => {
    const s = setup({ acts: true });
    await s.sync.syncPod(s.pod, "create");
    expect(s.pending).toEqual(["sync:true", "status:true"]);
    expect(s.sync.readPending(s.pod.metadata.uid as string)).toBe(false);
    s.done();
  });

  test("is false during a sync with nothing to do, which reads nothing after", async () => {
    const s = setup({ acts: false });
    await s.sync.syncPod(s.pod, "sync");
    expect(s.pending).toEqual(["sync:false"]);
    s.done();
  });

  test("is true through a terminating sync, which reads the status after the kill", async () => {
    const s = setup({ acts: true });
    await s.sync.syncTerminatingPod(s.pod, 30, {});
    expect(s.pending).toEqual(["status:true", "kill:true", "status:true"]);
    expect(s.sync.readPending(s.pod.metadata.uid as string)).toBe(false);
    s.done();
  });
});

describe("createPodSync() syncPod reading the runtime", () => {
  test("plans a pod the runtime has never had from an empty status, without reading the runtime", async () => {
    const s = setup({ acts: true });
    await s.sync.syncPod(s.pod, "create");
    expect(s.planned[0]?.containers).toEqual([]);
    expect(s.planned[0]?.sandboxes).toEqual([]);
    expect(s.reads).toEqual(["status"]); // once, after acting
    s.done();
  });

  test("reads the runtime again after acting and stores that status in the cache", async () => {
    const s = setup({ acts: true });
    await s.sync.syncPod(s.pod, "create");
    expect(s.cache.get(s.pod.metadata.uid as string)?.status?.sandboxes).toHaveLength(1);
    s.done();
  });

  test("plans a resync from the cache when the entry was read after its last action", async () => {
    const s = setup({ acts: false });
    const uid = s.pod.metadata.uid as string;
    s.cache.set(uid, { status: runningStatus(s.pod, M0), timestamp: M0 });
    await s.sync.syncPod(s.pod, "sync");
    await s.sync.syncPod(s.pod, "sync");
    expect(s.reads).toEqual([]);
    expect(s.planned[1]?.sandboxes[0]?.id).toBe("sb1");
    s.done();
  });

  test("reads the runtime when the cached entry is older than its last action", async () => {
    const s = setup({ acts: true });
    const uid = s.pod.metadata.uid as string;
    await s.sync.syncPod(s.pod, "create");
    s.cache.set(uid, { status: runningStatus(s.pod, M0 - 1000), timestamp: M0 - 1000 });
    s.reads.length = 0;
    await s.sync.syncPod(s.pod, "sync");
    expect(s.reads).toEqual(["status", "status"]); // before planning, and after acting
    s.done();
  });

  test("reads the runtime when the last read of the cached entry failed", async () => {
    const s = setup({ acts: false });
    const uid = s.pod.metadata.uid as string;
    s.cache.set(uid, { status: undefined, timestamp: M0, error: new Error("boom") });
    await s.sync.syncPod(s.pod, "sync");
    expect(s.reads).toEqual(["status"]);
    s.done();
  });

  test("publishes the pod's status once when nothing is to be done", async () => {
    const s = setup({ acts: false });
    const uid = s.pod.metadata.uid as string;
    s.cache.set(uid, { status: runningStatus(s.pod, M0), timestamp: M0 });
    const result = await s.sync.syncPod(s.pod, "sync");
    expect(result).toEqual({ terminal: false, retry: false });
    expect(s.reads).toEqual([]);
    s.done();
  });
});

describe("createPodSync() prepareInTurn", () => {
  test("a pod without a sandbox makes its cgroup inside prepareInTurn; a running pod does not wait for a turn", async () => {
    const log: string[] = [];
    const s = setup(
      { acts: true },
      {
        prepareInTurn: async (pod, prepare) => {
          log.push(`turn ${pod.metadata.name}`);
          await prepare();
          log.push("turn ends");
        },
        podCgroups: {
          ensure: async () => {
            log.push("cgroup");
          },
          remove: async () => {},
        },
      },
    );
    await s.sync.syncPod(s.pod, "create");
    expect(log).toEqual(["turn web", "cgroup", "turn ends"]);
    // The sync stored the status it read after acting: the pod now has a sandbox.
    log.length = 0;
    await s.sync.syncPod(s.pod, "sync");
    expect(log).toEqual(["cgroup"]);
    s.done();
  });
});

describe("createPodSync() cancelled by a kill", () => {
  test("passes the signal to the runtime and to prepareInTurn; a cancelled sync stores no errors and reads nothing after", async () => {
    const ac = new AbortController();
    const seen: string[] = [];
    const s = setup(
      { acts: true },
      {
        prepareInTurn: async (_pod, prepare, signal) => {
          seen.push(`turn signal=${signal === ac.signal}`);
          await prepare();
        },
      },
    );
    s.setRuntimeSync(async (_pod, _status, opts) => {
      seen.push(`runtime signal=${opts.signal === ac.signal}`);
      ac.abort(new Error("the pod is being terminated"));
      return {
        waiting: new Map([["app", { reason: "CreatePodSandboxError", message: "x" }]]),
        changes: noChanges(),
      };
    });
    const result = await s.sync.syncPod(s.pod, "create", ac.signal);
    expect(result).toEqual({ terminal: false });
    expect(seen).toEqual(["turn signal=true", "runtime signal=true"]);
    expect(s.sync.syncErrors(s.pod.metadata.uid as string)).toBeUndefined();
    expect(s.reads).toEqual([]);
    s.done();
  });
});

describe("createPodSync() with a volume manager", () => {
  test("does not reach the runtime while a volume is missing, and asks to be retried; a running pod goes on", async () => {
    const calls: string[] = [];
    let ready = false;
    const s = setup(
      { acts: true },
      {
        volumes: {
          mountPod: async (_pod, running) => {
            calls.push(`mount running=${running}`);
            // As the volume manager: a running pod is never held back.
            return { ready: ready || running };
          },
          unmountPod: async () => true,
          removePod: async () => true,
        },
      },
    );
    try {
      expect(await s.sync.syncPod(s.pod, "create")).toEqual({ terminal: false, retry: true });
      expect(s.planned).toEqual([]);
      ready = true;
      expect((await s.sync.syncPod(s.pod, "sync")).terminal).toBe(false);
      expect(s.planned).toHaveLength(1);
      // The runtime now has the pod: it is synced whatever the volumes say.
      ready = false;
      await s.sync.syncPod(s.pod, "sync");
      expect(s.planned).toHaveLength(2);
      expect(calls).toEqual(["mount running=false", "mount running=false", "mount running=true"]);
    } finally {
      s.done();
    }
  });

  test("holds a pod Pending while its device plugin has not registered, each container waiting with the reason, with one event", async () => {
    const statusManager = createStatusManager({ clock: new FakeClock(T0) });
    const events: string[] = [];
    let preparation: DevicePreparation = {
      state: "waiting",
      reason: "DevicePluginNotRegistered",
      message: "waiting up to 5m0s for the device plugin of fleetlet.io/serial to register",
    };
    const s = setup(
      { acts: true },
      {
        statusManager,
        devices: {
          prepare: async () => preparation,
          resourceStatus: (_uid, name) =>
            preparation.state === "ready" && name === s.pod.spec.containers[0]?.name
              ? [
                  {
                    name: "fleetlet.io/serial",
                    resources: [{ resourceID: "/dev/ttyUSB0", health: "Healthy" }],
                  },
                ]
              : [],
        },
        event: (_pod, type, reason) => events.push(`${type} ${reason}`),
      },
    );
    const uid = s.pod.metadata.uid as string;
    try {
      expect(await s.sync.syncPod(s.pod, "create")).toEqual({ terminal: false, retry: true });
      expect(await s.sync.syncPod(s.pod, "sync")).toEqual({ terminal: false, retry: true });
      expect(s.planned).toEqual([]);
      expect(s.sync.waitingForDevices()).toEqual([uid]);
      const status = statusManager.getPodStatus(uid);
      expect(status?.phase).toBe("Pending");
      expect(status?.containerStatuses?.[0]?.state?.waiting?.reason).toBe(
        "DevicePluginNotRegistered",
      );
      expect(events).toEqual(["Warning DevicePluginNotRegistered"]);
      expect(status?.containerStatuses?.[0]?.allocatedResourcesStatus).toBeUndefined();
      preparation = { state: "ready" };
      await s.sync.syncPod(s.pod, "sync");
      expect(s.planned).toHaveLength(1);
      expect(s.sync.waitingForDevices()).toEqual([]);
      // Once it holds them, its status names the devices with their health.
      expect(
        statusManager.getPodStatus(uid)?.containerStatuses?.[0]?.allocatedResourcesStatus,
      ).toEqual([
        {
          name: "fleetlet.io/serial",
          resources: [{ resourceID: "/dev/ttyUSB0", health: "Healthy" }],
        },
      ]);
    } finally {
      s.done();
    }
  });

  test("fails a pod whose devices cannot be allocated, as admission rejects it, without reaching the runtime", async () => {
    const statusManager = createStatusManager({ clock: new FakeClock(T0) });
    const events: string[] = [];
    const message =
      "Allocate failed due to requested number of devices unavailable for fleetlet.io/serial. Requested: 2, Available: 1, which is unexpected";
    const s = setup(
      { acts: true },
      {
        statusManager,
        devices: {
          prepare: async () => ({ state: "failed", reason: "UnexpectedAdmissionError", message }),
          resourceStatus: () => [],
        },
        event: (_pod, type, reason, text) => events.push(`${type} ${reason}: ${text}`),
      },
    );
    try {
      expect(await s.sync.syncPod(s.pod, "create")).toEqual({ terminal: true });
      expect(s.planned).toEqual([]);
      const status = statusManager.getPodStatus(s.pod.metadata.uid as string);
      expect(status?.phase).toBe("Failed");
      expect(status?.reason).toBe("UnexpectedAdmissionError");
      expect(status?.message).toBe(`Pod was rejected: ${message}`);
      expect(events).toEqual([`Warning UnexpectedAdmissionError: ${message}`]);
      // It stays Failed: a later sync finds it terminal.
      expect(await s.sync.syncPod(s.pod, "sync")).toEqual({ terminal: true });
    } finally {
      s.done();
    }
  });

  test("never fails a pod already running for its devices: it goes on and waits", async () => {
    const statusManager = createStatusManager({ clock: new FakeClock(T0) });
    const s = setup(
      { acts: true },
      {
        statusManager,
        devices: {
          prepare: async () => ({
            state: "failed",
            reason: "UnexpectedAdmissionError",
            message:
              "Allocate failed due to cannot allocate unregistered device x.io/y, which is unexpected",
          }),
          resourceStatus: () => [],
        },
      },
    );
    const uid = s.pod.metadata.uid as string;
    s.cache.set(uid, { status: runningStatus(s.pod, M0), timestamp: M0 + 1 });
    try {
      expect(await s.sync.syncPod(s.pod, "sync")).toEqual({ terminal: false, retry: true });
      expect(statusManager.getPodStatus(uid)?.phase).not.toBe("Failed");
      expect(s.sync.waitingForDevices()).toEqual([uid]);
    } finally {
      s.done();
    }
  });

  test("removes a terminated pod's folder through the volume manager, and only unmounts a finished pod still wanted", async () => {
    const calls: string[] = [];
    let desired = true;
    const s = setup(
      { acts: false },
      {
        isDesired: () => desired,
        volumes: {
          mountPod: async () => ({ ready: true }),
          unmountPod: async (uid) => {
            calls.push(`unmount ${uid}`);
            return true;
          },
          removePod: async (uid) => {
            calls.push(`remove ${uid}`);
            return true;
          },
        },
      },
    );
    try {
      await s.sync.syncTerminatedPod(s.pod, {});
      desired = false;
      await s.sync.syncTerminatedPod(s.pod, {});
      expect(calls).toEqual(["unmount uid-default-web", "remove uid-default-web"]);
    } finally {
      s.done();
    }
  });
});
