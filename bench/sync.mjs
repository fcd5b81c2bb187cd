// Benchmark of the syncer on a large fleet (`npm run bench:sync`, which builds dist/ first).
//
// Builds a repository of 10,000 assignment files and 100 nodes with `git fast-import`, syncs it into
// a fresh SQLite store, then commits a one-file change and times the sync that turns it into a new
// generation (`sync_one_file_change_ms`: the first such sync after the initial one, the slowest,
// since its code paths are not yet optimised by the JIT). Then times further one-file changes and
// prints their median as `sync_one_file_change_steady_ms`. Prints `figure NAME VALUE UNIT` lines.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { SqliteStore } from "../dist/hub/store/sqlite.js";
import { Syncer } from "../dist/repo/syncer.js";
import { commitStream, FLEET_YAML, nodeName, nodeYaml } from "./fleet.mjs";

const ASSIGNMENTS = Number(process.env.BENCH_ASSIGNMENTS ?? 10_000);
const NODES = 100;
const CHANGES = Number(process.env.BENCH_CHANGES ?? 6);

const root = mkdtempSync(join(tmpdir(), "steward-bench-sync-"));
const repo = join(root, "fleet.git");
const env = { ...process.env, GIT_CONFIG_NOSYSTEM: "1", HOME: root };
const git = (args, input) => execFileSync("git", args, { cwd: repo, env, input, maxBuffer: 1 << 30 });

const assignmentName = (i) => `app-${String(i).padStart(5, "0")}`;

function assignmentYaml(i, version) {
  const name = assignmentName(i);
  return `apiVersion: steward.dev/v1
kind: Assignment
metadata:
  name: ${name}
spec:
  nodes: [${nodeName(i % NODES)}]
  resources:
    - kind: directory
      path: /srv/${name}
    - kind: file
      path: /srv/${name}/config.json
      mode: "0644"
      content: |
        {"app": "${name}", "port": ${10_000 + i}, "version": ${version}}
`;
}

execFileSync("git", ["init", "-q", "--bare", "-b", "main", repo], { env });
const files = [["steward.yaml", FLEET_YAML]];
for (let i = 0; i < NODES; i++) files.push([`nodes/${nodeName(i)}.yaml`, nodeYaml(i)]);
for (let i = 0; i < ASSIGNMENTS; i++)
  files.push([`assignments/${assignmentName(i)}.yaml`, assignmentYaml(i, 1)]);
git(["fast-import", "--quiet"], commitStream("main", "initial fleet", files));

const hubStore = new SqliteStore(join(root, "state", "hub.db"));
const store = hubStore.generations;
const syncer = new Syncer({
  store,
  source: { kind: "path", path: repo },
  cacheDir: join(root, "state", "git"),
});

// CPU time (all threads, GC included) is printed next to wall time: on a shared machine it shows
// what the sync costs apart from waiting for a CPU.
const cpuMs = (since) => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
};
let started = performance.now();
let cpu = process.cpuUsage();
const initial = await syncer.sync();
const initialMs = performance.now() - started;
const initialCpuMs = cpuMs(cpu);
if (initial.kind !== "applied" || initial.generations.length !== ASSIGNMENTS)
  throw new Error(
    `initial sync: expected ${ASSIGNMENTS} generations, got ${JSON.stringify(initial).slice(0, 300)}`,
  );

const changeMs = [];
const changeCpuMs = [];
for (let run = 0; run < CHANGES; run++) {
  const index = (run * 2_003) % ASSIGNMENTS;
  const parent = git(["rev-parse", "refs/heads/main"]).toString().trim();
  git(
    ["fast-import", "--quiet"],
    commitStream(
      "main",
      `bump ${assignmentName(index)}`,
      [[`assignments/${assignmentName(index)}.yaml`, assignmentYaml(index, run + 2)]],
      parent,
    ),
  );
  started = performance.now();
  cpu = process.cpuUsage();
  const outcome = await syncer.sync();
  changeMs.push(performance.now() - started);
  changeCpuMs.push(cpuMs(cpu));
  if (
    outcome.kind !== "applied" ||
    outcome.generations.length !== 1 ||
    outcome.generations[0].generation !== 2
  )
    throw new Error(
      `one-file change: expected one generation 2, got ${JSON.stringify(outcome).slice(0, 300)}`,
    );
}
const [firstChangeMs, ...steady] = changeMs;
steady.sort((a, b) => a - b);

syncer.close();
await hubStore.close();
rmSync(root, { recursive: true, force: true });

console.log(
  `# ${ASSIGNMENTS} assignments on ${NODES} nodes; load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")}`,
);
console.log(`# initial sync: ${initialMs.toFixed(0)} ms wall, ${initialCpuMs.toFixed(0)} ms cpu`);
console.log(`# one-file change syncs in order, wall (ms): ${changeMs.map((v) => v.toFixed(1)).join(", ")}`);
console.log(`# one-file change syncs in order, cpu (ms): ${changeCpuMs.map((v) => v.toFixed(1)).join(", ")}`);
console.log(`figure sync_initial_10k_ms ${initialMs.toFixed(0)} ms`);
console.log(`figure sync_one_file_change_ms ${firstChangeMs.toFixed(1)} ms`);
if (steady.length > 0)
  console.log(`figure sync_one_file_change_steady_ms ${steady[Math.floor(steady.length / 2)].toFixed(1)} ms`);
