/**
 * One reconcile of one instance, as an ordered list of steps, inside the unit of work the hub gives
 * it (one savepoint per instance): load desired → supersede older generations → load the intent, its last attempt and
 * the latest observation → decide (decide.ts, pure) → write the intent, the attempt with its outbox
 * row, and the instance's conditions → release what this change unblocks (dependents waiting on
 * dependsOn, held members of its rollout) → record the rollout's pause.
 */
import type { Logger } from "pino";
import type { Bundle, OneShotDecision } from "../model/generated.js";
import { logAttemptChange, newAttempt, nextAttempt } from "./attempts.js";
import type { Clock } from "./clock.js";
import { markOpen, markResolved } from "./conditions.js";
import {
  compare,
  type DecideInput,
  type Decision,
  decide,
  type InstanceCondition,
  type InterruptedOneShot,
  interruptedOneShots,
  type Timing,
} from "./decide.js";
import type {
  AttemptRecord,
  ConditionRecord,
  ConditionType,
  DesiredInstance,
  IntentRecord,
  IntentStatus,
  NodeRecord,
  Resolver,
} from "./records.js";
import { type CanaryState, maxInFlight, rolloutGate } from "./rollout.js";
import type { StoreReads, UnitOfWork } from "./store/store.js";

/** What a reconcile is given besides its unit of work. */
export interface ReconcileContext {
  clock: Clock;
  newId: () => string;
  timing: Timing;
  random: () => number;
  /** Whether this hub runs the node's transport. */
  transportEnabled: (node: NodeRecord) => boolean;
  log: Logger;
}

export interface ReconcileOutcome {
  key: string;
  /** Revisions whose progress this reconcile may have changed (the current one, superseded ones). */
  revisions: string[];
  /** The branch decide took (or `missing` for a key with no instance). */
  outcome: string;
  requeueAt?: number;
  /** Attempts created; their outbox rows wait for the relay. */
  dispatched: string[];
  /** A node to ask for a fresh report. */
  requestReport?: string;
  /** Keys this change unblocked: reconcile them next. */
  follow: string[];
  opened: ConditionRecord[];
  resolved: ConditionRecord[];
}

/** Conditions whose subject is an instance and that the reconciler resolves by observation. */
const INSTANCE_CONDITIONS: readonly ConditionType[] = [
  "Blocked",
  "Stuck",
  "Ambiguous",
  "ProbeFailing",
  "DriftUnhealed",
  "DestructiveRepairNeeded",
  "OneShotInterrupted",
];

const RESOLVER: Partial<Record<ConditionType, Resolver>> = {
  Blocked: "operator",
  DestructiveRepairNeeded: "operator",
  HumanProcedureRequired: "operator",
  OneShotInterrupted: "operator",
};

const IN_PROGRESS: readonly IntentStatus[] = ["dispatched", "verifying", "ambiguous", "backoff"];
const FAILED: readonly IntentStatus[] = ["blocked", "stuck"];

/** The rollout bucket of a status: what the rollout counts. */
function bucket(status: IntentStatus | undefined): "progress" | "failed" | "converged" | "other" {
  if (status === undefined) return "other";
  if (IN_PROGRESS.includes(status)) return "progress";
  if (FAILED.includes(status)) return "failed";
  return status === "converged" ? "converged" : "other";
}

export function freshIntent(desired: DesiredInstance, now: string): IntentRecord {
  const intent: IntentRecord = {
    instanceKey: desired.key,
    generation: desired.generation,
    assignment: desired.assignment,
    node: desired.node,
    revision: desired.revision,
    hash: desired.hash,
    state: desired.spec.state,
    status: "pending",
    failures: 0,
    everConverged: false,
    createdAt: now,
    updatedAt: now,
  };
  if (desired.spec.version !== undefined) intent.version = desired.spec.version;
  return intent;
}

