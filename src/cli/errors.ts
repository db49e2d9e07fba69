/**
 * An expected failure of a CLI command: printed as one line `fleetlet: <message>` with no stack
 * trace, and the process exits with `exitCode`.
 */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = "CliError";
  }
}

/** A command-line usage mistake (unknown flag, missing argument): exit code 2. */
export class UsageError extends CliError {
  constructor(message: string) {
    super(message, 2);
    this.name = "UsageError";
  }
}
