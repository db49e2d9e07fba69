// A pod's log, exec or attach request as the API server reads its query (container, command,
// stdin, tty, follow, tailLines, ...), checked against the pod (a container it has, a command,
// an attach's stdin) and turned into the stream it opens. Shared by the hub and the agent's local API; refusals are the
// API server's Status errors.
import { resolveContainer } from "../api/containers.ts";
import { StatusError } from "../api/status.ts";
import type { Pod } from "../api/types.ts";
import type { StreamOpen } from "../protocol/streams.ts";

/** A boolean query parameter ("true" or "1"); `absent` when it is not given. */
function flag(q: URLSearchParams, name: string, absent = false): boolean {
  const v = q.get(name);
  return v === null ? absent : v === "true" || v === "1";
}

function intParam(q: URLSearchParams, name: string, min: number): number | undefined {
  const v = q.get(name);
  if (v === null || v === "") return undefined;
  if (!/^-?\d+$/.test(v) || Number(v) < min)
    throw new StatusError(
      "BadRequest",
      `invalid value ${JSON.stringify(v)} for ${name}: want an integer >= ${min}`,
    );
  return Number(v);
}

/** The fields every stream of `pod` carries (its id and window are the broker's). */
function target(namespace: string, pod: Pod, container: string) {
  return {
    type: "stream.open" as const,
    id: 1,
    window: 0,
    namespace,
    pod: pod.metadata.name,
    ...(pod.metadata.uid !== undefined && { uid: pod.metadata.uid }),
    container,
  };
}

/** GET .../log's query as a log stream. */
export function logsRequest(
  q: URLSearchParams,
  namespace: string,
  pod: Pod,
): Extract<StreamOpen, { kind: "logs" }> {
  const container = resolveContainer(pod, q.get("container")).name;
  const tailLines = intParam(q, "tailLines", 0);
  const sinceSeconds = intParam(q, "sinceSeconds", 1);
  const limitBytes = intParam(q, "limitBytes", 1);
  const sinceTime = q.get("sinceTime") ?? "";
  return {
    ...target(namespace, pod, container),
    kind: "logs",
    follow: flag(q, "follow"),
    previous: flag(q, "previous"),
    timestamps: flag(q, "timestamps"),
    ...(tailLines !== undefined && { tailLines }),
    ...(sinceSeconds !== undefined && { sinceSeconds }),
    ...(sinceTime !== "" && { sinceTime }),
    ...(limitBytes !== undefined && { limitBytes }),
  };
}

/** .../exec's query as an exec stream: a command and a container the pod has. */
export function execRequest(
  q: URLSearchParams,
  namespace: string,
  pod: Pod,
): Extract<StreamOpen, { kind: "exec" }> {
  const command = q.getAll("command");
  if (command.length === 0)
    throw new StatusError("BadRequest", "you must specify at least 1 command");
  const container = resolveContainer(pod, q.get("container")).name;
  const tty = flag(q, "tty");
  return {
    ...target(namespace, pod, container),
    kind: "exec",
    command,
    tty,
    stdin: flag(q, "stdin"),
    stdout: flag(q, "stdout", true),
    stderr: !tty && flag(q, "stderr", true),
  };
}

/** The streams an attach wants, as the kubelet reads them: at least one of the three. */
function attachStreams(q: URLSearchParams, tty: boolean) {
  const streams = {
    stdin: flag(q, "stdin"),
    stdout: flag(q, "stdout", true),
    stderr: !tty && flag(q, "stderr", true),
  };
  if (!streams.stdin && !streams.stdout && !streams.stderr)
    throw new StatusError("BadRequest", "you must specify at least 1 of stdin, stdout, stderr");
  return streams;
}

/**
 * .../attach's query as an attach stream to a container the pod has. The terminal is the
 * container's own (`tty` in its spec, as the kubelet decides; a request cannot change it), and
 * stdin is refused for a container that has none (`stdin: true` in its spec), where the runtime
 * would take the client's input and pass it nowhere.
 */
export function attachRequest(
  q: URLSearchParams,
  namespace: string,
  pod: Pod,
): Extract<StreamOpen, { kind: "attach" }> {
  const container = resolveContainer(pod, q.get("container"));
  const tty = container.tty === true;
  const streams = attachStreams(q, tty);
  if (streams.stdin && container.stdin !== true)
    throw new StatusError(
      "BadRequest",
      `container ${container.name} of pod ${pod.metadata.name} has no stdin to attach to (its spec does not set stdin: true)`,
    );
  return { ...target(namespace, pod, container.name), kind: "attach", tty, ...streams };
}
