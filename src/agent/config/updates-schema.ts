// The agent config fields of agent updates (docs/agent-updates.md), fleetlet's own: the release
// keys this device trusts, set at install and never taken from the hub, and how fast an update
// may download.
import { z } from "zod";
import { memoryToBytes, tryParseQuantity } from "../../api/index.ts";

/** "ed25519:" and a key's 32 bytes in base64, as `fleetlet release keygen` writes it. */
const publicKey = z
  .string({ error: "must be a string" })
  .regex(/^ed25519:[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/, {
    error:
      'must be "ed25519:" and the key\'s 32 bytes in base64 (the .pub line of fleetlet release keygen)',
  });

/** Bytes a second such as "1Mi", or 0 for no limit. */
const rate = z
  .union([z.string(), z.number()], { error: 'must be a quantity such as "1Mi", or 0' })
  .transform((v) => String(v))
  .refine((v) => v === "0" || (tryParseQuantity(v)?.num ?? 0n) > 0n, {
    error: 'is not a quantity (bytes a second, e.g. "1Mi"), or 0 for no limit',
  })
  .transform((v) => (v === "0" ? 0 : memoryToBytes(v)));

export const updateConfigFields = {
  updatePublicKeys: z
    .array(publicKey, { error: "must be a list of keys" })
    .max(16, { error: "must hold at most 16 keys" })
    .optional(),
  updateBandwidthLimit: rate.optional(),
};

/** Flags of these fields (without "--") → field; the keys are set in the config file only. */
export const updateFlags: [string, string][] = [["update-bandwidth-limit", "updateBandwidthLimit"]];
