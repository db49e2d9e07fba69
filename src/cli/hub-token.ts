// `fleetlet hub token list` and `fleetlet hub token revoke ID`: the hub's join tokens by their
// public ids (docs/protocol.md, "Joining"). `hub token create` is in hub.ts.
import type { JoinTokenList } from "../protocol/index.ts";
import { type FlagSpecs, parseArgs } from "./args.ts";
import { UsageError } from "./errors.ts";
import { hubRequest, hubTarget } from "./hub-client.ts";
import type { CliIO } from "./io.ts";
import { parseOutputFormat, printObjects } from "./printers.ts";
import { alignTabs, TABLE } from "./tabwriter.ts";

const USAGE = `usage: fleetlet hub token list --hub URL [--token T] [-o json|yaml]
       fleetlet hub token revoke ID --hub URL [--token T]
`;

const flags = {
  hub: { type: "string" },
  token: { type: "string" },
  "ca-file": { type: "string" },
  output: { type: "string", short: "o" },
  help: { type: "boolean", short: "h" },
} as const satisfies FlagSpecs;

/** ID USES EXPIRES STATUS LABELS, one join token a line. */
function printTokens(list: JoinTokenList, now: number): string {
  const rows = list.items.map((t) => {
    const status = t.revoked
      ? "Revoked"
      : Date.parse(t.expiresAt) <= now
        ? "Expired"
        : t.uses !== undefined && t.used >= t.uses
          ? "UsedUp"
          : "Active";
    const labels = Object.entries(t.labels).map(([k, v]) => `${k}=${v}`);
    return [t.id, `${t.used}/${t.uses ?? "-"}`, t.expiresAt, status, labels.join(",") || "<none>"];
  });
  const lines = [["ID", "USES", "EXPIRES", "STATUS", "LABELS"], ...rows];
  return alignTabs(lines.map((cells) => `${cells.join("\t")}\n`).join(""), TABLE);
}

/** `fleetlet hub token list|revoke ...`; undefined for another verb. */
export async function hubTokenCommand(
  verb: string | undefined,
  argv: string[],
  io: CliIO,
): Promise<number | undefined> {
  if (verb !== "list" && verb !== "revoke") return undefined;
  const { flags: f, positionals } = parseArgs(argv, flags);
  if (f.help === true) {
    io.stdout(USAGE);
    return 0;
  }
  if (verb === "list") {
    if (positionals.length > 0) throw new UsageError(`hub token list takes no argument\n${USAGE}`);
    const format = parseOutputFormat(f.output);
    const list = await hubRequest<JoinTokenList>(hubTarget(f, io), "GET", "/api/v1/join-tokens");
    if (format === "json" || format === "yaml") io.stdout(printObjects(list, format));
    else if (list.items.length === 0) io.stderr("No join tokens found\n");
    else io.stdout(printTokens(list, io.now()));
    return 0;
  }
  const [id, ...extra] = positionals;
  if (id === undefined || extra.length > 0)
    throw new UsageError(`hub token revoke takes one join token id\n${USAGE}`);
  await hubRequest(hubTarget(f, io), "DELETE", `/api/v1/join-tokens/${encodeURIComponent(id)}`);
  io.stdout(`join token ${id} revoked\n`);
  return 0;
}
