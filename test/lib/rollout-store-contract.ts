// The contract every implementation of the agent rollouts' store (src/hub/rollouts/store.ts)
// keeps, as one suite run against each: a rollout saved (spec, record, creation) comes back
// whole from load(), by name, after the store is opened again; a save replaces, a delete removes.
import { describe, expect, test } from "bun:test";
import type { AgentRollout } from "../../src/hub/rollouts/spec.ts";
import type { AgentRolloutStore } from "../../src/hub/rollouts/store.ts";
import { type Backing, onBacking } from "./store-backing.ts";

const rollout = (name: string, version: string, o: Partial<AgentRollout["record"]> = {}) =>
  ({
    name,
    spec: { version, selector: "tier=prod", maxUnavailable: 1, autoRollback: true },
    record: {
      ...{ planner: { stableHash: "PREVIOUS" }, from: {}, paused: false, undone: false },
      ...{ claimedAt: 100, ...o },
    },
    created: 100,
  }) as AgentRollout;

export function rolloutStoreContract(
  name: string,
  backing: () => Promise<Backing<AgentRolloutStore>>,
): void {
  const run = (fn: (open: () => Promise<AgentRolloutStore>) => Promise<void>) =>
    onBacking(backing, fn);

  describe(`the agent rollouts store contract: ${name}`, () => {
    test(
      "a new store loads empty",
      run(async (open) => {
        expect(await (await open()).load()).toEqual([]);
      }),
    );

    test(
      "rollouts are saved whole, by name; a save replaces, a delete removes",
      run(async (open) => {
        const a = await open();
        await a.save(rollout("zeta", "0.2.0"));
        await a.save(rollout("alpha", "0.2.0"));
        await a.save(rollout("mid", "0.2.0"));
        const moved = { planner: { stableHash: "PREVIOUS", updateHash: "0.3.0" } };
        await a.save(rollout("alpha", "0.3.0", { ...moved, from: { "cam-1": "0.2.0" } }));
        await a.delete("mid");
        await a.delete("none");
        expect(await (await open()).load()).toEqual([
          rollout("alpha", "0.3.0", { ...moved, from: { "cam-1": "0.2.0" } }),
          rollout("zeta", "0.2.0"),
        ]);
      }),
    );
  });
}
