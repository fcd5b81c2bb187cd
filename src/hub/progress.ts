/**
 * Progress of a revision, from the hub's own records: per assignment the revision changed, how many
 * of its instances converged at the generation this revision gave them, whether it failed (with the
 * condition, node and attempt id) or was superseded by a later revision. Commit statuses are derived
 * from this (`pending` "3/10 nodes at generation 7", `success`, `failure`, `error`); so are
 * `GET /revisions/:sha` and `steward up`'s summary. Pure reads; JSON-serialisable.
 */
import { attemptErrorLine } from "./evidence.js";
import type { ConditionRecord, ConditionType, IntentRecord, RevisionRecord, SkipReason } from "./records.js";
import { skipWords } from "./states.js";
import type {
  RolloutPause,
  InstanceFailure as StatusFailure,
  InstanceProgress as StatusInstance,
  RevisionRecord as StatusRevision,
} from "./status.js";
import type { StoreReads } from "./store/store.js";

export type ProgressState = "pending" | "success" | "failure" | "error" | "superseded";

/** Why an instance or assignment failed: what a `failure` status names. */
export interface FailureNote {
  condition: ConditionType;
  reason: string;
  node?: string;
  attemptId?: string;
  message: string;
}

/** An instance the rollout goes on around instead of waiting for it. */
export interface SkippedMember {
  instance: string;
  node: string;
  skip: SkipReason;
}

/** A rollout's open `RolloutPaused`, as progress shows it. */
export interface PauseNote {
  /** `PausedByOperator`, or `MaxFailuresExceeded`. */
  reason: string;
  message: string;
  since: string;
  /** For an operator's pause: who paused it, and why. */
  by?: string;
  why?: string;
  /** For a pause by failures: the instances whose failures caused it. */
  instances: { instance: string; status?: string; reason?: string; attemptId?: string }[];
}

export interface InstanceProgress {
  instance: string;
  node: string;
  generation: number;
  status: IntentRecord["status"] | "not-started";
  holdReason?: string;
  attemptId?: string;
  /** Set when a later revision gave the instance a newer generation. */
  supersededBy?: { generation: number; revision: string };
}

export interface AssignmentProgress {
  assignment: string;
  state: ProgressState;
  /** One line, e.g. "3/10 nodes at generation 7". */
  description: string;
  total: number;
  converged: number;
  /** Instances on nodes this hub does not reach (their transport is not enabled here). */
  unreachable: number;
  /** Unconverged instances the rollout goes on around, and why (drained, transport not run here, silent). */
  skipped: SkippedMember[];
  /** Why the rollout is paused, while it is: who paused it and why, or which failures did. */
  pause?: PauseNote;
  failure?: FailureNote;
  /** The revision that superseded every instance of this rollout. */
  supersededBy?: string;
  instances: InstanceProgress[];
}

export interface RevisionProgress {
  revision: string;
  outcome: RevisionRecord["outcome"];
  state: ProgressState;
  description: string;
  assignments: AssignmentProgress[];
  /** For an invalid revision: where and why, as `file:line:column: message`. */
  errors?: string[];
  supersededBy?: string;
  /** The next applied revision, once there is one: the commit statuses still pending here ended naming it. */
  carriedForwardBy?: string;
}

/** Condition types that make a rollout fail, most telling first. */
const FAILING: readonly ConditionType[] = [
  "Blocked",
  "DestructiveRepairNeeded",
  "HumanProcedureRequired",
  "RolloutPaused",
  "Stuck",
  "DriftUnhealed",
  "Ambiguous",
  "ProbeFailing",
];

function note(condition: ConditionRecord): FailureNote {
  const failure: FailureNote = {
    condition: condition.type,
    reason: condition.reason,
    message: condition.message,
  };
  if (condition.node) failure.node = condition.node;
  if (condition.attemptId) failure.attemptId = condition.attemptId;
  return failure;
}

/** `skipped web-2 (drained), edge-1 (silent)`: the members a rollout goes on around, the first few named. */
export function skippedPhrase(skipped: readonly { node: string; skip: SkipReason }[], named = 3): string {
  const list = skipped.slice(0, named).map((m) => `${m.node} (${skipWords(m.skip)})`);
  if (skipped.length > named) list.push(`+${skipped.length - named} more`);
  return `skipped ${list.join(", ")}`;
}

function pauseNote(condition: ConditionRecord): PauseNote {
  const note: PauseNote = {
    reason: condition.reason,
    message: condition.message,
    since: condition.since,
    instances: ((condition.evidence.failed ?? []) as PauseNote["instances"]).map((f) => ({ ...f })),
  };
  const { pausedBy, reason } = condition.evidence as { pausedBy?: unknown; reason?: unknown };
  if (condition.reason === "PausedByOperator" && typeof pausedBy === "string") {
    note.by = pausedBy;
    note.why = typeof reason === "string" ? reason : "";
  }
  return note;
}

