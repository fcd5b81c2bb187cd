/**
 * A real cluster of nats-servers on loopback, from the configurations `steward nats config --static
 * --cluster N` writes, or with `operator` those of operator mode (`nats config --cluster N`): on
 * consecutive free client and route ports, started together and waited for
 * until JetStream has a meta leader. Each server can be killed (SIGKILL) and started again on its
 * port and store. A missing binary fails loudly, naming `apt-get install -y nats-server`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import {
  type NatsConfigPlan,
  newUserSeed,
  planNatsConfig,
  readSeed,
  writeNatsConfig,
} from "../../src/transport/nats/config.js";
import {
  planOperatorConfig,
  readOperatorSeed,
  writeOperatorConfig,
} from "../../src/transport/nats/operator.js";
import { locateNatsServer, NatsServerProcess } from "../../src/transport/nats/server.js";

export interface TestNatsCluster {
  /** The output directory of `steward nats config` (configs, credentials/, stores). */
  dir: string;
  plan: Pick<NatsConfigPlan, "dir" | "servers">;
  servers: NatsServerProcess[];
  /** Every server's URL, comma-separated, as `--nats` takes them. */
  urls: string;
  /** Absolute credentials file of the hub, a node (static only) or the viewer. */
  creds(role: "hub" | "viewer" | { node: string }): string;
  /** SIGKILLs server `index` (0-based) and waits for it to exit. */
  kill(index: number): Promise<void>;
  /** Starts server `index` again on its port and store. */
  start(index: number): Promise<void>;
  dispose(): Promise<void>;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** `count` consecutive ports free on 127.0.0.1, from a random base. */
export async function consecutiveFreePorts(count: number): Promise<number> {
  for (let tries = 0; tries < 50; tries++) {
    const base = 20_000 + Math.floor(Math.random() * 40_000);
    let free = true;
    for (let port = base; port < base + count && free; port++) free = await portFree(port);
    if (free) return base;
  }
  throw new Error(`no ${count} consecutive free ports on 127.0.0.1`);
}

/** Writes a `--static --cluster size` configuration for `nodes` and starts every server of it. */
export async function startNatsCluster(options: {
  /** Nodes to write static credentials for; none in operator mode. */
  nodes: string[];
  size?: number;
  operator?: boolean;
}): Promise<TestNatsCluster> {
  const binary = locateNatsServer();
  const size = options.size ?? 3;
  const dir = mkdtempSync(join(tmpdir(), "steward-nats-cluster-"));
  const base = await consecutiveFreePorts(2 * size);
  const layout = {
    dir,
    cluster: size,
    listen: `127.0.0.1:${base}`,
    clusterListen: `127.0.0.1:${base + size}`,
  };
  let plan: TestNatsCluster["plan"];
  if (options.operator) {
    const operator = await planOperatorConfig(layout, (path) => readOperatorSeed(dir, path));
    writeOperatorConfig(operator);
    plan = operator;
  } else {
    const configured = planNatsConfig(
      { ...layout, nodes: options.nodes },
      (path) => readSeed(dir, path),
      newUserSeed,
    );
    writeNatsConfig(configured);
    plan = configured;
  }
  const servers = plan.servers.map(
    (server) =>
      new NatsServerProcess({
        binary,
        configFile: join(dir, server.file),
        port: Number(server.listen.split(":")[1]),
      }),
  );
  const urls = plan.servers.map((server) => `nats://${server.listen}`).join(",");
  const suffix = options.operator ? "creds" : "nk";
  const creds = (role: "hub" | "viewer" | { node: string }) =>
    join(
      dir,
      typeof role === "string" ? `credentials/${role}.${suffix}` : `credentials/nodes/${role.node}.nk`,
    );
  const cluster: TestNatsCluster = {
    dir,
    plan,
    servers,
    urls,
    creds,
    kill: async (index) => {
      const pid = servers[index]?.pid;
      if (pid === undefined) return;
      process.kill(pid, "SIGKILL");
      await servers[index]?.stop();
    },
    start: async (index) => {
      await servers[index]?.start();
    },
    dispose: async () => {
      for (const server of servers) await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await Promise.all(servers.map((server) => server.start()));
    await untilJetStreamClustered(urls, creds("hub"), size);
  } catch (error) {
    await cluster.dispose();
    throw error;
  }
  return cluster;
}

/** Waits until JetStream on the cluster answers with every server as a peer of its meta group. */
async function untilJetStreamClustered(urls: string, hubCreds: string, size: number): Promise<void> {
  const { credentialsAuthenticator } = await import("../../src/transport/nats/connect.js");
  const nc = await connect({ servers: urls.split(","), authenticator: credentialsAuthenticator(hubCreds) });
  try {
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        const jsm = await jetstreamManager(nc, { timeout: 2_000 });
        // A throwaway stream of `size` replicas is placed only once every server is a JetStream peer.
        await jsm.streams.add({ name: "CLUSTER_PROBE", subjects: ["cluster.probe"], num_replicas: size });
        await jsm.streams.delete("CLUSTER_PROBE");
        return;
      } catch (error) {
        if (Date.now() > deadline)
          throw new Error(`JetStream did not form on ${size} clustered servers: ${(error as Error).message}`);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
  } finally {
    await nc.close();
  }
}
