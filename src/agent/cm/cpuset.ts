// CPU sets as sorted, duplicate-free arrays of CPU ids, and the kernel's list format ("0-2,5").

export type CpuSet = readonly number[];

/** Parses "0-2,5" (spaces and a trailing newline allowed; "" is empty); throws on bad text. */
export function parseCpuSet(text: string): CpuSet {
  const out = new Set<number>();
  const t = text.trim();
  if (t === "") return [];
  for (const part of t.split(",")) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!m) throw new Error(`invalid cpuset ${JSON.stringify(text)}`);
    const lo = Number(m[1]);
    const hi = m[2] === undefined ? lo : Number(m[2]);
    if (hi < lo || hi - lo > 4096) throw new Error(`invalid cpuset ${JSON.stringify(text)}`);
    for (let c = lo; c <= hi; c++) out.add(c);
  }
  return [...out].sort((a, b) => a - b);
}

export function formatCpuSet(set: CpuSet): string {
  const sorted = [...new Set(set)].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && (sorted[j + 1] ?? 0) === (sorted[j] ?? 0) + 1) j++;
    parts.push(i === j ? `${sorted[i]}` : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return parts.join(",");
}

export const union = (a: CpuSet, b: CpuSet): CpuSet =>
  [...new Set([...a, ...b])].sort((x, y) => x - y);

export const difference = (a: CpuSet, b: CpuSet): CpuSet => {
  const drop = new Set(b);
  return a.filter((c) => !drop.has(c));
};

export const isSubset = (a: CpuSet, of: CpuSet): boolean => {
  const all = new Set(of);
  return a.every((c) => all.has(c));
};

export const sameSet = (a: CpuSet, b: CpuSet): boolean => a.length === b.length && isSubset(a, b);
