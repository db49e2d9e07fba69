// The "api" pod source: the hub's desired state for this node (docs/protocol.md, "Desired
// state"). A state is used whole or not at all: every pod, ConfigMap and Secret is validated as
// a manifest's are, then the state is written atomically to <rootDir>/hub/desired.json (0600),
// then its objects go to the object store and its pods to PodConfig (objects first, so a pod
// finds what it reads). At start the saved state is read back, so a device rebooted without
// network runs exactly the hub pods, ConfigMaps and Secrets it last acknowledged.
//
// A valid state that cannot be saved (a full disk) is applied all the same, and its save retried
// every `retrySaveMs` until it succeeds or a later state replaces it: a local write failure is no
// reason to refuse the hub (which would stop its rollout). Until the save succeeds, a restart
// brings back the state saved before, until the hub sends this one again.
//
// Invariants: `generation` is that of the state last applied (saved, or being saved again); a
// refused state changes nothing (not the file, not the pods); an unreadable saved state applies
// nothing, so that the source stays unseen and no running hub pod is taken for an orphan until
// the hub sends one.
import { readFileSync } from "node:fs";
import {
  applyPodDefaults,
  DEFAULT_NAMESPACE,
  formatFieldError,
  type Pod,
  validatePod,
} from "../../api/index.ts";
import { type ConfigObject, objectKey } from "../../api/pod-objects.ts";
import { validateConfigMap, validateSecret } from "../../api/validate-objects.ts";
import { writeFileAtomic } from "../../util/atomic-file.ts";
import { type Clock, realClock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { ignoreStateWrites, reportedWrite, type StateWrites } from "../events/state-writes.ts";
import { CONFIG_HASH_ANNOTATION, CONFIG_SOURCE_ANNOTATION } from "./parse.ts";

/** A desired state as the hub sends it; the objects are not decoded yet. */
export interface DesiredInput {
  generation: number;
  pods: unknown[];
  configMaps?: unknown[];
  secrets?: unknown[];
}

/** A decoded desired state: the pods as validated (no defaults) and the objects, as saved. */
export interface DesiredState {
  generation: number;
  pods: Pod[];
  configMaps: ConfigObject[];
  secrets: ConfigObject[];
}

export interface HubPodSourceDeps {
  nodeName: string;
  /** <rootDir>/hub/desired.json */
  path: string;
  log: Logger;
  /** Hands the complete set of hub pods to PodConfig (source "api"). */
  apply(pods: Pod[]): void;
  /** Hands the complete set of the hub's ConfigMaps and Secrets to the object store. */
  applyObjects(objects: ConfigObject[]): void;
  /** Runs the retries of a save that failed (default: the real clock). */
  clock?: Clock;
  /** How long after a failed save it is tried again (ms; default 5000). */
  retrySaveMs?: number;
  /** Where each save of the file is said (FailedToWriteState, then StateWritten). */
  stateWrites?: StateWrites;
}

export interface HubPodSource {
  /** The generation saved and applied (0: none). */
  readonly generation: number;
  /** Reads the saved state and applies it; false (nothing applied) when it cannot be read. */
  load(): boolean;
  /** Validates, saves, then applies `input`; an invalid state changes nothing, a state that
   * cannot be saved is applied and its save retried. */
  accept(input: DesiredInput): { ok: true } | { ok: false; reason: string };
  /** Why the state applied is not saved yet, or undefined when it is. */
  readonly unsaved: string | undefined;
}

/** Why a hub pod cannot be used on `nodeName`, or the pod as the hub sent it, validated. */
function decodeHubPod(
  obj: unknown,
  index: number,
  nodeName: string,
): { ok: true; pod: Pod } | { ok: false; reason: string } {
  const raw = (obj as { metadata?: { name?: unknown } } | null)?.metadata?.name;
  const label = `pods[${index}]${typeof raw === "string" ? ` (${JSON.stringify(raw)})` : ""}`;
  const r = validatePod(obj);
  if (!r.ok) return { ok: false, reason: `${label}: ${r.errors.map(formatFieldError).join("; ")}` };
  const pod = r.pod;
  if (pod.metadata.uid === undefined || pod.metadata.uid === "")
    return { ok: false, reason: `${label}: metadata.uid: Required value` };
  const bound = pod.spec.nodeName;
  if (bound !== undefined && bound !== "" && bound !== nodeName)
    return {
      ok: false,
      reason: `${label}: spec.nodeName: Invalid value: ${JSON.stringify(bound)}: this device is node "${nodeName}"`,
    };
  return { ok: true, pod };
}

/** The validated objects of one list of a desired state, or why one of them is refused. */
function decodeObjects(
  list: unknown[] | undefined,
  field: "configMaps" | "secrets",
  seen: Set<string>,
): { ok: true; objects: ConfigObject[] } | { ok: false; reason: string } {
  const objects: ConfigObject[] = [];
  for (const [i, obj] of (list ?? []).entries()) {
    const r = field === "configMaps" ? validateConfigMap(obj) : validateSecret(obj);
    const raw = (obj as { metadata?: { name?: unknown } } | null)?.metadata?.name;
    const label = `${field}[${i}]${typeof raw === "string" ? ` (${JSON.stringify(raw)})` : ""}`;
    if (!r.ok)
      return { ok: false, reason: `${label}: ${r.errors.map(formatFieldError).join("; ")}` };
    const key = objectKey(r.object);
    if (seen.has(key)) return { ok: false, reason: `${label}: Duplicate value: ${key}` };
    seen.add(key);
    objects.push(r.object);
  }
  return { ok: true, objects };
}

/** Decodes a whole desired state; the first problem found refuses all of it. */
export function decodeDesired(
  input: DesiredInput,
  nodeName: string,
): { ok: true; state: DesiredState } | { ok: false; reason: string } {
  const keys = new Set<string>();
  const configMaps = decodeObjects(input.configMaps, "configMaps", keys);
  if (!configMaps.ok) return configMaps;
  const secrets = decodeObjects(input.secrets, "secrets", keys);
  if (!secrets.ok) return secrets;
  const pods: Pod[] = [];
  const seen = new Set<string>();
  for (const [i, obj] of input.pods.entries()) {
    const d = decodeHubPod(obj, i, nodeName);
    if (!d.ok) return d;
    const key = `${d.pod.metadata.namespace || DEFAULT_NAMESPACE}/${d.pod.metadata.name}`;
    for (const k of [key, `uid ${d.pod.metadata.uid}`]) {
      if (seen.has(k)) return { ok: false, reason: `pods[${i}]: Duplicate value: ${k}` };
      seen.add(k);
    }
    pods.push(d.pod);
  }
  return {
    ok: true,
    state: {
      generation: input.generation,
      pods,
      configMaps: configMaps.objects,
      secrets: secrets.objects,
    },
  };
}

/** The pod the agent runs for a decoded hub pod: defaults, its node, source "api". */
function makeHubPod(decoded: Pod, nodeName: string): Pod {
  const pod = applyPodDefaults(decoded);
  const uid = decoded.metadata.uid ?? "";
  const metadata = {
    ...pod.metadata,
    namespace: decoded.metadata.namespace || DEFAULT_NAMESPACE,
    annotations: {
      ...pod.metadata.annotations,
      [CONFIG_HASH_ANNOTATION]: uid,
      [CONFIG_SOURCE_ANNOTATION]: "api",
    },
  };
  return { ...pod, metadata, spec: { ...pod.spec, nodeName } };
}

/**
 * Saves desired states; a save that fails is tried again after `retryMs` until it succeeds or a
 * newer state is saved. `unsaved` says why the last state is not on disk yet.
 */
class DesiredFile {
  unsaved: string | undefined;
  private cancelRetry = () => {};

  constructor(
    private readonly path: string,
    private readonly log: Logger,
    private readonly clock: Clock,
    private readonly retryMs: number,
    private readonly stateWrites: StateWrites,
  ) {}

  /** Saves `text`; returns false (and retries later) when it could not. */
  save(text: string): boolean {
    this.cancelRetry();
    try {
      reportedWrite(this.stateWrites, this.path, () => writeFileAtomic(this.path, text));
    } catch (err) {
      const first = this.unsaved === undefined;
      this.unsaved = `cannot save the desired state to ${this.path}: ${(err as Error).message}`;
      if (first)
        this.log.warn("cannot save the hub's desired state; applied anyway, saving again later", {
          file: this.path,
          error: err,
          retryInMs: this.retryMs,
        });
      this.cancelRetry = this.clock.setTimer(this.retryMs, () => this.save(text));
      return false;
    }
    if (this.unsaved !== undefined)
      this.log.info("saved the hub's desired state", { file: this.path });
    this.unsaved = undefined;
    return true;
  }
}

/** The saved desired state (an empty one when there is no file), or undefined, logged, when it
 * cannot be read or used. */
function readSavedState(deps: HubPodSourceDeps): DesiredState | undefined {
  let text: string;
  try {
    text = readFileSync(deps.path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT")
      return { generation: 0, pods: [], configMaps: [], secrets: [] };
    deps.log.error("cannot read the saved hub desired state; hub pods wait for the hub", {
      file: deps.path,
      error: err,
    });
    return undefined;
  }
  let decoded: ReturnType<typeof decodeDesired>;
  try {
    const saved = JSON.parse(text) as DesiredInput;
    decoded = decodeDesired({ ...saved, pods: saved.pods ?? [] }, deps.nodeName);
  } catch (err) {
    decoded = { ok: false, reason: (err as Error).message };
  }
  if (!decoded.ok || !Number.isInteger(decoded.state.generation)) {
    const reason = decoded.ok ? "no generation" : decoded.reason;
    deps.log.error("the saved hub desired state is unusable; hub pods wait for the hub", {
      file: deps.path,
      reason,
    });
    return undefined;
  }
  return decoded.state;
}

export function createHubPodSource(deps: HubPodSourceDeps): HubPodSource {
  let generation = 0;
  const file = new DesiredFile(
    deps.path,
    deps.log,
    deps.clock ?? realClock,
    deps.retrySaveMs ?? 5000,
    deps.stateWrites ?? ignoreStateWrites,
  );
  const use = (state: DesiredState) => {
    deps.applyObjects([...state.configMaps, ...state.secrets]);
    deps.apply(state.pods.map((p) => makeHubPod(p, deps.nodeName)));
    generation = state.generation;
  };
  return {
    get generation() {
      return generation;
    },
    get unsaved() {
      return file.unsaved;
    },
    load() {
      const state = readSavedState(deps);
      if (state === undefined) return false;
      use(state);
      return true;
    },
    accept(input) {
      const decoded = decodeDesired(input, deps.nodeName);
      if (!decoded.ok) return decoded;
      file.save(`${JSON.stringify(decoded.state)}\n`);
      use(decoded.state);
      return { ok: true };
    },
  };
}
