/**
 * The `steward` command line: which commands exist. Each is loaded only when it runs (see
 * program.ts), so start-up stays cheap: `steward agent ...` loads neither hub nor git code.
 */
import { type CliIo, processIo } from "./io.js";
import { type CommandRegistry, runProgram } from "./program.js";
import { VERSION } from "./version.js";

const COMMANDS: CommandRegistry = {
  validate: async () => (await import("./validate.js")).validateCommand,
  sync: async () => (await import("./sync.js")).syncCommand,
  plan: async () => (await import("./plan.js")).planCommand,
  rollback: async () => (await import("./rollback.js")).rollbackCommand,
  history: async () => (await import("./history.js")).historyCommand,
  agent: async () => (await import("./agent.js")).agentCommand,
  up: async () => (await import("./up.js")).upCommand,
  hub: async () => (await import("./hub.js")).hubCommand,
  status: async () => (await import("./status.js")).statusCommand,
  get: async () => (await import("./get.js")).getCommand,
  describe: async () => (await import("./describe.js")).describeCommand,
  drain: async () => (await import("./drain.js")).drainCommand,
  undrain: async () => (await import("./drain.js")).undrainCommand,
  tasks: async () => (await import("./tasks.js")).tasksCommand,
  rollout: async () => (await import("./rollout.js")).rolloutCommand,
  nats: async () => (await import("./nats.js")).natsCommand,
  secret: async () => (await import("./secret.js")).secretCommand,
  enrolments: async () => (await import("./enrolments.js")).enrolmentsCommand,
};

/** Runs the CLI with `argv` (without `node` and the script) and returns the exit code. */
export async function main(argv: string[], io: CliIo = processIo()): Promise<number> {
  return runProgram(argv, io, COMMANDS, VERSION);
}
