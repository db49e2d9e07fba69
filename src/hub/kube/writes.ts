// Writes at Kubernetes' paths, as kubectl sends them: create (POST), replace (PUT), patch (server-
// side apply, merge, strategic merge and JSON patches), delete; `dryRun=All` checks without
// storing, `fieldValidation=Strict` refuses fields the hub does not know (Warn answers a
// Warning header). Every object is validated as the API server does before anything is stored:
// a refusal is a 422 with one cause per field.
import YAML from "yaml";
import { type FieldError, invalidObjectError } from "../../api/field-error.ts";
import { json, StatusError } from "../../api/status.ts";
import { readBody } from "../http.ts";
import { jsonPatch, mergePatch, strategicMergePatch, unknownFields } from "./patch.ts";
import { type KubeObject, type KubeResource, qualifiedName } from "./resources.ts";

type ApplyResult = "created" | "configured" | "unchanged";

/** How one writable resource decodes, stores and deletes its objects. */
export interface Writer {
  decode(body: unknown): { ok: true; object: KubeObject } | { ok: false; errors: FieldError[] };
  /** Stores `object` before it resolves. */
  apply(object: KubeObject): Promise<{ object: KubeObject; result: ApplyResult }>;
  /** Removes the object from the store before it resolves. */
  delete(namespace: string, name: string): Promise<KubeObject>;
  /** Top-level fields decoding turns into others (a Secret's stringData). */
  consumed?: string[];
}

/** The header saying what a write did: created, configured or unchanged. */
const APPLY_RESULT_HEADER = "fleetlet-apply";

/** The largest object body the hub takes (a ConfigMap may hold up to 1 MiB of data). */
const MAX_OBJECT_BYTES = 3 * 1024 * 1024;

type Json = Parameters<typeof mergePatch>[0];

/** The deepest nesting a body may have: objects are a few levels deep, and the checks that walk
 * them recurse. */
const MAX_BODY_DEPTH = 64;

/** How deep `v` nests, counted up to one past the limit. */
function depthOf(v: unknown): number {
  let depth = 0;
  let level: unknown[] = [v];
  while (level.length > 0 && depth <= MAX_BODY_DEPTH) {
    depth++;
    level = level.flatMap((x) => (typeof x === "object" && x !== null ? Object.values(x) : []));
  }
  return level.length > 0 ? depth + 1 : depth;
}

function parseBody(text: string, contentType: string): unknown {
  const body = parseText(text, contentType);
  if (depthOf(body) > MAX_BODY_DEPTH)
    throw new StatusError(
      "BadRequest",
      `the request body is nested deeper than ${MAX_BODY_DEPTH} levels`,
    );
  return body;
}

function parseText(text: string, contentType: string): unknown {
  try {
    // YAML's aliases can make a cycle ("a: &a [*a]"): only what JSON can carry is an object.
    return contentType.includes("yaml")
      ? JSON.parse(JSON.stringify(YAML.parse(text)))
      : JSON.parse(text);
  } catch (err) {
    throw new StatusError(
      "BadRequest",
      `the request body is not ${contentType.includes("yaml") ? "YAML" : "JSON"}: ${(err as Error).message}`,
    );
  }
}

/** The object named by the URL and the body (they must agree). */
function named(
  r: KubeResource,
  body: unknown,
  namespace: string | undefined,
  name?: string,
): KubeObject {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw new StatusError("BadRequest", `the body must be a ${r.kind} object`);
  const o = body as KubeObject;
  const meta = o.metadata ?? {};
  if (name !== undefined && meta.name !== undefined && meta.name !== name)
    throw new StatusError(
      "BadRequest",
      `the name of the object (${meta.name}) does not match the name on the URL (${name})`,
    );
  if (namespace !== undefined && meta.namespace !== undefined && meta.namespace !== namespace)
    throw new StatusError(
      "BadRequest",
      `the namespace of the object (${meta.namespace}) does not match the namespace on the URL (${namespace})`,
    );
  const finalName = name ?? meta.name;
  if (finalName === undefined || finalName === "")
    throw invalidObjectError(
      r.kind,
      "",
      [{ type: "Required", field: "metadata.name", detail: "name or generateName is required" }],
      r.group,
    );
  return {
    ...o,
    metadata: { ...meta, name: finalName, ...(namespace !== undefined && { namespace }) },
  };
}

