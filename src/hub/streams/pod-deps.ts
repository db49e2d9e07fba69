// What the pod stream routes (pod-routes.ts, log-response.ts, portforward.ts) share: their deps
// and the Status a stream's failure is answered with.
import { failureStatus, json } from "../../api/status.ts";
import type { Pod } from "../../api/types.ts";
import type { OpenStream, StreamFailure } from "../../streams/types.ts";
import type { AuditLog } from "../audit.ts";

export interface PodStreamDeps {
  /** The pod `namespace/name` and the node it runs on. */
  findPod(namespace: string, name: string): { node: string; pod: Pod } | undefined;
  /** Streams to `node`: over its agent's connection here (broker.ts), or through the replica
   * that holds it (relay/replica.ts). */
  opener(node: string): OpenStream;
  audit: AuditLog;
  /** Refuses a request that is not the operator's (401/403). */
  authorize(req: Request, url: URL): void;
}

/** A StreamFailure as the Status the client gets. */
export function failureResponse(err: StreamFailure): Response {
  return json(failureStatus(err.reason, err.message, err.code), err.code);
}
