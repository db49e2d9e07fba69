// kubectl against the hub exactly as `scripts/up` starts it (scripts/lib/quickstart-hub: HTTPS
// with the hub's own CA), with an agent joined over TLS by the join token that script makes, and
// the kubeconfig from the `fleetlet hub kubeconfig` line `scripts/up` prints. Beside it, why the
// quick start does not serve plain HTTP: kubectl sends no token to an http:// hub. Needs root, the
// test bed and kubectl (1.32); the kubectl tests are skipped, with that reason, where kubectl is
// not installed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Pod } from "../../src/api/types.ts";
import { PLAIN_HTTP_WARNING } from "../../src/cli/kubeconfig.ts";
import { caHash, parseJoinToken } from "../../src/protocol/index.ts";
import { TestAgent } from "../lib/agent.ts";
import { deployExamples } from "../lib/doc-examples.ts";
import { TestHub } from "../lib/hub.ts";
import { Background, type Ran, run } from "../lib/processes.ts";
import { fleetletBin, repoRoot } from "../lib/testbed.ts";

const kubectl = Bun.which("kubectl");
const quickstartHub = join(repoRoot, "scripts/lib/quickstart-hub");
const data = mkdtempSync(join(tmpdir(), "fleetlet-quickstart-e2e-"));
const kubeconfigFile = join(data, "kubeconfig");
let hub: Background;
let url = "";
const agent = new TestAgent();

const kc = (config: string, ...args: string[]): Promise<Ran> =>
  run([kubectl ?? "kubectl", ...args], { env: { KUBECONFIG: config } });

beforeAll(async () => {
  hub = new Background([quickstartHub, "serve", "127.0.0.1:0", data]);
  url = (await hub.waitFor(/hub listening url=(\S+)/, "the hub to listen", 30_000))[1] ?? "";
  const token = await run([quickstartHub, "join-token", url, data]);
  if (token.code !== 0) throw new Error(`join-token: ${token.stderr}`);
  agent.args.push("--hub", url, "--join-token", token.stdout.trim());
  agent.writeManifest(
    "web.yaml",
    `apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers: [{name: c, image: ${agent.tb.busybox}, command: ["sleep", "3600"]}]\n`,
  );
  await agent.start();
}, 60_000);

afterAll(async () => {
  await agent.cleanup();
  await hub?.stop();
  rmSync(data, { recursive: true, force: true });
}, 60_000);

describe("the quick start's hub (needs root and the test bed)", () => {
  test("serves HTTPS with its own CA; its join token names that CA, and the agent joins with it and keeps the CA", async () => {
    expect(url).toStartWith("https://127.0.0.1:");
    const ca = readFileSync(join(data, "tls", "ca.crt"), "utf8");
    const token = agent.args[agent.args.indexOf("--join-token") + 1] ?? "";
    expect(parseJoinToken(token).caHash).toBe(caHash(ca));
    await agent.waitPod("web", "Running", (p) => p.status?.phase === "Running");
    expect(readFileSync(join(agent.rootDir, "hub", "ca.crt"), "utf8")).toBe(ca);
    const dashboard = await fetch(`${url}/`, { tls: { ca } } as RequestInit);
    expect(dashboard.status).toBe(200);
    expect(await dashboard.text()).toContain("<title>fleetlet hub</title>");
  });
});

describe.skipIf(kubectl === null)(
  "kubectl against the quick start's hub (needs root, the test bed and kubectl; skipped where kubectl is not installed)",
  () => {
    test("the kubeconfig of `fleetlet hub kubeconfig --hub URL --data DIR` lets kubectl list the device and its pod", async () => {
      const made = await run([fleetletBin, "hub", "kubeconfig", "--hub", url, "--data", data]);
      expect(made.code).toBe(0);
      expect(made.stderr).toBe("");
      writeFileSync(kubeconfigFile, made.stdout);
      await agent.waitPod("web", "Running", (p) => p.status?.phase === "Running");
      const nodes = await kc(kubeconfigFile, "get", "nodes");
      expect(nodes.stderr).toBe("");
      expect(nodes.stdout).toMatch(new RegExp(`^${agent.nodeName}\\s+Ready\\s`, "m"));
      const pods = await kc(kubeconfigFile, "get", "pods", "-o", "wide");
      expect(pods.stdout).toMatch(
        new RegExp(`^web-${agent.nodeName}\\s+1/1\\s+Running\\s.*\\s${agent.nodeName}\\s`, "m"),
      );
    }, 30_000);

    test("the examples of docs/deploy.md apply as they are: their pods run on the device, the ConfigMap's page and key reach the pod", async () => {
      for (const { file, text } of deployExamples()) {
        writeFileSync(join(data, file), text);
        const applied = await kc(kubeconfigFile, "apply", "-f", join(data, file));
        expect(applied.stderr).toBe("");
        expect(applied.code).toBe(0);
      }
      const up = (p: Pod) => p.status?.containerStatuses?.[0]?.ready === true;
      await agent.waitPod("hello", "Running", up, 60_000);
      await agent.waitPod("hello-page", "Running", up, 60_000);
      const page = await kc(
        kubeconfigFile,
        "exec",
        `hello-page-${agent.nodeName}`,
        "--",
        "sh",
        "-c",
        'echo "$GREETING"; wget -qO- http://127.0.0.1:8082/',
      );
      expect(page.stdout).toBe("hello\n<h1>hello from the hub</h1>\n");
      const logs = await kc(kubeconfigFile, "logs", `hello-${agent.nodeName}`);
      expect(logs.stdout).toStartWith(`hello from ${agent.nodeName}\n`);
      for (const { file } of deployExamples())
        expect((await kc(kubeconfigFile, "delete", "-f", join(data, file))).code).toBe(0);
    }, 90_000);

    test("a plain-HTTP hub gets no token from kubectl, as `fleetlet hub kubeconfig` warns", async () => {
      const plain = new TestHub();
      try {
        await plain.start();
        expect(plain.url).toStartWith("http://");
        const made = await run([
          fleetletBin,
          "hub",
          "kubeconfig",
          "--hub",
          plain.url,
          "--data",
          plain.dataDir,
        ]);
        expect(made.stderr).toBe(PLAIN_HTTP_WARNING);
        const config = join(plain.dataDir, "kubeconfig");
        writeFileSync(config, made.stdout);
        const refused = await kc(config, "get", "nodes");
        expect(refused.code).not.toBe(0);
        expect(refused.stderr).toContain("You must be logged in to the server");
        const withToken = await plain.api("/api/v1/nodes");
        expect(withToken.status).toBe(200);
      } finally {
        await plain.cleanup();
      }
    }, 30_000);
  },
);
