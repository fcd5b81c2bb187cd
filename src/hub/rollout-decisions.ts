/**
 * An operator's decisions about a rollout (one assignment at one revision), taken directly rather
 * than through Git: `pause` holds every member that has not started yet; `resume` lets the rollout
 * go on past the failures it has seen (they no longer count against `maxFailures`; a failure after
 * the resume still does) and lifts an operator's pause. Each decision is kept with who took it and
 * why, and written into the history of the rollout's `RolloutPaused` condition. A pause opens that
 * condition; nothing here resolves it: the hub does, by observation, once the rollout is seen moving
 * again. A running hub takes a decision in when nudged (or at its next start).
 */
import { NotFoundError, UsageError } from "../model/errors.js";
import { markOpen } from "./conditions.js";
import type { ConditionRecord, RolloutDecisionRecord } from "./records.js";
import type { StoreReads, Transactional, UnitOfWork } from "./store/store.js";

/** What an operator decides, about which rollouts, by whom and why. */
export interface RolloutDecisionInput {
  /** The revision (a full sha the hub synced). */
  revision: string;
  /** Only this assignment's rollout; default every rollout of the revision. */
  assignment?: string;
  by: string;
  reason: string;
  at: string;
  /** The `RolloutPaused` task this decision answers, when it comes as an answer. */
  taskId?: string;
}

/** What a decision did to one rollout. */
export interface RolloutDecisionOutcome {
  assignment: string;
  revision: string;
  /** False when there was nothing to decide (nothing left to hold, nothing paused). */
  recorded: boolean;
  decision?: RolloutDecisionRecord;
  /** The rollout's `RolloutPaused` condition, when one is open. */
  condition?: ConditionRecord;
  /** What it means, in words. */
  message: string;
}

const short = (sha: string) => sha.slice(0, 12);

/**
 * The rollouts of `input.revision` the decision is about. Throws NotFoundError when the revision
 * rolled nothing out or the assignment is not among its rollouts.
 */
async function rolloutsOf(store: StoreReads, input: RolloutDecisionInput): Promise<string[]> {
  // Every decision says why, whoever takes it: the CLI, the web view, a program with a token.
  if (input.reason.trim() === "")
    throw new UsageError(
      `say why the rollout of ${short(input.revision)} is paused or resumed: --reason TEXT`,
    );
  const revision = await store.desired.revision(input.revision);
  const assignments = [
    ...new Set((await store.desired.generationsOf(input.revision)).map((g) => g.assignment)),
  ].sort();
  if (!revision || assignments.length === 0)
    throw new NotFoundError(
      `revision ${short(input.revision)} rolled nothing out${revision ? ` (${revision.outcome === "applied" ? "it gave no instance a new generation" : revision.outcome})` : ""}: \`steward get revisions\` lists the revisions and what they changed`,
      { revision: input.revision },
    );
  if (input.assignment === undefined) return assignments;
  if (!assignments.includes(input.assignment))
    throw new NotFoundError(
      `revision ${short(input.revision)} has no rollout of "${input.assignment}" (it rolls out ${assignments.join(", ")}): fix --assignment`,
      { revision: input.revision, assignment: input.assignment },
    );
  return [input.assignment];
}

function decide(
  tx: UnitOfWork,
  input: RolloutDecisionInput,
  assignment: string,
  decision: RolloutDecisionRecord["decision"],
): Promise<RolloutDecisionRecord> {
  return tx.rollouts.recordDecision({
    assignment,
    revision: input.revision,
    decision,
    by: input.by,
    reason: input.reason,
    at: input.at,
    ...(input.taskId ? { taskId: input.taskId } : {}),
  });
}

/**
 * Pauses the rollouts of a revision: members that have not started are held (members in flight
 * finish), and `RolloutPaused` (reason `PausedByOperator`) says who paused it and why until a resume
 * and the rollout moving again resolve it.
 */
