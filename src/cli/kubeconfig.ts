// `fleetlet hub kubeconfig`: a kubeconfig that kubectl uses as is against the hub (docs/kubectl.md):
// the hub's URL, its CA (so kubectl verifies the hub as the devices do) and the operator token.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import YAML from "yaml";
import { caHash, HUB_CA_PATH } from "../protocol/index.ts";
import { type FlagSpecs, parseArgs } from "./args.ts";
import { CliError, UsageError } from "./errors.ts";
import type { CliIO } from "./io.ts";

const KUBECONFIG_USAGE = `usage: fleetlet hub kubeconfig --hub URL [--token T] [--data DIR] [--ca-file F] [--ca-hash sha256:...]
                               [--name fleetlet] [-n NAMESPACE]
  Prints a kubeconfig for kubectl: the hub's URL, its CA and the operator token.
  The token: --token, $FLEETLET_HUB_TOKEN, or DIR/operator-token (--data, on the hub's machine).
  The CA: --ca-file, $FLEETLET_HUB_CA, DIR/tls/ca.crt, or fetched from the hub and checked
  against --ca-hash (the hash the hub logs at start and puts in join tokens).
`;

/** kubectl (client-go) sends no bearer token to an http:// server: every request is refused. */
export const PLAIN_HTTP_WARNING = `warning: the hub is plain HTTP: kubectl sends no bearer token to an http:// server, so every kubectl command against it fails with "You must be logged in to the server"; run the hub with TLS (its default, without --plain-http) and give its https:// URL
`;

const flags = {
  hub: { type: "string" },
  token: { type: "string" },
  data: { type: "string" },
  "ca-file": { type: "string" },
  "ca-hash": { type: "string" },
  name: { type: "string" },
  namespace: { type: "string", short: "n" },
  help: { type: "boolean", short: "h" },
} as const satisfies FlagSpecs;

function readFile(path: string, what: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new CliError(`cannot read ${what} ${path}: ${(err as Error).message}`);
  }
}

function operatorToken(f: { token?: string; data?: string }, io: CliIO): string {
  const token =
    f.token ??
    io.env.FLEETLET_HUB_TOKEN ??
    (f.data !== undefined
      ? readFile(join(f.data, "operator-token"), "the operator token").trim()
      : undefined);
  if (token === undefined || token === "")
    throw new UsageError(
      "an operator token is required: --token T, FLEETLET_HUB_TOKEN or --data DIR",
    );
  return token;
}

/** The hub's CA: a file, the data dir's, or the hub's own answer checked against --ca-hash. */
async function hubCa(
  url: string,
  f: { data?: string; "ca-file"?: string; "ca-hash"?: string },
  io: CliIO,
): Promise<string | undefined> {
  const file = f["ca-file"] ?? io.env.FLEETLET_HUB_CA;
  if (file !== undefined && file !== "") return readFile(file, "the hub's CA");
  if (f.data !== undefined && existsSync(join(f.data, "tls", "ca.crt")))
    return readFile(join(f.data, "tls", "ca.crt"), "the hub's CA");
  if (!url.startsWith("https:")) return undefined;
  const want = f["ca-hash"];
  if (want === undefined)
    throw new UsageError(
      "an HTTPS hub needs its CA: --ca-file F, --data DIR (on the hub's machine), or --ca-hash sha256:... (logged by the hub at start, and in every join token)",
    );
  let pem: string;
  try {
    const res = await fetch(url + HUB_CA_PATH, {
      tls: { rejectUnauthorized: false },
      signal: AbortSignal.timeout(15_000),
    } as RequestInit);
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    pem = await res.text();
  } catch (err) {
    throw new CliError(
      `cannot fetch the hub's CA from ${url}${HUB_CA_PATH}: ${(err as Error).message}`,
    );
  }
  const have = caHash(pem);
  if (have !== want.toLowerCase())
    throw new CliError(
      `the hub's CA ${have} is not the one --ca-hash names (${want}); not trusting ${url}`,
    );
  return pem;
}

/** The kubeconfig document (a YAML string). */
function kubeconfig(opts: {
  server: string;
  token: string;
  ca?: string;
  name: string;
  namespace: string;
}): string {
  const user = `${opts.name}-operator`;
  return YAML.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: opts.name,
        cluster: {
          server: opts.server,
          ...(opts.ca !== undefined && {
            "certificate-authority-data": Buffer.from(opts.ca).toString("base64"),
          }),
        },
      },
    ],
    users: [{ name: user, user: { token: opts.token } }],
    contexts: [
      { name: opts.name, context: { cluster: opts.name, user, namespace: opts.namespace } },
    ],
    "current-context": opts.name,
  });
}

export async function kubeconfigCommand(argv: string[], io: CliIO): Promise<number> {
  const { flags: f, positionals } = parseArgs(argv, flags);
  if (f.help) {
    io.stdout(KUBECONFIG_USAGE);
    return 0;
  }
  if (positionals.length > 0)
    throw new UsageError(`unexpected argument ${positionals[0]}\n${KUBECONFIG_USAGE}`);
  if (f.hub === undefined) throw new UsageError(`--hub URL is required\n${KUBECONFIG_USAGE}`);
  const server = f.hub.replace(/\/+$/, "");
  const token = operatorToken(f, io);
  const ca = await hubCa(server, f, io);
  if (server.startsWith("http:")) io.stderr(PLAIN_HTTP_WARNING);
  io.stdout(
    kubeconfig({
      server,
      token,
      ...(ca !== undefined && { ca }),
      name: f.name ?? "fleetlet",
      namespace: f.namespace ?? "default",
    }),
  );
  return 0;
}
