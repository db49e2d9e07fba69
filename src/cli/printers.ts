// kubectl's table printers for pods and events (k8s.io/kubernetes/pkg/printers/internalversion:
// printPod, printEvent), and the json/yaml printers. `now` is passed in; nothing reads the clock.
import YAML from "yaml";
import { podDisplayStatus } from "../agent/status/display.ts";
import { humanDuration } from "../api/duration.ts";
import type { Event, Pod } from "../api/types.ts";
import { CliError } from "./errors.ts";
import { alignTabs, TABLE } from "./tabwriter.ts";

/** kubectl's translateTimestampSince: the age of an RFC 3339 time, "<unknown>" when unset. */
export function age(time: string | undefined, now: number): string {
  if (time === undefined || time === "") return "<unknown>";
  const t = Date.parse(time);
  return Number.isNaN(t) ? "<unknown>" : humanDuration(now - t);
}

export interface PodColumns {
  /** READY, e.g. "1/2" (sidecar init containers count as containers). */
  ready: string;
  /** STATUS, e.g. "Running", "Init:1/2", "CrashLoopBackOff", "Terminating". */
  status: string;
  /** RESTARTS, e.g. "3 (10s ago)". */
  restarts: string;
}

/** kubectl's READY, STATUS and RESTARTS cells for a pod (printPod). */
export function podColumns(pod: Pod, now: number): PodColumns {
  const d = podDisplayStatus(pod);
  const last = d.lastRestart === undefined ? Number.NaN : Date.parse(d.lastRestart);
  const restarts =
    d.restarts !== 0 && !Number.isNaN(last)
      ? `${d.restarts} (${humanDuration(now - last)} ago)`
      : String(d.restarts);
  return { ready: d.ready, status: d.status, restarts };
}

export interface TableOptions {
  /** Adds kubectl's wide columns: IP, NODE, NOMINATED NODE and READINESS GATES. */
  wide?: boolean;
  /** Adds the NAMESPACE column first (get -A). */
  withNamespace?: boolean;
}

function table(rows: string[][]): string {
  return alignTabs(rows.map((r) => `${r.join("\t")}\n`).join(""), TABLE);
}

/** `kubectl get pods` output, header included. */
export function printPodTable(pods: Pod[], now: number, opts: TableOptions = {}): string {
  return table([podHeader(opts), ...pods.map((pod) => podRow(pod, now, opts))]);
}

/** The cells of one `kubectl get pods` row (and its header), as printPodTable makes them. */
function podRow(pod: Pod, now: number, opts: TableOptions): string[] {
  const d = podColumns(pod, now);
  const row = [
    pod.metadata.name,
    d.ready,
    d.status,
    d.restarts,
    age(pod.metadata.creationTimestamp, now),
  ];
  if (opts.wide) {
    const ip = pod.status?.podIPs?.[0]?.ip || pod.status?.podIP || "<none>";
    // A pod on a device is never nominated, and the API has no readiness gates here.
    row.push(ip, pod.spec.nodeName || "<none>", "<none>", "<none>");
  }
  if (opts.withNamespace) row.unshift(pod.metadata.namespace ?? "default");
  return row;
}

function podHeader(opts: TableOptions): string[] {
  const header = ["NAME", "READY", "STATUS", "RESTARTS", "AGE"];
  if (opts.wide) header.push("IP", "NODE", "NOMINATED NODE", "READINESS GATES");
  if (opts.withNamespace) header.unshift("NAMESPACE");
  return header;
}

/**
 * `kubectl get pods --watch` output: one row per event, the header before the first. Rows are
 * printed as they come, so a column is as wide as the widest cell seen so far (kubectl's watch
 * output is aligned per row the same way).
 */
export class PodWatchTable {
  private readonly widths: number[] = [];
  private started = false;

  constructor(private readonly opts: TableOptions = {}) {}

  /** The lines to print for `pod`: its row, after the header the first time. */
  row(pod: Pod, now: number): string {
    const rows = [podRow(pod, now, this.opts)];
    if (!this.started) rows.unshift(podHeader(this.opts));
    this.started = true;
    for (const cells of rows) {
      cells.forEach((c, i) => {
        this.widths[i] = Math.max(this.widths[i] ?? TABLE.minWidth, c.length + TABLE.padding);
      });
    }
    return rows
      .map((cells) =>
        cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(this.widths[i] ?? 0))).join(""),
      )
      .map((line) => `${line}\n`)
      .join("");
  }
}

/** The OBJECT column of `kubectl get events`: "pod/web", or the kind alone. */
function eventTarget(e: Event): string {
  const kind = (e.involvedObject.kind ?? "").toLowerCase();
  return e.involvedObject.name ? `${kind}/${e.involvedObject.name}` : kind;
}

/** `kubectl get events` output (LAST SEEN TYPE REASON OBJECT MESSAGE), oldest first. */
export function printEventTable(events: Event[], now: number, opts: TableOptions = {}): string {
  const header = ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"];
  if (opts.withNamespace) header.unshift("NAMESPACE");
  const sorted = [...events].sort(
    (a, b) => Date.parse(a.lastTimestamp) - Date.parse(b.lastTimestamp),
  );
  const rows = sorted.map((e) => {
    const row = [age(e.lastTimestamp, now), e.type, e.reason, eventTarget(e), e.message.trim()];
    if (opts.withNamespace) row.unshift(e.metadata.namespace ?? "");
    return row;
  });
  return table([header, ...rows]);
}

export type OutputFormat = "table" | "wide" | "json" | "yaml";

/** Validates -o; kubectl's message for an unknown format. */
export function parseOutputFormat(value: string | undefined): OutputFormat {
  if (value === undefined || value === "") return "table";
  if (value === "wide" || value === "json" || value === "yaml") return value;
  throw new CliError(
    `unable to match a printer suitable for the output format "${value}", allowed formats are: json,wide,yaml`,
  );
}

/** One object, or several as a kubectl "List", in json (4-space indent, as kubectl) or yaml. */
export function printObjects(objects: unknown[] | unknown, format: "json" | "yaml"): string {
  const doc = Array.isArray(objects)
    ? { apiVersion: "v1", items: objects, kind: "List", metadata: { resourceVersion: "" } }
    : objects;
  return format === "json" ? `${JSON.stringify(doc, null, 4)}\n` : YAML.stringify(doc);
}
