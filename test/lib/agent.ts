// Runs the compiled `fleetlet agent` the way a user does, against the test bed's containerd, with
// its own manifest folder, root dir, log dir and socket, and the fast timing knobs.
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Event, Pod } from "../../src/api/types.ts";
import { createAgentClient } from "../../src/cli/client.ts";
import { createCriClient } from "../../src/cri/index.ts";
import { removeCgroupRoot } from "./cgroups.ts";
import { eventually, fleetletBin, loadTestbed, type Testbed } from "./testbed.ts";

export interface AgentOptions {
  nodeName?: string;
  /** Extra `--flag value` arguments. */
  args?: string[];
  /** The agent's cgroupRoot (default "/fleetlet-e2e-<nodeName>", removed by cleanup()). */
  cgroupRoot?: string;
  /** The CRI endpoint (default: the test bed's containerd). */
  endpoint?: string;
  /** A filesystem of its own for the root dir, as `mount` arguments before the target, e.g.
   * ["-t", "tmpfs", "-o", "size=64m", "tmpfs"]; mounted by start(), unmounted by cleanup(). */
  rootDirMount?: string[];
  /** The executable and its leading arguments (default: dist/fleetlet), e.g. an emulator and
   * the arm64 release build. */
  command?: string[];
  /** How long start() waits for the agent's API (default 15 s). */
  startTimeoutMs?: number;
  /** Environment variables set for the agent, over this process's. */
  env?: Record<string, string>;
  /** The executable, when `command` is not given (default dist/fleetlet): benchmarks compare
   * two builds this way. */
  bin?: string;
}

export class TestAgent {
  readonly dir: string;
  readonly manifests: string;
  readonly rootDir: string;
  readonly logsDir: string;
  readonly socket: string;
  readonly nodeName: string;
  /** Unique per agent, so that parallel agents never touch each other's pod cgroups. */
  readonly cgroupRoot: string;
  readonly tb: Testbed;
  /** The CRI endpoint the agent talks to. */
  readonly endpoint: string;
  /** Extra `--flag value` arguments of the next start(); a test may change them between runs. */
  args: string[];
  /** Environment variables set for the agent, over this process's. */
  private readonly env: Record<string, string>;
  proc: ReturnType<typeof Bun.spawn> | undefined;
  output = "";

  constructor(opts: AgentOptions = {}) {
    this.tb = loadTestbed();
    this.endpoint = opts.endpoint ?? this.tb.endpoint;
    // The caller's array itself: a test may push flags to it before start() (the hub's URL).
    this.args = opts.args ?? [];
    this.env = opts.env ?? {};
    this.dir = mkdtempSync(join(tmpdir(), "fleetlet-agent-e2e-"));
    this.manifests = join(this.dir, "manifests");
    this.rootDir = join(this.dir, "root");
    this.logsDir = join(this.dir, "logs");
    this.socket = join(this.dir, "run", "agent.sock");
    this.nodeName = opts.nodeName ?? `e2e${Math.random().toString(36).slice(2, 8)}`;
    this.cgroupRoot = opts.cgroupRoot ?? `/fleetlet-e2e-${this.nodeName}`;
    this.rootDirMount = opts.rootDirMount;
    this.command = opts.command ?? [opts.bin ?? fleetletBin];
    this.startTimeoutMs = opts.startTimeoutMs ?? 15_000;
    mkdirSync(this.manifests, { recursive: true });
  }

  private readonly command: string[];
  private readonly startTimeoutMs: number;

  /** The agent's command line. */
  argv(): string[] {
    return [
      ...this.command,
      "agent",
      "--static-pod-path",
      this.manifests,
      "--root-dir",
      this.rootDir,
      "--pod-logs-dir",
      this.logsDir,
      "--api-socket",
      this.socket,
      "--container-runtime-endpoint",
      this.endpoint,
      "--node-name",
      this.nodeName,
      "--cgroup-root",
      this.cgroupRoot,
      "--file-check-frequency",
      "2s",
      "--sync-frequency",
      "10s",
      "--pleg-relist-period",
      "500ms",
      "--housekeeping-interval",
      "1s",
      "--crash-loop-back-off-base",
      "1s",
      "--crash-loop-back-off-max",
      "8s",
      "--image-pull-back-off-base",
      "1s",
      "--image-pull-back-off-max",
      "4s",
      ...this.args,
    ];
  }

