// Benchmark of the hub (`npm run bench:hub`, which builds dist/ first).
//
// A fleet repo of 1,000 instances (BENCH_NODES local nodes × BENCH_ASSIGNMENTS assignments, one
// small file each) runs on the real product path: the syncer, the hub, the local transport and a
// real agent per node applying under a temporary root. Figures:
//   hub_commit_to_converged_1k_ms  a commit changing every instance → all converged at the new generation,
//                                  on a hub that has taken one such commit before (as a running hub has)
//   hub_cold_commit_1k_ms          the same for the first such commit after the hub started: V8 is still
//                                  compiling the hub's code (about a third more CPU then)
//   hub_first_converge_1k_ms       from an empty state directory to all converged (agents starting)
//   hub_reports_per_s              full node reports taken in per second (durable, then reconciled)
// The hub's state (SQLite, git cache) is on disk, in BENCH_DIR (default: the temporary directory).
// The agents' roots and state go to memory (/dev/shm) when there is one, as in bench/nats.mjs: 200
// hosts do not share one disk, and on one machine their fsyncs would queue on a single device, which
// measures that device rather than steward. BENCH_AGENTS_DIR overrides (e.g. BENCH_AGENTS_DIR=/tmp
// for everything on one disk). BENCH_PHASES=1 shows when each step of the hub ran during the change.

import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { agentsDirectory, benchHub } from "./fleet.mjs";

const NODES = Number(process.env.BENCH_NODES ?? 200);
const ASSIGNMENTS = Number(process.env.BENCH_ASSIGNMENTS ?? 5);
const REPORTS = Number(process.env.BENCH_REPORTS ?? 20_000);
const TOTAL = NODES * ASSIGNMENTS;

const dir = mkdtempSync(join(process.env.BENCH_DIR ?? tmpdir(), "steward-bench-hub-"));
const agentsDir = agentsDirectory("steward-bench-hub-agents-");
const repo = join(dir, "fleet");
const env = { ...process.env, GIT_CONFIG_NOSYSTEM: "1", HOME: dir };
const git = (...args) => execFileSync("git", args, { cwd: repo, env, stdio: "pipe" });

function writeFleet(version) {
  mkdirSync(join(repo, "nodes"), { recursive: true });
  mkdirSync(join(repo, "assignments"), { recursive: true });
  for (let n = 0; n < NODES; n++)
    writeFileSync(
      join(repo, "nodes", `node-${n}.yaml`),
      `apiVersion: steward.dev/v1\nkind: Node\nmetadata:\n  name: node-${n}\n  labels: {bench: "yes"}\nspec:\n  transport: local\n  roots: [/srv]\n`,
    );
  for (let a = 0; a < ASSIGNMENTS; a++)
    writeFileSync(
      join(repo, "assignments", `app-${a}.yaml`),
      `apiVersion: steward.dev/v1\nkind: Assignment\nmetadata:\n  name: app-${a}\nspec:\n  selector: {matchLabels: {bench: "yes"}}\n  resources:\n    - kind: file\n      name: conf\n      path: /srv/app-${a}.conf\n      content: "version ${version}"\n`,
    );
}

function commit(message) {
  git("add", "-A");
  git("-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-q", "-m", message);
}

mkdirSync(repo, { recursive: true });
git("init", "-q", "-b", "main");
writeFleet(1);
commit("version 1");

const state = join(dir, "state");
const runtime = await benchHub({ dir, state, repo, env, root: join(agentsDir, "root") });

const convergedAt = (generation) =>
  runtime.store.db
    .prepare("SELECT count(*) AS n FROM intents WHERE status = 'converged' AND generation = ?")
    .get(generation).n;

