// Fakes for the local API tests: container statuses, CRI log files, and a server on a temp
// unix socket with fake deps, reached through the CLI client.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { containerLogPath } from "../../../src/agent/logs/index.ts";
import { type ServerDeps, startAgentServer } from "../../../src/agent/server/index.ts";
import type { ContainerStatus, Event, Pod } from "../../../src/api/types.ts";
import { type AgentClient, createAgentClient } from "../../../src/cli/client.ts";

export function runningStatus(name: string, o: Partial<ContainerStatus> = {}): ContainerStatus {
  return {
    name,
    state: { running: { startedAt: "2024-01-01T00:00:10Z" } },
    lastState: {},
    ready: true,
    restartCount: 0,
    image: "busybox:1.36",
    imageID: "docker.io/library/busybox@sha256:abc",
    containerID: `containerd://${name}-id`,
    started: true,
    ...o,
  };
}

/** One CRI log record line. */
export function cri(text: string, o: { stream?: string; partial?: boolean; sec?: number } = {}) {
  const ts = `2024-01-01T00:00:${String(o.sec ?? 0).padStart(2, "0")}.000000001Z`;
  return `${ts} ${o.stream ?? "stdout"} ${o.partial ? "P" : "F"} ${text}\n`;
}

export async function tempDir(prefix: string): Promise<string> {
  return mkdtemp(join(tmpdir(), `fleetlet-${prefix}-`));
}

export async function writeLog(path: string, content: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, content);
}

export interface FakeAgent {
  dir: string;
  socketPath: string;
  logsDir: string;
  client: AgentClient;
  deps: ServerDeps;
  execCalls: Array<{ pod: string; container: string; cmd: string[]; timeoutSec: number }>;
  stop(): Promise<void>;
}

/** Starts the server on <tmp>/run/agent.sock with fake deps over `pods` and `events`. */
export async function startFakeAgent(
  pods: Pod[],
  o: { events?: Event[]; health?: { ok: boolean; reasons: string[] } } = {},
): Promise<FakeAgent> {
  const dir = await tempDir("server");
  const socketPath = join(dir, "run", "agent.sock");
  const logsDir = join(dir, "pods");
  const execCalls: FakeAgent["execCalls"] = [];
  const deps: ServerDeps = {
    listPods: () => pods,
    getPod: (ns, name) => pods.find((p) => p.metadata.namespace === ns && p.metadata.name === name),
    logPath: (pod, container, previous) => containerLogPath(logsDir, pod, container, previous),
    async exec(pod, container, cmd, timeoutSec) {
      execCalls.push({ pod: pod.metadata.name, container, cmd, timeoutSec });
      if (cmd[0] === "fail") throw new Error(`container "${container}" is not running`);
      return {
        stdout: `ran ${cmd.join(" ")}\n`,
        stderr: "warn\n",
        exitCode: cmd[0] === "false" ? 1 : 0,
      };
    },
    events: () => o.events ?? [],
    healthy: () => o.health ?? { ok: true, reasons: [] },
    metrics: () => "# HELP up up\n# TYPE up gauge\nup 1\n",
  };
  const server = await startAgentServer(deps, { socketPath, logPollIntervalMs: 10 });
  return {
    dir,
    socketPath,
    logsDir,
    client: createAgentClient(socketPath),
    deps,
    execCalls,
    async stop() {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Raw request on the socket, for status codes and bodies the client hides. */
export async function raw(socketPath: string, path: string, init: RequestInit = {}) {
  const res = await fetch(`http://localhost${path}`, { ...init, unix: socketPath });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: res.status, contentType: res.headers.get("content-type"), body };
}
