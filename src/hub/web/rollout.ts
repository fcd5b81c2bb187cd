/**
 * ROLLOUT PAUSE/RESUME — the seam for `steward rollout pause|resume` in the web view. The decision
 * itself (recorded with who and why; the RolloutPaused condition still closes by observation) is
 * being built for the CLI apart from the web view. Once it exists, wire it here: give the web view
 * a RolloutControl (HubHttpOptions.web.rollout, from HubRuntime) that calls it. Until then no page
 * shows a pause or resume button and `POST /revisions/:sha/rollout/:assignment/pause|resume`
 * answers 404 — nothing pretends to work.
 */

/** One decision about one assignment's rollout at one revision, by a named operator. */
export interface RolloutDecision {
  revision: string;
  assignment: string;
  /** The operator's name (the token's name), as the CLI records its operator. */
  by: string;
  reason: string;
}

/** Pausing and resuming rollouts, as `steward rollout pause|resume` does it. */
export interface RolloutControl {
  pause(decision: RolloutDecision): void;
  resume(decision: RolloutDecision): void;
  /** Whether the rollout of `assignment` at `revision` is paused (by failures or by an operator). */
  paused(revision: string, assignment: string): boolean;
}
