// Keeps what a failed pull had downloaded for the next attempt. containerd drops the blobs a CRI
// pull had begun as soon as the pull fails (they are held by a lease of the pull's own, deleted
// with it), so a pull cut by a dropped link starts over. Here every pull of an image runs under
// a lease of the agent's, one per image, given to PullImage in the `containerd-lease` header:
// the blobs begun stay, and the next attempt continues them (containerd asks the registry for
// the rest only). The lease is deleted once a pull of the image succeeds (the image then holds
// its content) and expires by itself LEASE_LIFETIME_MS after it was made, so what a pull given
// up (or an agent gone) leaves is collected by containerd.
//
// Invariants:
// - One lease id per image reference (leaseIdOf), the same across agent restarts.
// - A runtime that cannot make a lease (not containerd) pulls as it would without one.
// - release() never throws: a lease left behind expires.
import { createHash } from "node:crypto";
import type { CallOptions, PullImageRequest, PullImageResponse } from "../../cri/index.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";

/** How long a lease holds a pull's downloads at most. */
const LEASE_LIFETIME_MS = 60 * 60_000;
/** containerd's label for when its collector deletes a lease (RFC 3339). */
const EXPIRE_LABEL = "containerd.io/gc.expire";

/** The runtime's leases and its PullImage under one (containerd.ts). */
export interface LeaseRuntime {
  leases: {
    /** Resolves false when the lease exists already. */
    create(id: string, labels: Record<string, string>, opts?: CallOptions): Promise<boolean>;
    /** Resolves false when there is none. */
    delete(id: string, opts?: CallOptions): Promise<boolean>;
  };
  pullImageLeased(
    lease: string,
    request: PullImageRequest,
    opts?: CallOptions,
  ): Promise<PullImageResponse>;
}

export interface PullLeases {
  /** CRI's PullImage under the image's lease (made when missing); rejects as PullImage does. */
  pull(request: PullImageRequest, opts?: CallOptions): Promise<PullImageResponse>;
  /** Deletes the image's lease (its pull succeeded); never throws. */
  release(image: string): Promise<void>;
}

/** "fleetlet-pull-<16 hex digits of the reference's sha256>". */
export function leaseIdOf(image: string): string {
  return `fleetlet-pull-${createHash("sha256").update(image).digest("hex").slice(0, 16)}`;
}

/** Go's RFC 3339 text of a time in ms, in whole seconds: "2026-01-01T01:00:00Z". */
function rfc3339(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(".000Z", "Z");
}

export function createPullLeases(deps: {
  runtime: LeaseRuntime;
  /** PullImage without a lease, for a runtime that cannot make one. */
  pullImage(request: PullImageRequest, opts?: CallOptions): Promise<PullImageResponse>;
  clock: Clock;
  logger: Logger;
}): PullLeases {
  const { runtime, clock, logger } = deps;
  return {
    async pull(request, opts = {}) {
      const image = request.image?.image ?? "";
      const id = leaseIdOf(image);
      const expires = rfc3339(clock.now() + LEASE_LIFETIME_MS);
      try {
        const made = await runtime.leases.create(id, { [EXPIRE_LABEL]: expires }, opts);
        if (made) logger.debug("pull lease made", { image, lease: id, expires });
      } catch (err) {
        logger.debug("no pull lease: pulling without", { image, error: (err as Error).message });
        return deps.pullImage(request, opts);
      }
      return runtime.pullImageLeased(id, request, opts);
    },
    async release(image) {
      try {
        await runtime.leases.delete(leaseIdOf(image));
      } catch (err) {
        logger.warn("could not delete a pull lease (it expires by itself)", {
          image,
          error: (err as Error).message,
        });
      }
    },
  };
}
