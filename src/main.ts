#!/usr/bin/env bun
// The fleetlet command line: one executable for the agent, the hub and the tools around them.
// Each command's modules are loaded when it runs (dynamic import): the agent on a device never
// loads the hub, its dashboard or the CLI's printers, which costs memory for as long as it runs.
import { CliError } from "./cli/errors.ts";
import { processIO } from "./cli/io.ts";

type Command = (argv: string[]) => Promise<number> | number;

const commands: Record<string, { run: Command; help: string }> = {
  agent: {
    run: async (argv) => (await import("./cli/agent.ts")).agentCommand(argv),
    help: "run the agent: the pods of the manifest folder and of the hub, on this device",
  },
  hub: {
    run: async (argv) => (await import("./cli/hub.ts")).hubCommand(argv, processIO()),
    help: "run the fleet hub; join tokens, revoke nodes, kubeconfig, audit log, releases",
  },
  version: {
    run: async (argv) => (await import("./cli/version.ts")).versionCommand(argv),
    help: "print the version, the Bun version and the git commit",
  },
  "runtime-info": {
    run: async (argv) => (await import("./cli/runtime-info.ts")).runtimeInfoCommand(argv),
    help: "print the container runtime's name, version and conditions",
  },
  get: {
    run: async (argv) => (await import("./cli/commands.ts")).getCommand(argv, processIO()),
    help: "list pods or events of the agent; nodes, pods, events, daemonsets of the hub",
  },
  describe: {
    run: async (argv) => (await import("./cli/commands.ts")).describeCommand(argv, processIO()),
    help: "show a pod in detail, with its events",
  },
  logs: {
    run: async (argv) => (await import("./cli/commands.ts")).logsCommand(argv, processIO()),
    help: "print a container's logs (--hub: of a pod on any device of the hub)",
  },
  exec: {
    run: async (argv) => (await import("./cli/commands.ts")).execCommand(argv, processIO()),
    help: "run a command in a container (-it: interactive; --hub: on any device of the hub)",
  },
  attach: {
    run: async (argv) => (await import("./cli/attach.ts")).attachCommand(argv, processIO()),
    help: "join a container's running process (-i: its stdin, -t: its terminal; --hub)",
  },
  "port-forward": {
    run: async (argv) =>
      (await import("./cli/port-forward.ts")).portForwardCommand(argv, processIO()),
    help: "forward a local port to a pod's port, through the hub",
  },
  apply: {
    run: async (argv) => (await import("./cli/deploy.ts")).applyCommand(argv, processIO()),
    help: "send DaemonSets (and their ConfigMaps and Secrets) to the hub, which deploys them",
  },
  delete: {
    run: async (argv) => (await import("./cli/deploy.ts")).deleteCommand(argv, processIO()),
    help: "delete DaemonSets, ConfigMaps or Secrets from the hub (a DaemonSet's pods leave)",
  },
  label: {
    run: async (argv) => (await import("./cli/deploy.ts")).labelCommand(argv, processIO()),
    help: "set or remove a device's labels on the hub (DaemonSet pods follow)",
  },
  rollout: {
    run: async (argv) => (await import("./cli/rollout.ts")).rolloutCommand(argv, processIO()),
    help: "rollouts on the hub: daemonset/NAME (status, history, undo), agentrollout/NAME (status, pause, resume, undo)",
  },
  release: {
    run: async (argv) => (await import("./cli/release.ts")).releaseCommand(argv, processIO()),
    help: "sign agent releases offline: keygen, sign, verify (Ed25519)",
  },
};

function usage(): string {
  const lines = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(14)} ${c.help}`);
  return `usage: fleetlet <command> [flags]\n\ncommands:\n${lines.join("\n")}\n`;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "help" || name === "--help" || name === "-h") {
    process.stdout.write(usage());
    return name === undefined ? 2 : 0;
  }
  if (name === "--version") return (await import("./cli/version.ts")).versionCommand([]);
  const command = commands[name];
  if (command === undefined) {
    process.stderr.write(`fleetlet: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  return command.run(rest);
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (err) {
  if (err instanceof CliError) {
    process.stderr.write(`fleetlet: ${err.message}\n`);
    process.exitCode = err.exitCode;
  } else {
    process.stderr.write(
      `fleetlet: unexpected error: ${err instanceof Error ? err.stack : String(err)}\n`,
    );
    process.exitCode = 1;
  }
}
