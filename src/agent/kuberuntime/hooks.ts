// Lifecycle hooks (postStart, preStop), run as kubelet runs them: exec through CRI ExecSync
// (a non-zero exit fails the hook), httpGet to the pod IP (or handler.host; transport errors
// fail the hook, any HTTP status passes), sleep for the given seconds. tcpSocket is deprecated
// and refused. Each run is bounded by `timeoutMs` and the caller's signal.

import type { Container, HTTPGetAction, LifecycleHandler, Pod } from "../../api/types.ts";
import type { CriRuntime } from "../../cri/index.ts";
import { type Clock, sleepQuietly } from "../../util/clock.ts";
import { errorMessage, formatPod } from "./format.ts";

export interface HookContext {
  cri: CriRuntime;
  clock: Clock;
  containerId: string;
  pod: Pod;
  container: Container;
  /** Where httpGet goes when the handler has no host: the pod IP, or 127.0.0.1 for host network. */
  defaultHost: string;
  timeoutMs: number;
  signal?: AbortSignal;
}

export type HookResult = { ok: true } | { ok: false; message: string };

/** Go's %v of a []string: "[sh -c echo hi]". */
const goList = (items: string[]): string => `[${items.join(" ")}]`;

async function runExec(cmd: string[], ctx: HookContext): Promise<HookResult> {
  const who = `Exec lifecycle hook (${goList(cmd)}) for Container ${JSON.stringify(ctx.container.name)} in Pod ${JSON.stringify(formatPod(ctx.pod))}`;
  try {
    const res = await ctx.cri.execSync(
      { containerId: ctx.containerId, cmd, timeout: Math.ceil(ctx.timeoutMs / 1000) },
      { timeoutMs: ctx.timeoutMs + 5_000, ...(ctx.signal ? { signal: ctx.signal } : {}) },
    );
    if (res.exitCode === 0) return { ok: true };
    const output = new TextDecoder().decode(res.stdout) + new TextDecoder().decode(res.stderr);
    return {
      ok: false,
      message: `${who} failed - error: command '${cmd.join(" ")}' exited with ${res.exitCode}: , message: ${JSON.stringify(output)}`,
    };
  } catch (err) {
    return { ok: false, message: `${who} failed - error: ${errorMessage(err)}, message: ""` };
  }
}

/** The port number of a handler: a number, a numeric string, or a container port's name. */
export function resolvePort(port: HTTPGetAction["port"], c: Container): number {
  if (typeof port === "number") return port;
  if (port === "") return 80;
  if (/^\d+$/.test(port)) return Number(port);
  const named = c.ports?.find((p) => p.name === port);
  if (!named) throw new Error(`couldn't find port ${JSON.stringify(port)} in container ${c.name}`);
  return named.containerPort;
}

export function hookURL(h: HTTPGetAction, c: Container, defaultHost: string): string {
  const host = h.host || defaultHost;
  const hostPart = host.includes(":") ? `[${host}]` : host;
  const path = (h.path ?? "/").startsWith("/") ? (h.path ?? "/") : `/${h.path}`;
  const scheme = (h.scheme ?? "HTTP").toLowerCase();
  return `${scheme}://${hostPart}:${resolvePort(h.port, c)}${path}`;
}

async function runHTTP(h: HTTPGetAction, ctx: HookContext): Promise<HookResult> {
  try {
    const url = hookURL(h, ctx.container, ctx.defaultHost);
    const headers = new Headers(
      (h.httpHeaders ?? []).map((x) => [x.name, x.value] as [string, string]),
    );
    const signals = [AbortSignal.timeout(ctx.timeoutMs), ...(ctx.signal ? [ctx.signal] : [])];
    const res = await fetch(url, {
      headers,
      signal: AbortSignal.any(signals),
      tls: { rejectUnauthorized: false },
    });
    await res.arrayBuffer().catch(() => undefined);
    return { ok: true };
  } catch (err) {
    return {
      ok: false,
      message: `HTTP lifecycle hook (${h.path ?? "/"}) for Container ${JSON.stringify(ctx.container.name)} in Pod ${JSON.stringify(formatPod(ctx.pod))} failed - error: ${errorMessage(err)}`,
    };
  }
}

async function runSleep(seconds: number, ctx: HookContext): Promise<HookResult> {
  // Cut short by the caller: the hook is over either way.
  await sleepQuietly(ctx.clock, Math.min(seconds * 1000, ctx.timeoutMs), ctx.signal);
  return { ok: true };
}

export function runHook(handler: LifecycleHandler, ctx: HookContext): Promise<HookResult> {
  if (handler.exec) return runExec(handler.exec.command ?? [], ctx);
  if (handler.httpGet) return runHTTP(handler.httpGet, ctx);
  if (handler.sleep) return runSleep(handler.sleep.seconds, ctx);
  return Promise.resolve({
    ok: false,
    message: `Cannot run handler: invalid handler ${JSON.stringify(handler)} (tcpSocket hooks are not supported)`,
  });
}
