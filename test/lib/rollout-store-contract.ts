// The contract every implementation of the agent rollouts' store (src/hub/rollouts/store.ts)
// keeps, as one suite run against each: a rollout saved (spec, record, creation) comes back
// whole from load(), by name, after the store is opened again; a change is made to what is stored
// (it sees it, replaces it, deletes it, leaves it, or throws and writes nothing).
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

/** Stores `r` whatever is stored of it (tests). */
export function saveRollout(s: AgentRolloutStore, r: AgentRollout, byPass = false) {
  return s.change(r.name, () => r, byPass);
}

/** Deletes rollout `name` (tests). */
export function deleteRollout(s: AgentRolloutStore, name: string) {
  return s.change(name, () => null);
}

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
        await saveRollout(a, rollout("zeta", "0.2.0"));
        await saveRollout(a, rollout("alpha", "0.2.0"));
        await saveRollout(a, rollout("mid", "0.2.0"));
        const moved = { planner: { stableHash: "PREVIOUS", updateHash: "0.3.0" } };
        await saveRollout(a, rollout("alpha", "0.3.0", { ...moved, from: { "cam-1": "0.2.0" } }));
        await deleteRollout(a, "mid");
        await deleteRollout(a, "none");
        expect(await (await open()).load()).toEqual([
          rollout("alpha", "0.3.0", { ...moved, from: { "cam-1": "0.2.0" } }),
          rollout("zeta", "0.2.0"),
        ]);
      }),
    );

    test(
      "a change sees what is stored and gives what it stored; undefined leaves it; a throw writes nothing",
      run(async (open) => {
        const a = await open();
        const seen: (AgentRollout | undefined)[] = [];
        const first = await a.change("alpha", (s) => {
          seen.push(s);
          return rollout("alpha", "0.2.0");
        });
        expect(first.stored).toEqual(rollout("alpha", "0.2.0"));
        const paused = await a.change("alpha", (s) => {
          seen.push(s);
          return s === undefined ? undefined : { ...s, record: { ...s.record, paused: true } };
        });
        expect(paused.stored?.record.paused).toBe(true);
        expect(seen).toEqual([undefined, rollout("alpha", "0.2.0")]);
        expect((await a.change("alpha", () => undefined)).stored).toEqual(paused.stored);
        expect((await a.change("none", () => undefined)).stored).toBeUndefined();
        await expect(
          a.change("alpha", () => {
            throw new Error("refused");
          }),
        ).rejects.toThrow("refused");
        expect(await (await open()).load()).toEqual([paused.stored as AgentRollout]);
        expect((await a.change("alpha", () => null)).stored).toBeUndefined();
        expect(await (await open()).load()).toEqual([]);
      }),
    );
  });
}
