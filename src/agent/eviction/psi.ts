// The node's pressure stall information (PSI) from /proc/pressure/{memory,cpu,io}: the share of
// time some (or all) runnable tasks waited on the resource, averaged over 10 s, 60 s and 300 s,
// as percentages. Exported as metrics and as node status annotations, and read by the opt-in
// memory stall threshold (evictionMemoryStall).
import { readFileSync } from "node:fs";

interface PsiAverages {
  avg10: number;
  avg60: number;
  avg300: number;
}

export interface PsiLine {
  some: PsiAverages;
  /** Absent for cpu on kernels before 5.13. */
  full?: PsiAverages;
}

export const PSI_RESOURCES = ["memory", "cpu", "io"] as const;
export type PsiResource = (typeof PSI_RESOURCES)[number];
export type NodePsi = Partial<Record<PsiResource, PsiLine>>;

function averages(fields: string[]): PsiAverages | undefined {
  const kv = new Map(fields.map((f) => f.split("=") as [string, string]));
  const avg10 = Number(kv.get("avg10"));
  const avg60 = Number(kv.get("avg60"));
  const avg300 = Number(kv.get("avg300"));
  if (![avg10, avg60, avg300].every(Number.isFinite)) return undefined;
  return { avg10, avg60, avg300 };
}

/** Parses one /proc/pressure file; undefined when it has no valid "some" line. */
export function parsePsi(text: string): PsiLine | undefined {
  let some: PsiAverages | undefined;
  let full: PsiAverages | undefined;
  for (const line of text.split("\n")) {
    const [kind, ...fields] = line.trim().split(/\s+/);
    if (kind === "some") some = averages(fields);
    else if (kind === "full") full = averages(fields);
  }
  if (some === undefined) return undefined;
  return full === undefined ? { some } : { some, full };
}

/** Reads /proc/pressure/<resource> under `root`; throws naming the file when it cannot. */
export function readPsi(resource: PsiResource, root = "/proc/pressure"): PsiLine {
  const file = `${root}/${resource}`;
  const text = readFileSync(file, "utf8");
  const line = parsePsi(text);
  if (line === undefined) throw new Error(`${file} has no "some" line: ${JSON.stringify(text)}`);
  return line;
}

/** "some avg10=1.20 avg60=0.80 avg300=0.10; full avg10=0.00 ..." for a node annotation. */
export function formatPsi(line: PsiLine): string {
  const f = (k: string, a: PsiAverages) =>
    `${k} avg10=${a.avg10.toFixed(2)} avg60=${a.avg60.toFixed(2)} avg300=${a.avg300.toFixed(2)}`;
  return line.full ? `${f("some", line.some)}; ${f("full", line.full)}` : f("some", line.some);
}

/** Reads the node's PSI of every resource the kernel has; a file that cannot be read is
 * reported once (with `report`) and left out until it reads again. */
export function createPsiReader(
  report: (resource: PsiResource, error: string | undefined) => void,
  root = "/proc/pressure",
): () => NodePsi {
  const failing = new Map<PsiResource, string>();
  return () => {
    const out: NodePsi = {};
    for (const resource of PSI_RESOURCES) {
      try {
        out[resource] = readPsi(resource, root);
        if (failing.delete(resource)) report(resource, undefined);
      } catch (err) {
        const message = (err as Error).message;
        if (failing.get(resource) !== message) report(resource, message);
        failing.set(resource, message);
      }
    }
    return out;
  };
}
