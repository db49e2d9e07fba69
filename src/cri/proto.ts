// The CRI proto and the part of containerd's own API fleetlet reads (its event service), embedded
// in the program at build time (Bun text import): nothing is read from the source tree at run
// time, so the compiled binary carries them.

import { parse } from "protobufjs";
import eventsProto from "../../proto/containerd-events.proto" with { type: "text" };
import criProto from "../../proto/cri.proto" with { type: "text" };
import { buildSchemas, decodeMessage, type MessageSchema } from "./codec.ts";

export const CRI_PACKAGE = "runtime.v1";
/** containerd's event service and the messages fleetlet reads from it. */
export const CONTAINERD_EVENTS_PACKAGE = "containerd.services.events.v1";

/** The text of proto/cri.proto as embedded in this build. */
export function criProtoText(): string {
  return criProto;
}

/** One RPC as the CRI client calls it. */
export interface CriRpc {
  /** The HTTP/2 path, e.g. "/runtime.v1.RuntimeService/Version". */
  path: string;
  request: MessageSchema;
  response: MessageSchema;
}

/** The embedded proto as the CRI client uses it: the codec's schemas (codec.ts), each RPC's
 * path and message types, a decoder of one message type ("runtime.v1.Container") and a type's
 * map fields (field number → property name in decoded objects). */
export function loadCriProto(): {
  schemas: ReadonlyMap<string, MessageSchema>;
  /** An RPC of the CRI package, or of `pkg`. */
  rpc(service: string, method: string, pkg?: string): CriRpc;
  decoder(type: string): (buf: Buffer) => unknown;
  mapFields(type: string): ReadonlyMap<number, string>;
} {
  const { root } = parse(criProto, { keepCase: false });
  parse(eventsProto, root, { keepCase: false });
  const schemas = buildSchemas(root);
  const schema = (type: string): MessageSchema => {
    const s = schemas.get(type.replace(/^\./, ""));
    if (s === undefined) throw new Error(`The embedded CRI proto has no message ${type}`);
    return s;
  };
  return {
    schemas,
    rpc(service, method, pkg = CRI_PACKAGE) {
      const svc = root.lookupService(`${pkg}.${service}`);
      const m = svc.methods[method];
      if (m === undefined)
        throw new Error(`The embedded CRI proto has no RPC ${service}.${method}`);
      m.resolve();
      return {
        path: `/${pkg}.${service}/${method}`,
        request: schema(m.resolvedRequestType?.fullName ?? ""),
        response: schema(m.resolvedResponseType?.fullName ?? ""),
      };
    },
    decoder(type) {
      const s = schema(type);
      return (buf) => decodeMessage(s, buf);
    },
    mapFields(type) {
      const fields = schema(type).fields.filter((f) => f.mapKey !== undefined);
      return new Map(fields.map((f) => [f.no, f.name]));
    },
  };
}
