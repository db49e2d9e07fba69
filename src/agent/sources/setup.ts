// The agent's pod sources from its config: the object store of ConfigMaps and Secrets, the pod
// config merging the sources (the manifest folder, and the hub's when a hub is configured), and
// the manifest folder's file source. What a source refuses is logged and recorded as an event.
import { join } from "node:path";
import type { Pod } from "../../api/types.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { type EventRecorder, manifestRef } from "../events/index.ts";
import { createFileSource, type FileSource } from "./file-source.ts";
import { createLastValidStore } from "./last-valid.ts";
import { createObjectStore, type ObjectStore } from "./object-store.ts";
import { createPodConfig, type PodConfig, type PodSourceName } from "./pod-config.ts";

interface SourceSettings {
  nodeName: string;
  staticPodPath: string;
  fileCheckFrequency: number;
  /** <rootDir>/state/manifests keeps each manifest's last valid version. */
  rootDir: string;
  /** The hub, when one is configured (then the hub's "api" source too). */
  hub?: unknown;
}

export interface AgentSourcesInput {
  config: SourceSettings;
  clock: Clock;
  logger: Logger;
  recorder: Pick<EventRecorder, "event">;
}

/** The sources, highest priority first: the manifest folder's pods win a name from the hub's. */
const sourcesOf = (s: SourceSettings): PodSourceName[] =>
  s.hub === undefined ? ["file"] : ["file", "api"];

/** The ConfigMaps and Secrets of the sources, and the volumes made of them. */
export function setupObjectStore(input: AgentSourcesInput): ObjectStore {
  const { logger: log, recorder } = input;
  return createObjectStore({
    sources: sourcesOf(input.config),
    onError: (c) => {
      log.warn("object refused", { source: c.source, reason: c.message });
      const { kind, namespace, name } = c;
      recorder.event({ kind, namespace, name }, "Warning", "Refused", c.message);
    },
  });
}

/** The pod config; `apiConflictsChanged` is told when the hub pods it refuses change. */
export function setupPodConfig(
  input: AgentSourcesInput,
  apiConflictsChanged: () => void,
): PodConfig {
  const { logger: log, recorder } = input;
  return createPodConfig({
    sources: sourcesOf(input.config),
    clock: input.clock,
    onError: (c) => {
      log.warn("pod refused", { pod: c.pod, source: c.source, reason: c.message });
      const [namespace = "default", name = c.pod] = c.pod.split("/");
      recorder.event({ kind: "Pod", namespace, name }, "Warning", "Refused", c.message);
    },
    onConflictsChanged: (source) => {
      if (source === "api") apiConflictsChanged();
    },
  });
}

/** The manifest folder, feeding the pod config and the object store. */
export function setupFileSource(
  input: AgentSourcesInput,
  podConfig: PodConfig,
  objects: ObjectStore,
): FileSource {
  const { config: settings, logger: log, recorder } = input;
  const manifestsLog = log.with({ component: "manifests" });
  return createFileSource({
    path: settings.staticPodPath,
    nodeName: settings.nodeName,
    checkFrequencyMs: settings.fileCheckFrequency,
    clock: input.clock,
    log: manifestsLog,
    lastValid: createLastValidStore(join(settings.rootDir, "state", "manifests"), manifestsLog),
    onSnapshot: (pods: Pod[]) => podConfig.set("file", pods),
    onObjects: (list) => objects.set("file", list),
    // The file source logs the warning itself.
    onError: (p) => recorder.event(manifestRef(p.path), "Warning", "InvalidManifest", p.message),
  });
}
