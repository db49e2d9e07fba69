// Choosing which pods of a manifest folder run, given what each file holds now and what it
// held when it was last valid. Pure: no I/O, no time.
//
// Rules, applied to files in sorted path order:
// - a file whose current version is valid and whose pods claim no name or uid already claimed
//   by an earlier file contributes its current pods (and this becomes its last valid version);
// - otherwise the file is reported, and it contributes its last valid pods if it has some and
//   they claim nothing already claimed (fleetlet keeps a running pod through a bad edit; the
//   kubelet drops it);
// - a duplicate is always rejected in the later file, naming the earlier one.

import type { Pod } from "../../api/index.ts";

export type FileVersion = { ok: true; pods: Pod[] } | { ok: false; message: string };

export interface FileInput {
  path: string;
  /** What the file holds now. */
  current: FileVersion;
  /** The pods of its last valid version, if it had one. */
  lastValid?: Pod[];
}

export interface FileOutcome {
  path: string;
  /** The pods this file contributes. */
  pods: Pod[];
  /** Whether `pods` is the current version (else the last valid one, or nothing). */
  current: boolean;
  /** Why the current version is not used, one line naming the file. */
  error?: string;
}

/** Applies the rules above; `files` need not be sorted. */
export function selectFilePods(files: readonly FileInput[]): FileOutcome[] {
  const sorted = [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const names = new Map<string, string>();
  const uids = new Map<string, string>();
  const outcomes: FileOutcome[] = [];
  for (const file of sorted) {
    let error: string | undefined;
    if (file.current.ok) {
      error = findConflict(file.path, file.current.pods, names, uids);
      if (error === undefined) {
        claim(file.path, file.current.pods, names, uids);
        outcomes.push({ path: file.path, pods: file.current.pods, current: true });
        continue;
      }
    } else {
      error = file.current.message;
    }
    const fallback = file.lastValid ?? [];
    const usable = findConflict(file.path, fallback, names, uids) === undefined;
    if (usable) claim(file.path, fallback, names, uids);
    const kept = usable && fallback.length > 0;
    outcomes.push({
      path: file.path,
      pods: usable ? fallback : [],
      current: false,
      error: kept ? `${error}; its last valid version keeps running` : error,
    });
  }
  return outcomes;
}

function fullName(pod: Pod): string {
  return `${pod.metadata.namespace ?? ""}/${pod.metadata.name}`;
}

function findConflict(
  path: string,
  pods: readonly Pod[],
  names: ReadonlyMap<string, string>,
  uids: ReadonlyMap<string, string>,
): string | undefined {
  for (const pod of pods) {
    const name = fullName(pod);
    const byName = names.get(name);
    if (byName !== undefined) {
      return `manifest ${path}: pod ${JSON.stringify(name)} is already defined in manifest ${byName}`;
    }
    const uid = pod.metadata.uid ?? "";
    const byUid = uids.get(uid);
    if (byUid !== undefined) {
      return `manifest ${path}: pod ${JSON.stringify(name)}: metadata.uid ${JSON.stringify(uid)} is already used in manifest ${byUid}`;
    }
  }
  return undefined;
}

function claim(
  path: string,
  pods: readonly Pod[],
  names: Map<string, string>,
  uids: Map<string, string>,
): void {
  for (const pod of pods) {
    names.set(fullName(pod), path);
    uids.set(pod.metadata.uid ?? "", path);
  }
}
