// Choosing which pods and objects (ConfigMaps, Secrets) of a manifest folder are in effect,
// given what each file holds now and what it held when it was last valid. Pure: no I/O, no time.
//
// Rules, applied to files in sorted path order:
// - a file whose current version is valid, whose pods and objects claim no name (or pod uid)
//   already claimed by an earlier file, and which changes no immutable object in effect,
//   contributes its current version (and this becomes its last valid version);
// - otherwise the file is reported, and it contributes its last valid version if it has one and
//   it claims nothing already claimed (fleetlet keeps a running pod and the objects it reads
//   through a bad edit; the kubelet drops the pod);
// - a duplicate is always rejected in the later file, naming the earlier one.

import { formatFieldError, type Pod, validateImmutableUpdate } from "../../api/index.ts";
import { type ConfigObject, describeObject, objectKey } from "./parse.ts";

/** What one version of a file holds. */
export interface FileContent {
  pods: Pod[];
  objects: ConfigObject[];
}

export type FileVersion = ({ ok: true } & FileContent) | { ok: false; message: string };

export interface FileInput {
  path: string;
  /** What the file holds now. */
  current: FileVersion;
  /** Its last valid version, if it had one. */
  lastValid?: FileContent;
}

export interface FileOutcome extends FileContent {
  path: string;
  /** Whether this is the current version (else the last valid one, or nothing). */
  current: boolean;
  /** Why the current version is not used, one line naming the file. */
  error?: string;
}

/** Claimed names and uids, each with the file that claimed it. */
interface Claims {
  names: Map<string, string>;
  uids: Map<string, string>;
  objects: Map<string, string>;
}

/**
 * Applies the rules above; `files` need not be sorted. `inEffect` holds the objects of the
 * previous selection, by objectKey: an immutable one may not change.
 */
export function selectFilePods(
  files: readonly FileInput[],
  inEffect: ReadonlyMap<string, ConfigObject> = new Map(),
): FileOutcome[] {
  const sorted = [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const claims: Claims = { names: new Map(), uids: new Map(), objects: new Map() };
  const outcomes: FileOutcome[] = [];
  for (const file of sorted) {
    let error: string | undefined;
    if (file.current.ok) {
      error =
        findConflict(file.path, file.current, claims) ??
        findImmutableChange(file.path, file.current.objects, inEffect);
      if (error === undefined) {
        claim(file.path, file.current, claims);
        const { pods, objects } = file.current;
        outcomes.push({ path: file.path, pods, objects, current: true });
        continue;
      }
    } else {
      error = file.current.message;
    }
    const fallback = file.lastValid ?? { pods: [], objects: [] };
    const usable = findConflict(file.path, fallback, claims) === undefined;
    if (usable) claim(file.path, fallback, claims);
    const kept = usable && fallback.pods.length + fallback.objects.length > 0;
    outcomes.push({
      path: file.path,
      pods: usable ? fallback.pods : [],
      objects: usable ? fallback.objects : [],
      current: false,
      error: kept ? `${error}; its last valid version keeps running` : error,
    });
  }
  return outcomes;
}

function fullName(pod: Pod): string {
  return `${pod.metadata.namespace ?? ""}/${pod.metadata.name}`;
}

function findConflict(path: string, content: FileContent, claims: Claims): string | undefined {
  for (const pod of content.pods) {
    const name = fullName(pod);
    const byName = claims.names.get(name);
    if (byName !== undefined) {
      return `manifest ${path}: pod ${JSON.stringify(name)} is already defined in manifest ${byName}`;
    }
    const uid = pod.metadata.uid ?? "";
    const byUid = claims.uids.get(uid);
    if (byUid !== undefined) {
      return `manifest ${path}: pod ${JSON.stringify(name)}: metadata.uid ${JSON.stringify(uid)} is already used in manifest ${byUid}`;
    }
  }
  for (const o of content.objects) {
    const by = claims.objects.get(objectKey(o));
    if (by !== undefined)
      return `manifest ${path}: ${describeObject(o)} is already defined in manifest ${by}`;
  }
  return undefined;
}

function findImmutableChange(
  path: string,
  objects: readonly ConfigObject[],
  inEffect: ReadonlyMap<string, ConfigObject>,
): string | undefined {
  for (const o of objects) {
    const old = inEffect.get(objectKey(o));
    if (old === undefined) continue;
    const errors = validateImmutableUpdate(old, o);
    if (errors.length > 0)
      return `manifest ${path}: ${describeObject(o)}: ${errors.map(formatFieldError).join("; ")} (delete it first to replace it)`;
  }
  return undefined;
}

function claim(path: string, content: FileContent, claims: Claims): void {
  for (const pod of content.pods) {
    claims.names.set(fullName(pod), path);
    claims.uids.set(pod.metadata.uid ?? "", path);
  }
  for (const o of content.objects) claims.objects.set(objectKey(o), path);
}