  async start(): Promise<void> {
    this.output = "";
    this.mountRootDir();
    const proc = Bun.spawn(this.argv(), {
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, ...this.env },
    });
    this.proc = proc;
    for (const stream of [proc.stdout, proc.stderr]) {
      void (async () => {
        const decoder = new TextDecoder();
        for await (const chunk of stream as ReadableStream<Uint8Array>)
          this.output += decoder.decode(chunk);
      })();
    }
    await eventually(
      "the agent's API to answer",
      () => this.request("/healthz").then((r) => r.status > 0),
      this.startTimeoutMs,
    );
  }

  private readonly rootDirMount: string[] | undefined;
  private mounted = false;

  private mountRootDir(): void {
    if (this.rootDirMount === undefined || this.mounted) return;
    mkdirSync(this.rootDir, { recursive: true });
    const p = Bun.spawnSync(["mount", ...this.rootDirMount, this.rootDir], { stderr: "pipe" });
    if (p.exitCode !== 0) throw new Error(`cannot mount the root dir: ${p.stderr.toString()}`);
    this.mounted = true;
  }

  /** Stops the agent with `signal` and waits for it to exit. */
  async stop(signal: "SIGTERM" | "SIGKILL" = "SIGTERM"): Promise<number | null> {
    const proc = this.proc;
    if (proc === undefined) return null;
    proc.kill(signal);
    const code = await proc.exited;
    this.proc = undefined;
    return code;
  }

  request(path: string, init: RequestInit = {}): Promise<Response> {
    return fetch(`http://localhost${path}`, { ...init, unix: this.socket } as RequestInit);
  }

  async pods(): Promise<Pod[]> {
    const res = await this.request("/api/v1/pods");
    return ((await res.json()) as { items: Pod[] }).items;
  }

  async pod(name: string, namespace = "default"): Promise<Pod | undefined> {
    const res = await this.request(`/api/v1/namespaces/${namespace}/pods/${name}-${this.nodeName}`);
    return res.status === 200 ? ((await res.json()) as Pod) : undefined;
  }

  /** Waits until the pod (by manifest name) satisfies `check`, and returns it. */
  waitPod(
    name: string,
    what: string,
    check: (pod: Pod) => boolean,
    timeoutMs = 30_000,
  ): Promise<Pod> {
    return eventually(
      `pod ${name} ${what}`,
      async () => {
        const pod = await this.pod(name);
        return pod !== undefined && check(pod) ? pod : undefined;
      },
      timeoutMs,
      200,
    );
  }

  /**
   * Watches the pod (by manifest name) through the API's pod watch, which sends every change of
   * its status, until `done` holds for the pods seen so far; returns them in order. Unlike
   * polling, a state that lasts only a moment is not missed.
   */
  async watchPod(
    name: string,
    what: string,
    done: (seen: Pod[]) => boolean,
    timeoutMs = 30_000,
  ): Promise<Pod[]> {
    const signal = AbortSignal.timeout(timeoutMs);
    const events = createAgentClient(this.socket).watchPods({
      fieldSelector: `metadata.name=${name}-${this.nodeName}`,
      signal,
    });
    const seen: Pod[] = [];
    try {
      for await (const event of events) {
        if (event.type === "DELETED") continue;
        seen.push(event.object);
        if (done(seen)) return seen;
      }
    } catch (err) {
      if (!signal.aborted) throw err;
    }
    throw new Error(`timed out after ${timeoutMs} ms waiting for pod ${name} ${what}`);
  }

  writeManifest(file: string, text: string): void {
    const tmp = join(this.dir, `.${file}.tmp`);
    writeFileSync(tmp, text);
    // rename is atomic: the agent never reads half a file.
    renameSync(tmp, join(this.manifests, file));
  }

  removeManifest(file: string): void {
    unlinkSync(join(this.manifests, file));
  }

  /** Runs a fleetlet CLI command against this agent's socket (given before any "--"). */
  cli(args: string[]) {
    const dash = args.indexOf("--");
    const at = dash < 0 ? args.length : dash;
    const argv = [...args.slice(0, at), "--socket", this.socket, ...args.slice(at)];
    const p = Bun.spawnSync([fleetletBin, ...argv], {
      stdout: "pipe",
      stderr: "pipe",
    });
    return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
  }

  /** Every event the agent keeps (GET /api/v1/events). */
  async events(): Promise<Event[]> {
    const res = await this.request("/api/v1/events");
    return ((await res.json()) as { items: Event[] }).items;
  }

  /** The mount points under the agent's folder (tmpfs volumes, subPath binds), from the host's
   * mount table. */
  mountsUnder(dir = this.dir): string[] {
    return readFileSync("/proc/self/mountinfo", "utf8")
      .split("\n")
      .map((line) => line.split(" ")[4] ?? "")
      .filter((m) => m === dir || m.startsWith(`${dir}/`));
  }

  /** Stops the agent and removes every sandbox of this node's pods, then the temp folder (after
   * unmounting what the agent left mounted in it when it was killed). */
  async cleanup(): Promise<void> {
    await this.stop("SIGKILL").catch(() => {});
    await this.removeSandboxes();
    await removeCgroupRoot(this.cgroupRoot).catch(() => {});
    for (const m of this.mountsUnder().sort().reverse()) {
      Bun.spawnSync(["umount", "-l", m.replace(/\\040/g, " ")]);
    }
    if (this.mountsUnder().length === 0) rmSync(this.dir, { recursive: true, force: true });
  }

  /** Stops and removes every sandbox of this node's pods (what a reboot leaves: nothing). */
  async removeSandboxes(): Promise<void> {
    const cri = createCriClient({ endpoint: this.endpoint });
    try {
      const { items } = await cri.listPodSandbox({});
      for (const sb of items) {
        if (!sb.metadata?.name.endsWith(`-${this.nodeName}`)) continue;
        await cri.stopPodSandbox({ podSandboxId: sb.id }).catch(() => {});
        await cri.removePodSandbox({ podSandboxId: sb.id }).catch(() => {});
      }
    } finally {
      cri.close();
    }
  }
}

/** How many lines of each agent's output showOutputOnFailure prints. */
const OUTPUT_TAIL_LINES = 300;

/**
 * Runs a test's body; when it throws, prints the last lines of the output of the agents the body
 * started (those `agents` holds at the end and not at the start) to stderr, where the test run's
 * log keeps them (cleanup removes the agents' folders), then throws again.
 */
export async function showOutputOnFailure(
  agents: readonly TestAgent[],
  body: () => Promise<void>,
): Promise<void> {
  const before = new Set(agents);
  try {
    await body();
  } catch (err) {
    for (const a of agents.filter((x) => !before.has(x))) {
      const tail = a.output.split("\n").slice(-OUTPUT_TAIL_LINES).join("\n");
      process.stderr.write(`--- the output of agent ${a.nodeName} (last lines) ---\n${tail}\n`);
    }
    throw err;
  }
}
