// The hub's fleet over a store, as the hub's unit tests make it: ten events a node, offline after
// 30 s, its time from a FakeClock.
import { type Change, Fleet } from "../../src/hub/fleet.ts";
import type { HubStore, LoadedState } from "../../src/hub/store.ts";
import type { FakeClock } from "../../src/util/clock.ts";

export function testFleet(
  store: HubStore,
  loaded: LoadedState,
  clock: FakeClock,
  onChange: (change: Change) => void = () => {},
): Fleet {
  return new Fleet(
    { store, maxEventsPerNode: 10, offlineAfterMs: 30_000, onChange, now: () => clock.now() },
    loaded,
  );
}
