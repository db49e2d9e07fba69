// Makes a container's image present before the container is created, with kubelet's image
// manager rules: the pull policy decides whether to pull; failed pulls back off per pod and
// image (ErrImagePull, then ImagePullBackOff until the delay has passed); pulls wait for their
// turn in the puller (serialized by default, as the kubelet's, so that a slow edge link is not
// shared by many pulls at once) and may be refused by its registryPullQPS bucket.
//
// Invariants:
// - ensureImageExists never throws: every failure is a result with kubelet's reason and message.
// - Every CRI call has a deadline; pulls also stop when the caller's signal aborts, and a pull
//   whose signal aborts while it waits for its turn never reaches the runtime.
// - "Pulling" is recorded when the pull is asked for, before its wait (as the kubelet does), so
//   "Pulled" says how long the pull took and how long with the wait.
// - With pull leases, every attempt of an image's pull runs under the image's lease, deleted
//   when one succeeds: what a failed attempt downloaded is continued by the next.
// - While a pull runs (not while it waits for its turn) and the runtime lists its downloads,
//   the pull is watched (pull-watch.ts): its figures go to the caller's onProgress, and a pull
//   that writes no byte for the progress deadline is cancelled and fails with ErrImagePull.

import type { Container, EventType, Pod } from "../../api/types.ts";
import type { CriRuntime, ImageSpec, PodSandboxConfig } from "../../cri/index.ts";
import { Backoff } from "../../util/backoff.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { loadDockerConfig } from "./credentials.ts";
import { figuresText, type PullFigures, progressMessage } from "./progress.ts";
import type { PullLeases } from "./pull-leases.ts";
import { aggregateErrors, type PodPullCredentials, pullAuths } from "./pull-secrets.ts";
import { type PullProgressSource, PullWatch } from "./pull-watch.ts";
import { createPuller, type Puller, type PullSettings } from "./puller.ts";
import {
  type ImageReference,
  InvalidImageReferenceError,
  parseImageReference,
} from "./reference.ts";

/** Waiting reasons a container shows when its image is not ready (kubelet's strings). */
type ImageErrorReason =
  | "ErrImagePull"
  | "ImagePullBackOff"
  | "ErrImageNeverPull"
  | "InvalidImageName"
  | "ImageInspectError";

type EnsureImageResult =
  | { ok: true; imageRef: string }
  | { ok: false; reason: ImageErrorReason; message: string };

/** Records an event about a pod; fieldPath names the container ("spec.containers{web}"). */
export type PodEventRecorder = (
  pod: Pod,
  type: EventType,
  reason: string,
  message: string,
  fieldPath?: string,
) => void;

export interface ImageManagerDeps {
  cri: CriRuntime;
  clock: Clock;
  logger: Logger;
  recorder: PodEventRecorder;
  /** Pull backoff per pod and image (kubelet: 10 s doubling to 300 s). */
  backoff: { initialMs: number; maxMs: number };
  /** A docker config.json with registry credentials; read at every pull. */
  credentialsPath?: string;
  /** The credentials of the pod's imagePullSecrets, tried before the node's. */
  podCredentials?: (pod: Pod) => PodPullCredentials;
  /** Deadline of ImageStatus; the client's default when absent. */
  requestTimeoutMs?: number;
  /** How many pulls at once and how fast they may begin; absent: one at a time, no rate
   * limit (the agent passes the config's, with the kubelet's defaults). */
  pulls?: PullSettings;
  /** The runtime's downloads in progress, for pull progress and the progress deadline;
   * absent: pulls are not watched. */
  pullProgress?: PullProgressSource;
  /** Pulls under a lease per image, so that a failed attempt's downloads stay for the next;
   * absent: PullImage as it is (the runtime drops what a failed pull had begun). */
  pullLeases?: PullLeases;
}

interface EnsureImageOptions {
  /** Event field path of the container, e.g. "spec.containers{web}". */
  fieldPath?: string;
  sandboxConfig?: PodSandboxConfig;
  signal?: AbortSignal;
  /** Called with the container's waiting message (`Pulling image "x": 1.0 MiB of 9.5 MiB`)
   * each time a running pull's figures change. */
  onProgress?: (message: string) => void;
}

export interface ImageManager {
  /** Makes `container.image` present per its pull policy; resolves to the image id to create
   * the container from, or to the waiting reason and message when it cannot. */
  ensureImageExists(
    pod: Pod,
    container: Container,
    opts?: EnsureImageOptions,
  ): Promise<EnsureImageResult>;
  /** Drops backoff entries older than the reset window. */
  gc(): void;
}

/** Go's time.Duration text for a span in ms cut to whole ms (as the kubelet's events print
 * it): "0s", "450ms", "1.234s", "2m3.5s", "1h0m2s". */