/** Progress of one assignment's rollout at `revision`. */
async function assignmentProgress(
  store: StoreReads,
  revision: string,
  assignment: string,
  members: { instanceKey: string; generation: number; node: string }[],
): Promise<AssignmentProgress> {
  const instances: InstanceProgress[] = [];
  let converged = 0;
  let unreachable = 0;
  let superseded = 0;
  let latest: { revision: string; seq: number } | undefined;
  const failures: ConditionRecord[] = [];
  for (const member of members) {
    const intent = await store.intents.get(member.instanceKey, member.generation);
    const entry: InstanceProgress = {
      instance: member.instanceKey,
      node: member.node,
      generation: member.generation,
      status: intent?.status ?? "not-started",
    };
    if (intent?.holdReason) entry.holdReason = intent.holdReason;
    if (intent?.lastAttemptId) entry.attemptId = intent.lastAttemptId;
    const current = await store.desired.instance(member.instanceKey);
    if (current && current.generation > member.generation) {
      entry.supersededBy = { generation: current.generation, revision: current.revision };
      superseded++;
      const seq = (await store.desired.revision(current.revision))?.seq ?? 0;
      if (!latest || seq > latest.seq) latest = { revision: current.revision, seq };
    } else if (intent?.status === "converged") converged++;
    else if (intent?.holdReason === "transport-disabled") unreachable++;
    else
      for (const condition of await store.conditions.openOf("instance", member.instanceKey))
        if (FAILING.includes(condition.type) && condition.generation === member.generation)
          failures.push(condition);
    instances.push(entry);
  }
  const paused = await store.conditions.findOpen("RolloutPaused", "rollout", `${assignment}@${revision}`);
  // An operator's pause is a decision, not a failure: the rollout is pending, and says who paused it.
  if (paused && paused.reason !== "PausedByOperator") failures.unshift(paused);
  const skipped = (await store.rollouts.skipped(assignment, revision, 1_000)).map((m) => ({
    instance: m.instanceKey,
    node: m.node,
    skip: m.skip,
  }));
  const live = members.length - superseded;
  const generations = [
    ...new Set(members.filter((_, i) => !instances[i]!.supersededBy).map((m) => m.generation)),
  ];
  const at = generations.length === 1 ? ` at generation ${generations[0]}` : "";
  const progress: AssignmentProgress = {
    assignment,
    state: "pending",
    description: `${converged}/${live} nodes${at}`,
    total: live,
    converged,
    unreachable,
    skipped,
    instances,
  };
  if (skipped.length > 0) progress.description += `; ${skippedPhrase(skipped)}`;
  if (paused) {
    progress.pause = pauseNote(paused);
    if (progress.pause.by) progress.description += `; paused by ${progress.pause.by}: ${progress.pause.why}`;
  }
  if (live === 0 && latest) {
    progress.state = "superseded";
    progress.supersededBy = latest.revision;
    progress.description = `superseded by ${latest.revision.slice(0, 12)}`;
    return progress;
  }
  failures.sort((a, b) => FAILING.indexOf(a.type) - FAILING.indexOf(b.type));
  const blocking = failures.find((c) => c.type !== "ProbeFailing" && c.type !== "Ambiguous") ?? undefined;
  if (blocking) {
    progress.state = "failure";
    progress.failure = note(blocking);
    progress.description = `${blocking.type} on ${blocking.node ?? blocking.subject}${blocking.attemptId ? ` (attempt ${blocking.attemptId})` : ""}: ${converged}/${live} nodes${at}${skipped.length > 0 ? `; ${skippedPhrase(skipped)}` : ""}`;
  } else if (converged === live) progress.state = "success";
  return progress;
}

/** Progress of `sha`, or undefined when the hub has no such revision. */
export async function revisionProgress(
  store: StoreReads,
  sha: string,
): Promise<RevisionProgress | undefined> {
  const revision = await store.desired.revision(sha);
  if (!revision) return undefined;
  if (revision.outcome === "invalid") {
    const errors = (revision.diagnostics ?? []).map((d) => `${d.file}:${d.line}:${d.column}: ${d.message}`);
    return {
      revision: sha,
      outcome: revision.outcome,
      state: "error",
      description: `invalid: ${errors[0] ?? "see diagnostics"}${errors.length > 1 ? ` (+${errors.length - 1} more)` : ""}`,
      assignments: [],
      errors,
    };
  }
  if (revision.outcome === "superseded") {
    const progress: RevisionProgress = {
      revision: sha,
      outcome: revision.outcome,
      state: "superseded",
      description: `superseded by ${revision.supersededBy?.slice(0, 12) ?? "a later commit"} before it was applied`,
      assignments: [],
    };
    if (revision.supersededBy) progress.supersededBy = revision.supersededBy;
    return progress;
  }
  const byAssignment = new Map<string, { instanceKey: string; generation: number; node: string }[]>();
  for (const member of await store.desired.generationsOf(sha)) {
    const list = byAssignment.get(member.assignment) ?? [];
    list.push(member);
    byAssignment.set(member.assignment, list);
  }
  const assignments: AssignmentProgress[] = [];
  for (const [name, members] of byAssignment)
    assignments.push(await assignmentProgress(store, sha, name, members));
  const live = assignments.filter((a) => a.state !== "superseded");
  const total = live.reduce((n, a) => n + a.total, 0);
  const converged = live.reduce((n, a) => n + a.converged, 0);
  const failed = live.find((a) => a.state === "failure");
  const progress: RevisionProgress = {
    revision: sha,
    outcome: revision.outcome,
    state: failed ? "failure" : live.every((a) => a.state === "success") ? "success" : "pending",
    description: failed
      ? `${failed.assignment}: ${failed.description}`
      : `${converged}/${total} instances converged`,
    assignments,
  };
  if (assignments.length > 0 && live.length === 0) {
    progress.state = "superseded";
    progress.supersededBy = assignments[0]!.supersededBy!;
    progress.description = `superseded by ${progress.supersededBy.slice(0, 12)}`;
  }
  const carrier = await store.desired.nextAppliedRevision(revision.seq);
  if (carrier) progress.carriedForwardBy = carrier.sha;
  return progress;
}

