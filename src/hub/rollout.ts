/**
 * Rollout gates: whether an instance that has not been attempted yet at its generation may start,
 * given the rollout it belongs to (its assignment at the revision that produced the generation).
 * An operator's pause holds every member that has not started; canary nodes go first; the rest
 * wait until every canary converged and kept its probes passing for the soak time; then at most
 * `maxInFlight` instances are in progress at once; more than `maxFailures` failed instances pause
 * the rollout. Instances on skipped nodes (drained, transport not run here, silent) and failures an
 * operator's resume accepted are not in the counts. Pure: the reconciler gathers the counts.
 */
import { parseDuration } from "../model/duration.js";
import type { Rollout } from "../model/generated.js";

/** What a rollout gate counts of a rollout's intents (one assignment at one revision). */
export interface RolloutCounts {
  /** Started and not finished (dispatched, verifying, ambiguous, backoff), on nodes not skipped. */
  inProgress: number;
  /** Blocked or stuck, on nodes not skipped, and not accepted by an operator's resume. */
  failed: number;
}

export type RolloutGate =
  | { go: true }
  | {
      go: false;
      hold: "canary" | "batch" | "paused" | "paused-by-operator";
      message: string;
      requeueAt?: number;
    };

/** A canary's progress: converged (with probes passing) since `convergedAt`. */
export interface CanaryState {
  node: string;
  converged: boolean;
  convergedAt?: number;
}

export interface RolloutGateInput {
  node: string;
  policy: Rollout;
  /** Instances in the rollout. */
  size: number;
  counts: RolloutCounts;
  /** The rollout's canaries (empty: no canary phase). */
  canaries: CanaryState[];
  /** Set while an operator's pause is in force (`steward rollout pause`): who and why. */
  pausedBy?: { by: string; reason: string };
  now: number;
}

/** The in-flight limit of a rollout of `size` instances: a count, or a percentage (at least 1). */
export function maxInFlight(policy: Rollout, size: number): number {
  const limit = policy.maxInFlight;
  if (limit === undefined) return Math.max(1, size);
  if (typeof limit === "number") return Math.max(1, limit);
  const percent = /^([0-9]+(?:\.[0-9]+)?)%$/.exec(limit.trim());
  if (percent) return Math.max(1, Math.ceil((size * Number(percent[1])) / 100));
  const count = Number(limit);
  return Number.isFinite(count) && count >= 1 ? Math.floor(count) : Math.max(1, size);
}

/** How many failed instances the rollout tolerates before it pauses. */
export function maxFailures(policy: Rollout): number {
  return policy.maxFailures ?? 0;
}

/** True when more instances failed than the rollout tolerates. */
export function rolloutPaused(policy: Rollout, counts: RolloutCounts): boolean {
  return counts.failed > maxFailures(policy);
}

export function soakMs(policy: Rollout): number {
  return policy.canary?.soak ? parseDuration(policy.canary.soak) : 0;
}

/** Whether `input.node` may start now. */
export function rolloutGate(input: RolloutGateInput): RolloutGate {
  const { policy, counts } = input;
  if (input.pausedBy)
    return {
      go: false,
      hold: "paused-by-operator",
      message: `rollout paused by ${input.pausedBy.by}: ${input.pausedBy.reason}`,
    };
  if (rolloutPaused(policy, counts))
    return {
      go: false,
      hold: "paused",
      message: `rollout paused: ${counts.failed} failed, more than maxFailures ${maxFailures(policy)}`,
    };
  const isCanary = input.canaries.some((c) => c.node === input.node);
  if (!isCanary && input.canaries.length > 0) {
    const waiting = input.canaries.filter((c) => !c.converged).map((c) => c.node);
    if (waiting.length > 0)
      return { go: false, hold: "canary", message: `waiting for canary ${waiting.join(", ")} to converge` };
    const soakEnds = Math.max(...input.canaries.map((c) => c.convergedAt ?? input.now)) + soakMs(policy);
    if (input.now < soakEnds)
      return {
        go: false,
        hold: "canary",
        message: `canary soaking until ${new Date(soakEnds).toISOString()}`,
        requeueAt: soakEnds,
      };
  }
  const limit = maxInFlight(policy, input.size);
  if (counts.inProgress >= limit)
    return { go: false, hold: "batch", message: `${counts.inProgress} in progress, maxInFlight ${limit}` };
  return { go: true };
}
