/**
 * `command`: an argument vector run once per (instance, generation, resource), unless `creates` (a
 * path that exists means done) or `unless` (a check command that exits 0 means done) decide instead.
 * Output is captured, bounded, as evidence. A `gating` command that fails blocks every resource
 * after it (the engine does that); a redelivered attempt never runs it twice (the agent replays the
 * earlier result), and a new attempt of the same generation finds its run-once record.
 */

import { existsSync } from "node:fs";
import { parseDuration } from "../../model/duration.js";
import type { CommandResource } from "../../model/generated.js";
import type { Applied, Driver, DriverContext, Plan } from "../driver.js";
import { runEvidence } from "../evidence.js";
import { permanent, transient } from "../failure.js";
import { existsNoFollow } from "../paths.js";
import type { RunResult } from "../runner.js";

/** What decides whether a command is due, as read from the system. */
export interface CommandObservation {
  /** Whether the `creates` path exists. */
  created?: boolean;
  /** Exit code of the `unless` check (0: already done). */
  unlessExitCode?: number | null;
}

const DEFAULT_TIMEOUT = "5m";
const UNLESS_TIMEOUT_MS = 60_000;

/** Where the command runs (its `cwd` under the root; else the root, if it exists yet) and with what environment. */
function processOptions(resource: CommandResource, ctx: DriverContext) {
  const env = { ...ctx.env, ...resource.env };
  const cwd = ctx.paths.workingDirectory(resource.cwd);
  if (!existsSync(cwd))
    throw transient(
      "WorkingDirectoryMissing",
      `command ${resource.name}: working directory ${resource.cwd} does not exist`,
    );
  return { cwd, env };
}

/** Classifies a finished run that did not succeed. */
export function commandFailure(what: string, argv: string[], result: RunResult) {
  if (result.spawnError === "ENOENT" || result.exitCode === 127)
    return permanent(
      "CommandNotFound",
      `${what}: ${argv[0]} was not found on this host: install it or fix the command`,
      result.spawnError ? undefined : runEvidence(result),
    );
  if (result.spawnError === "EACCES" || result.exitCode === 126)
    return permanent("PermissionDenied", `${what}: ${argv[0]} is not executable`);
  if (result.spawnError)
    return transient("SpawnFailed", `${what}: could not start ${argv[0]} (${result.spawnError})`);
  if (result.timedOut) return transient("CommandTimedOut", `${what} timed out`, runEvidence(result));
  return transient(
    "CommandFailed",
    `${what} ${result.signal ? `was killed by ${result.signal}` : `exited with ${result.exitCode}`}`,
    runEvidence(result),
  );
}

/** The `command` driver. */
export const commandDriver: Driver<CommandResource, CommandObservation> = {
  kind: "command",

  async observe(resource, ctx) {
    const observed: CommandObservation = {};
    if (resource.creates !== undefined) observed.created = existsNoFollow(ctx.paths.host(resource.creates));
    if (resource.unless !== undefined && !observed.created) {
      const result = await ctx.runner.run({
        argv: resource.unless,
        ...processOptions(resource, ctx),
        timeoutMs: UNLESS_TIMEOUT_MS,
      });
      observed.unlessExitCode = result.exitCode;
    }
    return observed;
  },

  plan(resource, observed, facts): Plan {
    if (resource.creates !== undefined && observed.created)
      return { action: "skip", diff: [], note: `creates ${resource.creates} exists` };
    if (resource.unless !== undefined && observed.unlessExitCode === 0)
      return { action: "skip", diff: [], note: "unless check exited 0" };
    const ran = facts.runOnce;
    const decidedBySystem = resource.creates !== undefined || resource.unless !== undefined;
    if (!decidedBySystem && ran && ran.generation === facts.generation && ran.exitCode === 0)
      return { action: "none", diff: [], note: `ran for generation ${ran.generation} at ${ran.at}` };
    const diff: string[] = [];
    if (resource.creates !== undefined) diff.push(`${resource.creates} missing`);
    if (resource.unless !== undefined) diff.push(`unless check exited ${observed.unlessExitCode}`);
    if (!decidedBySystem) diff.push(`not yet run for generation ${facts.generation}`);
    return { action: "run", diff };
  },

  async apply(resource, _plan, _observed, ctx): Promise<Applied> {
    const result = await ctx.runner.run({
      argv: resource.run,
      ...processOptions(resource, ctx),
      timeoutMs: parseDuration(resource.timeout ?? DEFAULT_TIMEOUT),
    });
    const succeeded = !result.spawnError && !result.timedOut && result.exitCode === 0;
    if (!succeeded) throw commandFailure(`command ${resource.name}`, resource.run, result);
    // Durable before anything else happens: a crash now must not make it run again this generation.
    ctx.store.recordRunOnce(ctx.assignment, resource.name, {
      generation: ctx.generation,
      attemptId: ctx.attemptId,
      at: ctx.clock().toISOString(),
      exitCode: 0,
    });
    if (resource.creates !== undefined && !existsNoFollow(ctx.paths.host(resource.creates)))
      throw permanent(
        "CreatesMissing",
        `command ${resource.name} exited 0 but ${resource.creates} does not exist: fix the command or its creates path`,
        runEvidence(result),
      );
    return { action: "ran", evidence: runEvidence(result) };
  },
};
