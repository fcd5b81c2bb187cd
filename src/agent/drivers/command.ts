/**
 * `command`: an argument vector run once per (instance, generation, resource), unless `creates` (a
 * path that exists means done) or `unless` (a check command that exits 0 means done) decide instead.
 * Each run is a journalled one-shot (oneshot.ts): its output goes to files, its exit status is
 * written by a wrapper, and a run whose end the agent did not see (it died meanwhile) is waited
 * for while it runs, read from its exit status once it ended, and otherwise `interrupted` — never
 * started again on the agent's own judgement. A `gating` command that fails blocks every resource
 * after it (the engine does that); a redelivered attempt never runs it twice (the agent replays the
 * earlier result).
 */

import { existsSync } from "node:fs";
import { parseDuration } from "../../model/duration.js";
import type { CommandResource } from "../../model/generated.js";
import type { Applied, Driver, DriverContext, Plan, PlanFacts } from "../driver.js";
import { runEvidence } from "../evidence.js";
import { ONE_SHOT_INTERRUPTED, permanent, transient } from "../failure.js";
import {
  awaitAdopted,
  keepIfLost,
  type OneShotContext,
  observeUnsettled,
  runEvidenceOf,
  runOneShot,
  settled,
  type UnsettledRun,
} from "../oneshot.js";
import { existsNoFollow } from "../paths.js";
import type { RunResult } from "../runner.js";
import type { RunOnceRecord } from "../store.js";

/** What decides whether a command is due, as read from the system. */
export interface CommandObservation {
  /** Whether the `creates` path exists. */
  created?: boolean;
  /** Exit code of the `unless` check (0: already done). */
  unlessExitCode?: number | null;
  /** The latest run, when the journal holds no outcome for it (its agent died): what is found of it now. */
  run?: UnsettledRun;
}

const DEFAULT_TIMEOUT = "5m";
const UNLESS_TIMEOUT_MS = 60_000;

/**
 * Where the command runs (its `cwd` under the root; else the root, if it exists yet) and with what
 * environment (secret values decrypted, here on the host, only now that it runs).
 */
