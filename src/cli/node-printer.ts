// `fleetlet get node` as kubectl prints nodes (printNode): NAME STATUS ROLES AGE VERSION, and with
// -o wide INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME.

import { age, nodeStatusColumn } from "../api/columns.ts";
import type { Node } from "../api/node.ts";
import { alignTabs, TABLE } from "./tabwriter.ts";

export function printNodeTable(nodes: Node[], now: number, opts: { wide?: boolean } = {}): string {
  const header = ["NAME", "STATUS", "ROLES", "AGE", "VERSION"];
  if (opts.wide) {
    header.push("INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME");
  }
  const rows = nodes.map((n) => {
    const info = n.status.nodeInfo;
    const row = [
      n.metadata.name,
      nodeStatusColumn(n),
      "<none>",
      age(n.metadata.creationTimestamp, now),
      info?.kubeletVersion ?? "",
    ];
    if (opts.wide) {
      const addr = (t: string) =>
        n.status.addresses?.find((a) => a.type === t)?.address ?? "<none>";
      row.push(
        addr("InternalIP"),
        addr("ExternalIP"),
        info?.osImage || "<unknown>",
        info?.kernelVersion || "<unknown>",
        info?.containerRuntimeVersion || "<unknown>",
      );
    }
    return row;
  });
  return alignTabs([header, ...rows].map((r) => `${r.join("\t")}\n`).join(""), TABLE);
}