/**
 * The message an attempt carries: the instance's whole desired spec at its generation, and what a
 * person decided about its interrupted one-shots.
 */
export function bundleOf(
  desired: DesiredInstance,
  attemptId: string,
  issuedAt: string,
  decisions: readonly OneShotDecision[] = [],
): Bundle {
  const bundle: Bundle = {
    apiVersion: "steward.dev/v1",
    kind: "Bundle",
    attemptId,
    generation: desired.generation,
    hash: desired.hash,
    spec: desired.spec,
    budget: { attempts: desired.budget.attempts, withinMs: desired.budget.withinMs },
    issuedAt,
  };
  if (decisions.length > 0) bundle.decisions = [...decisions];
  return bundle;
}

/**
 * Runs of interrupted one-shots the node still reports, with the answer a person gave about each
 * (from the task of the `OneShotInterrupted` condition that named it): what the next attempt
 * carries. Read only when the node reports such a run (rarely): a reconcile costs no query else.
 */
export async function answeredOneShots(
  store: StoreReads,
  desired: DesiredInstance,
  reported: readonly InterruptedOneShot[],
): Promise<OneShotDecision[]> {
  const runs = reported.filter((oneShot) => oneShot.run !== undefined);
  if (runs.length === 0) return [];
  // A question opened before any report named the run (from the attempt's word alone) names its
  // resource and generation: its answer is about that run all the same.
  const byRun = new Map(runs.map((oneShot) => [`${oneShot.resource}\0${oneShot.run}`, oneShot]));
  const byGeneration = new Map(
    runs.map((oneShot) => [`${oneShot.resource}\0@${oneShot.generation}`, oneShot]),
  );
  const decisions: OneShotDecision[] = [];
  for (const condition of await store.conditions.list({
    type: "OneShotInterrupted",
    subjectKind: "instance",
    subject: desired.key,
  })) {
    const task = await store.tasks.ofCondition(condition.id);
    // Only ran and rerun answer a one-shot's question (tasks.ts checks the outcome against the type).
    if (task?.status !== "resolved" || (task.outcome !== "ran" && task.outcome !== "rerun")) continue;
    for (const asked of (condition.evidence.oneShots ?? []) as InterruptedOneShot[]) {
      const key = asked.run
        ? `${asked.resource}\0${asked.run}`
        : `${asked.resource}\0@${asked.generation ?? condition.generation}`;
      const found = byRun.get(key) ?? byGeneration.get(key);
      if (!found?.run) continue;
      byRun.delete(`${found.resource}\0${found.run}`);
      byGeneration.delete(`${found.resource}\0@${found.generation}`);
      decisions.push({
        resource: found.resource,
        run: found.run,
        outcome: task.outcome,
        task: task.id,
        by: task.resolvedBy ?? "operator",
      });
    }
  }
  return decisions;
}

/** Whether two intents differ in anything but `updatedAt` (every field is a scalar; absent is undefined). */
function sameIntent(a: IntentRecord, b: IntentRecord): boolean {
  const x = a as unknown as Record<string, unknown>;
  const y = b as unknown as Record<string, unknown>;
  for (const key in x) if (key !== "updatedAt" && x[key] !== y[key]) return false;
  for (const key in y) if (key !== "updatedAt" && x[key] !== y[key]) return false;
  return true;
}

