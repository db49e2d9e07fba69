// deploy/config.yaml, the agent config the .deb installs as /etc/fleetlet/config.yaml: the agent
// accepts it as shipped, and every default it shows ("#field: value") is the agent's real one.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadAgentConfig } from "../../../src/agent/config/index.ts";

const shipped = join(import.meta.dir, "../../../deploy/config.yaml");
const deps = { hostname: () => "device-17", cwd: "/" };

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "fleetlet-packaged-config-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The config the agent runs with when given `file`, without the name of the file itself. */
async function loaded(file: string): Promise<Record<string, unknown>> {
  const { configFile: _file, ...config } = await loadAgentConfig(["--config", file], {}, deps);
  return config;
}

/** The shipped text with its default lines ("#field: ...") uncommented. */
function uncommented(text: string): { text: string; fields: string[] } {
  const fields: string[] = [];
  const lines = text.split("\n").map((line) => {
    const m = /^#([A-Za-z]+):/.exec(line);
    if (m === null) return line;
    fields.push(m[1] ?? "");
    return line.slice(1);
  });
  return { text: lines.join("\n"), fields };
}

describe("the packaged agent config (deploy/config.yaml)", () => {
  test("loads as shipped and gives the agent's defaults", async () => {
    const defaults = await loaded(await writeFileIn(dir, "empty.yaml", ""));
    expect(await loaded(shipped)).toEqual(defaults);
  });

  test("every default it shows, uncommented, is the value the agent already uses", async () => {
    const { text, fields } = uncommented(await readFile(shipped, "utf8"));
    expect(fields.length).toBeGreaterThan(40);
    expect(new Set(fields).size).toBe(fields.length);
    const defaults = await loaded(await writeFileIn(dir, "empty.yaml", ""));
    expect(await loaded(await writeFileIn(dir, "uncommented.yaml", text))).toEqual(defaults);
  });
});

async function writeFileIn(folder: string, name: string, text: string): Promise<string> {
  const file = join(folder, name);
  await writeFile(file, text);
  return file;
}
