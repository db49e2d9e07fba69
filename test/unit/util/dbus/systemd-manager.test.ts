// The systemd unit manager against a fake org.freedesktop.systemd1 (test/lib/fake-systemd.ts)
// on a private dbus-daemon: transient units started and waited for, stopped, changed, their
// state read, failed ones reset.

import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeClock } from "../../../../src/util/clock.ts";
import {
  connectDBus,
  type DBusConnection,
  DBusError,
} from "../../../../src/util/dbus/connection.ts";
import {
  NO_SUCH_UNIT,
  SystemdManager,
  UNIT_EXISTS,
} from "../../../../src/util/dbus/systemd-manager.ts";
import { Variant } from "../../../../src/util/dbus/types.ts";
import {
  cpuQuotaPerSecUSec,
  UNLIMITED,
  unitProperty,
} from "../../../../src/util/dbus/unit-properties.ts";
import { type PrivateBus, startPrivateBus } from "../../../lib/dbus-daemon.ts";
import { FakeSystemd, servePrivateSocket, unitPath } from "../../../lib/fake-systemd.ts";
import { until } from "../../../lib/until.ts";

const sliceProps = [
  unitProperty("Description", "fleetlet QoS slice burstable"),
  unitProperty("Wants", ["kubepods.slice"]),
  unitProperty("DefaultDependencies", false),
  unitProperty("MemoryAccounting", true),
  unitProperty("CPUAccounting", true),
  unitProperty("TasksAccounting", true),
  unitProperty("MemoryMax", 256n * 1024n * 1024n),
  unitProperty("CPUWeight", 39n),
  unitProperty("CPUQuotaPerSecUSec", UNLIMITED),
  unitProperty("TasksMax", 1024n),
];

describe("SystemdManager against a fake systemd1 on a private dbus-daemon (needs /usr/bin/dbus-daemon; no root)", () => {
  let bus: PrivateBus;
  let fake: FakeSystemd;
  let conn: DBusConnection;
  let clock: FakeClock;
  let manager: SystemdManager;

  beforeAll(async () => {
    bus = await startPrivateBus();
  });
  afterAll(() => bus.stop());
  beforeEach(async () => {
    fake = await FakeSystemd.start(bus.path);
    clock = new FakeClock();
    conn = await connectDBus({ path: bus.path, bus: true, clock, timeoutMs: 5_000 });
    manager = await SystemdManager.create({
      conn,
      clock,
      callTimeoutMs: 5_000,
      jobTimeoutMs: 30_000,
    });
  });
  afterEach(() => {
    manager.close();
    conn.close();
    fake.close();
  });

  test("create() subscribes to systemd's signals", () => {
    expect(fake.calls).toEqual(["Subscribe"]);
  });

  test("startTransientUnit() starts a slice with its typed properties and waits for its job", async () => {
    await manager.startTransientUnit("kubepods-burstable.slice", sliceProps);
    const unit = fake.units.get("kubepods-burstable.slice");
    expect(unit?.activeState).toBe("active");
    expect(unit?.properties.get("Wants")).toEqual(new Variant("as", ["kubepods.slice"]));
    expect(unit?.properties.get("MemoryMax")).toEqual(new Variant("t", 268435456n));
    expect(unit?.properties.get("DefaultDependencies")).toEqual(new Variant("b", false));
    expect(unit?.aux).toEqual([]);
    expect(await manager.activeState("kubepods-burstable.slice")).toBe("active");
  });

  test("a JobRemoved that comes before the reply naming its job is not lost", async () => {
    fake.signalBeforeReply = true;
    await manager.startTransientUnit("kubepods.slice", sliceProps);
    await manager.stopUnit("kubepods.slice");
    expect(fake.units.size).toBe(0);
  });

  test("a start job that ends other than done rejects naming the unit and result", async () => {
    fake.jobResults.set("kubepods-besteffort.slice", "failed");
    await expect(
      manager.startTransientUnit("kubepods-besteffort.slice", sliceProps),
    ).rejects.toThrow(
      'Cannot start systemd unit "kubepods-besteffort.slice": its job ended "failed"',
    );
    expect(await manager.activeState("kubepods-besteffort.slice")).toBe("failed");
    await manager.resetFailedUnit("kubepods-besteffort.slice");
    expect(await manager.activeState("kubepods-besteffort.slice")).toBeNull();
  });

  test("a start job that never ends fails at the job deadline", async () => {
    fake.holdJobs = true;
    const started = manager.startTransientUnit("kubepods.slice", sliceProps).catch((e) => e);
    await until("the start job is waited for", () => manager.waitingJobs === 1);
    clock.step(30_000);
    expect((await started).message).toMatch(
      /^Cannot start systemd unit "kubepods.slice": job \/org\/freedesktop\/systemd1\/job\/\d+ did not end within 30000 ms$/,
    );
  });

  test("an aborted wait for a job rejects with the abort's reason", async () => {
    fake.holdJobs = true;
    const ac = new AbortController();
    const started = manager
      .startTransientUnit("kubepods.slice", sliceProps, { signal: ac.signal })
      .catch((e) => e);
    await until("the start job is waited for", () => manager.waitingJobs === 1);
    ac.abort(new Error("agent stopping"));
    expect((await started).message).toBe("agent stopping");
    expect(manager.waitingJobs).toBe(0);
  });

  test("starting a unit whose name is taken rejects with UnitExists", async () => {
    await manager.startTransientUnit("kubepods.slice", sliceProps);
    const err = await manager.startTransientUnit("kubepods.slice", sliceProps).catch((e) => e);
    expect(err).toBeInstanceOf(DBusError);
    expect(err.errorName).toBe(UNIT_EXISTS);
  });

  test("stopUnit() removes a unit; a unit systemd does not have is already stopped", async () => {
    await manager.startTransientUnit("kubepods.slice", sliceProps);
    await manager.stopUnit("kubepods.slice");
    expect(await manager.activeState("kubepods.slice")).toBeNull();
    await manager.stopUnit("kubepods.slice");
    expect(fake.calls.filter((c) => c === "StopUnit kubepods.slice")).toHaveLength(2);
  });

  test("setUnitProperties() changes a unit's properties; an unknown unit rejects with NoSuchUnit", async () => {
    await manager.startTransientUnit("kubepods.slice", sliceProps);
    await manager.setUnitProperties("kubepods.slice", [unitProperty("MemoryMax", 1n << 30n)]);
    expect(fake.units.get("kubepods.slice")?.properties.get("MemoryMax")).toEqual(
      new Variant("t", 1n << 30n),
    );
    const err = await manager.setUnitProperties("nope.slice", []).catch((e) => e);
    expect(err.errorName).toBe(NO_SUCH_UNIT);
  });

  test("unitPath() gives systemd's object path of a loaded unit", async () => {
    await manager.startTransientUnit("kubepods-pod12_ab.slice", sliceProps);
    expect(await manager.unitPath("kubepods-pod12_ab.slice")).toBe(
      "/org/freedesktop/systemd1/unit/kubepods_2dpod12_5fab_2eslice",
    );
    expect(unitPath("a.slice")).toBe("/org/freedesktop/systemd1/unit/a_2eslice");
  });
});