export async function reconcileInstance(
  ctx: ReconcileContext,
  tx: UnitOfWork,
  key: string,
): Promise<ReconcileOutcome> {
  const store = tx;
  const nowDate = ctx.clock.now();
  const now = nowDate.getTime();
  const nowIso = nowDate.toISOString();
  const result: ReconcileOutcome = {
    key,
    revisions: [],
    outcome: "missing",
    dispatched: [],
    follow: [],
    opened: [],
    resolved: [],
  };

  // Load desired.
  const desired = await store.desired.instance(key);
  if (!desired) return result;
  result.revisions.push(desired.revision);

  // Supersede older generations at once: their retries, backoff and waits never delay this one.
  let supersededNote: string | undefined;
  for (const older of await store.intents.olderLive(key, desired.generation)) {
    const before = older.status;
    const superseded: IntentRecord = {
      ...older,
      status: "superseded",
      supersededBy: desired.generation,
      updatedAt: nowIso,
    };
    delete superseded.nextAttemptAt;
    delete superseded.deadlineAt;
    delete superseded.holdReason;
    await store.intents.save(superseded);
    // Only the last attempt can still be in flight: a new one is made only when none is.
    const last = older.lastAttemptId ? await store.attempts.get(older.lastAttemptId) : undefined;
    if (last) await supersedeAttempt(ctx, tx, last, desired.generation, nowIso);
    supersededNote = `generation ${desired.generation} supersedes generation ${older.generation}`;
    result.revisions.push(older.revision);
    // What it held (a slot, a failure, a member held back by a pause) the old rollout no longer has.
    if (bucket(before) !== "converged")
      await releaseRollout(ctx, tx, older, nowIso, result, { enteredFailure: false });
  }

  // Load the intent, its last attempt and what the node last reported.
  const existing = await store.intents.get(key, desired.generation);
  const intent = existing ?? freshIntent(desired, nowIso);
  const attempt = intent.lastAttemptId ? await store.attempts.get(intent.lastAttemptId) : undefined;
  const node = await store.nodes.get(desired.node);
  const report = await store.observations.reportOf(desired.node);
  const input: DecideInput = {
    now,
    desired,
    intent,
    dependencies: [],
    transportEnabled: node !== undefined && ctx.transportEnabled(node),
    random: ctx.random,
    timing: ctx.timing,
  };
  for (const assignment of desired.spec.dependsOn) {
    const dependency = await store.desired.instance(`${assignment}@${desired.node}`);
    const placed = dependency !== undefined && !dependency.retiredAt;
    input.dependencies.push({
      assignment,
      placed,
      converged: placed && compare(dependency, await store.observations.get(dependency.key)).converged,
    });
  }
  if (attempt) input.attempt = attempt;
  const observed = await store.observations.get(key);
  if (observed) input.observed = observed;
  // Asked once per reconcile; decide gets what the node reports and what was answered of it.
  const reported = interruptedOneShots(desired, observed);
  const answered = await answeredOneShots(store, desired, reported);
  input.interrupted = reported;
  if (answered.length > 0) input.answeredRuns = new Set(answered.map((decision) => decision.run));
  if (report) input.reportTakenAt = Date.parse(report.takenAt);
  if (node) input.node = node;

  let decision = decide(input);
  if (decision.needsRolloutGate) {
    input.rolloutGate = await gateFor(tx, desired, now);
    decision = decide(input);
  }
  result.outcome = decision.outcome;
  if (decision.requeueAt !== undefined) result.requeueAt = decision.requeueAt;
  if (decision.requestReport) result.requestReport = desired.node;

  // Write what was decided.
  if (decision.attempt) {
    await store.attempts.save(decision.attempt);
    logAttemptChange(ctx.log, decision.attempt, attempt);
  }
  const next = decision.intent;
  if (decision.dispatch) {
    const id = ctx.newId();
    const created = newAttempt({
      id,
      instanceKey: key,
      generation: desired.generation,
      assignment: desired.assignment,
      node: desired.node,
      at: nowIso,
    });
    await store.attempts.insert(created, JSON.stringify(bundleOf(desired, id, nowIso, answered)));
    next.lastAttemptId = id;
    delete next.deadlineAt;
    result.dispatched.push(id);
    ctx.log.info(
      {
        attemptId: id,
        instance: key,
        generation: desired.generation,
        node: desired.node,
        attempt: next.failures + 1,
      },
      "attempt created for generation %d",
      desired.generation,
    );
  }
  if (!existing || !sameIntent(existing, next)) await store.intents.save({ ...next, updatedAt: nowIso });

  await recordConditions(ctx, tx, desired, decision, supersededNote, nowIso, result);

  // Release what this change unblocks.
  const was = existing?.status;
  if (next.status === "converged" && was !== "converged")
    result.follow.push(...(await store.intents.keysOfNode(desired.node, ["waiting"])));
  if (bucket(was) !== bucket(next.status))
    await releaseRollout(ctx, tx, desired, nowIso, result, {
      enteredFailure: bucket(next.status) === "failed",
      ...(bucket(next.status) === "progress" ? { started: key } : {}),
    });
  return result;
}

