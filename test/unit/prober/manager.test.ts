import { describe, expect, test } from "bun:test";
import { EVENT_OUTPUT_MAX } from "../../../src/agent/prober/index.ts";
import { createResultsManager } from "../../../src/agent/prober/results.ts";
import { ProbeWorker } from "../../../src/agent/prober/worker.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { flush, harness, podWith, probe, runningStatus } from "./fixtures.ts";

const uid = (pod: { metadata: { uid?: string } }) => pod.metadata.uid as string;

describe("prober manager workers", () => {
  test("updatePod() starts one worker per probe of a running container and none for a waiting one", () => {
    const h = harness();
    const pod = podWith([
      { name: "a", livenessProbe: probe(), readinessProbe: probe() },
      { name: "b", readinessProbe: probe() },
      { name: "c" },
    ]);
    h.manager.updatePod(pod, runningStatus(pod, { a: "id-a" }, h.clock.now()));
    expect(h.manager.size()).toBe(2);
    expect(h.manager.worker(uid(pod), "a", "liveness")?.containerId).toBe("id-a");
    expect(h.manager.worker(uid(pod), "b", "readiness")).toBeUndefined();
  });

  test("updatePod() replaces a worker when the container ID changes and forgets the old result", async () => {
    const h = harness();
    const pod = podWith([{ name: "a", readinessProbe: probe() }]);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    await h.manager.worker(uid(pod), "a", "readiness")?.doProbe();
    expect(h.manager.readiness("one")).toBe(true);
    h.manager.updatePod(pod, runningStatus(pod, { a: "two" }, h.clock.now()));
    expect(h.manager.readiness("one")).toBeUndefined();
    expect(h.manager.readiness("two")).toBeUndefined();
    expect(h.manager.worker(uid(pod), "a", "readiness")?.containerId).toBe("two");
  });

  test("updatePod() stops workers of a container that stopped, and of a pod that ended", () => {
    const h = harness();
    const pod = podWith([{ name: "a", livenessProbe: probe() }]);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    h.manager.updatePod(pod, runningStatus(pod, {}, h.clock.now()));
    expect(h.manager.size()).toBe(0);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    h.manager.updatePod(pod, {
      ...runningStatus(pod, { a: "one" }, h.clock.now()),
      phase: "Failed",
    });
    expect(h.manager.size()).toBe(0);
  });

  test("removePod() stops every worker of the pod", () => {
    const h = harness();
    const pod = podWith([{ name: "a", livenessProbe: probe(), readinessProbe: probe() }]);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    h.manager.removePod(uid(pod));
    expect(h.manager.size()).toBe(0);
  });

  test("network probes go to the pod IP, or 127.0.0.1 for a host-network pod", async () => {
    const h = harness();
    const pod = podWith([{ name: "a", readinessProbe: probe() }]);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now(), "10.99.3.4"));
    expect(h.manager.worker(uid(pod), "a", "readiness")?.spec.target.host).toBe("10.99.3.4");
    const host = podWith([{ name: "a", readinessProbe: probe() }], true);
    h.manager.updatePod(host, runningStatus(host, { a: "two" }, h.clock.now(), "192.0.2.1"));
    expect(h.manager.worker(uid(host), "a", "readiness")?.spec.target.host).toBe("127.0.0.1");
  });
});

