// `fleetlet attach`: its arguments, the container and terminal it picks by kubectl's rules, and
// the path it asks for.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Pod } from "../../../src/api/types.ts";
import { ATTACH_USAGE, attachCommand, attachPath, planAttach } from "../../../src/cli/attach.ts";
import { CliError, UsageError } from "../../../src/cli/errors.ts";
import type { CliIO } from "../../../src/cli/io.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";
import { type FakeAgent, runningStatus, startFakeAgent } from "../server/fixtures.ts";

const withPhase = (phase: string): Pod =>
  makePod({
    name: `p-${phase.toLowerCase()}`,
    containers: [
      makeContainer({ name: "shell", stdin: true, tty: true }),
      makeContainer({ name: "ticker" }),
    ],
    metadata: { annotations: { "kubectl.kubernetes.io/default-container": "shell" } },
    status: { phase: phase as never, containerStatuses: [runningStatus("shell")] },
  });
const running = withPhase("Running");
const plain = { stdin: false, tty: false, quiet: false };

describe("planAttach()", () => {
  test("gives a terminal to a container with tty: true even without -t", () => {
    expect(planAttach(running, { ...plain, container: "shell" })).toEqual({
      container: "shell",
      stdin: false,
      tty: true,
      notes: [],
    });
  });

  test("drops -t for a container without a terminal, with kubectl's warning", () => {
    expect(planAttach(running, { ...plain, container: "ticker", tty: true })).toEqual({
      container: "ticker",
      stdin: false,
      tty: false,
      notes: ["error: Unable to use a TTY - container ticker did not allocate one"],
    });
  });

  test("with -i hints to press enter (the prompt was printed before the attach); -q keeps quiet", () => {
    const loud = planAttach(running, { ...plain, stdin: true });
    expect(loud).toMatchObject({ container: "shell", stdin: true, tty: true });
    expect(loud.notes).toEqual(["If you don't see a command prompt, try pressing enter."]);
    const quiet = planAttach(running, { stdin: true, tty: true, quiet: true, container: "ticker" });
    expect(quiet.notes).toEqual([]);
  });

  const refusals: { name: string; pod: Pod; container?: string; message: string }[] = [
    {
      name: "a pod that succeeded",
      pod: withPhase("Succeeded"),
      message: "cannot attach a container in a completed pod; current phase is Succeeded",
    },
    {
      name: "a pod that failed",
      pod: withPhase("Failed"),
      message: "cannot attach a container in a completed pod; current phase is Failed",
    },
    {
      name: "a container the pod does not have",
      pod: running,
      container: "nope",
      message: "cannot attach to the container: container nope is not valid for pod p-running",
    },
  ];
  for (const r of refusals) {
    test(`refuses ${r.name}`, () => {
      expect(() => planAttach(r.pod, { ...plain, container: r.container })).toThrow(
        new CliError(r.message),
      );
    });
  }
});

describe("attachPath()", () => {
  test("asks for the container, stdin, stdout, and stderr only without a terminal, as kubectl", () => {
    const path = attachPath("kube system", "web/1", { container: "c", stdin: true, tty: true });
    const [p, query] = path.split("?");
    expect(p).toBe("/api/v1/namespaces/kube%20system/pods/web%2F1/attach");
    expect(Object.fromEntries(new URLSearchParams(query))).toEqual({
      container: "c",
      stdin: "true",
      stdout: "true",
      stderr: "false",
      tty: "true",
    });
    const noTty = new URLSearchParams(
      attachPath("d", "w", { container: "c", stdin: false, tty: false }).split("?")[1],
    );
    expect([noTty.get("stdin"), noTty.get("stderr"), noTty.get("tty")]).toEqual([
      "false",
      "true",
      "false",
    ]);
  });
});

describe("attachCommand()", () => {
  let agent: FakeAgent;
  const out: string[] = [];
  const io = (): CliIO => ({
    stdout: (t) => void out.push(t),
    stderr: (t) => void out.push(t),
    env: { FLEETLET_SOCKET: agent.socketPath },
    now: () => 0,
  });
  beforeAll(async () => {
    agent = await startFakeAgent([running, withPhase("Succeeded")]);
  });
  afterAll(() => agent.stop());

  test("--help prints the usage", async () => {
    out.length = 0;
    expect(await attachCommand(["--help"], io())).toBe(0);
    expect(out.join("")).toBe(ATTACH_USAGE);
  });

  test("refuses no pod, two pods, or a command, with the usage", async () => {
    for (const argv of [[], ["a", "b"], ["a", "--", "sh"]])
      await expect(attachCommand(argv, io())).rejects.toBeInstanceOf(UsageError);
  });

  test("reads the pod from the agent first: a completed pod is refused before any stream", async () => {
    await expect(attachCommand(["p-succeeded", "-i"], io())).rejects.toThrow(
      "cannot attach a container in a completed pod; current phase is Succeeded",
    );
    await expect(attachCommand(["nope"], io())).rejects.toThrow('pods "nope" not found');
  });
});
