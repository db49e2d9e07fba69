// An agent rollout's spec and what the hub keeps of it (docs/hub-releases.md, "Rolling a release
// out to a fleet"): the release, which nodes, and how fast; and the record the controller keeps
// beside it (the planner's record, each moved member's `from`, paused, undone).
import { z } from "zod";
import { isDNS1123Label } from "../../api/names.ts";
import { parseLabelSelector } from "../../api/selectors.ts";
import { StatusError } from "../../api/status.ts";
import { describeZodError } from "../../protocol/index.ts";
import type { RolloutRecord } from "../deploy/plan.ts";

/** The header of a PUT's answer saying what it did: created, configured or unchanged. */
export const RESULT_HEADER = "x-fleetlet-result";

/** The planner's second revision: each member's version before the rollout moved it. */
export const PREVIOUS = "@previous";

const intOrPercent = z.union([
  z.int().min(0).max(1_000_000),
  z.string().regex(/^(100|[1-9]?\d)%$/, "a percent from 0% to 100%"),
]);

const specSchema = z.object({
  version: z.string().min(1).max(64),
  selector: z.string().max(4096).default(""),
  canary: intOrPercent.default(1),
  maxUnavailable: intOrPercent.default(1),
  progressDeadlineSeconds: z
    .int()
    .min(1)
    .max(7 * 86_400)
    .default(600),
  autoRollback: z.boolean().default(true),
});

export type AgentRolloutSpec = z.output<typeof specSchema>;

/** What the controller keeps of a rollout's progress (stored as JSON beside the spec). */
export interface AgentRolloutRecord {
  /** The planner's record over the revisions `version` and PREVIOUS. */
  planner: RolloutRecord;
  /** Each member the rollout moved: the version it ran then (null: not known). */
  from: Record<string, string | null>;
  paused: boolean;
  undone: boolean;
  /** When the spec last took nodes (created, or its version or selector changed): of two
   * rollouts matching a node, the later claim has it. */
  claimedAt: number;
}

export interface AgentRollout {
  name: string;
  spec: AgentRolloutSpec;
  record: AgentRolloutRecord;
  /** When it was created (ms). */
  created: number;
}

/** A new record, as of `now`: nothing moved, the stable revision PREVIOUS. */
export function freshRecord(now: number, paused = false): AgentRolloutRecord {
  return { planner: { stableHash: PREVIOUS }, from: {}, paused, undone: false, claimedAt: now };
}

/** Parses a PUT body into a spec (defaults filled in); BadRequest naming what is wrong. */
export function parseSpec(body: unknown): AgentRolloutSpec {
  const r = specSchema.safeParse(body);
  if (!r.success)
    throw new StatusError("BadRequest", `bad agent rollout: ${describeZodError(r.error)}`);
  try {
    parseLabelSelector(r.data.selector);
  } catch (err) {
    throw new StatusError(
      "BadRequest",
      `bad agent rollout: selector ${JSON.stringify(r.data.selector)}: ${(err as Error).message}`,
    );
  }
  return r.data;
}

/** A valid rollout name: a DNS-1123 label-like name. */
export function checkName(name: string): void {
  if (isDNS1123Label(name).length > 0)
    throw new StatusError(
      "BadRequest",
      `invalid agent rollout name ${JSON.stringify(name)}: lower-case letters, digits and "-", at most 63`,
    );
}
