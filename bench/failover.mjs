#!/usr/bin/env node
// Two hub replicas on one PostgreSQL store, a fleet on NATS: a real PostgreSQL server (Debian's
// postgresql, started as the postgres user in a temporary directory), a real nats-server with
// per-node credentials from `steward nats config`, two `steward hub --store postgres://... --nats`
// processes, and echo agents (bench/nats-agents.mjs: they apply nothing and answer at once, and each
// records every attempt it applied). 200 nodes × 10 assignments = 2,000 instances.
//
// Generation 1 converges; a commit changes every instance; once a quarter of them converged, the
// replica that does not sync is SIGKILLed. Measured: kill → every instance converged at the new
// generation (`figure failover_converged_ms`, target < replica lease + 5 s); generations applied by
// more than one attempt (`figure failover_duplicated_oneshots`, must be 0); instances that never
// converged at the new generation (`figure failover_lost_generations`, must be 0).
// BENCH_NODES, BENCH_ASSIGNMENTS and BENCH_REPLICA_LEASE (default 10s) change the shape.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { agentsDirectory, fleetRepository, natsNodeYaml } from "./fleet.mjs";
import {
  root,
  startEchoAgents,
  startHub as startHubProcess,
  startNatsFleet,
  startPostgres,
  until,
} from "./processes.mjs";

const NODES = Number(process.env.BENCH_NODES ?? 200);
const ASSIGNMENTS = Number(process.env.BENCH_ASSIGNMENTS ?? 10);
const LEASE = process.env.BENCH_REPLICA_LEASE ?? "10s";
const TOTAL = NODES * ASSIGNMENTS;

execFileSync("npm", ["run", "build"], { cwd: root, stdio: ["ignore", "ignore", "inherit"] });
const { stopChild } = await import("../dist/transport/nats/server.js");

const dir = mkdtempSync(join(tmpdir(), "steward-bench-failover-"));
const agentsDir = agentsDirectory("steward-bench-failover-agents-");
const children = [];

const postgres = await startPostgres("steward-bench-failover-pg-");
const storeUrl = postgres.url;
const db = new pg.Client({ connectionString: storeUrl });
await db.connect();

const nodes = Array.from({ length: NODES }, (_, i) => `node-${String(i).padStart(3, "0")}`);
const { server, credsDir } = await startNatsFleet(dir, nodes);

const fleet = fleetRepository(dir);
const repo = fleet.repo;
function writeFleet(version) {
  const files = nodes.map((node) => [`nodes/${node}.yaml`, natsNodeYaml(node)]);
  for (let a = 0; a < ASSIGNMENTS; a++)
    files.push([
      `assignments/app-${a}.yaml`,
      `apiVersion: steward.dev/v1\nkind: Assignment\nmetadata:\n  name: app-${a}\nspec:\n  selector: {matchLabels: {bench: "yes"}}\n  resources:\n    - kind: file\n      name: config\n      path: /srv/app-${a}.conf\n      content: "version ${version}"\n`,
    ]);
  fleet.write(`version ${version}`, files);
}
writeFleet(1);

function startHub(name) {
  const child = startHubProcess({
    dir,
    name,
    repo,
    natsUrl: server.url,
    credsDir,
    args: ["--store", storeUrl, "--listen", "127.0.0.1:0", "--sync-interval", "1s", "--replica-lease", LEASE],
  });
  children.push(child);
  return child;
}

async function startAgents(part) {
  const child = await startEchoAgents({
    dir,
    natsUrl: server.url,
    credsDir,
    agentsDir,
    nodes: part,
    env: { BENCH_APPLIED: "1" },
  });
  children.push(child);
  return child;
}

const half = Math.ceil(NODES / 2);
await Promise.all([startAgents(nodes.slice(0, half)), startAgents(nodes.slice(half))]);

/** Instances converged at generation `generation` (the store's intents). */
async function converged(generation) {
  const { rows } = await db
    .query("SELECT count(*) AS n FROM intents WHERE status = 'converged' AND generation = $1", [generation])
    .catch(() => ({ rows: [{ n: 0 }] }));
  return Number(rows[0].n);
}

