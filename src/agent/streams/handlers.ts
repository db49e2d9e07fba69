// The work behind each kind of stream on the device: a container's log (its current or previous
// run, tail, since, limit, follow), an exec through CRI Exec and an attach through CRI Attach,
// both on the runtime's streaming server (over SPDY, which can end stdin), and a port-forward to
// the pod's network through CRI PortForward (over WebSocket). The same handlers serve the hub's
// streams and the local API's interactive exec and attach.
import { StatusError } from "../../api/status.ts";
import type { Pod } from "../../api/types.ts";
import type { CriRuntime } from "../../cri/index.ts";
import { readStatus } from "../../protocol/remotecommand.ts";
import { CHANNEL, type StreamOpen } from "../../protocol/streams.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { logExists, readLog } from "../logs/index.ts";
import { noLogError, resolveContainer } from "../server/routes.ts";
import { type OpenStream, StreamFailure, type StreamOutput, type StreamWork } from "./mux.ts";
import { openRuntimeChannels } from "./runtime-channels.ts";
import { openRuntimeSpdy } from "./runtime-spdy.ts";

export interface StreamDeps {
  /** A pod the agent runs, with its status. */
  pod(namespace: string, name: string): Pod | undefined;
  /** The CRI log file of a container (its previous run with `previous`). */
  logPath(pod: Pod, container: string, previous: boolean): string | undefined;
  cri: Pick<CriRuntime, "exec" | "attach" | "portForward" | "listPodSandbox">;
  log: Logger;
  clock: Clock;
  /** How often a followed log is polled besides its change notifications (250 ms). */
  logPollIntervalMs?: number;
}

function failure(err: unknown): StreamFailure {
  if (err instanceof StreamFailure) return err;
  if (err instanceof StatusError) return new StreamFailure(err.code, err.reason, err.message);
  return new StreamFailure(500, "InternalError", (err as Error).message);
}

function targetPod(deps: StreamDeps, req: StreamOpen): Pod {
  const pod = deps.pod(req.namespace, req.pod);
  if (pod === undefined || (req.uid !== undefined && pod.metadata.uid !== req.uid))
    throw new StreamFailure(404, "NotFound", `pods "${req.pod}" not found`);
  return pod;
}

