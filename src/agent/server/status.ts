// The local API's refusals: the shared Kubernetes Status helpers, and the two it uses most.
import { StatusError } from "../../api/status.ts";

export { json, StatusError } from "../../api/status.ts";

export const badRequest = (message: string) => new StatusError("BadRequest", message);

export const podNotFound = (name: string) =>
  new StatusError("NotFound", `pods "${name}" not found`, { name, kind: "pods" });
