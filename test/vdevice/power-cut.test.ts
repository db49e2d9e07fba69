// Power cuts on a virtual device (scripts/vdevice): the guest is killed in the middle of pod
// starts, a manifest write and the hub outbox's writes, then booted with the hub unreachable, then
// with the hub reachable. The agent must come up by itself, bring every wanted pod back in a new
// sandbox with restart counts going on, run nothing from the half-written manifest, read its
// outbox, and the hub must end up with the device's view and one node.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Node } from "../../src/api/node.ts";
import type { Pod } from "../../src/api/types.ts";
import { TestHub } from "../lib/hub.ts";
import { podNetworkShellManifest } from "../lib/manifests.ts";
import { eventually } from "../lib/testbed.ts";
import {
  containerState,
  deviceConfig,
  type GuestSandbox,
  DEVICE_IMAGE as IMAGE,
  isRunning,
  parseSandboxes,
  podNamed,
  VirtualDevice,
  vdeviceEnv,
  vdeviceNet,
} from "../lib/vdevice.ts";

const dev = new VirtualDevice("pcut", "vdpcut");
const MANIFESTS = "/etc/fleetlet/manifests";
let hub: TestHub;

const manifest = (name: string, command: string) => podNetworkShellManifest(name, IMAGE, command);

const WANTED = ["steady", "crashy", "late-a", "late-b", "late-c"];
const uidOf = (pods: Pod[], name: string) => podNamed(pods, name, dev.nodeName)?.metadata.uid;
const restarts = (pods: Pod[], name: string) =>
  containerState(podNamed(pods, name, dev.nodeName))?.restartCount ?? -1;
const allRunning = (pods: Pod[], names = WANTED) =>
  names.every((n) => isRunning(podNamed(pods, n, dev.nodeName)));
const boots = () => dev.agentLog().match(/^vdevice: agent start 1 at/gm)?.length ?? 0;

async function hubPods(): Promise<Pod[]> {
  const res = await hub.api(`/api/v1/pods?nodeName=${dev.nodeName}`);
  return ((await res.json()) as { items: Pod[] }).items;
}

async function hubNodes(): Promise<Node[]> {
  return ((await (await hub.api("/api/v1/nodes")).json()) as { items: Node[] }).items;
}

// What the device looked like when its power was cut.
let before: Pod[] = [];
let sandboxesBefore: GuestSandbox[] = [];
let crashyBefore = 0;

/**
 * New pods start, and a writer has put the first part of a manifest on disk (its last line cut
 * short, as a power loss leaves a file written in pieces), when the power goes.
 */
async function cutWhilePodsStart(): Promise<void> {
  sandboxesBefore = await dev.sandboxes();
  const torn = manifest("torn", "sleep 3600");
  const cut = torn.indexOf("fleetlet-test/busybox");
  // The new manifests are written whole and synced (what is not on the disk when the power
  // goes is not wanted: an unsynced new file comes back empty), the torn one in part.
  const results = "/var/lib/cni/results";
  const late = ["late-a", "late-b", "late-c"];
  const copies = late.map((n) => {
    const from = dev.stage(manifest(n, "sleep 3600"));
    return `cp ${from} ${MANIFESTS}/.${n}.tmp && mv ${MANIFESTS}/.${n}.tmp ${MANIFESTS}/${n}.yaml`;
  });
  const cniFiles = Number(
    await dev.sh(`ls ${results} | wc -l
${copies.join("\n")}
cat ${dev.stage(torn.slice(0, cut + 6))} > ${MANIFESTS}/torn.yaml
sync`),
  );
  before = await dev.pods();
  crashyBefore = restarts(before, "crashy");
  // The cut lands a few seconds after a new pod's sandbox got its network: its container being
  // started, the others' starts under way or waiting. The CNI plugins' cached results of that
  // sandbox then come back empty (ext4 committed the new files but not yet their data), or
  // absent (no journal commit yet): which one depends on where ext4's 5 s commit falls.
  await dev.sh(`until [ "$(ls ${results} | wc -l)" -gt ${cniFiles} ]; do sleep 0.1; done; sleep 3`);
  await dev.powerCut();
}

/** Boots the device after a cut, with a look at its disk and containerd before the agent runs. */
async function bootAfterCut(): Promise<{ early: GuestSandbox[]; emptyCni: string[] }> {
  // On the next boot, before anything starts: a record torn in the middle ends the outbox
  // (what a cut during the append leaves), and containerd's view before the agent acts.
  dev.setHook(
    "pre-boot",
    `echo "empty CNI cache files: $(find /var/lib/cni/results -type f -size 0 | tr '\\n' ' ')"
printf '%s' '{"t":"m","m":{"type":"pod.upsert","uid":"x","pod":{"apiVe' >> /var/lib/fleetlet/hub/outbox`,
  );
  dev.setHook("pre-agent", VirtualDevice.listSandboxesScript);
  await dev.boot({ net: true });
  const early = parseSandboxes(await dev.hookOutput("pre-agent"));
  const preBoot = await dev.hookOutput("pre-boot");
  // A cache file is named after its sandbox's id: those of sandboxes containerd recorded.
  const emptyFiles = /empty CNI cache files: (.*)/.exec(preBoot)?.[1] ?? "";
  const emptyCni = early.filter((s) => emptyFiles.includes(s.id)).map((s) => s.id);
  dev.setHook("pre-boot", undefined);
  dev.setHook("pre-agent", undefined);
  return { early, emptyCni };
}

