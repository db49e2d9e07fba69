// Pod manifests the e2e tests and benchmarks write into an agent's manifest folder.

/** A pod stopping within 1 s, on the host network unless `podNetwork`, with one container (`c`,
 * or `containerName`) running `command` (a YAML flow sequence); `spec` and `container` are more
 * lines of each, indented. */
function onePod(
  name: string,
  image: string,
  command: string,
  more: { spec?: string; container?: string; podNetwork?: boolean; containerName?: string } = {},
): string {
  return `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
spec:
${more.podNetwork ? "" : "  hostNetwork: true\n"}  terminationGracePeriodSeconds: 1
${more.spec ?? ""}  containers:
    - name: ${more.containerName ?? "c"}
      image: ${image}
      command: ${command}
${more.container ?? ""}`;
}

/** A host-network pod whose one container `c` sleeps for an hour; stops within 1 s. */
export function sleeperManifest(name: string, image: string): string {
  return onePod(name, image, '["sleep", "3600"]');
}

/** A host-network pod whose one container `c` runs `script` with sh; stops within 1 s. With
 * `data`, an emptyDir (which outlives the container's restarts) is mounted at /data; with
 * `hostDir`, that host folder at /h; `resources` is YAML flow (e.g. "{limits: {memory: 32Mi}}"). */
export function shellPodManifest(
  name: string,
  image: string,
  script: string,
  opts: {
    data?: boolean;
    hostDir?: string;
    restartPolicy?: "Always" | "OnFailure" | "Never";
    resources?: string;
  } = {},
): string {
  const restart = opts.restartPolicy ? `  restartPolicy: ${opts.restartPolicy}\n` : "";
  const volumes = [
    ...(opts.data ? ["    - name: data\n      emptyDir: {}\n"] : []),
    ...(opts.hostDir
      ? [`    - name: h\n      hostPath: { path: ${opts.hostDir}, type: Directory }\n`]
      : []),
  ];
  const mounts = [
    ...(opts.data ? ["        - { name: data, mountPath: /data }\n"] : []),
    ...(opts.hostDir ? ["        - { name: h, mountPath: /h }\n"] : []),
  ];
  return onePod(name, image, `["sh", "-c", ${JSON.stringify(script)}]`, {
    spec: restart + (volumes.length > 0 ? `  volumes:\n${volumes.join("")}` : ""),
    container:
      (mounts.length > 0 ? `      volumeMounts:\n${mounts.join("")}` : "") +
      (opts.resources !== undefined ? `      resources: ${opts.resources}\n` : ""),
  });
}

/** A pod on the pod network setting `sysctls` (name → value), whose container `c` runs
 * `sh -c command`; stops within 1 s. */
export function sysctlPodManifest(
  name: string,
  image: string,
  sysctls: Record<string, string>,
  command: string,
): string {
  const list = Object.entries(sysctls)
    .map(([n, v]) => `      - { name: ${n}, value: ${JSON.stringify(v)} }\n`)
    .join("");
  return onePod(name, image, `["sh", "-c", ${JSON.stringify(command)}]`, {
    podNetwork: true,
    spec: `  securityContext:\n    sysctls:\n${list}`,
  });
}

/** A pod on the pod network whose one container `main` runs `sh -c command`, with `resources`
 * as YAML flow (e.g. "{limits: {memory: 32Mi}}") when given; stops within 1 s. */
export function podNetworkShellManifest(
  name: string,
  image: string,
  command: string,
  resources?: string,
): string {
  return onePod(name, image, `["sh", "-c", ${JSON.stringify(command)}]`, {
    podNetwork: true,
    containerName: "main",
    ...(resources !== undefined && { container: `      resources: ${resources}\n` }),
  });
}

/** A host-network pod sleeping, with a readiness probe (`probe`: its handler, e.g.
 * `grpc: { port: 1234 }`) every second with a 3 s timeout. */
export function probedPodManifest(name: string, image: string, probe: string): string {
  return `apiVersion: v1
kind: Pod
metadata: { name: ${name} }
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
    - name: c
      image: ${image}
      command: ["sleep", "3600"]
      readinessProbe: { ${probe}, periodSeconds: 1, timeoutSeconds: 3 }
`;
}
