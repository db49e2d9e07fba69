import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import YAML from "yaml";
import { kubeconfigCommand, PLAIN_HTTP_WARNING } from "../../../src/cli/kubeconfig.ts";
import { captureIO } from "../../lib/cli-io.ts";

const data = mkdtempSync(join(tmpdir(), "fleetlet-kubeconfig-unit-"));
mkdirSync(join(data, "tls"));
const CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
writeFileSync(join(data, "tls", "ca.crt"), CA);
writeFileSync(join(data, "operator-token"), "flo_op\n");
afterAll(() => rmSync(data, { recursive: true, force: true }));

async function kubeconfig(argv: string[]) {
  const { out, io } = captureIO();
  const code = await kubeconfigCommand(argv, io);
  return { ...out, code, config: YAML.parse(out.stdout) };
}

describe("fleetlet hub kubeconfig", () => {
  test("an HTTPS hub: its URL, the data dir's CA and operator token, and no warning", async () => {
    const r = await kubeconfig(["--hub", "https://127.0.0.1:7443/", "--data", data]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
    expect(r.config.clusters[0].cluster).toEqual({
      server: "https://127.0.0.1:7443",
      "certificate-authority-data": Buffer.from(CA).toString("base64"),
    });
    expect(r.config.users[0].user).toEqual({ token: "flo_op" });
  });

  test("a plain-HTTP hub: warns that kubectl sends no token to it, and still prints the kubeconfig", async () => {
    const r = await kubeconfig(["--hub", "http://127.0.0.1:7443", "--token", "flo_t"]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe(PLAIN_HTTP_WARNING);
    expect(PLAIN_HTTP_WARNING).toContain("kubectl sends no bearer token to an http:// server");
    expect(r.config.clusters[0].cluster).toEqual({ server: "http://127.0.0.1:7443" });
  });
});