describe("probe worker semantics", () => {
  test("doProbe() reports a fault of the worker itself and keeps probing", async () => {
    const clock = new FakeClock();
    const errors: unknown[] = [];
    const pod = podWith([{ name: "a", readinessProbe: probe() }]);
    const container = pod.spec.containers[0] as (typeof pod.spec.containers)[0];
    const worker = new ProbeWorker(
      {
        clock,
        random: () => 0,
        results: createResultsManager(),
        probe: async () => {
          throw new Error("prober broke");
        },
        isStarted: () => true,
        isTerminating: () => false,
        managerStartedAt: clock.monotonic() - 60_000,
        recordDelay: () => {},
        reportError: (e) => errors.push(e),
      },
      {
        kind: "readiness",
        probe: probe(),
        podUid: uid(pod),
        startedAt: clock.monotonic(),
        target: { pod, container, containerId: "one", host: "127.0.0.1" },
      },
    );
    expect(await worker.doProbe()).toBe(true);
    expect(errors.map((e) => (e as Error).message)).toEqual(["prober broke"]);
  });

  test("a result its listener fails to take is logged with probe, container and result, and kept", async () => {
    const h = harness();
    const pod = podWith([{ name: "a", readinessProbe: probe() }]);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    h.onResultError = new Error("status sink broke");
    expect(await h.manager.worker(uid(pod), "a", "readiness")?.doProbe()).toBe(true);
    expect(h.manager.readiness("one")).toBe(true);
    expect(h.logs).toHaveLength(1);
    expect(h.logs[0]).toContain("a probe result could not be passed on");
    expect(h.logs[0]).toContain("probe=readiness container=one result=success");
    expect(h.logs[0]).toContain('error="status sink broke"');
  });

  test("readiness is unknown (not ready) until the first probe, then follows the threshold", async () => {
    const h = harness();
    const pod = podWith([{ name: "a", readinessProbe: probe({ successThreshold: 2 }) }]);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    const w = h.manager.worker(uid(pod), "a", "readiness");
    expect(h.manager.readiness("one")).toBeUndefined();
    await w?.doProbe();
    expect(h.manager.readiness("one")).toBeUndefined();
    await w?.doProbe();
    expect(h.manager.readiness("one")).toBe(true);
    expect(h.changes).toHaveLength(1);
  });

  test("no probe runs before initialDelaySeconds since the container started", async () => {
    const h = harness();
    const pod = podWith([{ name: "a", readinessProbe: probe({ initialDelaySeconds: 5 }) }]);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    const w = h.manager.worker(uid(pod), "a", "readiness");
    h.clock.step(4_999);
    await w?.doProbe();
    expect(h.calls).toHaveLength(0);
    h.clock.step(1);
    await w?.doProbe();
    expect(h.calls).toHaveLength(1);
  });

  test("liveness settles on failure only after failureThreshold failures, then holds", async () => {
    const h = harness();
    const pod = podWith([{ name: "a", livenessProbe: probe({ failureThreshold: 3 }) }]);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    const fail = { result: "failure" as const, output: "cat: can't open '/tmp/health'" };
    h.script.set("liveness", [fail, fail, fail, fail]);
    const w = h.manager.worker(uid(pod), "a", "liveness");
    await w?.doProbe();
    await w?.doProbe();
    expect(h.manager.failed("liveness", uid(pod)).size).toBe(0);
    await w?.doProbe();
    expect([...h.manager.failed("liveness", uid(pod))]).toEqual(["one"]);
    expect(h.changes.map((c) => `${c.kind}:${c.result}`)).toEqual(["liveness:failure"]);
    await w?.doProbe();
    expect(h.calls).toHaveLength(3);
    expect(h.events[0]).toBe(
      `Warning Unhealthy ${pod.metadata.name}/a: Liveness probe failed: cat: can't open '/tmp/health'`,
    );
  });

  test("liveness and readiness wait for the startup probe; startup stops once it succeeded", async () => {
    const h = harness();
    const pod = podWith([
      { name: "a", livenessProbe: probe(), readinessProbe: probe(), startupProbe: probe() },
    ]);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    const get = (k: "liveness" | "readiness" | "startup") => h.manager.worker(uid(pod), "a", k);
    h.script.set("startup", [{ result: "failure", output: "not yet" }]);
    await get("liveness")?.doProbe();
    await get("readiness")?.doProbe();
    await get("startup")?.doProbe();
    expect(h.calls.map((c) => c.kind)).toEqual(["startup"]);
    await get("startup")?.doProbe();
    expect(h.manager.startup("one")).toBe(true);
    await get("startup")?.doProbe();
    await get("liveness")?.doProbe();
    await get("readiness")?.doProbe();
    expect(h.calls.map((c) => c.kind)).toEqual(["startup", "startup", "liveness", "readiness"]);
  });

  test("a startup probe failing failureThreshold times settles on failure for a restart", async () => {
    const h = harness();
    const pod = podWith([{ name: "a", startupProbe: probe({ failureThreshold: 2 }) }]);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    h.script.set("startup", [
      { result: "failure", output: "x" },
      { result: "failure", output: "x" },
    ]);
    const w = h.manager.worker(uid(pod), "a", "startup");
    await w?.doProbe();
    await w?.doProbe();
    expect([...h.manager.failed("startup", uid(pod))]).toEqual(["one"]);
  });

  test("while the pod terminates, liveness reports success and stops; readiness keeps probing", async () => {
    const h = harness();
    const pod = podWith([{ name: "a", livenessProbe: probe(), readinessProbe: probe() }]);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    const live = h.manager.worker(uid(pod), "a", "liveness");
    h.terminating.add(uid(pod));
    expect(await live?.doProbe()).toBe(false);
    expect(await h.manager.worker(uid(pod), "a", "readiness")?.doProbe()).toBe(true);
    expect(h.calls.map((c) => c.kind)).toEqual(["readiness"]);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    expect(h.manager.worker(uid(pod), "a", "liveness")).toBeUndefined();
    expect(h.manager.failed("liveness", uid(pod)).size).toBe(0);
  });

  test("a liveness failure that lands after the pod began terminating records nothing", async () => {
    const h = harness();
    const pod = podWith([{ name: "a", livenessProbe: probe({ failureThreshold: 1 }) }]);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    // The SIGTERM handler removed what the probe checks while the probe ran.
    h.script.set("liveness", [
      () => {
        h.terminating.add(uid(pod));
        return { result: "failure", output: "cat: can't open '/tmp/live'" };
      },
    ]);
    expect(await h.manager.worker(uid(pod), "a", "liveness")?.doProbe()).toBe(false);
    expect(h.events).toEqual([]);
    expect(h.manager.failed("liveness", uid(pod)).size).toBe(0);
  });

  test("a handler that throws is a failure naming the error; one that hangs fails at the hard limit", async () => {
    const h = harness();
    const pod = podWith([{ name: "a", readinessProbe: probe({ failureThreshold: 1 }) }]);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    h.script.set("readiness", [new Error('couldn\'t find port "nope" in container a'), "hang"]);
    const w = h.manager.worker(uid(pod), "a", "readiness");
    await w?.doProbe();
    expect(h.events[0]).toContain('Readiness probe failed: couldn\'t find port "nope"');
    const pending = w?.doProbe();
    await flush();
    h.clock.step(2_000);
    expect(await pending).toBe(true);
    expect(h.events[1]).toContain("Readiness probe failed: probe did not finish within 2s");
    expect(h.manager.readiness("one")).toBe(false);
  });

  test("a probe event cuts a long output to about 1 KiB", async () => {
    const h = harness();
    const pod = podWith([{ name: "a", readinessProbe: probe() }]);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    h.script.set("readiness", [{ result: "failure", output: "x".repeat(5000) }]);
    await h.manager.worker(uid(pod), "a", "readiness")?.doProbe();
    expect(h.events[0]).toContain(`... (${5000 - EVENT_OUTPUT_MAX} more characters)`);
    expect(h.events[0]?.length).toBeLessThan(EVENT_OUTPUT_MAX + 200);
  });
});

