import { describe, expect, test } from "bun:test";
import {
  createSysctlAdmission,
  dottedSysctlName,
  parseKernelRelease,
  SAFE_SYSCTLS,
  safeSysctls,
  sysctlNamespace,
  sysctlPatternProblem,
} from "../../../src/agent/sysctl/index.ts";
import type { Pod } from "../../../src/api/types.ts";
import { createLogger } from "../../../src/util/log.ts";
import { makePod } from "../../lib/builders.ts";

function admission(allowed: string[] = [], release: () => string = () => "6.1.0-28-amd64\n") {
  const logs: string[] = [];
  const a = createSysctlAdmission({
    allowedUnsafeSysctls: allowed,
    kernelRelease: release,
    log: createLogger({ write: (line) => logs.push(line) }),
  });
  return { a, logs };
}

function podWith(sysctls: string[], opts: { hostNetwork?: boolean; hostIPC?: boolean } = {}): Pod {
  return makePod({
    spec: {
      containers: [],
      ...opts,
      securityContext: { sysctls: sysctls.map((name) => ({ name, value: "1" })) },
    },
  });
}

describe("dottedSysctlName()", () => {
  test.each([
    ["kernel.shm_rmid_forced", "kernel.shm_rmid_forced"],
    ["kernel/shm_rmid_forced", "kernel.shm_rmid_forced"],
    ["net.ipv4.conf.eth0/100.rp_filter", "net.ipv4.conf.eth0/100.rp_filter"],
    ["net/ipv4/conf/eth0.100/rp_filter", "net.ipv4.conf.eth0/100.rp_filter"],
    ["kernel/msgmax", "kernel.msgmax"],
    ["net/ipv4/*", "net.ipv4.*"],
    ["kernel", "kernel"],
  ])("%s reads as %s", (name, dotted) => {
    expect(dottedSysctlName(name)).toBe(dotted);
  });
});

describe("sysctlNamespace()", () => {
  test.each([
    ["kernel.sem", "ipc"],
    ["kernel.shmmax", "ipc"],
    ["kernel.shm_rmid_forced", "ipc"],
    ["kernel.msgmax", "ipc"],
    ["fs.mqueue.msg_max", "ipc"],
    ["net.core.somaxconn", "net"],
    ["net.", "net"],
    ["kernel.semx", undefined],
    ["kernel.panic", undefined],
    ["vm.swappiness", undefined],
    ["fs.mqueue", undefined],
    ["net", undefined],
  ])("%s is in namespace %p", (name, ns) => {
    expect(sysctlNamespace(name)).toBe(ns as "ipc" | "net" | undefined);
  });
});

describe("sysctlPatternProblem()", () => {
  test.each([
    "kernel.msg*",
    "kernel.msgmax",
    "kernel.shm*",
    "kernel.sem",
    "fs.mqueue.*",
    "net.*",
    "net/ipv4/*",
    "net.ipv4.conf.eth0/100.rp_filter",
    "net.ipv4.tcp_keep-alive",
  ])("%s may be allowed", (pattern) => {
    expect(sysctlPatternProblem(pattern)).toBeUndefined();
  });

  test.each([
    ["kernel.*", "is not known to be namespaced"],
    ["kernel.panic", "is not known to be namespaced"],
    ["*", "is not known to be namespaced"],
    ["net*", "is not known to be namespaced"],
    ["vm.*", "is not known to be namespaced"],
    ["Net.core.somaxconn", "is not a sysctl name"],
    ["net..core", "is not a sysctl name"],
    ["net.*.x", "is not a sysctl name"],
    ["net.core.", "is not a sysctl name"],
    ["", "is not a sysctl name"],
    [`net.${"a".repeat(250)}`, "is not a sysctl name"],
  ])("%s is refused: %s", (pattern, problem) => {
    expect(sysctlPatternProblem(pattern)).toStartWith(problem);
  });
});

describe("safeSysctls()", () => {
  const always = SAFE_SYSCTLS.filter((s) => s.kernel === undefined).map((s) => s.name);

  test("on a current kernel every safe sysctl is safe", () => {
    expect(safeSysctls([6, 1, 0]).safe).toEqual(SAFE_SYSCTLS.map((s) => s.name));
    expect(safeSysctls([6, 1, 0]).tooOld).toEqual([]);
  });

  test("each kernel-dependent sysctl is safe from its kernel release on", () => {
    expect(safeSysctls([3, 15]).safe).toEqual(always);
    expect(safeSysctls([3, 16]).safe).toEqual([...always, "net.ipv4.ip_local_reserved_ports"]);
    expect(safeSysctls([4, 5, 7]).safe).not.toContain("net.ipv4.tcp_fin_timeout");
    expect(safeSysctls([4, 5, 7]).safe).toContain("net.ipv4.tcp_keepalive_probes");
    expect(safeSysctls([4, 6]).safe).toContain("net.ipv4.tcp_fin_timeout");
    expect(safeSysctls([4, 14, 300]).tooOld).toEqual(["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"]);
    expect(safeSysctls([4, 15]).tooOld).toEqual([]);
  });

  test("an unknown kernel keeps only the sysctls safe on every kernel", () => {
    expect(safeSysctls(undefined).safe).toEqual(always);
    expect(always).toContain("net.ipv4.ip_local_port_range");
  });
});

