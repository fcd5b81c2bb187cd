#!/usr/bin/env node
// A fault soak: `npm run soak:faults -- N` makes N random SIGKILLs over a rollout on real parts — a
// nats-server, the hub (`steward hub --nats`, SQLite) and one agent process per node
// (`steward agent --nats`) — while commits keep coming. Every assignment carries plain one-shots
// and guarded ones (`creates`, `unless`) that run for a moment, and files of 64 KiB. A kill is one of:
//   hub    the hub process (its agents keep running);
//   agent  one node's agent process (the one-shot it runs lives on, in a session of its own);
//   host   one node's agent and every one-shot it runs, as a power cut would: a plain one-shot killed
//          that way has really lost its outcome, and steward must ask a person about it.
// After an agent or host kill, every declared file of that node must be one version's whole
// content. At the end every process is back; the soak answers the OneShotInterrupted tasks as an
// operator would (`steward tasks resolve ID --outcome ran`: the run's line is in its log) and waits
// for the last commit to converge. It prints:
//   figure kills N, figure kills_inside_oneshot N (kills that landed while a one-shot ran),
//   figure duplicated_oneshots N, figure torn_files N, figure leftover_temp_files N,
//   figure interrupted_tasks N, figure lost_oneshots N (plain one-shots a host kill really cut
//   short: interrupted_tasks must equal it), figure unconverged_instances N.
// SOAK_NODES (default 3), SOAK_SEED (a number: the same kills again).
import { execFileSync, spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "..");
const KILLS = Number(process.argv[2] ?? 20);
const NODES = Number(process.env.SOAK_NODES ?? 3);
const ASSIGNMENTS = ["app", "db"];
const FILES = 8;
const FILE_BYTES = 64 * 1024;
let seed = Number(process.env.SOAK_SEED ?? Date.now() % 1_000_000);
const firstSeed = seed;
/** A small seeded generator (mulberry32), so a soak can be replayed. */
function random() {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

execFileSync("npm", ["run", "build"], { cwd: repoRoot, stdio: ["ignore", "ignore", "inherit"] });
const { NatsServerProcess, stopChild } = await import("../dist/transport/nats/server.js");
const { SqliteStore } = await import("../dist/hub/store/sqlite.js");
const { isSameProcess } = await import("../dist/agent/proc.js");
const { findTemporaryFiles } = await import("../dist/agent/temporary.js");

const dir = mkdtempSync(join(tmpdir(), "steward-soak-"));
const repo = join(dir, "fleet");
const hubState = join(dir, "hub");
const roots = join(dir, "roots");
const nodes = Array.from({ length: NODES }, (_, i) => `node-${i}`);
const steward = join(repoRoot, "bin", "steward.js");
const log = (text) => process.stderr.write(`soak: ${text}\n`);

// The fleet repository: every version of every file's content is remembered, so a torn file (a
// mix, or a part) is told apart from an old or a new one.
const contents = new Map();
function fileContent(assignment, index, version) {
  const head = `${assignment} file ${index} version ${version}\n`;
  return `${head}${"x".repeat(FILE_BYTES - head.length - 1)}\n`;
}
function assignmentYaml(assignment, version) {
  const srv = `/srv/${assignment}`;
  const resources = [{ kind: "directory", name: "srv", path: srv }];
  for (let i = 0; i < FILES; i++) {
    const path = `${srv}/f-${i}.conf`;
    const content = fileContent(assignment, i, version);
    if (!contents.has(path)) contents.set(path, new Set());
    contents.get(path).add(content);
    resources.push({ kind: "file", name: `f-${i}`, path, content });
  }
  // Each one-shot writes its line first, then works for a moment: long enough to be killed in.
  const line = (kind) => `echo "${version} ${kind}" >> "$STEWARD_ROOT${srv}/oneshots.log"`;
  resources.push(
    { kind: "command", name: "plain", run: ["sh", "-c", `${line("plain")}; sleep 0.7`] },
    {
      kind: "command",
      name: "guarded-creates",
      run: ["sh", "-c", `${line("creates")} && : > "$STEWARD_ROOT${srv}/done-${version}"; sleep 0.7`],
      creates: `${srv}/done-${version}`,
    },
    {
      kind: "command",
      name: "guarded-unless",
      run: ["sh", "-c", `${line("unless")} && : > "$STEWARD_ROOT${srv}/unless-${version}"; sleep 0.7`],
      unless: ["sh", "-c", `test -e "$STEWARD_ROOT${srv}/unless-${version}"`],
    },
  );
  return JSON.stringify({
    apiVersion: "steward.dev/v1",
    kind: "Assignment",
    metadata: { name: assignment },
    spec: { nodes, resources },
  });
}
const git = (...args) =>
  execFileSync("git", ["-c", "user.name=soak", "-c", "user.email=soak@example.com", ...args], {
    cwd: repo,
    stdio: "pipe",
  });
let version = 0;
function commit() {
  version++;
  for (const assignment of ASSIGNMENTS)
    writeFileSync(join(repo, "assignments", `${assignment}.yaml`), assignmentYaml(assignment, version));
  git("add", "-A");
  git("commit", "-q", "-m", `version ${version}`);
}
mkdirSync(join(repo, "nodes"), { recursive: true });
mkdirSync(join(repo, "assignments"), { recursive: true });
for (const node of nodes)
  writeFileSync(
    join(repo, "nodes", `${node}.yaml`),
    JSON.stringify({
      apiVersion: "steward.dev/v1",
      kind: "Node",
      metadata: { name: node },
      spec: { transport: "nats", roots: ["/srv"] },
    }),
  );
git("init", "-q", "-b", "main");
commit();

const server = new NatsServerProcess({ storeDir: join(dir, "nats") });
await server.start();

/** Starts `steward ARGS` with its output appended to a log file. */
function start(name, args) {
  const out = openSync(join(dir, `${name}.log`), "a");
  return spawn(process.execPath, [steward, ...args], { stdio: ["ignore", out, out] });
}
const processes = new Map();
const starters = {
  hub: () =>
    start("hub", [
      "--state",
      hubState,
      "hub",
      "--repo",
      repo,
      "--listen",
      "127.0.0.1:0",
      "--sync-interval",
      "1s",
      "--lease",
      "10s",
      "--status",
      "none",
      "--nats",
      server.url,
    ]),
};
const agentState = (node) => join(dir, "agents", node);
for (const node of nodes)
  starters[node] = () =>
    start(`agent-${node}`, [
      "--state",
      agentState(node),
      "agent",
      "--nats",
      server.url,
      "--node",
      node,
      "--root",
      join(roots, node),
      "--heartbeat",
      "1s",
    ]);
for (const [name, starter] of Object.entries(starters)) processes.set(name, starter());

/** One-shots running now on `node`: the journal's runs with no outcome whose process still runs. */
function runningOneShots(node) {
  const journals = join(agentState(node), "runonce");
  if (!existsSync(journals)) return [];
  const running = [];
  for (const file of readdirSync(journals)) {
    if (file.startsWith(".") || !file.endsWith(".json")) continue;
    let records;
    try {
      records = JSON.parse(readFileSync(join(journals, file), "utf8"));
    } catch {
      continue;
    }
    const assignment = decodeURIComponent(file.replace(/\.json$/, ""));
    for (const [resource, record] of Object.entries(records))
      if (record.at === undefined && record.pid && record.startTime && isSameProcess(record))
        running.push({ assignment, resource, ...record });
  }
  return running;
}

function kill(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once("exit", resolve);
    child.kill("SIGKILL");
  });
}

