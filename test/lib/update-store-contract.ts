// The contract every implementation of the node updates' store (src/hub/updates/store.ts) keeps,
// as one suite run against each: a batch of wishes is written together, a later change of one
// node winning, and load() gives them after the store is opened again.
import { describe, expect, test } from "bun:test";
import type { UpdateStore } from "../../src/hub/updates/store.ts";
import { type Backing, onBacking } from "./store-backing.ts";

export function updateStoreContract(
  name: string,
  backing: () => Promise<Backing<UpdateStore>>,
): void {
  const run = (fn: (open: () => Promise<UpdateStore>) => Promise<void>) => onBacking(backing, fn);
  const byNode = async (s: UpdateStore) =>
    (await s.load()).sort((a, b) => a.node.localeCompare(b.node));

  describe(`the node updates store contract: ${name}`, () => {
    test(
      "a new store loads empty; an empty batch writes nothing",
      run(async (open) => {
        const a = await open();
        await a.write([]);
        expect(await a.load()).toEqual([]);
      }),
    );

    test(
      "wishes are set, replaced and removed; a later change of one node in a batch wins",
      run(async (open) => {
        const a = await open();
        await a.write([
          { node: "cam-1", version: "0.2.0", setAt: 10 },
          { node: "cam-2", version: "0.2.0", setAt: 10 },
          { node: "cam-3", version: "0.2.0", setAt: 10 },
        ]);
        await a.write([
          { node: "cam-1", version: "0.3.0", setAt: 20 },
          { node: "cam-2", version: null },
          { node: "cam-3", version: null },
          { node: "cam-3", version: "0.1.0", setAt: 21 },
          { node: "cam-9", version: null },
        ]);
        expect(await byNode(await open())).toEqual([
          { node: "cam-1", version: "0.3.0", setAt: 20 },
          { node: "cam-3", version: "0.1.0", setAt: 21 },
        ]);
      }),
    );
  });
}
