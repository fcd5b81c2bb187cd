/**
 * The `steward` program: global options, the commands it is given, and the mapping of errors to
 * exit codes: 0 fine, 1 problems found, 2 usage or environment error. A user's mistake is one line,
 * never a stack trace (`--debug` shows it). Commands come as lazy factories, so a run loads only
 * the module of the command it runs (`steward agent ...` never loads hub code), and the single-file
 * agent can be built from the agent command alone.
 */
import { Command, CommanderError } from "commander";
import { isStewardError, UsageError } from "../model/errors.js";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";

/** Builds one command; `exit` sets the process exit code. */
export type CommandFactory = (
  io: CliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
) => Command;

/** Command name → loader of its factory. */
export type CommandRegistry = Readonly<Record<string, () => Promise<CommandFactory>>>;

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

/** Runs the program with `argv` (without `node` and the script) and returns the exit code. */
export async function runProgram(
  argv: string[],
  io: CliIo,
  registry: CommandRegistry,
  version: string,
): Promise<number> {
  let exitCode: number = EXIT.ok;
  const exit = (code: number) => {
    exitCode = code;
  };
  const program = new Command("steward")
    .description(
      "Declarative GitOps delivery for hosts: a Git repo of YAML, a hub that reconciles, agents that apply and report.",
    )
    .version(version, "-V, --version")
    .option("--json", "machine-readable output on stdout")
    .option("--state <dir>", "local state directory", ".steward")
    .option("--debug", "show stack traces of errors")
    .showHelpAfterError("(run with --help for usage)")
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr })
    .exitOverride();
  const globals = () => program.opts<GlobalOptions>();
  // Only the command being run is loaded; help (or an unknown command) needs them all.
  const named = requestedCommand(argv);
  const names = named !== undefined && Object.hasOwn(registry, named) ? [named] : Object.keys(registry);
  try {
    for (const name of names) {
      const command = (await registry[name]!())(io, globals, exit);
      command
        .configureOutput({ writeOut: io.stdout, writeErr: io.stderr })
        .exitOverride()
        .showHelpAfterError("(run with --help for usage)");
      for (const sub of command.commands)
        sub.configureOutput({ writeOut: io.stdout, writeErr: io.stderr }).exitOverride().showHelpAfterError();
      program.addCommand(command);
    }
    await program.parseAsync(argv, { from: "user" });
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help asked for, or the version: fine. Help shown because the command line was incomplete
      // (`steward` alone, a command group without its subcommand): a usage error.
      if (error.code === "commander.helpDisplayed" || error.code === "commander.version") return EXIT.ok;
      if (error.code === "commander.help" && error.exitCode === 0) return EXIT.ok;
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
