/**
 * What an instance's state is called when it is shown: one mapping from every intent status and
 * hold reason the hub records to the states a person sees, shared by `steward status`, `steward
 * get`, `steward describe`, `steward up` and the web view, so they never name one state two ways.
 *
 * The order of the checks is the policy:
 *  1. superseded and retired intents are history, not state;
 *  2. an open condition that needs a person's judgement about a one-shot that was interrupted
 *     (`OneShotInterrupted`) wins over anything the intent says;
 *  3. observation wins: an instance the latest report shows converged is converged;
 *  4. a held intent is named by why it is held (observe-only, drained, skipped, held by rollout);
 *  5. otherwise the intent's status names it.
 */
import type { ConditionType, HoldReason, IntentStatus, SkipReason } from "./records.js";

/** A state as shown. */
export type DisplayState =
  | "converged"
  | "converging"
  | "verifying"
  | "waiting"
  | "failing"
  | "blocked"
  | "stuck"
  | "ambiguous"
  | "interrupted"
  | "held"
  | "skipped"
  | "drained"
  | "observe-only"
  | "superseded"
  | "retired";

/**
 * How a state counts in the fleet's answer: `right` (done), `converging` (work in flight or a
 * failure within budget), `not-right` (an open condition stands behind it), `excluded` (not
 * steward's to deliver now: observe-only, drained, skipped, history).
 */
export type StateWeight = "right" | "converging" | "not-right" | "excluded";

/** What a display state looks like and how it counts. */
export interface DisplayStateInfo {
  state: DisplayState;
  /** The words for it, e.g. `failing within budget`, `held by rollout`. */
  label: string;
  /** A symbol that says it without colour (never colour alone). */
  symbol: string;
  /** The family of colours it is drawn in. */
  tone: "ok" | "progress" | "attention" | "failure" | "muted";
  weight: StateWeight;
}

function info(
  state: DisplayState,
  label: string,
  symbol: string,
  tone: DisplayStateInfo["tone"],
  weight: StateWeight,
): DisplayStateInfo {
  return { state, label, symbol, tone, weight };
}

/** Every display state, in the order totals are listed. */
export const DISPLAY_STATES: Readonly<Record<DisplayState, DisplayStateInfo>> = {
  converged: info("converged", "converged", "✓", "ok", "right"),
  converging: info("converging", "converging", "…", "progress", "converging"),
  verifying: info("verifying", "verifying", "…", "progress", "converging"),
  waiting: info("waiting", "waiting", "⏸", "progress", "converging"),
  failing: info("failing", "failing within budget", "↻", "attention", "converging"),
  blocked: info("blocked", "blocked", "✗", "failure", "not-right"),
  stuck: info("stuck", "stuck", "✗", "failure", "not-right"),
  ambiguous: info("ambiguous", "ambiguous", "?", "attention", "converging"),
  interrupted: info("interrupted", "interrupted", "!", "failure", "not-right"),
  held: info("held", "held by rollout", "⏸", "progress", "converging"),
  skipped: info("skipped", "skipped", "-", "muted", "excluded"),
  drained: info("drained", "drained", "-", "muted", "excluded"),
  "observe-only": info("observe-only", "observe-only", "○", "muted", "excluded"),
  superseded: info("superseded", "superseded", "·", "muted", "excluded"),
  retired: info("retired", "retired", "·", "muted", "excluded"),
};

/** The condition type of a one-shot whose outcome was lost: a person says whether it ran. */
const ONE_SHOT_INTERRUPTED: ConditionType = "OneShotInterrupted";

const BY_HOLD: Readonly<Record<HoldReason, DisplayState>> = {
  observe: "observe-only",
  draining: "drained",
  "transport-disabled": "skipped",
  "node-unknown": "skipped",
  canary: "held",
  batch: "held",
  paused: "held",
  "paused-by-operator": "held",
};

const BY_STATUS: Readonly<Record<IntentStatus | "not-started", DisplayState>> = {
  "not-started": "converging",
  pending: "converging",
  dispatched: "converging",
  verifying: "verifying",
  ambiguous: "ambiguous",
  backoff: "failing",
  stuck: "stuck",
  blocked: "blocked",
  waiting: "waiting",
  // A held intent without its reason (an old record): the rollout holds it.
  held: "held",
  // Recorded converged, but the latest report differs (drift): the repair is the next attempt.
  converged: "converging",
  superseded: "superseded",
  retired: "retired",
};

/** What the state mapping reads of an instance. */
export interface StateInput {
  /** The intent's status (`not-started`: no intent yet). */
  status: IntentStatus | "not-started";
  holdReason?: HoldReason;
  /** The latest report shows the desired generation, state, resources and probes. */
  converged: boolean;
  /** Types of the conditions open on the instance. */
  openConditions: readonly string[];
}

/** The display state of an instance (see the module's order). */
export function displayState(input: StateInput): DisplayState {
  if (input.status === "superseded" || input.status === "retired") return input.status;
  if (input.openConditions.includes(ONE_SHOT_INTERRUPTED)) return "interrupted";
  if (input.converged) return "converged";
  if (input.status === "held" && input.holdReason) return BY_HOLD[input.holdReason];
  return BY_STATUS[input.status];
}

/** The display state of one intent of an instance's history (observation is about the current one only). */
export function intentDisplayState(intent: { status: IntentStatus; holdReason?: HoldReason }): DisplayState {
  if (intent.status === "converged") return "converged";
  return displayState({ ...intent, converged: false, openConditions: [] });
}

const SKIP_WORDS: Readonly<Record<SkipReason, string>> = {
  drained: "drained",
  "transport-not-run": "transport not run here",
  silent: "silent",
};

/** Why a rollout goes on around a node, in the words every view uses. */
export function skipWords(reason: SkipReason): string {
  return SKIP_WORDS[reason];
}
