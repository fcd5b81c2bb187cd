#!/usr/bin/env node
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, nkeyAuthenticator } from "@nats-io/transport-node";
import { ulid } from "ulid";
// A fleet on NATS: a real nats-server (configuration and per-node credentials from `steward nats
// config`), 200 agents in 4 processes (a real Agent each, with its own connection, root and state),
// and the hub. One commit changes every instance (200 nodes × 2 assignments).
//
// BENCH_PATH=hub (default) is the product path: the syncer, the hub with its SQLite store, the NATS
// transport, the agents. Measured: commit → each instance converged (the hub's intent at the new
// generation marked converged). After generation 1 converges, BENCH_WARMUP commits (default 2) run
// unmeasured while the processes' code gets compiled, then BENCH_COMMITS (default 5) are measured:
// p50 and p99 are over every instance of every measured commit (2,000 samples, so p99 is not the
// fourth-slowest instance of one run). The first commit after start is printed too
// (`nats_first_commit_p99_ms`). Then the hub's report ingestion rate: 20,000 full reports waiting on
// the stream (published while the hub was down) taken in by a starting hub.
// BENCH_PATH=transport measures the transport alone in this process: dispatch → apply → the report
// showing the instance converged, and reports delivered to handlers that only count.
// BENCH_AGENT=echo swaps the Agent for one that applies nothing (see bench/nats-agents.mjs);
// BENCH_AGENT_PROF=DIR writes a CPU profile of each agent process into DIR; BENCH_HUB_PROF=DIR one
// of this process (the hub's) over the measured commits (commits.cpuprofile) and another over the
// ingestion (ingest.cpuprofile).
// Prints `figure nats_converged_p50_ms`, `figure nats_converged_p99_ms`, `figure nats_reports_per_s`.
import { agentsDirectory, benchHub } from "./fleet.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const NODES = Number(process.env.BENCH_NODES ?? 200);
const PROCESSES = Number(process.env.BENCH_PROCESSES ?? 4);
const ASSIGNMENTS = 2;
const INGEST_REPORTS = Number(process.env.BENCH_REPORTS ?? 20_000);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2);
const COMMITS = Number(process.env.BENCH_COMMITS ?? 5);
const PATH = process.env.BENCH_PATH ?? "hub";

execFileSync("npm", ["run", "build"], { cwd: root, stdio: ["ignore", "ignore", "inherit"] });
const { newUserSeed, planNatsConfig, writeNatsConfig } = await import("../dist/transport/nats/config.js");
const { NatsServerProcess, stopChild } = await import("../dist/transport/nats/server.js");
const { REPORTS_STREAM, subjects } = await import("../dist/transport/nats/subjects.js");

const dir = mkdtempSync(join(tmpdir(), "steward-bench-nats-"));
// 200 hosts do not share one disk: on one machine their fsyncs would queue on a single device, so
// the agents' roots and state go to memory (/dev/shm) when there is one. The server's store and the
// hub's database stay on disk. BENCH_AGENTS_DIR overrides.
const agentsDir = agentsDirectory("steward-bench-nats-agents-");
const nodes = Array.from({ length: NODES }, (_, i) => `node-${i}`);
const busDir = join(dir, "nats");
writeNatsConfig(planNatsConfig({ dir: busDir, nodes }, () => undefined, newUserSeed));
const server = new NatsServerProcess({ configFile: join(busDir, "nats-server.conf") });
await server.start();
const credsDir = join(busDir, "credentials");
const hubCreds = join(credsDir, "hub.nk");
const children = [];

/** The hub's nkey seed: the credentials file names its owner on a comment line above it. */
function hubSeed() {
  return readFileSync(hubCreds, "utf8")
    .split("\n")
    .map((line) => line.trim())
    .find((line) => line.startsWith("SU"));
}

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

/** Profiles this process (the hub's) from here to the returned function's call, when BENCH_HUB_PROF asks. */
async function hubProfile(name) {
  const out = process.env.BENCH_HUB_PROF;
  if (!out) return async () => {};
  const { Session } = await import("node:inspector/promises");
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.start");
  return async () => {
    const { profile } = await session.post("Profiler.stop");
    mkdirSync(out, { recursive: true });
    writeFileSync(join(out, `${name}.cpuprofile`), JSON.stringify(profile));
    session.disconnect();
  };
}

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}

