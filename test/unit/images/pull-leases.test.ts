import { describe, expect, test } from "bun:test";
import { createImageManager } from "../../../src/agent/images/index.ts";
import {
  createPullLeases,
  type LeaseRuntime,
  leaseIdOf,
} from "../../../src/agent/images/pull-leases.ts";
import {
  CriError,
  createFakeRuntime,
  GrpcStatus,
  type PullImageRequest,
} from "../../../src/cri/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const IMAGE = "127.0.0.1:5055/a:v1";

/** A runtime with leases that records what is asked of it; `pullFails` makes leased pulls
 * fail. */
function leaseRuntime(opts: { leases?: boolean } = {}) {
  const calls: string[] = [];
  const held = new Map<string, Record<string, string>>();
  let pullFails = false;
  const runtime: LeaseRuntime = {
    leases: {
      async create(id, labels) {
        calls.push(`create ${id}`);
        if (opts.leases === false) {
          throw new CriError({
            rpc: "Leases.Create",
            grpcStatus: GrpcStatus.UNIMPLEMENTED,
            runtimeMessage: "unknown service",
          });
        }
        if (held.has(id)) return false;
        held.set(id, labels);
        return true;
      },
      async delete(id) {
        calls.push(`delete ${id}`);
        return held.delete(id);
      },
    },
    async pullImageLeased(lease, request) {
      calls.push(`pull ${request.image?.image} under ${lease}`);
      if (pullFails) throw new Error("failed to copy: connection reset by peer");
      return { imageRef: `sha256:${request.image?.image}` };
    },
  };
  const failPulls = (fail: boolean) => {
    pullFails = fail;
  };
  return { runtime, calls, held, failPulls };
}

describe("pull leases", () => {
  test("a lease id per image reference, the same every time", () => {
    expect(leaseIdOf(IMAGE)).toBe(leaseIdOf(IMAGE));
    expect(leaseIdOf(IMAGE)).not.toBe(leaseIdOf("127.0.0.1:5055/a:v2"));
    expect(leaseIdOf(IMAGE)).toMatch(/^fleetlet-pull-[0-9a-f]{16}$/);
  });

  test("pulls under the image's lease, made at the first attempt with containerd's expiry label, kept by a failed attempt and deleted by release()", async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1, 12, 0, 0, 250));
    const r = leaseRuntime();
    const plain: string[] = [];
    const leases = createPullLeases({
      runtime: r.runtime,
      pullImage: async (req) => {
        plain.push(req.image?.image ?? "");
        return { imageRef: "" };
      },
      clock,
      logger: nullLogger,
    });
    const id = leaseIdOf(IMAGE);
    r.failPulls(true);
    await expect(leases.pull({ image: { image: IMAGE } })).rejects.toThrow("connection reset");
    expect(r.held.get(id)).toEqual({ "containerd.io/gc.expire": "2026-01-01T13:00:00Z" });
    r.failPulls(false);
    expect(await leases.pull({ image: { image: IMAGE } })).toEqual({ imageRef: `sha256:${IMAGE}` });
    await leases.release(IMAGE);
    expect(r.calls).toEqual([
      `create ${id}`,
      `pull ${IMAGE} under ${id}`,
      `create ${id}`,
      `pull ${IMAGE} under ${id}`,
      `delete ${id}`,
    ]);
    expect(r.held.size).toBe(0);
    expect(plain).toEqual([]);
  });

  test("a runtime that cannot make leases pulls as it would without", async () => {
    const r = leaseRuntime({ leases: false });
    const plain: string[] = [];
    const leases = createPullLeases({
      runtime: r.runtime,
      pullImage: async (req) => {
        plain.push(req.image?.image ?? "");
        return { imageRef: "sha256:plain" };
      },
      clock: new FakeClock(),
      logger: nullLogger,
    });
    expect(await leases.pull({ image: { image: IMAGE } })).toEqual({ imageRef: "sha256:plain" });
    expect(plain).toEqual([IMAGE]);
  });

  test("release() of a lease the runtime cannot delete does not throw", async () => {
    const r = leaseRuntime();
    r.runtime.leases.delete = async () => {
      throw new Error("deadline exceeded");
    };
    const leases = createPullLeases({
      runtime: r.runtime,
      pullImage: async () => ({ imageRef: "" }),
      clock: new FakeClock(),
      logger: nullLogger,
    });
    await leases.release(IMAGE);
  });
});

describe("ensureImageExists with pull leases", () => {
  test("pulls through the leases and releases the image's lease once it pulled, not when the pull failed", async () => {
    const clock = new FakeClock();
    const cri = createFakeRuntime({ now: () => clock.now() });
    cri.images.addToRegistry(IMAGE);
    const r = leaseRuntime();
    const leases = createPullLeases({
      runtime: {
        ...r.runtime,
        // The fake runtime pulls; the lease is what this test looks at.
        pullImageLeased: async (lease, request: PullImageRequest) => {
          await r.runtime.pullImageLeased(lease, request);
          return cri.pullImage(request);
        },
      },
      pullImage: (req) => cri.pullImage(req),
      clock,
      logger: nullLogger,
    });
    const images = createImageManager({
      cri,
      clock,
      logger: nullLogger,
      recorder: () => {},
      backoff: { initialMs: 1000, maxMs: 1000 },
      pullLeases: leases,
    });
    const ensure = () =>
      images.ensureImageExists(makePod({ name: "p" }), makeContainer({ image: IMAGE }));
    r.failPulls(true);
    expect(await ensure()).toMatchObject({ ok: false, reason: "ErrImagePull" });
    expect(r.held.has(leaseIdOf(IMAGE))).toBe(true);
    r.failPulls(false);
    clock.step(1000);
    expect(await ensure()).toMatchObject({ ok: true });
    expect(r.held.size).toBe(0);
    expect(r.calls.at(-1)).toBe(`delete ${leaseIdOf(IMAGE)}`);
  });
});
