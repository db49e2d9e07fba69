// Makes a container's image present before the container is created, with kubelet's image
// manager rules: the pull policy decides whether to pull; failed pulls back off per pod and
// image (ErrImagePull, then ImagePullBackOff until the delay has passed); pulls run one at a time
// (kubelet's serialized puller) so that a slow edge link is not shared by many pulls at once.
//
// Invariants:
// - ensureImageExists never throws: every failure is a result with kubelet's reason and message.
// - Every CRI call has a deadline; pulls also stop when the caller's signal aborts.

import type { Container, EventType, Pod } from "../../api/types.ts";
import type { CriRuntime, ImageSpec, PodSandboxConfig } from "../../cri/index.ts";
import { Backoff } from "../../util/backoff.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { loadDockerConfig } from "./credentials.ts";
import { aggregateErrors, type PodPullCredentials, pullAuths } from "./pull-secrets.ts";
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
}

interface EnsureImageOptions {
  /** Event field path of the container, e.g. "spec.containers{web}". */
  fieldPath?: string;
  sandboxConfig?: PodSandboxConfig;
  signal?: AbortSignal;
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

/** Go's time.Duration text for a span in ms: "450ms", "1.234s", "2m3.5s". */
export function formatElapsed(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const minutes = Math.floor(ms / 60_000);
  const seconds = Number(((ms % 60_000) / 1000).toFixed(3)).toString();
  return minutes > 0 ? `${minutes}m${seconds}s` : `${seconds}s`;
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
  /** Settles when every pull queued so far has; the next pull waits for it. */
  private pullQueue: Promise<unknown> = Promise.resolve();

  constructor(private readonly deps: ImageManagerDeps) {
    this.backoff = new Backoff({ initialMs: deps.backoff.initialMs, maxMs: deps.backoff.maxMs });
  }

  gc(): void {
    this.backoff.gc(this.deps.clock.monotonic());
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
      return { ok: false, reason: "ImagePullBackOff", message };
    }
    return this.pullNow(pod, image, ref, spec, key, opts, event);
  }

  /** Runs `fn` after every pull queued before it. */
  private serialized<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.pullQueue.then(fn, fn);
    this.pullQueue = run.catch(() => undefined);
    return run;
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
        const res = await deps.cri.pullImage(
          { image: spec, auth, sandboxConfig: opts.sandboxConfig ?? null },
          opts.signal ? { signal: opts.signal } : {},
        );
        const status = await deps.cri.imageStatus({ image: { image: res.imageRef } });
        return { imageRef: res.imageRef, size: status.image?.size ?? 0 };
      } catch (err) {
        errors.push(err as Error);
      }
    }
    throw aggregateErrors(errors);
  }

  /** Queues the pull; records Pulled, or Failed and backs the image off for the pod. */
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
    const queuedAt = deps.clock.monotonic();
    try {
      const result = await this.serialized(async () => {
        event("Normal", "Pulling", `Pulling image ${JSON.stringify(image)}`);
        const startedAt = deps.clock.monotonic();
        const pulled = await this.pull(pod, ref, spec, opts);
        return { ...pulled, pullMs: deps.clock.monotonic() - startedAt };
      });
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
      deps.logger.warn("image pull failed", { pod: pod.metadata.name, image, error: detail });
      event("Warning", "Failed", `Failed to pull image ${JSON.stringify(image)}: ${detail}`);
      this.backoff.next(key, deps.clock.monotonic());
      return { ok: false, reason: "ErrImagePull", message: detail };
    }
  }
}
