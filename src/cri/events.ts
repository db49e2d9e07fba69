// The runtime's container events as one stream: what happened to which container, as it happens.
// CRI GetContainerEvents where the runtime serves it (containerd 1.7 and later, CRI-O); where it
// answers UNIMPLEMENTED (containerd 1.6), containerd's own event service on the same socket
// (Events/Subscribe), filtered to the CRI plugin's namespace and to task exits, deletions and OOM
// kills.
// An event says only that something happened: readers take the container's state from the
// runtime's listing (the PLEG relists), never from the event.
//
// Invariants:
// - A stream ends exactly once for its handler (onEnd), with a CriError: Cancelled when the
//   caller's signal aborted, Unimplemented when the runtime serves neither kind of stream.
// - Exits of exec'd processes (probes, `fleetlet exec`) are not container events and are dropped.

import { decodeMessage, encodeMessage, type MessageSchema } from "./codec.ts";
import { CriError, criErrorFromGrpc, GrpcStatus } from "./errors.ts";
import type { GrpcTransport } from "./grpc-wire.ts";
import { CONTAINERD_EVENTS_PACKAGE, type loadCriProto } from "./proto.ts";

/** What happened to a container (or a sandbox: its pause container is a container too). */
export type ContainerEventKind = "created" | "started" | "exited" | "oom" | "deleted";

export interface ContainerEvent {
  /** The container's (or sandbox's) ID. */
  containerId: string;
  kind: ContainerEventKind;
}

/** Where events come from: CRI GetContainerEvents, or containerd's event service. */
export type ContainerEventSource = "cri" | "containerd";

export interface ContainerEventHandler {
  /** A stream was opened from `source` (called again if the runtime refuses CRI events and
   * containerd's are tried). */
  onOpen?(source: ContainerEventSource): void;
  onEvent(event: ContainerEvent): void;
  /** The stream ended; nothing is called after this. */
  onEnd(error: CriError): void;
}

export interface ContainerEvents {
  /** Streams the runtime's container events to `handler` until `signal` aborts, the runtime
   * ends the stream or the connection is lost. */
  containerEvents(handler: ContainerEventHandler, signal: AbortSignal): void;
}

/** containerd's namespace for everything its CRI plugin makes. */
const CRI_NAMESPACE = "k8s.io";

/**
 * The containerd event topics read: what each means for a container, and its message. A task's
 * exit comes twice: /tasks/exit when its process ended, /tasks/delete when the CRI plugin has
 * cleaned it up, a few ms before it records the exit (the exit event comes 17-81 ms before);
 * the second tells the reader that the listing is about to show it.
 */
const TOPICS: Readonly<Record<string, { kind: ContainerEventKind; message: string }>> = {
  "/tasks/exit": { kind: "exited", message: "TaskExit" },
  "/tasks/delete": { kind: "exited", message: "TaskDelete" },
  "/tasks/oom": { kind: "oom", message: "TaskOOM" },
};

const CRI_KINDS: Readonly<Record<string, ContainerEventKind>> = {
  CONTAINER_CREATED_EVENT: "created",
  CONTAINER_STARTED_EVENT: "started",
  CONTAINER_STOPPED_EVENT: "exited",
  CONTAINER_DELETED_EVENT: "deleted",
};

interface Stream {
  rpc: string;
  path: string;
  request: Buffer;
  decode(message: Buffer): ContainerEvent | undefined;
}

/** The two kinds of event stream, from the embedded protos. */
function streams(proto: ReturnType<typeof loadCriProto>): Record<ContainerEventSource, Stream> {
  const cri = proto.rpc("RuntimeService", "GetContainerEvents");
  const sub = proto.rpc("Events", "Subscribe", CONTAINERD_EVENTS_PACKAGE);
  const schema = (name: string) =>
    proto.schemas.get(`${CONTAINERD_EVENTS_PACKAGE}.${name}`) as MessageSchema;
  const envelope = schema("Envelope");
  const messages = new Map(Object.values(TOPICS).map((t) => [t.message, schema(t.message)]));
  const filters = Object.keys(TOPICS).map((t) => `namespace==${CRI_NAMESPACE},topic=="${t}"`);
  return {
    cri: {
      rpc: "GetContainerEvents",
      path: cri.path,
      request: Buffer.alloc(0),
      decode(message) {
        const e = decodeMessage(cri.response, message) as {
          containerId: string;
          containerEventType: string;
        };
        const kind = CRI_KINDS[e.containerEventType];
        return kind === undefined ? undefined : { containerId: e.containerId, kind };
      },
    },
    containerd: {
      rpc: "Subscribe",
      path: sub.path,
      request: encodeMessage(schema("SubscribeRequest"), { filters }),
      decode(message) {
        const env = decodeMessage(envelope, message) as {
          topic: string;
          event: { value: Buffer } | null;
        };
        const topic = TOPICS[env.topic];
        if (topic === undefined || env.event === null) return undefined;
        const task = decodeMessage(messages.get(topic.message) as MessageSchema, env.event.value);
        const { containerId, id = "" } = task as { containerId: string; id?: string };
        // `id` is the process: the container's own ID (or empty) for its main process, an
        // exec's ID otherwise.
        if (id !== "" && id !== containerId) return undefined;
        return { containerId, kind: topic.kind };
      },
    },
  };
}

/** The containerEvents() of a CRI client over `transport`. */
export function createContainerEvents(
  transport: GrpcTransport,
  proto: ReturnType<typeof loadCriProto>,
): ContainerEvents {
  const kinds = streams(proto);
  /** Once the runtime answered UNIMPLEMENTED to CRI events, containerd's are used. */
  let source: ContainerEventSource = "cri";

  const open = (from: ContainerEventSource, h: ContainerEventHandler, signal: AbortSignal) => {
    const s = kinds[from];
    let received = false;
    h.onOpen?.(from);
    transport.serverStream(
      s.path,
      s.request,
      {
        onMessage(message) {
          received = true;
          const event = s.decode(message);
          if (event !== undefined) h.onEvent(event);
        },
        onEnd(err) {
          if (from === "cri" && !received && err?.code === GrpcStatus.UNIMPLEMENTED) {
            source = "containerd";
            return open("containerd", h, signal);
          }
          const why = err ?? { code: GrpcStatus.UNAVAILABLE, details: "the runtime ended it" };
          h.onEnd(criErrorFromGrpc(s.rpc, why, "event stream"));
        },
      },
      signal,
    );
  };
  return {
    containerEvents(handler, signal) {
      if (signal.aborted) {
        const runtimeMessage = "cancelled by the caller before it was opened";
        handler.onEnd(
          new CriError({
            rpc: "GetContainerEvents",
            grpcStatus: GrpcStatus.CANCELLED,
            runtimeMessage,
          }),
        );
        return;
      }
      open(source, handler, signal);
    },
  };
}
