// The agent's hub URL list (hub.url, --hub): a comma-separated string or a YAML list of the hub's
// replicas, and the entries it refuses.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, loadAgentConfig } from "../../../src/agent/config/index.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "fleetlet-hub-urls-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const deps = { hostname: () => "cam-1", cwd: "/work" };

async function fromFile(text: string, argv: string[] = []) {
  const file = join(dir, "config.yaml");
  await writeFile(file, text);
  return loadAgentConfig(["--config", file, ...argv], {}, deps);
}

async function errorOf(load: Promise<unknown>): Promise<string> {
  try {
    await load;
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error("expected the config to be refused");
}

describe("hub.url and --hub as a list of the hub's URLs", () => {
  test("--hub takes a comma-separated list, entries trimmed, in the order given", async () => {
    const config = await loadAgentConfig(
      ["--hub", "https://hub-a:7443, wss://hub-b:7443/,https://10.0.0.3:7443"],
      {},
      deps,
    );
    expect(config.hub?.urls).toEqual([
      "https://hub-a:7443",
      "wss://hub-b:7443/",
      "https://10.0.0.3:7443",
    ]);
  });

  test("one URL is a list of one", async () => {
    const config = await loadAgentConfig(["--hub", "https://hub:7443"], {}, deps);
    expect(config.hub?.urls).toEqual(["https://hub:7443"]);
  });

  test("the file takes a YAML list or a comma-separated string", async () => {
    const list = await fromFile(
      "hub:\n  url:\n    - https://hub-a:7443\n    - https://hub-b:7443\n",
    );
    expect(list.hub?.urls).toEqual(["https://hub-a:7443", "https://hub-b:7443"]);
    const text = await fromFile('hub: {url: "https://hub-a:7443,https://hub-b:7443"}\n');
    expect(text.hub?.urls).toEqual(["https://hub-a:7443", "https://hub-b:7443"]);
  });

  test("--hub replaces the file's list", async () => {
    const config = await fromFile("hub: {url: [https://a:7443, https://b:7443]}\n", [
      "--hub",
      "https://c:7443",
    ]);
    expect(config.hub?.urls).toEqual(["https://c:7443"]);
  });

  const refused: [string, () => Promise<unknown>, string][] = [
    [
      "an empty entry between commas",
      () => loadAgentConfig(["--hub", "https://a:7443,,https://b:7443"], {}, deps),
      'invalid flag --hub: "https://a:7443,,https://b:7443" has an empty entry (entry 2 of 3)',
    ],
    [
      "a trailing comma",
      () => loadAgentConfig(["--hub", "https://a:7443,"], {}, deps),
      'invalid flag --hub: "https://a:7443," has an empty entry (entry 2 of 2)',
    ],
    [
      "an empty value",
      () => loadAgentConfig(["--hub", " "], {}, deps),
      'invalid flag --hub: " " must name a hub URL',
    ],
    ["an empty YAML list", () => fromFile("hub: {url: []}\n"), "hub.url: [] must name a hub URL"],
    [
      "an empty entry in a YAML list",
      () => fromFile('hub: {url: ["https://a:7443", ""]}\n'),
      'hub.url: ["https://a:7443",""] has an empty entry (entry 2 of 2)',
    ],
    [
      "a scheme that is not ws, wss, http or https in a list",
      () => loadAgentConfig(["--hub", "https://a:7443,ftp://b"], {}, deps),
      'has an entry "ftp://b" that is not a ws://, wss://, http:// or https:// URL',
    ],
    [
      "an entry that is no URL",
      () => fromFile("hub: {url: [https://a:7443, hub-b]}\n"),
      'hub.url: ["https://a:7443","hub-b"] has an entry "hub-b" that is not a ws://',
    ],
    [
      "the same URL twice",
      () => loadAgentConfig(["--hub", "https://a:7443,https://a:7443"], {}, deps),
      'names one hub twice: "https://a:7443" and "https://a:7443"',
    ],
    [
      "one hub twice under two schemes and a trailing slash",
      () => fromFile("hub: {url: [https://Hub-A:7443, wss://hub-a:7443/]}\n"),
      'names one hub twice: "https://Hub-A:7443" and "wss://hub-a:7443/"',
    ],
    [
      "a list entry that is not a string",
      () => fromFile("hub: {url: [https://a:7443, 5]}\n"),
      "must be a hub URL, several separated by commas, or a list of them",
    ],
    [
      "a plain entry off loopback without hub.insecure",
      () => loadAgentConfig(["--hub", "http://127.0.0.1:7443,http://hub-b:7443"], {}, deps),
      'hub.url "http://hub-b:7443" is not TLS and not loopback',
    ],
  ];
  for (const [name, load, expected] of refused) {
    test(`refuses ${name}, naming the value`, async () => {
      const message = await errorOf(load());
      expect(message).toContain(expected);
      expect(message).not.toContain("\n");
    });
  }

  test("one host on two ports, or at two paths, is two hubs", async () => {
    const config = await loadAgentConfig(
      ["--hub", "https://hub:7443,https://hub:7444,https://hub:7443/b"],
      {},
      deps,
    );
    expect(config.hub?.urls).toEqual([
      "https://hub:7443",
      "https://hub:7444",
      "https://hub:7443/b",
    ]);
  });
});
