// Power cuts during an agent update on a virtual device (scripts/vdevice): the device runs the
// agent under the launcher (deploy/fleetlet-launch, /shared/fleetlet as the packaged executable),
// takes signed releases from a hub, and loses its power at each step of an update: during the
// download, once the release is verified and before the install, after each durable step of the
// install (the executable, `trial`, `previous`, `current`), and while the new version starts on
// trial. After each cut the device boots again: its disk shows the step the cut fell on, the
// launcher runs one whole agent (the old version until `current` names the new one, the new one
// from then on), the pod runs again, and the hub hears the version that runs. One cut a boot, the
// update taken up again after each: packaged 0.1.0 → 0.1.1-vd (no `previous` yet), then
// 0.1.1-vd → 0.1.2-vd. A step is reached with FLEETLET_TEST_UPDATE_PAUSE (src/agent/update/
// test-pause.ts), which freezes the agent there, and the first download is slowed with
// updateBandwidthLimit so that the cut falls in its middle (the boot after that cut lifts the
// limit: the later downloads only wait). Needs root and user-mode Linux.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TestHub } from "../lib/hub.ts";
import { podNetworkShellManifest } from "../lib/manifests.ts";
import { eventually, fleetletBin, repoRoot } from "../lib/testbed.ts";
import {
  DEVICE_IMAGE,
  deviceConfig,
  isRunning,
  podNamed,
  VirtualDevice,
  vdeviceEnv,
  vdeviceNet,
} from "../lib/vdevice.ts";

const dev = new VirtualDevice("updcut", "vdupdcut");
const hub = new TestHub([], vdeviceEnv().hostAddr);
const work = mkdtempSync(join(tmpdir(), "fleetlet-update-cut-"));
const DIR = "/var/lib/fleetlet/agent";

/** A build the device may run: its version, its bytes' sha256, where the launcher runs it from. */
interface Build {
  version: string;
  sha256: string;
  /** Its version folder's name (a release), or "" (the packaged executable). */
  folder: string;
  path: string;
}

function run(args: string[], env: Record<string, string> = {}): string {
  const p = Bun.spawnSync(args, {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, ...env },
  });
  if (p.exitCode !== 0) throw new Error(`${args.join(" ")}: ${p.stderr.toString()}`);
  return p.stdout.toString();
}

const sha256Of = (file: string) => run(["sha256sum", file]).slice(0, 64);

/** The packaged executable: the build under test, as /shared/fleetlet. */
const A: Build = {
  version: JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")).version,
  sha256: sha256Of(fleetletBin),
  folder: "",
  path: "/shared/fleetlet",
};

/** A release: the same code with `version` stamped, signed with the operator's key. */
function release(version: string): Build {
  const file = join(work, `fleetlet-${version}`);
  run([join(repoRoot, "scripts/build"), "--outfile", file], { FLEETLET_BUILD_VERSION: version });
  run([fleetletBin, "release", "sign", "--key", join(work, "ops.key"), "--version", version, file]);
  const sha256 = sha256Of(file);
  const folder = `${version}-${sha256.slice(0, 12)}`;
  return { version, sha256, folder, path: `${DIR}/versions/${folder}/fleetlet` };
}

let B: Build;
let C: Build;

const hubCli = (...args: string[]) =>
  run([fleetletBin, "hub", ...args, "--hub", hub.url, "--token", hub.operatorToken]);

/** Sets (or with undefined cancels) the release the hub wants the device to run. */
async function wantRelease(b: Build | undefined): Promise<void> {
  const path = `/api/v1/nodes/${dev.nodeName}/update`;
  const res =
    b === undefined
      ? await hub.api(path, { method: "DELETE" })
      : await hub.api(path, { method: "PUT", body: JSON.stringify({ version: b.version }) });
  if (res.status !== 200) throw new Error(`${path}: HTTP ${res.status}: ${await res.text()}`);
}

/** The launcher's folder as the cut left it (read at boot, before anything runs). */
interface DiskState {
  links: Record<string, string>;
  trial?: string;
  /** Each executable and download file: "path size sha256". */
  files: string[];
}

const STATE_SCRIPT = `cd ${DIR} 2>/dev/null || exit 0
for l in current previous; do [ -L "$l" ] && echo "link $l $(readlink "$l")"; done
[ -f trial ] && echo "trial $(cat trial)"
for f in versions/*/fleetlet download/*; do
  [ -f "$f" ] && echo "file $f $(stat -c %s "$f") $(sha256sum < "$f" | cut -c1-64)"
done
exit 0`;

