/**
 * What every transport reports when the agent refuses an attempt before applying anything (a bundle
 * it cannot apply, the wrong node): a failed, permanent result carrying the agent's own words, so the
 * hub blocks the generation instead of retrying or waiting for an answer that will never come.
 */
import type { AttemptResult, Bundle } from "../model/generated.js";

/** The refused attempt's result; `reason` is a stable CamelCase name, `message` the agent's line. */
export function refusedResult(
  bundle: Bundle,
  node: string,
  refusal: { reason: string; message: string },
  at: Date,
): AttemptResult {
  return {
    attemptId: bundle.attemptId,
    node,
    assignment: bundle.spec.assignment,
    generation: bundle.generation,
    outcome: "failed",
    failureClass: "permanent",
    reason: refusal.reason,
    message: refusal.message,
    resources: [],
    startedAt: at.toISOString(),
    finishedAt: at.toISOString(),
  };
}
