// A second containerd for tests that fill an image filesystem: its root is a small ext4 of its
// own on a loop device, so that pulling a few test images crosses image GC thresholds; its config
// is the test bed's (registry mirrors, sandbox image, CNI) with its own root, state and socket.
// Needs root. start() boots it in about a second; stop() removes everything it made: its
// sandboxes, its process and its shims (by pid), its mounts and its folder.
import { mkdtempSync, readdirSync, readFileSync, rmSync, statfsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCriClient } from "../../src/cri/index.ts";
import { eventually, loadTestbed } from "./testbed.ts";

function run(cmd: string[]): void {
  const p = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) {
    throw new Error(`${cmd.join(" ")} failed (${p.exitCode}): ${p.stderr.toString().trim()}`);
  }
}

/** Pids of processes whose command line holds `needle` (the shims of one containerd). */
function pidsWith(needle: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0");
      if (cmdline.includes(needle)) pids.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

export class SmallContainerd {
  readonly dir: string;
  /** containerd's root: the mount point of the small filesystem. */
  readonly root: string;
  readonly socket: string;
  readonly endpoint: string;
  private proc: ReturnType<typeof Bun.spawn> | undefined;
  /** How many times containerd was started (each start logs to its own file). */
  private starts = 0;

  /** `opts.tmpfs` puts the root on a tmpfs of that size instead (a filesystem of a kind device
   * health reports only when it is named: an image filesystem); `opts.systemdCgroup` sets runc's
   * SystemdCgroup option (this host has no systemd: its containers cannot start, but it says). */
  constructor(
    readonly sizeMiB: number,
    private readonly opts: { tmpfs?: boolean; systemdCgroup?: boolean } = {},
  ) {
    this.dir = mkdtempSync(join(tmpdir(), "fleetlet-small-ctrd-"));
    this.root = join(this.dir, "root");
    this.socket = join(this.dir, "containerd.sock");
    this.endpoint = `unix://${this.socket}`;
  }

  async start(): Promise<void> {
    const tb = loadTestbed();
    const image = join(this.dir, "root.img");
    run(["mkdir", "-p", this.root, join(this.dir, "state"), join(this.dir, "opt")]);
    if (this.opts.tmpfs)
      run(["mount", "-t", "tmpfs", "-o", `size=${this.sizeMiB}m`, "small-ctrd", this.root]);
    else {
      run(["truncate", "-s", `${this.sizeMiB}M`, image]);
      run(["mkfs.ext4", "-q", "-F", "-m", "0", image]);
      run(["mount", "-o", "loop", image, this.root]);
    }
    const config = readFileSync(tb.containerdConfig, "utf8")
      .replace(/^root = .*$/m, `root = "${this.root}"`)
      .replace(/^state = .*$/m, `state = "${join(this.dir, "state")}"`)
      .replace(/^(\s*)path = ".*"$/m, `$1path = "${join(this.dir, "opt")}"`)
      .replaceAll(tb.socket, this.socket)
      .replace(/SystemdCgroup = false/, `SystemdCgroup = ${this.opts.systemdCgroup === true}`);
    writeFileSync(join(this.dir, "config.toml"), config);
    await this.spawn();
  }

  private async spawn(): Promise<void> {
    const log = Bun.file(join(this.dir, `containerd-${++this.starts}.log`));
    this.proc = Bun.spawn(["containerd", "--config", join(this.dir, "config.toml")], {
      stdout: log,
      stderr: log,
    });
    const cri = createCriClient({ endpoint: this.endpoint });
    try {
      await eventually("the small containerd to answer", () => cri.version({}).then(() => true));
    } finally {
      cri.close();
    }
  }

  /** Kills containerd with SIGKILL, as a crash does, and starts it again on the same root and
   * state; containers keep running in their shims meanwhile. */
  async restart(): Promise<void> {
    this.proc?.kill("SIGKILL");
    await this.proc?.exited;
    await this.spawn();
  }

  /** The image filesystem's size and free space in bytes, and its usage as the kubelet counts. */
  usage(): { capacity: number; available: number; percent: number } {
    const st = statfsSync(this.root);
    const capacity = st.blocks * st.bsize;
    const available = st.bavail * st.bsize;
    return { capacity, available, percent: 100 - Math.floor((available * 100) / capacity) };
  }

  async stop(): Promise<void> {
    if (this.proc !== undefined) {
      const cri = createCriClient({ endpoint: this.endpoint });
      try {
        for (const sb of (await cri.listPodSandbox({})).items) {
          await cri.stopPodSandbox({ podSandboxId: sb.id }).catch(() => {});
          await cri.removePodSandbox({ podSandboxId: sb.id }).catch(() => {});
        }
      } catch {
        // containerd already gone
      } finally {
        cri.close();
      }
      this.proc.kill("SIGTERM");
      const exited = await Promise.race([this.proc.exited, Bun.sleep(5000).then(() => null)]);
      if (exited === null) this.proc.kill("SIGKILL");
      this.proc = undefined;
    }
    for (const pid of pidsWith(this.socket)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    const mounts = readFileSync("/proc/self/mounts", "utf8")
      .split("\n")
      .map((l) => l.split(" ")[1] ?? "")
      .filter((m) => m.startsWith(`${this.dir}/`))
      .sort()
      .reverse();
    for (const m of mounts) Bun.spawnSync(["umount", "-l", m]);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