describe("prober manager scheduling", () => {
  test("run() jitters the first probe within the period after a start, then probes every period", async () => {
    const h = harness();
    const pod = podWith([{ name: "a", readinessProbe: probe({ periodSeconds: 10 }) }]);
    const ctl = new AbortController();
    const done = h.manager.run(ctl.signal);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    h.clock.step(4_999);
    await flush();
    expect(h.calls).toHaveLength(0);
    h.clock.step(1);
    await flush();
    expect(h.calls).toHaveLength(1);
    h.clock.step(10_000);
    await flush();
    expect(h.calls).toHaveLength(2);
    expect(h.manager.stats().delay.max).toBe(0);
    ctl.abort();
    await done;
    expect(h.manager.size()).toBe(0);
  });

  test("a startup success triggers the readiness probe at once instead of at its next tick", async () => {
    const h = harness({ startAt: Date.UTC(2026, 0, 1) });
    const pod = podWith([
      { name: "a", readinessProbe: probe({ periodSeconds: 60 }), startupProbe: probe() },
    ]);
    h.clock.step(120_000); // past the start-up jitter window
    const ctl = new AbortController();
    const done = h.manager.run(ctl.signal);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    await flush();
    // The readiness worker's own first run came before the start and skipped; no time passed.
    expect(h.calls.map((c) => c.kind)).toEqual(["startup", "readiness"]);
    expect(h.manager.readiness("one")).toBe(true);
    ctl.abort();
    await done;
  });
});
