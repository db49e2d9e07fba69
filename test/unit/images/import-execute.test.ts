import { describe, expect, test } from "bun:test";
import { executeImport } from "../../../src/agent/images/import/execute.ts";
import type { ImportStep } from "../../../src/agent/images/import/plan.ts";
import type {
  ContainerdImportCalls,
  ContentDescriptor,
  SnapshotMount,
} from "../../../src/cri/containerd-store.ts";

/** containerd's import calls in memory: what was called, in order; blobs and snapshots kept. */
class FakeContainerd implements ContainerdImportCalls {
  readonly log: string[] = [];
  readonly blobs = new Set<string>();
  readonly snapshots = new Set<string>();
  /** What Apply answers for a layer digest (default: the step's diff ID is not known here, so
   * the layer's own digest with "diff-" prefix). */
  applied = (layer: ContentDescriptor) => `diff-${layer.digest}`;
  failOn: string | undefined;

  private note(what: string): void {
    this.log.push(what);
    if (this.failOn !== undefined && what.startsWith(this.failOn))
      throw new Error(`${what} failed`);
  }
  async createLease(id: string) {
    this.note(`createLease ${id}`);
  }
  async deleteLease(id: string, sync: boolean) {
    this.note(`deleteLease ${id} sync=${sync}`);
  }
  async leaseContent(_: string, digest: string) {
    this.note(`leaseContent ${digest}`);
  }
  async writeBlob(desc: ContentDescriptor, _data: Uint8Array, labels: Record<string, string>) {
    this.note(`writeBlob ${desc.digest} ${Object.keys(labels).join(",")}`);
    if (this.blobs.has(desc.digest)) return "exists" as const;
    this.blobs.add(desc.digest);
    return "written" as const;
  }
  async labelBlob(digest: string) {
    this.note(`labelBlob ${digest}`);
  }
  async snapshotExists(key: string) {
    this.note(`snapshotExists ${key}`);
    return this.snapshots.has(key);
  }
  async prepareSnapshot(key: string, parent: string): Promise<SnapshotMount[]> {
    this.note(`prepare ${key} on ${parent}`);
    return [{ type: "bind", source: key, target: "", options: [] }];
  }
  async applyLayer(layer: ContentDescriptor) {
    this.note(`apply ${layer.digest}`);
    return this.applied(layer);
  }
  async commitSnapshot(name: string, key: string) {
    this.note(`commit ${key} as ${name}`);
    this.snapshots.add(name);
  }
  async removeSnapshot(key: string) {
    this.note(`remove ${key}`);
  }
  async putImage(name: string, target: ContentDescriptor) {
    this.note(`putImage ${name} ${target.digest}`);
  }
  close() {
    this.log.push("close");
  }
}

const data = new Uint8Array([1]);
const desc = (digest: string) => ({ mediaType: "m", digest, size: 1, data });
const steps: ImportStep[] = [
  { kind: "blob", blob: desc("L1"), labels: { "containerd.io/uncompressed": "D1" } },
  { kind: "blob", blob: desc("M"), labels: {} },
  { kind: "unpack", layer: desc("L1"), diffId: "diff-L1", chainId: "C1", parent: "" },
  { kind: "image", name: "a/b:1", target: { mediaType: "m", digest: "M", size: 1 } },
];

async function run(fake: FakeContainerd, what = steps) {
  const left: Error[] = [];
  await executeImport(
    what,
    () => fake,
    "lease1",
    0,
    new AbortController().signal,
    (e) => left.push(e),
  );
  return left;
}

describe("executeImport()", () => {
  test("runs the steps under a lease it then deletes without waiting for the GC", async () => {
    const fake = new FakeContainerd();
    await run(fake);
    expect(fake.log).toEqual([
      "createLease lease1",
      "writeBlob L1 containerd.io/uncompressed",
      "writeBlob M ",
      "snapshotExists C1",
      "prepare extract-lease1 C1 on ",
      "apply L1",
      "commit extract-lease1 C1 as C1",
      "putImage a/b:1 M",
      "deleteLease lease1 sync=false",
      "close",
    ]);
  });

  test("puts a blob that exists under the lease and sets its labels; skips an unpacked chain", async () => {
    const fake = new FakeContainerd();
    fake.blobs.add("L1");
    fake.snapshots.add("C1");
    await run(fake);
    expect(fake.log.slice(1, 5)).toEqual([
      "writeBlob L1 containerd.io/uncompressed",
      "leaseContent L1",
      "labelBlob L1",
      "writeBlob M ",
    ]);
    expect(fake.log.some((l) => l.startsWith("prepare"))).toBe(false);
  });

  test("a layer unpacking to another diff ID fails the import, removes its snapshot and deletes the lease with a GC", async () => {
    const fake = new FakeContainerd();
    fake.applied = () => "sha256:other";
    await expect(run(fake)).rejects.toThrow(
      "unpacking layer L1: layer L1 unpacks to sha256:other, but the image config says diff-L1",
    );
    expect(fake.log).toContain("remove extract-lease1 C1");
    expect(fake.log.some((l) => l.startsWith("putImage"))).toBe(false);
    expect(fake.log.slice(-2)).toEqual(["deleteLease lease1 sync=true", "close"]);
  });

  test("a failed step names itself and still deletes the lease", async () => {
    const fake = new FakeContainerd();
    fake.failOn = "writeBlob M";
    await expect(run(fake)).rejects.toThrow("storing blob M: writeBlob M  failed");
    expect(fake.log.at(-2)).toBe("deleteLease lease1 sync=true");
  });

  test("a lease that cannot be deleted is handed over, not thrown", async () => {
    const fake = new FakeContainerd();
    fake.failOn = "deleteLease";
    const left = await run(fake);
    expect(left.map((e) => e.message)).toEqual(["deleteLease lease1 sync=false failed"]);
  });
});
