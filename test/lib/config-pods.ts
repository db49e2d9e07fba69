// Helpers of the e2e tests of ConfigMaps, Secrets and volumes: manifest text, reading what a
// container sees (`fleetlet exec`), waiting for events.
import type { ContainerStatus, Event, Pod } from "../../src/api/types.ts";
import type { TestAgent } from "./agent.ts";
import { eventually } from "./testbed.ts";

const b64 = (s: string | Buffer) => Buffer.from(s).toString("base64");

const containerStatus = (pod: Pod, name = "c"): ContainerStatus | undefined =>
  pod.status?.containerStatuses?.find((c) => c.name === name);

/** A pod manifest whose containers stop within 1 s. */
function podManifest(name: string, spec: string, meta = ""): string {
  return `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
${meta}spec:
  terminationGracePeriodSeconds: 1
${spec}`;
}

function configMapManifest(name: string, data: Record<string, string>, extra = ""): string {
  const lines = Object.entries(data).map(([k, v]) => `  ${k}: ${JSON.stringify(v)}`);
  return `apiVersion: v1
kind: ConfigMap
metadata:
  name: ${name}
${extra}data:
${lines.join("\n")}
`;
}

export function configPods(agent: TestAgent) {
  const fullName = (name: string) => `${name}-${agent.nodeName}`;
  return {
    b64,
    status: containerStatus,
    podManifest,
    configMap: configMapManifest,
    fullName,
    /** A busybox container running `command` with sh; `extra` is more of its YAML. */
    container: (name: string, command: string, extra = "") => `    - name: ${name}
      image: ${agent.tb.busybox}
      command: ["sh", "-c", ${JSON.stringify(command)}]
${extra}`,
    /** Runs a script in a container of the pod; its output, or a throw naming the exit. */
    sh(pod: string, script: string, container = "c"): string {
      const r = agent.cli(["exec", fullName(pod), "-c", container, "--", "sh", "-c", script]);
      if (r.code !== 0)
        throw new Error(`exec in ${pod} failed (${r.code}): ${r.stderr}${r.stdout}`);
      return r.stdout;
    },
    async eventsOf(name: string): Promise<Event[]> {
      return (await agent.events()).filter((e) => e.involvedObject.name === fullName(name));
    },
    waitEvent(what: string, match: (e: Event) => boolean, timeoutMs = 30_000): Promise<Event> {
      return eventually(what, async () => (await agent.events()).find(match), timeoutMs, 200);
    },
    running: (name: string) => agent.waitPod(name, "Running", (p) => p.status?.phase === "Running"),
  };
}