/** Every declared file of `node` that is neither absent nor one version's whole content. */
function tornFiles(node) {
  const torn = [];
  for (const [path, versions] of contents) {
    const host = join(roots, node, path);
    if (!existsSync(host)) continue;
    const text = readFileSync(host, "utf8");
    if (!versions.has(text)) torn.push(path);
  }
  return torn;
}

let kills = 0;
let killsInsideOneShot = 0;
let torn = 0;
let lostOneShots = 0;
const lost = new Set();
log(
  `${KILLS} kills over ${NODES} nodes × ${ASSIGNMENTS.length} assignments (seed ${firstSeed}); work in ${dir}`,
);
for (let round = 0; round < KILLS; round++) {
  if (round === 0 || random() < 0.6) commit();
  await sleep(200 + random() * 2300);
  const roll = random();
  const kind = roll < 0.3 ? "hub" : roll < 0.7 ? "agent" : "host";
  const node = nodes[Math.floor(random() * nodes.length)];
  const target = kind === "hub" ? "hub" : node;
  const running = kind === "hub" ? nodes.flatMap(runningOneShots) : runningOneShots(node);
  if (running.length > 0) killsInsideOneShot++;
  await kill(processes.get(target));
  kills++;
  if (kind === "host")
    for (const run of running) {
      try {
        process.kill(-run.pid, "SIGKILL");
      } catch {
        // It ended meanwhile.
      }
      const exit = join(
        agentState(node),
        "runs",
        encodeURIComponent(run.assignment),
        encodeURIComponent(run.resource),
        encodeURIComponent(run.attemptId),
        "exit",
      );
      const key = `${node} ${run.assignment} ${run.generation} ${run.resource}`;
      if (run.resource === "plain" && !existsSync(exit) && !lost.has(key)) {
        lost.add(key);
        lostOneShots++;
      }
    }
  if (kind !== "hub") {
    const found = tornFiles(node);
    if (found.length > 0) log(`torn after killing ${node}: ${found.join(", ")}`);
    torn += found.length;
  }
  log(
    `kill ${kills}: ${kind} ${target}${running.length > 0 ? ` during ${running.map((r) => `${r.assignment}/${r.resource}`).join(", ")}` : ""}`,
  );
  await sleep(100 + random() * 400);
  processes.set(target, starters[target]());
}

