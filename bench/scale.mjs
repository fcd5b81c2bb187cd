#!/usr/bin/env node
// The cost of a fleet as it grows: the hub with echo agents in other processes over NATS (a real
// nats-server, one user and one connection per node), 10 assignments per node, at 1,000, 10,000
// and 100,000 instances (100, 1,000 and 10,000 nodes); first one `steward hub` on its SQLite store,
// then two replicas sharing a PostgreSQL store.
//
// For each size: generation 1 converges; then one commit changes every instance, and from the
// webhook-like nudge to the last instance converged is measured with the hubs' CPU (from /proc) and
// their resident memory right after it and at rest (30 s after the hubs went quiet); then one
// commit changes one instance only (an assignment
// selecting one node), and the time to its attempt dispatched is measured.
// Prints, for SQLite, `figure scale_commit_to_converged_<n>_ms`, `figure scale_hub_cpu_per_instance_<n>_us`,
// `figure scale_hub_rss_<n>_mib`, `figure scale_hub_rest_rss_<n>_mib` and
// `figure scale_one_change_dispatch_<n>_ms`; for PostgreSQL the
// same names with `scale_postgres_` (CPU summed over both replicas, RSS the larger). Then, per
// store, the growth of CPU per instance (largest size against smallest) and of RSS per instance.
// BENCH_SIZES (default 1000,10000,100000), BENCH_STORES (default sqlite,postgres), BENCH_PROCESSES
// (agent processes, default 4) change the shape; BENCH_HEAP_SNAPSHOT=DIR writes a heap snapshot of
// each hub into DIR once the rollout converged (at rest, before the one change, with
// BENCH_HEAP_SNAPSHOT_AT=rest), BENCH_CPU_PROFILE=DIR a CPU profile of each hub. BENCH_PROGRESS=1
// prints converged and dispatched every 15 s of a rollout; BENCH_KEEP=1 keeps the hubs' directories
// (logs, SQLite, PostgreSQL's data) for a look afterwards; BENCH_PG_OPTIONS adds server options
// (`-c shared_preload_libraries=pg_stat_statements`); BENCH_PG_LOG_ONE_CHANGE=1 has PostgreSQL log
// every statement of the one change with its duration (in server.log, kept with BENCH_KEEP=1).
import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { agentsDirectory, fleetRepository, natsNodeYaml } from "./fleet.mjs";
import {
  cpuMs,
  freePort,
  root,
  rssMiB,
  startEchoAgents,
  startHub,
  startNatsFleet,
  startPostgres,
  until,
} from "./processes.mjs";

const SIZES = (process.env.BENCH_SIZES ?? "1000,10000,100000").split(",").map(Number);
const STORES = (process.env.BENCH_STORES ?? "sqlite,postgres").split(",");
const PROCESSES = Number(process.env.BENCH_PROCESSES ?? 4);
const ASSIGNMENTS = 10;

execFileSync("npm", ["run", "build"], { cwd: root, stdio: ["ignore", "ignore", "inherit"] });
const { stopChild } = await import("../dist/transport/nats/server.js");

function assignment(name, selector, content) {
  return `apiVersion: steward.dev/v1\nkind: Assignment\nmetadata:\n  name: ${name}\nspec:\n  selector: {matchLabels: {${selector}}}\n  resources:\n    - kind: file\n      name: config\n      path: /srv/${name}.conf\n      content: "${content}"\n`;
}

