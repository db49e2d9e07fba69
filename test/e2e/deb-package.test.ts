// The Debian package (scripts/package-deb, which scripts/release runs for amd64 and arm64): built
// from dist/fleetlet twice, as an older and a newer version, checked with dpkg-deb, its systemd
// units with systemd-analyze verify, then installed, upgraded, removed and purged in a Debian 12
// root (test/lib/debian-root.ts) the way an administrator does, with no prompt.
// Needs root (chroot, files owned by root), dpkg-deb, systemd-analyze and mmdebstrap (scripts/setup
// installs them); Debian's mirror only to make the cached root the first time. No systemd runs in
// a chroot: the root says it does (/run/systemd/system) and its deb-systemd-invoke records what
// the maintainer scripts ask systemd to start, restart and stop, which is checked.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { copyDebianRoot, inRoot, readInRoot, run } from "../lib/debian-root.ts";
import { fleetletBin, repoRoot } from "../lib/testbed.ts";

const version = (await Bun.file(join(repoRoot, "package.json")).json()).version as string;
const older = `${version}~test1`;
const newer = `${version}~test2`;
const work = mkdtempSync(join(tmpdir(), "fleetlet-deb-"));
const root = join(work, "root");
const wants = "/etc/systemd/system/multi-user.target.wants";
const volume = join(root, "var/lib/fleetlet/pods/uid-1/volumes");
let oldDeb = "";
let newDeb = "";

/** Builds the package of dist/fleetlet as `v`; uncompressed: dpkg-deb's compression is not what
 * is tested, and xz would take most of the test's time (scripts/release's packages use xz). */
function build(v: string): string {
  const out = run([join(repoRoot, "scripts/package-deb"), fleetletBin, "amd64", v, work], {
    ...process.env,
    FLEETLET_DEB_COMPRESS: "none",
  } as Record<string, string>);
  return out.trim();
}

/** dpkg's idea of the package in the root: "install ok installed 0.1.0", or "" if unknown. */
function status(): string {
  const p = Bun.spawnSync(
    // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own format
    ["chroot", root, "dpkg-query", "-W", "-f=${Status} ${Version}", "fleetlet"],
    { stdout: "pipe", stderr: "pipe" },
  );
  return p.exitCode === 0 ? p.stdout.toString() : "";
}

/** `systemctl --root` on the root: "enabled", "disabled", ... */
function isEnabled(unit: string): string {
  const p = Bun.spawnSync(["systemctl", `--root=${root}`, "is-enabled", unit], {
    stdout: "pipe",
    stderr: "pipe",
  });
  return p.stdout.toString().trim();
}

/** Copies a package into the root's /tmp and installs it with dpkg -i; returns dpkg's output. */
function dpkgInstall(deb: string): string {
  run(["cp", deb, join(root, "tmp/fleetlet.deb")]);
  return inRoot(root, ["dpkg", "-i", "/tmp/fleetlet.deb"]);
}

/** What the maintainer scripts asked deb-systemd-invoke since the last call, one line a call. */
const invokeLog = join(root, "var/log/invoked");
function invoked(): string[] {
  const text = readInRoot(root, "/var/log/invoked") ?? "";
  rmSync(invokeLog, { force: true });
  return text.split("\n").filter((l) => l !== "");
}

beforeAll(() => {
  oldDeb = build(older);
  newDeb = build(newer);
  copyDebianRoot(root);
  // As if systemd ran: the scripts then reload, start, restart and stop units through
  // deb-systemd-invoke, which here only records its arguments.
  mkdirSync(join(root, "run/systemd/system"), { recursive: true });
  writeFileSync(
    join(root, "usr/bin/deb-systemd-invoke"),
    '#!/bin/sh\necho "$*" >> /var/log/invoked\n',
    { mode: 0o755 },
  );
}, 240_000);
afterAll(() => {
  Bun.spawnSync(["umount", volume], { stderr: "ignore" });
  rmSync(work, { recursive: true, force: true });
});

