// The results manager (kubelet's prober results.Manager): the latest settled result of each
// probe kind per container ID. Workers write it; the sync loop and the status generator read it.
// Invariant: `onChange` is called only when a stored result actually changes (set or removed),
// and a throw from it never reaches the worker that wrote the result: it goes to `onError`.

import type { ProbeKind, ProbeResult } from "./types.ts";

export interface ResultChange {
  kind: ProbeKind;
  containerId: string;
  podUid: string;
  /** undefined when the result was removed. */
  result: ProbeResult | undefined;
}

export interface ResultsManager {
  get(kind: ProbeKind, containerId: string): ProbeResult | undefined;
  set(kind: ProbeKind, containerId: string, podUid: string, result: ProbeResult): void;
  remove(kind: ProbeKind, containerId: string): void;
  /** Container IDs of the pod whose `kind` result is `result`. */
  matching(kind: ProbeKind, podUid: string, result: ProbeResult): Set<string>;
}

interface Entry {
  podUid: string;
  result: ProbeResult;
}

export function createResultsManager(
  onChange: (change: ResultChange) => void = () => {},
  onError: (error: unknown, change: ResultChange) => void = () => {},
): ResultsManager {
  const byKind = new Map<ProbeKind, Map<string, Entry>>();
  const table = (kind: ProbeKind) => {
    let t = byKind.get(kind);
    if (t === undefined) {
      t = new Map();
      byKind.set(kind, t);
    }
    return t;
  };
  const notify = (change: ResultChange) => {
    try {
      onChange(change);
    } catch (error) {
      // A listener's failure is its own: it is reported, and the results stay consistent.
      onError(error, change);
    }
  };
  return {
    get: (kind, id) => byKind.get(kind)?.get(id)?.result,
    set(kind, containerId, podUid, result) {
      const t = table(kind);
      if (t.get(containerId)?.result === result) return;
      t.set(containerId, { podUid, result });
      notify({ kind, containerId, podUid, result });
    },
    remove(kind, containerId) {
      const entry = byKind.get(kind)?.get(containerId);
      if (entry === undefined) return;
      byKind.get(kind)?.delete(containerId);
      notify({ kind, containerId, podUid: entry.podUid, result: undefined });
    },
    matching(kind, podUid, result) {
      const out = new Set<string>();
      for (const [id, e] of byKind.get(kind) ?? []) {
        if (e.podUid === podUid && e.result === result) out.add(id);
      }
      return out;
    },
  };
}
