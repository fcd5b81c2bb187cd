/**
 * Tasks: conditions that need judgement, as work on a queue for an agent (a person or a program).
 * A task carries what steward knows (its condition); an agent claims it and resolves it with the
 * action it took, which is recorded. Resolving a task does not resolve its condition: only
 * observation does — except `HumanProcedureRequired` and `OneShotInterrupted`, which nothing can
 * observe (the procedure was done; whether a lost run took effect), so the person's answer closes
 * them. A task whose condition resolved by observation is closed.
 */
import { NotFoundError, StewardError } from "../model/errors.js";
import { closeCondition } from "./conditions.js";
import type { ConditionRecord, ConditionType, TaskOutcome, TaskRecord } from "./records.js";
import { resumeRollouts } from "./rollout-decisions.js";
import type { StoreReads, Transactional, UnitOfWork } from "./store/store.js";

/** Condition types that a person or program must look at; the others heal themselves or retry. */
const JUDGEMENT: ReadonlySet<ConditionType> = new Set<ConditionType>([
  "InvalidRevision",
  "Blocked",
  "Stuck",
  "Ambiguous",
  "NodeSilent",
  "DriftUnhealed",
  "DestructiveRepairNeeded",
  "RolloutPaused",
  "HumanProcedureRequired",
  "OneShotInterrupted",
  "EnrolmentRequested",
  "IdentityConflict",
  "IdentityUndeclared",
]);

/** The decisions an answer to a task of each type may carry. */
const OUTCOMES: Partial<Record<ConditionType, readonly TaskOutcome[]>> = {
  OneShotInterrupted: ["ran", "rerun"],
  // Optional: an answer may also say what was fixed and leave the pause to observation.
  RolloutPaused: ["resume"],
};

/** Types whose answer must carry a decision: nothing a node does later says whether a lost run took effect. */
const OUTCOME_REQUIRED: ReadonlySet<ConditionType> = new Set<ConditionType>(["OneShotInterrupted"]);

/** The decisions an answer to a task of `type` takes (empty: none, say what you did). */
export function taskOutcomes(type: ConditionType): readonly TaskOutcome[] {
  return OUTCOMES[type] ?? [];
}

export function needsJudgement(type: ConditionType): boolean {
  return JUDGEMENT.has(type);
}

/** Raised for a task operation that does not fit the task's state (unknown id, already resolved...). */
export class TaskError extends StewardError {
  override readonly name = "TaskError";
  constructor(message: string, data?: Record<string, unknown>) {
    super("E_TASK", message, data ? { data } : {});
  }
}

/** Opens the task of a condition that needs judgement (the one it has, if any). */
export async function openTaskFor(
  store: UnitOfWork,
  condition: ConditionRecord,
  now: string,
  newId: () => string,
): Promise<TaskRecord> {
  const existing = await store.tasks.ofCondition(condition.id);
  if (existing) return existing;
  const task: TaskRecord = {
    id: newId(),
    conditionId: condition.id,
    type: condition.type,
    subjectKind: condition.subjectKind,
    subject: condition.subject,
    status: "open",
    createdAt: now,
  };
  await store.tasks.insert(task);
  return task;
}

/** Closes the task of a condition that resolved by observation (a resolved task stays as it is). */
export async function closeTaskOf(store: UnitOfWork, condition: ConditionRecord, now: string): Promise<void> {
  const task = await store.tasks.ofCondition(condition.id);
  if (!task || task.status === "resolved" || task.status === "closed") return;
  await store.tasks.save({
    ...task,
    status: "closed",
    resolvedAt: now,
    closedReason: `condition resolved: ${condition.resolution ?? "observed"}`,
  });
}

/** Conditions after which an agent's action earns the instance one more attempt at its generation. */
const RETRY_AFTER: ReadonlySet<ConditionType> = new Set<ConditionType>([
  "Blocked",
  "DestructiveRepairNeeded",
  "Stuck",
]);

/**
 * Someone acted on a blocked or stuck instance (moved a directory away, published the image): run
 * the ordinary path once more now instead of waiting for a new generation or the slowest cadence.
 * If it fails the same way, the instance is blocked (or stuck) again, with the new attempt in `tried`.
 */
