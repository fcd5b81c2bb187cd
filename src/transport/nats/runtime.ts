/**
 * `steward up --transport nats`: a local nats-server and one agent process per node declared
 * `local`, standing in for the in-process agent (the transport routes as `local`). `src/cli/hub.ts`
 * calls this; `steward hub --nats` needs nothing of it (see flags.ts).
 */
import { join } from "node:path";
import type { HubBus, TaskEvent } from "../../hub/bus.js";
import type { Transport } from "../../hub/transport.js";
import { agentStateDir } from "../local.js";
import { type LocalFleet, startLocalFleet } from "./fleet.js";
import { createNatsTransport, hubBusOf } from "./hub.js";
import type { NatsLog } from "./log.js";

/** How the local fleet is run. */
export interface LocalFleetSetup {
  heartbeatIntervalMs?: number;
  /** How to run `steward` for the agents; default this package's bin/steward.js. */
  steward?: string[];
}

export interface LocalFleetContext {
  /** Names of the nodes declared `local` in the served revision. */
  localNodes: string[];
  /** Where a local node applies (`<root>/<node>`), or undefined for the fleet's default. */
  rootOf(node: string): string | undefined;
  /** The hub's state directory; the fleet lives in `<dir>/fleet`. */
  stateDir: string;
  log: NatsLog;
  /**
   * Where an agent's JSON log lines go as they are (the hub's log file); without it they are
   * logged through `log`. Lines that are not JSON (a crash's stack) go through `log` either way.
   */
  agentLog?: (line: string) => void;
  /** Records task agents' claims and resolutions (the hub's `recordTaskEvent`). */
  onTaskEvent?: (event: TaskEvent) => Promise<void>;
}

export interface LocalFleetRuntime {
  /** Takes the place of the local transport (it routes as `local`). */
  transport: Transport;
  /** Conditions and tasks on the same bus. */
  bus: HubBus;
  /** Stops the agents and the server, after the hub stopped the transport. */
  stop(): Promise<void>;
}

/** True when `line` is one JSON object (a log line of pino's), false for any other output. */
function isJsonObject(line: string): boolean {
  if (!line.startsWith("{")) return false;
  try {
    const value: unknown = JSON.parse(line);
    return typeof value === "object" && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

/** Starts the server and the agents; resolves once every agent runs. */
export async function startLocalFleetRuntime(
  setup: LocalFleetSetup,
  context: LocalFleetContext,
): Promise<LocalFleetRuntime> {
  const fleet: LocalFleet = await startLocalFleet({
    dir: join(context.stateDir, "fleet"),
    nodes: context.localNodes,
    routeAs: "local",
    rootOf: (node) => context.rootOf(node) ?? join(context.stateDir, "fleet", "nodes", node, "root"),
    // The node's agent keeps its state where the in-process agent keeps it: one record of the
    // services it started and the one-shots it ran, whichever way `steward up` runs the node.
    stateOf: (node) => agentStateDir(context.stateDir, node),
    ...(setup.heartbeatIntervalMs ? { heartbeatIntervalMs: setup.heartbeatIntervalMs } : {}),
    ...(setup.steward ? { steward: setup.steward } : {}),
    onOutput: (node, line) => {
      // The agent logs JSON lines of its own: kept as they are, not as a string inside the hub's `msg`.
      if (context.agentLog && isJsonObject(line)) context.agentLog(line);
      else context.log.info({ node }, line);
    },
    onExit: (node, code) => context.log.error({ node, code }, "agent process exited"),
  });
  const transport = createNatsTransport({
    ...fleet.hubOptions(),
    log: context.log,
    ...(context.onTaskEvent ? { onTaskEvent: context.onTaskEvent } : {}),
  });
  return { transport, bus: hubBusOf(transport), stop: () => fleet.stop() };
}
