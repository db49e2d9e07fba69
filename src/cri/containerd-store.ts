// A client for the parts of containerd's own API (beside CRI, on the same socket) that an image
// import needs, since CRI has no import: leases, the content store, snapshots, the diff service
// and image records. Every call names the namespace (`containerd-namespace`) and, inside an
// import, the import's lease (`containerd-lease`), each sent as request metadata by a transport
// of its own (one connection per lease: an import is rare and long).
//
// Invariants:
// - Every unary call has a deadline; a blob write is bounded by its caller's signal and a
//   deadline proportional to its size.
// - Failures reject with a CriError naming the RPC (its grpcStatus says ALREADY_EXISTS etc.).

import { MessageEncoder } from "./codec.ts";
import { criErrorFromGrpc, GrpcStatus } from "./errors.ts";
import { type GrpcTransport, LOCAL_PEER_HEADER_BYTES, type TransportError } from "./grpc-wire.ts";
import { loadCriProto } from "./proto.ts";
import { createH2Transport } from "./transport.ts";

/** A content descriptor as containerd's API carries it. */
export interface ContentDescriptor {
  mediaType: string;
  /** "sha256:<hex>". */
  digest: string;
  size: number;
}

/** A mount of a prepared snapshot, handed back to the diff service as it is. */
export interface SnapshotMount {
  type: string;
  source: string;
  target: string;
  options: string[];
}

/** The containerd calls of one import; each carries the import's lease when it has one. */
export interface ContainerdImportCalls {
  /** Creates lease `id` (labels e.g. an expiry, "containerd.io/gc.expire"). */
  createLease(id: string, labels: Record<string, string>): Promise<void>;
  /** Deletes lease `id`; what only it held is collected by containerd's GC, before this
   * resolves when `sync`. */
  deleteLease(id: string, sync: boolean): Promise<void>;
  /** Puts an existing blob under lease `leaseId`. */
  leaseContent(leaseId: string, digest: string): Promise<void>;
  /** Writes blob `data` (committed with `labels` after containerd checked its digest and
   * size): "exists" when a blob of that digest was already stored (labels not set then). */
  writeBlob(
    desc: ContentDescriptor,
    data: Uint8Array,
    labels: Record<string, string>,
    signal: AbortSignal,
  ): Promise<"written" | "exists">;
  /** Sets `labels` on a stored blob (other labels unchanged). */
  labelBlob(digest: string, labels: Record<string, string>): Promise<void>;
  /** Whether snapshot `key` (an active key or a committed name) exists. */
  snapshotExists(key: string): Promise<boolean>;
  /** Prepares active snapshot `key` on committed `parent` ("" for none): its mounts. */
  prepareSnapshot(key: string, parent: string): Promise<SnapshotMount[]>;
  /** Applies layer blob `layer` to `mounts`: the digest of the uncompressed layer. */
  applyLayer(
    layer: ContentDescriptor,
    mounts: SnapshotMount[],
    signal: AbortSignal,
  ): Promise<string>;
  commitSnapshot(name: string, key: string): Promise<void>;
  removeSnapshot(key: string): Promise<void>;
  /** Creates image record `name` → `target`, or points an existing one at it. */
  putImage(name: string, target: ContentDescriptor, labels: Record<string, string>): Promise<void>;
  /** Closes the connection. */
  close(): void;
}

export interface ContainerdStoreOptions {
  /** containerd's socket path. */
  socketPath: string;
  /** The namespace, "k8s.io" for the CRI plugin's. */
  namespace: string;
  /** The snapshotter layers are unpacked into (the CRI plugin's, "overlayfs" by default). */
  snapshotter: string;
  /** The lease every call but the lease calls carries, if any. */
  lease?: string;
  /** Deadline of each unary call. Default 60 s (applying a large layer takes a while). */
  timeoutMs?: number;
}

const PKG = {
  content: "containerd.services.content.v1",
  leases: "containerd.services.leases.v1",
  snapshots: "containerd.services.snapshots.v1",
  diff: "containerd.services.diff.v1",
  images: "containerd.services.images.v1",
} as const;

/** Largest data of one write request: well under containerd's 16 MiB message limit. */
const WRITE_CHUNK_BYTES = 1 << 20;
/** Largest data of one Write call (its requests are held whole while it is sent). */
const WRITE_SESSION_BYTES = 8 << 20;

export function createContainerdImportCalls(
  options: ContainerdStoreOptions,
): ContainerdImportCalls {
  return new ImportCalls(options);
}

class ImportCalls implements ContainerdImportCalls {
  private readonly proto = loadCriProto();
  private readonly encoder = new MessageEncoder();
  private readonly plain: GrpcTransport;
  private readonly leased: GrpcTransport;
  private readonly timeoutMs: number;

  constructor(private readonly options: ContainerdStoreOptions) {
    this.timeoutMs = options.timeoutMs ?? 60_000;
    const ns: [string, string] = ["containerd-namespace", options.namespace];
    this.plain = this.transport([ns]);
    this.leased =
      options.lease === undefined
        ? this.plain
        : this.transport([ns, ["containerd-lease", options.lease]]);
  }

  private transport(metadata: [string, string][]): GrpcTransport {
    return createH2Transport({
      address: { unix: this.options.socketPath },
      maxReceiveBytes: 4 << 20,
      windowBytes: 1 << 20,
      maxHeaderListBytes: LOCAL_PEER_HEADER_BYTES,
      metadata,
    });
  }