export function pauseRollouts(
  store: Transactional,
  input: RolloutDecisionInput,
  newId: () => string,
): Promise<RolloutDecisionOutcome[]> {
  return store.transaction(async (tx) => {
    const outcomes: RolloutDecisionOutcome[] = [];
    for (const assignment of await rolloutsOf(tx, input)) {
      const { revision } = input;
      const subject = `${assignment}@${revision}`;
      const waiting =
        (await tx.rollouts.size(assignment, revision)) -
        (await tx.rollouts.countStarted(assignment, revision));
      if (waiting <= 0) {
        const outcome: RolloutDecisionOutcome = {
          assignment,
          revision,
          recorded: false,
          message: `nothing to pause: every instance of the rollout of ${assignment} at ${short(revision)} has started (or a newer revision took it over)`,
        };
        const open = await tx.conditions.findOpen("RolloutPaused", "rollout", subject);
        if (open) outcome.condition = open;
        outcomes.push(outcome);
        continue;
      }
      const decision = await decide(tx, input, assignment, "pause");
      const { condition } = await markOpen(
        tx,
        {
          type: "RolloutPaused",
          subjectKind: "rollout",
          subject,
          reason: "PausedByOperator",
          message: `rollout of ${assignment} at ${short(revision)} paused by ${input.by}: ${input.reason}. ${waiting} instance${waiting === 1 ? " is" : "s are"} held until \`steward rollout resume ${short(revision)} --assignment ${assignment}\``,
          evidence: { pausedBy: input.by, reason: input.reason, at: input.at, decision: decision.seq },
          resolver: "operator",
          procedure: `Resume it when it may go on: \`steward rollout resume ${short(revision)} --assignment ${assignment} --reason "..."\` (or answer this task with --outcome resume).`,
          assignment,
          revision,
        },
        input.at,
        newId,
      );
      outcomes.push({
        assignment,
        revision,
        recorded: true,
        decision,
        condition,
        message: `rollout of ${assignment} at ${short(revision)} paused by ${input.by}: ${waiting} instance${waiting === 1 ? "" : "s"} held`,
      });
    }
    return outcomes;
  });
}

/**
 * Resumes the rollouts of a revision: the operator lets each go on past the failures it has seen
 * (they are accepted: no longer counted against `maxFailures`) and lifts their own pause. The
 * decision goes into the `RolloutPaused` history; the condition stays open until the hub sees the
 * rollout move. A rollout that is not paused is left as it is.
 */
export function resumeRollouts(
  store: Transactional,
  input: RolloutDecisionInput,
): Promise<RolloutDecisionOutcome[]> {
  return store.transaction(async (tx) => {
    const outcomes: RolloutDecisionOutcome[] = [];
    for (const assignment of await rolloutsOf(tx, input)) {
      const { revision } = input;
      const subject = `${assignment}@${revision}`;
      const open = await tx.conditions.findOpen("RolloutPaused", "rollout", subject);
      const pausedByOperator = (await tx.rollouts.decision(assignment, revision))?.decision === "pause";
      if (!open && !pausedByOperator) {
        outcomes.push({
          assignment,
          revision,
          recorded: false,
          message: `nothing to resume: the rollout of ${assignment} at ${short(revision)} is not paused`,
        });
        continue;
      }
      const decision = await decide(tx, input, assignment, "resume");
      const past =
        decision.accepted.length > 0
          ? `it goes on past ${decision.accepted.length} failed instance${decision.accepted.length === 1 ? "" : "s"} (${decision.accepted.join(", ")})`
          : "no failure to go past";
      const message = `rollout of ${assignment} at ${short(revision)} resumed by ${input.by}: ${input.reason}; ${past}${input.taskId ? ` (answering task ${input.taskId})` : ""}`;
      const outcome: RolloutDecisionOutcome = { assignment, revision, recorded: true, decision, message };
      if (open) {
        await tx.conditions.appendEvent({
          conditionId: open.id,
          at: input.at,
          event: "updated",
          reason: open.reason,
          message: `${message}; the condition closes when the rollout is seen moving`,
        });
        outcome.condition = open;
      }
      outcomes.push(outcome);
    }
    return outcomes;
  });
}
