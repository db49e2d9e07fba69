// The architecture of an executable, from its ELF header: fleetlet is released as 64-bit
// little-endian Linux executables for x86-64 and AArch64 only.
import { open } from "node:fs/promises";
import type { Arch } from "./manifest.ts";

/** e_machine values (the ELF specification's EM_X86_64 and EM_AARCH64). */
const MACHINES: ReadonlyMap<number, Arch> = new Map([
  [62, "amd64"],
  [183, "arm64"],
]);

/** The header bytes read: e_ident (16), e_type (2), e_machine (2). */
const ELF_HEADER_BYTES = 20;

/** An executable fleetlet cannot say the architecture of. */
export class ElfError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ElfError";
  }
}

/** The architecture of the executable whose first bytes are `head`; `name` is for messages. */
export function archOfElfHeader(head: Uint8Array, name = "the file"): Arch {
  if (
    head.length < ELF_HEADER_BYTES ||
    head[0] !== 0x7f ||
    head[1] !== 0x45 ||
    head[2] !== 0x4c ||
    head[3] !== 0x46
  ) {
    throw new ElfError(`${name} is not an ELF executable`);
  }
  if (head[4] !== 2) throw new ElfError(`${name} is not a 64-bit ELF executable`);
  if (head[5] !== 1) throw new ElfError(`${name} is not a little-endian ELF executable`);
  const machine = (head[18] ?? 0) | ((head[19] ?? 0) << 8);
  const arch = MACHINES.get(machine);
  if (arch === undefined) {
    throw new ElfError(
      `${name} is an ELF executable for machine ${machine}, not amd64 (62) or arm64 (183)`,
    );
  }
  return arch;
}

/** The architecture of the executable at `path`. */
export async function archOfExecutable(path: string): Promise<Arch> {
  const file = await open(path, "r");
  try {
    const head = new Uint8Array(ELF_HEADER_BYTES);
    const { bytesRead } = await file.read(head, 0, ELF_HEADER_BYTES, 0);
    return archOfElfHeader(head.subarray(0, bytesRead), path);
  } finally {
    await file.close();
  }
}
