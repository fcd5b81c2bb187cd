#!/usr/bin/env node
// The NATS transport under a fleet: a real nats-server (configuration and per-node credentials from
// `steward nats config`), 200 agents in 4 processes (a real Agent each, own connection, root and
// state), and the hub's transport in this process. One "commit" changes every instance at once.
// Measured: commit → instance converged (a report showing the new generation, converged), p50 and
// p99 over instances; then how fast the hub's transport ingests reports from the stream.
// Until the hub itself is on main this is the transport path: dispatch → agent apply → result and
// report back, with the hub's handlers only recording. BENCH_AGENT=echo swaps the Agent for one that
// applies nothing, leaving the transport alone.
// Prints `figure nats_converged_p50_ms`, `figure nats_converged_p99_ms`, `figure nats_reports_per_s`.
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { jetstream } from "@nats-io/jetstream";
import { connect, nkeyAuthenticator } from "@nats-io/transport-node";
import { ulid } from "ulid";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const NODES = Number(process.env.BENCH_NODES ?? 200);
const PROCESSES = Number(process.env.BENCH_PROCESSES ?? 4);
const ASSIGNMENTS_PER_NODE = 2;
const INGEST_REPORTS = Number(process.env.BENCH_REPORTS ?? 20_000);

execFileSync("npm", ["run", "build"], { cwd: root, stdio: ["ignore", "ignore", "inherit"] });
const { contentHash } = await import("../dist/model/canonical.js");
const { DEFAULT_BUDGET } = await import("../dist/model/fleet.js");
const { bundleFor } = await import("../dist/model/render.js");
const { newUserSeed, planNatsConfig, writeNatsConfig } = await import("../dist/transport/nats/config.js");
const { NatsServerProcess, stopChild } = await import("../dist/transport/nats/server.js");
const { createNatsTransport } = await import("../dist/transport/nats/hub.js");

const dir = mkdtempSync(join(tmpdir(), "steward-bench-nats-"));
// 200 hosts do not share one disk: on one machine their fsyncs would queue on a single device, so
// the agents' roots and state go to memory (/dev/shm) when there is one. The server's store stays on
// disk. BENCH_AGENTS_DIR overrides.
const agentsBase = process.env.BENCH_AGENTS_DIR ?? (existsSync("/dev/shm") ? "/dev/shm" : tmpdir());
const agentsDir = mkdtempSync(join(agentsBase, "steward-bench-nats-agents-"));
const nodes = Array.from({ length: NODES }, (_, i) => `node-${i}`);
const busDir = join(dir, "nats");
writeNatsConfig(planNatsConfig({ dir: busDir, nodes }, () => undefined, newUserSeed));
const server = new NatsServerProcess({ configFile: join(busDir, "nats-server.conf") });
await server.start();
const credsDir = join(busDir, "credentials");
const children = [];

/** CPU milliseconds used so far by the server, this process (the hub) and the agent processes (Linux). */
function cpuTimes() {
  const of = (pid) => {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(fields[11]) + Number(fields[12])) * 10;
  };
  try {
    return {
      server: of(server.pid),
      hub: of(process.pid),
      agents: children.reduce((sum, child) => sum + of(child.pid), 0),
    };
  } catch {
    return undefined;
  }
}

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}

function bundle(node, assignment, generation) {
  const spec = {
    assignment,
    node,
    state: "running",
    dependsOn: [],
    roots: ["/srv"],
    resources: [0, 1, 2].map((i) => ({
      kind: "file",
      path: `/srv/${assignment}/config-${i}.conf`,
      content: `# ${assignment} on ${node}\ngeneration = ${generation}\nworkers = ${i + 2}\n`,
    })),
    probes: [],
  };
  return bundleFor({ spec, hash: contentHash(spec), budget: DEFAULT_BUDGET }, generation, ulid(), new Date());
}

