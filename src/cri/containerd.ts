// A client for containerd's own API (beside CRI, on the same socket): the services the CRI does
// not offer. Today the content service's ingests in progress (how far each blob of a pull has
// been downloaded) and leases, with CRI's PullImage under a lease (so a failed pull's downloads
// stay for the next attempt); the same client is where later calls go (content Write, images
// Create for air-gapped imports), one service object each.
//
// Invariants:
// - Every call carries the client's namespace in the `containerd-namespace` header (the CRI
//   plugin's is "k8s.io") and has a deadline; it settles with the response or a CriError.
// - A runtime that is not containerd answers UNIMPLEMENTED (CriError code "Unimplemented"):
//   callers treat that as "not available here", never as a failure of what they do.
// - A call under a lease has a connection of its own (the lease is a request header of the
//   connection's calls), closed when the call settles.

import { decodeMessage, encodeMessage } from "./codec.ts";
import { parseCriEndpoint } from "./endpoint.ts";
import { criErrorFromGrpc, GrpcStatus } from "./errors.ts";
import { LOCAL_PEER_HEADER_BYTES } from "./grpc-wire.ts";
import {
  CONTAINERD_CONTENT_PACKAGE,
  CONTAINERD_LEASES_PACKAGE,
  type CriRpc,
  loadCriProto,
} from "./proto.ts";
import type { PullImageRequest, PullImageResponse } from "./requests.ts";
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

interface CallOpts {
  timeoutMs?: number;
  signal?: AbortSignal;
}

interface LeaseService {
  /** Creates the lease `id` with `labels` (e.g. "containerd.io/gc.expire"); resolves false
   * when a lease of that id exists already (it is left as it is). */
  create(id: string, labels: Record<string, string>, opts?: CallOpts): Promise<boolean>;
  /** Deletes the lease `id`; resolves false when there is none. */
  delete(id: string, opts?: CallOpts): Promise<boolean>;
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
  readonly leases: LeaseService;
  /** CRI's PullImage with the lease `lease` given: what the pull writes (its downloads) is held
   * by the lease, also when the pull fails. Default deadline 10 min, as the CRI client's. */
  pullImageLeased(
    lease: string,
    request: PullImageRequest,
    opts?: CallOpts,
  ): Promise<PullImageResponse>;
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
/** Deadline of a leased pull not given one: the CRI client's pull deadline. */
const PULL_TIMEOUT_MS = 600_000;

type Transport = ReturnType<typeof createH2Transport>;

/** One unary call on `through`: the decoded answer, or a CriError (naming `where` when given;
 * CRI's own call is not given one, so that its errors read as the CRI client's). */
async function unary(
  through: Transport,
  rpc: CriRpc,
  name: string,
  req: unknown,
  opts: CallOpts & { timeoutMs: number },
  where?: string,
): Promise<unknown> {
  try {
    const answer = await through.call(
      rpc.path,
      encodeMessage(rpc.request, req),
      opts.timeoutMs,
      opts.signal,
    );
    return decodeMessage(rpc.response, answer);
  } catch (err) {
    throw criErrorFromGrpc(name, err, where);
  }
}

/** Resolves true when `promise` does, false when it fails with gRPC `status`. */
function unless(status: number, promise: Promise<unknown>): Promise<boolean> {
  return promise.then(
    () => true,
    (err) => {
      if ((err as { grpcStatus?: number }).grpcStatus === status) return false;
      throw err;
    },
  );
}

export function createContainerdClient(options: ContainerdClientOptions): ContainerdClient {
  const { socketPath } = parseCriEndpoint(options.endpoint);
  const connect = (metadata: [string, string][]) =>
    createH2Transport({
      address: { unix: socketPath },
      maxReceiveBytes: 4 * 1024 * 1024,
      windowBytes: 1 << 20,
      maxHeaderListBytes: LOCAL_PEER_HEADER_BYTES,
      metadata,
    });
  const namespace: [string, string] = ["containerd-namespace", options.namespace ?? CRI_NAMESPACE];
  const transport = connect([namespace]);
  const proto = loadCriProto();
  const defaultMs = options.defaultTimeoutMs ?? DEFAULT_TIMEOUT_MS;
  const where = `containerd at ${options.endpoint}`;
  const call = (rpc: CriRpc, name: string, req: unknown, opts: CallOpts) =>
    unary(transport, rpc, name, req, { ...opts, timeoutMs: opts.timeoutMs ?? defaultMs }, where);
  const rpcs = {
    list: proto.rpc("Content", "ListStatuses", CONTAINERD_CONTENT_PACKAGE),
    create: proto.rpc("Leases", "Create", CONTAINERD_LEASES_PACKAGE),
    delete: proto.rpc("Leases", "Delete", CONTAINERD_LEASES_PACKAGE),
    pull: proto.rpc("ImageService", "PullImage"),
  };
  return {
    content: {
      listStatuses: async (filters, opts = {}) =>
        ingestsOf(await call(rpcs.list, "ListStatuses", { filters: [...filters] }, opts)),
    },
    leases: {
      create: (id, labels, opts = {}) =>
        unless(GrpcStatus.ALREADY_EXISTS, call(rpcs.create, "Leases.Create", { id, labels }, opts)),
      delete: (id, opts = {}) =>
        unless(GrpcStatus.NOT_FOUND, call(rpcs.delete, "Leases.Delete", { id }, opts)),
    },
    async pullImageLeased(lease, request, opts = {}) {
      const leased = connect([namespace, ["containerd-lease", lease]]);
      try {
        const timeoutMs = opts.timeoutMs ?? PULL_TIMEOUT_MS;
        const answer = await unary(leased, rpcs.pull, "PullImage", request, { ...opts, timeoutMs });
        return answer as PullImageResponse;
      } finally {
        leased.close();
      }
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
