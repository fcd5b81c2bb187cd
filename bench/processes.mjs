// The processes of a multi-process benchmark (bench:failover, bench:scale): a throw-away PostgreSQL
// server, a nats-server with per-node credentials from `steward nats config`, `steward hub`
// processes and echo agents (bench/nats-agents.mjs) in processes of their own; and what they cost
// (CPU and resident memory, read from /proc).
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const PG_BIN = process.env.STEWARD_PG_BIN ?? "/usr/lib/postgresql/15/bin";

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

export async function until(check, timeoutMs, what, everyMs = 100) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const started = performance.now();
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    // A probe that costs (a count over 100,000 rows) waits ten times its own time: the bench's own
    // queries stay under a tenth of a core, off the store the hubs are measured on.
    const spentMs = performance.now() - started;
    await new Promise((resolve) => setTimeout(resolve, Math.max(everyMs, 10 * spentMs)));
  }
}

/** CPU milliseconds a process has used (user + system), from /proc (Linux). */
export function cpuMs(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** Resident memory of a process in MiB, from /proc (Linux). */
export function rssMiB(pid) {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("VmRSS:"));
  return Number(line?.split(/\s+/)[1] ?? 0) / 1024;
}

/** PostgreSQL runs as the postgres user when we are root (it refuses root). */
function asPostgres(tool, args) {
  const path = join(PG_BIN, tool);
  if (!existsSync(path)) throw new Error(`${path} is missing: apt-get install -y postgresql`);
  const isRoot = process.getuid?.() === 0;
  execFileSync(isRoot ? "runuser" : path, isRoot ? ["-u", "postgres", "--", path, ...args] : args, {
    stdio: "pipe",
  });
}

/** A throw-away PostgreSQL server on a free port: `{ url, stop() }`. */
export async function startPostgres(prefix) {
  // Its own directory: the postgres user must reach it (a temporary directory is its creator's alone).
  const pgDir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(pgDir, 0o777);
  if (process.getuid?.() === 0) execFileSync("chown", ["postgres", pgDir]);
  const port = await freePort();
  const data = join(pgDir, "data");
  asPostgres("initdb", ["-D", data, "-A", "trust", "-U", "steward", "-E", "UTF8", "--locale=C.UTF-8"]);
  asPostgres("pg_ctl", [
    "-D",
    data,
    "-o",
    `-p ${port} -k ${pgDir} -c listen_addresses=127.0.0.1 -c max_connections=100 ${process.env.BENCH_PG_OPTIONS ?? ""}`,
    "-l",
    join(pgDir, "server.log"),
    "-w",
    "start",
  ]);
  return {
    url: `postgres://steward@127.0.0.1:${port}/postgres`,
    stop() {
      try {
        asPostgres("pg_ctl", ["-D", data, "-m", "immediate", "stop"]);
      } catch {}
      if (process.env.BENCH_KEEP) console.error(`# kept ${pgDir}`);
      else rmSync(pgDir, { recursive: true, force: true });
    },
  };
}

/** A nats-server for `nodes` (static credentials, one user per node) under `dir/nats`. */
export async function startNatsFleet(dir, nodes) {
  const { newUserSeed, planNatsConfig, writeNatsConfig } = await import("../dist/transport/nats/config.js");
  const { NatsServerProcess } = await import("../dist/transport/nats/server.js");
  const busDir = join(dir, "nats");
  writeNatsConfig(planNatsConfig({ dir: busDir, nodes }, () => undefined, newUserSeed));
  const server = new NatsServerProcess({ configFile: join(busDir, "nats-server.conf") });
  await server.start();
  return { server, credsDir: join(busDir, "credentials") };
}

/**
 * The environment `bin/steward.js` gives itself when run as a program (its `#!/usr/bin/env -S
 * NAME=VALUE node` line: malloc's tunables), for a hub started here as `node bin/steward.js` to
 * run as an installed one does.
 */
export function launcherEnv() {
  const shebang = readFileSync(join(root, "bin", "steward.js"), "utf8").split("\n", 1)[0];
  return Object.fromEntries(
    shebang
      .split(/\s+/)
      .filter((word) => /^[A-Z_]+=/.test(word))
      .map((word) => [word.slice(0, word.indexOf("=")), word.slice(word.indexOf("=") + 1)]),
  );
}

/**
 * `steward hub` on the fleet repository in `repo`, over NATS, logging warnings into `dir/name.log`;
 * `args` adds flags (`--store`, `--listen`, ...), `node` options for Node itself.
 */
export function startHub({ dir, name, repo, natsUrl, credsDir, args = [], node = [] }) {
  const log = openSync(join(dir, `${name}.log`), "a");
  return spawn(
    process.execPath,
    [
      ...node,
      join(root, "bin", "steward.js"),
      "--state",
      join(dir, name),
      "hub",
      "--repo",
      repo,
      "--nats",
      natsUrl,
      "--nats-creds",
      join(credsDir, "hub.nk"),
      "--status",
      "none",
      ...args,
    ],
    {
      cwd: dir,
      env: { ...process.env, ...launcherEnv(), STEWARD_LOG_LEVEL: process.env.BENCH_HUB_LOG ?? "warn" },
      stdio: ["ignore", log, log],
    },
  );
}

/** Echo agents for `nodes` in one process (bench/nats-agents.mjs); resolves once all run. */
export function startEchoAgents({ dir, natsUrl, credsDir, agentsDir, nodes, env = {} }) {
  const child = spawn(
    process.execPath,
    [
      join(root, "bench", "nats-agents.mjs"),
      JSON.stringify({ url: natsUrl, dir: agentsDir, credsDir, nodes }),
    ],
    { cwd: dir, env: { ...process.env, BENCH_AGENT: "echo", ...env }, stdio: ["ignore", "pipe", "inherit"] },
  );
  return new Promise((resolve, reject) => {
    child.stdout.on("data", (chunk) => {
      if (String(chunk).includes("ready")) resolve(child);
    });
    child.once("exit", (code) => reject(new Error(`agents exited with ${code}`)));
  });
}
