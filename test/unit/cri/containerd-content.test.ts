import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeMessage } from "../../../src/cri/codec.ts";
import { createContainerdClient } from "../../../src/cri/containerd.ts";
import { type GrpcServer, startGrpcServer } from "../../../src/cri/grpc-server.ts";
import { CONTAINERD_CONTENT_PACKAGE, loadCriProto } from "../../../src/cri/proto.ts";

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
