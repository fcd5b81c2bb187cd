/**
 * A real fleet on one machine, for `steward up --transport nats` and the benchmark: a local
 * nats-server with a configuration and credentials from `steward nats config`, and one
 * `steward agent --nats` process per node, each with its own root (the node's filesystem) and
 * state directory. The hub is not started here: the caller starts it with `hubOptions()`.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { TransportName } from "../../hub/transport.js";
import { EnvironmentError } from "../../model/errors.js";
import { AGENT_RUNNING } from "./agent.js";
import { newUserSeed, planNatsConfig, readSeed, writeNatsConfig } from "./config.js";
import type { NatsTransportOptions } from "./hub.js";
import { NatsServerProcess, stopChild, tieToProcess } from "./server.js";

export interface LocalFleetOptions {
  /** Directory for the server's configuration and store, and each agent's root and state. */
  dir: string;
  nodes: string[];
  /** Port for the server; default a random free one. */
  port?: number;
  /** How to run `steward`; default this package's bin/steward.js under the running node. */
  steward?: string[];
  heartbeatIntervalMs?: number;
  /** Each line an agent prints (it logs to stderr); default: dropped. */
  onOutput?: (node: string, line: string) => void;
  /** Each node's root (its filesystem); default `<dir>/nodes/<node>/root`. */
  rootOf?: (node: string) => string;
  /** Each node's agent state directory; default `<dir>/nodes/<node>/state`. */
  stateOf?: (node: string) => string;
  /**
   * The transport name `hubOptions()` routes by (see NatsTransportOptions.name): `local` when the
   * fleet stands in for nodes declared `local`. Default `nats`.
   */
  routeAs?: TransportName;
  /** Called when an agent process exits while the fleet runs. */
  onExit?: (node: string, code: number | null) => void;
}

export interface LocalAgent {
  node: string;
  /** The node's filesystem: every absolute path P of a resource lands at root+P. */
  root: string;
  state: string;
  process: ChildProcess;
}

export interface LocalFleet {
  /** `nats://127.0.0.1:<port>`. */
  readonly url: string;
  /** The hub's credentials file. */
  readonly hubCreds: string;
  readonly server: NatsServerProcess;
  readonly agents: ReadonlyMap<string, LocalAgent>;
  /** Options for `createNatsTransport` that reach this fleet as the hub. */
  hubOptions(): NatsTransportOptions;
  /** Stops every agent (SIGTERM, then SIGKILL after 5 s), then the server. */
  stop(): Promise<void>;
}

/** The command that runs this package's CLI. */
export function stewardCommand(): string[] {
  return [process.execPath, fileURLToPath(new URL("../../../bin/steward.js", import.meta.url))];
}

/**
 * Writes the configuration, starts the server, then one agent process per node; resolves once every
 * agent runs (rejects, stopping what started, if one exits first).
 */
export async function startLocalFleet(options: LocalFleetOptions): Promise<LocalFleet> {
  const dir = resolve(options.dir);
  const busDir = join(dir, "nats");
  const plan = planNatsConfig(
    { dir: busDir, nodes: options.nodes },
    (path) => readSeed(busDir, path),
    newUserSeed,
  );
  writeNatsConfig(plan);
  const server = new NatsServerProcess({
    configFile: join(busDir, "nats-server.conf"),
    ...(options.port !== undefined ? { port: options.port } : {}),
  });
  await server.start();
  const steward = options.steward ?? stewardCommand();
  const agents = new Map<string, LocalAgent>();
  const running: Promise<void>[] = [];
  let stopping = false;
  for (const node of options.nodes) {
    const root = options.rootOf?.(node) ?? join(dir, "nodes", node, "root");
    const state = options.stateOf?.(node) ?? join(dir, "nodes", node, "state");
    mkdirSync(root, { recursive: true });
    mkdirSync(state, { recursive: true });
    const args = [
      ...steward.slice(1),
      "--state",
      state,
      "agent",
      "--nats",
      server.url,
      "--creds",
      join(busDir, "credentials", "nodes", `${node}.nk`),
      "--node",
      node,
      "--root",
      root,
      ...(options.heartbeatIntervalMs ? ["--heartbeat", `${options.heartbeatIntervalMs}ms`] : []),
    ];
    const child = spawn(steward[0] as string, args, { stdio: ["ignore", "pipe", "pipe"] });
    tieToProcess(child);
    let markRunning: () => void = () => {};
    running.push(
      new Promise<void>((resolveRunning, reject) => {
        markRunning = resolveRunning;
        child.once("exit", (code) =>
          reject(new EnvironmentError(`the agent of ${node} exited with code ${code} before it ran`)),
        );
      }),
    );
    // Whole lines only: a read from the pipe may end in the middle of one.
    const forward = (line: string) => {
      if (!line) return;
      if (line.includes(AGENT_RUNNING)) markRunning();
      options.onOutput?.(node, line);
    };
    for (const stream of [child.stdout, child.stderr])
      if (stream) createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY }).on("line", forward);
    child.once("exit", (code) => {
      if (!stopping) options.onExit?.(node, code);
    });
    agents.set(node, { node, root, state, process: child });
  }
  // Ready when every agent runs its loop, so the hub's first dispatches find them listening.
  try {
    await Promise.all(running);
  } catch (error) {
    stopping = true;
    await Promise.all([...agents.values()].map((agent) => stopChild(agent.process)));
    await server.stop();
    throw error;
  }
  return {
    url: server.url,
    hubCreds: join(busDir, "credentials", "hub.nk"),
    server,
    agents,
    hubOptions: () => ({
      servers: server.url,
      creds: join(busDir, "credentials", "hub.nk"),
      nodes: options.nodes,
      name: options.routeAs ?? "nats",
      ...(options.heartbeatIntervalMs ? { heartbeat: { intervalMs: options.heartbeatIntervalMs } } : {}),
    }),
    stop: async () => {
      stopping = true;
      await Promise.all([...agents.values()].map((agent) => stopChild(agent.process)));
      await server.stop();
    },
  };
}
