/**
 * `steward up` as a test runs it: a separate process (the CLI built from the current sources),
 * serving the web view until the test stops it; and the services the agents started, which keep
 * running after `steward up` exits (a later run adopts them), stopped by their recorded pids.
 */
import type { ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { eventually, startSteward } from "../hub/helpers/process.js";

/** Kills the services the agents under `state` started (`state/agents/<node>/services/...`). */
export function stopServicesOf(state: string): void {
  const agents = join(state, "agents");
  if (!existsSync(agents)) return;
  for (const node of readdirSync(agents)) {
    const services = join(agents, node, "services");
    if (!existsSync(services)) continue;
    for (const assignment of readdirSync(services))
      for (const file of readdirSync(join(services, assignment))) {
        const { pid } = JSON.parse(readFileSync(join(services, assignment, file), "utf8")) as { pid: number };
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // Already gone.
        }
      }
  }
}

export interface RunningUp {
  /** The fleet page's URL, as `steward up` printed it. */
  page: string;
  /** The hub's base URL (no trailing slash). */
  url: string;
  child: ChildProcess;
  /** What it printed so far. */
  output(): string;
  /** Stops it (SIGTERM), waits for it to end, and stops the services its agents started. */
  stop(): Promise<void>;
}

/** Starts `steward --state STATE up ...args` in `cwd` and waits until it prints the fleet page's URL. */
export async function startUp(options: {
  cwd: string;
  state: string;
  args?: string[];
  env?: NodeJS.ProcessEnv;
}): Promise<RunningUp> {
  const log = join(options.cwd, `up-${Date.now()}.log`);
  const child = await startSteward(["--state", options.state, "up", ...(options.args ?? [])], {
    cwd: options.cwd,
    log,
    ...(options.env ? { env: options.env } : {}),
  });
  const output = () => (existsSync(log) ? readFileSync(log, "utf8") : "");
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const page = await eventually(
    () => {
      if (child.exitCode !== null) throw new Error(`steward up ended (${child.exitCode}):\n${output()}`);
      return /steward up: the fleet, live: (http:\/\/\S+\/) /.exec(output())?.[1];
    },
    60_000,
    "steward up to print the fleet page's URL",
  );
  return {
    page,
    url: page.replace(/\/$/, ""),
    child,
    output,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
      stopServicesOf(options.state);
    },
  };
}
