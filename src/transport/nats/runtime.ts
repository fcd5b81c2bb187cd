/**
 * The NATS transports a hub runtime runs (`src/cli/hub.ts` calls this; it is the only place that
 * wires adapters together):
 * - `steward hub --nats URL [--nats-creds FILE] [--nats-tls-*]`: nodes declared `nats` are reached
 *   over that bus, next to the local transport;
 * - `steward up --transport nats`: a local nats-server and one agent process per node declared
 *   `local`, standing in for the in-process agent (the transport routes as `local`).
 */
import { join } from "node:path";
import type { Transport } from "../../hub/transport.js";
import type { NatsTls } from "./connect.js";
import { type LocalFleet, startLocalFleet } from "./fleet.js";
import { createNatsTransport } from "./hub.js";
import type { NatsLog } from "./log.js";

/** How a hub runtime uses NATS. */
export type NatsSetup =
  | { kind: "bus"; servers: string; creds?: string; tls?: NatsTls }
  | {
      kind: "local-fleet";
      heartbeatIntervalMs?: number;
      /** How to run `steward` for the agents; default this package's bin/steward.js. */
      steward?: string[];
    };

export interface NatsRuntimeContext {
  /** Names of the nodes declared `local` in the served revision. */
  localNodes: string[];
  /** Where a local node applies (`<root>/<node>`), or undefined for the fleet's default. */
  rootOf(node: string): string | undefined;
  /** The hub's state directory; a local fleet lives in `<dir>/fleet`. */
  stateDir: string;
  log: NatsLog;
}

export interface NatsRuntime {
  transport: Transport;
  /** True when the transport takes the local nodes (the in-process agent must not run). */
  replacesLocal: boolean;
  /** Stops what was started here (the local fleet), after the hub stopped the transport. */
  stop(): Promise<void>;
}

/** Starts what the setup needs and returns the transport to hand to the Hub. */
export async function startNatsRuntime(setup: NatsSetup, context: NatsRuntimeContext): Promise<NatsRuntime> {
  if (setup.kind === "bus")
    return {
      transport: createNatsTransport({
        servers: setup.servers,
        log: context.log,
        ...(setup.creds ? { creds: setup.creds } : {}),
        ...(setup.tls ? { tls: setup.tls } : {}),
      }),
      replacesLocal: false,
      stop: async () => {},
    };
  const fleet: LocalFleet = await startLocalFleet({
    dir: join(context.stateDir, "fleet"),
    nodes: context.localNodes,
    routeAs: "local",
    rootOf: (node) => context.rootOf(node) ?? join(context.stateDir, "fleet", "nodes", node, "root"),
    ...(setup.heartbeatIntervalMs ? { heartbeatIntervalMs: setup.heartbeatIntervalMs } : {}),
    ...(setup.steward ? { steward: setup.steward } : {}),
    onOutput: (node, line) => context.log.info({ node }, line),
    onExit: (node, code) => context.log.error({ node, code }, "agent process exited"),
  });
  return {
    transport: createNatsTransport({ ...fleet.hubOptions(), log: context.log }),
    replacesLocal: true,
    stop: () => fleet.stop(),
  };
}