async function until(check, what, timeoutMs = 180_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Agents: PROCESSES processes, NODES / PROCESSES agents each; resolves once all run. */
async function startAgents() {
  const perProcess = Math.ceil(NODES / PROCESSES);
  await Promise.all(
    Array.from({ length: PROCESSES }, (_, p) => {
      const share = nodes.slice(p * perProcess, (p + 1) * perProcess);
      const config = { url: server.url, dir: agentsDir, credsDir, nodes: share, heartbeatIntervalMs: 5_000 };
      const child = spawn(
        process.execPath,
        [
          ...(process.env.BENCH_AGENT_PROF
            ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_AGENT_PROF}`]
            : []),
          join(root, "bench/nats-agents.mjs"),
          JSON.stringify(config),
        ],
        {
          stdio: ["ignore", "pipe", "inherit"],
          env: process.env,
        },
      );
      children.push(child);
      return new Promise((resolve, reject) => {
        child.stdout.on("data", (chunk) => chunk.toString().includes("ready") && resolve());
        child.once("exit", (code) => reject(new Error(`agent process exited with ${code}`)));
      });
    }),
  );
}

/** Publishes `count` copies of real reports (newer each time) on the stream, as the hub's identity. */
async function preloadReports(latest, count) {
  const nc = await connect({
    servers: server.url,
    authenticator: nkeyAuthenticator(new TextEncoder().encode(hubSeed())),
    inboxPrefix: "_INBOX_hub",
    noAsyncTraces: true,
  });
  const js = jetstream(nc);
  const base = Date.now() + 60_000;
  const batch = [];
  for (let i = 0; i < count; i++) {
    const report = latest[i % latest.length];
    const copy = { ...report, takenAt: new Date(base + i).toISOString(), seq: 1_000_000 + i };
    batch.push(js.publish(subjects.report(report.node), JSON.stringify(copy)));
    if (batch.length === 1_000) await Promise.all(batch.splice(0));
  }
  await Promise.all(batch);
  await nc.close();
}

/** The product path: syncer, hub and store, NATS transport, agents. */
async function throughTheHub() {
  const { createNatsTransport } = await import("../dist/transport/nats/hub.js");
  const repo = join(dir, "fleet");
  const env = { ...process.env, GIT_CONFIG_NOSYSTEM: "1", HOME: dir };
  const git = (...args) => execFileSync("git", args, { cwd: repo, env, stdio: "pipe" });
  const writeFleet = (version) => {
    mkdirSync(join(repo, "nodes"), { recursive: true });
    mkdirSync(join(repo, "assignments"), { recursive: true });
    for (const node of nodes)
      writeFileSync(
        join(repo, "nodes", `${node}.yaml`),
        `apiVersion: steward.dev/v1\nkind: Node\nmetadata:\n  name: ${node}\n  labels: {bench: "yes"}\nspec:\n  transport: nats\n  roots: [/srv]\n`,
      );
    for (let a = 0; a < ASSIGNMENTS; a++) {
      const files = [0, 1, 2]
        .map(
          (i) =>
            `    - kind: file\n      name: config-${i}\n      path: /srv/app-${a}/config-${i}.conf\n      content: "generation of version ${version}, workers ${i + 2}"\n`,
        )
        .join("");
      writeFileSync(
        join(repo, "assignments", `app-${a}.yaml`),
        `apiVersion: steward.dev/v1\nkind: Assignment\nmetadata:\n  name: app-${a}\nspec:\n  selector: {matchLabels: {bench: "yes"}}\n  resources:\n${files}`,
      );
    }
    git("add", "-A");
    git(
      "-c",
      "user.name=bench",
      "-c",
      "user.email=bench@example.com",
      "commit",
      "-q",
      "-m",
      `version ${version}`,
    );
  };
  mkdirSync(repo, { recursive: true });
  git("init", "-q", "-b", "main");
  writeFleet(1);
  const state = join(dir, "state");
  mkdirSync(state, { recursive: true });
  const runtime = () =>
    benchHub({
      dir,
      state,
      repo,
      env,
      root: join(dir, "root"),
      transports: [createNatsTransport({ servers: server.url, creds: hubCreds })],
    });
  const total = NODES * ASSIGNMENTS;
  const converged = (hub, generation) =>
    hub.store.db
      .prepare("SELECT converged_at FROM intents WHERE status = 'converged' AND generation = ?")
      .all(generation)
      .map((row) => Date.parse(row.converged_at));
  // Polled while the hub works in this process: a count, so the watching costs the hub little.
  const convergedCount = (hub, generation) =>
    hub.store.db
      .prepare("SELECT count(*) AS n FROM intents WHERE status = 'converged' AND generation = ?")
      .get(generation).n;

  let hub = await runtime();
  await hub.start();
  await until(() => convergedCount(hub, 1) >= total, "generation 1 converged");
  // Each commit: sync nudged as a webhook would, reconcile, dispatch over NATS, apply, report back.
  // The first WARMUP commits are not measured (the processes' code is compiled as they run), then
  // COMMITS are: the quantiles are over every instance of every measured commit.
  const times = [];
  let cold = [];
  let cpuBefore;
  let profiled = async () => {};
  for (let version = 2; version < 2 + WARMUP + COMMITS; version++) {
    writeFleet(version);
    if (version === 2 + WARMUP) {
      profiled = await hubProfile("commits");
      cpuBefore = cpuTimes();
    }
    const committedAt = Date.now();
    await fetch(`${hub.http.url}/nudge`, { method: "POST", body: JSON.stringify({ sync: true }) });
    await until(() => convergedCount(hub, version) >= total, `generation ${version} converged`);
    const took = converged(hub, version).map((at) => at - committedAt);
    if (version === 2) cold = took.sort((a, b) => a - b);
    if (version >= 2 + WARMUP) times.push(...took);
  }
  const cpuAfter = cpuTimes();
  await profiled();
  times.sort((a, b) => a - b);

  // Ingestion: the hub is down while 20,000 reports pile up; a starting hub takes them in.
  const latest = hub.store.db
    .prepare("SELECT node FROM reports")
    .all()
    .map((row) => row.node);
  const kvReports = await lastReports();
  await hub.stop();
  await preloadReports(
    kvReports.filter((r) => latest.includes(r.node)),
    INGEST_REPORTS,
  );
  const watcher = await connect({
    servers: server.url,
    authenticator: nkeyAuthenticator(new TextEncoder().encode(hubSeed())),
    inboxPrefix: "_INBOX_hub",
  });
  const jsm = await jetstreamManager(watcher);
  const waiting = async () => {
    // A work queue: what the hub's shard consumers have not acknowledged yet is what the stream holds.
    return (await jsm.streams.info(REPORTS_STREAM)).state.messages;
  };
  const backlog = await waiting();
  hub = await runtime();
  const ingested = await hubProfile("ingest");
  void hub.start();
  let began = 0;
  await until(async () => {
    const left = await waiting();
    if (!began && left < backlog) began = performance.now();
    return left === 0;
  }, "the backlog taken in");
  const perSecond = backlog / ((performance.now() - began) / 1000);
  await ingested();
  await watcher.close();
  await hub.stop();
  return {
    times,
    perSecond,
    cpuBefore,
    cpuAfter,
    commits: COMMITS,
    cold,
    what: "through the hub (syncer, SQLite store, NATS transport)",
  };
}

/** The last report of every node, from KV steward-observed. */
async function lastReports() {
  const { createNatsTransport } = await import("../dist/transport/nats/hub.js");
  const reader = createNatsTransport({ servers: server.url, creds: hubCreds });
  const noop = { report() {}, result() {}, heartbeat() {}, lost() {}, health() {} };
  await reader.start(noop);
  const reports = await reader.lastReports();
  await reader.stop();
  return reports;
}

/** The transport alone, in this process: handlers record when each instance is seen converged. */
async function throughTheTransport() {
  const { contentHash } = await import("../dist/model/canonical.js");
  const { DEFAULT_BUDGET } = await import("../dist/model/fleet.js");
  const { bundleFor } = await import("../dist/model/render.js");
  const { createNatsTransport } = await import("../dist/transport/nats/hub.js");
  let target = 1;
  let convergedAt = new Map();
  const events = {
    report(report) {
      const now = Date.now();
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
  const hubOptions = { servers: server.url, creds: hubCreds, nodes };
  const hub = createNatsTransport(hubOptions);
  await hub.start(events);
  const natsNode = (name) => ({
    apiVersion: "steward.dev/v1",
    kind: "Node",
    metadata: { name },
    spec: { transport: "nats", roots: ["/srv"] },
  });
  const bundle = (node, assignment, generation) => {
    const files = [0, 1, 2].map((i) => ({
      kind: "file",
      path: `/srv/${assignment}/config-${i}.conf`,
      content: `generation of version ${generation}, workers ${i + 2}`,
    }));
    const spec = {
      assignment,
      node,
      state: "running",
      dependsOn: [],
      roots: ["/srv"],
      resources: files,
      probes: [],
    };
    return bundleFor(
      { spec, hash: contentHash(spec), budget: DEFAULT_BUDGET },
      generation,
      ulid(),
      new Date(),
    );
  };
  const instances = nodes.flatMap((node) =>
    Array.from({ length: ASSIGNMENTS }, (_, a) => ({ node, assignment: `app-${a}` })),
  );
  const commit = async (generation) => {
    target = generation;
    convergedAt = new Map();
    const started = Date.now();
    await Promise.all(
      instances.map((i) => hub.dispatch(bundle(i.node, i.assignment, generation), natsNode(i.node))),
    );
    await until(() => convergedAt.size >= instances.length, `generation ${generation} converged`);
    return [...convergedAt.values()].map((t) => t - started).sort((a, b) => a - b);
  };
  await commit(1);
  const cpuBefore = cpuTimes();
  const times = await commit(2);
  const cpuAfter = cpuTimes();

  const latest = await hub.lastReports();
  await hub.stop();
  await preloadReports(latest, INGEST_REPORTS);
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
  await until(() => ingested >= INGEST_REPORTS, "the backlog taken in");
  await drain.stop();
  const perSecond = ingested / ((last - first) / 1000);
  return {
    times,
    perSecond,
    cpuBefore,
    cpuAfter,
    commits: 1,
    what: "the transport alone (handlers only record)",
  };
}

try {
  await startAgents();
  const { times, perSecond, cpuBefore, cpuAfter, commits, cold, what } =
    PATH === "transport" ? await throughTheTransport() : await throughTheHub();
  const agents = process.env.BENCH_AGENT === "echo" ? "echo agents (nothing applied)" : "agents";
  console.log(
    `# ${NODES} ${agents} in ${PROCESSES} processes, ${times.length} instances, agents' files in ${agentsDir}; ${what}`,
  );
  if (cpuBefore && cpuAfter) {
    const used = (key) => Math.round((cpuAfter[key] - cpuBefore[key]) / commits);
    console.log(
      `# CPU per measured commit (${commits}): nats-server ${used("server")} ms, hub ${used("hub")} ms, agents ${used("agents")} ms (load average ${loadavg()[0].toFixed(1)} on ${cpus().length} cores)`,
    );
  }
  console.log(`figure nats_converged_p50_ms ${quantile(times, 0.5).toFixed(0)} ms`);
  console.log(`figure nats_converged_p99_ms ${quantile(times, 0.99).toFixed(0)} ms`);
  if (cold?.length && WARMUP > 0)
    console.log(`figure nats_first_commit_p99_ms ${quantile(cold, 0.99).toFixed(0)} ms`);
  console.log(`figure nats_reports_per_s ${perSecond.toFixed(0)} 1/s`);
} finally {
  await Promise.all(children.map((child) => stopChild(child)));
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
  rmSync(agentsDir, { recursive: true, force: true });
}
process.exit(0);
