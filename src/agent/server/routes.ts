// Request handlers of the local API. Each takes the parsed request and the deps and returns a
// Response or throws a StatusError; none of them lets another error escape (index.ts maps any
// other error to a 500 Status).

import { resolveContainer } from "../../api/containers.ts";
import {
  eventFields,
  parseFieldSelector,
  parseLabelSelector,
  podFields,
} from "../../api/selectors.ts";
import type { Pod } from "../../api/types.ts";
import { type Clock, realClock } from "../../util/clock.ts";
import { logExists, readLog } from "../logs/index.ts";
import { badRequest, json, podNotFound, type StatusError } from "./status.ts";
import type { ServerDeps } from "./types.ts";
import { type WatchOptions, watchPods } from "./watch.ts";

/** A boolean query parameter: absent → false, "true"/"1" → true, "false"/"0" → false. */
function boolParam(q: URLSearchParams, name: string): boolean {
  const v = q.get(name);
  if (v === null || v === "" || v === "false" || v === "0") return false;
  if (v === "true" || v === "1") return true;
  throw badRequest(`invalid value ${JSON.stringify(v)} for parameter ${name}: want true or false`);
}

/** An integer query parameter, or undefined when absent. */
function intParam(q: URLSearchParams, name: string): number | undefined {
  const v = q.get(name);
  if (v === null || v === "") return undefined;
  if (!/^-?\d+$/.test(v)) {
    throw badRequest(`invalid value ${JSON.stringify(v)} for parameter ${name}: want an integer`);
  }
  return Number(v);
}

/** GET .../pods: a PodList, or with watch=true a stream of watch events (see watch.ts). */
export function listPods(
  deps: ServerDeps,
  q: URLSearchParams,
  namespace: string | undefined,
  watch: Omit<WatchOptions, "timeoutSeconds">,
): Response {
  const labels = parseLabelSelector(q.get("labelSelector") ?? "");
  const fields = parseFieldSelector(q.get("fieldSelector") ?? "", podFields);
  const matches = (p: Pod) =>
    (namespace === undefined || (p.metadata.namespace ?? "default") === namespace) &&
    labels(p.metadata.labels) &&
    fields(p);
  if (boolParam(q, "watch")) {
    const timeoutSeconds = intParam(q, "timeoutSeconds");
    if (timeoutSeconds !== undefined && timeoutSeconds < 0) {
      throw badRequest(`timeoutSeconds must be >= 0, got ${timeoutSeconds}`);
    }
    return watchPods(deps, matches, {
      ...watch,
      ...(timeoutSeconds !== undefined && { timeoutSeconds }),
    });
  }
  return watch.json.list("PodList", deps.listPods().filter(matches));
}

export function findPod(deps: ServerDeps, namespace: string, name: string): Pod {
  const pod = deps.getPod(namespace, name);
  if (pod === undefined) throw podNotFound(name);
  return pod;
}

export function listEvents(deps: ServerDeps, q: URLSearchParams, namespace?: string): Response {
  const fields = parseFieldSelector(q.get("fieldSelector") ?? "", eventFields);
  const items = deps
    .events()
    .filter((e) => namespace === undefined || e.metadata.namespace === namespace)
    .filter(fields);
  return json({ apiVersion: "v1", kind: "EventList", metadata: {}, items });
}

export function noLogError(pod: Pod, container: string, previous: boolean): StatusError {
  const name = pod.metadata.name;
  if (previous) {
    return badRequest(`previous terminated container "${container}" in pod "${name}" not found`);
  }
  const statuses = [
    ...(pod.status?.initContainerStatuses ?? []),
    ...(pod.status?.containerStatuses ?? []),
  ];
  const reason = statuses.find((s) => s.name === container)?.state.waiting?.reason;
  return badRequest(
    `container "${container}" in pod "${name}" is waiting to start: ${reason || "ContainerCreating"}`,
  );
}

export interface LogStreamOptions {
  /** Aborted when the client goes away; stops a followed log. */
  signal: AbortSignal;
  pollIntervalMs?: number;
  clock?: Clock;
}

/** GET .../pods/{name}/log: the container's log as text/plain, streamed. */
export async function podLog(
  deps: ServerDeps,
  pod: Pod,
  q: URLSearchParams,
  opts: LogStreamOptions,
): Promise<Response> {
  const container = resolveContainer(pod, q.get("container")).name;
  const previous = boolParam(q, "previous");
  const follow = boolParam(q, "follow");
  const timestamps = boolParam(q, "timestamps");
  const tailLines = intParam(q, "tailLines");
  const sinceSeconds = intParam(q, "sinceSeconds");
  const now = (opts.clock ?? realClock).now();
  const since = sinceSeconds === undefined ? undefined : now - sinceSeconds * 1000;
  const path = deps.logPath(pod, container, previous);
  if (path === undefined || !(await logExists(path))) {
    throw noLogError(pod, container, previous);
  }
  const abort = new AbortController();
  const onAbort = () => abort.abort();
  opts.signal.addEventListener("abort", onAbort, { once: true });
  const chunks = readLog(path, {
    follow,
    timestamps,
    tailLines,
    ...(since !== undefined && { since }),
    signal: abort.signal,
    ...(opts.pollIntervalMs !== undefined && { pollIntervalMs: opts.pollIntervalMs }),
    ...(opts.clock !== undefined && { clock: opts.clock }),
  });
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const next = await chunks.next();
        if (next.done) {
          opts.signal.removeEventListener("abort", onAbort);
          controller.close();
        } else controller.enqueue(encoder.encode(next.value));
      } catch (err) {
        controller.error(err);
      }
    },
    async cancel() {
      abort.abort();
      await chunks.return(undefined);
    },
  });
  return new Response(body, { headers: { "content-type": "text/plain; charset=utf-8" } });
}

interface ExecRequest {
  container?: string;
  command: string[];
  timeoutSeconds: number;
}

function parseExecRequest(body: unknown): ExecRequest {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw badRequest("exec request body must be a JSON object");
  }
  const { container, command, timeoutSeconds } = body as Record<string, unknown>;
  if (
    !Array.isArray(command) ||
    command.length === 0 ||
    command.some((c) => typeof c !== "string")
  ) {
    throw badRequest(
      `exec command must be a non-empty array of strings, got ${JSON.stringify(command)}`,
    );
  }
  if (container !== undefined && typeof container !== "string") {
    throw badRequest(`exec container must be a string, got ${JSON.stringify(container)}`);
  }
  const timeout = timeoutSeconds ?? 0;
  if (typeof timeout !== "number" || !Number.isFinite(timeout) || timeout < 0) {
    throw badRequest(
      `exec timeoutSeconds must be a number >= 0, got ${JSON.stringify(timeoutSeconds)}`,
    );
  }
  const req: ExecRequest = { command: command as string[], timeoutSeconds: timeout };
  if (container !== undefined) req.container = container;
  return req;
}

/** POST .../pods/{name}/exec: runs a command to completion and returns its output. */
export async function podExec(deps: ServerDeps, pod: Pod, req: Request): Promise<Response> {
  let body: unknown;
  try {
    body = await req.json();
  } catch (err) {
    throw badRequest(`exec request body is not valid JSON: ${(err as Error).message}`);
  }
  const exec = parseExecRequest(body);
  const container = resolveContainer(pod, exec.container).name;
  const result = await deps.exec(pod, container, exec.command, exec.timeoutSeconds);
  return json(result);
}

export { resolveContainer };
