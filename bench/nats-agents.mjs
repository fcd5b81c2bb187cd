#!/usr/bin/env node
// One agent process of the NATS benchmark: runs a real Agent and its NATS loop for each node it is
// given, each node with its own credentials, connection, root and state directory, so one process
// stands in for many hosts. Prints "ready" once every loop runs; stops on SIGTERM.
// Usage: node bench/nats-agents.mjs '{"url":..., "dir":..., "credsDir":..., "nodes":[...]}'
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { Agent } from "../dist/agent/agent.js";
import { runNatsAgent } from "../dist/transport/nats/agent.js";

const { url, dir, credsDir, nodes, heartbeatIntervalMs } = JSON.parse(process.argv[2]);
const loops = [];
for (const node of nodes) {
  const root = join(dir, node, "root");
  const stateDir = join(dir, node, "state");
  mkdirSync(root, { recursive: true });
  mkdirSync(stateDir, { recursive: true });
  const agent = new Agent({ node, stateDir, root, probeSettleMs: 0 });
  loops.push(
    await runNatsAgent({
      servers: url,
      creds: join(credsDir, "nodes", `${node}.nk`),
      node,
      agent,
      heartbeatIntervalMs,
    }),
  );
}
process.stdout.write("ready\n");
process.on("SIGTERM", async () => {
  await Promise.all(loops.map((loop) => loop.stop()));
  process.exit(0);
});
