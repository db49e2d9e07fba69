// ConfigMaps, Secrets and volumes end to end where things go wrong or come and go: pull secrets,
// subPaths that try to leave their volume, malformed objects, tmpfs mounts across pod removal and
// agent restarts. Needs root and the test bed (scripts/test starts both).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { configPods } from "../lib/config-pods.ts";
import { eventually } from "../lib/testbed.ts";

const agent = new TestAgent();
const { container, sh, eventsOf, waitEvent, running, b64, status, podManifest, configMap } =
  configPods(agent);

beforeAll(() => agent.start(), 30_000);
afterAll(() => agent.cleanup(), 60_000);

describe("ConfigMaps, Secrets and volumes: credentials, escapes, bad input, cleanup (needs root and the test bed)", () => {
  test("a pod pulls from the password registry with an imagePullSecrets Secret of the folder, and no credentials of the node", async () => {
    const auth = b64(`${agent.tb.authUser}:${agent.tb.authPassword}`);
    const dockerConfig = JSON.stringify({ auths: { [agent.tb.authRegistry]: { auth } } });
    agent.writeManifest(
      "pull.yaml",
      `apiVersion: v1
kind: Secret
metadata:
  name: regcred
type: kubernetes.io/dockerconfigjson
data:
  .dockerconfigjson: ${b64(dockerConfig)}
---
${podManifest(
  "private",
  `  imagePullSecrets: [{ name: regcred }]
  containers:
    - name: c
      image: ${agent.tb.authBusybox}
      imagePullPolicy: Always
      command: ["sleep", "3600"]
`,
)}`,
    );
    await running("private");
    const pulled = (await eventsOf("private")).find((e) => e.reason === "Pulled");
    expect(pulled?.message).toStartWith(`Successfully pulled image "${agent.tb.authBusybox}"`);
    expect(agent.output).not.toContain(agent.tb.authPassword);
  }, 60_000);

  test("a subPath that leaves its volume through '..' or a symlink is refused with the kubelet's errors", async () => {
    const spec = `  volumes:
    - name: w
      emptyDir: {}
  initContainers:
${container("mk", "ln -s / /w/escape; mkdir -p /w/ok", "      volumeMounts: [{ name: w, mountPath: /w }]\n")}
  containers:
${container(
  "dots",
  "sleep 3600",
  `      env: [{ name: UP, value: ".." }]
      volumeMounts: [{ name: w, mountPath: /up, subPathExpr: "$(UP)/x" }]
`,
)}${container("link", "sleep 3600", "      volumeMounts: [{ name: w, mountPath: /host, subPath: escape }]\n")}${container(
  "c",
  "sleep 3600",
  "      volumeMounts: [{ name: w, mountPath: /ok, subPath: ok }]\n",
)}`;
    agent.writeManifest("escape.yaml", podManifest("escape", spec));
    const pod = await agent.waitPod("escape", "refusing both subPaths", (p) =>
      ["dots", "link"].every(
        (c) => status(p, c)?.state.waiting?.reason === "CreateContainerConfigError",
      ),
    );
    expect(status(pod, "dots")?.state.waiting?.message).toBe(
      "unable to provision SubPath `../x`: must not contain '..'",
    );
    expect(status(pod, "link")?.state.waiting?.message).toBe(
      'failed to prepare subPath for volumeMount "w" of container "link"',
    );
    await agent.waitPod(
      "escape",
      "running the safe subPath",
      (p) => status(p, "c")?.state.running !== undefined,
    );
    expect(sh("escape", "ls -a /ok | wc -l").trim()).toBe("2");
  }, 60_000);

  test("a malformed ConfigMap or Secret is an event naming the file and the field, and the pods reading the last valid version keep running", async () => {
    agent.writeManifest("kept.yaml", configMap("kept", { key: "good" }));
    const spec = `  volumes:
    - name: cfg
      configMap: { name: kept }
  containers:
${container("c", "sleep 3600", "      volumeMounts: [{ name: cfg, mountPath: /cfg }]\n")}`;
    agent.writeManifest("keeper.yaml", podManifest("keeper", spec));
    const before = await running("keeper");
    const path = `${agent.manifests}/kept.yaml`;
    const cases: [string, string][] = [
      [
        configMap("kept", { "bad key": "x" }),
        'configmap "kept": data[bad key]: Invalid value: "bad key": a valid config key',
      ],
      [
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\nbinaryData:\n  key: not*base64\n",
        'configmap "kept": binaryData[key]: Invalid value: "<secret contents redacted>": illegal base64 data at input byte 3',
      ],
      [
        configMap("kept", { key: "x".repeat(1024 * 1024 + 1) }),
        'configmap "kept": data: Too long: may not be more than 1048576 bytes',
      ],
    ];
    for (const [text, message] of cases) {
      agent.writeManifest("kept.yaml", text);
      const e = await waitEvent(
        `an event for ${message}`,
        (x) => x.reason === "InvalidManifest" && x.message.includes(message),
      );
      expect(e.type).toBe("Warning");
      expect(e.message).toStartWith(`manifest ${path}: `);
      expect(e.message).toEndWith("its last valid version keeps running");
    }
    agent.writeManifest(
      "secret.yaml",
      "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n  k: abc\n",
    );
    await waitEvent(
      "an event for the bad base64 of a Secret",
      (x) =>
        x.reason === "InvalidManifest" &&
        x.message ===
          `manifest ${agent.manifests}/secret.yaml: secret "s": data[k]: Invalid value: "<secret contents redacted>": illegal base64 data at input byte 0`,
    );
    const after = await running("keeper");
    expect(status(after)?.containerID).toBe(status(before)?.containerID);
    expect(status(after)?.restartCount).toBe(0);
    expect(sh("keeper", "cat /cfg/key")).toBe("good");
  }, 60_000);

  test("tmpfs volumes are unmounted with their pod; a restarted agent keeps them under running containers and cleans up those of pods removed meanwhile", async () => {
    const secretPod = (name: string) =>
      podManifest(
        name,
        `  volumes: [{ name: s, secret: { secretName: tmp-secret } }]
  containers:
${container("c", "sleep 3600", "      volumeMounts: [{ name: s, mountPath: /s }]\n")}`,
      );
    const file = (...pods: string[]) =>
      [
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: tmp-secret\nstringData:\n  k: v\n",
        ...pods.map(secretPod),
      ].join("---\n");
    agent.writeManifest("tmp.yaml", file("tmpa", "tmpb"));
    const a = await running("tmpa");
    const b = await running("tmpb");
    const podMounts = (pod: Pod) => agent.mountsUnder(`${agent.rootDir}/pods/${pod.metadata.uid}`);
    expect(podMounts(a)).toHaveLength(1);
    expect(podMounts(b)).toHaveLength(1);
    await agent.stop("SIGKILL");
    // While the agent is down, tmpb goes away.
    agent.writeManifest("tmp.yaml", file("tmpa"));
    await agent.start();
    await eventually("tmpb's tmpfs to be unmounted", async () => podMounts(b).length === 0, 20_000);
    const again = await running("tmpa");
    expect(podMounts(a)).toHaveLength(1);
    expect(status(again)?.containerID).toBe(status(a)?.containerID);
    expect(sh("tmpa", "cat /s/k")).toBe("v");
    agent.removeManifest("tmp.yaml");
    await eventually("tmpa's tmpfs to be unmounted", async () => podMounts(a).length === 0, 20_000);
  }, 90_000);
});
