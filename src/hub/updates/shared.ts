// What hub replicas share of node updates through the change log (docs/hub-replicas.md, "Node
// updates and agent rollouts"): a node's wish (kind "updates", written with the wish itself) and
// what the replica holding its agent heard of its update (kind "updatereports", also kept in
// node_update_reports, so that a replica that starts later, and may lead, has it). One encoding,
// used by the writer and the reader.
import { updateStatusSchema } from "../../protocol/index.ts";
import type { ChangeRow } from "../pg/changes.ts";
import type { SharedReport, WantedChange } from "./store.ts";

export const WISH_KIND = "updates";
export const REPORT_KIND = "updatereports";

/** The change row of a wish. */
export function wishRow(c: WantedChange): ChangeRow {
  const object = c.version === null ? null : JSON.stringify({ version: c.version, setAt: c.setAt });
  return { kind: WISH_KIND, key: c.node, deleted: c.version === null, object };
}

/** The wish a row of `node` gives (`object` null: none). */
export function wishOf(node: string, object: string | null): WantedChange {
  if (object === null) return { node, version: null };
  const o = JSON.parse(object) as { version: string; setAt: number };
  if (typeof o.version !== "string" || typeof o.setAt !== "number")
    throw new Error(`not a wish: ${object}`);
  return { node, version: o.version, setAt: o.setAt };
}

/** The change row of a report. */
export function reportRow(node: string, r: SharedReport): ChangeRow {
  return { kind: REPORT_KIND, key: node, deleted: false, object: JSON.stringify(r) };
}

/** The report a row gives (its status checked as an agent's is). */
export function reportOf(object: string): SharedReport {
  const o = JSON.parse(object) as Record<string, unknown>;
  const at = typeof o.at === "number" ? o.at : undefined;
  if (o.status !== undefined && at !== undefined)
    return { status: updateStatusSchema.parse(o.status), at };
  if (typeof o.offered === "string" && at !== undefined) return { offered: o.offered, at };
  const agent = o.agent as { version?: unknown; updates?: unknown } | undefined;
  if (typeof agent?.version === "string" && typeof agent.updates === "boolean")
    return { agent: { version: agent.version, updates: agent.updates } };
  throw new Error(`not an update report: ${object.slice(0, 200)}`);
}
