// A sandbox whose processes are gone and that the runtime cannot stop (after a power cut,
// containerd 1.6 cannot tear down the network of a sandbox whose CNI cache came back empty):
// it must not keep a pod from terminating, nor its removal from finishing.
import { afterEach, describe, expect, test } from "bun:test";
import type { StopPodSandboxRequest } from "../../../src/cri/index.ts";
import { CriError, GrpcStatus } from "../../../src/cri/index.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";
import { makeHarness } from "./harness.ts";

let h: ReturnType<typeof makeHarness>;
afterEach(() => h?.cleanup());

const teardown = () =>
  new CriError({
    rpc: "StopPodSandbox",
    grpcStatus: GrpcStatus.UNKNOWN,
    runtimeMessage: "failed to destroy network for sandbox: unexpected end of JSON input",
  });

/** A pod whose first sandbox died and cannot be stopped, running again in a second one. */
async function podWithDeadSandbox() {
  h = makeHarness();
  const pod = makePod({ containers: [makeContainer({ name: "a" })] });
  await h.sync(pod);
  const dead = [...h.cri.sandboxes.keys()][0] ?? "";
  h.cri.killSandbox(dead);
  h.cri.setHook((method, req) => {
    if (method === "stopPodSandbox" && (req as StopPodSandboxRequest).podSandboxId === dead)
      throw teardown();
  });
  await h.sync(pod);
  const live = [...h.cri.sandboxes.keys()].find((id) => id !== dead) ?? "";
  h.events.length = 0;
  return { pod, dead, live };
}

describe("a dead sandbox that cannot be stopped", () => {
  test("killPod() stops the pod's containers and live sandbox, and reports the dead one once in a FailedKillPod event instead of failing", async () => {
    const { pod, dead, live } = await podWithDeadSandbox();
    const [running] = await h.rm.getPods();
    await h.rm.killPod(pod, running as never);
    expect([...h.cri.containers.values()].map((c) => c.state)).toEqual([
      "CONTAINER_EXITED",
      "CONTAINER_EXITED",
    ]);
    expect(h.cri.sandboxes.get(live)?.state).toBe("SANDBOX_NOTREADY");
    const failed = h.events.filter((e) => e.reason === "FailedKillPod");
    expect(failed.map((e) => e.message)).toEqual([
      `Cannot stop sandbox ${dead} of pod "web": CRI StopPodSandbox failed: failed to destroy network for sandbox: unexpected end of JSON input; nothing of the pod runs in it: the container garbage collector removes it once it can be stopped`,
    ]);
  });

  test("killPod() still fails when a ready sandbox cannot be stopped, naming both", async () => {
    const { pod, dead, live } = await podWithDeadSandbox();
    const [running] = await h.rm.getPods();
    h.cri.failNext("stopPodSandbox", new Error("shim is stuck"));
    const err = await h.rm.killPod(pod, running as never).catch((e: Error) => e);
    expect((err as Error).message).toContain(`Cannot stop sandbox ${live} of pod "web"`);
    expect((err as Error).message).toContain(`Cannot stop sandbox ${dead} of pod "web"`);
    expect(h.reasons()).not.toContain("FailedKillPod");
  });

  test("removePod() removes everything else and leaves the sandbox it cannot remove to the container GC", async () => {
    const { pod, dead } = await podWithDeadSandbox();
    const [running] = await h.rm.getPods();
    await h.rm.killPod(pod, running as never);
    await h.rm.removePod(running as never);
    expect(h.cri.containers.size).toBe(0);
    expect([...h.cri.sandboxes.keys()]).toEqual([dead]);
  });
});