beforeAll(async () => {
  vdeviceNet("up");
  hub = new TestHub([], vdeviceEnv().hostAddr);
  await hub.start();
  const joinToken = await hub.joinToken();
  await dev.create(
    deviceConfig(
      dev.nodeName,
      `hubReconnectBackOffBase: 1s
hubReconnectBackOffMax: 4s
hub: {url: "${hub.url}", joinToken: "${joinToken}"}
`,
    ),
  );
  await dev.boot({ net: true });
}, 120_000);

afterAll(async () => {
  await dev.destroy();
  await hub?.cleanup();
  vdeviceNet("down");
}, 60_000);

describe("power cuts on a virtual device (needs root and user-mode Linux: scripts/vdevice)", () => {
  test("before the cut: the device runs its pods and the hub sees them", async () => {
    await dev.writeFile(`${MANIFESTS}/steady.yaml`, manifest("steady", "sleep 3600"), {
      atomic: true,
    });
    await dev.writeFile(`${MANIFESTS}/crashy.yaml`, manifest("crashy", "sleep 1; exit 3"), {
      atomic: true,
    });
    await dev.waitPods(
      "steady to run and crashy to have restarted",
      (ps) => allRunning(ps, ["steady"]) && restarts(ps, "crashy") >= 2,
      // The first pods pull their image into the guest, which is slow when the host is busy.
      240_000,
    );
    // The device reaches this host only: its one link is the host-only one, with no default route.
    expect(await dev.sh("ip -4 route")).not.toContain("default");
    await eventually(
      "the hub to show both pods",
      async () => (await hubPods()).length === 2,
      30_000,
      500,
    );
  }, 300_000);

  test("cut in the middle of pod starts, a manifest write and outbox writes; back with the hub unreachable", async () => {
    await hub.stop();
    await cutWhilePodsStart();
    const { early, emptyCni } = await bootAfterCut();
    // containerd's metadata survived (old sandboxes listed), its running state did not.
    expect(early.map((s) => s.id).sort()).toEqual(
      expect.arrayContaining(sandboxesBefore.map((s) => s.id).sort()),
    );
    expect(early.filter((s) => s.running)).toEqual([]);

    // Every wanted pod comes back, started by the agent that the device's init started.
    const after = await dev.waitPods(
      "every wanted pod to run again",
      (ps) => allRunning(ps),
      240_000,
    );
    expect(boots()).toBe(2);
    expect(dev.agentLog()).not.toContain("vdevice: agent exited");
    // Restart counts go on from before the cut: the container that ran then is dead now.
    expect(restarts(after, "steady")).toBe(restarts(before, "steady") + 1);
    expect(restarts(after, "crashy")).toBeGreaterThan(crashyBefore);
    for (const name of WANTED) expect(uidOf(after, name)).toBeDefined();
    // No pod from the half-written manifest, and it is reported.
    expect(podNamed(after, "torn", dev.nodeName)).toBeUndefined();
    expect(dev.agentLog()).toMatch(/invalid static pod manifest[^\n]*torn\.yaml/);
    // One running sandbox per pod, each new (containerd listed the old ones before the agent ran).
    const sandboxes = await dev.sandboxes();
    const oldIds = new Set(early.map((s) => s.id));
    for (const name of WANTED) {
      const running = sandboxes.filter((s) => s.uid === uidOf(after, name) && s.running);
      expect(running.length).toBe(1);
      expect(oldIds.has(running[0]?.id ?? "")).toBe(false);
    }
    // A cut may leave the CNI plugins' cached result of a sandbox empty; whether containerd can
    // then stop that sandbox depends on where the cut fell, so this test only counts them (the
    // pods came back either way). test/e2e/dead-sandbox.test.ts empties a cache on purpose and
    // checks what the agent does with a sandbox containerd cannot stop.
    console.log(`power cut: ${emptyCni.length} recorded sandboxes with an empty CNI cache`);
    // The outbox was read: the torn record dropped and counted.
    expect(dev.agentLog()).toMatch(/skipped unreadable lines of the hub outbox[^\n]*lines=[1-9]/);
  }, 400_000);

  test("booted with the hub reachable again: the hub's view converges, with one node", async () => {
    await dev.powerCut();
    await hub.start();
    await dev.boot({ net: true });
    const device = await dev.waitPods(
      "every wanted pod to run again",
      (ps) => allRunning(ps),
      240_000,
    );
    // crashy's restart count moves every few seconds: compared apart.
    const summary = (pods: Pod[]) =>
      pods
        .map((p) => {
          const n = p.metadata.name.startsWith("crashy") ? "" : containerState(p)?.restartCount;
          return `${p.metadata.name} ${p.status?.phase} ${n}`;
        })
        .sort();
    await eventually(
      "the hub to show what the device shows",
      async () => {
        const [onHub, onDevice] = [summary(await hubPods()), summary(await dev.apiPods())];
        return JSON.stringify(onHub) === JSON.stringify(onDevice) ? onHub : undefined;
      },
      60_000,
      1000,
    );
    expect(device.length).toBe(WANTED.length);
    expect(restarts(await hubPods(), "crashy")).toBeGreaterThan(crashyBefore);
    const nodes = await hubNodes();
    expect(nodes.map((n) => n.metadata.name)).toEqual([dev.nodeName]);
    expect(nodes[0]?.status?.conditions?.find((c) => c.type === "Ready")?.status).toBe("True");
  }, 300_000);
});
