// The Debian package on a device with systemd (scripts/vdevice build --systemd): installed with
// dpkg, its unit runs the agent, which runs a pod; installing a newer package restarts the agent
// on the new binary while the pod's container keeps running, never restarted.
// Needs root and user-mode Linux. The guest's tree is read-only, so a pre-boot hook lays a
// writable layer (on the device's disk) over /usr, /etc and dpkg's database and removes the
// virtual device's own agent unit (the package's replaces it). The agent uses the systemd cgroup
// driver, as the guest's containerd does.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Pod } from "../../src/api/types.ts";
import { run } from "../lib/debian-root.ts";
import { podNetworkShellManifest } from "../lib/manifests.ts";
import { eventually, fleetletBin, repoRoot } from "../lib/testbed.ts";
import {
  containerState,
  DEVICE_IMAGE,
  deviceConfig,
  isRunning,
  podNamed,
  VirtualDevice,
} from "../lib/vdevice.ts";

// dpkg unpacks a 110 MB executable through hostfs onto the device's disk: give it time.
process.env.FLEETLET_VDEVICE_EXEC_TIMEOUT ??= "600";
const dev = new VirtualDevice("debpkg", "vddebpkg");
const older = "0.0.1~test1";
const newer = "0.0.1~test2";

const PRE_BOOT = `set -e
for d in usr etc var/lib/dpkg; do
  n=$(echo "$d" | tr / -)
  mkdir -p "/persist/layer/$n/upper" "/persist/layer/$n/work"
  mount -t overlay overlay -o "lowerdir=/$d,upperdir=/persist/layer/$n/upper,workdir=/persist/layer/$n/work" "/$d"
done
# The new /etc hides the device's config folder: bind it again.
mount --bind /persist/etc-fleetlet /etc/fleetlet
rm -f /etc/systemd/system/fleetlet-agent.service /etc/systemd/system/multi-user.target.wants/fleetlet-agent.service
echo layered`;

/** The agent's main PID as systemd sees it ("0" when it does not run). */
async function agentPid(): Promise<string> {
  return (await dev.sh("systemctl show -p MainPID --value fleetlet-agent")).trim();
}

async function install(version: string): Promise<void> {
  // The device's config is already there: keep it (dpkg would otherwise ask).
  await dev.sh(`dpkg --force-confold -i /shared/pkg/fleetlet_${version}_amd64.deb </dev/null`);
}

const pod = (pods: Pod[]) => podNamed(pods, "steady", dev.nodeName);

beforeAll(async () => {
  // A new device (its shared folder made afresh), then the packages in it.
  await dev.create(
    deviceConfig(
      dev.nodeName,
      "cgroupDriver: systemd\ndevicePluginPath: /var/lib/fleetlet/device-plugins\n",
    ),
  );
  for (const v of [older, newer]) {
    run([join(repoRoot, "scripts/package-deb"), fleetletBin, "amd64", v, join(dev.shared, "pkg")], {
      ...process.env,
      FLEETLET_DEB_COMPRESS: "none",
    } as Record<string, string>);
  }
  dev.setHook("pre-boot", PRE_BOOT);
  await dev.boot({ systemd: true });
  expect((await dev.hookOutput("pre-boot")).trim()).toBe("layered");
  await eventually(
    "the device's images to be imported",
    async () =>
      (await dev.exec("systemctl is-active fleetlet-vdevice-images")).code === 0 || undefined,
    180_000,
    2000,
  );
}, 400_000);
afterAll(() => dev.destroy(), 60_000);

describe("the .deb on a device with systemd (needs root and user-mode Linux: scripts/vdevice)", () => {
  test("dpkg -i enables and starts the packaged agent, which runs a pod", async () => {
    await install(older);
    expect((await dev.sh("systemctl is-enabled fleetlet-agent")).trim()).toBe("enabled");
    expect((await dev.sh("systemctl show -p FragmentPath --value fleetlet-agent")).trim()).toBe(
      "/lib/systemd/system/fleetlet-agent.service",
    );
    expect((await dev.exec("systemctl is-enabled fleetlet-hub")).out.trim()).toBe("disabled");
    await eventually(
      "the packaged agent to run",
      async () => (await agentPid()) !== "0" || undefined,
      60_000,
      1000,
    );
    await dev.writeFile(
      "/etc/fleetlet/manifests/steady.yaml",
      podNetworkShellManifest("steady", DEVICE_IMAGE, "sleep 36000"),
      { atomic: true },
    );
    await dev.waitPods("the pod to run", (pods) => isRunning(pod(pods)), 240_000);
  }, 360_000);

  test("an upgrade restarts the agent on the new binary and leaves the pod's container running", async () => {
    const before = containerState(pod(await dev.pods()));
    const pidBefore = await agentPid();
    expect(before?.restartCount).toBe(0);
    await install(newer);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own format
    expect((await dev.sh("dpkg-query -W -f='${Version}' fleetlet")).trim()).toBe(newer);
    await eventually(
      "a new agent process",
      async () => {
        const pid = await agentPid();
        return (pid !== "0" && pid !== pidBefore) || undefined;
      },
      60_000,
      1000,
    );
    // The new agent has synced the pod: same container, never restarted.
    const after = await dev.waitPods(
      "the new agent to report the pod",
      (pods) => isRunning(pod(pods)),
      180_000,
    );
    const c = containerState(pod(after));
    expect(c?.containerID).toBe(before?.containerID);
    expect(c?.restartCount).toBe(0);
    expect(c?.state?.running?.startedAt).toBe(before?.state?.running?.startedAt);
    expect(
      (
        await dev.sh(
          "journalctl -u fleetlet-agent --no-pager | grep -c 'pods keep running' || true",
        )
      ).trim(),
    ).not.toBe("0");
  }, 360_000);
});