describe("the fleetlet .deb", () => {
  test("holds the binary, both units, the config as a conffile and the manifests folder", () => {
    expect(oldDeb).toBe(join(work, `fleetlet_${older}_amd64.deb`));
    const field = (name: string) => run(["dpkg-deb", "--field", oldDeb, name]).trim();
    expect(field("Package")).toBe("fleetlet");
    expect(field("Version")).toBe(older);
    expect(field("Architecture")).toBe("amd64");
    expect(run(["dpkg-deb", "--info", oldDeb, "conffiles"]).trim()).toBe(
      "/etc/fleetlet/config.yaml",
    );
    const info = run(["dpkg-deb", "--info", oldDeb]);
    for (const script of ["postinst", "prerm", "postrm"]) expect(info).toContain(` ${script} `);
    // "-rwxr-xr-x root/root 110577840 2026-01-01 00:00 ./usr/bin/fleetlet" → mode, owner, path.
    const contents = run(["dpkg-deb", "--contents", oldDeb])
      .trim()
      .split("\n")
      .map((line) => {
        const f = line.split(/\s+/);
        return `${f[0]} ${f[1]} ${f[5]}`;
      });
    expect(contents).toEqual(
      expect.arrayContaining([
        "-rwxr-xr-x root/root ./usr/bin/fleetlet",
        "-rwxr-xr-x root/root ./usr/lib/fleetlet/fleetlet-launch",
        "-rw-r--r-- root/root ./lib/systemd/system/fleetlet-agent.service",
        "-rw-r--r-- root/root ./lib/systemd/system/fleetlet-hub.service",
        "-rw------- root/root ./etc/fleetlet/config.yaml",
        "drwx------ root/root ./etc/fleetlet/manifests/",
      ]),
    );
  });

  test("installs with apt into Debian 12: the agent's unit enabled, the hub's not", () => {
    run(["cp", oldDeb, join(root, "tmp/fleetlet.deb")]);
    inRoot(root, ["apt-get", "install", "-y", "--no-install-recommends", "/tmp/fleetlet.deb"]);
    expect(status()).toBe(`install ok installed ${older}`);
    // The executable finds itself through /proc: a private /proc for each command.
    const withProc = (cmd: string[]) =>
      run([
        "unshare",
        "--mount",
        "--pid",
        "--fork",
        `--mount-proc=${join(root, "proc")}`,
        "chroot",
        root,
        ...cmd,
      ]);
    const ran = withProc(["/usr/bin/fleetlet", "version"]);
    expect(ran).toMatch(/^fleetlet \d+\.\d+\.\d+/);
    // The unit's launcher, with no update installed, runs the packaged executable.
    const launched = withProc(["/usr/lib/fleetlet/fleetlet-launch", "--", "version"]);
    expect(launched).toBe(ran);
    expect(readInRoot(root, "/etc/fleetlet/config.yaml")).toContain("#staticPodPath:");
    expect(statSync(join(root, "etc/fleetlet/manifests")).isDirectory()).toBe(true);
    expect(readlinkSync(join(root, wants, "fleetlet-agent.service"))).toBe(
      "/lib/systemd/system/fleetlet-agent.service",
    );
    expect(isEnabled("fleetlet-agent.service")).toBe("enabled");
    expect(existsSync(join(root, wants, "fleetlet-hub.service"))).toBe(false);
    expect(isEnabled("fleetlet-hub.service")).toBe("disabled");
    // The agent started (deb-systemd-invoke starts only enabled units); the hub only if it ran.
    expect(invoked()).toEqual([
      "restart fleetlet-agent.service",
      "try-restart fleetlet-hub.service",
    ]);
  }, 60_000);

  test("its systemd units pass systemd-analyze verify", () => {
    const p = Bun.spawnSync(
      [
        "systemd-analyze",
        "verify",
        `--root=${root}`,
        "fleetlet-agent.service",
        "fleetlet-hub.service",
      ],
      { stdout: "pipe", stderr: "pipe" },
    );
    // A unit's bad setting is only a warning on stderr (the exit code stays 0): none allowed.
    expect(p.stderr.toString()).toBe("");
    expect(p.exitCode).toBe(0);
  });

  test("an upgrade stops nothing first, restarts the agent after, keeps the edited config and the state, with no prompt", () => {
    const config = readInRoot(root, "/etc/fleetlet/config.yaml") ?? "";
    const edited = config.replace("#maxPods: 110", "maxPods: 20");
    expect(edited).not.toBe(config);
    writeFileSync(join(root, "etc/fleetlet/config.yaml"), edited);
    writeFileSync(join(root, "etc/fleetlet/manifests/web.yaml"), "kind: Pod\n");
    run(["mkdir", "-p", join(root, "var/lib/fleetlet/pods"), join(root, "var/lib/fleetlet-hub")]);
    writeFileSync(join(root, "var/lib/fleetlet/pods/state"), "x\n");
    writeFileSync(join(root, "var/lib/fleetlet-hub/hub.db"), "x\n");
    dpkgInstall(newDeb); // stdin is closed: a conffile prompt would fail it
    expect(status()).toBe(`install ok installed ${newer}`);
    expect(readInRoot(root, "/etc/fleetlet/config.yaml")).toBe(edited);
    expect(existsSync(join(root, "etc/fleetlet/config.yaml.dpkg-dist"))).toBe(false);
    expect(readInRoot(root, "/etc/fleetlet/manifests/web.yaml")).toBe("kind: Pod\n");
    expect(readInRoot(root, "/var/lib/fleetlet/pods/state")).toBe("x\n");
    expect(isEnabled("fleetlet-agent.service")).toBe("enabled");
    expect(isEnabled("fleetlet-hub.service")).toBe("disabled");
    // Nothing stopped before the new files (prerm upgrade): the agent is restarted once, after.
    expect(invoked()).toEqual([
      "restart fleetlet-agent.service",
      "try-restart fleetlet-hub.service",
    ]);
  }, 60_000);

  test("an agent the administrator disabled stays disabled across an upgrade", () => {
    run(["systemctl", `--root=${root}`, "disable", "fleetlet-agent.service"]);
    dpkgInstall(newDeb);
    expect(isEnabled("fleetlet-agent.service")).toBe("disabled");
    run(["systemctl", `--root=${root}`, "enable", "fleetlet-agent.service"]);
  }, 60_000);

  test("remove keeps the config and the state; purge deletes them, not a running pod's volume", () => {
    // A pod left running (removing the package stops the agent, not its pods) keeps its volume.
    run(["mkdir", "-p", volume]);
    run(["mount", "-t", "tmpfs", "-o", "size=1m", "fleetlet-deb-test", volume]);
    writeFileSync(join(volume, "token"), "secret\n");
    invoked();
    inRoot(root, ["dpkg", "--remove", "fleetlet"]);
    expect(status()).toBe(`deinstall ok config-files ${newer}`);
    expect(invoked()).toEqual(["stop fleetlet-agent.service fleetlet-hub.service"]);
    expect(existsSync(join(root, "usr/bin/fleetlet"))).toBe(false);
    expect(existsSync(join(root, "lib/systemd/system/fleetlet-agent.service"))).toBe(false);
    expect(readInRoot(root, "/etc/fleetlet/config.yaml")).toContain("maxPods: 20");
    expect(readInRoot(root, "/etc/fleetlet/manifests/web.yaml")).toBe("kind: Pod\n");
    expect(readInRoot(root, "/var/lib/fleetlet/pods/state")).toBe("x\n");
    expect(readInRoot(root, "/var/lib/fleetlet-hub/hub.db")).toBe("x\n");

    const purge = Bun.spawnSync(["chroot", root, "dpkg", "--purge", "fleetlet"], {
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(purge.exitCode).toBe(0);
    expect(purge.stderr.toString()).toContain("/var/lib/fleetlet is still in use");
    expect(status()).toBe("");
    expect(readInRoot(root, "/var/lib/fleetlet/pods/uid-1/volumes/token")).toBe("secret\n");
    expect(existsSync(join(root, "var/lib/fleetlet/pods/state"))).toBe(false);
    run(["umount", volume]);
    for (const gone of ["etc/fleetlet", "var/lib/fleetlet-hub"])
      expect(existsSync(join(root, gone))).toBe(false);
    // The enabled link, and deb-systemd-helper's memory of it.
    expect(lstatExists(join(root, wants, "fleetlet-agent.service"))).toBe(false);
    const helperState = join(root, "var/lib/systemd/deb-systemd-helper-enabled");
    expect(run(["find", helperState, "-name", "fleetlet*"]).trim()).toBe("");
  }, 60_000);
});

/** Whether a path exists, a dangling symbolic link included. */
function lstatExists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}
