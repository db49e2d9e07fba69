// A throwaway PostgreSQL cluster for one e2e test file (scripts/lib/postgres.ts; needs root and
// Debian's postgresql, which scripts/setup installs): started before the file's tests, removed
// after; and the hub's store opened on one of its databases.
import { afterAll, beforeAll } from "bun:test";
import { PostgresCluster } from "../../scripts/lib/postgres.ts";
import { PostgresHubStore } from "../../src/hub/store-postgres.ts";

/** Starts a cluster for the calling file's tests (call at the file's top level); gives it. */
export function postgresForFile(): () => PostgresCluster {
  let cluster: PostgresCluster | undefined;
  beforeAll(async () => {
    cluster = await PostgresCluster.start();
  }, 60_000);
  afterAll(async () => {
    await cluster?.remove();
  });
  return () => {
    if (cluster === undefined) throw new Error("the file's PostgreSQL cluster is not started");
    return cluster;
  };
}

/** The hub's store on the database at `url`, giving up a connection after 2 s. */
export const openHubStore = (url: string) => PostgresHubStore.open(url, { connectionTimeout: 2 });
