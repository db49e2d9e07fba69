// Starts the agent's hub reporting: opens the outbox under <rootDir>/hub, feeds it from the node
// status manager, the status manager and the event recorder, and runs the client until stopped.
import { join } from "node:path";
import type { Node } from "../../api/node.ts";
import type { Event, Pod } from "../../api/types.ts";
import type { DeviceHealth } from "../../protocol/health.ts";
import { CREDENTIAL_FILE, STREAM_DEFAULTS } from "../../protocol/index.ts";
import type { UpdateMessage } from "../../protocol/update.ts";
import { writeFileAtomic } from "../../util/atomic-file.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { insecureHubUrl } from "../config/agent-config-checks.ts";
import { ignoreStateWrites, reportedWrite, type StateWrites } from "../events/state-writes.ts";
import type { OpenStream } from "../streams/mux.ts";
import type { UpdateLink } from "../update/manager.ts";
import { createHubClient, type HubClient } from "./client.ts";
import type { DesiredHandler } from "./desired.ts";
import { hubEndpoints, loadOrJoin } from "./join.ts";
import { openOutbox } from "./outbox.ts";
import { dialWebSocket } from "./socket.ts";
import { HubTrust } from "./trust.ts";

export interface AgentHubInput {
  hub: {
    /** The hub's URLs: its replicas, which share one CA and one store. */
    urls: string[];
    joinToken?: string;
    caFile?: string;
    insecure?: boolean;
    maxStreams?: number;
  };
  rootDir: string;
  nodeName: string;
  version: string;
  outboxMaxEvents: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  clock: Clock;
  logger: Logger;
  nodeStatus: { node(): Node; subscribe(fn: (n: Node) => void): () => void };
  statusManager: { subscribe(fn: (c: { uid: string }) => void): () => void };
  recorder: {
    subscribe(fn: (e: Event) => void): () => void;
    event(
      o: { kind: string; namespace: string; name: string; uid?: string },
      type: "Normal" | "Warning",
      reason: string,
      message: string,
    ): void;
  };
  pod: (uid: string) => Pod | undefined;
  pods: () => Pod[];
  podsSynced: () => boolean;
  /** The hub's desired state on this device (the "api" pod source). */
  desired?: DesiredHandler;
  /** Opens the hub's logs, exec and port-forward streams on this device. */
  streams?: OpenStream;
  /** Where failed writes of the outbox, the credential and the saved CA are said. */
  stateWrites?: StateWrites;
  /** The device health reporter (health/reporter.ts), given the client's way to send. */
  health?: HealthPort;
  /** The update manager (update/manager.ts): given the way to the hub, told the offers. */
  updates?: UpdatePort;
}

/** What the hub client gives the update manager, and tells it. */
interface UpdatePort {
  bind(link: UpdateLink): void;
  offer(m: UpdateMessage): void;
  reconnected(): void;
}

/** What the hub client gives the health reporter, and tells it. */
interface HealthPort {
  /** From now on reports go through `send` (false: no welcomed connection). */
  bind(send: (health: DeviceHealth) => boolean): void;
  /** A connection was welcomed. */
  reconnected(): void;
}

/** The agent's trust in the hub (trust.ts), one for all its URLs (the replicas share the CA),
 * after warning of each plain hub URL off loopback. */
function hubTrust(input: AgentHubInput, log: Logger): HubTrust {
  for (const url of input.hub.urls.filter(insecureHubUrl))
    log.warn(
      "the hub URL is plain and not loopback (hub.insecure: true): exec sessions, port-forwards and pod logs travel unencrypted, and the hub sends no Secrets",
      { url },
    );
  return new HubTrust({
    ...(input.hub.caFile !== undefined && { caFile: input.hub.caFile }),
    ...(input.hub.joinToken !== undefined && { joinToken: input.hub.joinToken }),
    rootDir: input.rootDir,
    log,
    ...(input.stateWrites !== undefined && { stateWrites: input.stateWrites }),
  });
}

/** The node credential: the saved one, or one joined for at the hub URL given, once the hub's CA
 * is trusted. One that could not be saved (a full disk) is kept in memory, used, and saved again
 * at each call. */
function credentialOf(input: AgentHubInput, trust: HubTrust): (hubUrl: string) => Promise<string> {
  const hubFetch = hubFetchOf(trust);
  const path = join(input.rootDir, CREDENTIAL_FILE);
  const writes = input.stateWrites ?? ignoreStateWrites;
  let unsaved: string | undefined;
  return async (hubUrl) => {
    if (unsaved !== undefined) {
      const credential = unsaved;
      try {
        reportedWrite(writes, path, () => writeFileAtomic(path, `${credential}\n`));
        unsaved = undefined;
      } catch {
        // said by the reporter; the credential in memory serves meanwhile
      }
      return credential;
    }
    await trust.resolve(hubUrl);
    return loadOrJoin({
      hubUrl,
      joinToken: input.hub.joinToken,
      nodeName: input.nodeName,
      credentialPath: path,
      fetch: hubFetch,
      onUnsaved: (credential, err) => {
        unsaved = credential;
        writes.failed(path, err);
      },
    });
  };
}

/** fetch with the hub's CA (once trusted). */
function hubFetchOf(trust: HubTrust) {
  return (url: string, init: RequestInit) => {
    const ca = trust.current();
    return fetch(url, { ...init, ...(ca !== undefined && { tls: { ca } }) } as RequestInit);
  };
}

