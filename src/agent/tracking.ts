/**
 * Failure tracking per resource, as pure functions over the records the store keeps: consecutive
 * failures, first failure of the current run, last failure, last success, whether it ever applied.
 * From those and the bundle's budget, a resource that is not as desired is `waiting` (failing
 * transiently within budget), `stuck` (budget spent), `failed` (permanently), `blocked` (by a failed
 * gating command or dependency) or merely `drifted` (will be repaired by the next apply).
 */
import type {
  Bundle,
  FailureClass,
  ResourceCounters,
  ResourceOutcome,
  ResourceReport,
} from "../model/generated.js";
import { ONE_SHOT_INTERRUPTED } from "./failure.js";
import type { ResourceRecord } from "./store.js";

/** How long transient failures are retried before a resource is stuck: attempts, and time since the first failure. */
export interface Budget {
  attempts: number;
  withinMs: number;
}

/** The design's default: 5 attempts within 30 minutes. */
export const DEFAULT_BUDGET: Budget = { attempts: 5, withinMs: 30 * 60_000 };

/** The bundle's budget, with the defaults filled in. */
export function budgetOf(bundle: Bundle): Budget {
  return {
    attempts: bundle.budget?.attempts ?? DEFAULT_BUDGET.attempts,
    withinMs: bundle.budget?.withinMs ?? DEFAULT_BUDGET.withinMs,
  };
}

const NOT_APPLIED = new Set<ResourceOutcome["action"]>(["failed", "blocked", "restored"]);

/** The record after one attempt's outcome for the resource. Pure. */
export function recordOutcome(
  previous: ResourceRecord | undefined,
  outcome: ResourceOutcome,
  generation: number,
  attemptId: string | undefined,
  at: string,
): ResourceRecord {
  let counters: ResourceCounters = previous?.counters ?? { consecutiveFailures: 0, everApplied: false };
  // A new generation starts a new run of failures; history (ever applied, last success) stays.
  if (previous && previous.generation !== generation) {
    const { firstFailureAt: _first, ...kept } = counters;
    counters = { ...kept, consecutiveFailures: 0 };
  }
  if (outcome.action === "failed") {
    counters = {
      ...counters,
      consecutiveFailures: counters.consecutiveFailures + 1,
      firstFailureAt: counters.firstFailureAt ?? at,
      lastFailureAt: at,
    };
  } else if (!NOT_APPLIED.has(outcome.action)) {
    const { firstFailureAt: _first, ...kept } = counters;
    counters = { ...kept, consecutiveFailures: 0, everApplied: true, lastSuccessAt: at };
  }
  // Only what tells a failure apart is kept: a success is in the counters already.
  if (!NOT_APPLIED.has(outcome.action)) return { counters, generation };
  const last: NonNullable<ResourceRecord["last"]> = { generation, at, action: outcome.action };
  if (attemptId !== undefined) last.attemptId = attemptId;
  if (outcome.failureClass !== undefined) last.failureClass = outcome.failureClass;
  if (outcome.reason !== undefined) last.reason = outcome.reason;
  if (outcome.message !== undefined) last.message = outcome.message;
  if (outcome.blockedBy !== undefined) last.blockedBy = outcome.blockedBy;
  if (outcome.evidence !== undefined) last.evidence = outcome.evidence;
  return { counters, generation, last };
}

/** True when the failures so far have used the budget up. Pure. */
export function budgetSpent(counters: ResourceCounters, budget: Budget, now: Date): boolean {
  if (counters.consecutiveFailures >= budget.attempts) return true;
  if (counters.firstFailureAt === undefined || counters.consecutiveFailures === 0) return false;
  return now.getTime() - Date.parse(counters.firstFailureAt) >= budget.withinMs;
}

/** What the status of a resource is derived from. */
export interface StatusInput {
  /** Observed as desired. */
  inSync: boolean;
  /** Observation itself failed (a tool missing, a path escaping the roots). */
  observeFailure?: { failureClass: FailureClass; reason: string; message: string; evidence?: string };
  record: ResourceRecord | undefined;
  generation: number;
  budget: Budget;
  now: Date;
}

type StatusFields = Pick<
  ResourceReport,
  "status" | "failureClass" | "reason" | "message" | "blockedBy" | "evidence"
>;

function failing(
  failureClass: FailureClass,
  counters: ResourceCounters | undefined,
  budget: Budget,
  now: Date,
  reason?: string,
): ResourceReport["status"] {
  if (reason === ONE_SHOT_INTERRUPTED) return "interrupted";
  if (failureClass === "permanent") return "failed";
  return counters && budgetSpent(counters, budget, now) ? "stuck" : "waiting";
}

/** The reported status of a resource from what was observed and what the record says. Pure. */
export function resourceStatus(input: StatusInput): StatusFields {
  const { record, budget, now } = input;
  const last = record?.last?.generation === input.generation ? record.last : undefined;
  if (input.observeFailure) {
    const failure = input.observeFailure;
    const fields: StatusFields = {
      status: failing(failure.failureClass, record?.counters, budget, now, failure.reason),
      failureClass: failure.failureClass,
      reason: failure.reason,
      message: failure.message,
    };
    if (failure.evidence) fields.evidence = failure.evidence;
    return fields;
  }
  if (input.inSync) return { status: "ok" };
  if (last && (last.action === "blocked" || last.action === "restored")) {
    const fields: StatusFields = { status: "blocked" };
    if (last.blockedBy) fields.blockedBy = last.blockedBy;
    if (last.message) fields.message = last.message;
    return fields;
  }
  if (last?.action === "failed") {
    const failureClass = last.failureClass ?? "transient";
    const fields: StatusFields = {
      status: failing(failureClass, record?.counters, budget, now, last.reason),
      failureClass,
    };
    if (last.reason) fields.reason = last.reason;
    if (last.message) fields.message = last.message;
    if (last.evidence) fields.evidence = last.evidence;
    return fields;
  }
  return { status: "drifted" };
}

/** The counters to report: a resource never seen by an attempt has never applied nor failed. */
export function countersOf(record: ResourceRecord | undefined): ResourceCounters {
  return record?.counters ?? { consecutiveFailures: 0, everApplied: false };
}
