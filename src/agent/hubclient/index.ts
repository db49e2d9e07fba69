// The hub client: joins the hub once, then reports the node, pod statuses and events over one
// WebSocket, through a bounded outbox on disk (docs/protocol.md).
export {
  createHubClient,
  type HubClient,
  type HubClientDeps,
  reconnectDelay,
} from "./client.ts";
export { type DesiredHandler, DesiredReports, secretsAllowed } from "./desired.ts";
export {
  hubEndpoints,
  JoinError,
  type JoinInput,
  loadOrJoin,
  readCredential,
} from "./join.ts";
export {
  fingerprint,
  type Outbox,
  type OutboxInput,
  type OutboxOptions,
  openOutbox,
} from "./outbox.ts";
export {
  type DesiredReceived,
  type Session,
  type SessionDeps,
  type SessionResult,
  startSession,
} from "./session.ts";
export {
  type AgentHubInput,
  type AgentHubWiring,
  createAgentHub,
  createAgentHubClient,
} from "./setup.ts";
export { type Dial, dialWebSocket, type HubSocket, type SocketEvents } from "./socket.ts";
