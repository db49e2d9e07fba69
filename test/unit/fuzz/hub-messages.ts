// Valid messages of every type of the agent ↔ hub protocol, both ways, with rich enough objects
// that mutations reach deep fields: the seeds of the hub's near-valid inputs.
import fc from "fast-check";
import type { Json } from "./json-mutations.ts";

const meta = (name: string, uid?: string): Json => ({
  name,
  namespace: "default",
  ...(uid !== undefined && { uid }),
  labels: { app: "cam", "fleetlet.io/tier": "edge" },
  annotations: { note: "x" },
  creationTimestamp: "2026-01-01T00:00:00Z",
  ownerReferences: [{ apiVersion: "apps/v1", kind: "DaemonSet", name: "ds", uid: "d1" }],
});

const validNode: Json = {
  apiVersion: "v1",
  kind: "Node",
  metadata: { name: "cam-1", labels: { "kubernetes.io/arch": "arm64" } },
  spec: { unschedulable: false },
  status: {
    capacity: { cpu: "4", memory: "1Gi", pods: "110" },
    allocatable: { cpu: "4", memory: "900Mi" },
    conditions: [{ type: "Ready", status: "True", reason: "KubeletReady", message: "ok" }],
    addresses: [{ type: "InternalIP", address: "10.0.0.7" }],
    nodeInfo: {
      machineID: "m",
      systemUUID: "u",
      bootID: "b",
      kernelVersion: "6.1",
      osImage: "Debian",
      containerRuntimeVersion: "containerd://1.6",
      kubeletVersion: "fleetlet/0.1.0",
      kubeProxyVersion: "",
      operatingSystem: "linux",
      architecture: "arm64",
    },
    images: [{ names: ["busybox"], sizeBytes: 1000 }],
  },
};

function validPod(uid: string): Json {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: meta(`web-${uid}`, uid),
    spec: {
      nodeName: "cam-1",
      restartPolicy: "Always",
      containers: [
        {
          name: "web",
          image: "busybox",
          command: ["sh", "-c", "sleep 1000"],
          env: [{ name: "A", value: "1" }],
          ports: [{ containerPort: 80, protocol: "TCP" }],
          resources: { limits: { memory: "64Mi" }, requests: { cpu: "100m" } },
          livenessProbe: { exec: { command: ["true"] }, periodSeconds: 10 },
          volumeMounts: [{ name: "data", mountPath: "/data" }],
        },
      ],
      volumes: [{ name: "data", emptyDir: {} }],
    },
    status: {
      phase: "Running",
      conditions: [{ type: "Ready", status: "True" }],
      podIP: "10.88.0.2",
      qosClass: "Burstable",
      containerStatuses: [
        {
          name: "web",
          state: { running: { startedAt: "2026-01-01T00:00:00Z" } },
          lastState: { terminated: { exitCode: 137, reason: "OOMKilled" } },
          ready: true,
          restartCount: 1,
          image: "busybox",
          imageID: "sha256:1",
        },
      ],
    },
  };
}

const validEvent: Json = {
  apiVersion: "v1",
  kind: "Event",
  metadata: { name: "web.1", namespace: "default" },
  involvedObject: { kind: "Pod", name: "web", namespace: "default" },
  reason: "Started",
  message: "Started container web",
  type: "Normal",
  source: { component: "fleetlet", host: "cam-1" },
  count: 1,
  firstTimestamp: "2026-01-01T00:00:00Z",
  lastTimestamp: "2026-01-01T00:00:00Z",
};

export const helloOf = (node: string, features: string[] = ["streams"]): Json => ({
  type: "hello",
  protocolVersion: 1,
  nodeName: node,
  agentVersion: "0.1.0",
  streamId: "s1",
  lastAckedSeq: 0,
  desiredGeneration: 0,
  features,
});

/** One valid agent → hub message of each type (seq messages with seq `seq`). */
export const agentMessage = (seq: number): fc.Arbitrary<Json> =>
  fc.constantFrom<Json>(
    helloOf("cam-1"),
    { type: "node", seq, node: validNode },
    { type: "node.patch", seq, status: (validNode as { status: Json }).status },
    { type: "pod.upsert", seq, uid: `u${seq}`, pod: validPod(`u${seq}`) },
    { type: "pod.delete", seq, uid: `u${seq - 1}` },
    { type: "event", seq, event: validEvent },
    { type: "hb" },
    {
      type: "desired.ack",
      generation: 3,
      refused: { generation: 4, reason: "bad pod" },
      conflicts: [{ pod: "default/web", uid: "u1", message: "taken by a file pod" }],
    },
    { type: "stream.ready", id: 1, window: 65536 },
    { type: "stream.window", id: 1, bytes: 4096 },
    {
      type: "stream.close",
      id: 1,
      exitCode: 2,
      error: { code: 404, reason: "NotFound", message: "no" },
    },
  );

/** One valid hub → agent message of each type. */
export const hubMessage: fc.Arbitrary<Json> = fc.constantFrom<Json>(
  {
    type: "welcome",
    protocolVersion: 1,
    heartbeatIntervalMs: 10_000,
    ackedSeq: 0,
    maxMessageBytes: 1 << 20,
    rateLimit: { messagesPerSecond: 50, burst: 500 },
    streams: { maxStreams: 128, windowBytes: 262144, maxFrameBytes: 32768 },
  },
  { type: "ack", seq: 1 },
  { type: "hb" },
  { type: "desired", generation: 2, pods: [validPod("h1")], configMaps: [], secrets: [] },
  { type: "error", code: "rate-limited", reason: "slow down" },
  {
    type: "stream.open",
    kind: "exec",
    id: 1,
    namespace: "default",
    pod: "web",
    container: "web",
    window: 65536,
    command: ["sh"],
    tty: true,
    stdin: true,
  },
  {
    type: "stream.open",
    kind: "attach",
    id: 3,
    namespace: "default",
    pod: "web",
    container: "web",
    window: 65536,
    tty: true,
    stdin: true,
    stdout: true,
  },
  {
    type: "stream.open",
    kind: "logs",
    id: 2,
    namespace: "default",
    pod: "web",
    window: 1,
    follow: true,
  },
  { type: "stream.resize", id: 1, width: 80, height: 24 },
  { type: "stream.eof", id: 1 },
);

/** A valid desired state for node cam-1 (generation 7): a hub pod, a ConfigMap and a Secret. */
export const validDesired: fc.Arbitrary<Json> = fc.constant({
  type: "desired",
  generation: 7,
  pods: [{ ...(validPod("h1") as Record<string, Json>), status: {} }],
  configMaps: [
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "cfg", namespace: "default" },
      data: { a: "1" },
    },
  ],
  secrets: [
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "s", namespace: "default" },
      type: "Opaque",
      data: { p: "cGFzcw==" },
    },
  ],
});
