// The agent under the launcher (deploy/fleetlet-launch), restarted by a small service loop as
// systemd's Restart=always would, for e2e tests of agent updates.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { TestAgent } from "./agent.ts";
import { fleetletBin } from "./testbed.ts";

const LAUNCHER = join(import.meta.dir, "../../deploy/fleetlet-launch");

/** The command for TestAgent: runs the launcher again `restartDelayS` after it exits (the
 * unit's RestartSec), passes a stop on. The launcher's --root-dir is the agent's own. */
export function serviceCommand(trialLimitS = 60, restartDelayS = 0.5): string[] {
  const loop = `trap 'stop=1; kill -TERM $child 2>/dev/null' TERM
stop=0
root=; prev=; for a in "$@"; do [ "$prev" = --root-dir ] && root=$a; prev=$a; done
while [ $stop = 0 ]; do
  /bin/sh '${LAUNCHER}' --root-dir "$root" --packaged '${fleetletBin}' --trial-limit ${trialLimitS} -- "$@" &
  child=$!
  wait $child; code=$?
  while kill -0 $child 2>/dev/null; do wait $child; code=$?; done
  echo "service: the launcher exited with $code" >&2
  [ $stop = 0 ] && sleep ${restartDelayS}
done`;
  return ["/bin/sh", "-c", loop, "service"];
}

/** Stops what the service loop runs now (the agent, or the launcher holding one on trial). */
export function restartServiceChild(agent: TestAgent): void {
  const loop = agent.proc?.pid;
  const children = Bun.spawnSync(["pgrep", "-P", String(loop)])
    .stdout.toString()
    .trim();
  for (const pid of children.split("\n").filter(Boolean).map(Number)) {
    const comm = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
    if (comm !== "sleep") process.kill(pid, "SIGTERM");
  }
}
