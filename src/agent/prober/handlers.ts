// The real probe handlers: exec through CRI ExecSync, httpGet, tcpSocket and grpc over the
// network. Each honours the probe's timeout and the caller's signal, and returns a failure with
// a message for every error (a missing port name, a command not found, a refused connection).

import { connect } from "node:net";
import type { Probe } from "../../api/types.ts";
import { type CriRuntime, isDeadlineExceeded } from "../../cri/index.ts";
import { type Clock, realClock } from "../../util/clock.ts";
import { resolvePort } from "../kuberuntime/index.ts";
import { probeGRPC } from "./grpc.ts";
import { probeHTTP } from "./http.ts";
import { errorText } from "./prober.ts";
import type { ProbeHandlerFn, ProbeOutcome, ProbeTarget } from "./types.ts";

/** Longest exec output kept (kubelet: 10 KiB). */
const MAX_EXEC_OUTPUT = 10 * 1024;

export interface HandlerDeps {
  cri: Pick<CriRuntime, "execSync">;
  /** The tcpSocket probe's timeout runs on it (default: the real clock). */
  clock?: Clock;
}

async function probeExec(
  cri: HandlerDeps["cri"],
  cmd: string[],
  target: ProbeTarget,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<ProbeOutcome> {
  const shown = JSON.stringify(cmd.join(" "));
  try {
    const seconds = Math.ceil(timeoutMs / 1000);
    const res = await cri.execSync(
      { containerId: target.containerId, cmd, timeout: seconds },
      { signal },
    );
    const text = new TextDecoder();
    const output = (text.decode(res.stdout) + text.decode(res.stderr)).slice(0, MAX_EXEC_OUTPUT);
    if (res.exitCode === 0) return { result: "success", output };
    return {
      result: "failure",
      output: output.trim() === "" ? `command ${shown} exited with ${res.exitCode}` : output,
    };
  } catch (err) {
    const msg = errorText(err);
    if (isDeadlineExceeded(err) || /timeout .* exceeded|deadline exceeded/i.test(msg)) {
      return { result: "failure", output: `command ${shown} timed out` };
    }
    return { result: "failure", output: `command ${shown} could not run: ${msg}` };
  }
}

function probeTCP(
  clock: Clock,
  host: string,
  port: number,
  timeoutMs: number,
  signal: AbortSignal,
) {
  const addr = `${host.includes(":") ? `[${host}]` : host}:${port}`;
  return new Promise<ProbeOutcome>((resolve) => {
    const socket = connect({ host, port });
    const done = (outcome: ProbeOutcome) => {
      cancelTimer();
      signal.removeEventListener("abort", onAbort);
      socket.destroy();
      resolve(outcome);
    };
    const cancelTimer = clock.setTimer(timeoutMs, () =>
      done({ result: "failure", output: `dial tcp ${addr}: i/o timeout` }),
    );
    const onAbort = () => done({ result: "failure", output: `dial tcp ${addr}: cancelled` });
    signal.addEventListener("abort", onAbort, { once: true });
    socket.once("connect", () => done({ result: "success", output: "" }));
    socket.once("error", (err) =>
      done({ result: "failure", output: `dial tcp ${addr}: ${errorText(err)}` }),
    );
  });
}

/** The handler that runs whichever of exec, httpGet, tcpSocket, grpc the probe names. */
export function createProbeHandler(deps: HandlerDeps): ProbeHandlerFn {
  return async (probe: Probe, target, timeoutMs, signal) => {
    if (probe.exec) return probeExec(deps.cri, probe.exec.command ?? [], target, timeoutMs, signal);
    if (probe.httpGet) return probeHTTP(probe.httpGet, target, timeoutMs, signal);
    if (probe.tcpSocket) {
      const port = resolvePort(probe.tcpSocket.port, target.container);
      const host = probe.tcpSocket.host || target.host;
      return probeTCP(deps.clock ?? realClock, host, port, timeoutMs, signal);
    }
    if (probe.grpc) {
      return probeGRPC(target.host, probe.grpc.port, probe.grpc.service ?? "", timeoutMs, signal);
    }
    return {
      result: "failure",
      output: "the probe names no handler (exec, httpGet, tcpSocket, grpc)",
    };
  };
}
