import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeMessage, encodeMessage } from "../../../src/cri/codec.ts";
import { createContainerdClient } from "../../../src/cri/containerd.ts";
import { GrpcStatus } from "../../../src/cri/errors.ts";
import { GrpcError, type GrpcServer, startGrpcServer } from "../../../src/cri/grpc-server.ts";
import {
  CONTAINERD_CONTENT_PACKAGE,
  CONTAINERD_LEASES_PACKAGE,
  loadCriProto,
} from "../../../src/cri/proto.ts";

const PATH = `/${CONTAINERD_CONTENT_PACKAGE}.Content/ListStatuses`;
let server: GrpcServer | undefined;
afterEach(() => server?.close());

describe("containerd content client", () => {
  test("lists the ingests with the namespace header and the filters asked", async () => {
    const socketPath = join(mkdtempSync(join(tmpdir(), "ctrd-")), "s.sock");
    const rpc = loadCriProto().rpc("Content", "ListStatuses", CONTAINERD_CONTENT_PACKAGE);
    const seen: { ns?: string; filters?: unknown } = {};
    server = await startGrpcServer({
      socketPath,
      unary: {
        [PATH]: (req, ctx) => {
          seen.ns = ctx.metadata.get("containerd-namespace");
          seen.filters = req.length;
          return encodeMessage(rpc.response, {
            statuses: [{ ref: "layer-sha256:ab", offset: 5_000_000_000, total: 6_000_000_000 }],
          });
        },
      },
    });
    const client = createContainerdClient({ endpoint: `unix://${socketPath}` });
    const got = await client.content.listStatuses(['ref~="layer"']);
    client.close();
    expect(seen.ns).toBe("k8s.io");
    expect(seen.filters).toBeGreaterThan(0);
    expect(got).toEqual([
      { ref: "layer-sha256:ab", offset: 5_000_000_000, total: 6_000_000_000, expected: "" },
    ]);
  });

  test("a runtime without the content service rejects with Unimplemented", async () => {
    const socketPath = join(mkdtempSync(join(tmpdir(), "ctrd-")), "s.sock");
    server = await startGrpcServer({ socketPath, unary: {} });
    const client = createContainerdClient({ endpoint: `unix://${socketPath}` });
    const err = await client.content.listStatuses([]).catch((e) => e);
    client.close();
    expect(err.code).toBe("Unimplemented");
  });
});

describe("containerd lease client", () => {
  const leasePath = (m: string) => `/${CONTAINERD_LEASES_PACKAGE}.Leases/${m}`;

  test("creates and deletes leases with the namespace header; one that exists or is gone resolves false", async () => {
    const socketPath = join(mkdtempSync(join(tmpdir(), "ctrd-")), "s.sock");
    const proto = loadCriProto();
    const create = proto.rpc("Leases", "Create", CONTAINERD_LEASES_PACKAGE);
    const held = new Map<string, unknown>();
    const namespaces: (string | undefined)[] = [];
    server = await startGrpcServer({
      socketPath,
      unary: {
        [leasePath("Create")]: (req, ctx) => {
          namespaces.push(ctx.metadata.get("containerd-namespace"));
          const { id, labels } = decodeMessage(create.request, req) as {
            id: string;
            labels: unknown;
          };
          if (held.has(id)) throw new GrpcError(GrpcStatus.ALREADY_EXISTS, `lease ${id}: exists`);
          held.set(id, labels);
          return encodeMessage(create.response, { lease: { id } });
        },
        [leasePath("Delete")]: (req) => {
          const { id } = decodeMessage(
            proto.rpc("Leases", "Delete", CONTAINERD_LEASES_PACKAGE).request,
            req,
          ) as { id: string };
          if (!held.delete(id)) throw new GrpcError(GrpcStatus.NOT_FOUND, `lease ${id}: not found`);
          return Buffer.alloc(0);
        },
      },
    });
    const client = createContainerdClient({ endpoint: `unix://${socketPath}` });
    const labels = { "containerd.io/gc.expire": "2026-01-01T13:00:00Z" };
    expect(await client.leases.create("l1", labels)).toBe(true);
    expect(await client.leases.create("l1", labels)).toBe(false);
    expect(held.get("l1")).toEqual(labels);
    expect(await client.leases.delete("l1")).toBe(true);
    expect(await client.leases.delete("l1")).toBe(false);
    client.close();
    expect(namespaces).toEqual(["k8s.io", "k8s.io"]);
  });

  test("PullImage under a lease carries the containerd-lease header; its errors read as CRI's", async () => {
    const socketPath = join(mkdtempSync(join(tmpdir(), "ctrd-")), "s.sock");
    const pull = loadCriProto().rpc("ImageService", "PullImage");
    const leases: (string | undefined)[] = [];
    server = await startGrpcServer({
      socketPath,
      unary: {
        [pull.path]: (req, ctx) => {
          leases.push(ctx.metadata.get("containerd-lease"));
          const { image } = decodeMessage(pull.request, req) as { image: { image: string } };
          if (image.image === "missing") throw new GrpcError(GrpcStatus.NOT_FOUND, "not found");
          return encodeMessage(pull.response, { imageRef: "sha256:abc" });
        },
      },
    });
    const client = createContainerdClient({ endpoint: `unix://${socketPath}` });
    expect(await client.pullImageLeased("l1", { image: { image: "busybox" } })).toEqual({
      imageRef: "sha256:abc",
    });
    const err = await client
      .pullImageLeased("l2", { image: { image: "missing" } })
      .catch((e: Error) => e);
    client.close();
    expect(leases).toEqual(["l1", "l2"]);
    expect((err as Error).message).toBe("CRI PullImage failed: not found");
  });
});
