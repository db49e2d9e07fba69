// Extended resources (devices from plugins and host device groups): names and the quantities a
// container may ask for, as the API server checks them.
import { isQualifiedName } from "./names.ts";
import { milliValue, type Quantity } from "./quantity.ts";

const NATIVE_DOMAIN = "kubernetes.io/";

/** Whether `name` is an extended resource name: domain-prefixed ("vendor.example/gpu"), not in
 * the kubernetes.io domain, not a quota name ("requests.…"), and a valid qualified name. */
export function isExtendedResourceName(name: string): boolean {
  const slash = name.indexOf("/");
  if (slash <= 0) return false;
  const domain = name.slice(0, slash + 1);
  if (domain === NATIVE_DOMAIN || domain.endsWith(`.${NATIVE_DOMAIN}`)) return false;
  if (name.startsWith("requests.")) return false;
  return isQualifiedName(`requests.${name}`).length === 0;
}

/** The API server's rules for one extended resource of a container: a whole number, and a
 * request (when given) equal to the limit, which must be given (devices are never overcommitted).
 * Returns problems as [where, value, message] for the caller's field errors. */
export function extendedResourceProblems(
  name: string,
  limit: Quantity | undefined,
  request: Quantity | undefined,
): { on: "limits" | "requests"; value: string; message: string }[] {
  const problems: { on: "limits" | "requests"; value: string; message: string }[] = [];
  for (const [on, q] of [
    ["limits", limit],
    ["requests", request],
  ] as const) {
    if (q !== undefined && milliValue(q) % 1000n !== 0n)
      problems.push({ on, value: q.text, message: "must be an integer" });
  }
  if (request !== undefined && limit === undefined)
    problems.push({
      on: "limits",
      value: "",
      message: "Limit must be set for non overcommitable resources",
    });
  else if (
    request !== undefined &&
    limit !== undefined &&
    milliValue(request) !== milliValue(limit)
  )
    problems.push({
      on: "requests",
      value: request.text,
      message: `must be equal to ${name} limit of ${limit.text}`,
    });
  return problems;
}
