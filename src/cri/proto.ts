// The CRI messages and the part of containerd's own API fleetlet reads (its event service), as
// the codec's schemas. The table of the .proto files is computed when the program is built
// (proto-macro.ts, a Bun macro) and linked here: nothing is parsed, or read from the source tree,
// at run time.

import { decodeMessage, type MessageSchema } from "./codec.ts";
import { protoTable } from "./proto-macro.ts" with { type: "macro" };
import { linkSchemas } from "./proto-table.ts";

export const CRI_PACKAGE = "runtime.v1";
/** containerd's event service and the messages fleetlet reads from it. */
export const CONTAINERD_EVENTS_PACKAGE = "containerd.services.events.v1";
/** containerd's content service (its ingests in progress). */
export const CONTAINERD_CONTENT_PACKAGE = "containerd.services.content.v1";
/** containerd's lease service (what a pull's attempts keep between them). */
export const CONTAINERD_LEASES_PACKAGE = "containerd.services.leases.v1";

/** One RPC as the CRI client calls it. */
export interface CriRpc {
  /** The HTTP/2 path, e.g. "/runtime.v1.RuntimeService/Version". */
  path: string;
  request: MessageSchema;
  response: MessageSchema;
}

/** The protos as the CRI client uses them: the codec's schemas (codec.ts), each RPC's path and
 * message types, a decoder of one message type ("runtime.v1.Container") and a type's map
 * fields (field number → property name in decoded objects). */
export function loadCriProto(): {
  schemas: ReadonlyMap<string, MessageSchema>;
  /** An RPC of the CRI package, or of `pkg`. */
  rpc(service: string, method: string, pkg?: string): CriRpc;
  decoder(type: string): (buf: Buffer) => unknown;
  mapFields(type: string): ReadonlyMap<number, string>;
} {
  const table = protoTable();
  const schemas = linkSchemas(table);
  const schema = (type: string): MessageSchema => {
    const s = schemas.get(type);
    if (s === undefined) throw new Error(`The embedded protos have no message ${type}`);
    return s;
  };
  return {
    schemas,
    rpc(service, method, pkg = CRI_PACKAGE) {
      const m = table.methods[`${pkg}.${service}/${method}`];
      if (m === undefined) throw new Error(`The embedded protos have no RPC ${service}.${method}`);
      return {
        path: `/${pkg}.${service}/${method}`,
        request: schema(m.request),
        response: schema(m.response),
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
