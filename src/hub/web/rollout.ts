/**
 * Rollout pause and resume in the web view: the same decisions `steward rollout pause|resume`
 * records (src/hub/rollout-decisions.ts: who and why; the RolloutPaused condition still closes by
 * observation). HubRuntime gives the web view `rolloutControlOf(hub)`; without a RolloutControl, no
 * page shows a pause or resume button and `POST /revisions/:sha/rollout/:assignment/pause|resume`
 * answers 404.
 */
import type { Hub } from "../hub.js";
import { idFactory } from "../ids.js";
import { pauseRollouts, resumeRollouts } from "../rollout-decisions.js";

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
  pause(decision: RolloutDecision): Promise<void>;
  resume(decision: RolloutDecision): Promise<void>;
  /** Whether the rollout of `assignment` at `revision` is paused (by failures or by an operator). */
  paused(revision: string, assignment: string): Promise<boolean>;
}

/** The hub's rollout decisions, recorded in its store and taken in at once (the hub is nudged). */
export function rolloutControlOf(hub: Hub): RolloutControl {
  const newId = idFactory(hub.clock);
  const at = () => hub.clock.now().toISOString();
  return {
    pause: async (decision) => {
      await pauseRollouts(hub.store, { ...decision, at: at() }, newId);
      await hub.nudge({ revision: decision.revision });
    },
    resume: async (decision) => {
      await resumeRollouts(hub.store, { ...decision, at: at() });
      await hub.nudge({ revision: decision.revision });
    },
    paused: async (revision, assignment) =>
      (await hub.store.rollouts.decision(assignment, revision))?.decision === "pause" ||
      (await hub.store.conditions.findOpen("RolloutPaused", "rollout", `${assignment}@${revision}`)) !==
        undefined,
  };
}
