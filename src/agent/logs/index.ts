// Container logs in the CRI format, laid out as kubelet does:
//   <podLogsDir>/<namespace>_<name>_<uid>/<container>/<restartCount>.log
// with the rotated files beside each (rotated.ts). Reading them for `fleetlet logs` is read.ts.
import { join } from "node:path";
import type { Pod } from "../../api/types.ts";

export { parseCriLine } from "./cri-format.ts";
export { LogNotFoundError } from "./files.ts";
export { logExists, readLog } from "./read.ts";
export { removeContainerLogs, rotatedFiles, rotatedPath, rotationStamp } from "./rotated.ts";

/** The directory of one pod's logs. */
function podLogDir(podLogsDir: string, namespace: string, name: string, uid: string): string {
  return join(podLogsDir, `${namespace}_${name}_${uid}`);
}

/**
 * The log file of a container of `pod` by kubelet's layout: the current run's file, or with
 * `previous` the run before it (restartCount - 1). Undefined when the pod has no uid, the
 * container has no status yet, or there is no previous run.
 */
export function containerLogPath(
  podLogsDir: string,
  pod: Pod,
  container: string,
  previous: boolean,
): string | undefined {
  const uid = pod.metadata.uid;
  if (uid === undefined) return undefined;
  const statuses = [
    ...(pod.status?.initContainerStatuses ?? []),
    ...(pod.status?.containerStatuses ?? []),
  ];
  const status = statuses.find((s) => s.name === container);
  if (status === undefined) return undefined;
  const run = previous ? status.restartCount - 1 : status.restartCount;
  if (run < 0) return undefined;
  const dir = podLogDir(podLogsDir, pod.metadata.namespace ?? "default", pod.metadata.name, uid);
  return join(dir, container, `${run}.log`);
}
