/**
 * Host tools that drivers call (systemctl, docker/podman, dpkg-query/apt-get): whether they answer,
 * memoised per attempt, and a helper to run one and turn "not installed" into a clear permanent
 * failure instead of a cryptic spawn error.
 */
import type { DriverContext } from "./driver.js";
import { permanent } from "./failure.js";
import type { RunRequest, RunResult } from "./runner.js";

/** Runs a host tool; a missing tool is a permanent `ToolMissing` failure naming what to install. */
export async function runTool(
  ctx: DriverContext,
  argv: string[],
  install: string,
  options: Omit<RunRequest, "argv"> = {},
): Promise<RunResult> {
  const result = await ctx.runner.run({ env: ctx.env, timeoutMs: 120_000, ...options, argv });
  if (result.spawnError === "ENOENT")
    throw permanent("ToolMissing", `${argv[0]} is not installed on this host: ${install}`);
  return result;
}

/** Memoises `compute` under `key` for the current attempt or observation. */
export async function memo<T>(ctx: DriverContext, key: string, compute: () => Promise<T>): Promise<T> {
  if (ctx.memo.has(key)) return ctx.memo.get(key) as T;
  const value = await compute();
  ctx.memo.set(key, value);
  return value;
}
