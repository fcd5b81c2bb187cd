/**
 * `steward agent --nats URL --creds FILE|--nkey FILE --node NAME`: the agent as a long-lived process
 * pulling its node's attempts over NATS JetStream. Credentials the server refuses, or another
 * identity's, end it with one line (exit 2) before it does anything. Kept apart from `nats.ts` (server configuration) so the agent
 * command loads no repository or configuration code; the agent and the bus client load on use.
 */
import { resolve } from "node:path";
import type { Command } from "commander";
import { parseDuration } from "../model/duration.js";
import { UsageError } from "../model/errors.js";
import type { CliIo } from "./io.js";

interface NatsAgentCliOptions {
  nats?: string;
  creds?: string;
  nkey?: string;
  node?: string;
  root?: string;
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
  heartbeat: string;
}

/**
 * Adds `steward agent --nats URL --creds FILE --node NAME [--root DIR] [--tls-*]` to the agent
 * command: a long-lived agent that pulls its node's attempts over JetStream until SIGTERM or SIGINT.
 * `stateDir` resolves the agent's state directory as the agent's other subcommands do.
 */
export function addNatsAgent(agent: Command, io: CliIo, stateDir: (command: Command) => string): Command {
  return agent
    .option(
      "--nats <url>",
      "run as a long-lived agent pulling this node's attempts from the NATS server at URL",
    )
    .option(
      "--creds <file>",
      "with --nats: this node's credentials, an nkey seed or a .creds file (from `steward nats config`)",
    )
    .option(
      "--nkey <file>",
      "with --nats: this node's nkey seed file, as the nats CLI takes it (instead of --creds)",
    )
    .option("--node <name>", "this node's name")
    .option("--root <dir>", "map every absolute path P of a resource to DIR+P")
    .option("--tls-ca <file>", "with --nats: CA that signed the server's certificate")
    .option("--tls-cert <file>", "with --nats: client certificate, when the server verifies clients")
    .option("--tls-key <file>", "with --nats: the client certificate's key")
    .option("--heartbeat <duration>", "with --nats: heartbeat interval", "5s")
    .action(async (options: NatsAgentCliOptions, command: Command) => {
      if (!options.nats) {
        command.help();
        return;
      }
      if (!options.node)
        throw new UsageError("--node NAME is required with --nats: the node this agent runs as");
      let heartbeatIntervalMs: number;
      try {
        heartbeatIntervalMs = parseDuration(options.heartbeat);
      } catch (error) {
        throw new UsageError(`--heartbeat ${options.heartbeat}: ${(error as Error).message}`);
      }
      if (options.creds && options.nkey)
        throw new UsageError("--creds and --nkey both give this node's credentials: pass one of them");
      const [{ Agent }, { runNatsAgent, AGENT_RUNNING }, { readNatsCredentials }, { pino }] =
        await Promise.all([
          import("../agent/agent.js"),
          import("../transport/nats/agent.js"),
          import("../transport/nats/connect.js"),
          import("pino"),
        ]);
      // Read before anything runs, so a wrong file is the only thing said.
      const credentialsFlag = options.nkey ? "--nkey" : "--creds";
      const credentialsFile = options.nkey ?? options.creds;
      const credentials = credentialsFile
        ? readNatsCredentials(resolve(io.cwd, credentialsFile), credentialsFlag)
        : undefined;
      const log = pino(
        { name: "steward-agent", level: io.env.STEWARD_LOG_LEVEL ?? "info" },
        pino.destination(2),
      );
      const agentOptions = { node: options.node, stateDir: stateDir(command) };
      const runtime = new Agent(
        options.root ? { ...agentOptions, root: resolve(io.cwd, options.root) } : agentOptions,
      );
      const tls = {
        ...(options.tlsCa ? { ca: resolve(io.cwd, options.tlsCa) } : {}),
        ...(options.tlsCert ? { cert: resolve(io.cwd, options.tlsCert) } : {}),
        ...(options.tlsKey ? { key: resolve(io.cwd, options.tlsKey) } : {}),
      };
      const loop = await runNatsAgent({
        servers: options.nats,
        node: options.node,
        agent: runtime,
        heartbeatIntervalMs,
        log,
        tls,
        ...(credentials ? { credentials } : {}),
      });
      log.info({ node: options.node, server: options.nats }, AGENT_RUNNING);
      const signal = await new Promise<string>((resolveSignal) => {
        process.once("SIGTERM", () => resolveSignal("SIGTERM"));
        process.once("SIGINT", () => resolveSignal("SIGINT"));
      });
      log.info({ node: options.node, signal }, "stopping");
      await loop.stop();
    });
}