  private async call(
    via: GrpcTransport,
    pkg: string,
    service: string,
    method: string,
    req: unknown,
    signal?: AbortSignal,
  ): Promise<Record<string, unknown>> {
    const rpc = this.proto.rpc(service, method, pkg);
    try {
      const body = this.encoder.encode(rpc.request, req);
      const answer = await via.call(rpc.path, body, this.timeoutMs, signal);
      return this.proto.decoder(rpc.response.name)(answer) as Record<string, unknown>;
    } catch (err) {
      throw criErrorFromGrpc(`${service}.${method}`, err);
    }
  }

  async createLease(id: string, labels: Record<string, string>): Promise<void> {
    await this.call(this.plain, PKG.leases, "Leases", "Create", { id, labels });
  }

  async deleteLease(id: string, sync: boolean): Promise<void> {
    await this.call(this.plain, PKG.leases, "Leases", "Delete", { id, sync });
  }

  async leaseContent(leaseId: string, digest: string): Promise<void> {
    const resource = { id: digest, type: "content" };
    await this.call(this.plain, PKG.leases, "Leases", "AddResource", { id: leaseId, resource });
  }

  async writeBlob(
    desc: ContentDescriptor,
    data: Uint8Array,
    labels: Record<string, string>,
    signal: AbortSignal,
  ): Promise<"written" | "exists"> {
    const ref = `fleetlet-import-${desc.digest}`;
    const deadline = AbortSignal.timeout(this.timeoutMs + data.length / 1024);
    const bounded = AbortSignal.any([signal, deadline]);
    // One Write call per session of data: a later one continues the ingest at its offset, so
    // that no more than a session is copied into requests at once.
    for (let at = 0; ; at += WRITE_SESSION_BYTES) {
      const end = Math.min(data.length, at + WRITE_SESSION_BYTES);
      const last = end === data.length;
      const session = { ref, desc, data, from: at, to: end, labels: last ? labels : undefined };
      if ((await this.writeSession(session, bounded)) === "exists") return "exists";
      if (last) return "written";
    }
  }

  /** One Write call: bytes [from, to) of the blob, committed with `labels` when given. */
  private writeSession(
    s: {
      ref: string;
      desc: ContentDescriptor;
      data: Uint8Array;
      from: number;
      to: number;
      labels: Record<string, string> | undefined;
    },
    signal: AbortSignal,
  ): Promise<"written" | "exists"> {
    const rpc = this.proto.rpc("Content", "Write", PKG.content);
    const base = { ref: s.ref, total: s.desc.size, expected: s.desc.digest };
    const requests: Uint8Array[] = [];
    for (let at = s.from; at < s.to || at === s.from; at += WRITE_CHUNK_BYTES) {
      const end = Math.min(s.to, at + WRITE_CHUNK_BYTES);
      const commit = s.labels !== undefined && end === s.to;
      const req = {
        ...base,
        action: commit ? "COMMIT" : "WRITE",
        offset: at,
        data: s.data.subarray(at, end),
        labels: commit ? s.labels : {},
      };
      requests.push(this.encoder.encode(rpc.request, req));
    }
    return new Promise((resolve, reject) => {
      const onEnd = (error?: TransportError) => {
        if (error === undefined) resolve("written");
        else if (error.code === GrpcStatus.ALREADY_EXISTS) resolve("exists");
        else reject(criErrorFromGrpc("Content.Write", error));
      };
      this.leased.sendAll(rpc.path, requests, { onMessage: () => {}, onEnd }, signal);
    });
  }

  async labelBlob(digest: string, labels: Record<string, string>): Promise<void> {
    const paths = Object.keys(labels).map((k) => `labels.${k}`);
    const req = { info: { digest, labels }, updateMask: { paths } };
    await this.call(this.leased, PKG.content, "Content", "Update", req);
  }

  async snapshotExists(key: string): Promise<boolean> {
    const req = { snapshotter: this.options.snapshotter, key };
    try {
      await this.call(this.leased, PKG.snapshots, "Snapshots", "Stat", req);
      return true;
    } catch (err) {
      if ((err as { grpcStatus?: number }).grpcStatus === GrpcStatus.NOT_FOUND) return false;
      throw err;
    }
  }

  async prepareSnapshot(key: string, parent: string): Promise<SnapshotMount[]> {
    const req = { snapshotter: this.options.snapshotter, key, parent };
    const res = await this.call(this.leased, PKG.snapshots, "Snapshots", "Prepare", req);
    return res.mounts as SnapshotMount[];
  }

  async applyLayer(
    layer: ContentDescriptor,
    mounts: SnapshotMount[],
    signal: AbortSignal,
  ): Promise<string> {
    const req = { diff: layer, mounts };
    const res = await this.call(this.leased, PKG.diff, "Diff", "Apply", req, signal);
    return (res.applied as { digest?: string } | null)?.digest ?? "";
  }

  async commitSnapshot(name: string, key: string): Promise<void> {
    const req = { snapshotter: this.options.snapshotter, name, key };
    await this.call(this.leased, PKG.snapshots, "Snapshots", "Commit", req);
  }

  async removeSnapshot(key: string): Promise<void> {
    const req = { snapshotter: this.options.snapshotter, key };
    await this.call(this.leased, PKG.snapshots, "Snapshots", "Remove", req);
  }

  async putImage(
    name: string,
    target: ContentDescriptor,
    labels: Record<string, string>,
  ): Promise<void> {
    const image = { name, target, labels };
    try {
      await this.call(this.leased, PKG.images, "Images", "Create", { image });
    } catch (err) {
      if ((err as { grpcStatus?: number }).grpcStatus !== GrpcStatus.ALREADY_EXISTS) throw err;
      const paths = ["target", ...Object.keys(labels).map((k) => `labels.${k}`)];
      await this.call(this.leased, PKG.images, "Images", "Update", {
        image,
        updateMask: { paths },
      });
    }
  }

  close(): void {
    this.plain.close();
    if (this.leased !== this.plain) this.leased.close();
  }
}
