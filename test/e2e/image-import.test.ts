// Air-gapped images: archives dropped into the agent's import folder are imported into the test
// bed's containerd through its own API, and pods with imagePullPolicy Never run from them. Each
// image is the test registry's busybox plus a layer of this run's own (a marker file with a
// random token), so its blobs and snapshots are new to containerd every run. The compiled agent
// against the real test bed; needs root and the test bed (and ctr, to look into containerd's
// content store).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import {
  addLayer,
  type Compression,
  compress,
  dockerArchive,
  fetchImage,
  ociArchive,
  type TestImage,
} from "../lib/image-archives.ts";
import { eventually } from "../lib/testbed.ts";

const agent = new TestAgent();
const imagesDir = join(agent.dir, "images");
agent.args.push("--images-import-path", imagesDir);
const token = Math.random().toString(36).slice(2, 10);
const names: string[] = [];
let base: TestImage;

function ctr(args: string[]): string {
  const address = agent.endpoint.replace(/^unix:\/\//, "");
  const p = Bun.spawnSync(["ctr", "-a", address, "-n", "k8s.io", ...args], { stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`ctr ${args.join(" ")}: ${p.stderr.toString()}`);
  return p.stdout.toString();
}

/** Drops `bytes` into the import folder as `file` at once (written beside it, then renamed). */
function drop(file: string, bytes: Uint8Array): void {
  const tmp = join(agent.dir, `.${file}.tmp`);
  writeFileSync(tmp, bytes);
  renameSync(tmp, join(imagesDir, file));
}

function podManifest(name: string, image: string, marker: string): string {
  return `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
    - name: c
      image: ${image}
      imagePullPolicy: Never
      command: ["sh", "-c", "grep -q ${token} /${marker} || exit 3; sleep 3600"]
`;
}

const running = (p: Pod) =>
  p.status?.phase === "Running" &&
  p.status.containerStatuses?.find((c) => c.name === "c")?.state?.running !== undefined;

async function nodeEvent(reason: string, file: string) {
  return eventually(
    `a ${reason} event about ${file}`,
    async () =>
      (await agent.events()).find(
        (e) => e.involvedObject.kind === "Node" && e.reason === reason && e.message.includes(file),
      ),
    30_000,
    250,
  );
}

/** An image of this run: base plus a marker layer compressed `how`. */
function runImage(marker: string, how: Compression, diffId?: string): TestImage {
  return addLayer(base, marker, `${token}\n`, how, diffId);
}

beforeAll(async () => {
  mkdirSync(imagesDir, { recursive: true });
  base = await fetchImage(agent.tb.registry, "fleetlet-test/busybox", "v1");
  // One archive in the folder before the agent starts: imported before its first pod.
  const name = `example.org/fleetlet-test/imported-oci:${token}`;
  names.push(name);
  drop("oci-plain.tar", ociArchive(runImage("marker-oci", "none"), name));
  agent.writeManifest("oci.yaml", podManifest("oci", name, "marker-oci"));
  await agent.start();
}, 60_000);

afterAll(async () => {
  await agent.cleanup();
  for (const n of names) {
    try {
      ctr(["images", "rm", n]);
    } catch {
      // not imported
    }
  }
}, 120_000);

describe("fleetlet agent importing image archives (needs root and the test bed)", () => {
  test("an OCI layout archive in the folder at start runs a pod with imagePullPolicy Never", async () => {
    await agent.waitPod("oci", "running from the imported image", running, 60_000);
    const ev = await nodeEvent("ImageImported", "oci-plain.tar");
    expect(ev.message).toContain(names[0] as string);
  }, 90_000);

  const dropped: [string, string, Compression, (i: TestImage, n: string) => Uint8Array][] = [
    ["a gzip docker-archive", "docker.tar.gz", "gzip", dockerArchive],
    ["a zstd OCI layout", "oci.tar.zst", "zstd", ociArchive],
  ];
  test.each(dropped)(
    "%s dropped while the agent runs is imported and runs a pod",
    async (_, file, how, write) => {
      const pod = file.replace(/\..*/, "").replace(/[^a-z]/g, "");
      const name = `docker.io/fleetlet-test/imported-${pod}:${token}`;
      names.push(name);
      const marker = `marker-${pod}`;
      drop(file, compress(write(runImage(marker, how), name), how));
      await nodeEvent("ImageImported", file);
      agent.writeManifest(`${pod}.yaml`, podManifest(pod, name, marker));
      await agent.waitPod(pod, "running from the imported image", running, 60_000);
    },
    90_000,
  );

  test("a truncated archive gives an ImageImportFailed event and is left in the folder", async () => {
    const name = `docker.io/fleetlet-test/imported-truncated:${token}`;
    names.push(name);
    const whole = ociArchive(runImage("marker-truncated", "none"), name);
    drop("truncated.tar", whole.subarray(0, Math.floor(whole.length / 2)));
    const ev = await nodeEvent("ImageImportFailed", "truncated.tar");
    expect(ev.type).toBe("Warning");
    expect(ev.message).toMatch(/truncated|past the end|missing/);
    expect(ctr(["images", "ls", "-q"])).not.toContain(name);
    expect(existsSync(join(imagesDir, "truncated.tar"))).toBe(true);
  }, 60_000);

  test("an archive that fails while unpacking leaves no blob behind", async () => {
    const name = `docker.io/fleetlet-test/imported-baddiff:${token}`;
    names.push(name);
    const wrong = `sha256:${"0".repeat(64)}`;
    const image = runImage("marker-baddiff", "gzip", wrong);
    drop("baddiff.tar", ociArchive(image, name));
    const ev = await nodeEvent("ImageImportFailed", "baddiff.tar");
    expect(ev.message).toContain("unpacks to");
    const content = ctr(["content", "ls", "-q"]);
    for (const blob of [image.manifest, image.config, image.layers.at(-1)]) {
      expect(content).not.toContain(blob?.digest as string);
    }
    expect(ctr(["leases", "ls", "-q"])).not.toContain("fleetlet-import");
  }, 60_000);
});
