// Value checks of a pod's volumes, with the API server's rules and messages: one source per
// volume; configMap, secret, downwardAPI and projected items at relative paths that stay inside
// the volume, with modes in 0..0777. A projected serviceAccountToken (or trust bundle, or pod
// certificate) is refused: there is no API server on a device to issue one.

import {
  duplicate,
  type FieldError,
  type FieldPath,
  forbidden,
  invalid,
  required,
} from "./field-error.ts";
import { isDNS1123Label } from "./names.ts";
import { quantitySign, tryParseQuantity } from "./quantity.ts";
import type { DownwardAPIVolumeFile, KeyToPath, ProjectedVolumeSource, Volume } from "./types.ts";
import { VOLUME_FIELD_PATHS, validateFieldRef, validateResourceFieldRef } from "./validate-env.ts";

const FILE_MODE_MSG = "must be a number between 0 and 0777 (octal), both inclusive";
const SOURCES = [
  "emptyDir",
  "hostPath",
  "configMap",
  "secret",
  "downwardAPI",
  "projected",
] as const;
const NO_TOKEN = "is not supported: fleetlet has no API server to issue service account tokens";

/** A relative path with no ".." element (subPath, item paths). */
export function validateLocalDescendingPath(p: string, path: FieldPath): FieldError[] {
  if (p.startsWith("/")) return [invalid(path, p, "must be a relative path")];
  if (p.split("/").includes("..")) return [invalid(path, p, "must not contain '..'")];
  return [];
}

/** An item path: also never starting with "..", which the atomic writer keeps for itself. */
function validateItemPath(p: string, path: FieldPath): FieldError[] {
  const errs = validateLocalDescendingPath(p, path);
  if (p.startsWith("..")) errs.push(invalid(path, p, "must not start with '..'"));
  return errs;
}

function validateMode(mode: number | undefined, path: FieldPath): FieldError[] {
  if (mode === undefined || (mode >= 0 && mode <= 0o777)) return [];
  return [invalid(path, mode, FILE_MODE_MSG)];
}

function validateKeyToPath(kp: KeyToPath, path: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  if (kp.key === "") errs.push(required(path.child("key")));
  if (kp.path === "") errs.push(required(path.child("path")));
  errs.push(...validateItemPath(kp.path, path.child("path")));
  errs.push(...validateMode(kp.mode, path.child("mode")));
  return errs;
}

function validateItems(items: KeyToPath[] | undefined, path: FieldPath): FieldError[] {
  return (items ?? []).flatMap((kp, i) => validateKeyToPath(kp, path.index(i)));
}

function validateDownwardFile(f: DownwardAPIVolumeFile, path: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  if (f.path === "") errs.push(required(path.child("path")));
  errs.push(...validateItemPath(f.path, path.child("path")));
  if (f.fieldRef) {
    errs.push(...validateFieldRef(f.fieldRef, VOLUME_FIELD_PATHS, path.child("fieldRef")));
    if (f.resourceFieldRef) {
      const detail = "fieldRef and resourceFieldRef can not be specified simultaneously";
      errs.push(invalid(path, "resource", detail));
    }
  } else if (f.resourceFieldRef) {
    errs.push(
      ...validateResourceFieldRef(f.resourceFieldRef, path.child("resourceFieldRef"), true),
    );
  } else {
    errs.push(required(path, "one of fieldRef and resourceFieldRef is required"));
  }
  errs.push(...validateMode(f.mode, path.child("mode")));
  return errs;
}

function validateDownwardItems(
  items: DownwardAPIVolumeFile[] | undefined,
  path: FieldPath,
): FieldError[] {
  return (items ?? []).flatMap((f, i) => validateDownwardFile(f, path.index(i)));
}

