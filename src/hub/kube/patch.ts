// The patch types the API server takes (kubectl patch, label, apply): JSON merge patch
// (RFC 7386), JSON patch (RFC 6902), and strategic merge patch, whose lists of named things
// (containers, env, volumes, ports, ...) merge by their key instead of being replaced, with the
// directives kubectl's client-side apply sends ($patch, $setElementOrder, $retainKeys,
// $deleteFromPrimitiveList). Pure functions over JSON values; bad patches throw StatusError 400.
import { StatusError } from "../../api/status.ts";

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonObject = { [k: string]: Json };

const isObject = (v: unknown): v is JsonObject =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** The own field `k` of `o` (never an inherited one: "__proto__" is a field like another). */
const own = (o: JsonObject, k: string): Json | undefined =>
  Object.hasOwn(o, k) ? o[k] : undefined;

/** Sets the own field `k` of `o` (an assignment to "__proto__" would set its prototype). */
function setOwn(o: JsonObject, k: string, v: Json): void {
  Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
}

/** RFC 7386: objects merge key by key, null removes, anything else replaces. */
export function mergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return patch;
  const out: JsonObject = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else setOwn(out, k, mergePatch(own(out, k) ?? null, v));
  }
  return out;
}

/** The merge key of a list field, by the field's name (the Kubernetes types' patchMergeKey). */
const MERGE_KEYS: Record<string, string> = {
  containers: "name",
  initContainers: "name",
  ephemeralContainers: "name",
  env: "name",
  volumes: "name",
  volumeMounts: "mountPath",
  volumeDevices: "devicePath",
  ports: "containerPort",
  imagePullSecrets: "name",
  hostAliases: "ip",
  ownerReferences: "uid",
  conditions: "type",
  topologySpreadConstraints: "topologyKey",
  resourceClaims: "name",
};

const DIRECTIVE = "$patch";
const ORDER = "$setElementOrder/";
const DELETE_PRIMITIVE = "$deleteFromPrimitiveList/";

/** Strategic merge patch of `target` with `patch` (both objects). */
export function strategicMergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return patch;
  if (patch[DIRECTIVE] === "replace") {
    const { [DIRECTIVE]: _d, ...rest } = patch;
    return stripDirectives(rest);
  }
  if (patch[DIRECTIVE] === "delete") return null;
  const out: JsonObject = isObject(target) ? { ...target } : {};
  const retain = patch.$retainKeys;
  for (const [k, v] of Object.entries(patch)) {
    if (k === DIRECTIVE || k === "$retainKeys" || k.startsWith(ORDER)) continue;
    if (k.startsWith(DELETE_PRIMITIVE)) {
      const field = k.slice(DELETE_PRIMITIVE.length);
      const gone = new Set((Array.isArray(v) ? v : []).map((x) => JSON.stringify(x)));
      const cur = own(out, field);
      if (Array.isArray(cur))
        setOwn(
          out,
          field,
          cur.filter((x) => !gone.has(JSON.stringify(x))),
        );
      continue;
    }
    if (v === null) delete out[k];
    else if (Array.isArray(v)) setOwn(out, k, mergeList(k, own(out, k), v));
    else if (isObject(v)) {
      const merged = strategicMergePatch(own(out, k) ?? null, v);
      if (merged === null) delete out[k];
      else setOwn(out, k, merged);
    } else setOwn(out, k, v);
  }
  if (Array.isArray(retain)) {
    const keep = new Set(retain.map(String));
    for (const k of Object.keys(out)) if (!keep.has(k)) delete out[k];
  }
  for (const [k, v] of Object.entries(patch))
    if (k.startsWith(ORDER) && Array.isArray(v)) reorder(out, k.slice(ORDER.length), v);
  return out;
}

/** A list field: merged by its key when it has one, else replaced. */
function mergeList(field: string, current: Json | undefined, patch: Json[]): Json[] {
  const key = Object.hasOwn(MERGE_KEYS, field) ? MERGE_KEYS[field] : undefined;
  if (key === undefined || !patch.every(isObject)) return patch.map(stripDirectives);
  const out = Array.isArray(current) ? [...current] : [];
  for (const item of patch as JsonObject[]) {
    const id = item[key];
    const i = out.findIndex((x) => isObject(x) && x[key] === id);
    if (item[DIRECTIVE] === "delete") {
      if (i >= 0) out.splice(i, 1);
    } else if (i >= 0) out[i] = strategicMergePatch(out[i] ?? null, item);
    else out.push(stripDirectives(item));
  }
  return out;
}

/** Orders `obj[field]` as `order` lists its elements (by merge key, or by value). */
function reorder(obj: JsonObject, field: string, order: Json[]): void {
  const list = own(obj, field);
  if (!Array.isArray(list)) return;
  const key = Object.hasOwn(MERGE_KEYS, field) ? MERGE_KEYS[field] : undefined;
  const id = (x: Json) => JSON.stringify(key !== undefined && isObject(x) ? x[key] : x);
  const rank = new Map(order.map((o, i) => [id(o), i]));
  setOwn(
    obj,
    field,
    [...list].sort((a, b) => (rank.get(id(a)) ?? order.length) - (rank.get(id(b)) ?? order.length)),
  );
}

