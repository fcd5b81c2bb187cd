#!/usr/bin/env node
// One agent process of the NATS benchmark: runs a real Agent and its NATS loop for each node it is
// given, each node with its own credentials, connection, root and state directory, so one process
// stands in for many hosts. Prints "ready" once every loop runs; stops on SIGTERM, and when the
// bench that started it is gone (killed, it cannot send SIGTERM).
// Usage: node bench/nats-agents.mjs '{"url":..., "dir":..., "credsDir":..., "nodes":[...]}'
// BENCH_AGENT=echo replaces the Agent by one that applies nothing and answers at once: what is left
// is the transport alone (the loop, the client, the server, the hub). With BENCH_APPLIED=1 it also
// appends each attempt it applies to <dir>/<node>/applied.
import { appendFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { Agent } from "../dist/agent/agent.js";
import { runNatsAgent } from "../dist/transport/nats/agent.js";

const { url, dir, credsDir, nodes, heartbeatIntervalMs } = JSON.parse(process.argv[2]);
// A bench killed outright leaves this process to its server's reconnects, loading the machine for
// the next measurement: once the parent is gone (this process handed to another), it exits.
const bench = process.ppid;
setInterval(() => {
  if (process.ppid !== bench) process.exit(0);
}, 1_000).unref();
/** Remembers generations (and hashes) and reports them converged; touches nothing. */
function echoAgent(node, applied) {
  const generations = new Map();
  const report = () => ({
    apiVersion: "steward.dev/v1",
    kind: "Report",
    node,
    takenAt: new Date().toISOString(),
    agent: { version: "echo" },
    instances: [...generations].map(([assignment, { generation, hash }]) => ({
      assignment,
      generation,
      hash,
      observedGeneration: generation,
      state: "running",
      converged: true,
      resources: [],
      probes: [],
    })),
  });
  return {
    async apply(bundle) {
      generations.set(bundle.spec.assignment, { generation: bundle.generation, hash: bundle.hash });
      const now = new Date().toISOString();
      const { attemptId, generation } = bundle;
      // BENCH_APPLIED: every attempt applied, for bench:failover to count generations applied twice.
      if (applied) appendFileSync(applied, `${bundle.spec.assignment}@${node} ${generation} ${attemptId}\n`);
      const result = {
        attemptId,
        node,
        assignment: bundle.spec.assignment,
        generation,
        outcome: "succeeded",
      };
      return { result: { ...result, resources: [], startedAt: now, finishedAt: now }, report: report() };
    },
    observe: async () => report(),
  };
}

const loops = [];
async function startLoop(node) {
  const root = join(dir, node, "root");
  const stateDir = join(dir, node, "state");
  mkdirSync(root, { recursive: true });
  mkdirSync(stateDir, { recursive: true });
  const agent =
    process.env.BENCH_AGENT === "echo"
      ? echoAgent(node, process.env.BENCH_APPLIED ? join(dir, node, "applied") : undefined)
      : new Agent({ node, stateDir, root, probeSettleMs: 0 });
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
// Started eight at a time: thousands of hosts do not connect one after another.
const queue = [...nodes];
await Promise.all(
  Array.from({ length: Math.min(8, queue.length) }, async () => {
    while (queue.length > 0) await startLoop(queue.shift());
  }),
);
process.stdout.write("ready\n");
process.on("SIGTERM", async () => {
  await Promise.all(loops.map((loop) => loop.stop()));
  process.exit(0);
});
