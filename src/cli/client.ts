// The client of the agent's local API (src/agent/server) over its unix socket. Server refusals
// become ApiStatusError with kubectl's wording; an unreachable agent is one clear CliError.
import type { Node } from "../api/node.ts";
import { isStatus } from "../api/status.ts";
import type { Event, EventList, Pod, PodList } from "../api/types.ts";
import { CliError } from "./errors.ts";

const DEFAULT_SOCKET = "/run/fleetlet/agent.sock";

/** The socket to use: --socket, else $FLEETLET_SOCKET, else /run/fleetlet/agent.sock. */
export function resolveSocketPath(
  flag: string | undefined,
  env: Record<string, string | undefined>,
): string {
  return flag || env.FLEETLET_SOCKET || DEFAULT_SOCKET;
}

/** A Status the server answered with, e.g. reason "NotFound", code 404. */
export interface ApiStatus {
  kind: "Status";
  message: string;
  reason?: string;
  code?: number;
}

/** The server refused the request; the message is kubectl's "Error from server (...)". */
export class ApiStatusError extends CliError {
  constructor(readonly status: ApiStatus) {
    super(`Error from server (${status.reason || "Unknown"}): ${status.message}`);
    this.name = "ApiStatusError";
  }
}

interface PodQuery {
  /** Omitted: all namespaces. */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

export interface WatchQuery extends PodQuery {
  /** The server ends the stream after this many seconds. */
  timeoutSeconds?: number;
  /** Ends the stream. */
  signal?: AbortSignal;
}

/** One event of a pod watch, as the API server sends them. */
export interface WatchEvent {
  type: "ADDED" | "MODIFIED" | "DELETED";
  object: Pod;
}

interface EventQuery {
  namespace?: string;
  fieldSelector?: string;
}

interface LogQuery {
  container?: string;
  follow?: boolean;
  previous?: boolean;
  tailLines?: number;
  timestamps?: boolean;
  /** Only lines of the last this many seconds. */
  sinceSeconds?: number;
  /** Ends a followed stream. */
  signal?: AbortSignal;
}

interface ExecRequest {
  container?: string;
  command: string[];
  timeoutSeconds?: number;
}

interface ExecResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

export interface AgentClient {
  readonly socketPath: string;
  listPods(q?: PodQuery): Promise<PodList>;
  /** Watches pods: ADDED for each pod now, then one event per change, until the stream ends. */
  watchPods(q?: WatchQuery): AsyncGenerator<WatchEvent>;
  getPod(namespace: string, name: string): Promise<Pod>;
  listEvents(q?: EventQuery): Promise<EventList>;
  /** The events of one pod, oldest update first. */
  podEvents(pod: Pod): Promise<Event[]>;
  /** The log as text chunks, as the server sends them. */
  logs(namespace: string, name: string, q?: LogQuery): AsyncGenerator<string>;
  exec(namespace: string, name: string, req: ExecRequest): Promise<ExecResult>;
  /** The /healthz answer: ok and the body (the failing checks when not ok). */
  healthz(): Promise<{ ok: boolean; body: string }>;
  metrics(): Promise<string>;
  /** This agent's Node (`name`, when given, must be its name). */
  getNode(name?: string): Promise<Node>;
}

function query(params: Record<string, string | number | boolean | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== "" && v !== false) q.set(k, String(v));
  }
  const s = q.toString();
  return s === "" ? "" : `?${s}`;
}

const seg = encodeURIComponent;

export type Send = (path: string, init?: RequestInit) => Promise<Response>;

/** fetch over the socket; a connection failure is one CliError naming the socket. */
function transport(socketPath: string): Send {
  return async (path, init = {}) => {
    try {
      return await fetch(`http://localhost${path}`, { ...init, unix: socketPath });
    } catch (err) {
      if ((err as Error).name === "AbortError") throw err;
      const code = (err as NodeJS.ErrnoException).code;
      const why =
        code === "EACCES" || code === "EPERM"
          ? "permission denied (the socket is root-only; try sudo)"
          : "is `fleetlet agent` running?";
      throw new CliError(`cannot reach the fleetlet agent at ${socketPath}: ${why}`);
    }
  };
}

/** The response when it is a success, else its Status (or body) as an ApiStatusError. */
async function checked(res: Response, path: string): Promise<Response> {
  if (res.ok) return res;
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined; // not JSON: reported below with the status code and the text
  }
  if (isStatus(body)) throw new ApiStatusError(body);
  const message = `${path} answered ${res.status}: ${text.trim() || res.statusText}`;
  throw new ApiStatusError({ kind: "Status", message, code: res.status });
}

/** One line of a watch stream; a line that is not a watch event is a CliError. */
function parseWatchEvent(line: string): WatchEvent {
  let event: Partial<WatchEvent> | undefined;
  try {
    event = JSON.parse(line);
  } catch {
    event = undefined;
  }
  const type = event?.type;
  if ((type === "ADDED" || type === "MODIFIED" || type === "DELETED") && event?.object) {
    return event as WatchEvent;
  }
  throw new CliError(
    `the pod watch sent something that is not a watch event: ${line.slice(0, 200)}`,
  );
}

