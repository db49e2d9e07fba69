// YAML documents as fleetlet reads every manifest and object file (the agent's manifest folder,
// `fleetlet apply`): YAML 1.2 with 0644-style octal integers as Kubernetes reads them, at most
// 100 aliases expanded, and a document whose alias refers to a node that holds it refused.
import { parseAllDocuments, type ScalarTag } from "yaml";

/** An integer written with a leading zero ("0644") is octal, as in the YAML 1.1 that Kubernetes
 * reads manifests with: file modes are written so. ("0o644" is octal in YAML 1.2 too.) */
const octalInt: ScalarTag = {
  tag: "tag:yaml.org,2002:int",
  format: "OCT",
  default: true,
  test: /^[-+]?0[0-7]+$/,
  resolve: (text: string) => {
    const value = Number.parseInt(text.replace(/^[-+]/, ""), 8);
    return text.startsWith("-") ? -value : value;
  },
};

/** The documents of a manifest file, each its value or why it is not valid YAML. */
export function yamlDocuments(text: string): ({ value: unknown } | { error: string })[] {
  return parseAllDocuments(text, { customTags: (tags) => [octalInt, ...tags] }).map((doc) => {
    const firstError = doc.errors[0];
    if (firstError !== undefined) return { error: yamlMessage(firstError) };
    try {
      const value: unknown = doc.toJS({ maxAliasCount: 100 });
      if (holdsItself(value, new Set()))
        return { error: "an alias refers to a node that holds it (a cycle)" };
      return { value };
    } catch (err) {
      return { error: (err as Error).message };
    }
  });
}

/** Whether `v` holds itself, which an alias inside its own anchor's node makes (`a: &a [*a]`);
 * `open` holds the objects on the path from the root. An alias of a finished node is shared,
 * not a cycle. */
function holdsItself(v: unknown, open: Set<object>): boolean {
  if (v === null || typeof v !== "object") return false;
  if (open.has(v)) return true;
  open.add(v);
  const found = Object.values(v).some((x) => holdsItself(x, open));
  open.delete(v);
  return found;
}

/** The first line of a YAML error, without the colon before its excerpt. */
function yamlMessage(err: Error): string {
  return (err.message.split("\n")[0] ?? "").replace(/:$/, "");
}
