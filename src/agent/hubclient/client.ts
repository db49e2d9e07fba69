// The hub client: feeds the outbox from the agent (node reports, pod changes, events), and keeps
// one connection to the hub, reconnecting with exponential backoff and full jitter (base 1 s, cap
// 60 s; the attempt count resets after a connection that was welcomed and lasted a minute). On
// each welcome it converges the hub's view: a full node, the dropped-events count, every pod the
// hub has not seen as it is now, and deletes for pods that are gone, then a desired.ack reporting
// its desired state. The hub's desired state goes to the `desired` handler (the "api" pod
// source), whose answer is acknowledged; the client itself never touches pods.
import type { Node } from "../../api/node.ts";
import type { Event, Pod } from "../../api/types.ts";
import { AGENT_FEATURES, type Welcome } from "../../protocol/index.ts";
import { fullJitter } from "../../util/backoff.ts";
import { type Clock, sleepQuietly } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { type OpenStream, StreamMux } from "../streams/mux.ts";
import { type DesiredHandler, DesiredReports } from "./desired.ts";
import { JoinError } from "./join.ts";
import { fingerprint, type Outbox } from "./outbox.ts";
import { type Session, type SessionResult, startSession } from "./session.ts";
import type { Dial } from "./socket.ts";

export interface HubClientDeps {
  clock: Clock;
  logger: Logger;
  /** Uniform in [0, 1); jitter. */
  random?: () => number;
  /** The connect URL (ws:// or wss://). */
  connectUrl: string;
  nodeName: string;
  agentVersion: string;
  outbox: Outbox;
  /** The node credential (read, or obtained by joining); rejects with JoinError. */
  credential: () => Promise<string>;
  dial: Dial;
  /** The node as last built. */
  node: () => Node;
  /** A pod with its current status, or undefined when the agent no longer has it. */
  pod: (uid: string) => Pod | undefined;
  /** Every pod the agent has, with status. */
  pods: () => Pod[];
  /** Whether the agent has read all its pod sources (before that, absent pods are not gone). */
  podsSynced: () => boolean;
  /** Records an event about this node (the dropped-events report). */
  nodeEvent: (type: "Normal" | "Warning", reason: string, message: string) => void;
  /** The hub's desired state on this device; absent: the agent only reports. */
  desired?: DesiredHandler;
  /** Logs, exec and port-forward streams the hub opens (absent: none; the hub is told). */
  streams?: { open: OpenStream; maxStreams: number };
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  stableAfterMs?: number;
}

export interface HubClient {
  /** A node report worth sending. */
  nodeChanged(node: Node): void;
  /** A pod's status changed or the pod is gone (looked up through deps.pod). */
  podChanged(uid: string): void;
  /** An event was recorded or its count went up. */
  event(e: Event): void;
  /** The desired state's report changed (its conflicts): tell the hub. */
  desiredChanged(): void;
  /** One connection, from credential to close (the iteration tests call). */
  connectOnce(signal: AbortSignal): Promise<SessionResult & { permanent: boolean }>;
  /** Connects and reconnects until `signal` is aborted. */
  run(signal: AbortSignal): Promise<void>;
  /** Whether a connection is open and welcomed. */
  readonly connected: boolean;
}

/**
 * The wait before reconnect attempt `attempt` (0-based): full jitter over
 * min(max, base × 2^attempt); `permanent` failures (refused credential) wait the cap.
 */
export function reconnectDelay(
  attempt: number,
  permanent: boolean,
  opts: { baseMs: number; maxMs: number; random: () => number },
): number {
  if (permanent) return opts.maxMs;
  return fullJitter(attempt, opts.baseMs, opts.maxMs, opts.random);
}