async function retryAfterAction(
  store: UnitOfWork,
  condition: ConditionRecord,
  why: string,
  now: string,
): Promise<void> {
  if (
    !RETRY_AFTER.has(condition.type) ||
    condition.subjectKind !== "instance" ||
    condition.generation === undefined
  )
    return;
  const intent = await store.intents.get(condition.subject, condition.generation);
  if (!intent || (intent.status !== "blocked" && intent.status !== "stuck")) return;
  const retry = { ...intent, status: "pending" as const, nextAttemptAt: now, message: why, updatedAt: now };
  delete retry.failureClass;
  await store.intents.save(retry);
}

/** What answering an interrupted one-shot's question does, as the resolution says it. */
async function oneShotAnswer(
  store: StoreReads,
  condition: ConditionRecord,
  agent: string,
  outcome: TaskOutcome,
  action: string,
): Promise<string> {
  const desired =
    condition.subjectKind === "instance" ? await store.desired.instance(condition.subject) : undefined;
  const current = desired !== undefined && !desired.retiredAt && desired.generation === condition.generation;
  const effect = !current
    ? `generation ${condition.generation} is no longer desired: the answer is recorded and nothing runs`
    : outcome === "ran"
      ? "recorded as ran: the next attempt tells the node, and nothing runs again"
      : "the next attempt runs it once more";
  return `answered by ${agent} (--outcome ${outcome}): ${action}; ${effect}`;
}

/** A task with the condition it is about: what steward knows. */
export interface TaskView {
  task: TaskRecord;
  condition: ConditionRecord;
}

/** Open and claimed tasks (every task with `all`), by id, each with its condition. */
export async function listTasks(store: StoreReads, options: { all?: boolean } = {}): Promise<TaskView[]> {
  const tasks = options.all
    ? await store.tasks.list()
    : [...(await store.tasks.list({ status: "open" })), ...(await store.tasks.list({ status: "claimed" }))];
  const views: TaskView[] = [];
  for (const task of tasks.sort((a, b) => (a.id < b.id ? -1 : 1)))
    views.push({ task, condition: (await store.conditions.get(task.conditionId))! });
  return views;
}

async function findTask(store: StoreReads, id: string): Promise<TaskRecord> {
  const task =
    (await store.tasks.get(id)) ?? (await store.tasks.list()).find((t) => t.id.endsWith(id.toUpperCase()));
  if (!task) throw new NotFoundError(`no task "${id}": run \`steward tasks\` to list them`, { id });
  return task;
}

/** Claims an open task for `agent`; claiming one you already hold is fine. */
export function claimTask(store: Transactional, id: string, agent: string, now: string): Promise<TaskRecord> {
  return store.transaction(async (tx) => {
    const task = await findTask(tx, id);
    if (task.status === "claimed" && task.claimedBy === agent) return task;
    if (task.status !== "open")
      throw new TaskError(
        `task ${task.id} is ${task.status}${task.claimedBy ? ` by ${task.claimedBy}` : ""}: only an open task can be claimed`,
        { id: task.id, status: task.status },
      );
    const claimed: TaskRecord = { ...task, status: "claimed", claimedBy: agent, claimedAt: now };
    await tx.tasks.save(claimed);
    return claimed;
  });
}

/**
 * Gives a claimed task back: `agent` declined it (with `note`, why), so it is open for another
 * agent. The decline is recorded in the condition's history.
 */
export function releaseTask(
  store: Transactional,
  id: string,
  agent: string,
  note: string,
  now: string,
): Promise<TaskRecord> {
  return store.transaction(async (tx) => {
    const task = await findTask(tx, id);
    if (task.status === "open") return task;
    if (task.status !== "claimed" || task.claimedBy !== agent)
      throw new TaskError(
        `task ${task.id} is ${task.status}${task.claimedBy ? ` by ${task.claimedBy}` : ""}: only its claimant can decline it`,
        { id: task.id, status: task.status },
      );
    const released: TaskRecord = { ...task, status: "open" };
    delete released.claimedBy;
    delete released.claimedAt;
    await tx.tasks.save(released);
    const condition = (await tx.conditions.get(task.conditionId))!;
    await tx.conditions.appendEvent({
      conditionId: condition.id,
      at: now,
      event: "updated",
      reason: condition.reason,
      message: `task ${task.id} declined by ${agent}${note ? `: ${note}` : ""}`,
    });
    return released;
  });
}