/** What `revisionStatuses` (status.ts) needs to build a revision's commit statuses. */
export interface StatusInputs {
  revision: StatusRevision;
  instances: StatusInstance[];
  failures: StatusFailure[];
  /** Rollouts of the revision an operator paused, with who and why. */
  paused: RolloutPause[];
}

/**
 * The inputs of a revision's commit statuses, from the hub's records: each instance at the
 * generation this revision gave it (converged or not, and whether its rollout goes on around its
 * node), the open conditions stopping them, and the operators' pauses. A revision whose every
 * instance has a newer generation from a later revision before it converged is superseded by the
 * latest of them; one that converged first keeps its success. A revision that is no longer the
 * newest applied one is carried forward by the next: its contexts that are still pending end.
 */
export async function statusInputs(store: StoreReads, sha: string): Promise<StatusInputs | undefined> {
  const record = await store.desired.revision(sha);
  if (!record) return undefined;
  const revision: StatusRevision = {
    sha,
    outcome: record.outcome,
    changedAssignments: record.changedAssignments,
    supersededBy: record.supersededBy ?? null,
    diagnostics: record.diagnostics ?? [],
  };
  if (record.outcome !== "applied") return { revision, instances: [], failures: [], paused: [] };
  const carrier = await store.desired.nextAppliedRevision(record.seq);
  if (carrier) revision.carriedForwardBy = carrier.sha;
  const instances: StatusInstance[] = [];
  const failures: StatusFailure[] = [];
  const skips = new Map<string, SkipReason | undefined>();
  const skipOf = async (node: string) => {
    if (!skips.has(node)) skips.set(node, await store.nodes.skip(node));
    return skips.get(node);
  };
  let successor: { sha: string; seq: number } | undefined;
  let allSuperseded = true;
  let allConverged = true;
  for (const member of await store.desired.generationsOf(sha)) {
    const intent = await store.intents.get(member.instanceKey, member.generation);
    const converged = intent?.outcome === "converged" || intent?.status === "converged";
    allConverged &&= converged;
    const instance: StatusInstance = {
      assignment: member.assignment,
      node: member.node,
      generation: member.generation,
      converged,
    };
    const skip = converged ? undefined : await skipOf(member.node);
    if (skip) instance.skipped = skipWords(skip);
    instances.push(instance);
    const current = await store.desired.instance(member.instanceKey);
    if (current && current.generation > member.generation) {
      const seq = (await store.desired.revision(current.revision))?.seq ?? 0;
      if (!successor || seq > successor.seq) successor = { sha: current.revision, seq };
      continue;
    }
    allSuperseded = false;
    if (converged) continue;
    for (const condition of await store.conditions.openOf("instance", member.instanceKey)) {
      if (!FAILING.includes(condition.type) || condition.generation !== member.generation) continue;
      if (condition.type === "ProbeFailing" || condition.type === "Ambiguous") continue;
      const failure: StatusFailure = {
        assignment: member.assignment,
        node: member.node,
        condition: condition.type,
        message: condition.message,
      };
      if (condition.attemptId) {
        failure.attemptId = condition.attemptId;
        const line = attemptErrorLine(await store.attempts.get(condition.attemptId));
        if (line) failure.errorLine = line;
      }
      failures.push(failure);
    }
  }
  if (instances.length > 0 && allSuperseded && !allConverged && successor)
    revision.supersededBy = successor.sha;
  const paused: RolloutPause[] = [];
  for (const assignment of new Set(instances.map((i) => i.assignment))) {
    const decision = await store.rollouts.decision(assignment, sha);
    if (decision?.decision === "pause") paused.push({ assignment, by: decision.by, reason: decision.reason });
  }
  return { revision, instances, failures, paused };
}
