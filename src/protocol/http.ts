// The HTTP side of the protocol: paths, the join exchange and token formats (docs/protocol.md).
import { z } from "zod";

export const AGENT_CONNECT_PATH = "/api/v1/agent/connect";
export const JOIN_PATH = "/api/v1/join";
export const JOIN_TOKENS_PATH = "/api/v1/join-tokens";
export const WATCH_PATH = "/api/v1/watch";
/** Agent releases (docs/hub-releases.md): GET lists; `/<version>/<arch>` is the gzip'd executable
 * (PUT by the operator, GET by devices with ranges), `/<version>/<arch>/manifest` its manifest. */
export const RELEASES_PATH = "/api/v1/releases";
/** The header carrying a pushed release's manifest: its text in base64. */
export const RELEASE_MANIFEST_HEADER = "x-fleetlet-release-manifest";
/** Where the agent keeps its node credential, relative to its root dir (mode 0600). */
export const CREDENTIAL_FILE = "hub/credential";

/** Token prefixes: operator, join token, node credential. */
export const TOKEN_PREFIX = { operator: "flo_", join: "flj_", credential: "flc_" } as const;

/** Annotations the hub adds to the Nodes it serves. */
export const HUB_ANNOTATIONS = {
  online: "hub.fleetlet.io/online",
  lastSeen: "hub.fleetlet.io/last-seen",
  pods: "hub.fleetlet.io/pods",
  revoked: "hub.fleetlet.io/revoked",
  /** The device's clock minus the hub's, as a Go duration (docs/protocol.md, "Clock skew"). */
  clockSkew: "hub.fleetlet.io/clock-skew",
  /** The agent's last update.status, "<phase> <version>" (docs/hub-releases.md). */
  update: "hub.fleetlet.io/update",
} as const;

/** A device clock further off than this from the hub's is flagged (docs/protocol.md, "Clock skew"). */
export const CLOCK_SKEW_WARN_MS = 120_000;

const labels = z.record(z.string().max(317), z.string().max(63));

/** POST /api/v1/join */
export const joinRequestSchema = z.object({
  joinToken: z.string().min(1).max(256),
  nodeName: z.string().min(1).max(253),
  labels: labels.optional(),
});
export type JoinRequest = z.output<typeof joinRequestSchema>;

export const joinResponseSchema = z.object({ nodeName: z.string(), credential: z.string() });

/** POST /api/v1/join-tokens; `ttl` is a duration such as "24h" (default 24h); `uses`: how
 * many joins it allows (absent: any number until it expires). */
export const joinTokenRequestSchema = z.object({
  ttl: z.string().max(32).optional(),
  labels: labels.optional(),
  uses: z.int().min(1).max(1_000_000).optional(),
});

const joinTokenResponseSchema = z.object({
  id: z.string(),
  token: z.string(),
  expiresAt: z.string(),
  labels: z.record(z.string(), z.string()),
  uses: z.int().optional(),
});
export type JoinTokenResponse = z.output<typeof joinTokenResponseSchema>;

/** GET /api/v1/join-tokens: every join token the hub stores, oldest first, by its public id
 * (the token itself is not kept: the hub holds only its hash). */
export interface JoinTokenInfo {
  id: string;
  createdAt: string;
  expiresAt: string;
  labels: Record<string, string>;
  /** How many joins it allows; absent: any number until it expires. */
  uses?: number;
  /** How many joins used it. */
  used: number;
  revoked: boolean;
}
export interface JoinTokenList {
  apiVersion: "fleetlet.io/v1";
  kind: "JoinTokenList";
  items: JoinTokenInfo[];
}
