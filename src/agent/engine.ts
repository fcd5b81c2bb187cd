/**
 * One attempt's apply: every resource of the bundle, in application order, each through its driver's
 * observe → plan → apply. The rules of failure live here and only here:
 *   - a resource whose `dependsOn` failed (or was blocked) is blocked by the root failure;
 *   - a failed (or blocked) gating command blocks every resource after it;
 *   - atomic groups apply all or nothing: when a member fails or is blocked, the members applied
 *     before it are restored to what they were, and the later ones are blocked.
 */
import type { Resource, ResourceOutcome } from "../model/generated.js";
import { type AnyDriver, APPLIED_ACTION, type DriverContext, inSync, type Plan } from "./driver.js";
import { driverOf } from "./drivers/index.js";
import { asResourceFailure } from "./failure.js";
import { applicationOrder } from "./order.js";
import type { RunOnceRecord } from "./store.js";

/** What one attempt did to one resource. */
export interface ResourceRun {
  index: number;
  resource: Resource;
  name: string;
  outcome: ResourceOutcome;
  /** Observation and plan, kept when the resource was already as desired (the report reuses them). */
  observation?: { observed: unknown; plan: Plan };
}

/** Tuning of an apply. */
export interface EngineOptions {
  /** How many independent filesystem resources may apply at once. Default 1024. */
  concurrency?: number;
}

interface GroupState {
  /** Name of the member whose failure (or block) failed the group. */
  failedAt?: string;
  applied: { run: ResourceRun; snapshot: unknown; driver: AnyDriver }[];
}

const CHANGED = new Set(["created", "updated", "removed", "ran", "started", "stopped", "restarted"]);
const NOT_DONE = new Set(["failed", "blocked", "restored"]);

/** The driver of a resource's kind. */
export function driverFor(resource: Resource): Promise<AnyDriver> {
  return driverOf(resource.kind);
}

function failedOutcome(resource: Resource, name: string, error: unknown): ResourceOutcome {
  const failure = asResourceFailure(error);
  const outcome: ResourceOutcome = {
    name,
    kind: resource.kind,
    action: "failed",
    failureClass: failure.failureClass,
    reason: failure.reason,
    message: failure.message,
  };
  if (failure.evidence) outcome.evidence = failure.evidence;
  return outcome;
}

/** Reads a resource from the system and plans it: the first half of apply, and all of an observation. */
export async function observeAndPlan(
  resource: Resource,
  ctx: DriverContext,
  runOnce: RunOnceRecord | undefined,
  changed: readonly string[],
): Promise<{ driver: AnyDriver; observed: unknown; plan: Plan }> {
  const driver = await driverFor(resource);
  // A secret this host cannot open fails the resource before anything of it is looked at.
  ctx.secrets?.check(resource);
  const observed = await driver.observe(resource, ctx);
  const plan = driver.plan(resource, observed, {
    generation: ctx.generation,
    state: ctx.state,
    changed,
    resources: ctx.resources,
    runOnce,
    ...(ctx.secrets ? { secretDigests: ctx.secrets.digests } : {}),
  });
  return { driver, observed, plan };
}

/**
 * One resource through observe → plan → apply. `prepare` runs before any change (an atomic group
 * captures what is there) and returns what to do once the change is made. Never throws.
 */
export async function applyResource(
  index: number,
  resource: Resource,
  name: string,
  ctx: DriverContext,
  runOnce: RunOnceRecord | undefined,
  changed: readonly string[],
  prepare?: (driver: AnyDriver, observed: unknown) => Promise<(run: ResourceRun) => void>,
): Promise<ResourceRun> {
  const run: ResourceRun = {
    index,
    resource,
    name,
    outcome: { name, kind: resource.kind, action: "unchanged" },
  };
  try {
    const { driver, observed, plan } = await observeAndPlan(resource, ctx, runOnce, changed);
    if (plan.conflict) {
      run.outcome = {
        ...run.outcome,
        action: "failed",
        failureClass: "permanent",
        reason: plan.conflict.reason,
        message: plan.conflict.message,
      };
      const evidence = driver.evidence?.(resource, observed, ctx);
      if (evidence) run.outcome.evidence = evidence;
    } else if (inSync(plan)) {
      run.outcome.action = APPLIED_ACTION[plan.action];
      if (plan.note) run.outcome.message = plan.note;
      run.observation = { observed, plan };
    } else {
      const done = await prepare?.(driver, observed);
      const applied = await driver.apply(resource, plan, observed, ctx);
      run.outcome.action = applied.action;
      const message = [plan.diff.join("; "), applied.message].filter(Boolean).join("; ");
      if (message) run.outcome.message = message;
      if (applied.evidence) run.outcome.evidence = applied.evidence;
      done?.(run);
    }
  } catch (error) {
    run.outcome = failedOutcome(resource, name, error);
  }
  return run;
}

/**
 * Applies every resource of an instance; returns one run per resource, in bundle order. The
 * directories whose entries changed are left in `ctx.dirty`: the caller flushes them with the
 * attempt's record (AgentStore.commitAttempts), in one flush.
 */