describe("unit properties (no root)", () => {
  test("each property carries the type systemd wants", () => {
    expect(unitProperty("Description", "x")[1].signature).toBe("s");
    expect(unitProperty("Wants", ["a.slice"])[1].signature).toBe("as");
    expect(unitProperty("Delegate", true)[1].signature).toBe("b");
    expect(unitProperty("CPUShares", 2n)[1].signature).toBe("t");
    expect(unitProperty("PIDs", [1])[1].signature).toBe("au");
    expect(unitProperty("AllowedCPUs", [0b11])[1].signature).toBe("ay");
  });

  const quotas: [number, number | undefined, bigint][] = [
    [50_000, 100_000, 500_000n],
    [100_000, undefined, 1_000_000n],
    [12_345, 100_000, 130_000n], // 123 450 µs/s rounds up to whole percent
    [1, 1_000_000, 10_000n], // under one percent still limits
    [0, 100_000, UNLIMITED],
    [-1, 100_000, UNLIMITED],
    [200_000, 50_000, 4_000_000n],
  ];
  test.each(quotas)("cpuQuotaPerSecUSec(%p, %p) is %p", (quota, period, want) => {
    expect(cpuQuotaPerSecUSec(quota, period)).toBe(want);
  });
});

describe("SystemdManager over a peer-to-peer socket like /run/systemd/private (no root)", () => {
  test("it starts and stops a unit with no bus, no Hello and no AddMatch", async () => {
    const dir = mkdtempSync(join(tmpdir(), "fleetlet-systemd-private-"));
    const fakes: FakeSystemd[] = [];
    const stop = await servePrivateSocket(join(dir, "private"), (f) => fakes.push(f));
    try {
      const clock = new FakeClock();
      const conn = await connectDBus({
        path: join(dir, "private"),
        bus: false,
        clock,
        timeoutMs: 5_000,
      });
      const manager = await SystemdManager.create({
        conn,
        clock,
        callTimeoutMs: 5_000,
        jobTimeoutMs: 30_000,
      });
      expect(conn.uniqueName).toBeUndefined();
      await manager.startTransientUnit("kubepods.slice", sliceProps);
      expect(await manager.activeState("kubepods.slice")).toBe("active");
      await manager.stopUnit("kubepods.slice");
      expect(fakes[0]?.calls).toEqual([
        "Subscribe",
        "StartTransientUnit kubepods.slice",
        "GetUnit kubepods.slice",
        "Get org.freedesktop.systemd1.Unit",
        "StopUnit kubepods.slice",
      ]);
      conn.close();
    } finally {
      stop();
      for (const f of fakes) f.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
