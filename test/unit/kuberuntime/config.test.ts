import { describe, expect, test } from "bun:test";
import {
  ANNOTATION_HASH,
  ContainerConfigError,
  containerAnnotations,
  containerLabels,
  containerResources,
  containerSecurityContext,
  criLogMessages,
  expand,
  expandCommandAndArgs,
  generateSandboxConfig,
  goDuration,
  hashContainer,
  makeEnvironment,
  milliCPUToQuota,
  milliCPUToShares,
  oomScoreAdj,
  podDNSConfig,
  readContainerAnnotations,
  sandboxLabels,
} from "../../../src/agent/kuberuntime/index.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const GiB = 1024 ** 3;
const envCtx = {
  nodeName: "node1",
  podIP: "10.99.0.7",
  podIPs: ["10.99.0.7"],
  hostIP: "192.168.1.2",
};

describe("expand()", () => {
  const vars = new Map([
    ["A", "x"],
    ["B", "y"],
  ]);
  const cases: [string, string][] = [
    ["$(A)", "x"],
    ["pre-$(A)-$(B)", "pre-x-y"],
    ["$(MISSING)", "$(MISSING)"],
    ["$$(A)", "$(A)"],
    ["$$", "$"],
    ["$A", "$A"],
    ["$(A", "$(A"],
    ["trailing $", "trailing $"],
  ];
  for (const [input, want] of cases) {
    test(`expands ${JSON.stringify(input)} to ${JSON.stringify(want)}`, () => {
      expect(expand(input, (n) => vars.get(n))).toBe(want);
    });
  }
});

