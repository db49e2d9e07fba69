// The world a soak runs in: a hub (the compiled binary, on loopback), a containerd of its own (so
// that restarting it touches no other test), and one agent joined to the hub whose root dir is a
// small loop-mounted ext4 (so that it can be filled) and whose wall clock is moved by libfaketime
// (so that it can be stepped while monotonic time runs on). Needs root and the test bed.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TestAgent } from "../agent.ts";
import { TestHub } from "../hub.ts";
import { SmallContainerd } from "../small-containerd.ts";

/** libfaketime's thread-safe library, from Debian's libfaketime package (scripts/setup). */
const FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

function run(cmd: string[]): void {
  const p = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0)
    throw new Error(`${cmd.join(" ")} failed (${p.exitCode}): ${p.stderr.toString().trim()}`);
}

export interface WorldOptions {
  /** The agent's root filesystem, MiB. */
  rootFsMiB: number;
  /** The private containerd's image filesystem, MiB. */
  imageFsMiB: number;
  /** Events the agent's hub outbox keeps while the hub is away. */
  outboxMaxEvents: number;
}

export class SoakWorld {
  readonly hub = new TestHub();
  readonly containerd: SmallContainerd;
  readonly agent: TestAgent;
  /** The file libfaketime reads the agent's clock offset from ("+0", "-2h", ...). */
  readonly clockFile: string;
  /** The agent's clock offset in seconds, as last written to clockFile. */
  clockOffsetSeconds = 0;
  /** Holds the root filesystem's image and the clock file. */
  private readonly dir = mkdtempSync(join(tmpdir(), "fleetlet-soak-"));
  private readonly args: string[] = [];
  private readonly rootImage = join(this.dir, "rootfs.img");

  constructor(readonly opts: WorldOptions) {
    this.containerd = new SmallContainerd(opts.imageFsMiB);
    this.clockFile = join(this.dir, "faketime");
    this.agent = new TestAgent({
      nodeName: `soak${Math.random().toString(36).slice(2, 7)}`,
      endpoint: this.containerd.endpoint,
      args: this.args,
      startTimeoutMs: 60_000,
      rootDirMount: ["-o", "loop", this.rootImage],
      env: {
        LD_PRELOAD: FAKETIME_LIB,
        DONT_FAKE_MONOTONIC: "1",
        FAKETIME_TIMESTAMP_FILE: this.clockFile,
        FAKETIME_CACHE_DURATION: "1",
      },
    });
  }

  /** Starts the hub, the containerd and the agent, and waits for the agent to report. */
  async start(): Promise<void> {
    if (!existsSync(FAKETIME_LIB))
      throw new Error(`${FAKETIME_LIB} is missing: install Debian's libfaketime (scripts/setup)`);
    // Below the ephemeral ports (32768 and up): the hub is restarted while the agent dials it.
    this.hub.port = 20_000 + Math.floor(Math.random() * 10_000);
    await this.hub.start();
    await this.containerd.start();
    run(["truncate", "-s", `${this.opts.rootFsMiB}M`, this.rootImage]);
    run(["mkfs.ext4", "-q", "-F", "-m", "0", this.rootImage]);
    writeFileSync(this.clockFile, "+0\n");
    this.args.push(
      ...["--hub", this.hub.url, "--join-token", await this.hub.joinToken("24h")],
      ...["--hub-reconnect-back-off-base", "200ms", "--hub-reconnect-back-off-max", "2s"],
      ...["--node-status-update-frequency", "2s", "--node-labels", "soak=yes"],
      ...["--hub-outbox-max-events", String(this.opts.outboxMaxEvents)],
      // Pressure eviction has tests of its own; here a full root filesystem must leave every
      // pod running, so only memory is watched.
      ...["--eviction-hard", "memory.available<1Mi"],
    );
    await this.agent.start();
  }

  /** Sets the agent's wall clock `seconds` from the real one (libfaketime re-reads the file
   * within a second). */
  stepClock(seconds: number): void {
    this.clockOffsetSeconds = seconds;
    writeFileSync(this.clockFile, `${seconds >= 0 ? "+" : ""}${seconds}\n`);
  }

  /** The agent's root filesystem's free bytes. */
  rootFree(): number {
    const out = Bun.spawnSync(["df", "-B1", "--output=avail", this.agent.rootDir]).stdout;
    return Number(out.toString().split("\n")[1]?.trim() ?? "0");
  }

  /** The agent process's resident memory (bytes) and open files, or undefined when it is down. */
  agentResources(): { rss: number; fds: number } | undefined {
    const pid = this.agent.proc?.pid;
    if (pid === undefined) return undefined;
    try {
      const status = readFileSync(`/proc/${pid}/status`, "utf8");
      const kb = Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? "0");
      return { rss: kb * 1024, fds: readdirSync(`/proc/${pid}/fd`).length };
    } catch {
      return undefined;
    }
  }

  async cleanup(): Promise<void> {
    await this.agent.cleanup().catch(() => {});
    await this.containerd.stop().catch(() => {});
    await this.hub.cleanup().catch(() => {});
    rmSync(this.dir, { recursive: true, force: true });
  }
}
