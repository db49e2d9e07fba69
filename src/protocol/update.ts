// Agent updates over the connection (docs/agent-updates.md, docs/protocol.md "Agent updates"):
// the hub offers a release to an agent that announced "updates", and the agent reports where
// taking it stands. The release's manifest travels as its text: the agent verifies its signature
// with its own keys, so the hub cannot change a byte of it unnoticed.
import { z } from "zod";

/** A release version, as src/release/manifest.ts allows it. */
const version = z.string().min(1).max(64);

/** hub → agent: take this release. Sent after each welcome while the hub wants it, and when
 * the wanted release changes. */
export const updateSchema = z.object({
  type: z.literal("update"),
  version,
  arch: z.enum(["amd64", "arm64"]),
  /** The release manifest's text (docs/agent-updates.md). */
  manifest: z.string().min(1).max(4096),
  /** The path on the hub the release's compressed bytes are served at. */
  path: z.string().min(1).max(512),
});

/** Where taking an update stands, on the device. */
export const UPDATE_PHASES = [
  "refused",
  "downloading",
  "failed",
  "restarting",
  "healthy",
  "rolled-back",
] as const;

/** agent → hub: not sequenced, the latest wins. */
export const updateStatusSchema = z.object({
  type: z.literal("update.status"),
  version,
  phase: z.enum(UPDATE_PHASES),
  /** Compressed bytes received (downloading). */
  bytes: z.int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  total: z.int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  /** refused: no-launcher, no-keys, malformed, signature, arch, rolled-back; failed: interrupted, http,
   * gzip, size, sha256, disk; rolled-back: the launcher's reason. */
  reason: z.string().max(1024).optional(),
  /** A sentence for people. */
  message: z.string().max(4096).optional(),
});

export type UpdateMessage = z.output<typeof updateSchema>;
export type UpdateStatus = z.output<typeof updateStatusSchema>;
export type UpdatePhase = (typeof UPDATE_PHASES)[number];
