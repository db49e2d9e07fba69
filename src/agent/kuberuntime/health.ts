// Whether the container runtime is usable, as kubelet's runtimeState: CRI Status must answer with
// RuntimeReady true, and PLEG must be relisting. Checked every few seconds; changes are logged
// once each way, and the reasons are what /healthz reports.
import type { CriRuntime } from "../../cri/index.ts";
import { type Clock, sleepQuietly } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";

export interface RuntimeHealthDeps {
  cri: Pick<CriRuntime, "status">;
  clock: Clock;
  logger: Logger;
  plegHealthy: () => boolean;
  periodMs?: number;
}

export interface RuntimeHealth {
  /** One check (tests call it directly). */
  check(): Promise<void>;
  healthy(): boolean;
  /** Why the runtime is not usable; empty when healthy. */
  reasons(): string[];
  /** When the runtime last became unhealthy or healthy (epoch ms). */
  since(): number;
  run(signal: AbortSignal): Promise<void>;
}

export function createRuntimeHealth(deps: RuntimeHealthDeps): RuntimeHealth {
  let runtimeReasons: string[] = ["the container runtime has not been checked yet"];
  let wasHealthy: boolean | undefined;
  let since = deps.clock.now();

  const reasons = () => [
    ...runtimeReasons,
    ...(deps.plegHealthy()
      ? []
      : ["PLEG is not healthy: the runtime has not been relisted recently"]),
  ];

  return {
    reasons,
    healthy: () => reasons().length === 0,
    since: () => since,
    async check() {
      try {
        const res = await deps.cri.status({}, { timeoutMs: 5000 });
        const ready = res.status?.conditions.find((c) => c.type === "RuntimeReady");
        runtimeReasons =
          ready?.status === true
            ? []
            : [
                `container runtime is not ready: ${ready?.reason ?? "no RuntimeReady condition"} ${ready?.message ?? ""}`.trim(),
              ];
      } catch (err) {
        runtimeReasons = [`container runtime is down: ${(err as Error).message}`];
      }
      const ok = reasons().length === 0;
      if (ok !== wasHealthy) {
        since = deps.clock.now();
        if (ok) deps.logger.info("container runtime is healthy");
        else
          deps.logger.warn("container runtime is unhealthy; pod syncs wait", {
            reasons: reasons(),
          });
        wasHealthy = ok;
      }
    },
    async run(signal) {
      while (!signal.aborted) {
        await sleepQuietly(
          deps.clock,
          wasHealthy === false ? 1000 : (deps.periodMs ?? 5000),
          signal,
        );
        if (!signal.aborted) await this.check();
      }
    },
  };
}