/** Decodes `o` as `r`, checking its fields as the request's fieldValidation asks. */
function decode(
  w: Writer,
  r: KubeResource,
  o: KubeObject,
  q: URLSearchParams,
  warnings: string[],
): KubeObject {
  const d = w.decode(o);
  if (!d.ok) throw invalidObjectError(r.kind, o.metadata.name, d.errors, r.group);
  const mode = q.get("fieldValidation") ?? "Warn";
  if (mode === "Ignore") return d.object;
  const unknown = unknownFields(o, d.object, w.consumed);
  if (unknown.length > 0 && mode === "Strict")
    throw new StatusError(
      "BadRequest",
      `${r.kind} in version "v1" cannot be handled as a ${r.kind}: strict decoding error: ${unknown.map((f) => `unknown field "${f}"`).join(", ")}`,
    );
  for (const f of unknown) warnings.push(`unknown field "${f}"`);
  return d.object;
}

function answer(
  object: KubeObject,
  result: ApplyResult,
  warnings: string[],
  created = result === "created",
): Response {
  const res = json(object, created ? 201 : 200);
  res.headers.set(APPLY_RESULT_HEADER, result);
  for (const w of warnings) res.headers.append("warning", `299 - ${JSON.stringify(w)}`);
  return res;
}

/** The object with its new content applied, or with dryRun=All what it would be: the new
 * content with the stored object's identity and status. */
async function store(
  w: Writer,
  object: KubeObject,
  q: URLSearchParams,
  current: KubeObject | undefined,
): Promise<{ object: KubeObject; result: ApplyResult }> {
  if (q.get("dryRun") !== "All") return w.apply(object);
  if (current === undefined) return { object, result: "created" as ApplyResult };
  const { uid, creationTimestamp, resourceVersion, generation } = current.metadata;
  const would = {
    ...object,
    metadata: { ...object.metadata, uid, creationTimestamp, resourceVersion, generation },
    ...("status" in current && { status: (current as { status?: unknown }).status }),
  } as KubeObject;
  return { object: would, result: "configured" as ApplyResult };
}

/** The patched object for a PATCH of content type `type`. */
function patched(
  r: KubeResource,
  type: string,
  current: KubeObject | undefined,
  body: unknown,
  name: string,
): unknown {
  if (type.startsWith("application/apply-patch")) return body;
  if (current === undefined)
    throw new StatusError("NotFound", `${qualifiedName(r)} "${name}" not found`, {
      name,
      kind: r.name,
      ...(r.group !== "" && { group: r.group }),
    });
  const base = current as unknown as Json;
  if (type.startsWith("application/merge-patch+json")) return mergePatch(base, body as Json);
  if (type.startsWith("application/strategic-merge-patch+json"))
    return strategicMergePatch(base, body as Json);
  if (type.startsWith("application/json-patch+json")) return jsonPatch(base, body);
  throw new StatusError(
    "UnsupportedMediaType",
    `the patch type ${JSON.stringify(type)} is not supported`,
  );
}

/** POST, PUT, PATCH or DELETE of a writable resource. */
export async function writeResponse(
  w: Writer,
  r: KubeResource,
  req: Request,
  q: URLSearchParams,
  namespace: string | undefined,
  name: string | undefined,
): Promise<Response> {
  const warnings: string[] = [];
  const contentType = req.headers.get("content-type") ?? "application/json";
  const ns = r.namespaced ? (namespace ?? "default") : undefined;
  if (req.method === "DELETE" && name !== undefined) {
    if (r.get(ns ?? "", name) === undefined)
      throw new StatusError("NotFound", `${qualifiedName(r)} "${name}" not found`, {
        name,
        kind: r.name,
        ...(r.group !== "" && { group: r.group }),
      });
    return json(q.get("dryRun") === "All" ? r.get(ns ?? "", name) : await w.delete(ns ?? "", name));
  }
  const body = parseBody(await readBody(req, MAX_OBJECT_BYTES), contentType);
  if (req.method === "POST" && name === undefined) {
    const o = named(r, body, ns);
    if (r.get(ns ?? "", o.metadata.name) !== undefined)
      throw new StatusError(
        "AlreadyExists",
        `${qualifiedName(r)} "${o.metadata.name}" already exists`,
        { name: o.metadata.name, kind: r.name, ...(r.group !== "" && { group: r.group }) },
      );
    const a = await store(w, decode(w, r, o, q, warnings), q, undefined);
    return answer(a.object, a.result, warnings, true);
  }
  if (name === undefined)
    throw new StatusError(
      "MethodNotAllowed",
      `${req.method} is not allowed on a list of ${r.name}`,
    );
  const current = r.get(ns ?? "", name);
  if (req.method === "PUT") {
    const a = await store(w, decode(w, r, named(r, body, ns, name), q, warnings), q, current);
    return answer(a.object, a.result, warnings);
  }
  if (req.method === "PATCH") {
    const o = named(r, patched(r, contentType, current, body, name), ns, name);
    const a = await store(w, decode(w, r, o, q, warnings), q, current);
    return answer(a.object, a.result, warnings);
  }
  throw new StatusError("MethodNotAllowed", `${req.method} is not allowed on ${qualifiedName(r)}`);
}
