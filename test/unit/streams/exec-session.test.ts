// An interactive exec as the client sees it, against a fake stream opener.
import { describe, expect, test } from "bun:test";
import { RC } from "../../../src/protocol/remotecommand.ts";
import type { StreamOpen } from "../../../src/protocol/streams.ts";
import { type ClientSocket, ExecSession } from "../../../src/streams/exec-session.ts";
import { type OpenStream, StreamFailure, type StreamOutput } from "../../../src/streams/types.ts";

const req: Extract<StreamOpen, { kind: "exec" }> = {
  type: "stream.open",
  kind: "exec",
  id: 1,
  window: 0,
  namespace: "default",
  pod: "web",
  command: ["sh", "-c", "exit 3"],
  stdin: true,
  tty: true,
};

function socket() {
  const sent: { channel: number; text: string }[] = [];
  let closed: number | undefined;
  const s: ClientSocket = {
    send(d) {
      const b = typeof d === "string" ? Buffer.from(d) : d;
      sent.push({ channel: b[0] as number, text: Buffer.from(b.subarray(1)).toString() });
      return b.length;
    },
    close(code) {
      closed = code;
    },
  };
  return { s, sent, closed: () => closed };
}

const msg = (channel: number, text: string) => Uint8Array.of(channel, ...Buffer.from(text));

function session(open: OpenStream, protocol = "v5.channel.k8s.io") {
  const sock = socket();
  const ends: unknown[] = [];
  const sess = new ExecSession({ socket: sock.s, protocol, open, req, onEnd: (e) => ends.push(e) });
  return { sess, sock, ends };
}

describe("ExecSession", () => {
  test("passes stdin, resizes and v5's end of stdin to the work, in order, and output back", async () => {
    const seen: string[] = [];
    let out!: StreamOutput;
    const { sess, sock } = session(async (_r, o) => {
      out = o;
      return {
        input: (_c, d) => void seen.push(`in:${Buffer.from(d).toString()}`),
        resize: (w, h) => void seen.push(`size:${w}x${h}`),
        eof: () => void seen.push("eof"),
      };
    });
    sess.message(msg(RC.resize, '{"Width":80,"Height":24}'));
    sess.message(msg(RC.stdin, "ls\n"));
    await sess.start();
    sess.message(Uint8Array.of(RC.close, RC.stdin));
    expect(seen).toEqual(["size:80x24", "in:ls\n", "eof"]);
    await out.write(RC.stdout, Buffer.from("a.txt\n"));
    expect(sock.sent).toEqual([{ channel: 1, text: "a.txt\n" }]);
  });

  test("writes the exit code on the error channel as the API server does, then closes", async () => {
    let out!: StreamOutput;
    const { sess, sock, ends } = session(async (_r, o) => {
      out = o;
      return {};
    });
    await sess.start();
    out.end({ exitCode: 3 });
    const status = JSON.parse(sock.sent.at(-1)?.text ?? "{}");
    expect(sock.sent.at(-1)?.channel).toBe(RC.error);
    expect(status).toMatchObject({
      status: "Failure",
      reason: "NonZeroExitCode",
      details: { causes: [{ reason: "ExitCode", message: "3" }] },
    });
    expect(sock.closed()).toBe(1000);
    expect(ends).toEqual([{ exitCode: 3 }]);
  });

  test("a refused open and a malformed resize end this session with the reason", async () => {
    const refused = session(async () => {
      throw new StreamFailure(503, "ServiceUnavailable", 'node "cam-1" is offline');
    });
    await refused.sess.start();
    expect(JSON.parse(refused.sock.sent[0]?.text ?? "{}")).toMatchObject({
      status: "Failure",
      message: 'node "cam-1" is offline',
      code: 503,
    });
    const signals: AbortSignal[] = [];
    const bad = session(async (_r, _o, signal) => {
      signals.push(signal);
      return {};
    });
    await bad.sess.start();
    bad.sess.message(msg(RC.resize, "wide please"));
    expect(JSON.parse(bad.sock.sent[0]?.text ?? "{}").message).toBe(
      "the client sent a resize message that is not JSON",
    );
    expect(signals[0]?.aborted).toBe(true);
    expect(bad.sock.closed()).toBe(1000);
  });

  test("speaks the base64 protocols as text", async () => {
    let out!: StreamOutput;
    const sent: (string | Uint8Array)[] = [];
    const sess = new ExecSession({
      socket: {
        send: (d) => {
          sent.push(d);
          return 1;
        },
        close: () => {},
      },
      protocol: "base64.channel.k8s.io",
      open: async (_r, o) => {
        out = o;
        return {};
      },
      req,
    });
    await sess.start();
    await out.write(RC.stdout, Buffer.from("hi"));
    expect(sent).toEqual([`1${Buffer.from("hi").toString("base64")}`]);
  });
});