/** Creates the client and its subscriptions; the caller runs it with client.run(signal). */
export function createAgentHubClient(input: AgentHubInput): { client: HubClient; stop(): void } {
  const log = input.logger.with({ component: "hubclient" });
  const trust = hubTrust(input, log);
  const dir = join(input.rootDir, "hub");
  const credentialPath = join(input.rootDir, CREDENTIAL_FILE);
  const outbox = openOutbox({
    path: join(dir, "outbox"),
    maxEvents: input.outboxMaxEvents,
    logger: log,
    now: () => input.clock.now(),
    setTimer: (ms, fn) => input.clock.setTimer(ms, fn),
    ...(input.stateWrites !== undefined && { stateWrites: input.stateWrites }),
  });
  const credential = credentialOf(input, trust);
  const client = createHubClient({
    clock: input.clock,
    logger: log,
    hubUrls: input.hub.urls,
    nodeName: input.nodeName,
    agentVersion: input.version,
    outbox,
    credential,
    saveCredential: (c) => writeFileAtomic(credentialPath, `${c}\n`, { mode: 0o600 }),
    credentialPath,
    dial: (url, headers, events) => dialWebSocket(trust.current())(url, headers, events),
    node: () => input.nodeStatus.node(),
    pod: input.pod,
    pods: input.pods,
    podsSynced: input.podsSynced,
    nodeEvent: (type, reason, message) =>
      input.recorder.event(
        { kind: "Node", namespace: "default", name: input.nodeName, uid: input.nodeName },
        type,
        reason,
        message,
      ),
    ...(input.desired !== undefined && { desired: input.desired }),
    ...(input.streams !== undefined && {
      streams: {
        open: input.streams,
        maxStreams: input.hub.maxStreams ?? STREAM_DEFAULTS.maxStreams,
      },
    }),
    backoffBaseMs: input.backoffBaseMs,
    backoffMaxMs: input.backoffMaxMs,
    onWelcomed: () => {
      input.health?.reconnected();
      input.updates?.reconnected();
    },
    ...(input.updates !== undefined && { onUpdate: (m) => input.updates?.offer(m) }),
  });
  const unsubscribe = connectPorts(input, client, { trust, credential });
  return {
    client,
    stop: () => {
      for (const u of unsubscribe) u();
    },
  };
}

/** Gives the health reporter and the update manager the client's ways to the hub, and feeds the
 * client the node, pod and event changes; returns the unsubscribe functions. */
function connectPorts(
  input: AgentHubInput,
  client: HubClient,
  hub: { trust: HubTrust; credential: (hubUrl: string) => Promise<string> },
): (() => void)[] {
  input.health?.bind((h) => client.sendHealth(h));
  input.updates?.bind({
    get base() {
      return hubEndpoints(client.hubUrl).http;
    },
    fetch: hubFetchOf(hub.trust),
    credential: () => hub.credential(client.hubUrl),
    send: (status) => client.sendUpdateStatus(status),
  });
  return [
    input.nodeStatus.subscribe((n) => client.nodeChanged(n)),
    input.statusManager.subscribe((c) => client.podChanged(c.uid)),
    input.recorder.subscribe((e) => client.event(e)),
  ];
}

export interface AgentHubWiring {
  config: {
    hub?: AgentHubInput["hub"];
    rootDir: string;
    nodeName: string;
    hubOutboxMaxEvents: number;
    hubReconnectBackOffBase: number;
    hubReconnectBackOffMax: number;
  };
  version: string;
  clock: Clock;
  logger: Logger;
  nodeStatus: AgentHubInput["nodeStatus"];
  statusManager: AgentHubInput["statusManager"] & {
    getPodStatus(uid: string): Pod["status"] | undefined;
  };
  recorder: AgentHubInput["recorder"];
  /** The pods the sources want, by UID (the pod manager's). */
  pods: () => ReadonlyMap<string, Pod>;
  podsSynced: () => boolean;
  desired?: DesiredHandler;
  streams?: OpenStream;
  stateWrites?: StateWrites;
  health?: HealthPort;
  updates?: UpdatePort;
}

/** The hub client of an agent whose config names a hub; undefined when it runs alone. */
export function createAgentHub(
  w: AgentHubWiring,
):
  | { run(signal: AbortSignal): Promise<void>; desiredChanged(): void; connected(): boolean }
  | undefined {
  const { config } = w;
  if (config.hub === undefined) return undefined;
  const withStatus = (pod: Pod): Pod | undefined => {
    const status = w.statusManager.getPodStatus(pod.metadata.uid ?? "");
    return status === undefined ? undefined : { ...pod, apiVersion: "v1", kind: "Pod", status };
  };
  const { client, stop } = createAgentHubClient({
    hub: config.hub,
    rootDir: config.rootDir,
    nodeName: config.nodeName,
    version: w.version,
    outboxMaxEvents: config.hubOutboxMaxEvents,
    backoffBaseMs: config.hubReconnectBackOffBase,
    backoffMaxMs: config.hubReconnectBackOffMax,
    clock: w.clock,
    logger: w.logger,
    nodeStatus: w.nodeStatus,
    statusManager: w.statusManager,
    recorder: w.recorder,
    pod: (uid) => {
      const pod = w.pods().get(uid);
      return pod === undefined ? undefined : withStatus(pod);
    },
    pods: () => [...w.pods().values()].flatMap((p) => withStatus(p) ?? []),
    podsSynced: w.podsSynced,
    ...(w.desired !== undefined && { desired: w.desired }),
    ...(w.streams !== undefined && { streams: w.streams }),
    ...(w.stateWrites !== undefined && { stateWrites: w.stateWrites }),
    ...(w.health !== undefined && { health: w.health }),
    ...(w.updates !== undefined && { updates: w.updates }),
  });
  return {
    desiredChanged: () => client.desiredChanged(),
    connected: () => client.connected,
    async run(signal) {
      try {
        await client.run(signal);
      } finally {
        stop();
      }
    },
  };
}
