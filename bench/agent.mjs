#!/usr/bin/env node
// Times the agent as whole processes (`node bin/steward.js agent apply ...`), the way a host runs it:
// the first apply of 1,000 file resources into an empty temporary root, and a no-op re-apply of the
// same 1,000 (a new attempt, nothing changed). Prints the median of several runs as `figure` lines.
// Targets: first apply < 1500 ms, no-op < 500 ms. Run `npm run build` first (done here if missing).
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const bin = join(root, "bin/steward.js");
if (!existsSync(join(root, "dist/cli/main.js")))
  execFileSync("npm", ["run", "build"], { cwd: root, stdio: "inherit" });

const FILES = 1000;
const RUNS = Number(process.env.BENCH_RUNS ?? 7);

function bundle(attemptId) {
  const resources = [];
  for (let i = 0; i < FILES; i++) {
    const path = `/etc/bench/d${i % 10}/file-${i}.conf`;
    resources.push({
      kind: "file",
      name: path,
      path,
      mode: "0644",
      content: `# file ${i}\nkey = value-${i}\n${"x".repeat(160)}\n`,
    });
  }
  return {
    apiVersion: "steward.dev/v1",
    kind: "Bundle",
    attemptId,
    generation: 1,
    hash: "sha256:bench",
    issuedAt: new Date().toISOString(),
    spec: {
      assignment: "bench",
      node: "bench-1",
      state: "running",
      dependsOn: [],
      roots: ["/etc/bench"],
      resources,
      probes: [],
    },
  };
}

function apply(dir, file, expect) {
  const started = process.hrtime.bigint();
  const run = spawnSync(
    process.execPath,
    [
      bin,
      "agent",
      "apply",
      "--bundle",
      file,
      "--root",
      join(dir, "root"),
      "--state",
      join(dir, "state"),
      "--json",
    ],
    { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
  );
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  if (run.status !== 0) throw new Error(`agent apply exited ${run.status}: ${run.stderr}`);
  const { result } = JSON.parse(run.stdout);
  const actions = result.resources.filter((r) => r.action === expect).length;
  if (actions !== FILES) throw new Error(`expected ${FILES} ${expect}, got ${actions}`);
  return ms;
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const first = [];
const noop = [];
for (let run = 0; run < RUNS; run++) {
  const dir = mkdtempSync(join(tmpdir(), "steward-bench-agent-"));
  try {
    writeFileSync(join(dir, "first.json"), JSON.stringify(bundle(`01BENCHFIRST${run}`)));
    writeFileSync(join(dir, "again.json"), JSON.stringify(bundle(`01BENCHAGAIN${run}`)));
    first.push(apply(dir, join(dir, "first.json"), "created"));
    noop.push(apply(dir, join(dir, "again.json"), "unchanged"));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
console.log(
  `# ${RUNS} runs each; first apply ${first.map((v) => v.toFixed(0)).join(" ")} ms; no-op ${noop.map((v) => v.toFixed(0)).join(" ")} ms`,
);
console.log(`figure agent_first_apply_1k_files_ms ${median(first).toFixed(0)} ms`);
console.log(`figure agent_noop_1k_files_ms ${median(noop).toFixed(0)} ms`);
