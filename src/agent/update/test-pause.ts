// A test seam, for the virtual device's power cuts during an update only
// (test/vdevice/update-power-cut.test.ts): with FLEETLET_TEST_UPDATE_PAUSE=<step> in the agent's
// environment, the agent freezes for good at that step of an update, everything before it on
// disk, so that the test cuts the power there. Nothing on a device sets it (the package's unit
// and the launcher pass no such variable); any other value, or none, does nothing.
import { writeSync } from "node:fs";

/** The steps, in order: the release verified and in `download/` (before the install), then
 * after each durable step of installVersion, then the new version on trial about to say
 * `healthy`. */
export type UpdateStep = "verified" | "executable" | "trial" | "previous" | "current" | "healthy";

/** Freezes the whole process (event loop included) when FLEETLET_TEST_UPDATE_PAUSE names `step`. */
export function testPause(step: UpdateStep): void {
  if (process.env.FLEETLET_TEST_UPDATE_PAUSE !== step) return;
  writeSync(2, `fleetlet: update paused at step "${step}" (FLEETLET_TEST_UPDATE_PAUSE)\n`);
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
}