function parseState(text: string): DiskState {
  const state: DiskState = { links: {}, files: [] };
  for (const line of text.split("\n")) {
    const [kind, ...rest] = line.trim().split(" ");
    if (kind === "link" && rest[0] !== undefined) state.links[rest[0]] = rest[1] ?? "";
    if (kind === "trial") state.trial = rest.join(" ");
    if (kind === "file") state.files.push(rest.join(" "));
  }
  return state;
}

/** The executables in version folders, each as "path size sha256". */
const executables = (s: DiskState) => s.files.filter((f) => f.startsWith("versions/")).sort();
const sizeOf = (b: Build) => Bun.file(join(work, `fleetlet-${b.version}`)).size;
const whole = (b: Build) => `versions/${b.folder}/fleetlet ${sizeOf(b)} ${b.sha256}`;

/** Every agent process in the guest: the executable it runs and that executable's sha256. */
const AGENTS_SCRIPT = `for p in /proc/[0-9]*; do
  exe=$(readlink "$p/exe" 2>/dev/null) || continue
  case $exe in */fleetlet) ;; *) continue ;; esac
  case " $(tr '\\0' ' ' < "$p/cmdline" 2>/dev/null)" in *" agent "*) ;; *) continue ;; esac
  echo "$exe $(sha256sum < "$p/exe" | cut -c1-64)"
done`;

/** The device works on `b`: the pod runs, one agent runs, from `b`'s whole executable, and the
 * hub hears it runs `b`'s version. */
async function expectWorking(b: Build): Promise<void> {
  await dev.waitPods(
    "the pod to run",
    (pods) => isRunning(podNamed(pods, "steady", dev.nodeName)),
    240_000,
  );
  expect((await dev.sh(AGENTS_SCRIPT)).trim().split("\n")).toEqual([`${b.path} ${b.sha256}`]);
  await eventually(
    `the hub to hear the device runs ${b.version}`,
    async () => {
      const view = (await (await hub.api(`/api/v1/nodes/${dev.nodeName}/update`)).json()) as {
        running?: string;
      };
      return view.running === b.version || undefined;
    },
    60_000,
    1000,
  );
}

const pauses = (step: string) => dev.agentLog().split(`update paused at step "${step}"`).length - 1;

/** Offers `b` to the device and waits until its agent froze at `step`. */
async function updateUntil(b: Build, step: string): Promise<void> {
  const before = pauses(step);
  await wantRelease(b);
  await eventually(
    `the update to ${b.version} to reach step "${step}"`,
    () => pauses(step) > before || undefined,
    240_000,
    500,
  ).catch((err) => {
    throw new Error(`${(err as Error).message}\n${dev.agentLog().slice(-3000)}`);
  });
}

/** A pre-boot script that lifts the device's updateBandwidthLimit from the agent's next start. */
const NO_LIMIT = `sed -i 's/^updateBandwidthLimit: .*/updateBandwidthLimit: 0/' /etc/fleetlet/config.yaml`;

/**
 * Cuts the power, withdraws the hub's offer (so that the update is taken up again only once the
 * device was checked), and boots with `pause` for the agent's next update (`before` runs in the
 * guest ahead of the look at the disk); returns the launcher's folder as the cut left it.
 */
async function cutAndBoot(pause: string | undefined, before = ""): Promise<DiskState> {
  await dev.powerCut();
  await wantRelease(undefined);
  dev.setAgentEnv(pause === undefined ? undefined : { FLEETLET_TEST_UPDATE_PAUSE: pause });
  dev.setHook("pre-boot", `${before}\n${STATE_SCRIPT}`);
  await dev.boot({ net: true, launcher: true });
  return parseState(await dev.hookOutput("pre-boot"));
}

const passed = (b: Build) => dev.agentLog().split(`${b.folder} passed its trial`).length - 1;

beforeAll(async () => {
  vdeviceNet("up");
  run([fleetletBin, "release", "keygen", "--out", join(work, "ops")]);
  B = release("0.1.1-vd");
  C = release("0.1.2-vd");
  await hub.start();
  for (const b of [B, C]) {
    const file = join(work, `fleetlet-${b.version}`);
    hubCli(
      "release",
      "push",
      file,
      "--signature",
      `${file}.sig`,
      "--ca-file",
      join(hub.dataDir, "tls/ca.crt"),
    );
  }
  const key = readFileSync(join(work, "ops.pub"), "utf8").trim();
  await dev.create(
    deviceConfig(
      dev.nodeName,
      `hubReconnectBackOffBase: 1s
hubReconnectBackOffMax: 4s
hub: {url: "${hub.url}", joinToken: "${await hub.joinToken()}"}
updatePublicKeys: ["${key}"]
updateBandwidthLimit: 8Mi
`,
    ),
  );
  await dev.boot({ net: true, launcher: true });
}, 300_000);