async function waitConverged(generation) {
  for (;;) {
    if (convergedAt(generation) >= TOTAL) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

mkdirSync(state, { recursive: true });
// Each local node keeps its agent state in <state>/agents/<node>/ and applies under <root>/<node>/.
mkdirSync(join(agentsDir, "agents"));
symlinkSync(join(agentsDir, "agents"), join(state, "agents"));
let t0 = performance.now();
await runtime.start();
await waitConverged(1);
const first = performance.now() - t0;

// BENCH_PHASES=1: when each step of the hub first and last ran during the change, and for how long.
const phases = new Map();
if (process.env.BENCH_PHASES) {
  const hub = runtime.hub;
  const mark = (name, busy) => {
    const at = performance.now() - t0;
    const phase = phases.get(name) ?? { n: 0, first: at, busy: 0 };
    phase.n++;
    phase.last = at;
    phase.busy += busy;
    phases.set(name, phase);
  };
  // The hub's parts (hub.ts wires them): each step's method, wrapped where it lives.
  const steps = [
    [hub, "process"],
    [hub.intake, "takeIn"],
    [hub.relay, "relay"],
    [hub.inbox, "flush"],
    [hub.ingest, "result"],
    [hub.ingest, "report"],
  ];
  for (const [part, name] of steps) {
    const step = part[name];
    part[name] = function (...args) {
      const started = performance.now();
      const result = step.apply(this, args);
      // The steps are asynchronous: each is timed until it settles.
      if (typeof result?.finally === "function")
        return result.finally(() => mark(name, performance.now() - started));
      mark(name, performance.now() - started);
      return result;
    };
  }
  hub.onReconcile((outcome) => mark(`reconcile:${outcome.outcome}`, 0));
}

// A commit that changes every instance: sync (nudged as a webhook would), reconcile, apply, report.
// Twice: the first such commit after the start (cold: the hub's code is still being compiled), then
// the measured one, as a hub that has run for a while takes it.
async function change(version) {
  writeFleet(version);
  commit(`version ${version}`);
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  await fetch(`${runtime.http.url}/nudge`, { method: "POST", body: JSON.stringify({ sync: true }) });
  await waitConverged(version);
  const took = performance.now() - started;
  const cpu = process.cpuUsage(cpu0);
  return { took, cpuMs: (cpu.user + cpu.system) / 1000 };
}
// The HTTP client loads on first use: not the hub's time.
await fetch(`${runtime.http.url}/healthz`);
const cold = await change(2);
phases.clear();
t0 = performance.now();
const warm = await change(3);
for (const [name, p] of phases)
  console.log(
    `# phase ${name.padEnd(22)} ×${String(p.n).padStart(5)}  from ${p.first.toFixed(0).padStart(5)} ms  to ${p.last.toFixed(0).padStart(5)} ms  busy ${p.busy.toFixed(0).padStart(4)} ms`,
  );

// Report ingestion: real full reports, taken again and again (each newer than the last).
const events = runtime.hub.eventsFor("local");
const templates = [];
for (let n = 0; n < NODES; n++) {
  const row = runtime.store.db.prepare("SELECT agent FROM reports WHERE node = ?").get(`node-${n}`);
  const instances = runtime.store.db
    .prepare("SELECT body FROM observations WHERE node = ?")
    .all(`node-${n}`)
    .map((r) => JSON.parse(r.body));
  templates.push({ node: `node-${n}`, agent: JSON.parse(row.agent), instances });
}
const base = Date.now() + 60_000;
t0 = performance.now();
for (let i = 0; i < REPORTS; i++) {
  const template = templates[i % templates.length];
  events.report({
    apiVersion: "steward.dev/v1",
    kind: "Report",
    node: template.node,
    takenAt: new Date(base + i).toISOString(),
    seq: 1_000_000 + i,
    agent: template.agent,
    instances: template.instances,
  });
  if (i % 500 === 499) await new Promise((resolve) => setImmediate(resolve));
}
await runtime.hub.idle();
const ingest = performance.now() - t0;

await runtime.stop();
rmSync(dir, { recursive: true, force: true });
rmSync(agentsDir, { recursive: true, force: true });

console.log(
  `# ${TOTAL} instances: ${NODES} local nodes × ${ASSIGNMENTS} assignments; hub state in ${dir}, agents in ${agentsDir}`,
);
console.log(`figure hub_commit_to_converged_1k_ms ${warm.took.toFixed(0)} ms`);
console.log(
  `# that change: ${warm.cpuMs.toFixed(0)} ms of CPU in this process; load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")} (2-core machines shared with other work measure slower)`,
);
console.log(`figure hub_cold_commit_1k_ms ${cold.took.toFixed(0)} ms`);
console.log(`# the first change after the start: ${cold.cpuMs.toFixed(0)} ms of CPU in this process`);
console.log(`figure hub_first_converge_1k_ms ${first.toFixed(0)} ms`);
console.log(`figure hub_reports_per_s ${((REPORTS / ingest) * 1000).toFixed(0)} 1/s`);
process.exit(0);
