// The Kubernetes-shaped objects carried by the protocol (Node, Pod with status, Event), as zod
// schemas that decode exactly the types of src/api: a mismatch fails to compile. Unknown fields
// are dropped, wrong types are refused.
import { z } from "zod";
import { objectMetaSchema, podManifestSchema } from "../api/index.ts";
import type * as node from "../api/node.ts";
import type * as api from "../api/types.ts";

const str = z.string();
const int = z.int();
const strMap = z.record(str, str);
const conditionStatus = z.enum(["True", "False", "Unknown"]);

// ---- Node ----

const nodeCondition = z.object({
  type: z.enum(["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"]),
  status: conditionStatus,
  lastHeartbeatTime: str.optional(),
  lastTransitionTime: str.optional(),
  reason: str.optional(),
  message: str.optional(),
});

const nodeSystemInfo = z.object({
  machineID: str,
  systemUUID: str,
  bootID: str,
  kernelVersion: str,
  osImage: str,
  containerRuntimeVersion: str,
  kubeletVersion: str,
  kubeProxyVersion: str,
  operatingSystem: str,
  architecture: str,
});

export const nodeStatusSchema = z.object({
  capacity: strMap.optional(),
  allocatable: strMap.optional(),
  conditions: z.array(nodeCondition).optional(),
  addresses: z
    .array(z.object({ type: z.enum(["InternalIP", "ExternalIP", "Hostname"]), address: str }))
    .optional(),
  nodeInfo: nodeSystemInfo.optional(),
  images: z.array(z.object({ names: z.array(str), sizeBytes: z.number() })).optional(),
});

export const nodeSchema = z.object({
  apiVersion: z.literal("v1"),
  kind: z.literal("Node"),
  metadata: objectMetaSchema,
  spec: z.object({ unschedulable: z.boolean().optional() }),
  status: nodeStatusSchema,
});

// ---- Pod status ----

const podCondition = z.object({
  type: z.enum([
    "PodScheduled",
    "PodReadyToStartContainers",
    "Initialized",
    "ContainersReady",
    "Ready",
    "DisruptionTarget",
  ]),
  status: conditionStatus,
  lastProbeTime: str.optional(),
  lastTransitionTime: str.optional(),
  reason: str.optional(),
  message: str.optional(),
});

const containerState = z.object({
  waiting: z.object({ reason: str.optional(), message: str.optional() }).optional(),
  running: z.object({ startedAt: str.optional() }).optional(),
  terminated: z
    .object({
      exitCode: int,
      signal: int.optional(),
      reason: str.optional(),
      message: str.optional(),
      startedAt: str.optional(),
      finishedAt: str.optional(),
      containerID: str.optional(),
    })
    .optional(),
});

const containerStatus = z.object({
  name: str,
  state: containerState,
  lastState: containerState,
  ready: z.boolean(),
  restartCount: int,
  image: str,
  imageID: str,
  containerID: str.optional(),
  started: z.boolean().optional(),
  allocatedResourcesStatus: z
    .array(
      z.object({
        name: str,
        resources: z
          .array(
            z.object({
              resourceID: str,
              health: z.enum(["Healthy", "Unhealthy", "Unknown"]).optional(),
            }),
          )
          .optional(),
      }),
    )
    .optional(),
});

const podIPs = z.array(z.object({ ip: str }));

const podStatusSchema = z.object({
  phase: z.enum(["Pending", "Running", "Succeeded", "Failed", "Unknown"]).optional(),
  conditions: z.array(podCondition).optional(),
  message: str.optional(),
  reason: str.optional(),
  hostIP: str.optional(),
  hostIPs: podIPs.optional(),
  podIP: str.optional(),
  podIPs: podIPs.optional(),
  startTime: str.optional(),
  qosClass: z.enum(["Guaranteed", "Burstable", "BestEffort"]).optional(),
  initContainerStatuses: z.array(containerStatus).optional(),
  containerStatuses: z.array(containerStatus).optional(),
});

/** A Pod as the agent runs it: the spec (decoded as a manifest) and its status. */
export const podSchema = podManifestSchema.extend({ status: podStatusSchema.optional() });

// ---- Event ----

export const eventSchema = z.object({
  apiVersion: z.literal("v1"),
  kind: z.literal("Event"),
  metadata: objectMetaSchema,
  involvedObject: z.object({
    kind: str.optional(),
    namespace: str.optional(),
    name: str.optional(),
    uid: str.optional(),
    apiVersion: str.optional(),
    resourceVersion: str.optional(),
    fieldPath: str.optional(),
  }),
  reason: str,
  message: str,
  type: z.enum(["Normal", "Warning"]),
  source: z.object({ component: str.optional(), host: str.optional() }),
  count: int,
  firstTimestamp: str,
  lastTimestamp: str,
});

// The decoded objects are exactly the api types; a drift fails to compile here.
type Exact<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const matches: [
  Exact<z.output<typeof nodeSchema>, node.Node>,
  Exact<z.output<typeof podSchema>, api.Pod>,
  Exact<z.output<typeof eventSchema>, api.Event>,
] = [true, true, true];
void matches;
