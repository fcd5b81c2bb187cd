/**
 * `steward agent apply --bundle FILE|- [--root DIR] [--state DIR] [--node NAME] [--json]` applies one
 * attempt's bundle once and prints the result and a fresh report (the SSH transport runs exactly
 * `steward agent apply --bundle - --json`); exit 0 when the attempt succeeded, 1 when it failed,
 * 2 for a bundle that cannot be applied at all. `steward agent observe` prints a report and changes
 * nothing; exit 0 when every instance is as desired, 1 when one is not (drift, a failed resource). The agent code is imported only when a subcommand runs.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { Command } from "commander";
import { EnvironmentError, isStewardError } from "../model/errors.js";
import type { AgentReply, AttemptResult, Report } from "../model/generated.js";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";
import { addNatsAgent } from "./nats-agent.js";
import { addOutputOptions, type OutputOptions, outputFormat, printResult } from "./output.js";
import { runProgram } from "./program.js";

/** CliIo, plus standard input for `--bundle -` (tests pass their own). */
export type AgentCliIo = CliIo & { stdin?: () => Promise<string> };

interface AgentCommandOptions {
  root?: string;
  node?: string;
}

function readStdin(): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const chunks: Buffer[] = [];
    process.stdin.on("data", (chunk: Buffer) => chunks.push(chunk));
    process.stdin.on("end", () => resolvePromise(Buffer.concat(chunks).toString("utf8")));
    process.stdin.on("error", reject);
  });
}

/** The agent's state directory: `--state` when given, else `.steward/agent`. */
function stateDir(command: Command, io: CliIo): string {
  let program: Command = command;
  while (program.parent) program = program.parent;
  const explicit = program.getOptionValueSource("state") === "cli";
  const state = program.opts<GlobalOptions>().state;
  return resolve(io.cwd, explicit ? state : `${state}/agent`);
}

const QUIET = new Set(["unchanged", "skipped"]);

/** A readable summary of an attempt's result. */
export function formatResult(result: AttemptResult): string {
  const lines = [
    `attempt ${result.attemptId} ${result.assignment}@${result.node} generation ${result.generation}: ${result.outcome}${result.duplicate ? " (already handled: earlier result replayed, nothing ran)" : ""}${result.failureClass ? ` (${result.failureClass}, ${result.reason})` : ""}`,
  ];
  if (result.message) lines.push(`  ${result.message}`);
  let quiet = 0;
  for (const outcome of result.resources) {
    if (QUIET.has(outcome.action)) {
      quiet++;
      continue;
    }
    const detail = outcome.blockedBy
      ? ` (blocked by ${outcome.blockedBy})`
      : outcome.message
        ? `: ${outcome.message}`
        : "";
    lines.push(`  ${outcome.action.padEnd(9)} ${outcome.kind} ${outcome.name}${detail}`);
  }
  if (quiet > 0) lines.push(`  ${quiet} resource${quiet === 1 ? "" : "s"} already as desired`);
  return `${lines.join("\n")}\n`;
}

/** A readable summary of a report: per instance, what is not as desired and failing probes. */
export function formatReport(report: Report): string {
  const lines = [
    `node ${report.node} at ${report.takenAt}: ${report.instances.length} instance${report.instances.length === 1 ? "" : "s"}`,
  ];
  for (const instance of report.instances) {
    lines.push(
      `  ${instance.assignment}: generation ${instance.generation}${instance.observedGeneration !== undefined && instance.observedGeneration !== instance.generation ? ` (holds ${instance.observedGeneration})` : ""}, ${instance.state}, ${instance.converged ? "converged" : "not converged"}`,
    );
    for (const resource of instance.resources) {
      if (resource.status === "ok") continue;
      const why = resource.blockedBy
        ? `blocked by ${resource.blockedBy}`
        : [resource.reason, resource.message ?? resource.diff?.join("; ")].filter(Boolean).join(": ");
      const counters =
        resource.counters.consecutiveFailures > 0
          ? ` [${resource.counters.consecutiveFailures} failures in a row${resource.counters.everApplied ? ", applied before" : ", never applied"}]`
          : "";
      lines.push(
        `    ${resource.status.padEnd(8)} ${resource.kind} ${resource.name}${why ? `: ${why}` : ""}${counters}`,
      );
    }
    for (const probe of instance.probes)
      if (!probe.ok) lines.push(`    probe    ${probe.name} fails: ${probe.message}`);
  }
  return `${lines.join("\n")}\n`;
}

/** Prints a one-line error for a bundle that cannot be applied (exit 2), or rethrows. */
function refuse(error: unknown, io: CliIo, exit: (code: number) => void): void {
  if (isStewardError(error) && (error.code === "E_BUNDLE" || error.code === "E_WRONG_NODE")) {
    io.stderr(`steward: ${error.message}\n`);
    exit(EXIT.usage);
    return;
  }
  throw error;
}

