// Joining the hub (docs/protocol.md, "Joining"): the join token is exchanged once for the node's
// own credential, kept in <rootDir>/hub/credential (0600, written atomically). The agent joins
// only when it has no credential file.
import { readFileSync } from "node:fs";
import { AGENT_CONNECT_PATH, JOIN_PATH, joinResponseSchema } from "../../protocol/index.ts";
import { writeFileAtomic } from "../../util/atomic-file.ts";
import { hubAddress } from "../config/hub-urls.ts";

/** The hub refused or could not answer the join; `permanent` when retrying cannot help. */
export class JoinError extends Error {
  constructor(
    message: string,
    readonly permanent: boolean,
  ) {
    super(message);
    this.name = "JoinError";
  }
}

/** The hub's HTTP base ("https://hub:7443") and WebSocket connect URL, from hub.url. */
export function hubEndpoints(hubUrl: string): { http: string; connect: string } {
  const { secure, base } = hubAddress(hubUrl);
  return {
    http: `${secure ? "https" : "http"}://${base}`,
    connect: `${secure ? "wss" : "ws"}://${base}${AGENT_CONNECT_PATH}`,
  };
}

/** The saved credential, or undefined when there is none. */
export function readCredential(path: string): string | undefined {
  try {
    const text = readFileSync(path, "utf8").trim();
    return text === "" ? undefined : text;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new Error(`cannot read the hub credential ${path}: ${(err as Error).message}`);
  }
}

export interface JoinInput {
  hubUrl: string;
  joinToken: string | undefined;
  nodeName: string;
  credentialPath: string;
  /** fetch with the hub's CA applied (injected for tests). */
  fetch: (url: string, init: RequestInit) => Promise<Response>;
  /** Called when the credential the hub gave cannot be saved (a full disk): the credential is
   * then returned all the same, for the caller to keep and save later. Absent: the error throws. */
  onUnsaved?: (credential: string, error: unknown) => void;
}

/** The node credential: read from disk, else obtained with the join token and saved. */
export async function loadOrJoin(input: JoinInput): Promise<string> {
  const saved = readCredential(input.credentialPath);
  if (saved !== undefined) return saved;
  if (input.joinToken === undefined || input.joinToken === "") {
    throw new JoinError(
      `no hub credential in ${input.credentialPath} and no join token (--join-token) to get one`,
      true,
    );
  }
  const url = `${hubEndpoints(input.hubUrl).http}${JOIN_PATH}`;
  let res: Response;
  try {
    res = await input.fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ joinToken: input.joinToken, nodeName: input.nodeName }),
      signal: AbortSignal.timeout(15_000),
    });
  } catch (err) {
    throw new JoinError(`cannot reach the hub at ${url}: ${(err as Error).message}`, false);
  }
  const body: unknown = await res.json().catch(() => undefined);
  if (!res.ok) {
    const message = (body as { message?: unknown } | undefined)?.message;
    const why = typeof message === "string" ? message : `HTTP ${res.status}`;
    throw new JoinError(
      `the hub refused to join node "${input.nodeName}": ${why}`,
      res.status < 500,
    );
  }
  const parsed = joinResponseSchema.safeParse(body);
  if (!parsed.success) {
    throw new JoinError(`the hub answered the join with an unexpected body from ${url}`, false);
  }
  const credential = parsed.data.credential;
  try {
    writeFileAtomic(input.credentialPath, `${credential}\n`);
  } catch (err) {
    if (input.onUnsaved === undefined) throw err;
    input.onUnsaved(credential, err);
  }
  return credential;
}