describe("makeEnvironment()", () => {
  const pod = makePod({
    name: "cam",
    labels: { app: "cam" },
    metadata: { annotations: { team: "edge" } },
  });

  test("resolves fieldRefs and expands references to variables defined before", () => {
    const c = makeContainer({
      env: [
        { name: "POD", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
        { name: "NS", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
        { name: "UID", valueFrom: { fieldRef: { fieldPath: "metadata.uid" } } },
        { name: "NODE", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
        { name: "IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
        { name: "HOST", valueFrom: { fieldRef: { fieldPath: "status.hostIP" } } },
        { name: "APP", valueFrom: { fieldRef: { fieldPath: "metadata.labels['app']" } } },
        { name: "TEAM", valueFrom: { fieldRef: { fieldPath: "metadata.annotations['team']" } } },
        { name: "URL", value: "http://$(IP):80/$(POD)/$(LATER)" },
        { name: "LATER", value: "z" },
      ],
    });
    const env = Object.fromEntries(makeEnvironment(pod, c, envCtx).map((e) => [e.key, e.value]));
    expect(env).toEqual({
      POD: "cam",
      NS: "default",
      UID: "uid-default-cam",
      NODE: "node1",
      IP: "10.99.0.7",
      HOST: "192.168.1.2",
      APP: "cam",
      TEAM: "edge",
      URL: "http://10.99.0.7:80/cam/$(LATER)",
      LATER: "z",
    });
  });

  test("refuses an unsupported fieldPath with a ContainerConfigError naming the variable", () => {
    const c = makeContainer({
      env: [{ name: "X", valueFrom: { fieldRef: { fieldPath: "spec.bogus" } } }],
    });
    expect(() => makeEnvironment(pod, c, envCtx)).toThrow(ContainerConfigError);
    expect(() => makeEnvironment(pod, c, envCtx)).toThrow(/"X".*"spec.bogus"/);
  });

  test("expands command and args against the whole environment", () => {
    const c = makeContainer({
      command: ["sh", "-c"],
      args: ["echo $(MSG) $$(MSG)"],
      env: [{ name: "MSG", value: "hi" }],
    });
    expect(expandCommandAndArgs(c, makeEnvironment(pod, c, envCtx))).toEqual({
      command: ["sh", "-c"],
      args: ["echo hi $(MSG)"],
    });
  });
});

describe("containerResources()", () => {
  const burstable = (request?: string) =>
    makeContainer({
      resources: { requests: { cpu: "100m", ...(request ? { memory: request } : {}) } },
    });
  const cases: [string, Parameters<typeof makeContainer>[0], Record<string, number | undefined>][] =
    [
      [
        "best effort: minimum shares, no quota, oom 1000",
        {},
        { cpuShares: 2, cpuQuota: undefined, oomScoreAdj: 1000 },
      ],
      [
        "guaranteed: shares and quota from the limit, oom -997",
        { resources: { limits: { cpu: "500m", memory: "64Mi" } } },
        {
          cpuShares: 512,
          cpuQuota: 50_000,
          cpuPeriod: 100_000,
          memoryLimitInBytes: 64 * 1024 ** 2,
          oomScoreAdj: -997,
        },
      ],
      [
        "burstable with no memory request: oom 999",
        { resources: { requests: { cpu: "250m" } } },
        { cpuShares: 256, oomScoreAdj: 999 },
      ],
      [
        "burstable requesting a quarter of the node: oom 750",
        burstable("1Gi"),
        { oomScoreAdj: 750 },
      ],
      ["burstable requesting all the node: oom 3", burstable("4Gi"), { oomScoreAdj: 3 }],
      [
        "a tiny cpu limit gets the 1 ms minimum quota",
        { resources: { limits: { cpu: "1m" }, requests: { cpu: "1m" } } },
        { cpuQuota: 1000, cpuShares: 2 },
      ],
    ];
  for (const [name, spec, want] of cases) {
    test(name, () => {
      const c = makeContainer(spec);
      const pod = makePod({ containers: [c] });
      const got = containerResources(pod, c, 4 * GiB);
      for (const [k, v] of Object.entries(want))
        expect(got[k as keyof typeof got]).toBe(v as never);
    });
  }

  test("maps milli-CPU to shares and quota like kubelet", () => {
    expect([0, 1, 2, 1000, 300_000].map(milliCPUToShares)).toEqual([2, 2, 2, 1024, 262_144]);
    expect([0, 5, 1500].map((m) => milliCPUToQuota(m))).toEqual([0, 1000, 150_000]);
  });

  test("treats node-critical pods as guaranteed", () => {
    const c = makeContainer();
    expect(
      oomScoreAdj(makePod({ containers: [c], spec: { priority: 2_000_001_000 } }), c, GiB),
    ).toBe(-997);
  });
});

describe("containerSecurityContext()", () => {
  test("maps users, privileges and capabilities without the CAP_ prefix", () => {
    const c = makeContainer({
      securityContext: {
        runAsUser: 1000,
        privileged: true,
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
        capabilities: { add: ["NET_ADMIN", "cap_sys_time"], drop: ["ALL"] },
      },
    });
    const pod = makePod({
      containers: [c],
      spec: { securityContext: { runAsUser: 1, runAsGroup: 2, fsGroup: 3 }, hostPID: true },
    });
    expect(containerSecurityContext(pod, c)).toEqual({
      namespaceOptions: { network: "POD", pid: "NODE", ipc: "POD" },
      runAsUser: { value: 1000 },
      runAsGroup: { value: 2 },
      supplementalGroups: [3],
      privileged: true,
      readonlyRootfs: true,
      noNewPrivs: true,
      capabilities: { addCapabilities: ["NET_ADMIN", "SYS_TIME"], dropCapabilities: ["ALL"] },
    });
  });

  test("leaves no_new_privs off when allowPrivilegeEscalation is unset", () => {
    const c = makeContainer();
    expect(containerSecurityContext(makePod({ containers: [c] }), c).noNewPrivs).toBeUndefined();
  });
});

describe("generateSandboxConfig()", () => {
  const resolv =
    "# host\nnameserver 1.1.1.1\nnameserver 8.8.8.8\nsearch lan home\noptions ndots:2 edns0\n";

  test("writes metadata, labels, log directory, hostname and host port mappings", () => {
    const pod = makePod({
      name: "cam",
      labels: { app: "cam" },
      containers: [
        makeContainer({
          ports: [{ containerPort: 80, hostPort: 8080, protocol: "TCP" }, { containerPort: 81 }],
        }),
      ],
    });
    const cfg = generateSandboxConfig(pod, 2, {
      podLogsDir: "/var/log/pods",
      hostResolvConf: resolv,
    });
    expect(cfg.metadata).toEqual({
      name: "cam",
      namespace: "default",
      uid: "uid-default-cam",
      attempt: 2,
    });
    expect(cfg.hostname).toBe("cam");
    expect(cfg.logDirectory).toBe("/var/log/pods/default_cam_uid-default-cam");
    expect(cfg.labels).toEqual({
      app: "cam",
      "io.kubernetes.pod.name": "cam",
      "io.kubernetes.pod.namespace": "default",
      "io.kubernetes.pod.uid": "uid-default-cam",
      "io.fleetlet.managed": "true",
      "io.fleetlet.node": "node1",
    });
    expect(cfg.portMappings).toEqual([{ protocol: "TCP", containerPort: 80, hostPort: 8080 }]);
    expect(cfg.linux?.securityContext?.namespaceOptions).toEqual({
      network: "POD",
      pid: "CONTAINER",
      ipc: "POD",
    });
  });

  test("gives host-network pods no hostname and the node's network namespace", () => {
    const pod = makePod({ spec: { hostNetwork: true } });
    const cfg = generateSandboxConfig(pod, 0, { podLogsDir: "/l", hostResolvConf: "" });
    expect(cfg.hostname).toBe("");
    expect(cfg.linux?.securityContext?.namespaceOptions?.network).toBe("NODE");
  });

  test("passes the pod's sysctls to the runtime with dotted names", () => {
    const sysctls = [
      { name: "net.ipv4.ip_local_port_range", value: "1024 65000" },
      { name: "kernel/msgmax", value: "65536" },
      { name: "net/ipv4/conf/eth0.100/rp_filter", value: "1" },
    ];
    const pod = makePod({ spec: { containers: [], securityContext: { sysctls } } });
    const cfg = generateSandboxConfig(pod, 0, { podLogsDir: "/l", hostResolvConf: "" });
    expect(cfg.linux?.sysctls).toEqual({
      "net.ipv4.ip_local_port_range": "1024 65000",
      "kernel.msgmax": "65536",
      "net.ipv4.conf.eth0/100.rp_filter": "1",
    });
  });

  test("copies the host's DNS and merges the pod's dnsConfig", () => {
    const pod = makePod({
      spec: {
        dnsConfig: {
          nameservers: ["8.8.8.8", "9.9.9.9"],
          searches: ["corp"],
          options: [{ name: "ndots", value: "5" }, { name: "rotate" }],
        },
      },
    });
    expect(podDNSConfig(pod, resolv)).toEqual({
      servers: ["1.1.1.1", "8.8.8.8", "9.9.9.9"],
      searches: ["lan", "home", "corp"],
      options: ["ndots:5", "edns0", "rotate"],
    });
  });

  test("uses only the pod's dnsConfig under dnsPolicy None", () => {
    const pod = makePod({ spec: { dnsPolicy: "None", dnsConfig: { nameservers: ["10.0.0.1"] } } });
    expect(podDNSConfig(pod, resolv)).toEqual({ servers: ["10.0.0.1"], searches: [], options: [] });
  });
});

describe("labels and hash", () => {
  test("writes container labels and annotations that read back", () => {
    const c = makeContainer({
      name: "web",
      ports: [{ containerPort: 80, protocol: "TCP" }],
      lifecycle: { preStop: { exec: { command: ["sh"] } } },
    });
    const pod = makePod({ containers: [c] });
    expect(containerLabels(pod, c)).toEqual({
      "io.kubernetes.pod.name": "web",
      "io.kubernetes.pod.namespace": "default",
      "io.kubernetes.pod.uid": "uid-default-web",
      "io.kubernetes.container.name": "web",
      "io.fleetlet.managed": "true",
      "io.fleetlet.node": "node1",
    });
    const a = containerAnnotations(pod, c, 4);
    expect(a[ANNOTATION_HASH]).toBe(hashContainer(c));
    expect(readContainerAnnotations(a)).toEqual({
      hash: hashContainer(c),
      restartCount: 4,
      terminationMessagePath: "/dev/termination-log",
      terminationMessagePolicy: "File",
      terminationGracePeriodSeconds: 30,
      preStop: { exec: { command: ["sh"] } },
      ports: [{ containerPort: 80, protocol: "TCP" }],
    });
  });

  test("lets our labels win over the pod's own on the sandbox", () => {
    const pod = makePod({ labels: { "io.fleetlet.managed": "false" } });
    expect(sandboxLabels(pod)["io.fleetlet.managed"]).toBe("true");
  });

  test("changes the hash with the image or command but not with resources or key order", () => {
    const c = makeContainer({ command: ["a"] });
    expect(hashContainer(c)).toMatch(/^[0-9a-f]+$/);
    expect(hashContainer({ ...c, image: "busybox:2" })).not.toBe(hashContainer(c));
    expect(hashContainer({ ...c, command: ["b"] })).not.toBe(hashContainer(c));
    expect(hashContainer({ ...c, resources: { limits: { cpu: "1" } } })).toBe(hashContainer(c));
    const reordered = Object.fromEntries(Object.entries(c).reverse()) as typeof c;
    expect(hashContainer(reordered)).toBe(hashContainer(c));
  });
});

describe("goDuration()", () => {
  test("formats delays like Go durations", () => {
    expect([10_000, 80_000, 300_000].map(goDuration)).toEqual(["10s", "1m20s", "5m0s"]);
  });
});

describe("criLogMessages()", () => {
  test("joins partial lines and keeps the last lines", () => {
    const log =
      "2024-01-01T00:00:00Z stderr P boom \n2024-01-01T00:00:00Z stderr F at line 3\n2024-01-01T00:00:01Z stdout F bye\n";
    expect(criLogMessages(log, 80)).toBe("boom at line 3\nbye\n");
    expect(criLogMessages(log, 1)).toBe("bye\n");
  });
});
