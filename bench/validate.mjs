#!/usr/bin/env node
// Times `steward validate` as a whole process on a generated fleet repo of 10,000 assignment files
// and 200 nodes: start-up, walking, parsing, schema and semantic checks, rendering and hashing.
// Prints `figure validate_10k_files_ms <best of 3 after one warm-up> ms`.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const bin = join(root, "bin/steward.js");
const ASSIGNMENTS = Number(process.env.BENCH_ASSIGNMENTS ?? 10_000);
const NODES = 200;
const POOL_SIZE = 5;

if (!existsSync(join(root, "dist/cli/main.js"))) execFileSync("npm", ["run", "build"], { cwd: root });

/** Writes the generated repository into `dir`. */
function generate(dir) {
  mkdirSync(join(dir, "nodes"));
  mkdirSync(join(dir, "assignments"));
  mkdirSync(join(dir, "files"));
  writeFileSync(
    join(dir, "steward.yaml"),
    'apiVersion: steward.dev/v1\nkind: Fleet\nmetadata:\n  name: bench\nspec:\n  mode: apply\n  ignore: ["docs/**"]\n',
  );
  for (let n = 0; n < NODES; n++) {
    writeFileSync(
      join(dir, "nodes", `node-${n}.yaml`),
      `# yaml-language-server: $schema=../schemas/steward.schema.json
apiVersion: steward.dev/v1
kind: Node
metadata:
  name: node-${n}
  labels:
    pool: p${Math.floor(n / POOL_SIZE)}
    env: ${n % 4 === 0 ? "staging" : "prod"}
    zone: ${"abc"[n % 3]}
spec:
  transport: ${n % 2 === 0 ? "nats" : "local"}
  roots: [/srv, /etc/app, /var/lib/app]
  vars:
    httpPort: "${8000 + n}"
    dataDir: /var/lib/app/data
`,
    );
  }
  for (let s = 0; s < 20; s++)
    writeFileSync(join(dir, "files", `config-${s}.conf`), `# shared config ${s}\nworkers = ${s + 1}\n`);
  for (let a = 0; a < ASSIGNMENTS; a++) {
    const name = `app-${a}`;
    const placement =
      a % 3 === 0
        ? `  selector:\n    matchLabels:\n      pool: p${a % (NODES / POOL_SIZE)}\n`
        : `  nodes: [node-${a % NODES}, node-${(a * 7 + 1) % NODES}]\n`;
    writeFileSync(
      join(dir, "assignments", `${name}.yaml`),
      `# yaml-language-server: $schema=../schemas/steward.schema.json
apiVersion: steward.dev/v1
kind: Assignment
metadata:
  name: ${name}
  labels:
    team: t${a % 17}
spec:
${placement}  version: "1.${a % 10}.${a % 7}"
  resources:
    - kind: directory
      name: dir
      path: /srv/${name}
      mode: "0755"
    - kind: file
      name: config
      path: /srv/${name}/config.json
      mode: "0644"
      dependsOn: [dir]
      content: |
        {"port": \${node.vars.httpPort}, "app": "${name}", "version": "\${assignment.version}"}
    - kind: file
      name: shared
      path: /etc/app/${name}.conf
      source: files/config-${a % 20}.conf
    - kind: service
      name: ${name}
      exec: [node, /srv/${name}/server.mjs]
      cwd: /srv/${name}
      restartOn: [config, shared]
      dependsOn: [config, shared]
  probes:
    - kind: http
      name: version
      url: http://127.0.0.1:\${node.vars.httpPort}/version
      expectBody: "1.${a % 10}.${a % 7}"
  rollout:
    maxInFlight: 25%
`,
    );
  }
}

function run(dir) {
  const start = process.hrtime.bigint();
  const result = spawnSync(process.execPath, [bin, "validate", dir], { encoding: "utf8" });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (result.status !== 0) {
    process.stderr.write(`${result.stdout}${result.stderr}`);
    throw new Error(`steward validate exited ${result.status} on the generated repo`);
  }
  return { ms, summary: result.stdout.trim().split("\n").pop() };
}

// BENCH_DIR=path keeps the generated repo there (for profiling with `node --cpu-prof`).
const keep = process.env.BENCH_DIR;
const dir = keep ?? mkdtempSync(join(tmpdir(), "steward-bench-validate-"));
if (keep) {
  rmSync(keep, { recursive: true, force: true });
  mkdirSync(keep, { recursive: true });
}
try {
  generate(dir);
  const warm = run(dir);
  console.log(`# ${warm.summary}`);
  const times = [run(dir), run(dir), run(dir)].map((r) => r.ms);
  console.log(`# runs: ${times.map((t) => t.toFixed(0)).join(", ")} ms`);
  console.log(`figure validate_10k_files_ms ${Math.min(...times).toFixed(0)} ms`);
} finally {
  if (!keep) rmSync(dir, { recursive: true, force: true });
}
