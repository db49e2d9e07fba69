// The Kubernetes remote-command channel protocol over WebSocket (exec, attach), as kubectl, the
// API server and the runtimes' streaming servers speak it: every message is one channel byte and
// the channel's data (base64 text in the base64 variants). v5 adds a CLOSE channel, by which the
// client says it has no more stdin. The error channel carries one v1 Status: Success, or the
// exit code as a NonZeroExitCode cause, or what failed.

/** Subprotocols, newest first (the order a server prefers them in). */
export const REMOTE_COMMAND_PROTOCOLS = [
  "v5.channel.k8s.io",
  "v4.channel.k8s.io",
  "v4.base64.channel.k8s.io",
  "v3.channel.k8s.io",
  "v2.channel.k8s.io",
  "channel.k8s.io",
  "base64.channel.k8s.io",
] as const;

export const RC = { stdin: 0, stdout: 1, stderr: 2, error: 3, resize: 4, close: 255 } as const;

/** The protocol a server picks from the client's Sec-WebSocket-Protocol header, if any. */
export function pickProtocol(
  header: string | null,
  supported: readonly string[],
): string | undefined {
  const asked = (header ?? "").split(",").map((p) => p.trim());
  return supported.find((p) => asked.includes(p));
}

const isBase64Protocol = (p: string): boolean => p.includes("base64");

/** Encodes one message of `channel` for protocol `p`. */
export function encodeChannel(p: string, channel: number, data: Uint8Array): Uint8Array | string {
  if (isBase64Protocol(p))
    return String.fromCharCode(48 + channel) + Buffer.from(data).toString("base64");
  const out = new Uint8Array(data.length + 1);
  out[0] = channel;
  out.set(data, 1);
  return out;
}

/** Decodes one received message; undefined when it is empty or not of protocol `p`. */
export function decodeChannel(
  p: string,
  msg: string | Uint8Array,
): { channel: number; data: Uint8Array } | undefined {
  if (isBase64Protocol(p)) {
    if (typeof msg !== "string" || msg.length === 0) return undefined;
    return { channel: msg.charCodeAt(0) - 48, data: Buffer.from(msg.slice(1), "base64") };
  }
  if (typeof msg === "string") msg = Buffer.from(msg);
  if (msg.length === 0) return undefined;
  return { channel: msg[0] as number, data: msg.subarray(1) };
}

/** The error channel's Status for an exit code (0: Success). */
export function exitStatus(exitCode: number, command: readonly string[] = []) {
  if (exitCode === 0) return { metadata: {}, status: "Success" };
  return {
    metadata: {},
    status: "Failure",
    message: `command terminated with non-zero exit code: error executing command [${command.join(" ")}], exit code ${exitCode}`,
    reason: "NonZeroExitCode",
    details: { causes: [{ reason: "ExitCode", message: String(exitCode) }] },
  };
}

/** What an error channel's Status says: the exit code, or the failure's message. Any bytes
 * give one of the two (a peer's Status may be null, or its causes not a list). */
export function readStatus(data: Uint8Array): { exitCode: number } | { error: string } {
  const text = Buffer.from(data).toString();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { error: text };
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    return { error: `the error channel carried ${text.slice(0, 200)}, not a Status` };
  const s = parsed as { status?: unknown; message?: unknown; reason?: unknown; details?: unknown };
  if (s.status === "Success") return { exitCode: 0 };
  const causes = (s.details as { causes?: unknown } | null | undefined)?.causes;
  const exit = Array.isArray(causes)
    ? causes.find((c) => (c as { reason?: unknown } | null)?.reason === "ExitCode")
    : undefined;
  const code = (exit as { message?: unknown } | undefined)?.message;
  if (s.reason === "NonZeroExitCode" && typeof code === "string" && /^\d{1,9}$/.test(code))
    return { exitCode: Number(code) };
  return { error: typeof s.message === "string" ? s.message : "the command failed" };
}
