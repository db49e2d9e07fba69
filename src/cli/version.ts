import { buildInfo } from "../util/version.ts";

export function versionCommand(argv: string[]): number {
  const info = buildInfo();
  if (argv.includes("-o") && argv.includes("json")) {
    console.log(JSON.stringify(info, null, 2));
    return 0;
  }
  console.log(`fleetlet ${info.version}`);
  console.log(`commit:   ${info.commit}`);
  console.log(`bun:      ${info.bunVersion}`);
  console.log(`platform: ${info.platform}/${info.arch}`);
  return 0;
}
