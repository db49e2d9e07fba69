import { describe, expect, test } from "bun:test";
import { parseArgs } from "../../../src/cli/args.ts";
import { UsageError } from "../../../src/cli/errors.ts";

const specs = {
  namespace: { type: "string", short: "n" },
  follow: { type: "boolean", short: "f" },
  previous: { type: "boolean", short: "p" },
  tail: { type: "int" },
} as const;

describe("parseArgs()", () => {
  test("reads --flag value, --flag=value, -x value, -xvalue and grouped boolean shorthands", () => {
    expect(parseArgs(["pod", "--namespace", "a", "--tail=5"], specs)).toEqual({
      flags: { namespace: "a", tail: 5 },
      positionals: ["pod"],
      rest: undefined,
    });
    expect(parseArgs(["-nkube", "-fp", "x"], specs).flags).toEqual({
      namespace: "kube",
      follow: true,
      previous: true,
    });
    expect(parseArgs(["-n", "b", "-n=c"], specs).flags.namespace).toBe("c");
    expect(parseArgs(["--follow=false", "--tail", "-1"], specs).flags).toEqual({
      follow: false,
      tail: -1,
    });
  });

  test("everything after -- is the rest, even flags", () => {
    expect(parseArgs(["web", "-n", "x", "--", "ls", "-la"], specs)).toEqual({
      flags: { namespace: "x" },
      positionals: ["web"],
      rest: ["ls", "-la"],
    });
  });

  test.each([
    [["--nope"], "unknown flag: --nope"],
    [["-x"], "unknown shorthand flag: 'x' in -x"],
    [["-fx"], "unknown shorthand flag: 'x' in -fx"],
    [["--namespace"], "flag needs an argument: --namespace"],
    [["-n"], "flag needs an argument: 'n' in -n"],
    [["--tail", "ten"], 'invalid argument "ten" for "--tail" flag: not an integer'],
    [["--follow=maybe"], 'invalid argument "maybe" for "--follow" flag: want true or false'],
  ])("refuses %j with a UsageError: %s", (argv, message) => {
    let err: unknown;
    try {
      parseArgs(argv, specs);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UsageError);
    expect((err as UsageError).message).toBe(message);
    expect((err as UsageError).exitCode).toBe(2);
  });
});
