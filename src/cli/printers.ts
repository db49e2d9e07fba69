// kubectl's table printers for pods and events (k8s.io/kubernetes/pkg/printers/internalversion:
// printPod, printEvent), and the json/yaml printers. `now` is passed in; nothing reads the clock.
import YAML from "yaml";
import { age, eventTarget, podTable } from "../api/columns.ts";
import type { Event, Pod } from "../api/types.ts";
import { CliError } from "./errors.ts";
import { alignTabs, TABLE } from "./tabwriter.ts";

export { age, podColumns } from "../api/columns.ts";

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

/** The cells of one `kubectl get pods` row, as printPodTable makes them. */
function podRow(pod: Pod, now: number, opts: TableOptions): string[] {
  const cells = podTable.cells(pod, now).map(String);
  const row = opts.wide ? cells : cells.slice(0, 5);
  if (opts.withNamespace) row.unshift(pod.metadata.namespace ?? "default");
  return row;
}

/** The header: the table's column names in capitals (the wide ones with -o wide). */
function podHeader(opts: TableOptions): string[] {
  const header = podTable.columns
    .filter((c) => opts.wide || c.priority === 0)
    .map((c) => c.name.toUpperCase());
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
