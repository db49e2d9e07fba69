// The virtual device for tests (scripts/vdevice): a Debian 12 guest under user-mode Linux with
// cgroup v2, containerd and the compiled agent started by the guest's init. A test boots it, runs
// shell scripts in it, writes files onto its persistent disk, reads the agent's view through the
// CLI inside the guest, and cuts its power. Needs root and `scripts/vdevice build` (scripts/test
// builds it before the virtual-device stage).
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Pod } from "../../src/api/types.ts";
import { eventually, repoRoot } from "./testbed.ts";

const script = join(repoRoot, "scripts/vdevice");

/** The busybox image imported into the guest (no registry is reachable from it). */
export const DEVICE_IMAGE = "docker.io/fleetlet-test/busybox:v1";

/** An agent config for a device: the device's paths, fast timings, then `extra` (YAML lines). */
export function deviceConfig(nodeName: string, extra = ""): string {
  return `staticPodPath: /etc/fleetlet/manifests
rootDir: /var/lib/fleetlet
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
nodeName: ${nodeName}
fileCheckFrequency: 2s
syncFrequency: 10s
housekeepingInterval: 2s
plegRelistPeriod: 1s
crashLoopBackOffBase: 1s
crashLoopBackOffMax: 4s
${extra}`;
}

/** The fields of `scripts/vdevice env`. */
export interface VdeviceEnv {
  dir: string;
  /** The host's address on the host-only link (where a hub for the device listens). */
  hostAddr: string;
  guestAddr: string;
}

export function vdeviceEnv(): VdeviceEnv {
  const p = Bun.spawnSync([script, "env"], { stdout: "pipe", stderr: "pipe" });
  const env = new Map<string, string>();
  for (const line of p.stdout.toString().split("\n")) {
    const eq = line.indexOf("=");
    if (eq > 0) env.set(line.slice(0, eq), line.slice(eq + 1));
  }
  const get = (k: string) => {
    const v = env.get(k);
    if (v === undefined) throw new Error(`scripts/vdevice env printed no ${k}`);
    return v;
  };
  return {
    dir: get("VDEVICE_DIR"),
    hostAddr: get("VDEVICE_HOST_ADDR"),
    guestAddr: get("VDEVICE_GUEST_ADDR"),
  };
}

/** Brings the host-only link up or down (a hub for the device listens on its host address). */
export function vdeviceNet(state: "up" | "down"): void {
  const p = Bun.spawnSync([script, "net", state], { stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`scripts/vdevice net ${state}: ${p.stderr.toString()}`);
}

/** A pod sandbox as containerd keeps it: its pod's uid, and whether its task runs. */
export interface GuestSandbox {
  id: string;
  uid: string;
  running: boolean;
}

/** Lists containerd's sandboxes with their pod uid and task state (ctr, inside the guest). */
const LIST_SANDBOXES = `tasks=$(ctr -n k8s.io tasks ls)
for id in $(ctr -n k8s.io containers ls -q 'labels."io.cri-containerd.kind"==sandbox'); do
  uid=$(ctr -n k8s.io containers info "$id" | grep -o '"io.kubernetes.pod.uid": "[^"]*"' | head -1 | cut -d'"' -f4)
  st=$(echo "$tasks" | awk -v id="$id" '$1 == id { print $3 }')
  echo "$id $uid \${st:-NONE}"
done`;

export function parseSandboxes(text: string): GuestSandbox[] {
  return text
    .split("\n")
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f.length === 3)
    .map(([id = "", uid = "", st = ""]) => ({ id, uid, running: st === "RUNNING" }));
}

/** `GET_LOCAL_API SOCKET PATH` prints the body of an HTTP GET over a unix socket (the guest's
 * Perl; chunked bodies decoded), and fails unless the answer is 200. */
const GET_LOCAL_API = String.raw`perl -MIO::Socket::UNIX -e '
my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or die "cannot connect to $ARGV[0]: $!\n";
print $s "GET $ARGV[1] HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
local $/; my ($h, $b) = split /\r\n\r\n/, <$s>, 2;
$h =~ m{^HTTP/1\.[01] 200 } or die "GET $ARGV[1]: $h\n";
if ($h =~ /^transfer-encoding:\s*chunked/mi) {
  my $o = "";
  while ($b =~ s/^([0-9a-fA-F]+)\r\n//) { my $n = hex $1; last if !$n; $o .= substr($b, 0, $n, ""); $b =~ s/^\r\n//; }
  $b = $o;
}
print $b;'`;

