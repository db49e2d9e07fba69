// One probe worker (kubelet's prober worker): probes one container instance (a container ID) for
// one probe kind every periodSeconds, and settles results by the thresholds.
//
// Rules (kubelet's doProbe):
// - No probe before initialDelaySeconds since the container started.
// - Liveness and readiness wait until the container has started (its startup probe succeeded);
//   the startup probe stops once it has.
// - A result is settled after failureThreshold failures or successThreshold successes in a row.
// - After a settled liveness or startup failure the worker holds: the container will be
//   restarted, and a new container ID gets a new worker.
// - While the pod terminates, liveness and startup report success and stop.
// - The first run is delayed by a random part of the period when the agent started less than a
//   period ago, so that pods recovered at start do not all probe at once.
//
// Invariant: doProbe() and run() never throw; stop() ends run() at its next wait.

import type { Probe } from "../../api/types.ts";
import type { Clock } from "../../util/clock.ts";
import type { ResultsManager } from "./results.ts";
import type { ProbeKind, ProbeOutcome, ProbeResult, ProbeTarget } from "./types.ts";

export interface WorkerDeps {
  clock: Clock;
  /** In [0, 1); injected for tests. */
  random: () => number;
  results: ResultsManager;
  /** Runs the probe once (never throws: see runProbe). */
  /** Runs the probe; `moot()` tells, once it is done, whether its result still counts. */
  probe(
    kind: ProbeKind,
    probe: Probe,
    target: ProbeTarget,
    moot: () => boolean,
  ): Promise<ProbeOutcome>;
  /** Has the container started (startup probe succeeded, or none)? */
  isStarted(containerId: string): boolean;
  /** Is the pod being terminated? */
  isTerminating(): boolean;
  /** When the prober manager started (monotonic ms). */
  managerStartedAt: number;
  /** Reports how late a scheduled probe ran (ms). */
  recordDelay(ms: number): void;
  /** Reports an error of the worker itself (not a probe failure, which is a result). */
  reportError(error: unknown): void;
}

export interface WorkerSpec {
  kind: ProbeKind;
  probe: Probe;
  target: ProbeTarget;
  podUid: string;
  /** When the container started (monotonic ms: its wall-clock startedAt placed on the monotonic
   * clock when the worker was made, so that a wall step neither skips nor stretches
   * initialDelaySeconds). */
  startedAt: number;
}

export class ProbeWorker {
  /** The last raw result and how many times in a row it came. */
  private lastResult: ProbeResult | undefined;
  private resultRun = 0;
  /** Set after a settled liveness/startup failure: no more probing for this container. */
  private onHold = false;
  private stopped = false;
  /** Ends the current wait early (manual trigger or stop). */
  private wake: (() => void) | undefined;
  private triggered = false;

  constructor(
    private readonly deps: WorkerDeps,
    readonly spec: WorkerSpec,
  ) {}

  get containerId(): string {
    return this.spec.target.containerId;
  }

  get kind(): ProbeKind {
    return this.spec.kind;
  }

  private get periodMs(): number {
    return (this.spec.probe.periodSeconds || 10) * 1000;
  }

  /** Liveness and startup results stop counting once the pod is terminating. */
  private readonly moot = (): boolean =>
    this.spec.kind !== "readiness" && this.deps.isTerminating();

  /** One probe iteration; returns false when the worker should stop. */
  async doProbe(): Promise<boolean> {
    try {
      return await this.probeOnce();
    } catch (error) {
      // The probe itself never throws (its failures are results): this is a fault of the worker's
      // bookkeeping. It is reported, and the worker goes on probing at its next period.
      this.deps.reportError(error);
      return true;
    }
  }

  /** A terminating pod's liveness/startup result is success, and the worker stops. */
  private endAsSuccess(): false {
    const { kind, target, podUid } = this.spec;
    this.deps.results.set(kind, target.containerId, podUid, "success");
    return false;
  }

  private async probeOnce(): Promise<boolean> {
    const { kind, probe, target } = this.spec;
    if (this.stopped) return false;
    if (this.moot()) return this.endAsSuccess();
    if (this.onHold) return true;
    const elapsed = this.deps.clock.monotonic() - this.spec.startedAt;
    if (elapsed < (probe.initialDelaySeconds ?? 0) * 1000) return true;
    const started = this.deps.isStarted(target.containerId);
    if (kind === "startup" ? started : !started) return true;
    const outcome = await this.deps.probe(kind, probe, target, this.moot);
    if (this.stopped) return false;
    // The pod began terminating while the probe ran (its preStop or SIGTERM handler may have
    // removed what the probe checks).
    if (this.moot()) return this.endAsSuccess();
    this.settle(outcome.result);
    return true;
  }

  private settle(result: ProbeResult): void {
    const { kind, probe, target, podUid } = this.spec;
    if (this.lastResult === result) this.resultRun++;
    else {
      this.lastResult = result;
      this.resultRun = 1;
    }
    const threshold =
      result === "failure" ? probe.failureThreshold || 3 : probe.successThreshold || 1;
    if (this.resultRun < threshold) return;
    this.deps.results.set(kind, target.containerId, podUid, result);
    if (result === "failure" && kind !== "readiness") {
      this.onHold = true;
      this.resultRun = 0;
    }
  }

  /** Probes until stopped: jittered first run, then every period (or when triggered); periods
   * are kept on the monotonic clock. */
  async run(): Promise<void> {
    const { clock } = this.deps;
    const period = this.periodMs;
    if (clock.monotonic() - this.deps.managerStartedAt < period) {
      await this.wait(Math.floor(this.deps.random() * period));
    }
    let tick = clock.monotonic();
    while (!this.stopped) {
      const triggered = this.triggered;
      this.triggered = false;
      if (!triggered) this.deps.recordDelay(Math.max(0, clock.monotonic() - tick));
      if (!(await this.doProbe())) break;
      const now = clock.monotonic();
      if (!triggered) tick += period;
      if (tick <= now) tick += Math.ceil((now - tick + 1) / period) * period;
      if (this.stopped) break;
      await this.wait(tick - now);
    }
    this.stopped = true;
  }

  /** Runs the probe now instead of at the next tick (if the worker is waiting). */
  trigger(): void {
    if (this.wake === undefined) return;
    this.triggered = true;
    this.wake();
  }

  /** Stops the worker and forgets its result. */
  stop(): void {
    this.stopped = true;
    this.deps.results.remove(this.spec.kind, this.spec.target.containerId);
    this.wake?.();
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  private wait(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        cancel();
        this.wake = undefined;
        resolve();
      };
      const cancel = this.deps.clock.setTimer(ms, done);
      this.wake = done;
    });
  }
}