export function createHubClient(deps: HubClientDeps): HubClient {
  const log = deps.logger;
  const outbox = deps.outbox;
  const baseMs = deps.backoffBaseMs ?? 1000;
  const maxMs = deps.backoffMaxMs ?? 60_000;
  const stableAfterMs = deps.stableAfterMs ?? 60_000;
  const random = deps.random ?? Math.random;
  let session: Session | undefined;
  const streams = deps.streams;
  const desired = new DesiredReports({
    ...(deps.desired !== undefined && { handler: deps.desired }),
    connectUrl: deps.connectUrl,
    log,
    nodeEvent: deps.nodeEvent,
  });

  const wake = () => session?.wake();

  function upsertIfChanged(pod: Pod): boolean {
    const uid = pod.metadata.uid;
    if (uid === undefined) return false;
    if (outbox.reported().get(uid) === fingerprint(pod)) return false;
    outbox.push({ type: "pod.upsert", uid, pod });
    return true;
  }

  function podChanged(uid: string): void {
    try {
      const pod = deps.pod(uid);
      if (pod !== undefined) upsertIfChanged(pod);
      else if (outbox.reported().has(uid)) outbox.push({ type: "pod.delete", uid });
      wake();
    } catch (err) {
      log.warn("cannot queue a pod change for the hub", { uid, error: err });
    }
  }

  function converge(w: Welcome): void {
    if (w.ackedSeq > outbox.lastSeq) {
      // The hub stored more of this stream than the outbox holds: its newest records never
      // reached the disk (a power cut). The hub would ignore seqs it has seen: go on above its
      // seq, and send every pod again, as what it last got from us is unknown.
      log.warn("the hub has more of this stream than the outbox; going on after the hub's seq", {
        ackedSeq: w.ackedSeq,
        lastSeq: outbox.lastSeq,
      });
      outbox.skipTo(w.ackedSeq);
      outbox.forgetReported();
    }
    if (w.ackedSeq === 0 || w.ackedSeq < outbox.ackedSeq) outbox.forgetReported();
    outbox.ack(Math.min(w.ackedSeq, outbox.lastSeq));
    outbox.push({ type: "node", node: deps.node() });
    const dropped = outbox.takeDropped();
    if (dropped > 0) {
      const message = `dropped ${dropped} events while disconnected`;
      log.warn(message, { dropped });
      deps.nodeEvent("Warning", "EventsDropped", `${message} from the hub (outbox full)`);
    }
    const current = deps.pods();
    for (const pod of current) upsertIfChanged(pod);
    if (deps.podsSynced()) {
      const present = new Set(current.map((p) => p.metadata.uid));
      for (const uid of [...outbox.reported().keys()]) {
        if (!present.has(uid)) outbox.push({ type: "pod.delete", uid });
      }
    }
  }

  async function connectOnce(signal: AbortSignal) {
    let credential: string;
    try {
      credential = await deps.credential();
    } catch (err) {
      const permanent = err instanceof JoinError && err.permanent;
      log.warn("cannot get a hub credential", { error: err });
      return { welcomed: false, durationMs: 0, code: 0, reason: (err as Error).message, permanent };
    }
    const s = startSession({
      clock: deps.clock,
      logger: log,
      dial: deps.dial,
      url: deps.connectUrl,
      credential,
      hello: {
        nodeName: deps.nodeName,
        agentVersion: deps.agentVersion,
        streamId: outbox.streamId,
        lastAckedSeq: outbox.ackedSeq,
        desiredGeneration: deps.desired?.generation ?? 0,
        features: [
          ...(deps.desired === undefined
            ? []
            : [AGENT_FEATURES.desiredPods, AGENT_FEATURES.desiredConfig]),
          ...(deps.streams === undefined ? [] : [AGENT_FEATURES.streams]),
        ],
      },
      outbox,
      onWelcome: (w) => {
        log.info("connected to the hub", {
          url: deps.connectUrl,
          ackedSeq: w.ackedSeq,
          pending: outbox.size,
        });
        converge(w);
        if (deps.desired !== undefined) s.report(desired.report());
      },
      onDesired: (d) => desired.take(d),
      ...(streams !== undefined && {
        extension: (conn) =>
          new StreamMux({
            conn,
            log: log.with({ component: "streams" }),
            open: streams.open,
            maxStreams: streams.maxStreams,
          }),
      }),
    });
    session = s;
    const onAbort = () => s.close(1000, "agent stopping");
    signal.addEventListener("abort", onAbort, { once: true });
    const result = await s.done;
    signal.removeEventListener("abort", onAbort);
    session = undefined;
    const code = result.error?.code;
    return { ...result, permanent: code === "unauthorized" || code === "revoked" };
  }

  return {
    nodeChanged(node) {
      outbox.push({ type: "node", node });
      wake();
    },
    podChanged,
    event(e) {
      outbox.push({ type: "event", event: e });
      wake();
    },
    desiredChanged() {
      if (deps.desired !== undefined) session?.report(desired.report());
    },
    connectOnce,
    async run(signal) {
      let attempt = 0;
      while (!signal.aborted) {
        const r = await connectOnce(signal);
        if (signal.aborted) break;
        if (r.welcomed && r.durationMs >= stableAfterMs) attempt = 0;
        const delay = reconnectDelay(attempt, r.permanent, { baseMs, maxMs, random });
        attempt++;
        log.info("disconnected from the hub; pods keep running", {
          code: r.code,
          reason: r.error?.reason ?? r.reason,
          retryInMs: delay,
        });
        await sleepQuietly(deps.clock, delay, signal);
      }
    },
    get connected() {
      return session?.welcomed ?? false;
    },
  };
}