function stripDirectives(v: Json): Json {
  if (Array.isArray(v)) return v.map(stripDirectives);
  if (!isObject(v)) return v;
  const out: JsonObject = {};
  for (const [k, x] of Object.entries(v))
    if (!k.startsWith("$")) setOwn(out, k, stripDirectives(x));
  return out;
}

/** RFC 6902 JSON patch (add, remove, replace, test, move, copy). */
export function jsonPatch(target: Json, ops: unknown): Json {
  if (!Array.isArray(ops))
    throw new StatusError("BadRequest", "a JSON patch must be an array of operations");
  let doc: Json = structuredClone(target);
  for (const op of ops) {
    if (!isObject(op) || typeof op.op !== "string" || typeof op.path !== "string")
      throw new StatusError("BadRequest", `invalid JSON patch operation ${JSON.stringify(op)}`);
    const path = op.path;
    if (op.op === "test") {
      if (JSON.stringify(at(doc, path)) !== JSON.stringify(op.value))
        throw new StatusError("Invalid", `the test of ${path} failed`);
    } else if (op.op === "remove") doc = put(doc, path, undefined);
    else if (op.op === "add" || op.op === "replace") {
      if (op.op === "replace" && at(doc, path) === undefined)
        throw new StatusError("Invalid", `cannot replace ${path}: it does not exist`);
      doc = put(doc, path, op.value ?? null, op.op === "add");
    } else if ((op.op === "move" || op.op === "copy") && typeof op.from === "string") {
      const v = at(doc, op.from);
      if (v === undefined)
        throw new StatusError("Invalid", `cannot ${op.op} ${op.from}: it does not exist`);
      if (op.op === "move") doc = put(doc, op.from, undefined);
      doc = put(doc, path, structuredClone(v), true);
    } else
      throw new StatusError(
        "BadRequest",
        `unsupported JSON patch operation ${JSON.stringify(op.op)}`,
      );
  }
  return doc;
}

function segments(path: string): string[] {
  if (path === "") return [];
  if (!path.startsWith("/"))
    throw new StatusError("BadRequest", `invalid JSON pointer ${JSON.stringify(path)}`);
  return path
    .slice(1)
    .split("/")
    .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
}

function at(doc: Json, path: string): Json | undefined {
  let cur: Json | undefined = doc;
  for (const s of segments(path)) {
    if (Array.isArray(cur)) cur = cur[Number(s)];
    else if (isObject(cur)) cur = own(cur, s);
    else return undefined;
  }
  return cur;
}

/** `doc` with the value at `path` set (`insert`: into a list, before the index) or removed. */
function put(doc: Json, path: string, value: Json | undefined, insert = false): Json {
  const segs = segments(path);
  if (segs.length === 0) return value ?? null;
  const root = structuredClone(doc);
  let parent: Json = root;
  for (const s of segs.slice(0, -1)) {
    const next: Json | undefined = Array.isArray(parent)
      ? parent[Number(s)]
      : isObject(parent)
        ? own(parent, s)
        : undefined;
    if (next === undefined) throw new StatusError("Invalid", `the path ${path} does not exist`);
    parent = next;
  }
  const last = segs.at(-1) ?? "";
  if (Array.isArray(parent)) {
    const i = last === "-" ? parent.length : Number(last);
    // An index is a decimal within the list (one past its end to add): "x", "-1", "1e3" or an
    // index past the end would otherwise splice somewhere else or stretch the list.
    const max = insert ? parent.length : parent.length - 1;
    if (!/^(0|[1-9][0-9]*|-)$/.test(last) || i > max)
      throw new StatusError("Invalid", `the path ${path} does not exist`);
    if (value === undefined) parent.splice(i, 1);
    else if (insert) parent.splice(i, 0, value);
    else parent[i] = value;
  } else if (isObject(parent)) {
    if (value === undefined) delete parent[last];
    else setOwn(parent, last, value);
  } else throw new StatusError("Invalid", `the path ${path} does not exist`);
  return root;
}

/** The fields of `input` that decoding dropped (unknown to the hub), as "spec.template.x" paths;
 * `metadata` and `status` are not looked into (the hub keeps what it needs of them). */
export function unknownFields(input: unknown, decoded: unknown, skip: string[] = []): string[] {
  const out: string[] = [];
  const walk = (a: unknown, b: unknown, path: string) => {
    if (Array.isArray(a)) {
      if (!Array.isArray(b)) return;
      for (const [i, x] of a.entries()) walk(x, b[i], `${path}[${i}]`);
      return;
    }
    if (!isObject(a) || !isObject(b)) return;
    for (const [k, v] of Object.entries(a)) {
      const p = path === "" ? k : `${path}.${k}`;
      if (path === "" && ["metadata", "status", "apiVersion", "kind", ...skip].includes(k))
        continue;
      if (!(k in b)) {
        if (v !== null) out.push(p);
      } else walk(v, b[k], p);
    }
  };
  walk(input, decoded, "");
  return out;
}
