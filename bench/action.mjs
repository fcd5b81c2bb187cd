// Benchmark of the GitHub Action on a large fleet (`npm run bench:action`, which bundles the Action
// first). Builds a checkout of 10,000 assignment files and 100 nodes whose pull request branch
// changes 10 files (8 assignments edited, one added, one removed), then runs the Action's entry,
// action/dist/index.mjs, as the runner does: a fresh `node` process with the environment a pull
// request workflow sets. The figure is the whole process, validate + plan + summary + outputs,
// median of the runs (`action_validate_plan_10k_ms`). Prints `figure NAME VALUE UNIT` lines.
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { commitStream, FLEET_YAML, nodeName, nodeYaml } from "./fleet.mjs";

const ASSIGNMENTS = Number(process.env.BENCH_ASSIGNMENTS ?? 10_000);
const NODES = 100;
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const entry = join(dirname(fileURLToPath(import.meta.url)), "../action/dist/index.mjs");

const root = mkdtempSync(join(tmpdir(), "steward-bench-action-"));
const workspace = join(root, "workspace");
const env = { ...process.env, GIT_CONFIG_NOSYSTEM: "1", HOME: root };
const git = (args, input) =>
  execFileSync("git", args, { cwd: workspace, env, input, maxBuffer: 1 << 30 })
    .toString()
    .trim();

const app = (i) => `app-${String(i).padStart(5, "0")}`;

/** An assignment on one node (every tenth on two, with a canary), with a directory and a config file. */
function assignment(i, version) {
  const nodes = i % 10 === 0 ? `${nodeName(i % NODES)}, ${nodeName((i + 1) % NODES)}` : nodeName(i % NODES);
  const rollout = i % 10 === 0 ? "  rollout:\n    canary:\n      count: 1\n      soak: 30s\n" : "";
  return `apiVersion: steward.dev/v1
kind: Assignment
metadata:
  name: ${app(i)}
spec:
  nodes: [${nodes}]
${rollout}  resources:
    - kind: directory
      path: /srv/${app(i)}
    - kind: file
      path: /srv/${app(i)}/config.json
      mode: "0644"
      content: |
        {"app": "${app(i)}", "port": ${10_000 + i}, "version": ${version}}
`;
}

/** Commits with `git fast-import`; returns the branch's new head. */
function commit(branch, message, files, parent) {
  git(["fast-import", "--quiet"], commitStream(branch, message, files, parent));
  return git(["rev-parse", `refs/heads/${branch}`]);
}

mkdirSync(workspace);
git(["init", "-q", "-b", "main"]);
const files = [["steward.yaml", FLEET_YAML]];
for (let i = 0; i < NODES; i++) files.push([`nodes/${nodeName(i)}.yaml`, nodeYaml(i)]);
for (let i = 0; i < ASSIGNMENTS; i++) files.push([`assignments/${app(i)}.yaml`, assignment(i, 1)]);
const base = commit("main", "fleet of 10,000", files);
const change = [];
for (let k = 0; k < 8; k++) change.push([`assignments/${app(k * 1_111)}.yaml`, assignment(k * 1_111, 2)]);
change.push([`assignments/${app(ASSIGNMENTS)}.yaml`, assignment(ASSIGNMENTS, 1)]);
change.push([`assignments/${app(ASSIGNMENTS - 1)}.yaml`, null]);
const head = commit("change", "ten files", change, base);
git(["checkout", "-q", "-f", "change"]);
// Instances: app-00000 (on two nodes) and 7 others edited, app-10000 added on two nodes, app-09999
// retired.
const expectedChanged = 2 + 7 + 2 + 1;

const event = join(root, "event.json");
writeFileSync(
  event,
  JSON.stringify({
    action: "synchronize",
    number: 1,
    pull_request: { number: 1, base: { ref: "main", sha: base }, head: { ref: "change", sha: head } },
  }),
);

function runAction(run) {
  const summary = join(root, `summary-${run}.md`);
  const output = join(root, `output-${run}.txt`);
  writeFileSync(summary, "");
  writeFileSync(output, "");
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [entry], {
      cwd: workspace,
      env: {
        PATH: process.env.PATH,
        GITHUB_ACTIONS: "true",
        GITHUB_EVENT_NAME: "pull_request",
        GITHUB_EVENT_PATH: event,
        GITHUB_WORKSPACE: workspace,
        GITHUB_STEP_SUMMARY: summary,
        GITHUB_OUTPUT: output,
        GITHUB_REPOSITORY: "bench/fleet",
        RUNNER_TEMP: root,
        INPUT_PATH: ".",
        INPUT_COMMENT: "false",
      },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let log = "";
    child.stdout.on("data", (chunk) => {
      log += chunk;
    });
    child.on("error", reject);
    child.on("close", (code) => {
      const ms = performance.now() - started;
      const outputs = readFileSync(output, "utf8");
      const changed = /changed-instances<<(\S+)\n(\d+)\n/.exec(outputs)?.[2];
      if (code !== 0 || !/valid<<(\S+)\ntrue\n/.test(outputs) || Number(changed) !== expectedChanged)
        reject(new Error(`run ${run}: exit ${code}, outputs ${outputs}\n${log.slice(0, 2000)}`));
      else resolve(ms);
    });
  });
}

const load = () =>
  loadavg()
    .map((v) => v.toFixed(2))
    .join(" ");
console.log(`load average before: ${load()}`);
const times = [];
for (let run = 0; run < RUNS; run++) {
  const ms = await runAction(run);
  times.push(ms);
  console.log(`run ${run + 1}: ${ms.toFixed(0)} ms`);
}
const median = [...times].sort((a, b) => a - b)[Math.floor(times.length / 2)];
console.log(`load average after: ${load()}`);
console.log(`figure action_validate_plan_10k_ms ${median.toFixed(0)} ms`);
console.log(`figure action_validate_plan_10k_first_ms ${times[0].toFixed(0)} ms`);
rmSync(root, { recursive: true, force: true });
