// The Registration service on kubelet.sock: device plugins announce themselves here. Each
// request is checked as the kubelet checks it, with the kubelet's error texts, then handed to
// the device manager (onRegister), which connects to the plugin.
//
// Invariants:
// - onRegister only ever sees a checked registration: a supported version, an extended resource
//   name, and an endpoint that is a plain file name in the folder (never kubelet.sock itself).
// - A refused registration ends the call with status UNKNOWN (what the kubelet's plain errors
//   give) and the refusal's text as its message; an accepted one answers Empty.

import { lstatSync, mkdirSync, readdirSync, unlinkSync } from "node:fs";
import { dirname, join } from "node:path";
import { isExtendedResourceName } from "../../../api/extended-resources.ts";
import { GrpcStatus } from "../../../cri/errors.ts";
import { GrpcError, type GrpcServer, startGrpcServer } from "../../../cri/grpc-server.ts";
import type { Logger } from "../../../util/log.ts";
import {
  decodeRegisterRequest,
  EMPTY_MESSAGE,
  KUBELET_SOCKET,
  REGISTER_PATH,
  SUPPORTED_VERSIONS,
} from "./api.ts";
import type { Registration } from "./types.ts";

export interface RegistrationServerOptions {
  /** Absolute path of kubelet.sock; its folder is the device plugin folder (made if missing). */
  socketPath: string;
  /** Takes a checked registration (connects to the plugin, replaces an earlier endpoint of the
   * same resource). The plugin is registered once it resolves; when it throws, the registration
   * fails with its message. */
  onRegister: (registration: Registration) => Promise<void> | void;
  logger: Logger;
}

/** The kubelet's refusal of a registration, or undefined when it may go on. */
function refusal(r: Registration): string | undefined {
  if (!SUPPORTED_VERSIONS.includes(r.version)) {
    return `requested API version ${JSON.stringify(r.version)} is not supported by kubelet. Supported version is ${JSON.stringify(SUPPORTED_VERSIONS)}`;
  }
  if (!isExtendedResourceName(r.resourceName)) {
    return `the ResourceName ${JSON.stringify(r.resourceName)} is invalid`;
  }
  const e = r.endpoint;
  if (
    e === "" ||
    e === "." ||
    e === ".." ||
    e.includes("/") ||
    e.includes("\0") ||
    e === KUBELET_SOCKET
  ) {
    return `the Endpoint ${JSON.stringify(e)} is invalid: it must be the file name of the plugin's socket in the device plugin folder, other than ${KUBELET_SOCKET}`;
  }
  return undefined;
}

/** Serves Registration on `socketPath` (a stale socket there is replaced); resolves once it
 * listens. close() stops it. */
export async function startRegistrationServer(
  opts: RegistrationServerOptions,
): Promise<GrpcServer> {
  mkdirSync(dirname(opts.socketPath), { recursive: true, mode: 0o750 });
  return startGrpcServer({
    socketPath: opts.socketPath,
    maxReceiveBytes: 64 * 1024,
    unary: { [REGISTER_PATH]: (request) => register(request, opts) },
  });
}

async function register(request: Buffer, opts: RegistrationServerOptions): Promise<Uint8Array> {
  let r: Registration;
  try {
    r = decodeRegisterRequest(request);
  } catch (err) {
    opts.logger.warn("Refused a device plugin registration", { error: err });
    throw new GrpcError(GrpcStatus.INVALID_ARGUMENT, (err as Error).message);
  }
  const fields = { resourceName: r.resourceName, endpoint: r.endpoint, version: r.version };
  opts.logger.info("Device plugin registration", fields);
  const refused = refusal(r);
  if (refused !== undefined) {
    opts.logger.warn("Refused a device plugin registration", { ...fields, error: refused });
    throw new GrpcError(GrpcStatus.UNKNOWN, refused);
  }
  try {
    await opts.onRegister(r);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    opts.logger.warn("Device plugin registration failed", { ...fields, error: message });
    throw new GrpcError(GrpcStatus.UNKNOWN, message);
  }
  return EMPTY_MESSAGE;
}

/** Removes every socket in the device plugin folder `dir`, as the kubelet does at start: sockets
 * of plugins registered with an earlier run, and kubelet.sock. Other files (the checkpoint) and
 * folders stay. Returns the names removed; what cannot be removed is logged. */
export function removeStaleSockets(dir: string, logger: Logger): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
      logger.warn("Cannot list the device plugin folder", { dir, error: err });
    }
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const path = join(dir, name);
    try {
      if (!lstatSync(path).isSocket()) continue;
      unlinkSync(path);
      removed.push(name);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") continue;
      logger.warn("Cannot remove a stale device plugin socket", { path, error: err });
    }
  }
  if (removed.length > 0) logger.info("Removed stale device plugin sockets", { dir, removed });
  return removed;
}