export function formatElapsed(ms: number): string {
  const whole = Math.max(0, Math.floor(ms));
  if (whole === 0) return "0s";
  if (whole < 1000) return `${whole}ms`;
  const hours = Math.floor(whole / 3_600_000);
  const minutes = Math.floor((whole % 3_600_000) / 60_000);
  const seconds = `${Math.floor((whole % 60_000) / 1000)}${fraction(whole % 1000)}s`;
  if (hours > 0) return `${hours}h${minutes}m${seconds}`;
  return minutes > 0 ? `${minutes}m${seconds}` : seconds;
}

/** ".5" for 500 ms, ".034" for 34, "" for 0. */
function fraction(ms: number): string {
  return ms === 0 ? "" : `.${String(ms).padStart(3, "0").replace(/0+$/, "")}`;
}

/** Why a stalled pull failed: `pull cancelled: no byte written for 5m0s
 * (imagePullProgressDeadline); 12.0 MiB of 24.0 MiB written`. */
function stallMessage(deadlineMs: number, figures: PullFigures): string {
  const head = `pull cancelled: no byte written for ${formatElapsed(deadlineMs)} (imagePullProgressDeadline)`;
  return figures.total > 0 ? `${head}; ${figuresText(figures)} written` : head;
}

function shouldPull(policy: Container["imagePullPolicy"], present: boolean): boolean {
  if (policy === "Never") return false;
  return policy === "Always" || !present;
}

export function createImageManager(deps: ImageManagerDeps): ImageManager {
  return new Images(deps);
}

/** Records an event about the container whose image is being made present. */
type ContainerEvent = (type: EventType, reason: string, message: string) => void;

class Images implements ImageManager {
  /** Pull backoff per "<pod uid>_<image>". */
  private readonly backoff: Backoff;
  /** Where pulls wait for their turn and a token. */
  private readonly puller: Puller;
  /** The last failed pull's "ErrImagePull: <detail>" per backoff key, shown in the
   * ImagePullBackOff message until the next pull of that key begins or its backoff is gone. */
  private readonly lastErrors = new Map<string, string>();

  constructor(private readonly deps: ImageManagerDeps) {
    this.backoff = new Backoff({ initialMs: deps.backoff.initialMs, maxMs: deps.backoff.maxMs });
    const pulls = deps.pulls ?? { serializeImagePulls: true, registryPullQPS: 0, registryBurst: 0 };
    this.puller = createPuller(pulls, deps.clock);
  }

  gc(): void {
    const now = this.deps.clock.monotonic();
    this.backoff.gc(now);
    for (const key of this.lastErrors.keys()) {
      if (this.backoff.get(key, now) === 0) this.lastErrors.delete(key);
    }
  }

  async ensureImageExists(
    pod: Pod,
    container: Container,
    opts: EnsureImageOptions = {},
  ): Promise<EnsureImageResult> {
    const deps = this.deps;
    const event: ContainerEvent = (type, reason, message) =>
      deps.recorder(pod, type, reason, message, opts.fieldPath);
    const image = container.image;
    let ref: ImageReference;
    try {
      ref = parseImageReference(image);
    } catch (err) {
      const detail = err instanceof InvalidImageReferenceError ? err.message : String(err);
      const message = `Failed to apply default image tag ${JSON.stringify(image)}: ${detail}`;
      event("Warning", "InspectFailed", message);
      return { ok: false, reason: "InvalidImageName", message };
    }
    const spec: ImageSpec = { image: ref.normalized, userSpecifiedImage: image };
    if (pod.metadata.annotations) spec.annotations = { ...pod.metadata.annotations };
    let present: string;
    try {
      present = await this.imageId(spec);
    } catch (err) {
      const message = `Failed to inspect image ${JSON.stringify(image)}: ${(err as Error).message}`;
      event("Warning", "InspectFailed", message);
      return { ok: false, reason: "ImageInspectError", message };
    }
    if (!shouldPull(container.imagePullPolicy, present !== "")) {
      if (present) {
        event(
          "Normal",
          "Pulled",
          `Container image ${JSON.stringify(image)} already present on machine`,
        );
        return { ok: true, imageRef: present };
      }
      const message = `Container image ${JSON.stringify(image)} is not present with pull policy of Never`;
      event("Warning", "ErrImageNeverPull", message);
      return { ok: false, reason: "ErrImageNeverPull", message };
    }
    const key = `${pod.metadata.uid ?? ""}_${image}`;
    if (this.backoff.isInBackoff(key, deps.clock.monotonic())) {
      const message = `Back-off pulling image ${JSON.stringify(image)}`;
      event("Normal", "BackOff", message);
      // As the kubelet, the waiting message (not the event) says why the last pull failed.
      const last = this.lastErrors.get(key);
      return {
        ok: false,
        reason: "ImagePullBackOff",
        message: last === undefined ? message : `${message}: ${last}`,
      };
    }
    return this.pullNow(pod, image, ref, spec, key, opts, event);
  }

  /** The id of the image present for `spec`; "" when absent. */
  private async imageId(spec: ImageSpec): Promise<string> {
    const timeoutMs = this.deps.requestTimeoutMs;
    const res = await this.deps.cri.imageStatus({ image: spec }, timeoutMs ? { timeoutMs } : {});
    return res.image?.id ?? "";
  }