async function processOptions(resource: CommandResource, ctx: DriverContext) {
  const own = ctx.secrets
    ? await ctx.secrets.environment(resource.env)
    : (resource.env as Record<string, string>);
  const env = { ...ctx.env, ...own };
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

/** The latest run as far as anyone knows: the journal's outcome, or the exit status its wrapper left. */
function knownOutcome(
  ran: RunOnceRecord | undefined,
  run: UnsettledRun | undefined,
): { generation: number; exitCode: number | null | undefined; at?: string } | undefined {
  if (ran && settled(ran)) return { generation: ran.generation, exitCode: ran.exitCode, at: ran.at! };
  if (run?.state === "ended") return { generation: run.generation, exitCode: run.exitCode };
  return undefined;
}

/** Why the command is due at this generation (empty: it is not), for a command no check decides. */
function unguardedPlan(facts: PlanFacts, run: UnsettledRun | undefined): Plan {
  const ran = facts.runOnce;
  const known = knownOutcome(ran, run);
  if (known?.generation === facts.generation) {
    if (known.exitCode === 0)
      return {
        action: "none",
        diff: [],
        note:
          ran?.outcomeFrom === "person"
            ? `recorded as ran for generation ${known.generation} by ${ran.decision?.by ?? "a person"} (task ${ran.decision?.task ?? "?"}): not run again`
            : known.at
              ? `ran for generation ${known.generation} at ${known.at}`
              : `ran for generation ${known.generation} (outcome read from its exit status)`,
      };
    return { action: "run", diff: [`last run for generation ${known.generation} exited ${known.exitCode}`] };
  }
  if (run?.state === "lost" && run.generation === facts.generation) {
    if (ran?.decision?.outcome === "rerun")
      return {
        action: "run",
        diff: [
          `the run started ${run.startedAt ?? "?"} was interrupted; ${ran.decision.by} decided to run it again (task ${ran.decision.task})`,
        ],
      };
    return {
      action: "none",
      diff: [],
      conflict: {
        reason: ONE_SHOT_INTERRUPTED,
        message: `the run started ${run.startedAt ?? "at an unknown time"} for generation ${run.generation} by attempt ${run.attemptId ?? "?"}${run.pid ? ` (pid ${run.pid})` : ""} was interrupted: the process is gone and left no exit status, so whether it took effect is unknown; it is not run again until a person decides (steward tasks resolve --outcome ran|rerun)`,
      },
    };
  }
  return { action: "run", diff: [`not yet run for generation ${facts.generation}`] };
}

/** The context of a one-shot run of this resource. */
function oneShotContext(resource: CommandResource, ctx: DriverContext): OneShotContext {
  return {
    store: ctx.store,
    runner: ctx.runner,
    assignment: ctx.assignment,
    resource: resource.name!,
    generation: ctx.generation,
    attemptId:
      ctx.attemptId ??
      (() => {
        throw new Error(`command ${resource.name}: a one-shot runs only as part of an attempt`);
      })(),
    clock: ctx.clock,
  };
}

/** The outcome of a finished run as what apply did, or the failure it was. */
function appliedFrom(
  resource: CommandResource,
  result: RunResult,
  ctx: DriverContext,
  note?: string,
): Applied {
  const succeeded = !result.spawnError && !result.timedOut && result.exitCode === 0;
  if (!succeeded) throw commandFailure(`command ${resource.name}`, resource.run, result);
  if (resource.creates !== undefined && !existsNoFollow(ctx.paths.host(resource.creates)))
    throw permanent(
      "CreatesMissing",
      `command ${resource.name} exited 0 but ${resource.creates} does not exist: fix the command or its creates path`,
      runEvidence(result),
    );
  return { action: "ran", evidence: runEvidence(result), ...(note ? { message: note } : {}) };
}

/** The `command` driver. */
export const commandDriver: Driver<CommandResource, CommandObservation> = {
  kind: "command",

  async observe(resource, ctx) {
    const observed: CommandObservation = {};
    const journal = ctx.store.runOnce(ctx.assignment)[resource.name ?? ""];
    if (journal && !settled(journal))
      observed.run = observeUnsettled(ctx.store, ctx.assignment, resource.name ?? "", journal);
    // While a run is under way, nothing else decides: it is waited for, never doubled.
    if (observed.run?.state === "running") return observed;
    if (resource.creates !== undefined) observed.created = existsNoFollow(ctx.paths.host(resource.creates));
    if (resource.unless !== undefined && !observed.created) {
      const result = await ctx.runner.run({
        argv: resource.unless,
        ...(await processOptions(resource, ctx)),
        timeoutMs: UNLESS_TIMEOUT_MS,
      });
      observed.unlessExitCode = result.exitCode;
    }
    return observed;
  },

  plan(resource, observed, facts): Plan {
    const run = observed.run;
    if (run?.state === "running")
      return {
        action: "run",
        diff: [
          `still running: started ${run.startedAt ?? "?"} for generation ${run.generation} by attempt ${run.attemptId ?? "?"} (pid ${run.pid}); waited for, never started twice`,
        ],
      };
    if (resource.creates !== undefined && observed.created)
      return { action: "skip", diff: [], note: `creates ${resource.creates} exists` };
    if (resource.unless !== undefined && observed.unlessExitCode === 0)
      return { action: "skip", diff: [], note: "unless check exited 0" };
    if (resource.creates === undefined && resource.unless === undefined) return unguardedPlan(facts, run);
    const diff: string[] = [];
    if (resource.creates !== undefined) diff.push(`${resource.creates} missing`);
    if (resource.unless !== undefined) diff.push(`unless check exited ${observed.unlessExitCode}`);
    return { action: "run", diff };
  },

  async apply(resource, _plan, observed, ctx): Promise<Applied> {
    const timeoutMs = parseDuration(resource.timeout ?? DEFAULT_TIMEOUT);
    const oneShot = oneShotContext(resource, ctx);
    if (observed.run?.state === "running") {
      const journal = ctx.store.runOnce(ctx.assignment)[resource.name!]!;
      const adopted = await awaitAdopted(oneShot, journal, timeoutMs);
      // This generation's run that ended with an outcome: the outcome is this resource's.
      if (adopted && journal.generation === ctx.generation)
        return appliedFrom(
          resource,
          adopted,
          ctx,
          `waited for the run started ${journal.startedAt ?? "?"} by attempt ${journal.attemptId ?? "?"}`,
        );
      // An earlier generation's run ended, or this one's was lost: decided afresh, by the ordinary
      // rules (a check for a guarded command; a person for a plain one).
      const again = await decideAfresh(resource, ctx);
      if (again.applied) return again.applied;
      return commandDriver.apply(resource, again.plan, again.observed, ctx);
    }
    // A run of an earlier generation whose outcome was lost stays a question after this one
    // replaces it — unless the command's own check decides whether it is done.
    keepIfLost(ctx.store, ctx.assignment, resource.name!);
    const result = await runOneShot(oneShot, {
      argv: resource.run,
      ...(await processOptions(resource, ctx)),
      timeoutMs,
      guarded: resource.creates !== undefined || resource.unless !== undefined,
    });
    if (result) return appliedFrom(resource, result, ctx);
    // Killed from outside while this agent watched, before its wrapper could say how it ended.
    const again = await decideAfresh(resource, ctx);
    if (again.applied) return again.applied;
    // A guarded command whose check says not done: not run again within this apply (whatever
    // killed it may do so again); the ordinary retry runs it, within the budget.
    throw transient(
      "CommandKilled",
      `command ${resource.name} was killed before it ended, and its ${resource.creates !== undefined ? `creates ${resource.creates}` : "unless check"} says it is not done: it runs again with the next attempt`,
      commandDriver.evidence?.(resource, again.observed, ctx),
    );
  },

  evidence(resource, observed, ctx) {
    return observed.run?.attemptId
      ? runEvidenceOf(ctx.store, ctx.assignment, resource.name ?? "", observed.run)
      : undefined;
  },
};

/**
 * Observes and plans the command again after a run ended or was lost: what it is now (`applied`:
 * skipped or done by a check, or interrupted — thrown), or the plan to run it.
 */
async function decideAfresh(
  resource: CommandResource,
  ctx: DriverContext,
): Promise<{ applied?: Applied; plan: Plan; observed: CommandObservation }> {
  const observed = await commandDriver.observe(resource, ctx);
  const plan = commandDriver.plan(resource, observed, {
    generation: ctx.generation,
    state: ctx.state,
    changed: [],
    resources: ctx.resources,
    runOnce: ctx.store.runOnce(ctx.assignment)[resource.name!],
    ...(ctx.secrets ? { secretDigests: ctx.secrets.digests } : {}),
  });
  if (plan.conflict) throw interrupted(resource, observed.run, ctx);
  if (plan.action !== "run")
    return { applied: { action: "skipped", ...(plan.note ? { message: plan.note } : {}) }, plan, observed };
  return { plan, observed };
}

/** The failure of a run whose outcome is lost, with what is known of it as evidence. */
function interrupted(resource: CommandResource, run: UnsettledRun | undefined, ctx: DriverContext) {
  const lost: CommandObservation = run ? { run: { ...run, state: "lost" } } : {};
  return permanent(
    ONE_SHOT_INTERRUPTED,
    `command ${resource.name}: the run started ${run?.startedAt ?? "earlier"} by attempt ${run?.attemptId ?? "?"} ended without an exit status: whether it took effect is unknown; it is not run again until a person decides (steward tasks resolve --outcome ran|rerun)`,
    commandDriver.evidence?.(resource, lost, ctx),
  );
}
