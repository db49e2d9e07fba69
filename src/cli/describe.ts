// `kubectl describe pod` output (k8s.io/kubectl/pkg/describe: describePod), for the fields
// fleetlet pods have. Times are printed in UTC as RFC 1123Z; `now` is passed in.

import { humanDuration } from "../api/duration.ts";
import type {
  Container,
  ContainerState,
  ContainerStatus,
  Event,
  Pod,
  Probe,
  Volume,
} from "../api/types.ts";
import { age } from "./printers.ts";
import { alignTabs, DESCRIBE } from "./tabwriter.ts";

const DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/** Go's time.RFC1123Z in UTC: "Mon, 02 Jan 2006 15:04:05 +0000". */
function rfc1123z(time: string | undefined): string {
  const d = new Date(time ?? "");
  if (time === undefined || Number.isNaN(d.getTime())) return "<unknown>";
  const p = (n: number) => String(n).padStart(2, "0");
  const clock = `${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())}`;
  return `${DAYS[d.getUTCDay()]}, ${p(d.getUTCDate())} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()} ${clock} +0000`;
}

/** Writes lines at an indent level of two spaces each, as kubectl's PrefixWriter. */
class Out {
  readonly lines: string[] = [];
  w(level: number, text: string): void {
    this.lines.push("  ".repeat(level) + text);
  }
}

function multiline(
  out: Out,
  level: number,
  title: string,
  map: Record<string, string> | undefined,
) {
  const entries = Object.entries(map ?? {}).sort(([a], [b]) => a.localeCompare(b));
  if (entries.length === 0) {
    out.w(level, `${title}:\t<none>`);
    return;
  }
  for (const [i, [k, v]] of entries.entries()) {
    out.w(level, `${i === 0 ? `${title}:` : ""}\t${k}=${v}`);
  }
}

/** kubectl's DescribeProbe, with the API server's defaults for unset fields. */
export function describeProbe(p: Probe): string {
  const attrs = `delay=${p.initialDelaySeconds ?? 0}s timeout=${p.timeoutSeconds ?? 1}s period=${p.periodSeconds ?? 10}s #success=${p.successThreshold ?? 1} #failure=${p.failureThreshold ?? 3}`;
  if (p.exec) return `exec [${(p.exec.command ?? []).join(" ")}] ${attrs}`;
  if (p.httpGet) {
    const g = p.httpGet;
    const host = g.host?.includes(":") ? `[${g.host}]` : (g.host ?? "");
    return `http-get ${(g.scheme ?? "HTTP").toLowerCase()}://${host}:${g.port}${g.path ?? ""} ${attrs}`;
  }
  if (p.tcpSocket) return `tcp-socket ${p.tcpSocket.host ?? ""}:${p.tcpSocket.port} ${attrs}`;
  if (p.grpc) return `grpc <pod>:${p.grpc.port} ${p.grpc.service ?? ""} ${attrs}`;
  return `unknown ${attrs}`;
}

function describeState(out: Out, title: string, s: ContainerState): void {
  if (s.running) {
    out.w(2, `${title}:\tRunning`);
    out.w(3, `Started:\t${rfc1123z(s.running.startedAt)}`);
  } else if (s.terminated) {
    const t = s.terminated;
    out.w(2, `${title}:\tTerminated`);
    if (t.reason) out.w(3, `Reason:\t${t.reason}`);
    if (t.message) out.w(3, `Message:\t${t.message}`);
    out.w(3, `Exit Code:\t${t.exitCode}`);
    if (t.signal) out.w(3, `Signal:\t${t.signal}`);
    out.w(3, `Started:\t${rfc1123z(t.startedAt)}`);
    out.w(3, `Finished:\t${rfc1123z(t.finishedAt)}`);
  } else {
    out.w(2, `${title}:\tWaiting`);
    if (s.waiting?.reason) out.w(3, `Reason:\t${s.waiting.reason}`);
    // Not in kubectl's describe: the figures of a pull running and why a pull backs off.
    if (s.waiting?.message) out.w(3, `Message:\t${s.waiting.message}`);
  }
}