  /** Pulls with each credential that may fit (the pod's pull secrets, then the node's) until
   * one succeeds. */
  private async pull(
    pod: Pod,
    ref: ImageReference,
    spec: ImageSpec,
    opts: EnsureImageOptions,
  ): Promise<{ imageRef: string; size: number }> {
    const deps = this.deps;
    const node = deps.credentialsPath ? await loadDockerConfig(deps.credentialsPath) : [];
    const fromPod = deps.podCredentials?.(pod) ?? { credentials: [], missing: [] };
    if (fromPod.missing.length > 0) {
      const message = `Unable to retrieve some image pull secrets (${fromPod.missing.join(", ")}); attempting to pull the image may not succeed.`;
      deps.recorder(pod, "Warning", "FailedToRetrieveImagePullSecret", message);
    }
    const errors: Error[] = [];
    for (const auth of pullAuths(ref, fromPod.credentials, node)) {
      try {
        const request = { image: spec, auth, sandboxConfig: opts.sandboxConfig ?? null };
        const callOpts = opts.signal ? { signal: opts.signal } : {};
        const res = deps.pullLeases
          ? await deps.pullLeases.pull(request, callOpts)
          : await deps.cri.pullImage(request, callOpts);
        await deps.pullLeases?.release(spec.image);
        const status = await deps.cri.imageStatus({ image: { image: res.imageRef } });
        return { imageRef: res.imageRef, size: status.image?.size ?? 0 };
      } catch (err) {
        errors.push(err as Error);
        if (opts.signal?.aborted) break;
      }
    }
    throw aggregateErrors(errors);
  }

  /** Runs `pull` watched: its figures go to opts.onProgress, and its signal also aborts when
   * it stalls, which it then fails with. */
  private async watched<T>(
    image: string,
    opts: EnsureImageOptions,
    pull: (signal: AbortSignal | undefined) => Promise<T>,
  ): Promise<T> {
    const { clock, logger, pullProgress: source } = this.deps;
    const outer = opts.signal;
    if (source === undefined) return pull(outer);
    const report = (figures: PullFigures) => opts.onProgress?.(progressMessage(image, figures));
    const watch = new PullWatch(source, clock, logger, report);
    const done = new AbortController();
    const watching = outer ? AbortSignal.any([outer, done.signal]) : done.signal;
    if (!(await watch.begin(watching))) return pull(outer);
    const running = watch.run(watching);
    try {
      return await pull(outer ? AbortSignal.any([outer, watch.stalled]) : watch.stalled);
    } catch (err) {
      if (!watch.stalled.aborted || outer?.aborted) throw err;
      throw new Error(stallMessage(source.deadlineMs, watch.figures()));
    } finally {
      done.abort();
      await running;
    }
  }

  /** Asks the puller for the pull; records Pulled, or Failed and backs the image off for the
   * pod. A pull cancelled while it waited for its turn only says so. */
  private async pullNow(
    pod: Pod,
    image: string,
    ref: ImageReference,
    spec: ImageSpec,
    key: string,
    opts: EnsureImageOptions,
    event: ContainerEvent,
  ): Promise<EnsureImageResult> {
    const deps = this.deps;
    event("Normal", "Pulling", `Pulling image ${JSON.stringify(image)}`);
    this.lastErrors.delete(key);
    const queuedAt = deps.clock.monotonic();
    let started = false;
    try {
      const result = await this.puller.run(async () => {
        started = true;
        const startedAt = deps.clock.monotonic();
        const pulled = await this.watched(image, opts, (signal) =>
          this.pull(pod, ref, spec, signal ? { ...opts, signal } : opts),
        );
        return { ...pulled, pullMs: deps.clock.monotonic() - startedAt };
      }, opts.signal);
      const total = formatElapsed(deps.clock.monotonic() - queuedAt);
      event(
        "Normal",
        "Pulled",
        `Successfully pulled image ${JSON.stringify(image)} in ${formatElapsed(result.pullMs)} (${total} including waiting). Image size: ${result.size} bytes.`,
      );
      this.backoff.gc(deps.clock.monotonic());
      return { ok: true, imageRef: result.imageRef };
    } catch (err) {
      const detail = (err as Error).message;
      if (!started && opts.signal?.aborted) {
        const message = `pull of image ${JSON.stringify(image)} cancelled while it waited for its turn: ${detail}`;
        deps.logger.info("image pull cancelled", { pod: pod.metadata.name, image });
        return { ok: false, reason: "ErrImagePull", message };
      }
      deps.logger.warn("image pull failed", { pod: pod.metadata.name, image, error: detail });
      event("Warning", "Failed", `Failed to pull image ${JSON.stringify(image)}: ${detail}`);
      this.backoff.next(key, deps.clock.monotonic());
      this.lastErrors.set(key, `ErrImagePull: ${detail}`);
      return { ok: false, reason: "ErrImagePull", message: detail };
    }
  }
}
