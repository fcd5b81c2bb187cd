/**
 * The attempt's state machine: every change of an attempt's status is one of the events below, and
 * `nextAttempt` is the only code that turns an attempt into its next state. Pure: the caller writes
 * the record it returns (with `logAttemptChange`), in the transaction that decided it.
 *
 *   queued ──handed-over──▶ dispatched ──result──▶ succeeded | failed
 *     │  ╲                     │   ╲──lease-expired | lost | dispatch-failed(ambiguous) | owner-lost──▶ ambiguous
 *     │   ╲─dispatch-failed──▶ failed | ambiguous                                                        │
 *     ├─superseded | retired──▶ cancelled                          ambiguous ──report──▶ succeeded | failed | lost
 *     dispatched | ambiguous ──superseded──▶ superseded ──result──▶ superseded (the late result kept as evidence)
 *
 * A result also settles an attempt already ambiguous or lost (the agent's word beats a guess). An
 * event that does not apply to the attempt's status (a second result, a loss after the result)
 * returns undefined: nothing changes.
 */
import type { Logger } from "pino";
import type { AttemptResult, FailureClass, InstanceReport } from "../model/generated.js";
import type { AttemptRecord } from "./records.js";
import { redact } from "./redact.js";

/** What can happen to an attempt. Times are ISO 8601. */
export type AttemptEvent =
  /** The relay hands it to its transport: its lease starts. */
  | { kind: "handed-over"; at: string; leaseExpiresAt: string }
  /** The hand-over did not happen (transient, permanent) or may have (ambiguous). */
  | {
      kind: "dispatch-failed";
      at: string;
      failureClass: "transient" | "permanent" | "ambiguous";
      reason: string;
      message: string;
    }
  /** The agent's result, recorded `at` (the hub's clock). */
  | { kind: "result"; at: string; result: AttemptResult }
  /** The transport says the result is lost (session dropped, agent died mid-apply). */
  | { kind: "lost"; at: string; reason: string }
  /** No result within the lease (which ended at `leaseEndedAt`). */
  | { kind: "lease-expired"; at: string; leaseEndedAt: string; leaseMs: number }
  /** A full report taken after the attempt settles an ambiguous one. */
  | { kind: "report"; at: string; lastAttempt?: InstanceReport["lastAttempt"] }
  /** A newer generation took over. */
  | { kind: "superseded"; at: string; by: number }
  /** The instance was removed from the fleet repo. */
  | { kind: "retired" }
  /** The hub replica that dispatched it is gone: what it did is unknown until a fresh report. */
  | { kind: "owner-lost"; at: string; replica: string };

/** The statuses a result is still taken from. */
const AWAITING_RESULT = new Set<AttemptRecord["status"]>(["queued", "dispatched", "ambiguous", "lost"]);

/** The later of two ISO 8601 times (they sort as text). */
const later = (a: string, b: string) => (a < b ? b : a);

/** A new attempt of an intent, queued (its outbox row is written with it). */
export function newAttempt(fields: {
  id: string;
  instanceKey: string;
  generation: number;
  assignment: string;
  node: string;
  at: string;
}): AttemptRecord {
  return {
    id: fields.id,
    instanceKey: fields.instanceKey,
    generation: fields.generation,
    assignment: fields.assignment,
    node: fields.node,
    status: "queued",
    createdAt: fields.at,
  };
}

