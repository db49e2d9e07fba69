// The hub client: feeds the outbox from the agent (node reports, pod changes, events), and keeps
// one connection to the hub, reconnecting with exponential backoff and full jitter (base 1 s, cap
// 60 s; the attempt count resets after a connection that was welcomed and lasted a minute). Given
// several hub URLs (replicas of one hub), it tries them in rounds (rounds.ts): each URL once, in a
// fresh random order, the next one at once after a failed connect, the backoff between rounds. On
// each welcome it converges the hub's view: a full node, the dropped-events count, every pod the
// hub has not seen as it is now, and deletes for pods that are gone, then a desired.ack reporting
// its desired state; unless the welcome's seq shows that the hub's record of the stream differs
// from the outbox's: then the outbox starts a new stream and the client dials again at once. The
// hub's desired state goes to the `desired` handler (the "api" pod source), whose answer is
// acknowledged; the client itself never touches pods.
import type { Node } from "../../api/node.ts";
import type { Event, Pod } from "../../api/types.ts";
import type { DeviceHealth } from "../../protocol/health.ts";
import { AGENT_FEATURES, type Welcome } from "../../protocol/index.ts";
import type { UpdateMessage, UpdateStatus } from "../../protocol/update.ts";
import { fullJitter } from "../../util/backoff.ts";
import { type Clock, sleepQuietly } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { type OpenStream, StreamMux } from "../streams/mux.ts";
import { type DesiredHandler, DesiredReports } from "./desired.ts";
import { hubEndpoints, JoinError } from "./join.ts";
import { fingerprint, type Outbox } from "./outbox.ts";
import { runRound, shuffled } from "./rounds.ts";
import { type Session, type SessionResult, startSession } from "./session.ts";
import type { Dial } from "./socket.ts";

export interface HubClientDeps {
  clock: Clock;
  logger: Logger;
  /** Uniform in [0, 1); jitter and the order of the hub URLs. */
  random?: () => number;
  /** The hub's URLs as configured (ws, wss, http or https; at least one): its replicas. */
  hubUrls: readonly string[];
  nodeName: string;
  agentVersion: string;
  outbox: Outbox;
  /** The node credential (read, or obtained by joining the hub at `hubUrl`); rejects with
   * JoinError. */
  credential: (hubUrl: string) => Promise<string>;
  /** Saves a rotated credential for the next connections (absent: the agent never rotates). */
  saveCredential?: (credential: string) => void;
  /** Where the credential is kept, to say what to do when the hub refuses it. */
  credentialPath?: string;
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
  /** Called after each welcome (the health reporter sends its latest reading). */
  onWelcomed?: () => void;
  /** Takes the updates the hub offers (absent: the agent does not announce "updates"). */
  onUpdate?: (offer: UpdateMessage) => void;
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
  /** Sends a health report if a connection is welcomed; whether it was sent. */
  sendHealth(health: DeviceHealth): boolean;
  /** Sends an update.status if a connection is welcomed; whether it was sent. */
  sendUpdateStatus(status: Omit<UpdateStatus, "type">): boolean;
  /** One connection to `hubUrl` (default: the first), from credential to close (the iteration
   * tests call). */
  connectOnce(
    signal: AbortSignal,
    hubUrl?: string,
  ): Promise<SessionResult & { permanent: boolean }>;
  /** Connects and reconnects until `signal` is aborted. */
  run(signal: AbortSignal): Promise<void>;
  /** Whether a connection is open and welcomed. */
  readonly connected: boolean;
  /** The hub URL last welcomed (the first one before any). */
  readonly hubUrl: string;
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
  return new Client(deps);
}

class Client implements HubClient {
  private readonly log: Logger;
  private readonly outbox: Outbox;
  private readonly baseMs: number;
  private readonly maxMs: number;
  /** A welcomed connection that lasted this long resets the attempt count. */
  private readonly stableAfterMs: number;
  private readonly random: () => number;
  /** The open connection, from dial to close; undefined between connections. */
  private session: Session | undefined;
  /** The desired state's reports (generation, conflicts) and its handler. */
  private readonly desired: DesiredReports;
  /** The last session closed to start a new stream: the next dial waits the base back-off only
   * (a hub that keeps answering with a seq the outbox cannot have is dialled at that pace). */
  private redialAtOnce = false;
  /** Cancels the next look for gone pods, while the pod sources are not all seen yet. */
  private cancelDeleteGone: (() => void) | undefined;
  /** The hub URL last welcomed; the first one before any. */
  private welcomedUrl: string;

