// Reading the objects of `fleetlet apply -f` and `delete -f`: a file, or every .yaml, .yml and
// .json file of a folder (not its subfolders, as kubectl without -R), in name order; each file
// may hold several YAML documents and `kind: List`. Each object is validated with the API's
// rules for its kind, so that nothing is sent when anything is invalid. The object sent is the
// document as written (the hub validates and decodes it again).
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { validateDaemonSet } from "../api/daemonset.ts";
import { DEFAULT_NAMESPACE, type FieldError, formatInvalidObject } from "../api/index.ts";
import { validateConfigMap, validateSecret } from "../api/validate-objects.ts";
import { yamlDocuments } from "../api/yaml.ts";
import { CliError } from "./errors.ts";

/** One object of the files, validated. */
export interface ApplyObject {
  kind: "DaemonSet" | "ConfigMap" | "Secret";
  /** kubectl's resource name: "daemonset.apps". */
  resource: string;
  /** The API path of the object. */
  path: string;
  namespace: string;
  name: string;
  object: Record<string, unknown>;
  /** The file it came from. */
  file: string;
}

const KINDS: Record<string, { resource: string; plural: string; group: string }> = {
  ConfigMap: { resource: "configmap", plural: "configmaps", group: "/api/v1" },
  Secret: { resource: "secret", plural: "secrets", group: "/api/v1" },
  DaemonSet: { resource: "daemonset.apps", plural: "daemonsets", group: "/apis/apps/v1" },
};

const validators: Record<
  string,
  (o: unknown) => { ok: true } | { ok: false; errors: FieldError[] }
> = {
  ConfigMap: validateConfigMap,
  Secret: validateSecret,
  DaemonSet: validateDaemonSet,
};

/** Applied in this order (the objects pods use before the DaemonSets), deleted in reverse. */
const ORDER = ["ConfigMap", "Secret", "DaemonSet"];

function filesOf(target: string): string[] {
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(target);
  } catch {
    throw new CliError(`the path "${target}" does not exist`);
  }
  if (!st.isDirectory()) return [target];
  return readdirSync(target)
    .filter((n) => /\.(ya?ml|json)$/.test(n) && !n.startsWith("."))
    .sort()
    .map((n) => join(target, n));
}

function documents(file: string): unknown[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${(err as Error).message}`);
  }
  const out: unknown[] = [];
  for (const doc of yamlDocuments(text)) {
    if ("error" in doc) throw new CliError(`error parsing ${file}: ${doc.error}`);
    const value = doc.value;
    if (value === null || value === undefined) continue;
    const list = value as { kind?: unknown; items?: unknown };
    if (list.kind === "List" && Array.isArray(list.items)) out.push(...list.items);
    else out.push(value);
  }
  return out;
}

/**
 * Every object of the files, validated; throws a CliError listing every problem (with the
 * file) when any object is invalid or of a kind the hub does not take.
 */
export function readObjects(
  targets: string[],
  namespace: string | undefined,
  verb: "applied" | "deleted",
): ApplyObject[] {
  if (targets.length === 0) throw new CliError("must specify -f FILE or DIR");
  const out: ApplyObject[] = [];
  const problems: string[] = [];
  for (const file of targets.flatMap(filesOf)) {
    for (const value of documents(file)) {
      const obj = value as { kind?: unknown; metadata?: { name?: unknown; namespace?: unknown } };
      const kind = typeof obj?.kind === "string" ? obj.kind : "";
      const known = KINDS[kind];
      const validate = validators[kind];
      if (known === undefined || validate === undefined) {
        const hint =
          kind === "Pod"
            ? " (write a Pod into a device's manifest folder, or wrap it in a DaemonSet)"
            : "";
        problems.push(
          `${file}: the hub takes ${Object.keys(KINDS).join(", ")}; not ${JSON.stringify(kind)}${hint}`,
        );
        continue;
      }
      const name = typeof obj.metadata?.name === "string" ? obj.metadata.name : "";
      const inFile =
        typeof obj.metadata?.namespace === "string" ? obj.metadata.namespace : undefined;
      if (namespace !== undefined && inFile !== undefined && inFile !== namespace) {
        problems.push(
          `${file}: the namespace from the provided object "${inFile}" does not match the namespace "${namespace}"`,
        );
        continue;
      }
      const ns = inFile ?? namespace ?? DEFAULT_NAMESPACE;
      const r = validate(value);
      if (!r.ok) {
        problems.push(`${file}: ${formatInvalidObject(kind, name, r.errors)}`);
        continue;
      }
      out.push({
        kind: kind as ApplyObject["kind"],
        resource: known.resource,
        path: `${known.group}/namespaces/${encodeURIComponent(ns)}/${known.plural}/${encodeURIComponent(name)}`,
        namespace: ns,
        name,
        object: {
          ...(value as Record<string, unknown>),
          metadata: { ...obj.metadata, namespace: ns },
        },
        file,
      });
    }
  }
  if (problems.length > 0) throw new CliError(`nothing was ${verb}:\n${problems.join("\n")}`);
  const rank = (o: ApplyObject) => ORDER.indexOf(o.kind) * (verb === "applied" ? 1 : -1);
  return out
    .map((o, i) => ({ o, i }))
    .sort((a, b) => rank(a.o) - rank(b.o) || a.i - b.i)
    .map((x) => x.o);
}
