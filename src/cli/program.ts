/**
 * The `steward` program: global options, the commands it is given, and the mapping of errors to
 * exit codes: 0 fine, 1 problems found, 2 usage or environment error (3, converging or pending, is
 * a command's own answer). Every error is said one way — `steward: <what went wrong>` and, for a
 * command line commander refused, a hint naming the help to read — never commander's raw `error:`,
 * and a user's mistake is one line, never a stack trace (`--debug` shows it). Commands come as lazy factories, so a run loads only
 * the module of the command it runs (`steward agent ...` never loads hub code), and the single-file
 * agent can be built from the agent command alone.
 */
import { Command, CommanderError } from "commander";
import { EnvironmentError, isStewardError, type StewardError, UsageError } from "../model/errors.js";
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
const GLOBAL_OPTIONS_WITH_VALUE = new Set(["--state", "--store"]);

/**
 * Codes of errors that are the command line's or the environment's, not a finding: a wrong flag or
 * argument, a name that names nothing, a path that is not a repository.
 */
const USAGE_CODES: ReadonlySet<string> = new Set([
  "E_USAGE",
  "E_ENVIRONMENT",
  "E_NOT_FOUND",
  "E_SOURCE",
  "E_REVISION_NOT_FOUND",
]);

/** The exit code of one of our errors: 2 for usage and environment, 1 for a problem found. */
export function exitCodeOf(error: StewardError): number {
  return error instanceof UsageError || error instanceof EnvironmentError || USAGE_CODES.has(error.code)
    ? EXIT.usage
    : EXIT.problems;
}

/**
 * Makes `command` and its subcommands speak as steward does: output to `io`, errors thrown (not
 * exiting), and commander's `error: ...` said as `steward: ...` with the help to read after it.
 */
function speakPlainly(command: Command, io: CliIo, path: string): void {
  command
    .configureOutput({
      writeOut: io.stdout,
      writeErr: io.stderr,
      outputError: (text, write) => write(`steward: ${text.replace(/^error: /, "")}`),
    })
    .exitOverride()
    .showHelpAfterError(`(see \`${path} --help\`)`);
  for (const sub of command.commands) speakPlainly(sub, io, `${path} ${sub.name()}`);
}

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
    .option(
      "--store <location>",
      "the hub's store: sqlite:PATH (default: sqlite:<state>/hub.db) or postgres://USER@HOST[:PORT]/DB; also STEWARD_STORE",
    )
    .option("--debug", "show stack traces of errors");
  const globals = () => program.opts<GlobalOptions>();
  // Only the command being run is loaded; help (or an unknown command) needs them all.
  const named = requestedCommand(argv);
  const names = named !== undefined && Object.hasOwn(registry, named) ? [named] : Object.keys(registry);
  try {
    for (const name of names) program.addCommand((await registry[name]!())(io, globals, exit));
    speakPlainly(program, io, "steward");
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
      return exitCodeOf(error);
    }
    const message = error instanceof Error ? error.message : String(error);
    io.stderr(`steward: internal error: ${message}\n`);
    if (debug && error instanceof Error && error.stack) io.stderr(`${error.stack}\n`);
    else io.stderr("(run again with --debug for the stack trace, and report it)\n");
    return EXIT.usage;
  }
}