try {
  const first = startHub("replica-a");
  await until(
    async () => (await db.query("SELECT 1 FROM pg_tables WHERE tablename = 'replicas'")).rowCount > 0,
    30_000,
    "the schema",
  );
  const second = startHub("replica-b");
  await until(
    async () =>
      (
        await db.query(
          "SELECT count(DISTINCT holder) AS n FROM leases WHERE name LIKE 'shard:%' AND expires_at > $1",
          [new Date().toISOString()],
        )
      ).rows[0].n === "2",
    60_000,
    "both replicas to hold shards",
  );
  await until(async () => (await converged(1)) === TOTAL, 180_000, "generation 1 to converge");

  writeFleet(2);
  await until(async () => (await converged(2)) >= TOTAL / 4, 120_000, "a quarter of generation 2");
  // The replica that does not sync dies: its nodes' work moves to the one that does.
  const { rows } = await db.query("SELECT holder FROM leases WHERE name = 'sync'");
  const syncing = rows[0]?.holder ?? "";
  const victim = syncing.includes(`-${first.pid}-`) ? second : first;
  victim.kill("SIGKILL");
  const killedAt = performance.now();
  const at = await converged(2);
  // When the survivor held every shard (the takeover), to tell detection from the work after it.
  let takeoverMs;
  await until(
    async () => {
      if (takeoverMs === undefined) {
        const { rows: holders } = await db.query(
          "SELECT count(DISTINCT holder) AS n FROM leases WHERE name LIKE 'shard:%' AND holder NOT LIKE $1",
          [`%-${victim.pid}-%`],
        );
        const { rows: theirs } = await db.query(
          "SELECT count(*) AS n FROM leases WHERE name LIKE 'shard:%' AND holder LIKE $1",
          [`%-${victim.pid}-%`],
        );
        if (holders[0].n === "1" && theirs[0].n === "0") takeoverMs = performance.now() - killedAt;
      }
      return (await converged(2)) === TOTAL;
    },
    120_000,
    "every instance to converge at generation 2",
  );
  const convergedMs = performance.now() - killedAt;

  // What the agents applied: a generation applied by two attempts is a one-shot run twice.
  const applied = new Map();
  for (const node of readdirSync(agentsDir)) {
    const file = join(agentsDir, node, "applied");
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, "utf8").trim().split("\n")) {
      const [instance, generation, attempt] = line.split(" ");
      const key = `${instance} ${generation}`;
      if (!applied.has(key)) applied.set(key, new Set());
      applied.get(key).add(attempt);
    }
  }
  let duplicated = 0;
  for (const attempts of applied.values()) if (attempts.size > 1) duplicated++;
  let lost = 0;
  for (const node of nodes)
    for (let a = 0; a < ASSIGNMENTS; a++) if (!applied.has(`app-${a}@${node} 2`)) lost++;
  console.error(
    `failover: ${TOTAL} instances, ${at} converged at the kill, replica lease ${LEASE}; killed pid ${victim.pid}; every shard the survivor's after ${Math.round(takeoverMs ?? -1)} ms`,
  );
  console.log(`figure failover_converged_ms ${Math.round(convergedMs)} ms`);
  console.log(`figure failover_duplicated_oneshots ${duplicated} count`);
  console.log(`figure failover_lost_generations ${lost} count`);
} catch (error) {
  // What the replicas said (warnings and errors), then the failure.
  for (const name of ["replica-a", "replica-b"]) {
    const log = join(dir, `${name}.log`);
    if (existsSync(log))
      console.error(`--- ${name}\n${readFileSync(log, "utf8").split("\n").slice(-25).join("\n")}`);
  }
  const { rows: stuck } = await db.query(
    "SELECT status, count(*) AS n FROM intents WHERE generation = 2 GROUP BY status",
  );
  console.error("generation 2 intents by status:", JSON.stringify(stuck));
  throw error;
} finally {
  for (const child of children.reverse()) await stopChild(child).catch(() => undefined);
  await db.end().catch(() => undefined);
  await server.stop?.().catch(() => undefined);
  postgres.stop();
  rmSync(dir, { recursive: true, force: true });
  rmSync(agentsDir, { recursive: true, force: true });
}
