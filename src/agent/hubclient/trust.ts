// How the agent trusts the hub (docs/protocol.md, "TLS and trust"): the CA of hub.caFile, else
// the CA it saved on first contact, else — when the join token names a CA hash — the hub's CA
// fetched once without verification and kept only if its hash is the token's. A plain or
// system-trusted hub needs none. One trust serves every URL of the hub (its replicas share the
// CA): the CA is fetched from the URL being tried, and then verifies all of them.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { caHash, HUB_CA_PATH, parseJoinToken, SAVED_CA_FILE } from "../../protocol/index.ts";
import { writeFileAtomic } from "../../util/atomic-file.ts";
import type { Logger } from "../../util/log.ts";
import type { StateWrites } from "../events/state-writes.ts";
import { hubEndpoints, JoinError } from "./join.ts";

export interface TrustInput {
  caFile?: string;
  joinToken?: string;
  rootDir: string;
  log: Logger;
  /** Where a failed save of the CA is said (it is trusted for this run all the same). */
  stateWrites?: StateWrites;
  /** Fetches the hub's CA without verifying the hub (injected for tests). */
  fetchUnverified?: (url: string) => Promise<Response>;
}

function readCaFile(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new JoinError(`cannot read the hub CA file ${path}: ${(err as Error).message}`, true);
  }
}

function readSaved(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

const unverifiedFetch = (url: string) =>
  fetch(url, {
    tls: { rejectUnauthorized: false },
    signal: AbortSignal.timeout(15_000),
  } as RequestInit);

export class HubTrust {
  private ca: string | undefined;
  private readonly savedPath: string;
  private readonly wanted: string | undefined;

  constructor(private readonly input: TrustInput) {
    this.savedPath = join(input.rootDir, SAVED_CA_FILE);
    this.wanted =
      input.joinToken === undefined ? undefined : parseJoinToken(input.joinToken).caHash;
    if (input.caFile !== undefined) {
      this.ca = readCaFile(input.caFile);
      const have = caHash(this.ca);
      if (this.wanted !== undefined && have !== this.wanted)
        throw new JoinError(
          `the CA in ${input.caFile} (${have}) is not the one the join token names (${this.wanted})`,
          true,
        );
    } else {
      this.ca = readSaved(this.savedPath);
    }
  }

  /** The CA to verify the hub with now (undefined: plain HTTP, or the system's roots). */
  current(): string | undefined {
    return this.ca;
  }

  /** Makes sure the CA is known before `hubUrl` is dialled: fetches it from there and checks it
   * on first contact when the token says which one it must be. Rejects with JoinError when the
   * hub's CA is not that one. */
  async resolve(hubUrl: string): Promise<string | undefined> {
    const { http } = hubEndpoints(hubUrl);
    if (this.ca !== undefined || !http.startsWith("https:") || this.wanted === undefined)
      return this.ca;
    const url = `${http}${HUB_CA_PATH}`;
    let pem: string;
    try {
      const res = await (this.input.fetchUnverified ?? unverifiedFetch)(url);
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      pem = await res.text();
    } catch (err) {
      throw new JoinError(
        `cannot fetch the hub's CA from ${url}: ${(err as Error).message}`,
        false,
      );
    }
    let have: string;
    try {
      have = caHash(pem);
    } catch (err) {
      throw new JoinError(
        `the hub answered ${url} with no certificate: ${(err as Error).message}`,
        false,
      );
    }
    if (have !== this.wanted)
      throw new JoinError(
        `the hub's CA ${have} is not the one the join token names (${this.wanted}); not trusting ${hubUrl}`,
        false,
      );
    this.save(pem);
    this.input.log.info("trusting the hub's CA named by the join token", {
      hash: have,
      saved: this.savedPath,
    });
    this.ca = pem;
    return pem;
  }

  /** Saves the checked CA; when it cannot (a full disk), it is trusted for this run only and
   * fetched and checked against the token again at the next start. */
  private save(pem: string): void {
    try {
      writeFileAtomic(this.savedPath, pem);
      this.input.stateWrites?.succeeded(this.savedPath);
    } catch (err) {
      this.input.log.warn("cannot save the hub's CA; trusted for this run", { error: err });
      this.input.stateWrites?.failed(this.savedPath, err);
    }
  }
}