/** The `agent` command and its `apply` and `observe` subcommands. */
export function agentCommand(
  io: AgentCliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
): Command {
  const agent = new Command("agent").description("the agent of one host: apply a bundle, observe and report");

  agent
    .command("apply")
    .description("apply one attempt's bundle once; print the attempt's result and a fresh report")
    .requiredOption("--bundle <file>", "the bundle (JSON), or - to read it from standard input")
    .option("--root <dir>", "map every absolute path P of a resource to DIR+P")
    .option("--node <name>", "this node's name (default: the node the bundle is for)")
    .action(async (_local: AgentCommandOptions & { bundle: string }, command: Command) => {
      const options = command.optsWithGlobals<AgentCommandOptions & { bundle: string }>();
      const source = options.bundle === "-" ? "standard input" : options.bundle;
      let text: string;
      if (options.bundle === "-") text = await (io.stdin ?? readStdin)();
      else {
        try {
          text = readFileSync(resolve(io.cwd, options.bundle), "utf8");
        } catch (error) {
          throw new EnvironmentError(
            `cannot read bundle ${options.bundle}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
          );
        }
      }
      const [{ Agent }, { parseBundle }] = await Promise.all([
        import("../agent/agent.js"),
        import("../agent/bundle.js"),
      ]);
      let reply: AgentReply;
      try {
        const bundle = await parseBundle(text, source);
        const agentOptions = { node: options.node ?? bundle.spec.node, stateDir: stateDir(command, io) };
        reply = await new Agent(
          options.root ? { ...agentOptions, root: resolve(io.cwd, options.root) } : agentOptions,
        ).apply(bundle);
      } catch (error) {
        refuse(error, io, exit);
        return;
      }
      io.stdout(
        globals().json
          ? `${JSON.stringify(reply)}\n`
          : `${formatResult(reply.result)}${formatReport(reply.report)}`,
      );
      exit(reply.result.outcome === "succeeded" ? EXIT.ok : EXIT.problems);
    });

  agent
    .command("observe")
    .description(
      "print a full report of every instance this agent holds, read from the system; changes nothing",
    )
    .option("--root <dir>", "map every absolute path P of a resource to DIR+P")
    .option("--node <name>", "this node's name (default: the one this state directory applied for)")
    .action(async (_local: AgentCommandOptions, command: Command) => {
      const options = command.optsWithGlobals<AgentCommandOptions>();
      const [{ Agent }, { AgentStore }, { hostname }] = await Promise.all([
        import("../agent/agent.js"),
        import("../agent/store.js"),
        import("node:os"),
      ]);
      const dir = stateDir(command, io);
      const node = options.node ?? new AgentStore(dir).node() ?? hostname();
      const agentOptions = { node, stateDir: dir };
      const report = await new Agent(
        options.root ? { ...agentOptions, root: resolve(io.cwd, options.root) } : agentOptions,
      ).observe();
      io.stdout(globals().json ? `${JSON.stringify(report)}\n` : formatReport(report));
      // As the README's conventions say: 1 when something is not as desired (drift, a failure).
      exit(report.instances.every((instance) => instance.converged) ? EXIT.ok : EXIT.problems);
    });

  addOutputOptions(
    agent
      .command("identity")
      .description(
        "make (once) this host's identity — an nkey for NATS and an age key for secrets — and print its public part for the Node document's spec.identity",
      ),
  ).action(async (_local: OutputOptions, command: Command) => {
    const options = command.optsWithGlobals<OutputOptions>();
    const { ensureHostIdentity, identityFiles } = await import("../agent/identity.js");
    const dir = stateDir(command, io);
    const { identity, created } = await ensureHostIdentity(dir);
    // The private parts stay where they are: only the public identity is ever printed.
    io.stderr(
      `steward: ${created ? "made" : "kept"} this host's identity in ${identityFiles(dir).dir} (private keys, mode 0600; they never leave this host)\n`,
    );
    await printResult(
      io,
      outputFormat(options, globals()),
      identity,
      () =>
        `# add to this host's Node document (nodes/NAME.yaml):\nspec:\n  identity:\n    nkey: ${identity.nkey}\n    age: ${identity.age}\n`,
    );
    exit(EXIT.ok);
  });

  return addNatsAgent(agent, io, (command) => stateDir(command, io));
}

/**
 * A `steward` program with only the agent command: the entry of the single-file agent that a host
 * runs with plain `node` (`node steward-agent.mjs agent apply --bundle - --json`).
 */
export function agentMain(argv: string[], io: AgentCliIo, version: string): Promise<number> {
  return runProgram(argv, io, { agent: async () => agentCommand }, version);
}