describe("parseKernelRelease()", () => {
  test.each([
    ["6.1.0-28-amd64\n", [6, 1, 0]],
    ["6.18.44-fc-v657", [6, 18, 44]],
    ["4.15", [4, 15]],
    ["5.10.0+", [5, 10, 0]],
    ["6", undefined],
    ["linux", undefined],
    ["", undefined],
  ])("%p parses as %p", (text, version) => {
    expect(parseKernelRelease(text)).toEqual(version);
  });
});

describe("createSysctlAdmission()", () => {
  test("admits a pod without sysctls and one with safe sysctls written with . or /", () => {
    const { a } = admission();
    expect(a.admit(makePod())).toBeUndefined();
    expect(
      a.admit(
        podWith(["net.ipv4.ip_local_port_range", "kernel/shm_rmid_forced", "net/ipv4/tcp_rmem"]),
      ),
    ).toBeUndefined();
  });

  test("rejects an unsafe sysctl with SysctlForbidden, naming it dotted", () => {
    const { a } = admission();
    expect(a.admit(podWith(["net.ipv4.tcp_syncookies", "kernel/msgmax"]))).toEqual({
      reason: "SysctlForbidden",
      message: 'forbidden sysctl: "kernel.msgmax" not allowlisted',
    });
  });

  test("allowedUnsafeSysctls admits exact names and prefix patterns, nothing more", () => {
    const { a } = admission(["kernel.msg*", "net/core/somaxconn", "kernel.sem"]);
    expect(
      a.admit(podWith(["kernel.msgmax", "kernel/msgmnb", "net.core.somaxconn"])),
    ).toBeUndefined();
    expect(a.admit(podWith(["kernel/sem"]))).toBeUndefined();
    expect(a.admit(podWith(["kernel.shmmax"]))?.message).toBe(
      'forbidden sysctl: "kernel.shmmax" not allowlisted',
    );
    expect(a.admit(podWith(["net.core.somaxconn2"]))?.message).toBe(
      'forbidden sysctl: "net.core.somaxconn2" not allowlisted',
    );
    expect(a.allowlist).toEqual([
      ...SAFE_SYSCTLS.map((s) => s.name),
      "kernel.msg*",
      "net/core/somaxconn",
      "kernel.sem",
    ]);
  });

  test("refuses net sysctls on the host network and IPC ones with the host's IPC namespace", () => {
    const { a } = admission(["kernel.msg*", "net.core.*"]);
    const rejected = (names: string[], opts: { hostNetwork?: boolean; hostIPC?: boolean }) =>
      a.admit(podWith(names, opts))?.message;
    expect(rejected(["net.ipv4.ip_local_port_range"], { hostNetwork: true })).toBe(
      'forbidden sysctl: "net.ipv4.ip_local_port_range" not allowed with host net enabled',
    );
    expect(rejected(["net/core/somaxconn"], { hostNetwork: true })).toBe(
      'forbidden sysctl: "net.core.somaxconn" not allowed with host net enabled',
    );
    expect(rejected(["kernel.shm_rmid_forced"], { hostIPC: true })).toBe(
      'forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host ipc enabled',
    );
    expect(rejected(["kernel.msgmax"], { hostIPC: true })).toBe(
      'forbidden sysctl: "kernel.msgmax" not allowed with host ipc enabled',
    );
    expect(
      rejected(["kernel.shm_rmid_forced", "kernel.msgmax"], { hostNetwork: true }),
    ).toBeUndefined();
    expect(rejected(["net.ipv4.ip_local_port_range"], { hostIPC: true })).toBeUndefined();
  });

  test("on a kernel before 4.15 tcp_rmem is not safe, and the agent says so once", () => {
    const { a, logs } = admission([], () => "4.14.336\n");
    expect(a.admit(podWith(["net.ipv4.tcp_rmem"]))?.message).toBe(
      'forbidden sysctl: "net.ipv4.tcp_rmem" not allowlisted',
    );
    expect(a.admit(podWith(["net.ipv4.tcp_fin_timeout"]))).toBeUndefined();
    expect(logs.filter((l) => l.includes("kernel too old"))).toHaveLength(2);
  });

  test("an unreadable kernel release leaves out the kernel-dependent sysctls and is logged", () => {
    const { a, logs } = admission([], () => {
      throw new Error("ENOENT: no such file");
    });
    expect(a.admit(podWith(["net.ipv4.tcp_keepalive_time"]))?.reason).toBe("SysctlForbidden");
    expect(a.admit(podWith(["net.ipv4.ip_local_port_range"]))).toBeUndefined();
    expect(logs.some((l) => l.includes("cannot read the kernel release"))).toBe(true);
  });
});
