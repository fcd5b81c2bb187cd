/**
 * `steward agent --nats URL --node NAME [--creds FILE|--nkey FILE|--token-file FILE]` (or `--config
 * FILE`, as the installed service runs it): the agent as a long-lived process pulling its node's
 * attempts over NATS JetStream. Its credentials are, in this order: the file given; the user JWT the
 * hub issued this host (kept in its state directory); or, with the shared enrolment credential, the
 * ones it asks the hub for — waiting, and saying so in its log, until Git admits it. Credentials the
 * server refuses, or another identity's, end it with one line (exit 2) before it does anything; a
 * connection the server closes for its credentials (revoked: the node removed from Git) ends it the
 * same way. Kept apart from `nats.ts` (server configuration) so the agent command loads no repository
 * or configuration code; the agent and the bus client load on use.
 */
import { resolve } from "node:path";
import type { Command } from "commander";
import { parseDuration } from "../model/duration.js";
import { EnvironmentError, UsageError } from "../model/errors.js";
import type { NatsCredentials, NatsTls } from "../transport/nats/connect.js";
import type { NatsLog } from "../transport/nats/log.js";
import { type AgentConfig, hostFacts, parseLabels, readAgentConfig, tlsFlags } from "./agent-config.js";
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
  heartbeat?: string;
  config?: string;
  tokenFile?: string;
  labels?: string;
}

/** Resolves the agent's state directory (an older agent's state moved into it first); `configured` from --config. */
export type StateDirResolver = (
  command: Command,
  say: (line: string) => void,
  configured?: string,
) => Promise<string>;

/** Where and as whom to ask the hub for this host's credentials. */
export interface EnrolSettings {
  servers: string;
  node: string;
  tokenFile: string;
  labels: Record<string, string>;
  tls?: NatsTls;
  stateDir: string;
  intervalMs?: number;
  log: NatsLog;
  signal?: AbortSignal;
}

/**
 * Makes the host's identity if it has none, asks the hub to admit it with the shared enrolment
 * credential until it does, and keeps the user JWT it issued in the state directory. Resolves with
 * the host's credentials; rejects with EnrolmentRefusedError when the hub refuses.
 */
export async function enrolHost(settings: EnrolSettings): Promise<NatsCredentials> {
  const [
    { ensureHostIdentity, identityFiles, readNkeySeed, writeIssuedJwt },
    enrolment,
    { readNatsCredentials },
    { AGENT_VERSION },
  ] = await Promise.all([
    import("../agent/identity.js"),
    import("../transport/nats/enrolment.js"),
    import("../transport/nats/connect.js"),
    import("../agent/version.js"),
  ]);
  const enrolCredentials = readNatsCredentials(settings.tokenFile, "--token-file");
  const { identity } = await ensureHostIdentity(settings.stateDir);
  const seed = readNkeySeed(settings.stateDir)!;
  const { jwt } = await enrolment.askToJoin({
    servers: settings.servers.split(",").map((s) => s.trim()),
    credentials: enrolCredentials,
    node: settings.node,
    labels: settings.labels,
    identity,
    seed,
    facts: hostFacts(AGENT_VERSION),
    log: settings.log,
    ...(settings.intervalMs !== undefined ? { intervalMs: settings.intervalMs } : {}),
    ...(settings.tls ? { tls: settings.tls } : {}),
    ...(settings.signal ? { signal: settings.signal } : {}),
  });
  writeIssuedJwt(settings.stateDir, jwt);
  return enrolment.issuedCredentials({
    jwtFile: identityFiles(settings.stateDir).jwt,
    jwt,
    seed,
    node: settings.node,
  });
}

/** The credentials the hub issued this host earlier, from its state directory; undefined when it has none. */
export async function storedCredentials(
  stateDir: string,
  node: string,
): Promise<NatsCredentials | undefined> {
  const [{ identityFiles, readIssuedJwt, readNkeySeed }, { issuedCredentials }] = await Promise.all([
    import("../agent/identity.js"),
    import("../transport/nats/enrolment.js"),
  ]);
  const jwt = readIssuedJwt(stateDir);
  const seed = readNkeySeed(stateDir);
  if (!jwt || !seed) return undefined;
  // A JWT for another node (the host given another name) is not this node's: ask again.
  try {
    const claims = JSON.parse(Buffer.from(jwt.split(".")[1] ?? "", "base64url").toString("utf8")) as {
      name?: string;
    };
    if (claims.name !== `steward node ${node}`) return undefined;
  } catch {
    return undefined;
  }
  return issuedCredentials({ jwtFile: identityFiles(stateDir).jwt, jwt, seed, node });
}

/** A duration flag, as a usage error when it is not one. */
function durationFlag(flag: string, value: string): number {
  try {
    return parseDuration(value);
  } catch (error) {
    throw new UsageError(`${flag} ${value}: ${(error as Error).message}`);
  }
}

/**
 * Adds `steward agent --nats URL --node NAME [--creds FILE|--token-file FILE] [--config FILE]
 * [--root DIR] [--tls-*]` to the agent command: a long-lived agent that pulls its node's attempts
 * over JetStream until SIGTERM or SIGINT. `stateDir` resolves the agent's state directory as the
 * agent's other subcommands do.
 */
