// Sends the device's health to the hub at a low rate and only on a significant change
// (docs/protocol.md, "Device health"). Invariants: a report is sent when its significant facts
// (significant() below) differ from the last one sent, or when countersPeriodMs has passed since
// the last one sent (so that traffic counters and uptime, which change at every reading, are
// refreshed at that slower pace only); after a reconnect the latest reading is sent at once.
import type { DeviceHealth } from "../../protocol/health.ts";
import { type Clock, sleepQuietly } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";

export interface HealthReporterDeps {
  clock: Clock;
  logger: Logger;
  /** Reads the facts (collect.ts). */
  collect(now: number): DeviceHealth;
  /** How often the facts are read. */
  periodMs: number;
  /** The longest a report waits when only counters changed. */
  countersPeriodMs: number;
}

function round(n: number, step: number): number {
  return Math.round(n / step) * step;
}

/** The facts whose change makes a report: temperatures to 1 °C, load to 0.1, filesystem use to
 * 1 %, throttling, boot time, storage wear, interfaces' names, states and addresses. */
export function significant(h: DeviceHealth): string {
  return JSON.stringify([
    h.bootTime,
    h.load?.map((l) => round(l, 0.1).toFixed(1)),
    h.temperatures.map((t) => [t.zone, Math.round(t.celsius)]),
    h.throttled?.raw,
    h.filesystems.map((f) => [
      f.mountpoint,
      f.totalBytes > 0 ? Math.round((f.usedBytes / f.totalBytes) * 100) : 0,
    ]),
    h.storage,
    h.interfaces.map((i) => [i.name, i.state, i.addresses]),
  ]);
}

export class HealthReporter {
  /** The last reading (the metrics show it). */
  latest: DeviceHealth | undefined;
  /** significant() of the last report sent. */
  private sentKey: string | undefined;
  /** When the last report was sent (monotonic ms). */
  private sentAt = Number.NEGATIVE_INFINITY;
  /** Sends one report; false when there is no welcomed connection (nothing was sent). */
  private send: (health: DeviceHealth) => boolean = () => false;

  constructor(private readonly deps: HealthReporterDeps) {}

  /** Reports go through `send` from now on (the hub client's). */
  bind(send: (health: DeviceHealth) => boolean): void {
    this.send = send;
  }

  /** One reading; sends it when it should be (the invariants above). Never throws. */
  tick(): void {
    try {
      this.latest = this.deps.collect(this.deps.clock.now());
    } catch (err) {
      this.deps.logger.warn("reading the device's health failed", { error: err });
      return;
    }
    const key = significant(this.latest);
    const due = this.deps.clock.monotonic() - this.sentAt >= this.deps.countersPeriodMs;
    if (key !== this.sentKey || due) this.sendLatest(key);
  }

  /** A new connection was welcomed: the hub may have forgotten the last report. */
  reconnected(): void {
    if (this.latest !== undefined) this.sendLatest(significant(this.latest));
    else this.sentKey = undefined;
  }

  private sendLatest(key: string): void {
    if (this.latest === undefined || !this.send(this.latest)) return;
    this.sentKey = key;
    this.sentAt = this.deps.clock.monotonic();
  }

  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      this.tick();
      await sleepQuietly(this.deps.clock, this.deps.periodMs, signal);
    }
  }
}