  constructor(private readonly deps: HubClientDeps) {
    this.log = deps.logger;
    this.outbox = deps.outbox;
    this.baseMs = deps.backoffBaseMs ?? 1000;
    this.maxMs = deps.backoffMaxMs ?? 60_000;
    this.stableAfterMs = deps.stableAfterMs ?? 60_000;
    this.random = deps.random ?? Math.random;
    const first = deps.hubUrls[0];
    if (first === undefined) throw new Error("the hub client needs at least one hub URL");
    this.welcomedUrl = first;
    this.desired = new DesiredReports({
      ...(deps.desired !== undefined && { handler: deps.desired }),
      log: this.log,
      nodeEvent: deps.nodeEvent,
    });
  }

  get connected(): boolean {
    return this.session?.welcomed ?? false;
  }

  get hubUrl(): string {
    return this.welcomedUrl;
  }

  nodeChanged(node: Node): void {
    this.outbox.push({ type: "node", node });
    this.wake();
  }

  podChanged(uid: string): void {
    try {
      const pod = this.deps.pod(uid);
      if (pod !== undefined) this.upsertIfChanged(pod);
      else if (this.outbox.reported().has(uid)) this.outbox.push({ type: "pod.delete", uid });
      this.wake();
    } catch (err) {
      this.log.warn("cannot queue a pod change for the hub", { uid, error: err });
    }
  }

  event(e: Event): void {
    this.outbox.push({ type: "event", event: e });
    this.wake();
  }

  desiredChanged(): void {
    if (this.deps.desired !== undefined) this.session?.report(this.desired.report());
  }

  sendHealth(health: DeviceHealth): boolean {
    return this.session?.sendHealth(health) ?? false;
  }

  sendUpdateStatus(status: Omit<UpdateStatus, "type">): boolean {
    return this.session?.sendUpdateStatus(status) ?? false;
  }

  async connectOnce(
    signal: AbortSignal,
    hubUrl = this.welcomedUrl,
  ): Promise<SessionResult & { permanent: boolean }> {
    let credential: string;
    try {
      credential = await this.deps.credential(hubUrl);
    } catch (err) {
      const permanent = err instanceof JoinError && err.permanent;
      this.log.warn("cannot get a hub credential", { url: hubUrl, error: err });
      return { welcomed: false, durationMs: 0, code: 0, reason: (err as Error).message, permanent };
    }
    const s = this.startSession(credential, hubUrl);
    this.session = s;
    const onAbort = () => s.close(1000, "agent stopping");
    signal.addEventListener("abort", onAbort, { once: true });
    const result = await s.done;
    signal.removeEventListener("abort", onAbort);
    this.session = undefined;
    const code = result.error?.code;
    const permanent = code === "unauthorized" || code === "revoked";
    if (permanent) this.refused(result.error?.reason ?? "");
    return { ...result, permanent };
  }

  /** Says that the hub refuses the credential, and what brings the device back. */
  private refused(reason: string): void {
    const where = this.deps.credentialPath ?? "the credential file";
    this.log.error("the hub refuses this device's credential; its pods keep running", {
      reason,
      help: `to join again: get a new join token (fleetlet hub token create), remove ${where} and start the agent with --join-token (hub.joinToken)`,
    });
  }

  async run(signal: AbortSignal): Promise<void> {
    let attempt = 0;
    while (!signal.aborted) {
      const r = await runRound(
        shuffled(this.deps.hubUrls, this.random),
        signal,
        (url) => this.connectOnce(signal, url),
        (url, failed, next) =>
          this.log.info("cannot connect to this hub URL; trying the next", {
            url,
            reason: failed.error?.reason ?? failed.reason,
            next,
          }),
      );
      if (r === undefined || signal.aborted) break;
      if (r.welcomed && r.durationMs >= this.stableAfterMs) attempt = 0;
      const delay = reconnectDelay(this.redialAtOnce ? 0 : attempt, r.permanent, {
        baseMs: this.baseMs,
        maxMs: this.maxMs,
        random: this.random,
      });
      attempt++;
      this.redialAtOnce = false;
      this.log.info("disconnected from the hub; pods keep running", {
        code: r.code,
        reason: r.error?.reason ?? r.reason,
        retryInMs: delay,
      });
      await sleepQuietly(this.deps.clock, delay, signal);
    }
  }

  private wake(): void {
    this.session?.wake();
  }