export type Hook = "pre-boot" | "pre-agent";

export interface ExecResult {
  code: number;
  out: string;
}

export class VirtualDevice {
  readonly dir: string;
  readonly shared: string;
  readonly env: VdeviceEnv;
  /** The node name the agent reports (set in the config the device was made with). */
  readonly nodeName: string;

  constructor(
    readonly name: string,
    nodeName = name,
  ) {
    this.env = vdeviceEnv();
    this.dir = join(this.env.dir, "devices", name);
    this.shared = join(this.dir, "shared");
    this.nodeName = nodeName;
  }

  private async run(args: string[], what: string): Promise<ExecResult> {
    const p = Bun.spawn([script, ...args], { stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([
      new Response(p.stdout).text(),
      new Response(p.stderr).text(),
      p.exited,
    ]);
    // The script's own failures (not a guest command's) say "vdevice:" on stderr.
    if (code !== 0 && (args[0] !== "exec" || err.includes("vdevice:")))
      throw new Error(`${what}: ${err.trim() || out.trim()}`);
    return { code, out };
  }

  /** Makes the device afresh (new disk) with this agent config; it is off afterwards. */
  async create(configYaml: string): Promise<void> {
    await this.run(["destroy", this.name], `destroy ${this.name}`);
    mkdirSync(this.shared, { recursive: true });
    this.configYaml = configYaml;
  }

  private configYaml: string | undefined;

  /** Powers the device on; `net` adds the host-only link to the host; `systemd` makes a new
   * device of the guest's systemd flavour (systemd as init; `scripts/vdevice build --systemd`);
   * `launcher` runs the agent under deploy/fleetlet-launch (plain flavour). */
  async boot(opts: { net?: boolean; systemd?: boolean; launcher?: boolean } = {}): Promise<void> {
    const args = ["boot", this.name];
    if (this.configYaml !== undefined) {
      const file = join(this.env.dir, `${this.name}.config.yaml`);
      writeFileSync(file, this.configYaml);
      args.push("--config", file);
      this.configYaml = undefined;
    }
    if (opts.net) args.push("--net");
    if (opts.systemd) args.push("--systemd");
    if (opts.launcher) args.push("--launcher");
    await this.run(args, `boot ${this.name}`);
  }

  /** A power cut: the UML process group is killed, nothing in the guest is told. */
  async powerCut(): Promise<void> {
    await this.run(["stop", this.name], `stop ${this.name}`);
  }

  /** Powers the device off and removes it; FLEETLET_VDEVICE_KEEP=1 keeps it, off, to look at. */
  async destroy(): Promise<void> {
    if (process.env.FLEETLET_VDEVICE_KEEP === "1") await this.powerCut();
    else await this.run(["destroy", this.name], `destroy ${this.name}`);
  }

  /** Runs a shell script in the guest. */
  exec(sh: string): Promise<ExecResult> {
    return this.run(["exec", this.name, sh], `exec on ${this.name}`);
  }

  /** Runs a shell script in the guest and returns its output; throws when it fails. */
  async sh(sh: string): Promise<string> {
    const r = await this.exec(sh);
    if (r.code !== 0) throw new Error(`guest script failed (${r.code}): ${sh}\n${r.out}`);
    return r.out;
  }

  /** Puts `text` in the shared folder; returns its path in the guest. */
  stage(text: string): string {
    const dir = join(this.shared, "stage");
    mkdirSync(dir, { recursive: true });
    const name = `f${Date.now()}${Math.random().toString(36).slice(2, 6)}`;
    writeFileSync(join(dir, name), text);
    return `/shared/stage/${name}`;
  }

  /** Writes a file in the guest (through the shared folder, then moved into place there). */
  async writeFile(path: string, text: string, opts: { atomic?: boolean } = {}): Promise<void> {
    const staged = this.stage(text);
    const move = opts.atomic
      ? `cp ${staged} '${path}.tmp' && mv '${path}.tmp' '${path}'`
      : `cp ${staged} '${path}'`;
    await this.sh(`${move} && rm ${staged}`);
  }

  /**
   * A script the guest's init runs on the next boots: "pre-boot" before containerd starts,
   * "pre-agent" once containerd answers and before the agent starts. undefined removes it.
   */
  setHook(hook: Hook, sh: string | undefined): void {
    rmSync(join(this.shared, `${hook}.out`), { force: true });
    const file = join(this.shared, `${hook}.sh`);
    if (sh === undefined) rmSync(file, { force: true });
    else writeFileSync(file, sh);
  }

  /** Variables in the agent's environment from its next start on (plain flavour); undefined:
   * none. */
  setAgentEnv(vars: Record<string, string> | undefined): void {
    const file = join(this.shared, "agent.env");
    if (vars === undefined) rmSync(file, { force: true });
    else
      writeFileSync(
        file,
        Object.entries(vars)
          .map(([k, v]) => `${k}='${v}'\n`)
          .join(""),
      );
  }

  /** What the hook printed on this boot, once it has run. */
  hookOutput(hook: Hook): Promise<string> {
    const file = join(this.shared, `${hook}.out`);
    return eventually(
      `the ${hook} hook to run`,
      () => existsSync(file) && readFileSync(file, "utf8"),
      60_000,
      200,
    );
  }

  /** The agent's log over every boot (init appends "vdevice: agent start N" per start). */
  agentLog(): string {
    const file = join(this.shared, "agent.log");
    return existsSync(file) ? readFileSync(file, "utf8") : "";
  }

  /** The pods as the agent's API shows them (the CLI inside the guest). */
  async pods(): Promise<Pod[]> {
    const out = await this.sh("/shared/fleetlet get pods -o json");
    return (JSON.parse(out) as { items: Pod[] }).items;
  }

  /** The same pods (the default namespace's, as `fleetlet get pods` lists them), read from the
   * agent's local API by a few lines of Perl: for polling, as the CLI is a Bun process that takes
   * seconds of the guest's one CPU away from the agent at each look. */
  async apiPods(): Promise<Pod[]> {
    const out = await this.sh(
      `${GET_LOCAL_API} /run/fleetlet/agent.sock /api/v1/namespaces/default/pods`,
    );
    return (JSON.parse(out) as { items: Pod[] }).items;
  }

  /** Waits until the agent's pods satisfy `check`; returns them. */
  async waitPods(
    what: string,
    check: (pods: Pod[]) => boolean,
    timeoutMs = 120_000,
  ): Promise<Pod[]> {
    let last: Pod[] = [];
    try {
      return await eventually(
        what,
        async () => {
          last = await this.apiPods();
          return check(last) ? last : undefined;
        },
        timeoutMs,
        1000,
      );
    } catch (err) {
      const seen = last.map(
        (p) =>
          `${p.metadata.name} ${p.status?.phase} ${JSON.stringify(p.status?.containerStatuses?.map((c) => c.state))}`,
      );
      const log = this.agentLog().split("\n").slice(-40).join("\n");
      throw new Error(`${(err as Error).message}\npods: ${seen.join("; ")}\nagent log:\n${log}`);
    }
  }

  /** containerd's pod sandboxes (metadata and task state). */
  async sandboxes(): Promise<GuestSandbox[]> {
    return parseSandboxes(await this.sh(LIST_SANDBOXES));
  }

  /** The shell script that lists sandboxes, for a hook that runs before the agent. */
  static readonly listSandboxesScript = LIST_SANDBOXES;

  /** A cgroup file's trimmed text in the guest (cgroupfs path below /sys/fs/cgroup). */
  async cgroupFile(path: string): Promise<string | undefined> {
    const r = await this.exec(`cat '/sys/fs/cgroup/${path}'`);
    return r.code === 0 ? r.out.trim() : undefined;
  }
}

/** The pod named `name` (the manifest's name) on `node`. */
export function podNamed(pods: Pod[], name: string, node: string): Pod | undefined {
  return pods.find((p) => p.metadata.name === `${name}-${node}`);
}

export function containerState(pod: Pod | undefined, name = "main") {
  return pod?.status?.containerStatuses?.find((c) => c.name === name);
}

export const isRunning = (pod: Pod | undefined): boolean =>
  pod?.status?.phase === "Running" && containerState(pod)?.ready === true;

/** Waits until container `main` of the pod named `name` was OOMKilled and restarted; returns the
 * pods then. */
export function waitOomKilled(dev: VirtualDevice, name: string): Promise<Pod[]> {
  return dev.waitPods(
    `${name} to be OOMKilled and restarted`,
    (p) => {
      const s = containerState(podNamed(p, name, dev.nodeName));
      return s?.lastState?.terminated?.reason === "OOMKilled" && (s.restartCount ?? 0) >= 1;
    },
    120_000,
  );
}