function describeContainer(out: Out, c: Container, status: ContainerStatus | undefined): void {
  out.w(1, `${c.name}:`);
  if (status?.containerID) out.w(2, `Container ID:\t${status.containerID}`);
  out.w(2, `Image:\t${c.image}`);
  out.w(2, `Image ID:\t${status?.imageID ?? ""}`);
  const ports = (c.ports ?? []).map((p) => `${p.containerPort}/${p.protocol ?? "TCP"}`);
  out.w(
    2,
    `Port${ports.length > 1 ? "s" : ""}:\t${ports.length > 0 ? ports.join(", ") : "<none>"}`,
  );
  if (c.command) out.w(2, `Command:\n${c.command.map((a) => `      ${a}`).join("\n")}`);
  if (c.args) out.w(2, `Args:\n${c.args.map((a) => `      ${a}`).join("\n")}`);
  if (status) {
    describeState(out, "State", status.state);
    if (status.lastState.terminated) describeState(out, "Last State", status.lastState);
    out.w(2, `Ready:\t${status.ready ? "True" : "False"}`);
    out.w(2, `Restart Count:\t${status.restartCount}`);
  } else {
    out.w(2, "State:\tWaiting");
    out.w(2, "Ready:\tFalse");
    out.w(2, "Restart Count:\t0");
  }
  for (const [title, r] of [
    ["Limits", c.resources?.limits],
    ["Requests", c.resources?.requests],
  ] as const) {
    if (r === undefined || Object.keys(r).length === 0) continue;
    out.w(2, `${title}:`);
    for (const [k, v] of Object.entries(r).sort(([a], [b]) => a.localeCompare(b)))
      out.w(3, `${k}:\t${v}`);
  }
  describeDevices(out, status);
  if (c.livenessProbe) out.w(2, `Liveness:\t${describeProbe(c.livenessProbe)}`);
  if (c.readinessProbe) out.w(2, `Readiness:\t${describeProbe(c.readinessProbe)}`);
  if (c.startupProbe) out.w(2, `Startup:\t${describeProbe(c.startupProbe)}`);
  const env = c.env ?? [];
  if (env.length === 0) out.w(2, "Environment:\t<none>");
  else {
    out.w(2, "Environment:");
    for (const e of env) {
      const from = e.valueFrom?.fieldRef
        ? ` (${e.valueFrom.fieldRef.apiVersion ?? "v1"}:${e.valueFrom.fieldRef.fieldPath})`
        : "";
      out.w(3, `${e.name}:\t${e.value ?? ""}${from}`);
    }
  }
  const mounts = c.volumeMounts ?? [];
  if (mounts.length === 0) out.w(2, "Mounts:\t<none>");
  else {
    out.w(2, "Mounts:");
    for (const m of mounts) out.w(3, `${m.mountPath} from ${m.name} (${m.readOnly ? "ro" : "rw"})`);
  }
}

/** The devices a container holds, one line per resource: ids with their health. */
function describeDevices(out: Out, status: ContainerStatus | undefined): void {
  const resources = status?.allocatedResourcesStatus ?? [];
  if (resources.length === 0) return;
  out.w(2, "Devices:");
  for (const r of resources) {
    const ids = (r.resources ?? []).map((d) =>
      d.health === "Healthy" ? d.resourceID : `${d.resourceID} (${d.health ?? "Unknown"})`,
    );
    out.w(3, `${r.name}:\t${ids.join(", ")}`);
  }
}

/** One volume as kubectl describes it. */
function describeVolume(out: Out, v: Volume): void {
  out.w(1, `${v.name}:`);
  if (v.hostPath) {
    out.w(2, "Type:\tHostPath (bare host directory volume)");
    out.w(2, `Path:\t${v.hostPath.path}`);
    out.w(2, `HostPathType:\t${v.hostPath.type ?? ""}`);
  } else if (v.emptyDir) {
    out.w(2, "Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)");
    out.w(2, `Medium:\t${v.emptyDir.medium ?? ""}`);
    out.w(2, `SizeLimit:\t${v.emptyDir.sizeLimit ?? "<unset>"}`);
  } else if (v.configMap) {
    out.w(2, "Type:\tConfigMap (a volume populated by a ConfigMap)");
    out.w(2, `Name:\t${v.configMap.name ?? ""}`);
    out.w(2, `Optional:\t${v.configMap.optional === true}`);
  } else if (v.secret) {
    out.w(2, "Type:\tSecret (a volume populated by a Secret)");
    out.w(2, `SecretName:\t${v.secret.secretName ?? ""}`);
    out.w(2, `Optional:\t${v.secret.optional === true}`);
  } else if (v.downwardAPI) {
    out.w(2, "Type:\tDownwardAPI (a volume populated by information about the pod)");
    out.w(2, "Items:");
    for (const item of v.downwardAPI.items ?? [])
      out.w(
        3,
        `${item.fieldRef?.fieldPath ?? item.resourceFieldRef?.resource ?? ""} -> ${item.path}`,
      );
  } else if (v.projected) {
    out.w(2, "Type:\tProjected (a volume that contains injected data from multiple sources)");
    const opt = (o: boolean | undefined) => (o === undefined ? "<nil>" : String(o));
    for (const src of v.projected.sources ?? []) {
      if (src.secret) {
        out.w(2, `SecretName:\t${src.secret.name ?? ""}`);
        out.w(2, `SecretOptionalName:\t${opt(src.secret.optional)}`);
      } else if (src.downwardAPI) out.w(2, "DownwardAPI:\ttrue");
      else if (src.configMap) {
        out.w(2, `ConfigMapName:\t${src.configMap.name ?? ""}`);
        out.w(2, `ConfigMapOptional:\t${opt(src.configMap.optional)}`);
      }
    }
  }
}