/** The events of a pod watch's body, blank lines skipped; ends quietly when `signal` aborted it. */
export async function* watchEvents(
  body: ReadableStream<Uint8Array>,
  signal?: AbortSignal,
): AsyncGenerator<WatchEvent> {
  let pending = "";
  for await (const text of textChunks(body, "pod watch", signal)) {
    pending += text;
    for (let end = pending.indexOf("\n"); end >= 0; end = pending.indexOf("\n")) {
      const line = pending.slice(0, end);
      pending = pending.slice(end + 1);
      if (line.trim() !== "") yield parseWatchEvent(line);
    }
  }
}

/** The text chunks of a streamed body; ends quietly when `signal` aborted it. */
async function* textChunks(
  body: ReadableStream<Uint8Array>,
  what: string,
  signal: AbortSignal | undefined,
): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  try {
    for await (const chunk of body) {
      const text = decoder.decode(chunk, { stream: true });
      if (text !== "") yield text;
    }
  } catch (err) {
    if (signal?.aborted) return;
    throw new CliError(`${what} broke: ${(err as Error).message}`);
  }
  const last = decoder.decode();
  if (last !== "") yield last;
}

/** fetch to the hub's API (its logs of pods on devices): the token, and its CA for HTTPS. */
export function hubTransport(target: { url: string; token: string; ca?: string }): Send {
  return async (path, init = {}) => {
    const headers = new Headers(init.headers);
    headers.set("authorization", `Bearer ${target.token}`);
    try {
      return await fetch(`${target.url}${path}`, {
        ...init,
        headers,
        ...(target.ca !== undefined && { tls: { ca: target.ca } }),
      } as RequestInit);
    } catch (err) {
      if ((err as Error).name === "AbortError") throw err;
      throw new CliError(`Cannot reach the hub at ${target.url}: ${(err as Error).message}`);
    }
  };
}

export function createAgentClient(socketPath: string, send = transport(socketPath)): AgentClient {
  return new LocalAgentClient(socketPath, send);
}

const podPath = (ns: string, name: string) => `/api/v1/namespaces/${seg(ns)}/pods/${seg(name)}`;
/** The pod list of a namespace, or of all namespaces. */
const podsPath = (ns: string | undefined) =>
  ns === undefined ? "/api/v1/pods" : `/api/v1/namespaces/${seg(ns)}/pods`;

class LocalAgentClient implements AgentClient {
  constructor(
    readonly socketPath: string,
    private readonly send: Send,
  ) {}

  listPods(q: PodQuery = {}): Promise<PodList> {
    return this.getJson(
      podsPath(q.namespace) +
        query({ labelSelector: q.labelSelector, fieldSelector: q.fieldSelector }),
    );
  }

  async *watchPods(q: WatchQuery = {}): AsyncGenerator<WatchEvent> {
    const path =
      podsPath(q.namespace) +
      query({
        watch: true,
        labelSelector: q.labelSelector,
        fieldSelector: q.fieldSelector,
        timeoutSeconds: q.timeoutSeconds,
      });
    const res = await this.request(path, q.signal === undefined ? {} : { signal: q.signal });
    if (res.body !== null) yield* watchEvents(res.body, q.signal);
  }

  getPod(ns: string, name: string): Promise<Pod> {
    return this.getJson(podPath(ns, name));
  }

  listEvents(q: EventQuery = {}): Promise<EventList> {
    const base =
      q.namespace === undefined
        ? "/api/v1/events"
        : `/api/v1/namespaces/${seg(q.namespace)}/events`;
    return this.getJson(base + query({ fieldSelector: q.fieldSelector }));
  }

  async podEvents(pod: Pod): Promise<Event[]> {
    const ns = pod.metadata.namespace ?? "default";
    const fieldSelector = `involvedObject.kind=Pod,involvedObject.name=${pod.metadata.name}`;
    const list = await this.getJson<EventList>(
      `/api/v1/namespaces/${seg(ns)}/events${query({ fieldSelector })}`,
    );
    const uid = pod.metadata.uid;
    return list.items.filter(
      (e) =>
        uid === undefined || e.involvedObject.uid === undefined || e.involvedObject.uid === uid,
    );
  }

  async *logs(ns: string, name: string, q: LogQuery = {}): AsyncGenerator<string> {
    const { signal, ...params } = q;
    const init: RequestInit = signal === undefined ? {} : { signal };
    const res = await this.request(`${podPath(ns, name)}/log${query({ ...params })}`, init);
    if (res.body !== null) yield* textChunks(res.body, `log stream of pod "${name}"`, signal);
  }

  async exec(ns: string, name: string, req: ExecRequest): Promise<ExecResult> {
    const res = await this.request(`${podPath(ns, name)}/exec`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(req),
    });
    return (await res.json()) as ExecResult;
  }

  async healthz(): Promise<{ ok: boolean; body: string }> {
    const res = await this.send("/healthz");
    return { ok: res.ok, body: await res.text() };
  }

  async metrics(): Promise<string> {
    return (await this.request("/metrics")).text();
  }

  async getNode(name?: string): Promise<Node> {
    if (name !== undefined) return this.getJson<Node>(`/api/v1/nodes/${seg(name)}`);
    const list = await this.getJson<{ items: Node[] }>("/api/v1/nodes");
    const node = list.items[0];
    if (node === undefined) throw new CliError("the agent does not report a node yet");
    return node;
  }

  /** The response of a request that succeeded; a failure is thrown (see checked). */
  private async request(path: string, init: RequestInit = {}): Promise<Response> {
    return checked(await this.send(path, init), path);
  }

  private async getJson<T>(path: string): Promise<T> {
    return (await this.request(path)).json() as T;
  }
}
