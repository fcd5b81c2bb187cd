/**
 * `steward agent apply --bundle FILE|- [--root DIR] [--state DIR] [--node NAME] [--json]` applies one
 * attempt's bundle once and prints the result and a fresh report (the SSH transport runs exactly
 * `steward agent apply --bundle - --json`); exit 0 when the attempt succeeded, 1 when it failed,
 * 2 for a bundle that cannot be applied at all. `steward agent observe` prints a report and changes
 * nothing; exit 0 when every instance is as desired, 1 when one is not (drift, a failed resource).
 * `identity` makes and prints the host's identity, `enrol` asks the hub to admit the host,
 * `install`/`uninstall` run it as a systemd service, `checksum` prints the single-file agent's
 * sha256. The state directory is `--state`, else /var/lib/steward for root and
 * ~/.local/state/steward otherwise (src/agent/state.ts); an older agent's `.steward/agent` is moved
 * there first. The agent code is imported only when a subcommand runs.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { Command } from "commander";
import { parseDuration } from "../model/duration.js";
import { EnvironmentError, isStewardError, UsageError } from "../model/errors.js";
import type { AgentReply, AttemptResult, Report } from "../model/generated.js";
import { addInstallCommands } from "./agent-install.js";
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

/**
 * The agent's state directory: `--state` when given, else `configured` (a config file's), else the
 * default for this user. An older agent's state in `.steward/agent` of the working directory is
 * moved into it first (once), and `say` tells.
 */
async function stateDir(
  command: Command,
  io: CliIo,
  say: (line: string) => void = (line) => io.stderr(`steward: ${line}\n`),
  configured?: string,
): Promise<string> {
  let program: Command = command;
  while (program.parent) program = program.parent;
  const explicit = program.getOptionValueSource("state") === "cli";
  const { adoptLegacyState, defaultStateDir, describeAdoption } = await import("../agent/state.js");
  const dir = explicit
    ? resolve(io.cwd, program.opts<GlobalOptions>().state)
    : (configured ?? defaultStateDir(io.env));
  const adoption = await adoptLegacyState(io.cwd, dir);
  if (adoption) say(describeAdoption(adoption));
  return dir;
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
        const agentOptions = {
          node: options.node ?? bundle.spec.node,
          stateDir: await stateDir(command, io),
        };
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
      const dir = await stateDir(command, io);
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
    const dir = await stateDir(command, io);
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

  addEnrolCommand(agent, io, globals, exit);
  addInstallCommands(agent, io, globals, exit);
  agent
    .command("checksum")
    .description(
      "print the sha256 of the single-file agent this steward serves and uploads (check a copy fetched from the hub's GET /agent/steward-agent.mjs against it)",
    )
    .action(async () => {
      const { loadAgentArtifact } = await import("../transport/ssh/artifact.js");
      const artifact = loadAgentArtifact();
      io.stdout(
        globals().json
          ? `${JSON.stringify({ file: artifact.file, sha256: artifact.sha256, version: artifact.version })}\n`
          : `${artifact.sha256}  steward-agent.mjs\n`,
      );
      exit(EXIT.ok);
    });
  return addNatsAgent(agent, io, (command, say, configured) => stateDir(command, io, say, configured));
}

interface EnrolOptions extends OutputOptions {
  nats?: string;
  node?: string;
  tokenFile?: string;
  labels?: string;
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
}

/**
 * `steward agent enrol --nats URL --token-file FILE --node NAME [--labels k=v,...]`: makes the
 * host's identity (once), asks the hub to admit it, says each answer while it waits, and once Git
 * admits it keeps the credentials the hub issued in the state directory (exit 0). Refused: exit 2
 * with the hub's words.
 */
function addEnrolCommand(
  agent: Command,
  io: CliIo,
  globals: () => GlobalOptions,
  exit: (code: number) => void,
): void {
  const enrol = agent
    .command("enrol")
    .description(
      "ask the hub to admit this host as a node, with the shared enrolment credential; wait until Git admits it (a person approves: `steward enrolments approve`), then keep its credentials",
    )
    .option("--nats <url>", "the NATS server (required)")
    .option("--token-file <file>", "the shared enrolment credential, credentials/enrol.creds (required)")
    .option("--node <name>", "the node name to ask for (required)")
    .option("--labels <k=v,...>", "the labels to ask for, e.g. role=web,zone=eu")
    .option("--tls-ca <file>", "CA that signed the NATS server's certificate")
    .option("--tls-cert <file>", "client certificate, when the server verifies clients")
    .option("--tls-key <file>", "the client certificate's key");
  addOutputOptions(enrol).action(async (_local: EnrolOptions, command: Command) => {
    // The agent command knows --nats, --node, --token-file... too: they arrive as its options.
    const options = command.optsWithGlobals<EnrolOptions>();
    for (const [flag, value, what] of [
      ["--nats", options.nats, "URL: the NATS server"],
      ["--token-file", options.tokenFile, "FILE: the shared enrolment credential (credentials/enrol.creds)"],
      ["--node", options.node, "NAME: the node name this host asks for"],
    ] as const)
      if (!value) throw new UsageError(`${flag} ${what} is required`);
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(options.node!))
      throw new UsageError(
        `--node ${options.node} is not a DNS label: use lower-case letters, digits and "-" (e.g. web-3)`,
      );
    const { parseLabels, tlsFlags } = await import("./agent-config.js");
    const { enrolHost } = await import("./nats-agent.js");
    const tls = tlsFlags(options, io.cwd);
    const dir = await stateDir(command, io);
    const say = (_fields: object, message: string) => io.stderr(`steward: ${message}\n`);
    const credentials = await enrolHost({
      servers: options.nats!,
      node: options.node!,
      tokenFile: resolve(io.cwd, options.tokenFile!),
      labels: parseLabels(options.labels),
      stateDir: dir,
      log: { debug() {}, info: say, warn: say, error: say },
      ...(Object.keys(tls).length > 0 ? { tls } : {}),
      ...(io.env.STEWARD_ENROL_INTERVAL ? { intervalMs: parseDuration(io.env.STEWARD_ENROL_INTERVAL) } : {}),
    });
    await printResult(
      io,
      outputFormat(options, globals()),
      {
        node: options.node,
        status: "admitted",
        publicKey: credentials.publicKey,
        credentials: credentials.file,
        stateDir: dir,
      },
      () =>
        `admitted as node "${options.node}": the credentials the hub issued are in ${credentials.file}\nrun it as a service: steward agent install --nats ${options.nats} --node ${options.node}${dir !== "/var/lib/steward" ? ` (add --state ${dir} to keep this state directory)` : ""}\n`,
    );
    exit(EXIT.ok);
  });
}

/**
 * A `steward` program with only the agent command: the entry of the single-file agent that a host
 * runs with plain `node` (`node steward-agent.mjs agent apply --bundle - --json`).
 */
export function agentMain(argv: string[], io: AgentCliIo, version: string): Promise<number> {
  return runProgram(argv, io, { agent: async () => agentCommand }, version);
}
