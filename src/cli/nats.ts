/**
 * `steward nats config --out DIR`: writes a nats-server configuration and credentials for a fleet on
 * NATS. By default in operator mode (src/transport/nats/operator.ts): no node is listed, each host
 * makes its own identity and the hub issues its user JWT once Git admits it. With `--static`, the
 * configuration of servers not run in operator mode (src/transport/nats/config.ts): one nkey per
 * node, made here, from `--node` and the `nats` nodes of a fleet repository (`--nodes-from`); a new
 * node then needs a server reload.
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
import { type Fsync, installedNatsServerVersion, parseFsync, planFsync } from "../transport/nats/fsync.js";
import {
  type OperatorConfigPlan,
  planOperatorConfig,
  readOperatorSeed,
  storedAccountJwt,
  writeOperatorConfig,
} from "../transport/nats/operator.js";
import { type CliIo, EXIT, type GlobalOptions } from "./io.js";
import { addOutputOptions, type OutputOptions, outputFormat, printResult } from "./output.js";

interface NatsConfigOptions {
  out: string;
  static?: boolean;
  node: string[];
  nodesFrom?: string;
  taskAgent: string[];
  listen: string;
  storeDir?: string;
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
  cluster?: string;
  clusterListen?: string;
  fsync?: string;
}

/**
 * `--fsync` as the plan takes it: parsed (a bad value is a usage error before anything is written),
 * then kept only if the nats-server here takes `sync_interval`; `warn` is told when it is left out
 * or could not be checked.
 */
function fsyncOf(
  options: NatsConfigOptions,
  env: NodeJS.ProcessEnv,
  warn: (text: string) => void,
): { fsync?: Fsync } {
  if (options.fsync === undefined) return {};
  const fsync = parseFsync(options.fsync);
  const decided = planFsync(fsync, installedNatsServerVersion(env));
  if (decided.warning) warn(`steward: warning: ${decided.warning}\n`);
  return decided.write ? { fsync } : {};
}

/** `--cluster N` as a number (members.ts says which are allowed); undefined without it. */
function clusterSize(options: NatsConfigOptions): number | undefined {
  if (options.cluster === undefined) return undefined;
  if (!/^\d+$/.test(options.cluster))
    throw new UsageError(`--cluster ${options.cluster} must be a number of servers, e.g. --cluster 3`);
  return Number(options.cluster);
}

