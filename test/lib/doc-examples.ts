// The examples of docs/deploy.md ("## Examples"), as a user copies them: each YAML block is one
// file, named by its first line ("# hello.yaml: ...").
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "./testbed.ts";

export interface DocExample {
  /** "hello.yaml" */
  file: string;
  text: string;
}

export function deployExamples(): DocExample[] {
  const doc = readFileSync(join(repoRoot, "docs/deploy.md"), "utf8");
  const section = doc.split(/^## /m).find((s) => s.startsWith("Examples\n")) ?? "";
  return [...section.matchAll(/^```yaml\n([\s\S]*?)^```$/gm)].map((m) => {
    const text = m[1] ?? "";
    const file = /^# (\S+\.yaml):/.exec(text)?.[1];
    if (file === undefined)
      throw new Error(`an example of docs/deploy.md has no "# NAME.yaml:" line`);
    return { file, text };
  });
}
