// What the hub client does with the hub's desired state (docs/protocol.md, "Desired state"): hands
// each `desired` to the handler (the "api" pod source) unless it is the generation already held,
// drops Secrets that came over a connection neither TLS nor loopback, remembers the last refusal
// until a later state is used, and builds the `desired.ack` report (generation, refusal,
// conflicts). A refusal is logged and recorded as a Warning event; pods are never touched here.
import type { DesiredAck, DesiredConflict } from "../../protocol/index.ts";
import type { Logger } from "../../util/log.ts";
import type { DesiredReceived } from "./session.ts";

/** Takes the hub's desired state (the "api" pod source and what it conflicts with). */
export interface DesiredHandler {
  /** The generation saved and applied. */
  readonly generation: number;
  /** Validates, saves, then applies a desired state; on failure nothing changes. */
  accept(input: {
    generation: number;
    pods: unknown[];
    configMaps?: unknown[];
    secrets?: unknown[];
  }): { ok: true } | { ok: false; reason: string };
  /** Pods of the saved state that the device does not run (name taken by a file pod). */
  conflicts(): DesiredConflict[];
}

/** Whether Secrets may come over `connectUrl`: TLS, or a loopback hub. */
export function secretsAllowed(connectUrl: string): boolean {
  const u = new URL(connectUrl);
  if (u.protocol === "wss:" || u.protocol === "https:") return true;
  const host = u.hostname.replace(/^\[|\]$/g, "");
  return host === "localhost" || host === "::1" || /^127\./.test(host);
}

export interface DesiredReportsDeps {
  /** Absent: the agent does not run hub pods, and refuses every desired state. */
  handler?: DesiredHandler;
  log: Logger;
  nodeEvent(type: "Normal" | "Warning", reason: string, message: string): void;
}

export class DesiredReports {
  /** The last desired state refused, until one is used. */
  private refused: { generation?: number; reason: string } | undefined;

  constructor(private readonly deps: DesiredReportsDeps) {}

  /** The desired.ack report of the state the agent holds. */
  report(): Omit<DesiredAck, "type"> {
    const conflicts = this.deps.handler?.conflicts() ?? [];
    return {
      generation: this.deps.handler?.generation ?? 0,
      ...(this.refused !== undefined && { refused: this.refused }),
      ...(conflicts.length > 0 && { conflicts }),
    };
  }

  /** Takes one desired message (or why it did not decode) that came over `connectUrl`; returns
   * the ack to answer with. */
  take(d: DesiredReceived, connectUrl: string): Omit<DesiredAck, "type"> {
    const handler = this.deps.handler;
    if (!d.ok) this.refuse(d.reason, d.generation);
    else if (handler === undefined)
      this.refuse("this agent does not run hub pods", d.message.generation);
    else if (d.message.generation === handler.generation) this.refused = undefined;
    else {
      const { generation, pods, configMaps } = d.message;
      const secrets = this.secretsOf(d.message.secrets, connectUrl);
      const r = handler.accept({
        generation,
        pods,
        ...(configMaps !== undefined && { configMaps }),
        ...(secrets !== undefined && { secrets }),
      });
      if (r.ok) {
        this.refused = undefined;
        this.deps.log.info("applied the hub's desired state", { generation, pods: pods.length });
      } else this.refuse(r.reason, generation);
    }
    return this.report();
  }

  private secretsOf(secrets: unknown[] | undefined, connectUrl: string): unknown[] | undefined {
    if (secrets === undefined || secretsAllowed(connectUrl)) return secrets;
    this.deps.log.warn("dropped Secrets sent over a connection that is neither TLS nor loopback", {
      url: connectUrl,
      secrets: secrets.length,
    });
    return undefined;
  }

  private refuse(reason: string, generation: number | undefined): void {
    this.refused = { ...(generation !== undefined && { generation }), reason };
    this.deps.log.warn("refused the hub's desired state; pods keep running as they are", {
      generation,
      reason,
    });
    this.deps.nodeEvent("Warning", "DesiredStateRefused", `desired state refused: ${reason}`);
  }
}
