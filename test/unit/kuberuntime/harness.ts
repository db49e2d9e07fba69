// A runtime manager over the fake CRI runtime, a fake clock and temp folders, recording events.

import { expect } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  createRuntimeManager,
  type RuntimeManagerDeps,
} from "../../../src/agent/kuberuntime/index.ts";
import { createVolumeManager } from "../../../src/agent/volumes/index.ts";
import type { Pod } from "../../../src/api/types.ts";
import { createFakeRuntime } from "../../../src/cri/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { FakeMounter } from "../../lib/fake-mounter.ts";
import { T0 } from "./fixtures.ts";

interface RecordedEvent {
  type: string;
  reason: string;
  message: string;
  fieldPath?: string;
}

export function makeHarness(extra: Partial<RuntimeManagerDeps> = {}) {
  const clock = new FakeClock(T0);
  const cri = createFakeRuntime({ now: () => clock.now() });
  cri.images.add("busybox:1.36");
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-kuberuntime-"));
  const events: RecordedEvent[] = [];
  const mounter = new FakeMounter();
  const volumes = createVolumeManager({
    rootDir: join(dir, "root"),
    nodeName: "node1",
    objects: extra.objects ?? { configMap: () => undefined, secret: () => undefined },
    allocatable: () => ({ cpu: 2000, memory: 4 * 1024 ** 3, ephemeralStorage: 0 }),
    clock,
    logger: nullLogger,
    recorder: (_pod, type, reason, message) => events.push({ type, reason, message }),
    mounter,
  });
  const deps: RuntimeManagerDeps = {
    volumes,
    cri,
    clock,
    logger: nullLogger,
    recorder: (_pod, type, reason, message, fieldPath) => {
      events.push({ type, reason, message, ...(fieldPath ? { fieldPath } : {}) });
    },
    podLogsDir: join(dir, "logs"),
    rootDir: join(dir, "root"),
    nodeName: "node1",
    nodeIP: () => "192.168.1.2",
    nodeMemoryBytes: 4 * 1024 ** 3,
    crashLoopBackOff: { initialMs: 10_000, maxMs: 300_000 },
    imagePullBackOff: { initialMs: 10_000, maxMs: 300_000 },
    runtimeRequestTimeoutMs: 5_000,
    resolvConfPath: "",
    random: () => "0000abcd",
    ...extra,
  };
  const rm = createRuntimeManager(deps);
  /** Reads the pod's status from the fake and syncs it once. */
  const read = (pod: Pod) => rm.getPodStatus(pod.metadata.uid ?? "", pod.metadata.name, "default");
  /** Syncs the pod once; the status read after it with the fewest calls must equal a full read. */
  const sync = async (pod: Pod, opts = {}) => {
    await volumes.mountPod(pod, false);
    const status = await read(pod);
    const result = await rm.syncPod(pod, status, opts);
    // The check's own calls are left out of the record the tests read.
    const recorded = cri.calls.length;
    const after = await rm.getPodStatusAfter(status, result.changes);
    expect({ ...after, timestamp: 0 }).toEqual({ ...(await read(pod)), timestamp: 0 });
    cri.calls.length = recorded;
    clock.step(1);
    return result;
  };
  const reasons = () => events.map((e) => e.reason);
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  return { clock, cri, dir, events, deps, rm, sync, reasons, cleanup, volumes, mounter };
}
