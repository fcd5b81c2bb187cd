/**
 * The fleet's answer, as `steward status` and `steward up` give it: **right** (every instance
 * steward is to deliver converged and no condition is open), **converging** (no condition is open,
 * but work is in flight or failures are still within budget) or **not right** (conditions are
 * open). Instances in observe-only mode, on drained nodes, or skipped (a node whose transport this
 * hub does not run — its `TransportDegraded` condition is what makes that not right) are listed
 * and not counted. It is never "right" while an instance it counts is unconverged.
 */
import type { ConditionRecord } from "./records.js";
import { DISPLAY_STATES, type DisplayState } from "./states.js";
import type { InstanceView } from "./views.js";

export type FleetAnswer = "right" | "converging" | "not-right";

/** The answer with what it rests on. */
export interface FleetStatus {
  answer: FleetAnswer;
  /** Instances counted (steward is to deliver them now), and how many of them converged. */
  counted: number;
  converged: number;
  /** How many instances are in each display state (counted or not). */
  states: Partial<Record<DisplayState, number>>;
  /** Open conditions, oldest first. */
  conditions: ConditionRecord[];
  /** Counted instances on their way: converging, verifying, waiting, held by rollout, ambiguous. */
  inProgress: InstanceView[];
  /** Counted instances whose last attempt failed and that will be tried again within budget. */
  failing: InstanceView[];
  /** Counted instances that will not converge by themselves (a condition is open on them). */
  failed: InstanceView[];
  /** Observe-only instances that differ from desired: compared, not delivered. */
  observeOnly: InstanceView[];
  drained: InstanceView[];
  skipped: InstanceView[];
}

const IN_PROGRESS: ReadonlySet<DisplayState> = new Set([
  "converging",
  "verifying",
  "waiting",
  "held",
  "ambiguous",
]);

/** The answer for these instances (retired ones are left out) and these open conditions. */
export function fleetStatus(
  instances: readonly InstanceView[],
  conditions: readonly ConditionRecord[],
): FleetStatus {
  const live = instances.filter((i) => !i.retired);
  const states: Partial<Record<DisplayState, number>> = {};
  for (const instance of live) states[instance.state] = (states[instance.state] ?? 0) + 1;
  const counted = live.filter((i) => DISPLAY_STATES[i.state].weight !== "excluded");
  const of = (wanted: (state: DisplayState) => boolean) => live.filter((i) => wanted(i.state));
  const status: FleetStatus = {
    answer: "right",
    counted: counted.length,
    converged: counted.filter((i) => i.state === "converged").length,
    states,
    conditions: [...conditions],
    inProgress: of((s) => IN_PROGRESS.has(s)),
    failing: of((s) => s === "failing"),
    failed: of((s) => DISPLAY_STATES[s].weight === "not-right"),
    observeOnly: of((s) => s === "observe-only"),
    drained: of((s) => s === "drained"),
    skipped: of((s) => s === "skipped"),
  };
  if (conditions.length > 0 || status.failed.length > 0) status.answer = "not-right";
  else if (status.converged < status.counted) status.answer = "converging";
  return status;
}
