// The container spec hash: a change of any field that needs a new container changes it, so the
// planner restarts the container. Resources are left out (kubelet does the same: they are
// resized in place, never a reason to restart). The hash is FNV-1a (32 bits) over a canonical
// JSON text (keys sorted, absent fields dropped), so adding a new optional field to the
// Container type does not change the hash of containers that do not set it.

import type { Container } from "../../api/types.ts";
import { memoizeFrozen } from "../../util/freeze.ts";

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    const v = (value as Record<string, unknown>)[key];
    if (v !== undefined) out[key] = canonical(v);
  }
  return out;
}

const encoder = new TextEncoder();

function fnv1a32(text: string): number {
  const bytes = encoder.encode(text);
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ (bytes[i] as number), 0x01000193);
  return h >>> 0;
}

/** Lower-case hex, as the annotation io.kubernetes.container.hash holds it (kept per frozen
 * container object, which never changes). */
export const hashContainer: (container: Container) => string = memoizeFrozen((container) => {
  const { resources: _ignored, ...rest } = container;
  return fnv1a32(JSON.stringify(canonical(rest))).toString(16);
});
