// Carries out an import plan (plan.ts) against containerd, under a lease of its own: the lease
// keeps what the steps wrote from containerd's garbage collector while they run, and is
// deleted at the end either way. After a success the image records hold everything; after a
// failure nothing does, and the collector removes what the import wrote.
//
// Invariants:
// - A lease is deleted whenever it was created (a failed delete is logged: the lease's expiry,
//   one hour, still ends it).
// - A snapshot prepared for an unpack is committed or removed before the step ends.

import type { ContainerdImportCalls } from "../../../cri/containerd-store.ts";
import type { ImportStep } from "./plan.ts";

/** The containerd calls of one import under lease `leaseId`. */
export type ImportCallsFor = (leaseId: string) => ContainerdImportCalls;

type StepOf<K extends ImportStep["kind"]> = Extract<ImportStep, { kind: K }>;

type Executors = {
  [K in ImportStep["kind"]]: (
    step: StepOf<K>,
    calls: ContainerdImportCalls,
    ctx: { leaseId: string; signal: AbortSignal },
  ) => Promise<void>;
};

const LEASE_EXPIRY_MS = 3_600_000;

const executors: Executors = {
  async blob(step, calls, { leaseId, signal }) {
    const { blob, labels } = step;
    const desc = { mediaType: blob.mediaType, digest: blob.digest, size: blob.size };
    const written = await calls.writeBlob(desc, blob.data, labels, signal);
    if (written === "written") return;
    await calls.leaseContent(leaseId, blob.digest);
    if (Object.keys(labels).length > 0) await calls.labelBlob(blob.digest, labels);
  },

  async unpack(step, calls, { leaseId, signal }) {
    if (await calls.snapshotExists(step.chainId)) return;
    const key = `extract-${leaseId} ${step.chainId}`;
    const mounts = await calls.prepareSnapshot(key, step.parent);
    try {
      const { mediaType, digest, size } = step.layer;
      const applied = await calls.applyLayer({ mediaType, digest, size }, mounts, signal);
      if (applied !== step.diffId) {
        throw new Error(
          `layer ${digest} unpacks to ${applied}, but the image config says ${step.diffId}`,
        );
      }
      await calls.commitSnapshot(step.chainId, key);
    } catch (err) {
      await calls.removeSnapshot(key).catch(() => {});
      if (await calls.snapshotExists(step.chainId).catch(() => false)) return; // another unpack won
      throw err;
    }
  },

  async image(step, calls) {
    await calls.putImage(step.name, step.target, {});
  },
};

/** Runs `steps` under a new lease `leaseId`; throws the first step's failure (with the step
 * named) after the lease is deleted. A lease that cannot be deleted goes to `leaseLeft` (its
 * expiry ends it). */
export async function executeImport(
  steps: readonly ImportStep[],
  callsFor: ImportCallsFor,
  leaseId: string,
  now: number,
  signal: AbortSignal,
  leaseLeft: (err: Error) => void,
): Promise<void> {
  const calls = callsFor(leaseId);
  try {
    const expire = new Date(now + LEASE_EXPIRY_MS).toISOString();
    await calls.createLease(leaseId, { "containerd.io/gc.expire": expire });
    let failed = true;
    try {
      for (const step of steps) {
        signal.throwIfAborted();
        await runStep(step, calls, { leaseId, signal });
      }
      failed = false;
    } finally {
      // After a failure, containerd collects what the import wrote before this returns.
      await calls.deleteLease(leaseId, failed).catch(leaseLeft);
    }
  } finally {
    calls.close();
  }
}

async function runStep(
  step: ImportStep,
  calls: ContainerdImportCalls,
  ctx: { leaseId: string; signal: AbortSignal },
): Promise<void> {
  const run = executors[step.kind] as (
    s: ImportStep,
    c: ContainerdImportCalls,
    x: typeof ctx,
  ) => Promise<void>;
  try {
    await run(step, calls, ctx);
  } catch (err) {
    throw new Error(`${describeStep(step)}: ${(err as Error).message}`, { cause: err });
  }
}

function describeStep(step: ImportStep): string {
  switch (step.kind) {
    case "blob":
      return `storing blob ${step.blob.digest}`;
    case "unpack":
      return `unpacking layer ${step.layer.digest}`;
    case "image":
      return `naming image ${step.name}`;
  }
}
