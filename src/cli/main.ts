/**
 * The `steward` command line. This file only wires commands together and maps errors to exit codes:
 * 0 fine, 1 problems found, 2 usage or environment error. A user's mistake is one line, never a stack
 * trace (`--debug` shows it).
 *
 * Commands are loaded lazily: only the module of the command being run is imported, so `validate`
 * does not pay for the hub's dependencies (SQLite, NATS, SSH...). To add a command, write
 * `src/cli/NAME.ts` exporting a `CommandFactory` and add one line to COMMANDS.
 */
import { Command, CommanderError } from "commander";
import { isStewardError, UsageError } from "../model/errors.js";
import { type CliIo, EXIT, type GlobalOptions, processIo } from "./io.js";
import { VERSION } from "./version.js";

/** Builds a command; `exit` sets the process's exit code (0, 1 or 2, see EXIT). */
export type CommandFactory = (
  io: CliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
) => Command;

interface CommandEntry {
  name: string;
  /** One line for `steward --help`, shown without loading the command's module. */
  summary: string;
  load: () => Promise<CommandFactory>;
}

const COMMANDS: readonly CommandEntry[] = [
  {
    name: "validate",
    summary: "check a fleet repository: YAML, JSON Schema and cross-document rules, with file:line:column",
    load: async () => (await import("./validate.js")).validateCommand,
  },
];

/** Global options that take a value, so the word after them is not taken for the command's name. */
const GLOBAL_OPTIONS_WITH_VALUE = new Set(["--state"]);

/** The command `argv` runs (`steward [globals] NAME ...`, or `steward help NAME`), if any. */
function requestedCommand(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i]!;
    if (word === "--") return argv[i + 1];
    if (GLOBAL_OPTIONS_WITH_VALUE.has(word)) {
      i++;
      continue;
    }
    if (word.startsWith("-")) continue;
    return word === "help" ? argv[i + 1] : word;
  }
  return undefined;
}

/** Runs the CLI with `argv` (without `node` and the script) and returns the exit code. */
export async function main(argv: string[], io: CliIo = processIo()): Promise<number> {
  let exitCode: number = EXIT.ok;
  const exit = (code: number) => {
    exitCode = code;
  };
  const debug = argv.includes("--debug");
  try {
    const program = new Command("steward")
      .description(
        "Declarative GitOps delivery for hosts: a Git repo of YAML, a hub that reconciles, agents that apply and report.",
      )
      .version(VERSION, "-V, --version")
      .option("--json", "machine-readable output on stdout")
      .option("--state <dir>", "local state directory", ".steward")
      .option("--debug", "show stack traces of errors")
      .showHelpAfterError("(run with --help for usage)")
      .configureOutput({ writeOut: io.stdout, writeErr: io.stderr })
      .exitOverride();
    const globals = () => program.opts<GlobalOptions>();
    const requested = requestedCommand(argv);
    for (const entry of COMMANDS) {
      const command =
        entry.name === requested
          ? (await entry.load())(io, globals, exit)
          : new Command(entry.name).description(entry.summary);
      command
        .configureOutput({ writeOut: io.stdout, writeErr: io.stderr })
        .exitOverride()
        .showHelpAfterError("(run with --help for usage)");
      program.addCommand(command);
    }
    await program.parseAsync(argv, { from: "user" });
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help asked for, or the version: fine. Help shown because the command line was incomplete: usage.
      if (error.code === "commander.helpDisplayed" || error.code === "commander.version") return EXIT.ok;
      if (error.code === "commander.help" && error.exitCode === 0) return EXIT.ok;
      return EXIT.usage;
    }
    if (isStewardError(error)) {
      io.stderr(`steward: ${error.message}\n`);
      if (debug && error.stack) io.stderr(`${error.stack}\n`);
      return error instanceof UsageError || error.code === "E_USAGE" || error.code === "E_ENVIRONMENT"
        ? EXIT.usage
        : EXIT.problems;
    }
    const message = error instanceof Error ? error.message : String(error);
    io.stderr(`steward: internal error: ${message}\n`);
    if (debug && error instanceof Error && error.stack) io.stderr(`${error.stack}\n`);
    else io.stderr("(run again with --debug for the stack trace, and report it)\n");
    return EXIT.usage;
  }
}
