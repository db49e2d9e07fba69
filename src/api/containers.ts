// Which container of a pod a log, exec or attach request is about, by the API server's rules
// and with its messages.
import { StatusError } from "./status.ts";
import type { Container, Pod } from "./types.ts";

const DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container";
const badRequest = (message: string) => new StatusError("BadRequest", message);

/**
 * The container a log or exec request is about: the one named, else the pod's default-container
 * annotation, else its only container; otherwise a 400 with the API server's message.
 */
export function resolveContainer(pod: Pod, requested: string | null | undefined): Container {
  const app = pod.spec.containers;
  const init = pod.spec.initContainers ?? [];
  const name = pod.metadata.name;
  let wanted = requested || pod.metadata.annotations?.[DEFAULT_CONTAINER_ANNOTATION];
  if (!wanted && app.length === 1) wanted = app[0]?.name;
  if (!wanted) {
    const names = (cs: Container[]) => `[${cs.map((c) => c.name).join(" ")}]`;
    const initPart = init.length > 0 ? ` or one of the init containers: ${names(init)}` : "";
    throw badRequest(
      `a container name must be specified for pod ${name}, choose one of: ${names(app)}${initPart}`,
    );
  }
  const found = [...app, ...init].find((c) => c.name === wanted);
  if (found === undefined) throw badRequest(`container ${wanted} is not valid for pod ${name}`);
  return found;
}

/** An init container with restartPolicy Always: a sidecar that runs beside the app. */
export function isSidecar(c: Container | undefined): boolean {
  return c?.restartPolicy === "Always";
}
