/**
 * `steward hub --nats` and `steward agent --nats` as separate processes, as an operator runs them:
 * the flags every NATS end-to-end test repeats, in one place. Output goes to a log file.
 */
import type { ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { startSteward } from "../hub/helpers/process.js";

export interface NatsHubProcessOptions {
  /** Working directory. */
  cwd: string;
  /** Where its output goes; default `<cwd>/hub.log`. */
  log?: string;
  /** The hub's state directory (`--state`). */
  state: string;
  repo: string;
  url: string;
  /** The hub's credentials file, when the server requires them. */
  creds?: string;
  /** Runs before the CLI in the same bundle (fault injection; see stewardEntry). */
  prelude?: string;
  env?: NodeJS.ProcessEnv;
  /** More flags for `steward hub` (e.g. `--store URL`). */
  args?: string[];
}

/** Starts `steward hub --nats URL` on `repo`, syncing every second, its HTTP on a free port. */
export function startNatsHub(options: NatsHubProcessOptions): Promise<ChildProcess> {
  return startSteward(
    [
      "--state",
      options.state,
      "hub",
      "--repo",
      options.repo,
      "--listen",
      "127.0.0.1:0",
      "--sync-interval",
      "1s",
      "--nats",
      options.url,
      ...(options.creds ? ["--nats-creds", options.creds] : []),
      ...(options.args ?? []),
    ],
    {
      cwd: options.cwd,
      log: options.log ?? join(options.cwd, "hub.log"),
      ...(options.prelude ? { prelude: options.prelude } : {}),
      ...(options.env ? { env: options.env } : {}),
    },
  );
}

export interface NatsAgentProcessOptions {
  cwd: string;
  /** Where its output goes; default `<cwd>/agent-<node>.log`. */
  log?: string;
  /** The agent's state directory (`--state`); default `<cwd>/agent-<node>`. */
  state?: string;
  url: string;
  node: string;
  /** The node's root, under which resource paths are mapped; default `<cwd>/<node>`. */
  root?: string;
  creds?: string;
  /** Heartbeat interval (a duration); default 1s. */
  heartbeat?: string;
}

/** Starts `steward agent --nats URL --node NODE --root ROOT`. */
export function startNatsAgent(options: NatsAgentProcessOptions): Promise<ChildProcess> {
  return startSteward(
    [
      "--state",
      options.state ?? join(options.cwd, `agent-${options.node}`),
      "agent",
      "--nats",
      options.url,
      ...(options.creds ? ["--creds", options.creds] : []),
      "--node",
      options.node,
      "--root",
      options.root ?? join(options.cwd, options.node),
      "--heartbeat",
      options.heartbeat ?? "1s",
    ],
    { cwd: options.cwd, log: options.log ?? join(options.cwd, `agent-${options.node}.log`) },
  );
}

/**
 * Runs `check`; when it fails, the error carries the last lines of every process's log in `dir`
 * (`*.log`), so a run that failed on a loaded machine says what the hub and agents were doing.
 */
export async function withLogs<T>(dir: string, check: () => Promise<T>, lines = 40): Promise<T> {
  try {
    return await check();
  } catch (error) {
    const logs = readdirSync(dir)
      .filter((name) => name.endsWith(".log"))
      .map(
        (name) =>
          `--- ${name}\n${readFileSync(join(dir, name), "utf8").trimEnd().split("\n").slice(-lines).join("\n")}`,
      );
    if (error instanceof Error) error.message += `\n${logs.join("\n")}`;
    throw error;
  }
}
