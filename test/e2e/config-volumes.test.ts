// ConfigMaps, Secrets and every local volume type end to end: the compiled agent, the test bed's
// containerd, manifests and objects written to a real folder, what the container sees read with
// `fleetlet exec`. Needs root and the test bed (scripts/test starts both).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { configPods } from "../lib/config-pods.ts";
import { eventually } from "../lib/testbed.ts";

const agent = new TestAgent();
const img = agent.tb.busybox;
const {
  fullName,
  container,
  sh,
  eventsOf,
  waitEvent,
  running,
  b64,
  status,
  podManifest,
  configMap,
} = configPods(agent);

beforeAll(() => agent.start(), 30_000);
afterAll(() => agent.cleanup(), 60_000);

describe("ConfigMaps, Secrets and local volumes (needs root and the test bed)", () => {
  test("a pod reads a ConfigMap and a Secret of the folder through every volume type and env, with the expected modes", async () => {
    const objects = `${configMap("app-config", { greeting: "hello", "app.properties": "color=blue\n" }, "")}binaryData:
  blob: ${b64(Buffer.from([0, 1, 2, 255]))}
---
apiVersion: v1
kind: Secret
metadata:
  name: app-secret
type: Opaque
data:
  password: ${b64("s3cr3t")}
stringData:
  token: abc123
`;
    agent.writeManifest("objects.yaml", objects);
    const spec = `  volumes:
    - name: cfg
      configMap: { name: app-config, items: [{ key: greeting, path: sub/greeting.txt, mode: 0600 }, { key: blob, path: blob }] }
    - name: sec
      secret: { secretName: app-secret, defaultMode: 0400 }
    - name: info
      downwardAPI:
        items:
          - { path: name, fieldRef: { fieldPath: metadata.name } }
          - { path: labels, fieldRef: { fieldPath: metadata.labels } }
          - { path: mem, resourceFieldRef: { containerName: c, resource: limits.memory, divisor: 1Mi } }
    - name: proj
      projected:
        defaultMode: 0440
        sources:
          - configMap: { name: app-config, items: [{ key: app.properties, path: app.properties }] }
          - secret: { name: app-secret, items: [{ key: token, path: creds/token }] }
          - downwardAPI: { items: [{ path: uid, fieldRef: { fieldPath: metadata.uid } }] }
    - name: mem
      emptyDir: { medium: Memory }
    - name: small
      emptyDir: { medium: Memory, sizeLimit: 1Mi }
  containers:
    - name: c
      image: ${img}
      command: ["sleep", "3600"]
${`      resources: { limits: { memory: 64Mi } }
      env:
        - { name: GREETING, valueFrom: { configMapKeyRef: { name: app-config, key: greeting } } }
        - { name: PASSWORD, valueFrom: { secretKeyRef: { name: app-secret, key: password } } }
        - { name: ABSENT, valueFrom: { configMapKeyRef: { name: app-config, key: nope, optional: true } } }
      envFrom:
        - { prefix: CFG_, configMapRef: { name: app-config } }
        - { secretRef: { name: app-secret } }
      volumeMounts:
        - { name: cfg, mountPath: /cfg }
        - { name: sec, mountPath: /sec }
        - { name: info, mountPath: /info }
        - { name: proj, mountPath: /proj }
        - { name: mem, mountPath: /mem }
        - { name: small, mountPath: /small }
`}`;
    agent.writeManifest(
      "reader.yaml",
      podManifest("reader", spec, "  labels: { app: reader, tier: edge }\n"),
    );
    const pod = await running("reader");
    const read = (path: string) => sh("reader", `cat ${path}`);
    const mode = (path: string) => sh("reader", `stat -L -c %a ${path}`).trim();
    expect(read("/cfg/sub/greeting.txt")).toBe("hello");
    expect(mode("/cfg/sub/greeting.txt")).toBe("600");
    expect(sh("reader", "od -An -tx1 /cfg/blob").trim()).toBe("00 01 02 ff");
    expect(mode("/cfg/blob")).toBe("644");
    expect(sh("reader", "ls -a /cfg").split(/\s+/).sort()).toContain("..data");
    expect(read("/sec/password")).toBe("s3cr3t");
    expect(read("/sec/token")).toBe("abc123");
    expect(mode("/sec/password")).toBe("400");
    expect(read("/info/name")).toBe(fullName("reader"));
    expect(read("/info/labels")).toBe('app="reader"\ntier="edge"');
    expect(read("/info/mem")).toBe("64");
    expect(read("/proj/app.properties")).toBe("color=blue\n");
    expect(read("/proj/creds/token")).toBe("abc123");
    expect(read("/proj/uid")).toBe(pod.metadata.uid ?? "");
    expect(mode("/proj/creds/token")).toBe("440");
    // configMap, secret, downwardAPI and projected volumes are read-only in the container.
    expect(() => sh("reader", "touch /cfg/new")).toThrow("Read-only file system");
    // The environment of the container's process (sleep: a shell would pass on only the names
    // it can use, not "a.b").
    const env = sh("reader", "tr '\\0' '\\n' < /proc/1/environ");
    for (const line of [
      "GREETING=hello",
      "PASSWORD=s3cr3t",
      "CFG_greeting=hello",
      "CFG_app.properties=color=blue",
      "password=s3cr3t",
      "token=abc123",
    ]) {
      expect(env).toContain(`${line}\n`);
    }
    expect(env).not.toContain("ABSENT=");
    // Secrets, downward API, projected and Memory emptyDirs are tmpfs mounts, never the disk; a
    // Memory emptyDir is as large as the pod's memory limit, or its sizeLimit when smaller.
    const mounts = sh("reader", "cat /proc/mounts");
    for (const dir of ["/sec", "/info", "/proj", "/mem", "/small"]) {
      expect(mounts).toMatch(new RegExp(`^tmpfs ${dir} tmpfs `, "m"));
    }
    expect(mounts).not.toMatch(/^tmpfs \/cfg /m);
    expect(mounts).toMatch(/^tmpfs \/mem tmpfs [^ ]*size=65536k/m);
    expect(mounts).toMatch(/^tmpfs \/small tmpfs [^ ]*size=1024k/m);
    const write = agent.cli([
      "exec",
      fullName("reader"),
      "--",
      "sh",
      "-c",
      "dd if=/dev/zero of=/small/f bs=1024 count=2048",
    ]);
    expect(write.code).not.toBe(0);
    expect(write.stderr + write.stdout).toContain("No space left on device");
    // What a container writes into a Memory emptyDir is charged to its memory cgroup (the pod's).
    const shmem = () =>
      Number(
        /^(?:total_)?shmem (\d+)$/m.exec(
          sh(
            "reader",
            "cat /sys/fs/cgroup/memory/memory.stat 2>/dev/null || cat /sys/fs/cgroup/memory.stat",
          ),
        )?.[1],
      );
    const before = shmem();
    expect(sh("reader", "dd if=/dev/zero of=/mem/f bs=1024 count=8192 2>&1")).toContain(
      "8192+0 records out",
    );
    expect(shmem() - before).toBeGreaterThanOrEqual(8 * 1024 * 1024);
    sh("reader", "rm /mem/f");
  }, 60_000);

  test("a pod's fsGroup owns its volumes: a non-root container reads a 0400 Secret through its group, and what it writes in an emptyDir keeps the group", async () => {
    agent.writeManifest(
      "group-secret.yaml",
      `apiVersion: v1
kind: Secret
metadata:
  name: group-secret
stringData:
  key: only-the-group
`,
    );
    const spec = `  securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 2000 }
  volumes:
    - name: sec
      secret: { secretName: group-secret, defaultMode: 0400 }
    - name: data
      emptyDir: {}
  containers:
    - name: c
      image: ${img}
      command: ["sleep", "3600"]
      volumeMounts:
        - { name: sec, mountPath: /sec }
        - { name: data, mountPath: /data }
`;
    agent.writeManifest("grouped.yaml", podManifest("grouped", spec));
    await running("grouped");
    expect(sh("grouped", "id -u; id -G").split(/\s+/)).toEqual(
      expect.arrayContaining(["1000", "2000"]),
    );
    // Owned by root, 0400 as the spec says, plus the group's read: the container reads it.
    expect(sh("grouped", "stat -L -c '%u %g %a' /sec/key").trim()).toBe("0 2000 440");
    expect(sh("grouped", "cat /sec/key")).toBe("only-the-group");
    // The emptyDir: the group's, setgid, so a new file is the group's too.
    expect(sh("grouped", "stat -c '%g %a' /data").trim()).toBe("2000 2777");
    expect(sh("grouped", "touch /data/f && stat -c '%u %g' /data/f").trim()).toBe("1000 2000");
  }, 60_000);

  test("envFrom skips keys that are not environment variable names, with the kubelet's InvalidEnvironmentVariableNames event", async () => {
    agent.writeManifest("env-keys.yaml", configMap("env-keys", { good: "yes", "1bad": "no" }));
    const spec = `  containers:
${container("c", "sleep 3600", "      envFrom:\n        - configMapRef: { name: env-keys }\n")}`;
    agent.writeManifest("env-keys-pod.yaml", podManifest("envkeys", spec));
    await running("envkeys");
    const env = sh("envkeys", "tr '\\0' '\\n' < /proc/1/environ");
    expect(env).toContain("good=yes\n");
    expect(env).not.toContain("1bad");
    const event = await waitEvent(
      "an InvalidEnvironmentVariableNames event",
      (e) =>
        e.involvedObject.name === fullName("envkeys") &&
        e.reason === "InvalidEnvironmentVariableNames",
    );
    expect(event.type).toBe("Warning");
    expect(event.message).toBe(
      "Keys [1bad] from the EnvFrom configMap default/env-keys were skipped since they are considered invalid environment variable names.",
    );
  }, 60_000);

  test("an edited ConfigMap reaches the mounted file without a restart, never half written; a subPath mount keeps its content", async () => {
    const big = (c: string) => c.repeat(256 * 1024);
    const md5 = (s: string) => createHash("md5").update(s).digest("hex");
    agent.writeManifest("live-config.yaml", configMap("live", { data: big("a"), other: "one" }));
    const spec = `  volumes:
    - name: cfg
      configMap: { name: live }
    - name: scratch
      emptyDir: {}
  containers:
${container(
  "c",
  "while true; do md5sum /cfg/data | cut -c1-32 >> /scratch/seen 2>/dev/null || echo missing >> /scratch/seen; done",
  `      volumeMounts:
        - { name: cfg, mountPath: /cfg }
        - { name: cfg, mountPath: /pinned, subPath: other }
        - { name: scratch, mountPath: /scratch }
`,
)}`;
    agent.writeManifest("live.yaml", podManifest("live", spec));
    const before = await running("live");
    await eventually(
      "the reader to loop",
      () => sh("live", "wc -l < /scratch/seen").trim() !== "0",
    );
    agent.writeManifest("live-config.yaml", configMap("live", { data: big("b"), other: "two" }));
    const started = Date.now();
    await eventually(
      "the mounted file to change",
      () => sh("live", "head -c 1 /cfg/data") === "b",
      10_000,
      50,
    );
    // The e2e agent's sync period is 10 s; the change is written as soon as the file is read.
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(sh("live", "cat /cfg/other")).toBe("two");
    expect(sh("live", "cat /pinned")).toBe("one");
    const seen = new Set(sh("live", "cat /scratch/seen").trim().split("\n"));
    expect(seen).toContain(md5(big("a")));
    expect(seen).toContain(md5(big("b")));
    seen.delete(md5(big("a")));
    seen.delete(md5(big("b")));
    seen.delete("missing");
    expect([...seen]).toEqual([]);
    const after = await agent.pod("live");
    expect(status(after as Pod)?.restartCount).toBe(0);
    expect(status(after as Pod)?.containerID).toBe(status(before)?.containerID);
  }, 60_000);

  test("a pod whose ConfigMap is missing waits in ContainerCreating with FailedMount, and starts once the ConfigMap is written; an optional one starts at once", async () => {
    const spec = (optional: boolean) => `  volumes:
    - name: cfg
      configMap: { name: late${optional ? ", optional: true" : ""} }
  containers:
${container("c", "sleep 3600", "      volumeMounts: [{ name: cfg, mountPath: /cfg }]\n")}`;
    agent.writeManifest("waiter.yaml", podManifest("waiter", spec(false)));
    agent.writeManifest("optional.yaml", podManifest("optional", spec(true)));
    const failed = await waitEvent(
      "a FailedMount event",
      (e) => e.involvedObject.name === fullName("waiter") && e.reason === "FailedMount",
    );
    expect(failed.type).toBe("Warning");
    expect(failed.message).toBe(
      'MountVolume.SetUp failed for volume "cfg" : configmap "late" not found',
    );
    const waiting = await agent.pod("waiter");
    expect(waiting?.status?.phase).toBe("Pending");
    expect(status(waiting as Pod)?.state.waiting?.reason).toBe("ContainerCreating");
    await running("optional");
    expect(sh("optional", "ls /cfg | wc -l").trim()).toBe("0");
    agent.writeManifest("late.yaml", configMap("late", { key: "value" }));
    await running("waiter");
    expect(sh("waiter", "cat /cfg/key")).toBe("value");
    expect((await eventsOf("optional")).some((e) => e.reason === "FailedMount")).toBe(false);
  }, 60_000);
});