/** The attempt after `event`, or undefined when the event does not apply to it now. */
export function nextAttempt(attempt: AttemptRecord, event: AttemptEvent): AttemptRecord | undefined {
  const { status } = attempt;
  switch (event.kind) {
    case "handed-over":
      if (status !== "queued") return undefined;
      return {
        ...attempt,
        status: "dispatched",
        dispatchedAt: event.at,
        leaseExpiresAt: event.leaseExpiresAt,
      };
    case "dispatch-failed":
      // A result may already have settled it (a fast agent): never undo that.
      if (status !== "queued" && status !== "dispatched") return undefined;
      if (event.failureClass === "ambiguous")
        return {
          ...attempt,
          status: "ambiguous",
          reason: event.reason,
          message: redact(event.message),
          dispatchedAt: attempt.dispatchedAt ?? event.at,
          settleAfter: event.at,
        };
      return {
        ...attempt,
        status: "failed",
        failureClass: event.failureClass,
        reason: event.reason,
        message: redact(event.message),
        finishedAt: event.at,
        settledBy: "dispatch",
      };
    case "result":
      return resultOf(attempt, event.result, event.at);
    case "lost":
      if (status !== "queued" && status !== "dispatched") return undefined;
      return {
        ...attempt,
        status: "ambiguous",
        reason: "ResultLost",
        message: redact(event.reason),
        dispatchedAt: attempt.dispatchedAt ?? attempt.createdAt,
        settleAfter: event.at,
      };
    case "lease-expired":
      if (status !== "dispatched") return undefined;
      return {
        ...attempt,
        status: "ambiguous",
        reason: "LeaseExpired",
        // It may have run until its lease ended: only a report taken after that tells what it did.
        settleAfter: later(event.leaseEndedAt, event.at),
        message: `no result within the lease (${Math.round(event.leaseMs / 1000)}s)`,
      };
    case "report": {
      if (status !== "ambiguous") return undefined;
      const known = event.lastAttempt;
      const settled: AttemptRecord = { ...attempt, settledBy: "report" };
      if (known && known.attemptId === attempt.id) {
        settled.status = known.outcome;
        if (known.failureClass) settled.failureClass = known.failureClass;
        settled.finishedAt = known.at ?? event.at;
      } else {
        settled.status = "lost";
        settled.finishedAt = event.at;
      }
      return settled;
    }
    case "superseded":
      if (status === "queued")
        return { ...attempt, status: "cancelled", settledBy: "superseded", finishedAt: event.at };
      if (status === "dispatched" || status === "ambiguous")
        return {
          ...attempt,
          status: "superseded",
          settledBy: "superseded",
          supersededBy: event.by,
          finishedAt: event.at,
        };
      return undefined;
    case "retired":
      if (status !== "queued") return undefined;
      return { ...attempt, status: "cancelled", settledBy: "superseded" };
    case "owner-lost":
      if (status !== "queued" && status !== "dispatched") return undefined;
      return {
        ...attempt,
        status: "ambiguous",
        reason: "ReplicaLost",
        message: `hub replica ${event.replica} that handed it over is gone: waiting for a fresh report`,
        dispatchedAt: attempt.dispatchedAt ?? attempt.createdAt,
        settleAfter: event.at,
      };
  }
}

function resultOf(attempt: AttemptRecord, result: AttemptResult, at: string): AttemptRecord | undefined {
  if (attempt.status === "superseded") {
    // Its generation is no longer desired: what it did is evidence, and nothing to act on.
    if (attempt.lateResult) return undefined;
    const late: NonNullable<AttemptRecord["lateResult"]> = { outcome: result.outcome, at: result.finishedAt };
    if (result.reason) late.reason = result.reason;
    return { ...attempt, lateResult: late };
  }
  if (!AWAITING_RESULT.has(attempt.status)) return undefined;
  const failed = result.resources.filter((r) => r.action === "failed" || r.action === "blocked");
  const settled: AttemptRecord = {
    ...attempt,
    status: result.outcome,
    finishedAt: result.finishedAt,
    recordedAt: at,
    settledBy: "result",
  };
  if (result.failureClass) settled.failureClass = result.failureClass as FailureClass;
  if (result.reason) settled.reason = result.reason;
  if (result.message) settled.message = redact(result.message);
  if (failed.length > 0)
    settled.evidence = failed.slice(0, 20).map((r) => ({
      name: r.name,
      kind: r.kind,
      action: r.action,
      failureClass: r.failureClass,
      reason: r.reason,
      message: r.message && redact(r.message),
      blockedBy: r.blockedBy,
      evidence: r.evidence && redact(r.evidence),
    }));
  settled.dispatchedAt ??= attempt.createdAt;
  return settled;
}

/** Logs an attempt's change of status, with its correlation id (nothing when the status stayed). */
export function logAttemptChange(
  log: Logger,
  attempt: AttemptRecord,
  before: AttemptRecord | undefined,
): void {
  if (before?.status === attempt.status) return;
  const fields = { attemptId: attempt.id, instance: attempt.instanceKey, generation: attempt.generation };
  if (attempt.status === "ambiguous")
    log.warn(
      { ...fields, reason: attempt.reason },
      "attempt ambiguous: %s",
      attempt.message ?? attempt.reason,
    );
  else if (attempt.settledBy === "report")
    log.info({ ...fields, status: attempt.status }, "attempt settled by a fresh report: %s", attempt.status);
  else log.info({ ...fields, status: attempt.status }, "attempt %s", attempt.status);
}
