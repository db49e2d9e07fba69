// The agent ↔ hub protocol (docs/protocol.md), shared by both sides: message schemas and types,
// decoding with the refusal reasons, and the HTTP join exchange.
export {
  DEFAULT_MAX_MESSAGE_BYTES,
  decodeAgentMessage,
  decodeHubMessage,
  describeZodError,
} from "./decode.ts";
export * from "./http.ts";
export * from "./messages.ts";
export * from "./streams.ts";
export { caHash, HUB_CA_PATH, joinTokenWithHash, parseJoinToken, SAVED_CA_FILE } from "./trust.ts";
export * from "./update.ts";