/** Where each hub's resident memory is (its /metrics): the JS heap, used and held by V8, and outside it. */
async function memoryBreakdown(ports, when, pids = []) {
  for (const pid of pids)
    console.error(`# hub ${pid} ${when}, resident MiB by mapping: ${residentByMapping(pid)}`);
  for (const port of ports) {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text().catch(() => "");
    const mib = (name) => (Number(new RegExp(`^${name} (\\S+)`, "m").exec(text)?.[1]) / 2 ** 20).toFixed(0);
    // V8's spaces, used of held: where the heap's slack is.
    const spaces = [...text.matchAll(/^nodejs_heap_space_size_used_bytes\{space="(\w+)"\} (\S+)/gm)]
      .map(([, space, used]) => {
        const total = new RegExp(
          `^nodejs_heap_space_size_total_bytes\\{space="${space}"\\} (\\S+)`,
          "m",
        ).exec(text)?.[1];
        return `${space} ${(Number(used) / 2 ** 20).toFixed(0)}/${(Number(total) / 2 ** 20).toFixed(0)}`;
      })
      .filter((entry) => !entry.endsWith(" 0/0"));
    console.error(
      `# hub :${port} ${when}, MiB: resident ${mib("process_resident_memory_bytes")}, heap used ${mib("nodejs_heap_size_used_bytes")} of ${mib("nodejs_heap_size_total_bytes")}, external ${mib("nodejs_external_memory_bytes")}; spaces ${spaces.join(", ")}`,
    );
  }
}

/**
 * Resident memory of process `pid` by kind of mapping: malloc's main arena (`[heap]`), anonymous
 * mappings of 64 MiB reservations or more (malloc's other arenas, V8's cage), other anonymous ones
 * (V8's pages, mostly), and files.
 */
function residentByMapping(pid) {
  const kinds = {};
  let kind = "file";
  for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
    const mapping = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (mapping) {
      const size = Number.parseInt(mapping[2], 16) - Number.parseInt(mapping[1], 16);
      const name = mapping[3];
      kind =
        name === "[heap]"
          ? "brk"
          : name.startsWith("/")
            ? "file"
            : name
              ? name
              : size >= 2 ** 26
                ? "anon>=64M"
                : "anon";
    } else if (line.startsWith("Rss:"))
      kinds[kind] = (kinds[kind] ?? 0) + Number(line.split(/\s+/)[1]) / 1024;
  }
  return Object.entries(kinds)
    .filter(([, mib]) => mib >= 1)
    .map(([name, mib]) => `${name} ${mib.toFixed(0)}`)
    .join(", ");
}

/** Signals each hub to write a heap snapshot (into its working directory) and moves them to `into`. */
async function heapSnapshots(hubs, dir, into) {
  mkdirSync(into, { recursive: true });
  for (const hub of hubs) {
    const before = new Set(readdirSync(dir));
    hub.kill("SIGUSR2");
    let file;
    let size = -1;
    await until(
      () => {
        file ??= readdirSync(dir).find((f) => f.endsWith(".heapsnapshot") && !before.has(f));
        if (!file) return false;
        const now = statSync(join(dir, file)).size;
        const done = now === size && now > 0;
        size = now;
        return done;
      },
      300_000,
      "the heap snapshot",
      1_000,
    );
    renameSync(join(dir, file), join(into, file));
    console.error(`# heap snapshot of hub ${hub.pid}: ${join(into, file)}`);
  }
}