async function recordConditions(
  ctx: ReconcileContext,
  tx: UnitOfWork,
  desired: DesiredInstance,
  decision: Decision,
  supersededNote: string | undefined,
  now: string,
  result: ReconcileOutcome,
): Promise<void> {
  const held = new Set<ConditionType>();
  for (const condition of decision.conditions) {
    held.add(condition.type);
    const { condition: record, change } = await markOpen(
      tx,
      await conditionInput(tx, desired, condition),
      now,
      ctx.newId,
    );
    if (change === "opened") {
      result.opened.push(record);
      ctx.log.warn(
        { attemptId: record.attemptId, instance: desired.key, condition: record.type, reason: record.reason },
        "condition %s opened: %s",
        record.type,
        record.message,
      );
    }
  }
  const open = await tx.conditions.openOf("instance", desired.key);
  for (const condition of open) {
    if (held.has(condition.type) || !INSTANCE_CONDITIONS.includes(condition.type)) continue;
    // A question about a one-shot whose outcome is lost closes when a person answers it (tasks.ts):
    // nothing a node does later tells whether that run took effect.
    if (condition.type === "OneShotInterrupted") continue;
    const resolution =
      condition.generation !== undefined && condition.generation < desired.generation && supersededNote
        ? supersededNote
        : decision.resolution;
    const resolved = await markResolved(tx, condition.type, "instance", desired.key, now, resolution);
    if (resolved) {
      result.resolved.push(resolved);
      ctx.log.info(
        { attemptId: resolved.attemptId, instance: desired.key, condition: resolved.type },
        "condition %s resolved: %s",
        resolved.type,
        resolution,
      );
    }
  }
}

/**
 * Ends an older generation's attempt: one never handed over is cancelled (its outbox row goes), one
 * in flight or ambiguous is superseded — its lease no longer matters and a late result is evidence.
 */
async function supersedeAttempt(
  ctx: ReconcileContext,
  tx: UnitOfWork,
  attempt: AttemptRecord,
  by: number,
  now: string,
): Promise<void> {
  const ended = nextAttempt(attempt, { kind: "superseded", at: now, by });
  if (!ended) return;
  await tx.attempts.save(ended);
  if (attempt.status === "queued") await tx.attempts.deleteOutbox([attempt.id]);
  ctx.log.info(
    {
      attemptId: attempt.id,
      instance: attempt.instanceKey,
      generation: attempt.generation,
      was: attempt.status,
    },
    "attempt %s: superseded by generation %d",
    attempt.status === "queued" ? "cancelled before dispatch" : "ended",
    by,
  );
}

/** The condition as recorded: on the instance, at the generation (and so the revision) it is about. */
async function conditionInput(store: StoreReads, desired: DesiredInstance, condition: InstanceCondition) {
  const generation = condition.generation ?? desired.generation;
  const revision =
    generation === desired.generation
      ? desired.revision
      : ((await store.desired.at(desired.key, generation))?.revision ?? desired.revision);
  return {
    ...condition,
    subjectKind: "instance" as const,
    subject: desired.key,
    resolver: RESOLVER[condition.type] ?? ("steward" as Resolver),
    assignment: desired.assignment,
    node: desired.node,
    revision,
    generation,
  };
}

