// `fleetlet attach POD [-c C] [-i] [-t]`: joins a running container's main process, as kubectl
// attach does: its output from now on, and with -i the client's input to its stdin. The pod is
// read first (from the agent, or from the hub with --hub) to pick the container and its terminal:
// a terminal is the container's own (`tty: true`), so -t to a container without one is dropped
// with kubectl's warning, and a container with one gets a terminal without -t. The stream itself
// is the interactive exec's client (remote-exec.ts), to the pod's attach subresource.
import { resolveContainer } from "../api/containers.ts";
import { StatusError } from "../api/status.ts";
import type { Pod } from "../api/types.ts";
import { type FlagSpecs, parseArgs } from "./args.ts";
import { createAgentClient, hubTransport, resolveSocketPath } from "./client.ts";
import { CliError, UsageError } from "./errors.ts";
import { hubTarget } from "./hub-client.ts";
import type { CliIO } from "./io.ts";
import { runRemote } from "./remote-exec.ts";

const attachFlags = {
  socket: { type: "string" },
  namespace: { type: "string", short: "n" },
  help: { type: "boolean", short: "h" },
  container: { type: "string", short: "c" },
  stdin: { type: "boolean", short: "i" },
  tty: { type: "boolean", short: "t" },
  quiet: { type: "boolean", short: "q" },
  hub: { type: "string" },
  token: { type: "string" },
  "ca-file": { type: "string" },
} as const satisfies FlagSpecs;

export const ATTACH_USAGE =
  "usage: fleetlet attach POD [-c CONTAINER] [-n NS] [-i] [-t] [-q] [--hub URL [--token T]]\n" +
  "  joins the container's running process: its output from now on; -i: pass stdin to it (the\n" +
  "  container needs stdin: true); -t: a terminal (raw mode, resized with yours; the container\n" +
  "  needs tty: true); -q: no hints; --hub: a pod on any device of the hub\n";

/** What an attach asks for, once the pod is known. */
export interface AttachPlan {
  container: string;
  stdin: boolean;
  /** The container's terminal: the request cannot change it. */
  tty: boolean;
  /** Lines for stderr before attaching (kubectl's). */
  notes: string[];
}

/** The container and terminal of an attach to `pod`, by kubectl's rules; throws a CliError for
 * a pod that has ended or a container it does not have. */
export function planAttach(
  pod: Pod,
  o: { container?: string | undefined; stdin: boolean; tty: boolean; quiet: boolean },
): AttachPlan {
  const phase = pod.status?.phase;
  if (phase === "Succeeded" || phase === "Failed")
    throw new CliError(`cannot attach a container in a completed pod; current phase is ${phase}`);
  let c: ReturnType<typeof resolveContainer>;
  try {
    c = resolveContainer(pod, o.container);
  } catch (err) {
    if (err instanceof StatusError)
      throw new CliError(`cannot attach to the container: ${err.message}`);
    throw err;
  }
  const notes: string[] = [];
  if (o.tty && c.tty !== true && !o.quiet)
    notes.push(`error: Unable to use a TTY - container ${c.name} did not allocate one`);
  if (o.stdin && !o.quiet) notes.push("If you don't see a command prompt, try pressing enter.");
  return { container: c.name, stdin: o.stdin, tty: c.tty === true, notes };
}

/** The attach path and query for a pod, as kubectl sends it. */
export function attachPath(
  ns: string,
  pod: string,
  o: { container: string; stdin: boolean; tty: boolean },
): string {
  const q = new URLSearchParams();
  q.set("container", o.container);
  q.set("stdin", String(o.stdin));
  q.set("stdout", "true");
  q.set("stderr", String(!o.tty));
  q.set("tty", String(o.tty));
  return `/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(pod)}/attach?${q}`;
}

/** `fleetlet attach POD [-c C] [-i] [-t] [--hub URL]`: runs until the process's output ends, the
 * client's stdin ends (a detach), or Ctrl-C. */
export async function attachCommand(argv: string[], io: CliIO): Promise<number> {
  const { flags, positionals, rest } = parseArgs(argv, attachFlags);
  if (flags.help) {
    io.stdout(ATTACH_USAGE);
    return 0;
  }
  const [pod, ...extra] = positionals;
  if (pod === undefined) throw new UsageError(`attach needs a pod name\n${ATTACH_USAGE}`);
  if (extra.length > 0 || (rest !== undefined && rest.length > 0))
    throw new UsageError(`attach takes one pod and no command\n${ATTACH_USAGE}`);
  const ns = flags.namespace ?? "default";
  const socket = resolveSocketPath(flags.socket, io.env);
  const client =
    flags.hub === undefined
      ? createAgentClient(socket)
      : createAgentClient(socket, hubTransport(hubTarget(flags, io)));
  const plan = planAttach(await client.getPod(ns, pod), {
    container: flags.container,
    stdin: flags.stdin === true,
    tty: flags.tty === true,
    quiet: flags.quiet === true,
  });
  for (const n of plan.notes) io.stderr(`${n}\n`);
  const path = attachPath(ns, pod, plan);
  const code = await runRemote(flags, io, path, { kind: "attach", ...plan });
  if (plan.stdin && plan.tty && process.stdin.isTTY === true && flags.quiet !== true)
    io.stdout(
      `Session ended, resume using 'fleetlet attach ${pod} -c ${plan.container} -n ${ns} -i -t' command\n`,
    );
  return code;
}