/** The running container `name` of `pod`, by its runtime id. */
function runningContainer(pod: Pod, name: string): string {
  const statuses = [
    ...(pod.status?.containerStatuses ?? []),
    ...(pod.status?.initContainerStatuses ?? []),
  ];
  const st = statuses.find((s) => s.name === name);
  if (st?.containerID === undefined || st.state?.running === undefined)
    throw new StreamFailure(
      400,
      "BadRequest",
      `container ${name} is not running in pod ${pod.metadata.name}`,
    );
  return st.containerID.replace(/^[a-z]+:\/\//, "");
}

function sinceOf(req: Extract<StreamOpen, { kind: "logs" }>, now: number): number | undefined {
  if (req.sinceSeconds !== undefined) return now - req.sinceSeconds * 1000;
  if (req.sinceTime === undefined) return undefined;
  const t = Date.parse(req.sinceTime);
  if (Number.isNaN(t))
    throw new StreamFailure(
      400,
      "BadRequest",
      `invalid sinceTime ${JSON.stringify(req.sinceTime)}`,
    );
  return t;
}

async function openLogs(
  deps: StreamDeps,
  req: Extract<StreamOpen, { kind: "logs" }>,
  out: StreamOutput,
  signal: AbortSignal,
): Promise<StreamWork> {
  const pod = targetPod(deps, req);
  const container = resolveContainer(pod, req.container).name;
  const previous = req.previous === true;
  const path = deps.logPath(pod, container, previous);
  if (path === undefined || !(await logExists(path))) throw noLogError(pod, container, previous);
  const since = sinceOf(req, deps.clock.now());
  const chunks = readLog(path, {
    follow: req.follow === true,
    timestamps: req.timestamps === true,
    ...(req.tailLines !== undefined && { tailLines: req.tailLines }),
    ...(since !== undefined && { since }),
    signal,
    watch: true,
    clock: deps.clock,
    ...(deps.logPollIntervalMs !== undefined && { pollIntervalMs: deps.logPollIntervalMs }),
  });
  void (async () => {
    let left = req.limitBytes ?? Number.POSITIVE_INFINITY;
    const encoder = new TextEncoder();
    try {
      for await (const text of chunks) {
        let bytes = encoder.encode(text);
        if (bytes.length > left) bytes = bytes.subarray(0, left);
        left -= bytes.length;
        await out.write(CHANNEL.stdout, bytes);
        if (left <= 0) break;
      }
      out.end({});
    } catch (err) {
      if (!signal.aborted) out.end({ error: failure(err).toError() });
    }
  })();
  return {};
}

/** What a remote command (exec or attach) asks of the runtime's streaming server. */
interface RemoteStreams {
  stdin: boolean;
  stdout: boolean;
  stderr: boolean;
  tty: boolean;
}

function remoteStreams(req: Extract<StreamOpen, { kind: "exec" | "attach" }>): RemoteStreams {
  const tty = req.tty === true;
  return {
    stdin: req.stdin === true,
    stdout: req.stdout !== false,
    stderr: !tty && req.stderr !== false,
    tty,
  };
}

/** Runs a remote command on the runtime's streaming server at `url` (an Exec's or an Attach's):
 * its output to `out`, its end (the error channel's status) as the stream's end. */
async function runRemoteCommand(
  url: string,
  streams: RemoteStreams,
  what: string,
  out: StreamOutput,
  signal: AbortSignal,
): Promise<StreamWork> {
  const ch = await openRuntimeSpdy(url, streams);
  let result: { exitCode: number } | { error: string } | undefined;
  ch.onData((c, data) => {
    if (c === CHANNEL.stdout || c === CHANNEL.stderr) return out.write(c, data);
    if (c === 3) result = readStatus(data);
  });
  ch.onClose(() => {
    if (result === undefined)
      out.end({
        error: {
          code: 500,
          reason: "InternalError",
          message: `the runtime ended the ${what} without an exit status`,
        },
      });
    else if ("exitCode" in result) out.end({ exitCode: result.exitCode });
    else out.end({ error: { code: 500, reason: "InternalError", message: result.error } });
  });
  signal.addEventListener("abort", () => ch.close(), { once: true });
  return {
    input: (_c, data) => ch.send(CHANNEL.stdin, data),
    eof: () => ch.endStdin(),
    resize: (width, height) =>
      void ch.send(4, new TextEncoder().encode(JSON.stringify({ Width: width, Height: height }))),
  };
}

/** An exec of a command, or an attach to the container's main process. For an attach the
 * container's spec decides its terminal (the hub and the local API built the request from it)
 * and the runtime decides what the end of stdin does (with `stdinOnce` it closes the container's
 * stdin, else it only detaches). */
async function openRemote(
  deps: StreamDeps,
  req: Extract<StreamOpen, { kind: "exec" | "attach" }>,
  out: StreamOutput,
  signal: AbortSignal,
): Promise<StreamWork> {
  const pod = targetPod(deps, req);
  const containerId = runningContainer(pod, resolveContainer(pod, req.container).name);
  const streams = remoteStreams(req);
  const { url } =
    req.kind === "exec"
      ? await deps.cri.exec({ containerId, cmd: req.command, ...streams })
      : await deps.cri.attach({ containerId, ...streams });
  return runRemoteCommand(url, streams, req.kind, out, signal);
}

async function sandboxOf(deps: StreamDeps, pod: Pod): Promise<string> {
  const uid = pod.metadata.uid ?? "";
  const { items } = await deps.cri.listPodSandbox({
    filter: { labelSelector: { "io.kubernetes.pod.uid": uid }, state: { state: "SANDBOX_READY" } },
  });
  const sb = items[0];
  if (sb === undefined)
    throw new StreamFailure(400, "BadRequest", `pod ${pod.metadata.name} has no running sandbox`);
  return sb.id;
}

async function openPortForward(
  deps: StreamDeps,
  req: Extract<StreamOpen, { kind: "portforward" }>,
  out: StreamOutput,
  signal: AbortSignal,
): Promise<StreamWork> {
  const pod = targetPod(deps, req);
  const { url } = await deps.cri.portForward({
    podSandboxId: await sandboxOf(deps, pod),
    port: [req.port],
  });
  const ch = await openRuntimeChannels(`${url}?ports=${req.port}`);
  // Each channel's first message is the port (2 bytes); then data on 0, an error text on 1.
  const seen = new Set<number>();
  let error = "";
  ch.onData((c, data) => {
    const body = seen.has(c) ? data : data.subarray(2);
    seen.add(c);
    if (body.length === 0) return;
    if (c === 0) return out.write(CHANNEL.data, body);
    error += Buffer.from(body).toString();
  });
  ch.onClose(() =>
    out.end(
      error === "" ? {} : { error: { code: 500, reason: "InternalError", message: error.trim() } },
    ),
  );
  signal.addEventListener("abort", () => ch.close(), { once: true });
  return { input: (_c, data) => ch.send(0, data) };
}

/** The opener of every kind of stream, for the mux and the local API. */
export function createStreamOpener(deps: StreamDeps): OpenStream {
  return async (req, out, signal) => {
    try {
      if (req.kind === "logs") return await openLogs(deps, req, out, signal);
      if (req.kind === "exec" || req.kind === "attach")
        return await openRemote(deps, req, out, signal);
      return await openPortForward(deps, req, out, signal);
    } catch (err) {
      throw failure(err);
    }
  };
}