// Everything is back: answer what needs a person, and wait for the last commit to converge.
function hubStore() {
  return new SqliteStore(join(hubState, "hub.db"));
}
async function unconverged(store) {
  let count = 0;
  for (const { key, generation } of await store.desired.instances()) {
    const intent = await store.intents.get(key, generation);
    if (intent?.status !== "converged") count++;
  }
  return count;
}
const deadline = Date.now() + 180_000;
const answered = new Set();
let remaining = Number.POSITIVE_INFINITY;
while (Date.now() < deadline) {
  const store = hubStore();
  let open;
  try {
    open = (await store.tasks.list({ status: "open" })).filter((task) => task.type === "OneShotInterrupted");
    remaining = await unconverged(store);
  } finally {
    await store.close();
  }
  for (const task of open) {
    if (answered.has(task.id)) continue;
    answered.add(task.id);
    execFileSync(
      process.execPath,
      [
        steward,
        "--state",
        hubState,
        "tasks",
        "resolve",
        task.id,
        "--outcome",
        "ran",
        "--action",
        "soak: its line is in the log",
      ],
      { stdio: "ignore" },
    );
  }
  if (remaining === 0 && open.length === 0) break;
  await sleep(1000);
}

// What the hosts show.
let duplicated = 0;
for (const node of nodes)
  for (const assignment of ASSIGNMENTS) {
    const path = join(roots, node, "srv", assignment, "oneshots.log");
    if (!existsSync(path)) continue;
    const seen = new Map();
    for (const line of readFileSync(path, "utf8").split("\n").filter(Boolean))
      seen.set(line, (seen.get(line) ?? 0) + 1);
    for (const [line, times] of seen)
      if (times > 1) {
        duplicated += times - 1;
        log(`duplicated on ${node}: ${assignment} "${line}" ran ${times} times`);
      }
  }
for (const node of nodes) torn += tornFiles(node).length;

/** Temporary files of steward's own names left anywhere under `root`. */
function leftovers(root) {
  const found = findTemporaryFiles(root);
  for (const path of found) log(`leftover: ${path}`);
  return found.length;
}
const leftover = leftovers(roots) + leftovers(join(dir, "agents"));
const store = hubStore();
let interruptedTasks = 0;
try {
  interruptedTasks = (await store.tasks.list()).filter((task) => task.type === "OneShotInterrupted").length;
  remaining = await unconverged(store);
} finally {
  await store.close();
}

for (const child of processes.values()) await stopChild(child);
await server.stop();
console.log(`figure kills ${kills}`);
console.log(`figure kills_inside_oneshot ${killsInsideOneShot}`);
console.log(`figure duplicated_oneshots ${duplicated}`);
console.log(`figure torn_files ${torn}`);
console.log(`figure leftover_temp_files ${leftover}`);
console.log(`figure interrupted_tasks ${interruptedTasks}`);
console.log(`figure lost_oneshots ${lostOneShots}`);
console.log(`figure unconverged_instances ${remaining}`);
if (process.env.SOAK_KEEP) log(`kept ${dir}`);
else rmSync(dir, { recursive: true, force: true });
