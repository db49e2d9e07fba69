import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, realpathSync } from "node:fs";
import { join } from "node:path";
import type { ConfigMap } from "../../../src/api/index.ts";
import type { ContainerConfig, CreateContainerRequest } from "../../../src/cri/index.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";
import { makeHarness } from "./harness.ts";

let h: ReturnType<typeof makeHarness>;
afterEach(() => h?.cleanup());

const created = () =>
  (h.cri.callsOf("createContainer") as CreateContainerRequest[]).map(
    (r) => r.config as ContainerConfig,
  );
const cfg: ConfigMap = {
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "cfg", namespace: "default" },
  data: { key: "v" },
};

describe("container mounts of the pod's volumes", () => {
  test("mount configMap volumes read-only, emptyDirs as written, and subPaths through the volume manager's bind", async () => {
    h = makeHarness({ objects: { configMap: () => cfg, secret: () => undefined } });
    const pod = makePod({
      name: "web",
      containers: [
        makeContainer({
          name: "app",
          env: [{ name: "SUB", value: "data" }],
          volumeMounts: [
            { name: "cfg", mountPath: "/cfg" },
            { name: "w", mountPath: "/w", readOnly: true },
            { name: "w", mountPath: "/sub", subPathExpr: "$(SUB)/x" },
          ],
        }),
      ],
      spec: {
        containers: [],
        volumes: [
          { name: "cfg", configMap: { name: "cfg", defaultMode: 0o644 } },
          { name: "w", emptyDir: {} },
        ],
      },
    });
    expect((await h.sync(pod)).errors).toEqual([]);
    const root = join(h.deps.rootDir, "pods", "uid-default-web");
    const mounts = created()[0]?.mounts?.slice(0, 3);
    expect(mounts).toEqual([
      {
        containerPath: "/cfg",
        hostPath: join(root, "volumes/kubernetes.io~configmap/cfg"),
        readonly: true,
      },
      {
        containerPath: "/w",
        hostPath: join(root, "volumes/kubernetes.io~empty-dir/w"),
        readonly: true,
      },
      { containerPath: "/sub", hostPath: join(root, "volume-subpaths/w/app/2"), readonly: false },
    ]);
    expect(h.mounter.binds.get(join(root, "volume-subpaths/w/app/2"))).toBe(
      join(realpathSync(join(root, "volumes/kubernetes.io~empty-dir/w")), "data/x"),
    );
  });

  test("a subPathExpr with a missing variable or a '..' after expansion is a CreateContainerConfigError", async () => {
    h = makeHarness();
    const pod = (sub: string) =>
      makePod({
        name: sub === "$(NONE)" ? "none" : "dots",
        containers: [
          makeContainer({
            name: "app",
            env: [{ name: "UP", value: ".." }],
            volumeMounts: [{ name: "w", mountPath: "/w", subPathExpr: sub }],
          }),
        ],
        spec: { containers: [], volumes: [{ name: "w", emptyDir: {} }] },
      });
    const none = await h.sync(pod("$(NONE)"));
    expect(none.waiting.get("app")).toEqual({
      reason: "CreateContainerConfigError",
      message: "missing value for NONE",
    });
    const dots = await h.sync(pod("$(UP)/etc"));
    expect(dots.waiting.get("app")).toEqual({
      reason: "CreateContainerConfigError",
      message: "unable to provision SubPath `../etc`: must not contain '..'",
    });
    expect(h.mounter.calls.filter((c) => c.startsWith("bind"))).toEqual([]);
  });

  test("a volume the pod's manager did not set up is refused by name", async () => {
    h = makeHarness();
    const pod = makePod({
      name: "web",
      containers: [
        makeContainer({ name: "app", volumeMounts: [{ name: "gone", mountPath: "/g" }] }),
      ],
    });
    mkdirSync(h.deps.rootDir, { recursive: true });
    const result = await h.sync(pod);
    expect(result.waiting.get("app")?.message).toBe(
      'cannot find volume "gone" to mount into container "app"',
    );
  });
});