export async function applyResources(
  resources: readonly Resource[],
  ctx: DriverContext,
  runOnce: Readonly<Record<string, RunOnceRecord>>,
  options: EngineOptions = {},
): Promise<ResourceRun[]> {
  const steps = applicationOrder(resources);
  const runs: (ResourceRun | undefined)[] = resources.map(() => undefined);
  const position = new Map(steps.map((step, pos) => [step.index, pos]));
  const rootCause = new Map<number, string>();
  const changed: string[] = [];
  const groups = new Map<string, GroupState>();
  let failedGating: string | undefined;

  const block = (index: number, name: string, blockedBy: string, message: string): ResourceRun => {
    rootCause.set(index, blockedBy);
    return {
      index,
      resource: resources[index]!,
      name,
      outcome: { name, kind: resources[index]!.kind, action: "blocked", blockedBy, message },
    };
  };

  const failGroup = async (group: GroupState, groupName: string, failedAt: string) => {
    group.failedAt = failedAt;
    for (const entry of group.applied.reverse()) {
      const { run, snapshot, driver } = entry;
      const at = changed.indexOf(run.name);
      if (at >= 0) changed.splice(at, 1);
      if (!driver.restore) {
        run.outcome = {
          ...run.outcome,
          message: `atomic group ${groupName} failed at ${failedAt}; a ${run.resource.kind} cannot be restored, it stays applied`,
        };
        continue;
      }
      try {
        await driver.restore(run.resource, snapshot, ctx);
        rootCause.set(run.index, failedAt);
        run.outcome = {
          name: run.name,
          kind: run.resource.kind,
          action: "restored",
          blockedBy: failedAt,
          message: `restored to what it was: atomic group ${groupName} failed at ${failedAt}`,
        };
      } catch (error) {
        const failed = failedOutcome(run.resource, run.name, error);
        run.outcome = {
          ...failed,
          reason: "RestoreFailed",
          message: `could not restore after ${failedAt} failed: ${failed.message}`,
        };
      }
    }
    group.applied = [];
  };

  const runStep = async (pos: number): Promise<ResourceRun> => {
    const step = steps[pos]!;
    const resource = resources[step.index]!;
    const { name } = step;
    const group =
      resource.atomic !== undefined ? (groups.get(resource.atomic) ?? { applied: [] }) : undefined;
    if (group) groups.set(resource.atomic!, group);

    let blockedBy: string | undefined;
    let why = "";
    for (const dep of step.dependsOn) {
      const depRun = runs[dep]!;
      if (NOT_DONE.has(depRun.outcome.action)) {
        blockedBy = rootCause.get(dep) ?? depRun.name;
        why = `dependency ${depRun.name} was not applied`;
        break;
      }
    }
    if (!blockedBy && failedGating) {
      blockedBy = failedGating;
      why = `gating command ${failedGating} did not succeed`;
    }
    if (!blockedBy && group?.failedAt) {
      blockedBy = group.failedAt;
      why = `atomic group ${resource.atomic} failed at ${group.failedAt}`;
    }
    if (blockedBy) {
      const run = block(step.index, name, blockedBy, `not applied: ${why}`);
      if (group && !group.failedAt) await failGroup(group, resource.atomic!, blockedBy);
      if (resource.kind === "command" && resource.gating) failedGating ??= blockedBy;
      return run;
    }

    const run = await applyResource(
      step.index,
      resource,
      name,
      ctx,
      runOnce[name],
      changed,
      async (driver, observed) => {
        const snapshot = group && driver.capture ? await driver.capture(resource, observed, ctx) : undefined;
        return (applied) => {
          if (CHANGED.has(applied.outcome.action)) changed.push(name);
          group?.applied.push({ run: applied, snapshot, driver });
        };
      },
    );
    if (run.outcome.action === "failed") {
      rootCause.set(step.index, name);
      if (group) await failGroup(group, resource.atomic!, name);
      if (resource.kind === "command" && resource.gating) failedGating ??= name;
    }
    return run;
  };

  // A small scheduler: a step starts once everything it must follow has finished.
  const concurrency = options.concurrency ?? 1024;
  const pending = steps.map((step) => step.after.length);
  const followers = steps.map(() => [] as number[]);
  steps.forEach((step, pos) => {
    for (const index of step.after) followers[position.get(index)!]!.push(pos);
  });
  await new Promise<void>((resolve, reject) => {
    const ready = pending.flatMap((count, pos) => (count === 0 ? [pos] : []));
    let head = 0;
    let running = 0;
    let finished = 0;
    const launch = () => {
      if (finished === steps.length) {
        resolve();
        return;
      }
      while (running < concurrency && head < ready.length) {
        const pos = ready[head++]!;
        running++;
        runStep(pos).then((run) => {
          runs[run.index] = run;
          running--;
          finished++;
          for (const follower of followers[pos]!) if (--pending[follower]! === 0) ready.push(follower);
          launch();
        }, reject);
      }
    };
    launch();
  });
  return runs as ResourceRun[];
}