/** The rollout gate for a first attempt of `desired`. Counts only what the policy needs (indexed). */
async function gateFor(store: StoreReads, desired: DesiredInstance, now: number) {
  const policy = desired.rollout;
  const { assignment, revision } = desired;
  const decision = await store.rollouts.decision(assignment, revision);
  const canaries: CanaryState[] = [];
  const canary = policy.canary;
  if (canary) {
    const names: string[] = [];
    if (canary.nodes) {
      for (const node of canary.nodes)
        if ((await store.desired.instance(`${assignment}@${node}`))?.revision === revision) names.push(node);
    } else names.push(...(await store.rollouts.nodes(assignment, revision, Math.max(0, canary.count ?? 1))));
    for (const node of names) {
      const key = `${assignment}@${node}`;
      const member = await store.desired.instance(key);
      const intent = member ? await store.intents.get(key, member.generation) : undefined;
      const converged = member !== undefined && compare(member, await store.observations.get(key)).converged;
      const state: CanaryState = { node, converged };
      if (converged && intent?.convergedAt) state.convergedAt = Date.parse(intent.convergedAt);
      canaries.push(state);
    }
  }
  const limited = policy.maxInFlight !== undefined;
  return rolloutGate({
    node: desired.node,
    policy,
    size: limited ? await store.rollouts.size(assignment, revision) : 0,
    counts: {
      failed: await store.rollouts.countFailed(assignment, revision),
      inProgress: limited ? await store.rollouts.countInFlight(assignment, revision) : 0,
    },
    canaries,
    ...(decision?.decision === "pause" ? { pausedBy: { by: decision.by, reason: decision.reason } } : {}),
    now,
  });
}

/** The first failures of a rollout, named as the pause names them: instance, status, reason, attempt. */
function failureList(failures: readonly IntentRecord[]): string {
  return failures
    .map(
      (i) =>
        `${i.instanceKey} ${i.status} (${i.reason ?? "?"}${i.lastAttemptId ? `, attempt ${i.lastAttemptId}` : ""})`,
    )
    .join(", ");
}

/**
 * After a member of a rollout changed bucket, or something it depends on changed (a node drained,
 * went silent or came back; an operator paused or resumed it): raise, keep or resolve
 * `RolloutPaused`, and hand freed slots to held members (only as many as can start, so a 1,000-node
 * rollout does not re-queue everyone). A pause resolves by observation: when the rollout is seen
 * moving again (a member starts, or none is held back any more). Cheap when there is nothing to do:
 * no failure, no pause open, nobody held.
 */