function describeEvents(out: Out, events: Event[], now: number): void {
  if (events.length === 0) {
    out.w(0, "Events:\t<none>");
    return;
  }
  out.w(0, "Events:");
  out.w(1, "Type\tReason\tAge\tFrom\tMessage");
  out.w(1, "----\t------\t----\t----\t-------");
  const sorted = [...events].sort(
    (a, b) => Date.parse(a.lastTimestamp) - Date.parse(b.lastTimestamp),
  );
  for (const e of sorted) {
    const when =
      e.count > 1
        ? `${age(e.lastTimestamp, now)} (x${e.count} over ${age(e.firstTimestamp, now)})`
        : age(e.firstTimestamp, now);
    out.w(1, `${e.type}\t${e.reason}\t${when}\t${e.source.component ?? ""}\t${e.message.trim()}`);
  }
}

function describeHeader(out: Out, pod: Pod, now: number): void {
  const st = pod.status ?? {};
  out.w(0, `Name:\t${pod.metadata.name}`);
  out.w(0, `Namespace:\t${pod.metadata.namespace ?? "default"}`);
  out.w(0, `Priority:\t${pod.spec.priority ?? 0}`);
  const node = pod.spec.nodeName
    ? `${pod.spec.nodeName}${st.hostIP ? `/${st.hostIP}` : ""}`
    : "<none>";
  out.w(0, `Node:\t${node}`);
  if (st.startTime) out.w(0, `Start Time:\t${rfc1123z(st.startTime)}`);
  multiline(out, 0, "Labels", pod.metadata.labels);
  multiline(out, 0, "Annotations", pod.metadata.annotations);
  const deleting = pod.metadata.deletionTimestamp;
  if (deleting !== undefined && st.phase !== "Succeeded" && st.phase !== "Failed") {
    const until = Date.parse(deleting) - now;
    const left = Number.isNaN(until) ? "<unknown>" : humanDuration(Math.max(0, until));
    out.w(0, `Status:\tTerminating (lasts ${left})`);
    out.w(0, `Termination Grace Period:\t${pod.metadata.deletionGracePeriodSeconds ?? 30}s`);
  } else {
    out.w(0, `Status:\t${st.phase ?? ""}`);
  }
  if (st.reason) out.w(0, `Reason:\t${st.reason}`);
  if (st.message) out.w(0, `Message:\t${st.message}`);
  out.w(0, `IP:\t${st.podIP ?? ""}`);
  const ips = st.podIPs ?? [];
  if (ips.length === 0) out.w(0, "IPs:\t<none>");
  else {
    out.w(0, "IPs:");
    for (const ip of ips) out.w(1, `IP:\t${ip.ip}`);
  }
}

/** The whole `describe pod` text; `events` are the pod's events. */
export function describePod(pod: Pod, events: Event[], now: number): string {
  const out = new Out();
  describeHeader(out, pod, now);
  const sections = [
    ["Init Containers", pod.spec.initContainers ?? [], pod.status?.initContainerStatuses ?? []],
    ["Containers", pod.spec.containers, pod.status?.containerStatuses ?? []],
  ] as const;
  for (const [title, containers, statuses] of sections) {
    if (containers.length === 0) continue;
    out.w(0, `${title}:`);
    for (const c of containers)
      describeContainer(
        out,
        c,
        statuses.find((s) => s.name === c.name),
      );
  }
  const conditions = pod.status?.conditions ?? [];
  if (conditions.length > 0) {
    out.w(0, "Conditions:");
    out.w(1, "Type\tStatus");
    for (const c of conditions) out.w(1, `${c.type} \t${c.status} `);
  }
  const volumes = pod.spec.volumes ?? [];
  if (volumes.length === 0) out.w(0, "Volumes:\t<none>");
  else {
    out.w(0, "Volumes:");
    for (const v of volumes) describeVolume(out, v);
  }
  out.w(0, `QoS Class:\t${pod.status?.qosClass ?? ""}`);
  multiline(out, 0, "Node-Selectors", pod.spec.nodeSelector);
  describeEvents(out, events, now);
  return alignTabs(`${out.lines.join("\n")}\n`, DESCRIBE);
}
