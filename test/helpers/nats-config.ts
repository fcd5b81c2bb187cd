/**
 * `steward nats config --out bus ...args` run in process in a fresh temporary directory, with
 * exactly `env` as its environment; the directories go with `removeNatsConfigDirs`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main } from "../../src/cli/main.js";

const made: string[] = [];

export interface NatsConfigRun {
  code: number;
  /** The working directory; `bus` is the output directory in it. */
  dir: string;
  bus: string;
  stdout: string;
  stderr: string;
}

/** Runs it in `dir` (again, say), or in a fresh directory. */
export async function runNatsConfig(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  dir = fresh(),
): Promise<NatsConfigRun> {
  const out: string[] = [];
  const err: string[] = [];
  const io = {
    stdout: (t: string) => out.push(t),
    stderr: (t: string) => err.push(t),
    env,
    cwd: dir,
    isTty: false,
  };
  const code = await main(["nats", "config", "--out", "bus", ...args], io);
  return { code, dir, bus: join(dir, "bus"), stdout: out.join(""), stderr: err.join("") };
}

function fresh(): string {
  const dir = mkdtempSync(join(tmpdir(), "steward-nats-config-"));
  made.push(dir);
  return dir;
}

/** Removes every directory `runNatsConfig` made. */
export function removeNatsConfigDirs(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
}
