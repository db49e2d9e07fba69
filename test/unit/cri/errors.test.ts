import { describe, expect, test } from "bun:test";
import {
  CriError,
  criErrorCodeOf,
  criErrorFromGrpc,
  GrpcStatus,
  isCancelled,
  isDeadlineExceeded,
  isNotFound,
  isUnavailable,
  isUnimplemented,
} from "../../../src/cri/index.ts";

describe("criErrorCodeOf()", () => {
  test.each([
    [GrpcStatus.NOT_FOUND, "NotFound"],
    [GrpcStatus.UNAVAILABLE, "Unavailable"],
    [GrpcStatus.DEADLINE_EXCEEDED, "DeadlineExceeded"],
    [GrpcStatus.CANCELLED, "Cancelled"],
    [GrpcStatus.UNIMPLEMENTED, "Unimplemented"],
    [GrpcStatus.UNKNOWN, "Other"],
    [GrpcStatus.INVALID_ARGUMENT, "Other"],
    [GrpcStatus.ALREADY_EXISTS, "Other"],
    [GrpcStatus.INTERNAL, "Other"],
    [99, "Other"],
  ])("maps gRPC status %d to %s", (status, code) => {
    expect(criErrorCodeOf(status)).toBe(code as ReturnType<typeof criErrorCodeOf>);
  });
});

describe("criErrorFromGrpc()", () => {
  test("keeps the RPC, status and runtime message, and says which RPC failed", () => {
    const err = criErrorFromGrpc("RunPodSandbox", {
      code: 2,
      details: "failed to reserve sandbox name",
      message: "2 UNKNOWN: failed to reserve sandbox name",
    });
    expect(err).toBeInstanceOf(CriError);
    expect(err.message).toBe("CRI RunPodSandbox failed: failed to reserve sandbox name");
    expect(err.rpc).toBe("RunPodSandbox");
    expect(err.grpcStatus).toBe(2);
    expect(err.code).toBe("Other");
    expect(err.runtimeMessage).toBe("failed to reserve sandbox name");
  });

  test("puts the context before the runtime message", () => {
    const err = criErrorFromGrpc(
      "Version",
      { code: 14, details: "connect ENOENT" },
      "runtime at unix:///x unavailable",
    );
    expect(err.message).toBe(
      "CRI Version failed: runtime at unix:///x unavailable: connect ENOENT",
    );
    expect(isUnavailable(err)).toBe(true);
  });

  test("treats a thrown non-gRPC value as UNKNOWN", () => {
    const err = criErrorFromGrpc("ListContainers", new TypeError("boom"));
    expect(err.grpcStatus).toBe(GrpcStatus.UNKNOWN);
    expect(err.message).toBe("CRI ListContainers failed: boom");
    expect(criErrorFromGrpc("Status", "weird").runtimeMessage).toBe("weird");
  });

  test("returns a CriError unchanged", () => {
    const err = new CriError({ rpc: "Version", grpcStatus: 5, runtimeMessage: "x" });
    expect(criErrorFromGrpc("Status", err)).toBe(err);
  });

  test("uses the status name when the runtime gave no message", () => {
    const err = new CriError({ rpc: "Version", grpcStatus: 4, runtimeMessage: "" });
    expect(err.message).toBe("CRI Version failed: DEADLINE_EXCEEDED");
  });
});

describe("is* helpers", () => {
  test("match only CriErrors of their code", () => {
    const nf = new CriError({ rpc: "ContainerStatus", grpcStatus: 5, runtimeMessage: "not found" });
    expect(isNotFound(nf)).toBe(true);
    expect(isUnavailable(nf)).toBe(false);
    expect(isNotFound(new Error("not found"))).toBe(false);
    expect(isNotFound(undefined)).toBe(false);
    expect(isDeadlineExceeded(new CriError({ rpc: "X", grpcStatus: 4, runtimeMessage: "" }))).toBe(
      true,
    );
    expect(isCancelled(new CriError({ rpc: "X", grpcStatus: 1, runtimeMessage: "" }))).toBe(true);
    expect(isUnimplemented(new CriError({ rpc: "X", grpcStatus: 12, runtimeMessage: "" }))).toBe(
      true,
    );
  });
});
