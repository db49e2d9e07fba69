// `fleetlet hub`'s replica flags (src/cli/hub-replica.ts): those that only a replica takes are
// refused without --store and --bus.
import { describe, expect, test } from "bun:test";
import { UsageError } from "../../../src/cli/errors.ts";
import { replicaFlags } from "../../../src/cli/hub-replica.ts";

describe("replicaFlags", () => {
  test("--replica-beat-interval, --leader-interval and --replica-id go with --store and --bus", () => {
    for (const f of ["replica-beat-interval", "leader-interval", "replica-id"] as const)
      expect(() => replicaFlags({ [f]: "1s" })).toThrow(UsageError);
    expect(replicaFlags({})).toBeUndefined();
    const flags = { store: "postgres://u@h:5432/db", bus: "nats://h:4222" };
    expect(replicaFlags({ ...flags, "replica-beat-interval": "1s" })?.postgresUrl).toBe(
      flags.store,
    );
  });
});