/** The cluster flags as planNatsConfig and planOperatorConfig take them. */
function clusterOf(options: NatsConfigOptions): { cluster?: number; clusterListen?: string } {
  const size = clusterSize(options);
  if (options.clusterListen !== undefined && size === undefined)
    throw new UsageError("--cluster-listen only applies with --cluster N: add --cluster 3, or leave it out");
  return {
    ...(size !== undefined ? { cluster: size } : {}),
    ...(options.clusterListen !== undefined ? { clusterListen: options.clusterListen } : {}),
  };
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

/** The TLS files of the flags, resolved from `cwd`; undefined without any. */
function tlsOf(options: NatsConfigOptions, cwd: string): NatsConfigInput["tls"] {
  if (!options.tlsCa && !options.tlsCert && !options.tlsKey) return undefined;
  return {
    ...(options.tlsCa ? { ca: resolve(cwd, options.tlsCa) } : {}),
    ...(options.tlsCert ? { cert: resolve(cwd, options.tlsCert) } : {}),
    ...(options.tlsKey ? { key: resolve(cwd, options.tlsKey) } : {}),
  };
}

/**
 * Plans and writes the operator-mode configuration; returns the plan (seeds are in files only,
 * never printed). Nodes are refused: in operator mode each host makes its own key.
 */
export async function natsOperatorConfig(
  options: NatsConfigOptions,
  io: Pick<CliIo, "cwd" | "env" | "stderr">,
): Promise<OperatorConfigPlan> {
  const { cwd } = io;
  if (options.node.length > 0 || options.nodesFrom)
    throw new UsageError(
      `${options.node.length > 0 ? "--node" : "--nodes-from"} writes per-node credentials, which operator mode does not need: each host makes its own identity (\`steward agent enrol\`) and the hub issues its credentials once Git admits it — leave it out, or add --static for a server not run in operator mode`,
    );
  const dir = resolve(cwd, options.out);
  const tls = tlsOf(options, cwd);
  const plan = await planOperatorConfig(
    {
      dir,
      taskAgents: options.taskAgent.length > 0 ? options.taskAgent : ["tasks"],
      listen: options.listen,
      ...(options.storeDir ? { storeDir: resolve(cwd, options.storeDir) } : {}),
      ...(tls ? { tls } : {}),
      ...clusterOf(options),
      ...fsyncOf(options, io.env, io.stderr),
    },
    (path) => readOperatorSeed(dir, path),
    (account) => storedAccountJwt(dir, account),
  );
  writeOperatorConfig(plan);
  return plan;
}

/** Plans and writes the static configuration (`--static`); returns the plan (seeds are in files only, never printed). */
export async function natsConfig(
  options: NatsConfigOptions,
  io: Pick<CliIo, "cwd" | "env" | "stderr">,
): Promise<NatsConfigPlan> {
  const { cwd } = io;
  const fsync = fsyncOf(options, io.env, io.stderr);
  const dir = resolve(cwd, options.out);
  const nodes = [...options.node];
  if (options.nodesFrom) nodes.push(...(await natsNodesOf(resolve(cwd, options.nodesFrom))));
  const input: NatsConfigInput = {
    dir,
    nodes,
    taskAgents: options.taskAgent.length > 0 ? options.taskAgent : ["tasks"],
    listen: options.listen,
    ...(options.storeDir ? { storeDir: resolve(cwd, options.storeDir) } : {}),
    ...clusterOf(options),
    ...fsync,
  };
  const tls = tlsOf(options, cwd);
  if (tls) input.tls = tls;
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
      "write a nats-server configuration in operator mode (hosts admitted in Git connect without a reload; --static: per-node credentials made here) whose permissions confine each node to its own subjects",
    )
    .requiredOption("--out <dir>", "directory to write nats-server.conf, credentials/ and keys/ into")
    .option(
      "--static",
      "for a server not run in operator mode: users listed in the configuration, an nkey per node made here (a new node needs a server reload)",
    )
    .option("--node <name>", "with --static: a node to write credentials for (repeatable)", collect, [])
    .option(
      "--nodes-from <repo>",
      "with --static: also every node of this fleet repository with `transport: nats`",
    )
    .option("--task-agent <name>", "a task agent identity (repeatable; default `tasks`)", collect, [])
    .option("--listen <host:port>", "address the server listens on", "127.0.0.1:4222")
    .option(
      "--store-dir <dir>",
      "JetStream store directory (default <out>/jetstream; with --cluster, one nats-N/ below it per server)",
    )
    .option(
      "--cluster <n>",
      "write a cluster of n servers (3 or more) on consecutive ports from --listen, routed to each other: nats-1.conf .. nats-n.conf",
    )
    .option(
      "--cluster-listen <host:port>",
      "with --cluster: the first server's route address; the others take the next ports (default the --listen host, port 6222)",
    )
    .option(
      "--fsync <always|duration>",
      "how often JetStream syncs its store to disk: `always` (each write before its ack) or an interval such as 10s (the server's default is 2m); written for nats-server 2.10 and later, left out with a warning for an older one here",
    )
    .option("--tls-ca <file>", "CA to verify clients' certificates with (clients then need one)")
    .option("--tls-cert <file>", "the server's TLS certificate")
    .option("--tls-key <file>", "the server's TLS key");
  addOutputOptions(config).action(async (options: NatsConfigOptions & OutputOptions) => {
    if (!options.static) {
      const plan = await natsOperatorConfig(options, io);
      await printOperatorPlan(io, outputFormat(options, globals()), plan);
      exit(EXIT.ok);
      return;
    }
    const plan = await natsConfig(options, io);
    const summary = {
      dir: plan.dir,
      config: `${plan.dir}/${plan.servers[0]?.file}`,
      storeDir: plan.storeDir,
      listen: plan.listen,
      ...clusterSummary(plan),
      identities: plan.identities,
    };
    await printResult(io, outputFormat(options, globals()), summary, () => {
      const lines = plan.servers.map(
        (server) => `wrote ${plan.dir}/${server.file} (${serverWords(server)}store ${server.storeDir})`,
      );
      for (const identity of plan.identities)
        lines.push(
          `  ${identity.role.padEnd(10)} ${identity.name.padEnd(20)} ${identity.credentials}${identity.created ? "" : " (kept)"}`,
        );
      lines.push(
        ...startLines(plan),
        `run an agent:     steward agent --nats ${urlsOf(plan)} --creds ${plan.dir}/credentials/nodes/NODE.nk --node NODE`,
      );
      return `${lines.join("\n")}\n`;
    });
    exit(EXIT.ok);
  });
  return nats;
}