try {
  // Agents: PROCESSES processes, NODES / PROCESSES agents each.
  const perProcess = Math.ceil(NODES / PROCESSES);
  await Promise.all(
    Array.from({ length: PROCESSES }, (_, p) => {
      const share = nodes.slice(p * perProcess, (p + 1) * perProcess);
      const child = spawn(
        process.execPath,
        [
          join(root, "bench/nats-agents.mjs"),
          JSON.stringify({
            url: server.url,
            dir: join(dir, "agents"),
            credsDir,
            nodes: share,
            heartbeatIntervalMs: 5_000,
          }),
        ],
        { stdio: ["ignore", "pipe", "inherit"], env: process.env },
      );
      children.push(child);
      return new Promise((resolve, reject) => {
        child.stdout.on("data", (chunk) => chunk.toString().includes("ready") && resolve());
        child.once("exit", (code) => reject(new Error(`agent process exited with ${code}`)));
      });
    }),
  );

  // The hub's transport; its handlers record when each instance is seen converged.
  let target = 1;
  let convergedAt = new Map();
  const events = {
    report(report) {
      const now = performance.now();
      for (const instance of report.instances) {
        const key = `${instance.assignment}@${report.node}`;
        if (instance.generation === target && instance.converged && !convergedAt.has(key))
          convergedAt.set(key, now);
      }
    },
    result() {},
    heartbeat() {},
    lost(attemptId, node, reason) {
      console.error(`lost ${attemptId} on ${node}: ${reason}`);
    },
    health() {},
  };
  const hubOptions = { servers: server.url, creds: join(credsDir, "hub.nk"), nodes };
  const hub = createNatsTransport(hubOptions);
  await hub.start(events);

  const instances = nodes.flatMap((node) =>
    Array.from({ length: ASSIGNMENTS_PER_NODE }, (_, a) => ({ node, assignment: `app-${a}` })),
  );
  const natsNode = (name) => ({
    apiVersion: "steward.dev/v1",
    kind: "Node",
    metadata: { name },
    spec: { transport: "nats", roots: ["/srv"] },
  });
  async function commit(generation) {
    target = generation;
    convergedAt = new Map();
    const started = performance.now();
    await Promise.all(
      instances.map((i) => hub.dispatch(bundle(i.node, i.assignment, generation), natsNode(i.node))),
    );
    const deadline = Date.now() + 120_000;
    while (convergedAt.size < instances.length) {
      if (Date.now() > deadline) throw new Error(`only ${convergedAt.size}/${instances.length} converged`);
      await new Promise((r) => setTimeout(r, 5));
    }
    return [...convergedAt.values()].map((t) => t - started).sort((a, b) => a - b);
  }

  await commit(1); // warm-up: every agent applies once, connections and consumers are hot
  const cpuBefore = cpuTimes();
  const times = await commit(2);
  const cpuAfter = cpuTimes();
  const p50 = quantile(times, 0.5);
  const p99 = quantile(times, 0.99);

  // Ingestion: with the hub away, the stream holds INGEST_REPORTS real reports; a fresh hub
  // transport drains them.
  const latest = await hub.lastReports();
  await hub.stop();
  const publisher = await connect({
    servers: server.url,
    authenticator: nkeyAuthenticator(
      new TextEncoder().encode(readFileSync(join(credsDir, "hub.nk"), "utf8").trim()),
    ),
    inboxPrefix: "_INBOX_hub",
  });
  const js = jetstream(publisher);
  const batch = [];
  for (let i = 0; i < INGEST_REPORTS; i++) {
    const report = latest[i % latest.length];
    batch.push(
      js.publish(`steward.report.${report.node}`, JSON.stringify({ ...report, seq: 1_000_000 + i })),
    );
    if (batch.length === 1_000) await Promise.all(batch.splice(0));
  }
  await Promise.all(batch);
  await publisher.close();

  let ingested = 0;
  let first = 0;
  let last = 0;
  const drain = createNatsTransport(hubOptions);
  await drain.start({
    ...events,
    report(report) {
      if (report.seq < 1_000_000) return;
      const now = performance.now();
      if (ingested === 0) first = now;
      ingested++;
      last = now;
    },
  });
  const deadline = Date.now() + 120_000;
  while (ingested < INGEST_REPORTS && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  await drain.stop();
  const perSecond = ingested / ((last - first) / 1000);

  console.log(
    `# ${NODES} ${process.env.BENCH_AGENT === "echo" ? "echo agents (nothing applied)" : "agents"} in ${PROCESSES} processes, ${instances.length} instances, agents' files in ${agentsBase}; transport path (hub handlers only record)`,
  );
  if (cpuBefore && cpuAfter) {
    const used = (key) => cpuAfter[key] - cpuBefore[key];
    console.log(
      `# CPU during the commit: nats-server ${used("server")} ms, hub ${used("hub")} ms, agents ${used("agents")} ms (load average ${loadavg()[0].toFixed(1)} on ${cpus().length} cores)`,
    );
  }
  console.log(`figure nats_converged_p50_ms ${p50.toFixed(0)} ms`);
  console.log(`figure nats_converged_p99_ms ${p99.toFixed(0)} ms`);
  console.log(`figure nats_reports_per_s ${perSecond.toFixed(0)} 1/s`);
} finally {
  await Promise.all(children.map((child) => stopChild(child)));
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
  rmSync(agentsDir, { recursive: true, force: true });
}