function validateProjected(src: ProjectedVolumeSource, path: FieldPath): FieldError[] {
  const errs = validateMode(src.defaultMode, path.child("defaultMode"));
  const paths = new Set<string>();
  const claim = (p: string, label: string) => {
    if (p === "") return;
    if (paths.has(p)) errs.push(invalid(path, label, "conflicting duplicate paths"));
    paths.add(p);
  };
  (src.sources ?? []).forEach((s, i) => {
    const sp = path.child("sources").index(i);
    const kinds = Object.keys(s) as (keyof typeof s)[];
    if (kinds.length === 0)
      errs.push(required(sp, "must specify one of configMap, secret and downwardAPI"));
    if (kinds.length > 1)
      errs.push(forbidden(sp, "may not specify more than 1 volume type per source"));
    for (const kind of ["configMap", "secret"] as const) {
      const ref = s[kind];
      if (!ref) continue;
      if (!ref.name) errs.push(required(sp.child(kind).child("name")));
      errs.push(...validateItems(ref.items, sp.child(kind).child("items")));
      for (const kp of ref.items ?? []) claim(kp.path, ref.name ?? "");
    }
    if (s.downwardAPI) {
      const dp = sp.child("downwardAPI").child("items");
      errs.push(...validateDownwardItems(s.downwardAPI.items, dp));
      for (const f of s.downwardAPI.items ?? []) claim(f.path, f.path);
    }
    for (const kind of ["serviceAccountToken", "clusterTrustBundle", "podCertificate"] as const) {
      if (s[kind])
        errs.push(
          forbidden(sp.child(kind), NO_TOKEN.replace("service account tokens", kindLabel(kind))),
        );
    }
  });
  return errs;
}

function kindLabel(kind: "serviceAccountToken" | "clusterTrustBundle" | "podCertificate"): string {
  if (kind === "serviceAccountToken") return "service account tokens";
  if (kind === "clusterTrustBundle") return "cluster trust bundles";
  return "pod certificates";
}

function validateSource(v: Volume, p: FieldPath): FieldError[] {
  const errs: FieldError[] = [];
  if (v.hostPath && v.hostPath.path === "") errs.push(required(p.child("hostPath").child("path")));
  const size = v.emptyDir?.sizeLimit;
  if (size !== undefined) {
    const q = tryParseQuantity(size);
    const sp = p.child("emptyDir").child("sizeLimit");
    if (!q) errs.push(invalid(sp, size, "must be a valid quantity"));
    else if (quantitySign(q) < 0)
      errs.push(invalid(sp, size, "must be greater than or equal to 0"));
  }
  if (v.configMap) {
    const cp = p.child("configMap");
    if (!v.configMap.name) errs.push(required(cp.child("name")));
    errs.push(...validateMode(v.configMap.defaultMode, cp.child("defaultMode")));
    errs.push(...validateItems(v.configMap.items, cp.child("items")));
  }
  if (v.secret) {
    const sp = p.child("secret");
    if (!v.secret.secretName) errs.push(required(sp.child("secretName")));
    errs.push(...validateMode(v.secret.defaultMode, sp.child("defaultMode")));
    errs.push(...validateItems(v.secret.items, sp.child("items")));
  }
  if (v.downwardAPI) {
    const dp = p.child("downwardAPI");
    errs.push(...validateMode(v.downwardAPI.defaultMode, dp.child("defaultMode")));
    errs.push(...validateDownwardItems(v.downwardAPI.items, dp.child("items")));
  }
  if (v.projected) errs.push(...validateProjected(v.projected, p.child("projected")));
  return errs;
}

/** Checks each volume; appends errors to `errs` and returns the set of volume names. */
export function validateVolumes(
  volumes: Volume[],
  path: FieldPath,
  errs: FieldError[],
): Set<string> {
  const names = new Set<string>();
  volumes.forEach((v, i) => {
    const p = path.index(i);
    if (v.name === "") errs.push(required(p.child("name")));
    else errs.push(...isDNS1123Label(v.name).map((m) => invalid(p.child("name"), v.name, m)));
    if (names.has(v.name)) errs.push(duplicate(p.child("name"), v.name));
    names.add(v.name);
    const sources = SOURCES.filter((s) => v[s] !== undefined);
    if (sources.length === 0) {
      const detail = `must specify a volume type (${SOURCES.slice(0, -1).join(", ")} and projected are supported)`;
      errs.push(required(p, detail));
    }
    for (const s of sources.slice(1)) {
      errs.push(forbidden(p.child(s), "may not specify more than 1 volume type"));
    }
    errs.push(...validateSource(v, p));
  });
  return names;
}