/** Checks the decision an answer carries against what the task's type takes. */
function checkOutcome(task: TaskRecord, outcome: TaskOutcome | undefined): void {
  const allowed = OUTCOMES[task.type];
  if (allowed && outcome === undefined && OUTCOME_REQUIRED.has(task.type))
    throw new TaskError(
      `task ${task.id} (${task.type}) needs a decision: --outcome ${allowed.join(" or --outcome ")} (see the condition's procedure: steward tasks)`,
      { id: task.id },
    );
  if (outcome !== undefined && !allowed?.includes(outcome))
    throw new TaskError(
      allowed
        ? `task ${task.id} (${task.type}) takes --outcome ${allowed.join(" or ")}, not ${outcome}`
        : `task ${task.id} (${task.type}) takes no --outcome: say what you did with --action`,
      { id: task.id },
    );
}

/**
 * Resolves a task with the action `agent` took (and the decision it carries, for a type that takes
 * one). The condition stays open until observation shows it resolved, except HumanProcedureRequired,
 * which the resolving agent closes, and OneShotInterrupted, which the answer itself settles (its
 * decision goes to the node with the instance's next attempt). `--outcome resume` on a
 * RolloutPaused task resumes that rollout (rollout-decisions.ts); the pause still resolves only
 * when the rollout is seen moving. A task closed by observation while `agent` held
 * it (its action is often what observation saw) still takes the claimant's resolution, so what was
 * done is never lost.
 */
export async function resolveTask(
  store: Transactional,
  id: string,
  agent: string,
  action: string,
  now: string,
  outcome?: TaskOutcome,
): Promise<{ task: TaskRecord; condition: ConditionRecord }> {
  if (action.trim() === "")
    throw new TaskError('say what you did: `steward tasks resolve ID --action "..."`', { id });
  return store.transaction(async (tx) => {
    const task = await findTask(tx, id);
    checkOutcome(task, outcome);
    const closedWhileClaimed = task.status === "closed" && task.claimedBy === agent;
    if (task.status === "resolved" || (task.status === "closed" && !closedWhileClaimed))
      throw new TaskError(`task ${task.id} is already ${task.status}`, { id: task.id, status: task.status });
    if (task.status === "claimed" && task.claimedBy !== agent)
      throw new TaskError(`task ${task.id} is claimed by ${task.claimedBy}: only they can resolve it`, {
        id: task.id,
      });
    const resolved: TaskRecord = {
      ...task,
      status: "resolved",
      claimedBy: task.claimedBy ?? agent,
      claimedAt: task.claimedAt ?? now,
      resolvedBy: agent,
      resolvedAt: now,
      action,
      ...(outcome ? { outcome } : {}),
    };
    delete resolved.closedReason;
    await tx.tasks.save(resolved);
    let condition = (await tx.conditions.get(task.conditionId))!;
    // A resolved condition's history ends with its resolution; the task record keeps the action.
    if (condition.status === "open")
      await tx.conditions.appendEvent({
        conditionId: condition.id,
        at: now,
        event: "updated",
        reason: condition.reason,
        message: `task ${task.id} resolved by ${agent}${outcome ? ` (--outcome ${outcome})` : ""}: ${action}`,
      });
    if (condition.type === "HumanProcedureRequired" && condition.status === "open")
      condition = await closeCondition(
        tx,
        condition,
        now,
        `procedure done by ${agent}: ${action}`,
        "operator",
      );
    // Nothing a node does later tells whether the lost run took effect: the answer closes it.
    if (condition.type === "OneShotInterrupted" && condition.status === "open")
      condition = await closeCondition(
        tx,
        condition,
        now,
        await oneShotAnswer(tx, condition, agent, outcome!, action),
        "operator",
      );
    // Answering a paused rollout with --outcome resume is the operator's `steward rollout resume`.
    if (
      condition.type === "RolloutPaused" &&
      outcome === "resume" &&
      condition.assignment &&
      condition.revision
    )
      await resumeRollouts(tx, {
        revision: condition.revision,
        assignment: condition.assignment,
        by: agent,
        reason: action,
        at: now,
        taskId: task.id,
      });
    await retryAfterAction(tx, condition, `task ${task.id} resolved by ${agent}: ${action}`, now);
    return { task: resolved, condition };
  });
}
