// The agent's event recorder, after kubelet's EventRecorder + EventCorrelator: events about one
// object with the same type, reason and message are aggregated into one v1 Event whose count and
// lastTimestamp grow. Invariants: at most `max` events are kept; when full, the event updated
// least recently is dropped and counted in `dropped`. Nothing here blocks or throws to the caller.
import type { Event, EventType, ObjectReference, Time } from "../../api/types.ts";
import type { Clock } from "../../util/clock.ts";
import { type Logger, nullLogger } from "../../util/log.ts";

/** The object an event is about; `kind` is "Pod" or "Manifest" (see manifestRef). */
export interface InvolvedObject {
  kind: string;
  namespace: string;
  name: string;
  uid?: string;
  /** e.g. "spec.containers{web}" when the event is about one container. */
  fieldPath?: string;
}

export interface EventRecorder {
  /** Records an event, or counts a repeat of an identical one; notifies subscribers. */
  event(involved: InvolvedObject, type: EventType, reason: string, message: string): void;
  /** Kept events, oldest update first, optionally filtered. Returns copies. */
  list(filter?: (e: Event) => boolean): Event[];
  /** Calls `fn` with every new or updated event; returns an unsubscribe function. */
  subscribe(fn: (e: Event) => void): () => void;
  /** Events dropped because the ring was full. */
  readonly dropped: number;
}

export interface EventRecorderOptions {
  clock: Clock;
  /** source.host of every event. */
  nodeName: string;
  /** Ring size; 1000 by default. */
  max?: number;
  /** source.component; "fleetlet" by default. */
  component?: string;
  /** Reports subscribers that throw. */
  log?: Logger;
}

/** RFC 3339 in UTC with second precision, as v1 Time is serialized. */
export function formatTime(ms: number): Time {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

function aggregateKey(o: InvolvedObject, type: EventType, reason: string, message: string): string {
  return JSON.stringify([
    o.kind,
    o.namespace,
    o.name,
    o.uid ?? "",
    o.fieldPath ?? "",
    type,
    reason,
    message,
  ]);
}

/** The last path segment, so that a manifest path makes a valid event name prefix. */
function namePrefix(name: string): string {
  return name.slice(name.lastIndexOf("/") + 1) || "unknown";
}

function toReference(o: InvolvedObject): ObjectReference {
  const ref: ObjectReference = { kind: o.kind, namespace: o.namespace, name: o.name };
  if (o.kind === "Pod") ref.apiVersion = "v1";
  if (o.uid !== undefined) ref.uid = o.uid;
  if (o.fieldPath !== undefined) ref.fieldPath = o.fieldPath;
  return ref;
}

function newEvent(
  name: string,
  involved: InvolvedObject,
  what: { type: EventType; reason: string; message: string },
  source: { component: string; host: string },
  now: number,
): Event {
  return {
    apiVersion: "v1",
    kind: "Event",
    metadata: { name, namespace: involved.namespace },
    involvedObject: toReference(involved),
    ...what,
    source: { ...source },
    count: 1,
    firstTimestamp: formatTime(now),
    lastTimestamp: formatTime(now),
  };
}

export function createEventRecorder(opts: EventRecorderOptions): EventRecorder {
  return new Recorder(opts);
}

class Recorder implements EventRecorder {
  private readonly clock: Clock;
  private readonly max: number;
  private readonly log: Logger;
  /** source of every event. */
  private readonly source: { component: string; host: string };
  /** Kept events by aggregateKey. Insertion order is update order: a repeat is deleted and
   * re-inserted at the end. */
  private readonly events = new Map<string, Event>();
  private readonly subscribers = new Set<(e: Event) => void>();
  /** The nanos of the last event name given (names stay unique). */
  private lastNanos = 0n;
  private droppedEvents = 0;

  constructor(opts: EventRecorderOptions) {
    const max = opts.max ?? 1000;
    if (!Number.isInteger(max) || max < 1) {
      throw new Error(`event recorder max must be a positive integer, got ${max}`);
    }
    this.clock = opts.clock;
    this.max = max;
    this.log = opts.log ?? nullLogger;
    this.source = { component: opts.component ?? "fleetlet", host: opts.nodeName };
  }

  get dropped(): number {
    return this.droppedEvents;
  }

  event(involved: InvolvedObject, type: EventType, reason: string, message: string): void {
    const { events } = this;
    const now = this.clock.now();
    const key = aggregateKey(involved, type, reason, message);
    const existing = events.get(key);
    let e: Event;
    if (existing !== undefined) {
      events.delete(key);
      e = { ...existing, count: existing.count + 1, lastTimestamp: formatTime(now) };
    } else {
      const name = this.uniqueName(involved.name, now);
      e = newEvent(name, involved, { type, reason, message }, this.source, now);
    }
    events.set(key, e);
    while (events.size > this.max) {
      const oldest = events.keys().next().value;
      if (oldest === undefined) break;
      events.delete(oldest);
      this.droppedEvents++;
    }
    this.notify(e);
  }

  list(filter?: (e: Event) => boolean): Event[] {
    const all = [...this.events.values()];
    return (filter ? all.filter(filter) : all).map((e) => structuredClone(e));
  }

  subscribe(fn: (e: Event) => void): () => void {
    this.subscribers.add(fn);
    return () => this.subscribers.delete(fn);
  }

  /** kubelet names events "<object>.<unix nanos in hex>"; kept strictly increasing. */
  private uniqueName(involvedName: string, now: number): string {
    let nanos = BigInt(now) * 1_000_000n;
    if (nanos <= this.lastNanos) nanos = this.lastNanos + 1n;
    this.lastNanos = nanos;
    return `${namePrefix(involvedName)}.${nanos.toString(16)}`;
  }

  private notify(e: Event): void {
    for (const fn of this.subscribers) {
      try {
        fn(structuredClone(e));
      } catch (err) {
        this.log.warn("event subscriber failed", { reason: e.reason, error: err });
      }
    }
  }
}

/** The pod a manifest file is known to define, if it could be parsed that far. */
export interface ManifestPod {
  namespace: string;
  name: string;
  uid?: string;
}

/**
 * The involved object for an event about a manifest file: the pod it defines when known (so that
 * `describe pod` shows it), else kind "Manifest" named by the file's name in the manifest folder
 * (`manifest/web.yaml`; the event's message gives the whole path) in namespace "default".
 */
export function manifestRef(path: string, pod?: ManifestPod): InvolvedObject {
  if (pod !== undefined) {
    const ref: InvolvedObject = { kind: "Pod", namespace: pod.namespace, name: pod.name };
    if (pod.uid !== undefined) ref.uid = pod.uid;
    return ref;
  }
  return { kind: "Manifest", namespace: "default", name: namePrefix(path) };
}

/** The involved object for an event about a pod, or about one (init) container of it. */
export function podRef(
  pod: { metadata: { namespace?: string; name: string; uid?: string } },
  container?: { name: string; init?: boolean },
): InvolvedObject {
  const ref: InvolvedObject = {
    kind: "Pod",
    namespace: pod.metadata.namespace ?? "default",
    name: pod.metadata.name,
  };
  if (pod.metadata.uid !== undefined) ref.uid = pod.metadata.uid;
  if (container !== undefined) {
    const field = container.init ? "initContainers" : "containers";
    ref.fieldPath = `spec.${field}{${container.name}}`;
  }
  return ref;
}
