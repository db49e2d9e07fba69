import { describe, expect, test } from "bun:test";
import type { MethodDefinition, ServiceDefinition } from "@grpc/proto-loader";
import { parse, type Type } from "protobufjs";
import { CRI_RPCS } from "../../../src/cri/index.ts";
import { criProtoText, loadCriPackageDefinition } from "../../lib/cri-proto.ts";

const root = parse(criProtoText(), { keepCase: true }).root;
const field = (message: string, name: string) => {
  const f = (root.lookupType(`runtime.v1.${message}`) as Type).fields[name];
  if (!f) throw new Error(`no field ${message}.${name}`);
  return f;
};

describe("proto/cri.proto", () => {
  test("declares package runtime.v1 with every RPC the client maps", () => {
    for (const [service, rpc] of Object.values(CRI_RPCS)) {
      const svc = root.lookupService(`runtime.v1.${service}`);
      expect(svc.methods[rpc]).toBeDefined();
    }
  });

  test.each([
    ["ContainerConfig", "metadata", 1, "ContainerMetadata"],
    ["ContainerConfig", "envs", 6, "KeyValue"],
    ["ContainerConfig", "log_path", 11, "string"],
    ["ContainerConfig", "linux", 15, "LinuxContainerConfig"],
    ["LinuxContainerResources", "memory_limit_in_bytes", 4, "int64"],
    ["LinuxContainerResources", "oom_score_adj", 5, "int64"],
    ["LinuxContainerResources", "unified", 9, "string"],
    ["LinuxContainerResources", "memory_swap_limit_in_bytes", 10, "int64"],
    ["LinuxContainerSecurityContext", "run_as_group", 12, "Int64Value"],
    ["LinuxContainerSecurityContext", "seccomp", 15, "SecurityProfile"],
    ["LinuxSandboxSecurityContext", "run_as_group", 8, "Int64Value"],
    ["PodSandboxConfig", "log_directory", 3, "string"],
    ["PodSandboxConfig", "linux", 8, "LinuxPodSandboxConfig"],
    ["LinuxPodSandboxConfig", "sysctls", 3, "string"],
    ["ContainerStatus", "exit_code", 7, "int32"],
    ["ContainerStatus", "reason", 10, "string"],
    ["ContainerFilter", "label_selector", 4, "string"],
    ["StopContainerRequest", "timeout", 2, "int64"],
    ["ExecSyncRequest", "timeout", 3, "int64"],
    ["PullImageRequest", "auth", 2, "AuthConfig"],
    ["KeyValue", "value", 2, "string"],
    ["ImageSpec", "user_specified_image", 18, "string"],
  ])("%s.%s has field number %d and type %s", (msg, name, id, type) => {
    const f = field(msg, name);
    expect(f.id).toBe(id);
    expect(f.type).toBe(type);
  });

  test("the package definition round-trips a container config with camelCase fields, enums by name and int64 as numbers", () => {
    const pkg = loadCriPackageDefinition();
    const svc = pkg["runtime.v1.RuntimeService"] as ServiceDefinition;
    const create = svc.CreateContainer as MethodDefinition<object, object>;
    const request = {
      podSandboxId: "sb1",
      config: {
        metadata: { name: "web", attempt: 2 },
        image: { image: "busybox" },
        envs: [{ key: "A", value: "é" }],
        labels: { app: "web" },
        mounts: [
          { containerPath: "/data", hostPath: "/srv", propagation: "PROPAGATION_BIDIRECTIONAL" },
        ],
        linux: { resources: { memoryLimitInBytes: 5 * 2 ** 32, cpuShares: 2 } },
      },
    };
    const decoded = create.requestDeserialize(create.requestSerialize(request)) as {
      config: Record<string, unknown> & { linux: { resources: Record<string, unknown> } };
      sandboxConfig: unknown;
    };
    expect(decoded.config.envs).toEqual([{ key: "A", value: "é" }]);
    expect(decoded.config.labels).toEqual({ app: "web" });
    expect(decoded.config.linux.resources.memoryLimitInBytes).toBe(5 * 2 ** 32);
    expect(decoded.config.linux.resources.cpuQuota).toBe(0);
    expect((decoded.config.mounts as { propagation: string }[])[0]?.propagation).toBe(
      "PROPAGATION_BIDIRECTIONAL",
    );
    expect(decoded.config.logPath).toBe("");
    expect(decoded.sandboxConfig).toBeNull();
  });
});