afterAll(async () => {
  await dev.destroy();
  await hub?.cleanup();
  vdeviceNet("down");
  rmSync(work, { recursive: true, force: true });
}, 60_000);

describe("power cuts during an agent update on a virtual device (needs root and user-mode Linux: scripts/vdevice)", () => {
  test("before: the launcher runs the packaged agent, which runs the pod", async () => {
    await dev.writeFile(
      "/etc/fleetlet/manifests/steady.yaml",
      podNetworkShellManifest("steady", DEVICE_IMAGE, "sleep 36000"),
      { atomic: true },
    );
    await expectWorking(A);
  }, 300_000);

  test("a cut in the middle of the download: the packaged agent runs", async () => {
    await wantRelease(B);
    const part = `${DIR}/download/${B.sha256}.part`;
    await eventually(
      "the download to be under way (4 MiB in the part)",
      async () =>
        Number((await dev.sh(`stat -c %s ${part} 2>/dev/null || echo 0`)).trim()) > 4 << 20,
      120_000,
      200,
    );
    const state = await cutAndBoot("verified", NO_LIMIT);
    expect(state.links).toEqual({});
    expect(state.trial).toBeUndefined();
    expect(executables(state)).toEqual([]);
    // No whole release came out of the download.
    expect(state.files.filter((f) => f.startsWith(`download/${B.sha256}.bin `))).toEqual([]);
    await expectWorking(A);
    // What the download had written stays for the next try (ext4 may have kept none of it yet).
    console.log(`a cut during the download left: ${state.files.join("; ") || "nothing"}`);
  }, 300_000);

  test("a cut once the release is verified, before the install: the packaged agent runs", async () => {
    await updateUntil(B, "verified");
    const state = await cutAndBoot("executable");
    expect(state.links).toEqual({});
    expect(state.trial).toBeUndefined();
    expect(executables(state)).toEqual([]);
    expect(state.files).toContain(`download/${B.sha256}.bin ${sizeOf(B)} ${B.sha256}`);
    await expectWorking(A);
  }, 400_000);

  test("a cut once the executable is in versions/: the packaged agent runs", async () => {
    await updateUntil(B, "executable");
    const state = await cutAndBoot("trial");
    expect(state.links).toEqual({});
    expect(state.trial).toBeUndefined();
    expect(executables(state)).toEqual([whole(B)]);
    await expectWorking(A);
  }, 400_000);

  test("a cut once the trial is opened, before `current`: the packaged agent runs, the half-opened trial dropped", async () => {
    await updateUntil(B, "trial");
    const state = await cutAndBoot("current");
    expect(state.links).toEqual({});
    expect(state.trial).toBe(`${B.folder} 0`);
    expect(executables(state)).toEqual([whole(B)]);
    await expectWorking(A);
    expect((await dev.sh(`ls ${DIR}`)).split("\n")).not.toContain("trial");
  }, 400_000);

  test("a cut once `current` names the new version, before the agent restarts: the new version runs on trial and passes it", async () => {
    await updateUntil(B, "current");
    const state = await cutAndBoot("previous");
    expect(state.links).toEqual({ current: `versions/${B.folder}` });
    expect(state.trial).toBe(`${B.folder} 0`);
    await expectWorking(B);
    await eventually(
      "the launcher to close the trial",
      () => passed(B) === 1 || undefined,
      130_000,
    );
  }, 400_000);

  test("a cut once `previous` names the running version, before `current` moves: the running version goes on", async () => {
    await updateUntil(C, "previous");
    const state = await cutAndBoot("healthy");
    expect(state.links).toEqual({
      current: `versions/${B.folder}`,
      previous: `versions/${B.folder}`,
    });
    expect(state.trial).toBe(`${C.folder} 0`);
    expect(executables(state)).toEqual([whole(B), whole(C)].sort());
    await expectWorking(B);
  }, 400_000);

  test("a cut during the new version's first start on trial: it starts on trial again and passes it", async () => {
    await updateUntil(C, "healthy");
    const state = await cutAndBoot(undefined);
    expect(state.links).toEqual({
      current: `versions/${C.folder}`,
      previous: `versions/${B.folder}`,
    });
    expect(state.trial).toBe(`${C.folder} 1`);
    await expectWorking(C);
    await eventually(
      "the launcher to close the trial",
      () => passed(C) === 1 || undefined,
      130_000,
    );
    // Nothing was rolled back on the way.
    expect(dev.agentLog()).not.toContain("rolled back");
  }, 400_000);
});
