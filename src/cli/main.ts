/**
 * The `steward` command line. This file only wires commands together and maps errors to exit codes:
 * 0 fine, 1 problems found, 2 usage or environment error. A user's mistake is one line, never a stack
 * trace (`--debug` shows it).
 */
import { Command, CommanderError } from "commander";
import { isStewardError, UsageError } from "../model/errors.js";
import { historyCommand } from "./history.js";
import { type CliIo, EXIT, type GlobalOptions, processIo } from "./io.js";
import { planCommand } from "./plan.js";
import { rollbackCommand } from "./rollback.js";
import { syncCommand } from "./sync.js";
import { validateCommand } from "./validate.js";
import { VERSION } from "./version.js";

/** Runs the CLI with `argv` (without `node` and the script) and returns the exit code. */
export async function main(argv: string[], io: CliIo = processIo()): Promise<number> {
  let exitCode: number = EXIT.ok;
  const exit = (code: number) => {
    exitCode = code;
  };
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
  const commands: Command[] = [
    validateCommand(io, globals, exit),
    syncCommand(io, globals, exit),
    planCommand(io, globals, exit),
    rollbackCommand(io, globals, exit),
    historyCommand(io, globals, exit),
  ];
  for (const command of commands) {
    command
      .configureOutput({ writeOut: io.stdout, writeErr: io.stderr })
      .exitOverride()
      .showHelpAfterError("(run with --help for usage)");
    program.addCommand(command);
  }
  try {
    await program.parseAsync(argv, { from: "user" });
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (
        error.code === "commander.helpDisplayed" ||
        error.code === "commander.version" ||
        error.code === "commander.help"
      )
        return EXIT.ok;
      return EXIT.usage;
    }
    const debug = argv.includes("--debug");
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
