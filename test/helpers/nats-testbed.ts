/**
 * One real nats-server, a hub transport on it and agents started and stopped by name: the setup
 * most NATS transport tests share. An agent is the real Agent, or a MarkerAgent where a test needs
 * to make it crash or to list what it applied.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent } from "../../src/agent/agent.js";
import { type NatsAgent, type NatsAgentOptions, runNatsAgent } from "../../src/transport/nats/agent.js";
import {
  createNatsTransport,
  type NatsTransport,
  type NatsTransportOptions,
} from "../../src/transport/nats/hub.js";
import { MarkerAgent, type MarkerAgentOptions } from "./marker-agent.js";
import { startNatsServer, type TestNatsServer } from "./nats-server.js";
import { recordEvents } from "./transport-events.js";

export interface NatsTestBed {
  server: TestNatsServer;
  /** Temporary directory of the agents' roots and state. */
  dir: string;
  hub: NatsTransport;
  recorded: ReturnType<typeof recordEvents>;
  /** Starts (or restarts) `node`'s agent; returns its MarkerAgent to inspect what it applied. */
  startAgent(
    node: string,
    marker?: MarkerAgentOptions,
    loop?: Partial<Omit<NatsAgentOptions, "node" | "agent">>,
  ): Promise<MarkerAgent>;
  /** Starts (or restarts) `node`'s real Agent under `<dir>/<node>/{root,state}`; returns its root. */
  startRealAgent(node: string, loop?: Partial<Omit<NatsAgentOptions, "node" | "agent">>): Promise<string>;
  stopAgent(node: string): Promise<void>;
  dispose(): Promise<void>;
}

/** Starts a server and a hub transport (with `hub` options) recording into `recorded`. */
export async function startNatsTestBed(
  hub: Partial<NatsTransportOptions> = {},
  recorded = recordEvents(),
): Promise<NatsTestBed> {
  const server = await startNatsServer();
  const dir = mkdtempSync(join(tmpdir(), "steward-nats-bed-"));
  const transport = createNatsTransport({ servers: server.url, ...hub });
  await transport.start(recorded.events);
  const agents = new Map<string, NatsAgent>();
  const stopAgent = async (node: string) => {
    await agents.get(node)?.stop();
    agents.delete(node);
  };
  return {
    server,
    dir,
    hub: transport,
    recorded,
    startAgent: async (node, marker = {}, loop = {}) => {
      await stopAgent(node);
      const runs = new MarkerAgent(node, join(dir, node), marker);
      agents.set(node, await runNatsAgent({ servers: server.url, ...loop, node, agent: runs }));
      return runs;
    },
    startRealAgent: async (node, loop = {}) => {
      await stopAgent(node);
      const root = join(dir, node, "root");
      const agent = new Agent({ node, root, stateDir: join(dir, node, "state"), probeSettleMs: 0 });
      agents.set(node, await runNatsAgent({ servers: server.url, ...loop, node, agent }));
      return root;
    },
    stopAgent,
    dispose: async () => {
      for (const node of [...agents.keys()]) await stopAgent(node);
      await transport.stop();
      await server.dispose();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