/** What `nats config` says it wrote in operator mode, and how to start each part. */
async function printOperatorPlan(
  io: CliIo,
  format: ReturnType<typeof outputFormat>,
  plan: OperatorConfigPlan,
): Promise<void> {
  const summary = {
    mode: "operator",
    dir: plan.dir,
    config: `${plan.dir}/${plan.servers[0]?.file}`,
    storeDir: plan.storeDir,
    resolverDir: plan.resolverDir,
    listen: plan.listen,
    ...clusterSummary(plan),
    operator: plan.operator,
    account: plan.account,
    credentials: plan.credentials,
    issuer: plan.issuerFile,
  };
  const url = urlsOf(plan);
  await printResult(io, format, summary, () => {
    const lines = plan.servers.map(
      (server) =>
        `wrote ${plan.dir}/${server.file} (operator mode: ${serverWords(server)}store ${server.storeDir}, accounts kept in ${server.resolverDir})`,
    );
    for (const credential of plan.credentials)
      lines.push(
        `  ${credential.role.padEnd(10)} ${credential.name.padEnd(20)} ${credential.credentials}${credential.created ? "" : " (kept)"}${credential.role === "enrol" ? "  shared by hosts asking to join" : ""}`,
      );
    lines.push(
      `  ${"issuer".padEnd(10)} ${"hub".padEnd(20)} ${plan.issuerFile}  the hub's signing keys: keep it on the hub's machine`,
      `  keys/ holds the operator's and the accounts' keys: keep them with the operator`,
      ...startLines(plan),
      `run the hub:      steward hub --nats ${url} --nats-creds ${plan.dir}/credentials/hub.creds --nats-issuer ${plan.dir}/${plan.issuerFile}`,
      `add a host:       steward agent enrol --nats ${url} --token-file enrol.creds --node NAME   (on the host, with a copy of credentials/enrol.creds)`,
    );
    return `${lines.join("\n")}\n`;
  });
}

type Planned = Pick<NatsConfigPlan, "dir" | "servers">;

/** The servers of a cluster in the JSON summary; nothing for a single server (its summary is unchanged). */
function clusterSummary(plan: Planned): { servers?: object[] } {
  if (plan.servers.length === 1) return {};
  return {
    servers: plan.servers.map((server) => ({
      name: server.name,
      config: `${plan.dir}/${server.file}`,
      listen: server.listen,
      clusterListen: server.cluster?.listen,
      storeDir: server.storeDir,
      resolverDir: server.resolverDir,
    })),
  };
}

/** `listen A, ` and, in a cluster, the server's name and route address. */
function serverWords(server: Planned["servers"][number]): string {
  const cluster = server.cluster ? `server ${server.name}, routes on ${server.cluster.listen}, ` : "";
  return `${cluster}listen ${server.listen}, `;
}

/** Every server's client URL, comma-separated: what the hub and agents are given in a cluster. */
function urlsOf(plan: Planned): string {
  return plan.servers.map((server) => `nats://${server.listen}`).join(",");
}

function startLines(plan: Planned): string[] {
  if (plan.servers.length === 1)
    return [`start the server: nats-server -c ${plan.dir}/${plan.servers[0]?.file}`];
  return [
    `start the servers (each on its own disk in production; all of them, the cluster needs a majority to run JetStream):`,
    ...plan.servers.map((server) => `  nats-server -c ${plan.dir}/${server.file}`),
  ];
}