async function releaseRollout(
  ctx: ReconcileContext,
  tx: UnitOfWork,
  rollout: { assignment: string; revision: string },
  now: string,
  result: Pick<ReconcileOutcome, "follow" | "opened" | "resolved">,
  change: { enteredFailure: boolean; started?: string },
): Promise<void> {
  const store = tx;
  const { assignment, revision } = rollout;
  const subject = `${assignment}@${revision}`;
  const pause = await store.conditions.findOpen("RolloutPaused", "rollout", subject);
  const anyHeld = await store.rollouts.anyHeld(assignment, revision);
  if (!change.enteredFailure && !pause && !anyHeld) return;
  const decision = await store.rollouts.decision(assignment, revision);
  // The operator's pause holds the rollout (the gate says so); only their resume lifts it.
  if (decision?.decision === "pause") return;
  const member = (await store.rollouts.nodes(assignment, revision, 1))[0];
  const policy = member ? (await store.desired.instance(`${assignment}@${member}`))?.rollout : undefined;
  const failed = await store.rollouts.countFailed(assignment, revision);
  const tolerated = policy?.maxFailures ?? 0;
  if (policy && failed > tolerated) {
    // A pause only means something while members are still waiting to start.
    const waiting =
      (await store.rollouts.size(assignment, revision)) -
      (await store.rollouts.countStarted(assignment, revision));
    if (waiting > 0) {
      const failures = await store.rollouts.failures(assignment, revision, 10);
      const { condition, change: opened } = await markOpen(
        store,
        {
          type: "RolloutPaused",
          subjectKind: "rollout",
          subject,
          reason: "MaxFailuresExceeded",
          message: `rollout of ${assignment} at ${revision.slice(0, 12)} paused: ${failed} instance${failed === 1 ? "" : "s"} failed (maxFailures ${tolerated}): ${failureList(failures)}${failed > failures.length ? `, +${failed - failures.length} more` : ""}. Fix or drain what failed, or let it go on: steward rollout resume ${revision.slice(0, 12)} --assignment ${assignment} --reason "..."`,
          evidence: {
            failed: failures.map((i) => ({
              instance: i.instanceKey,
              status: i.status,
              reason: i.reason,
              attemptId: i.lastAttemptId,
            })),
          },
          tried: failures.flatMap((i) => (i.lastAttemptId ? [i.lastAttemptId] : [])),
          resolver: "operator",
          assignment,
          revision,
        },
        now,
        ctx.newId,
      );
      if (opened === "opened") {
        result.opened.push(condition);
        ctx.log.warn({ assignment, revision, condition: "RolloutPaused" }, condition.message);
        // Members held for a slot or a canary are held by the pause now: each says so once.
        result.follow.push(...(await store.rollouts.held(assignment, revision, 100_000)));
      }
      return;
    }
  }
  const heldByPause = await store.rollouts.anyHeld(assignment, revision, ["paused", "paused-by-operator"]);
  if (pause && (change.started !== undefined || !heldByPause)) {
    const resumed =
      decision?.decision === "resume" && decision.at >= pause.openedAt
        ? `resumed by ${decision.by} (${decision.reason})${decision.accepted.length > 0 ? `, past ${decision.accepted.join(", ")}` : ""}; `
        : "";
    const why =
      failed > tolerated
        ? "every instance of the rollout has started: nothing is held back"
        : `${failed} failed instance${failed === 1 ? "" : "s"} counted, within maxFailures ${tolerated}`;
    const resolved = await markResolved(
      store,
      "RolloutPaused",
      "rollout",
      subject,
      now,
      `${resumed}the rollout moves again${change.started ? ` (${change.started} started)` : ""}: ${why}`,
    );
    if (resolved) result.resolved.push(resolved);
  }
  if (!policy || !anyHeld) return;
  const free =
    policy.maxInFlight === undefined
      ? Number.MAX_SAFE_INTEGER
      : maxInFlight(policy, await store.rollouts.size(assignment, revision)) -
        (await store.rollouts.countInFlight(assignment, revision));
  if (free > 0)
    result.follow.push(...(await store.rollouts.held(assignment, revision, Math.min(free, 100_000))));
}

/**
 * Looks at a rollout again after something outside its members changed: a node it has members on
 * drained, went silent or came back, the hub's transports changed, an operator paused or resumed
 * it. Raises or resolves its pause and returns the held members that may start now (and, while an
 * operator's pause is in force, every held member, so each says it is held by that pause).
 */
export async function reviewRollout(
  ctx: ReconcileContext,
  tx: UnitOfWork,
  rollout: { assignment: string; revision: string },
): Promise<Pick<ReconcileOutcome, "follow" | "opened" | "resolved">> {
  const result: Pick<ReconcileOutcome, "follow" | "opened" | "resolved"> = {
    follow: [],
    opened: [],
    resolved: [],
  };
  const now = ctx.clock.now().toISOString();
  await releaseRollout(ctx, tx, rollout, now, result, { enteredFailure: true });
  if ((await tx.rollouts.decision(rollout.assignment, rollout.revision))?.decision === "pause")
    result.follow.push(...(await tx.rollouts.held(rollout.assignment, rollout.revision, 100_000)));
  return result;
}