export function addNatsAgent(agent: Command, io: CliIo, stateDir: StateDirResolver): Command {
  return agent
    .option(
      "--nats <url>",
      "run as a long-lived agent pulling this node's attempts from the NATS server at URL",
    )
    .option(
      "--creds <file>",
      "with --nats: this node's credentials, an nkey seed or a .creds file (from `steward nats config --static`)",
    )
    .option(
      "--nkey <file>",
      "with --nats: this node's nkey seed file, as the nats CLI takes it (instead of --creds)",
    )
    .option(
      "--token-file <file>",
      "with --nats: the shared enrolment credential (credentials/enrol.creds): ask the hub for this host's credentials when it has none, and wait until Git admits it",
    )
    .option("--labels <k=v,...>", "with --token-file: the labels to ask for")
    .option("--config <file>", "read these settings from a JSON file (what `steward agent install` writes)")
    .option("--node <name>", "this node's name")
    .option("--root <dir>", "map every absolute path P of a resource to DIR+P")
    .option("--tls-ca <file>", "with --nats: CA that signed the server's certificate")
    .option("--tls-cert <file>", "with --nats: client certificate, when the server verifies clients")
    .option("--tls-key <file>", "with --nats: the client certificate's key")
    .option("--heartbeat <duration>", "with --nats: heartbeat interval (default 5s)")
    .action(async (options: NatsAgentCliOptions, command: Command) => {
      const config: Partial<AgentConfig> = options.config
        ? readAgentConfig(resolve(io.cwd, options.config))
        : {};
      const servers = options.nats ?? config.nats;
      if (!servers) {
        command.help();
        return;
      }
      const node = options.node ?? config.node;
      if (!node) throw new UsageError("--node NAME is required with --nats: the node this agent runs as");
      const heartbeatIntervalMs = durationFlag("--heartbeat", options.heartbeat ?? config.heartbeat ?? "5s");
      if (options.creds && options.nkey)
        throw new UsageError("--creds and --nkey both give this node's credentials: pass one of them");
      const file = (path: string | undefined) => (path ? resolve(io.cwd, path) : undefined);
      const tokenFile = file(options.tokenFile) ?? config.tokenFile;
      const labels = options.labels !== undefined ? parseLabels(options.labels) : (config.labels ?? {});
      const [{ Agent }, { runNatsAgent, AGENT_RUNNING }, connect, { pino }] = await Promise.all([
        import("../agent/agent.js"),
        import("../transport/nats/agent.js"),
        import("../transport/nats/connect.js"),
        import("pino"),
      ]);
      // Read before anything runs, so a wrong file is the only thing said.
      const credentialsFlag = options.nkey ? "--nkey" : "--creds";
      const credentialsFile = file(options.nkey ?? options.creds) ?? config.creds;
      let credentials = credentialsFile
        ? connect.readNatsCredentials(credentialsFile, credentialsFlag)
        : undefined;
      if (tokenFile) connect.readNatsCredentials(tokenFile, "--token-file");
      const log = pino(
        { name: "steward-agent", level: io.env.STEWARD_LOG_LEVEL ?? "info" },
        pino.destination(2),
      );
      const state = await stateDir(command, (line) => log.warn({ node }, line), config.state);
      const tlsFiles: NatsTls = { ...config.tls, ...tlsFlags(options, io.cwd) };
      const enrol = (): Promise<NatsCredentials> =>
        enrolHost({
          servers,
          node,
          tokenFile: tokenFile!,
          labels,
          stateDir: state,
          log,
          ...(Object.keys(tlsFiles).length > 0 ? { tls: tlsFiles } : {}),
          ...(io.env.STEWARD_ENROL_INTERVAL
            ? { intervalMs: durationFlag("STEWARD_ENROL_INTERVAL", io.env.STEWARD_ENROL_INTERVAL) }
            : {}),
        });
      credentials ??= await storedCredentials(state, node);
      if (!credentials && tokenFile) credentials = await enrol();
      const root = options.root ? resolve(io.cwd, options.root) : config.root;
      const agentOptions = { node, stateDir: state };
      const runtime = new Agent(root ? { ...agentOptions, root } : agentOptions);
      const start = (using: NatsCredentials | undefined) =>
        runNatsAgent({
          servers: servers.split(",").map((s) => s.trim()),
          node,
          agent: runtime,
          heartbeatIntervalMs,
          log,
          tls: tlsFiles,
          ...(using ? { credentials: using } : {}),
        });
      let loop: Awaited<ReturnType<typeof start>>;
      try {
        loop = await start(credentials);
      } catch (error) {
        // Credentials the hub issued and the server no longer takes: ask again (a re-admitted host).
        if (!(error instanceof connect.NatsAuthorizationError) || !credentials?.refusal || !tokenFile)
          throw error;
        log.warn(
          { node, error: error.message },
          "the NATS server refused this host's stored credentials; asking the hub again",
        );
        credentials = await enrol();
        loop = await start(credentials);
      }
      log.info({ node, server: servers }, AGENT_RUNNING);
      const ended = await new Promise<{ signal: string } | { closed: Error | undefined }>((resolveEnd) => {
        process.once("SIGTERM", () => resolveEnd({ signal: "SIGTERM" }));
        process.once("SIGINT", () => resolveEnd({ signal: "SIGINT" }));
        void loop.connection.closed().then((closed) => resolveEnd({ closed: closed ?? undefined }));
      });
      if ("signal" in ended) {
        log.info({ node, signal: ended.signal }, "stopping");
        await loop.stop();
        return;
      }
      await loop.stop().catch(() => undefined);
      const why = ended.closed?.message ?? "closed";
      const message = `the NATS server closed node "${node}"'s connection (${why})${credentials?.refusal ? `: ${credentials.refusal}` : ""}`;
      log.error({ node, error: why }, message);
      throw new EnvironmentError(message, { code: "E_NATS_CLOSED", data: { node } });
    });
}
