// Large fleet repositories for the benchmarks, written with `git fast-import`: the node documents
// and the commit streams both bench:sync and bench:action use (each writes its own assignments);
// where a simulated fleet's agents keep their files, and the hub that drives it (bench:hub,
// bench:nats).
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

/** `node-000`, `node-001`... */
export const nodeName = (i) => `node-${String(i).padStart(3, "0")}`;

/** A local-transport node in one of ten label groups, managing /srv. */
export function nodeYaml(i) {
  return `apiVersion: steward.dev/v1
kind: Node
metadata:
  name: ${nodeName(i)}
  labels:
    group: g${i % 10}
spec:
  transport: local
  roots: [/srv]
`;
}

/** steward.yaml of a fleet in apply mode. */
export const FLEET_YAML =
  "apiVersion: steward.dev/v1\nkind: Fleet\nmetadata:\n  name: bench\nspec:\n  mode: apply\n";

let time = 1_800_000_000;

/**
 * A `git fast-import` stream for one commit on `branch` (after `parent`, if given), one minute after
 * the previous one: `files` are [path, content] pairs, a `null` content deletes the path.
 */
export function commitStream(branch, message, files, parent) {
  time += 60;
  let stream = `commit refs/heads/${branch}\ncommitter Bench <bench@example.test> ${time} +0000\ndata ${Buffer.byteLength(message)}\n${message}\n`;
  if (parent) stream += `from ${parent}\n`;
  for (const [path, content] of files)
    stream +=
      content === null
        ? `D ${path}\n`
        : `M 100644 inline ${path}\ndata ${Buffer.byteLength(content)}\n${content}\n`;
  return `${stream}\n`;
}

/**
 * A fresh directory for the agents of a simulated fleet: in memory (/dev/shm) when there is one,
 * since many hosts do not share one disk and on one machine their fsyncs would queue on a single
 * device; BENCH_AGENTS_DIR overrides.
 */
export function agentsDirectory(prefix) {
  const base = process.env.BENCH_AGENTS_DIR ?? (existsSync("/dev/shm") ? "/dev/shm" : tmpdir());
  return mkdtempSync(join(base, prefix));
}

/**
 * The hub of a simulated fleet (bench:hub, bench:nats): state in `state`, `repo` synced only when
 * nudged, no commit statuses, silent; `root` is where local nodes apply. Imports the build in dist/
 * only when called: the benches that use this file for repositories alone run without it.
 */
export async function benchHub({ dir, state, repo, env, root, transports = [] }) {
  const { HubRuntime } = await import("../dist/cli/hub.js");
  const { statePathsIn } = await import("../dist/cli/hub-state.js");
  const pino = (await import("pino")).default;
  return new HubRuntime({
    paths: { ...statePathsIn(state), root, repo },
    repo,
    branch: "main",
    root,
    listen: "127.0.0.1:0",
    syncIntervalMs: 3_600_000,
    statusFlags: { status: "none" },
    logger: pino({ level: "silent" }),
    env,
    cwd: dir,
    transports,
  });
}

/** A NATS node in the `bench` label group, managing /srv. */
export function natsNodeYaml(node) {
  return `apiVersion: steward.dev/v1\nkind: Node\nmetadata:\n  name: ${node}\n  labels: {bench: "yes"}\nspec:\n  transport: nats\n  roots: [/srv]\n`;
}

/**
 * A fleet repository in `dir/fleet` on branch main: `write(files)` writes [path, content] pairs
 * and commits them all as `message`.
 */
export function fleetRepository(dir) {
  const repo = join(dir, "fleet");
  const env = { ...process.env, GIT_CONFIG_NOSYSTEM: "1", HOME: dir };
  const git = (...args) => execFileSync("git", args, { cwd: repo, env, stdio: "pipe" });
  mkdirSync(repo, { recursive: true });
  git("init", "-q", "-b", "main");
  return {
    repo,
    env,
    write(message, files) {
      for (const [path, content] of files) {
        mkdirSync(dirname(join(repo, path)), { recursive: true });
        writeFileSync(join(repo, path), content);
      }
      git("add", "-A");
      git("-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-q", "-m", message);
    },
  };
}
