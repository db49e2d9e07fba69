// An attach as the hub and the local API read it (attachRequest), as the protocol carries it
// (decoding, channels, the hub's subresource paths) and as the client's session ends it.
import { describe, expect, test } from "bun:test";
import { StatusError } from "../../../src/api/status.ts";
import { podSubresource } from "../../../src/hub/streams/pod-routes.ts";
import { RC } from "../../../src/protocol/remotecommand.ts";
import { channelsOf, decodeHubStreamMessage } from "../../../src/protocol/streams.ts";
import { type ClientSocket, ExecSession } from "../../../src/streams/exec-session.ts";
import { attachRequest } from "../../../src/streams/requests.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const pod = makePod({
  name: "web",
  containers: [
    makeContainer({ name: "shell", stdin: true, tty: true }),
    makeContainer({ name: "reader", stdin: true }),
    makeContainer({ name: "ticker" }),
  ],
  initContainers: [makeContainer({ name: "setup" })],
});

const q = (s: string) => new URLSearchParams(s);

describe("attachRequest()", () => {
  const cases: {
    name: string;
    query: string;
    want: { container: string; tty: boolean; stdin: boolean; stdout: boolean; stderr: boolean };
  }[] = [
    {
      name: "takes the terminal from a container with tty: true, even when not asked, and drops stderr",
      query: "container=shell&stdin=true&stdout=true&stderr=true",
      want: { container: "shell", tty: true, stdin: true, stdout: true, stderr: false },
    },
    {
      name: "gives no terminal to a container without one, even when asked",
      query: "container=reader&stdin=1&tty=true",
      want: { container: "reader", tty: false, stdin: true, stdout: true, stderr: true },
    },
    {
      name: "reads stdout and stderr by default and stdin only when asked",
      query: "container=ticker",
      want: { container: "ticker", tty: false, stdin: false, stdout: true, stderr: true },
    },
    {
      name: "keeps stdout off when asked (output on stderr only)",
      query: "container=ticker&stdout=false",
      want: { container: "ticker", tty: false, stdin: false, stdout: false, stderr: true },
    },
    {
      name: "accepts an init container (whether it runs is the device's check)",
      query: "container=setup",
      want: { container: "setup", tty: false, stdin: false, stdout: true, stderr: true },
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const r = attachRequest(q(c.query), "default", pod);
      expect(r).toMatchObject({ type: "stream.open", kind: "attach", pod: "web", ...c.want });
      expect(decodeHubStreamMessage(r).ok).toBe(true);
    });
  }

  const refusals: { name: string; query: string; message: string }[] = [
    {
      name: "refuses stdin to a container without stdin: true",
      query: "container=ticker&stdin=true",
      message:
        "container ticker of pod web has no stdin to attach to (its spec does not set stdin: true)",
    },
    {
      name: "refuses an attach that wants no stream at all",
      query: "container=ticker&stdout=false&stderr=false",
      message: "you must specify at least 1 of stdin, stdout, stderr",
    },
    {
      name: "refuses a container the pod does not have, in the API server's words",
      query: "container=nope",
      message: "container nope is not valid for pod web",
    },
    {
      name: "asks for a container when the pod has several",
      query: "",
      message:
        "a container name must be specified for pod web, choose one of: [shell reader ticker] or one of the init containers: [setup]",
    },
  ];
  for (const c of refusals) {
    test(c.name, () => {
      let err: unknown;
      try {
        attachRequest(q(c.query), "default", pod);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(StatusError);
      expect((err as StatusError).reason).toBe("BadRequest");
      expect((err as StatusError).message).toBe(c.message);
    });
  }
});

describe("attach on the protocol and the hub's paths", () => {
  test("an attach stream carries stdin to the device and stdout, stderr back, as an exec", () => {
    expect(channelsOf("attach")).toEqual(channelsOf("exec"));
    expect(channelsOf("attach")).toEqual({ fromHub: [0], fromAgent: [1, 2] });
  });

  test("a stream.open of kind attach with a command-less body decodes; a bad field names itself", () => {
    const open = {
      type: "stream.open",
      kind: "attach",
      id: 3,
      window: 10,
      namespace: "d",
      pod: "p",
    };
    expect(decodeHubStreamMessage(open)).toEqual({ ok: true, message: open } as never);
    const bad = decodeHubStreamMessage({ ...open, tty: "yes" });
    expect(bad).toMatchObject({ ok: false, id: 3 });
    expect((bad as { reason: string }).reason).toContain("tty");
  });

  test("podSubresource() routes .../attach beside log, exec and portforward", () => {
    expect(podSubresource("/api/v1/namespaces/default/pods/web-1/attach")).toEqual({
      namespace: "default",
      name: "web-1",
      sub: "attach",
    });
    expect(podSubresource("/api/v1/namespaces/default/pods/web-1/attach/x")).toBeUndefined();
  });
});

describe("ExecSession with an attach", () => {
  function socket() {
    const sent: { channel: number; text: string }[] = [];
    const s: ClientSocket = {
      send(d) {
        const b = typeof d === "string" ? Buffer.from(d) : d;
        sent.push({ channel: b[0] as number, text: Buffer.from(b.subarray(1)).toString() });
        return b.length;
      },
      close() {},
    };
    return { s, sent };
  }
  const req = attachRequest(q("container=ticker"), "default", pod);

  test("ends an attach whose client sends stdin it did not ask for, in an attach's words", async () => {
    const { s, sent } = socket();
    const seen: string[] = [];
    const sess = new ExecSession({
      socket: s,
      protocol: "v5.channel.k8s.io",
      req,
      open: async () => ({ input: () => void seen.push("stdin") }),
    });
    await sess.start();
    sess.message(Uint8Array.of(RC.stdin, 120));
    expect(seen).toEqual([]);
    const last = sent.at(-1);
    expect(last?.channel).toBe(RC.error);
    expect(JSON.parse(last?.text ?? "{}")).toMatchObject({
      status: "Failure",
      message: "the client sent a message on channel 0, which this attach does not read",
    });
  });

  test("writes Success on the error channel when the attach ends", async () => {
    const { s, sent } = socket();
    const sess = new ExecSession({
      socket: s,
      protocol: "v4.channel.k8s.io",
      req,
      open: async (_r, out) => {
        queueMicrotask(() => out.end({ exitCode: 0 }));
        return {};
      },
    });
    await sess.start();
    await Promise.resolve();
    expect(sent.map((m) => m.channel)).toEqual([RC.error]);
    expect(JSON.parse(sent[0]?.text ?? "{}")).toEqual({ metadata: {}, status: "Success" });
  });
});
