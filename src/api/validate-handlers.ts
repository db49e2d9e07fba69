// Value checks for probes and lifecycle hooks (the "handlers" a container runs).

import { type FieldError, type FieldPath, forbidden, invalid, required } from "./field-error.ts";
import { isValidPortName, isValidPortNum, PORT_RANGE_MSG } from "./names.ts";
import type {
  ExecAction,
  HTTPGetAction,
  IntOrString,
  LifecycleHandler,
  Probe,
  TCPSocketAction,
} from "./types.ts";

export type ProbeKind = "liveness" | "readiness" | "startup";

const NON_NEGATIVE_MSG = "must be greater than or equal to 0";
const headerNameRe = /^[-A-Za-z0-9!#$%&'*+.^_`|~]+$/;

/** Checks that exactly one of `names` is set on `obj`; returns errors naming the field. */
function validateOneHandler(obj: object, names: readonly string[], path: FieldPath): FieldError[] {
  const set = names.filter((n) => (obj as Record<string, unknown>)[n] !== undefined);
  if (set.length === 0) return [required(path, "must specify a handler type")];
  return set
    .slice(1)
    .map((n) => forbidden(path.child(n), "may not specify more than 1 handler type"));
}

function validatePortNumOrName(port: IntOrString, path: FieldPath): FieldError[] {
  if (typeof port === "number") {
    return isValidPortNum(port) ? [] : [invalid(path, port, PORT_RANGE_MSG)];
  }
  if (port === "") return [required(path)];
  return isValidPortName(port).map((m) => invalid(path, port, m));
}

function validateExec(exec: ExecAction, path: FieldPath): FieldError[] {
  return exec.command && exec.command.length > 0 ? [] : [required(path.child("command"))];
}

function validateHTTPGet(get: HTTPGetAction, path: FieldPath): FieldError[] {
  const errs = validatePortNumOrName(get.port, path.child("port"));
  (get.httpHeaders ?? []).forEach((h, i) => {
    if (!headerNameRe.test(h.name)) {
      const p = path.child("httpHeaders").index(i).child("name");
      errs.push(
        invalid(
          p,
          h.name,
          "a valid HTTP header must consist of alphanumeric characters, '-', and other token characters",
        ),
      );
    }
  });
  return errs;
}

function validateTCPSocket(tcp: TCPSocketAction, path: FieldPath): FieldError[] {
  return validatePortNumOrName(tcp.port, path.child("port"));
}

function validateNonNegative(value: number | undefined, path: FieldPath): FieldError[] {
  return value !== undefined && value < 0 ? [invalid(path, value, NON_NEGATIVE_MSG)] : [];
}

/**
 * A probe runs exactly one handler; its timings are non-negative; liveness and startup probes
 * need successThreshold 1; only liveness and startup probes may set a positive
 * terminationGracePeriodSeconds.
 */
export function validateProbe(probe: Probe, kind: ProbeKind, path: FieldPath): FieldError[] {
  const errs = validateOneHandler(probe, ["exec", "httpGet", "tcpSocket", "grpc"], path);
  if (probe.exec) errs.push(...validateExec(probe.exec, path.child("exec")));
  if (probe.httpGet) errs.push(...validateHTTPGet(probe.httpGet, path.child("httpGet")));
  if (probe.tcpSocket) errs.push(...validateTCPSocket(probe.tcpSocket, path.child("tcpSocket")));
  if (probe.grpc && !isValidPortNum(probe.grpc.port)) {
    errs.push(invalid(path.child("grpc").child("port"), probe.grpc.port, PORT_RANGE_MSG));
  }
  for (const f of [
    "initialDelaySeconds",
    "timeoutSeconds",
    "periodSeconds",
    "successThreshold",
    "failureThreshold",
  ] as const) {
    errs.push(...validateNonNegative(probe[f], path.child(f)));
  }
  const success = probe.successThreshold;
  if (kind !== "readiness" && success !== undefined && success !== 0 && success !== 1) {
    errs.push(invalid(path.child("successThreshold"), success, "must be 1"));
  }
  const grace = probe.terminationGracePeriodSeconds;
  if (grace !== undefined) {
    const p = path.child("terminationGracePeriodSeconds");
    if (kind === "readiness") errs.push(invalid(p, grace, "must not be set for readinessProbes"));
    else if (grace <= 0) errs.push(invalid(p, grace, "must be greater than 0"));
  }
  return errs;
}

/**
 * A hook runs exactly one handler; a sleep lasts 0..gracePeriodSeconds seconds, since the
 * container is killed at the end of the grace period anyway.
 */
export function validateLifecycleHandler(
  hook: LifecycleHandler,
  gracePeriodSeconds: number,
  path: FieldPath,
): FieldError[] {
  const errs = validateOneHandler(hook, ["exec", "httpGet", "tcpSocket", "sleep"], path);
  if (hook.exec) errs.push(...validateExec(hook.exec, path.child("exec")));
  if (hook.httpGet) errs.push(...validateHTTPGet(hook.httpGet, path.child("httpGet")));
  if (hook.tcpSocket) errs.push(...validateTCPSocket(hook.tcpSocket, path.child("tcpSocket")));
  if (hook.sleep) {
    const s = hook.sleep.seconds;
    if (s < 0 || s > gracePeriodSeconds) {
      const detail = `must be between 0 and the pod's terminationGracePeriodSeconds (${gracePeriodSeconds}), inclusive`;
      errs.push(invalid(path.child("sleep").child("seconds"), s, detail));
    }
  }
  return errs;
}
