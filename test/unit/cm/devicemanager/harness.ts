// The device manager's unit tests share this: a manager on a fake clock over a temp folder, and
// pods asking for devices.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  DeviceManagerCore,
  type DeviceManagerCoreDeps,
} from "../../../../src/agent/cm/devicemanager/manager.ts";
import type { Container, Pod } from "../../../../src/api/types.ts";
import { FakeClock } from "../../../../src/util/clock.ts";
import { createLogger } from "../../../../src/util/log.ts";
import { makeContainer, makePod } from "../../../lib/builders.ts";
import { devicesOf, FakeDeviceEndpoint } from "../../../lib/fake-device-endpoint.ts";

export const SERIAL = "fleetlet.io/serial";
export const GPU = "vendor.example/gpu";
export const MIN = 60_000;

/** A temp folder for the checkpoint; `remove()` after the test. */
export function tempDir(): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), "fleetlet-devmgr-"));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

export function withDevices(
  name: string,
  limits: Record<string, number>,
  extra: Partial<Container> = {},
): Container {
  const list = Object.fromEntries(Object.entries(limits).map(([k, v]) => [k, String(v)]));
  return makeContainer({ name, resources: { limits: list, requests: { ...list } }, ...extra });
}

/** A pod named `name` whose one container "app" asks for `n` of `resource`. */
export function podWith(name: string, n: number, resource = SERIAL): Pod {
  return makePod({ name, containers: [withDevices("app", { [resource]: n })] });
}

export const uid = (pod: Pod) => pod.metadata.uid ?? "";

export interface Harness {
  clock: FakeClock;
  /** "pod type reason: message" of every event. */
  events: string[];
  logs: string[];
  /** What activePods() returns. */
  active: Pod[];
  /** onChange calls so far. */
  changes: number;
  manager: DeviceManagerCore;
}

/** A manager on a fake clock with its checkpoint in `dir`, recording events, logs and changes. */
export function harness(dir: string, over: Partial<DeviceManagerCoreDeps> = {}): Harness {
  const clock = (over.clock as FakeClock | undefined) ?? new FakeClock();
  const events: string[] = [];
  const logs: string[] = [];
  const h: Omit<Harness, "manager"> & { manager?: DeviceManagerCore } = {
    clock,
    events,
    logs,
    active: [],
    changes: 0,
  };
  const manager = DeviceManagerCore.open({
    clock,
    logger: createLogger({ level: "debug", write: (l) => logs.push(l) }),
    checkpointDir: dir,
    event: (pod, type, reason, message) =>
      events.push(`${pod.metadata.name} ${type} ${reason}: ${message}`),
    activePods: () => h.active,
    ...over,
  });
  manager.onChange(() => {
    h.changes++;
  });
  h.manager = manager;
  return h as Harness;
}

/** An endpoint listing `ids` (all healthy) as soon as it is added to `m`. */
export function serve(
  m: DeviceManagerCore,
  ids: string[],
  resource = SERIAL,
  options: ConstructorParameters<typeof FakeDeviceEndpoint>[1] = {},
): FakeDeviceEndpoint {
  const ep = new FakeDeviceEndpoint(resource, options, devicesOf(ids));
  m.addEndpoint(ep);
  return ep;
}
