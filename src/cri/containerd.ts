// A client for containerd's own API (beside CRI, on the same socket): the services the CRI does
// not offer. Today the content service's ingests in progress (how far each blob of a pull has
// been downloaded); the same client is where later calls go (content Write, images Create for
// air-gapped imports), one service object each.
//
// Invariants:
// - Every call carries the client's namespace in the `containerd-namespace` header (the CRI
//   plugin's is "k8s.io") and has a deadline; it settles with the response or a CriError.
// - A runtime that is not containerd answers UNIMPLEMENTED (CriError code "Unimplemented"):
//   callers treat that as "not available here", never as a failure of what they do.

import { decodeMessage, encodeMessage } from "./codec.ts";
import { parseCriEndpoint } from "./endpoint.ts";
import { criErrorFromGrpc } from "./errors.ts";
import { LOCAL_PEER_HEADER_BYTES } from "./grpc-wire.ts";
import { CONTAINERD_CONTENT_PACKAGE, loadCriProto } from "./proto.ts";
import { createH2Transport } from "./transport.ts";

/** containerd's namespace for everything its CRI plugin makes. */
const CRI_NAMESPACE = "k8s.io";

/** One blob being written into the content store (a pull's download of one layer, config or
 * manifest). */
export interface IngestStatus {
  /** The ingest's name, e.g. "layer-sha256:<hex>" for a pull's layer. */
  ref: string;
  /** Bytes written so far. */
  offset: number;
  /** Bytes the blob has; 0 when not known yet. */
  total: number;
  /** The digest the blob must have ("" when not given). */
  expected: string;
}

interface ContentService {
  /** The ingests in progress in the client's namespace (all of them when `filters` is empty). */
  listStatuses(
    filters: readonly string[],
    opts?: { timeoutMs?: number; signal?: AbortSignal },
  ): Promise<IngestStatus[]>;
}

export interface ContainerdClient {
  readonly content: ContentService;
  /** Closes the connection; calls in flight and later calls reject. Idempotent. */
  close(): void;
}

interface ContainerdClientOptions {
  /** "unix:///path/to/socket" (the CRI endpoint: containerd serves both on one socket). */
  endpoint: string;
  /** The namespace calls act in. Default "k8s.io", the CRI plugin's. */
  namespace?: string;
  /** Deadline of a call that is not given one. Default 10 s. */
  defaultTimeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 10_000;

export function createContainerdClient(options: ContainerdClientOptions): ContainerdClient {
  const { socketPath } = parseCriEndpoint(options.endpoint);
  const transport = createH2Transport({
    address: { unix: socketPath },
    maxReceiveBytes: 4 * 1024 * 1024,
    windowBytes: 1 << 20,
    maxHeaderListBytes: LOCAL_PEER_HEADER_BYTES,
    metadata: [["containerd-namespace", options.namespace ?? CRI_NAMESPACE]],
  });
  const proto = loadCriProto();
  const list = proto.rpc("Content", "ListStatuses", CONTAINERD_CONTENT_PACKAGE);
  const defaultMs = options.defaultTimeoutMs ?? DEFAULT_TIMEOUT_MS;
  return {
    content: {
      async listStatuses(filters, opts = {}) {
        const request = encodeMessage(list.request, { filters: [...filters] });
        let answer: Buffer;
        try {
          answer = await transport.call(
            list.path,
            request,
            opts.timeoutMs ?? defaultMs,
            opts.signal,
          );
        } catch (err) {
          throw criErrorFromGrpc("ListStatuses", err, `containerd at ${options.endpoint}`);
        }
        return ingestsOf(decodeMessage(list.response, answer));
      },
    },
    close: () => transport.close(),
  };
}

/** The ingests of a decoded ListStatusesResponse. */
function ingestsOf(decoded: unknown): IngestStatus[] {
  const { statuses = [] } = decoded as { statuses?: Partial<IngestStatus>[] };
  return statuses.map((s) => ({
    ref: s.ref ?? "",
    offset: Number(s.offset ?? 0),
    total: Number(s.total ?? 0),
    expected: s.expected ?? "",
  }));
}