/** One fleet of `size` instances on `store`; returns its figures. */
async function measure(store, size) {
  const nodeCount = size / ASSIGNMENTS;
  const nodes = Array.from({ length: nodeCount }, (_, i) => `node-${String(i).padStart(5, "0")}`);
  const solo = nodes[0];
  const dir = mkdtempSync(join(tmpdir(), "steward-bench-scale-"));
  const agentsDir = agentsDirectory("steward-bench-scale-agents-");
  const children = [];
  const postgres = store === "postgres" ? await startPostgres("steward-bench-scale-pg-") : undefined;
  const { server, credsDir } = await startNatsFleet(dir, nodes);
  const fleet = fleetRepository(dir);
  const apps = (version) =>
    Array.from({ length: ASSIGNMENTS }, (_, a) => [
      `assignments/app-${a}.yaml`,
      assignment(`app-${a}`, 'bench: "yes"', `version ${version}`),
    ]);
  const soloFile = (version) => [
    "assignments/solo.yaml",
    assignment("solo", 'solo: "yes"', `version ${version}`),
  ];
  fleet.write("version 1", [
    ...nodes.map((node) => [
      `nodes/${node}.yaml`,
      node === solo
        ? natsNodeYaml(node).replace('{bench: "yes"}', '{bench: "yes", solo: "yes"}')
        : natsNodeYaml(node),
    ]),
    ...apps(1),
    soloFile(1),
  ]);
  const total = size + 1;

  let db;
  let pgClient;
  const query = async (sql, ...params) => {
    if (pgClient) {
      let i = 0;
      const { rows } = await pgClient.query(
        sql.replace(/\?/g, () => `$${++i}`),
        params,
      );
      return rows[0];
    }
    if (!db) {
      const file = join(dir, "hub-a", "hub.db");
      if (!existsSync(file)) return undefined;
      db = new Database(file, { readonly: true, fileMustExist: true });
      db.pragma("busy_timeout = 1000");
    }
    return db.prepare(sql).get(...params);
  };
  if (postgres) {
    pgClient = new pg.Client({ connectionString: postgres.url });
    await pgClient.connect();
  }
  const converged = async (assignmentPrefix, generation) => {
    try {
      const row = await query(
        "SELECT count(*) AS n FROM intents WHERE status = 'converged' AND generation = ? AND assignment LIKE ?",
        generation,
        `${assignmentPrefix}%`,
      );
      return Number(row?.n ?? 0);
    } catch {
      return 0; // the schema is not there yet
    }
  };

  try {
    const perProcess = Math.ceil(nodes.length / PROCESSES);
    const parts = Array.from({ length: PROCESSES }, (_, p) =>
      nodes.slice(p * perProcess, (p + 1) * perProcess),
    );
    children.push(
      ...(await Promise.all(
        parts
          .filter((part) => part.length > 0)
          .map((part) => startEchoAgents({ dir, natsUrl: server.url, credsDir, agentsDir, nodes: part })),
      )),
    );
    const replicas = store === "postgres" ? ["hub-a", "hub-b"] : ["hub-a"];
    const ports = [];
    const hubs = [];
    for (const name of replicas) {
      const port = await freePort();
      ports.push(port);
      // On PostgreSQL the nudge may reach the replica that does not sync, which passes it on; the
      // syncing one also looks every second.
      const args = ["--listen", `127.0.0.1:${port}`, "--sync-interval", postgres ? "1s" : "1h"];
      if (postgres) args.push("--store", postgres.url);
      const node = [
        ...(process.env.BENCH_HEAP_SNAPSHOT ? ["--heapsnapshot-signal=SIGUSR2"] : []),
        ...(process.env.BENCH_NODE_FLAGS ? process.env.BENCH_NODE_FLAGS.split(" ") : []),
        ...(process.env.BENCH_CPU_PROFILE
          ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_CPU_PROFILE}`]
          : []),
      ];
      const hub = startHub({ dir, name, repo: fleet.repo, natsUrl: server.url, credsDir, args, node });
      children.push(hub);
      hubs.push(hub);
      // The first replica makes the schema; the second starts on it.
      if (postgres && hubs.length === 1)
        await until(
          async () => (await query("SELECT 1 AS ok FROM pg_tables WHERE tablename = 'replicas'"))?.ok === 1,
          60_000,
          "the schema",
        );
    }
    const nudge = () =>
      fetch(`http://127.0.0.1:${ports[0]}/nudge`, {
        method: "POST",
        body: JSON.stringify({ sync: true }),
      }).catch(() => undefined);
    // Two replicas on PostgreSQL spend a round trip per statement: about twice the time per instance.
    const timeoutMs = 120_000 + size * (postgres ? 15 : 6);
    // Where a slow rollout is (BENCH_PROGRESS=1): converged and dispatched so far, every 15 s.
    let lastProgress = Date.now();
    const progress = async (generation, count) => {
      if (!process.env.BENCH_PROGRESS || Date.now() - lastProgress < 15_000) return;
      lastProgress = Date.now();
      const dispatched = await query(
        "SELECT count(*) AS n FROM attempts WHERE generation = ? AND dispatched_at IS NOT NULL",
        generation,
      ).catch(() => undefined);
      console.error(
        `# ${new Date().toISOString()} generation ${generation}: ${count} converged, ${dispatched?.n ?? "?"} dispatched`,
      );
    };
    const convergedWithProgress = async (prefix, generation) => {
      const count = await converged(prefix, generation);
      await progress(generation, count);
      return count;
    };
    // A hub syncs as it starts.
    await until(
      async () => (await convergedWithProgress("", 1)) >= total,
      timeoutMs,
      `generation 1 of ${size} instances`,
      500,
    );

    // Every instance changed by one commit.
    const cpu = () => hubs.reduce((sum, hub) => sum + cpuMs(hub.pid), 0);
    fleet.write("version 2", apps(2));
    const cpuBefore = cpu();
    const committed = performance.now();
    await nudge();
    await until(
      async () => (await convergedWithProgress("app-", 2)) >= size,
      timeoutMs,
      `generation 2 of ${size} instances`,
      50,
    );
    const rolloutMs = performance.now() - committed;
    const cpuPerInstanceUs = ((cpu() - cpuBefore) * 1000) / size;
    const rss = Math.max(...hubs.map((hub) => rssMiB(hub.pid)));
    await memoryBreakdown(
      ports,
      "after the rollout",
      hubs.map((hub) => hub.pid),
    );
    const snapshotAtRest = process.env.BENCH_HEAP_SNAPSHOT_AT === "rest";
    if (process.env.BENCH_HEAP_SNAPSHOT && !snapshotAtRest)
      await heapSnapshots(hubs, dir, process.env.BENCH_HEAP_SNAPSHOT);

    // One instance changed, in a fleet at rest (the rollout's tail of reports and housekeeping done:
    // the hubs below a fifth of a core over a second): commit to its attempt handed to the bus.
    await until(
      async () => {
        const before = cpu();
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        return cpu() - before < 200 * hubs.length;
      },
      120_000,
      "the hubs at rest",
      0,
    );
    // Resident memory at rest: once V8's memory reducer (it starts 8 s after the heap went quiet)
    // had time to give back what the rollout left behind.
    await new Promise((resolve) => setTimeout(resolve, 30_000));
    const restRss = Math.max(...hubs.map((hub) => rssMiB(hub.pid)));
    await memoryBreakdown(
      ports,
      "at rest",
      hubs.map((hub) => hub.pid),
    );
    if (process.env.BENCH_HEAP_SNAPSHOT && snapshotAtRest)
      await heapSnapshots(hubs, dir, process.env.BENCH_HEAP_SNAPSHOT);
    // BENCH_PG_LOG_ONE_CHANGE=1: PostgreSQL logs every statement of the one change, with its time.
    const logOneChange = pgClient && process.env.BENCH_PG_LOG_ONE_CHANGE;
    if (logOneChange) {
      await pgClient.query("ALTER SYSTEM SET log_min_duration_statement = 0");
      await pgClient.query("SELECT pg_reload_conf()");
    }
    fleet.write("version 3", [soloFile(2)]);
    const changedAt = Date.now();
    // The monotonic clock (the one CPU profiles are stamped with): the window to look at in one.
    const windowFrom = process.hrtime.bigint() / 1000n;
    await nudge();
    let dispatchedAt;
    await until(
      async () => {
        const row = await query(
          "SELECT dispatched_at AS at FROM attempts WHERE instance_key = ? AND generation = 2 AND dispatched_at IS NOT NULL",
          `solo@${solo}`,
        );
        dispatchedAt = row?.at;
        return dispatchedAt !== undefined;
      },
      60_000,
      "the one changed instance dispatched",
      2,
    );
    const oneChangeMs = Date.parse(dispatchedAt) - changedAt;
    if (logOneChange) {
      await pgClient.query("ALTER SYSTEM RESET log_min_duration_statement");
      await pgClient.query("SELECT pg_reload_conf()");
      console.error(`# one change: changed at ${new Date(changedAt).toISOString()}`);
    }
    if (process.env.BENCH_CPU_PROFILE)
      console.error(
        `# one change in the profiles: monotonic ${windowFrom}..${process.hrtime.bigint() / 1000n} µs`,
      );
    // Where the time went: commit → revision recorded by the syncer → attempt created → dispatched.
    const steps = await query(
      "SELECT (SELECT synced_at FROM revisions ORDER BY seq DESC LIMIT 1) AS synced, created_at AS created FROM attempts WHERE instance_key = ? AND generation = 2",
      `solo@${solo}`,
    );
    console.error(
      `# one change: synced +${Date.parse(steps.synced) - changedAt} ms, attempt created +${Date.parse(steps.created) - changedAt} ms, dispatched +${Date.parse(dispatchedAt) - changedAt} ms`,
    );
    return { rolloutMs, cpuPerInstanceUs, rss, restRss, oneChangeMs };
  } catch (error) {
    for (const name of ["hub-a", "hub-b"]) {
      const log = join(dir, `${name}.log`);
      if (existsSync(log))
        console.error(`--- ${name}\n${execFileSync("tail", ["-n", "20", log]).toString()}`);
    }
    throw error;
  } finally {
    db?.close();
    await pgClient?.end().catch(() => undefined);
    // A hub writes its CPU profile as it exits: give a busy one time to get there.
    const graceMs = process.env.BENCH_CPU_PROFILE ? 120_000 : undefined;
    for (const child of children.reverse()) await stopChild(child, graceMs).catch(() => undefined);
    await server.stop?.().catch(() => undefined);
    postgres?.stop();
    if (process.env.BENCH_KEEP) console.error(`# kept ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
    rmSync(agentsDir, { recursive: true, force: true });
  }
}

for (const store of STORES) {
  const prefix = store === "postgres" ? "scale_postgres" : "scale";
  const results = new Map();
  for (const size of SIZES) {
    const r = await measure(store, size);
    results.set(size, r);
    console.error(
      `# ${store}${store === "postgres" ? " (2 replicas)" : ""}: ${size} instances on ${size / ASSIGNMENTS} nodes, ${PROCESSES} agent processes`,
    );
    console.log(`figure ${prefix}_commit_to_converged_${size}_ms ${Math.round(r.rolloutMs)} ms`);
    console.log(`figure ${prefix}_hub_cpu_per_instance_${size}_us ${Math.round(r.cpuPerInstanceUs)} us`);
    console.log(`figure ${prefix}_hub_rss_${size}_mib ${Math.round(r.rss)} MiB`);
    console.log(`figure ${prefix}_hub_rest_rss_${size}_mib ${Math.round(r.restRss)} MiB`);
    console.log(`figure ${prefix}_one_change_dispatch_${size}_ms ${r.oneChangeMs} ms`);
  }
  const sizes = [...results.keys()].sort((a, b) => a - b);
  const small = results.get(sizes[0]);
  const large = results.get(sizes.at(-1));
  if (sizes.length > 1) {
    console.log(
      `figure ${prefix}_cpu_per_instance_growth ${(large.cpuPerInstanceUs / small.cpuPerInstanceUs).toFixed(2)} ratio`,
    );
    const kib = ((large.rss - small.rss) * 1024) / (sizes.at(-1) - sizes[0]);
    console.log(`figure ${prefix}_hub_rss_per_instance_kib ${kib.toFixed(2)} KiB`);
    const restKib = ((large.restRss - small.restRss) * 1024) / (sizes.at(-1) - sizes[0]);
    console.log(`figure ${prefix}_hub_rest_rss_per_instance_kib ${restKib.toFixed(2)} KiB`);
  }
}
