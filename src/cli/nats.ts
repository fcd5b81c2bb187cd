/**
 * `steward nats config --out DIR`: writes a nats-server configuration and per-identity credentials
 * for a fleet on NATS (see src/transport/nats/config.ts). Nodes come from `--node` and from the
 * `nats` nodes of a fleet repository (`--nodes-from`).
 */
import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { Command } from "commander";
import { EnvironmentError, UsageError } from "../model/errors.js";
import { directorySource, loadRepo } from "../model/load.js";
import {
  type NatsConfigInput,
  type NatsConfigPlan,
  newUserSeed,
  planNatsConfig,
  readSeed,
  writeNatsConfig,
} from "../transport/nats/config.js";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";
import { addOutputOptions, type OutputOptions, outputFormat, printResult } from "./output.js";

interface NatsConfigOptions {
  out: string;
  node: string[];
  nodesFrom?: string;
  taskAgent: string[];
  listen: string;
  storeDir?: string;
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
}

/** The names of the nodes a fleet repository reaches over NATS. */
export async function natsNodesOf(repo: string): Promise<string[]> {
  if (!existsSync(repo) || !statSync(repo).isDirectory())
    throw new EnvironmentError(
      `--nodes-from ${repo} is not a directory: give the path of a fleet repository`,
    );
  const loaded = await loadRepo(directorySource(repo));
  if (!loaded.ok || !loaded.desired)
    throw new UsageError(
      `--nodes-from ${repo} is not a valid fleet repository: run \`steward validate ${repo}\``,
    );
  return [...loaded.desired.nodes.values()]
    .filter((doc) => doc.value.spec.transport === "nats")
    .map((doc) => doc.value.metadata.name);
}

/** Plans and writes the configuration; returns the plan (seeds are in files only, never printed). */
export async function natsConfig(options: NatsConfigOptions, cwd: string): Promise<NatsConfigPlan> {
  const dir = resolve(cwd, options.out);
  const nodes = [...options.node];
  if (options.nodesFrom) nodes.push(...(await natsNodesOf(resolve(cwd, options.nodesFrom))));
  const input: NatsConfigInput = {
    dir,
    nodes,
    taskAgents: options.taskAgent.length > 0 ? options.taskAgent : ["tasks"],
    listen: options.listen,
    ...(options.storeDir ? { storeDir: resolve(cwd, options.storeDir) } : {}),
  };
  if (options.tlsCa || options.tlsCert || options.tlsKey)
    input.tls = {
      ...(options.tlsCa ? { ca: resolve(cwd, options.tlsCa) } : {}),
      ...(options.tlsCert ? { cert: resolve(cwd, options.tlsCert) } : {}),
      ...(options.tlsKey ? { key: resolve(cwd, options.tlsKey) } : {}),
    };
  const plan = planNatsConfig(input, (path) => readSeed(dir, path), newUserSeed);
  writeNatsConfig(plan);
  return plan;
}

const collect = (value: string, previous: string[]) => [...previous, value];

export function natsCommand(io: CliIo, globals: () => GlobalOptions, exit: (code: number) => void): Command {
  const nats = new Command("nats").description("NATS JetStream bus: server configuration and credentials");
  const config = nats
    .command("config")
    .description(
      "write a nats-server configuration (JetStream, store, accounts) and per-node credentials whose permissions confine each node to its own subjects",
    )
    .requiredOption("--out <dir>", "directory to write nats-server.conf and credentials/ into")
    .option("--node <name>", "a node to write credentials for (repeatable)", collect, [])
    .option("--nodes-from <repo>", "also every node of this fleet repository with `transport: nats`")
    .option("--task-agent <name>", "a task agent identity (repeatable; default `tasks`)", collect, [])
    .option("--listen <host:port>", "address the server listens on", "127.0.0.1:4222")
    .option("--store-dir <dir>", "JetStream store directory (default <out>/jetstream)")
    .option("--tls-ca <file>", "CA to verify clients' certificates with (clients then need one)")
    .option("--tls-cert <file>", "the server's TLS certificate")
    .option("--tls-key <file>", "the server's TLS key");
  addOutputOptions(config).action(async (options: NatsConfigOptions & OutputOptions) => {
    const plan = await natsConfig(options, io.cwd);
    const summary = {
      dir: plan.dir,
      config: `${plan.dir}/nats-server.conf`,
      storeDir: plan.storeDir,
      listen: plan.listen,
      identities: plan.identities,
    };
    await printResult(io, outputFormat(options, globals()), summary, () => {
      const lines = [`wrote ${plan.dir}/nats-server.conf (listen ${plan.listen}, store ${plan.storeDir})`];
      for (const identity of plan.identities)
        lines.push(
          `  ${identity.role.padEnd(10)} ${identity.name.padEnd(20)} ${identity.credentials}${identity.created ? "" : " (kept)"}`,
        );
      lines.push(
        `start the server: nats-server -c ${plan.dir}/nats-server.conf`,
        `run an agent:     steward agent --nats nats://${plan.listen} --creds ${plan.dir}/credentials/nodes/NODE.nk --node NODE`,
      );
      return `${lines.join("\n")}\n`;
    });
    exit(EXIT.ok);
  });
  return nats;
}