  /** Opens a session with `credential` to the hub at `hubUrl`: the hello, the welcome's
   * convergence, the streams. */
  private startSession(credential: string, hubUrl: string): Session {
    const { deps, log, outbox } = this;
    const streams = deps.streams;
    const url = hubEndpoints(hubUrl).connect;
    const s = startSession({
      clock: deps.clock,
      logger: log,
      dial: deps.dial,
      url,
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
          ...(streams === undefined ? [] : [AGENT_FEATURES.streams]),
          ...(deps.onUpdate === undefined ? [] : [AGENT_FEATURES.updates]),
        ],
      },
      outbox,
      onWelcome: (w) => {
        this.welcomedUrl = hubUrl;
        log.info("connected to the hub", {
          url,
          ackedSeq: w.ackedSeq,
          pending: outbox.size,
        });
        if (this.streamDiffers(w)) {
          this.redialAtOnce = true;
          s.close(4000, "the hub's record of the stream differs; starting a new stream");
          return;
        }
        this.converge(w);
        if (deps.desired !== undefined) s.report(this.desired.report());
        deps.onWelcomed?.();
      },
      onDesired: (d) => this.desired.take(d, url),
      ...(deps.saveCredential !== undefined && { saveCredential: deps.saveCredential }),
      ...(deps.onUpdate !== undefined && { onUpdate: deps.onUpdate }),
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
    return s;
  }

  /** Queues a pod.upsert unless the hub last got the pod as it is now; true when queued. */
  private upsertIfChanged(pod: Pod): boolean {
    const uid = pod.metadata.uid;
    if (uid === undefined) return false;
    if (this.outbox.reported().get(uid) === fingerprint(pod)) return false;
    this.outbox.push({ type: "pod.upsert", uid, pod });
    return true;
  }

  /**
   * Whether the hub's record of the stream differs from the outbox's, after a welcome: the hub
   * stored more than the outbox holds (its newest records never reached the disk: a full disk or a
   * power cut, then a restart), or less than it acknowledged (the hub's store lost its newest
   * records). Either way which pods the hub shows is unknown, so no pod.delete could be sent for
   * a pod it shows and the device no longer has: the outbox starts a new stream (the hub forgets
   * the node's pods on it) and the session closes, so that the next hello names it.
   */
  private streamDiffers(w: Welcome): boolean {
    const { outbox } = this;
    if (w.ackedSeq <= outbox.lastSeq && w.ackedSeq >= outbox.ackedSeq) return false;
    this.log.warn("the hub's record of this stream differs from the outbox; starting a new one", {
      ackedSeq: w.ackedSeq,
      outboxAckedSeq: outbox.ackedSeq,
      outboxLastSeq: outbox.lastSeq,
    });
    outbox.ack(Math.min(w.ackedSeq, outbox.lastSeq));
    outbox.newStream();
    return true;
  }

  /** Brings the hub's view up to date after a welcome (see the top of the file). */
  private converge(w: Welcome): void {
    const { outbox, deps } = this;
    if (w.ackedSeq === 0) outbox.forgetReported();
    outbox.ack(w.ackedSeq);
    outbox.push({ type: "node", node: deps.node() });
    this.reportDropped();
    for (const pod of deps.pods()) this.upsertIfChanged(pod);
    this.deleteGone();
  }

  /**
   * Deletes for the reported pods the agent no longer has, once every pod source was seen (before
   * that, a pod missing from the list may only not be read yet); until then it looks again every
   * second. A pod removed at start without ever being in the list (an orphan of a manifest that
   * is now invalid, found in the runtime) is only deleted so.
   */
  private deleteGone(): void {
    const { outbox, deps } = this;
    if (!deps.podsSynced()) {
      this.cancelDeleteGone ??= deps.clock.setTimer(1000, () => {
        this.cancelDeleteGone = undefined;
        this.deleteGone();
      });
      return;
    }
    const present = new Set(deps.pods().map((p) => p.metadata.uid));
    let deleted = false;
    for (const uid of [...outbox.reported().keys()]) {
      if (present.has(uid)) continue;
      outbox.push({ type: "pod.delete", uid });
      deleted = true;
    }
    if (deleted) this.wake();
  }

  /** Logs and records the events the outbox dropped while disconnected. */
  private reportDropped(): void {
    const dropped = this.outbox.takeDropped();
    if (dropped > 0) {
      const message = `dropped ${dropped} events while disconnected`;
      this.log.warn(message, { dropped });
      this.deps.nodeEvent("Warning", "EventsDropped", `${message} from the hub (outbox full)`);
    }
  }
}
