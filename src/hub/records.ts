/**
 * The hub's durable records, as the reconciler reads and writes them. Times are ISO 8601 strings (they
 * sort as text); JSON columns are parsed. These are the shapes behind the Store port.
 */
import type { Diagnostic } from "../model/diagnostics.js";
import type { EffectiveBudget } from "../model/fleet.js";
import type { FailureClass, InstanceReport, InstanceSpec, Node, Rollout } from "../model/generated.js";

/** What an intent is doing now. Terminal: converged (until drift), superseded, retired. */
export type IntentStatus =
  /** Needs an attempt; left only when the hub stopped in the middle of deciding. */
  | "pending"
  /** An attempt is in flight; its lease ends at `deadlineAt`. */
  | "dispatched"
  /** The attempt succeeded; waiting until `deadlineAt` for a report that shows convergence. */
  | "verifying"
  /** An attempt's result is lost; no new attempt until a report taken after its dispatch. */
  | "ambiguous"
  /** A transient failure; the next attempt is due at `nextAttemptAt`. */
  | "backoff"
  /** Budget spent; still retrying at the slowest cadence (a `Stuck` condition is open). */
  | "stuck"
  /** A permanent failure: no further attempts for this generation (a `Blocked` condition is open). */
  | "blocked"
  /** Waiting for `dependsOn` on the same node to converge: not a failure, spends no budget. */
  | "waiting"
  /** Not dispatched by policy; `holdReason` says which. */
  | "held"
  | "converged"
  | "superseded"
  | "retired";

/** Why a held intent is not dispatched. */
export type HoldReason =
  /** Fleet mode or the assignment's `rollout.stage` is `observe`: compare, dispatch nothing. */
  | "observe"
  /** The node is draining. */
  | "draining"
  /** The node's transport is not enabled in this hub (e.g. `steward up` runs only `local`). */
  | "transport-disabled"
  /** The node is not declared in the revision the hub serves. */
  | "node-unknown"
  /** A canary of this rollout has not converged and soaked yet. */
  | "canary"
  /** `maxInFlight` attempts of this rollout are already in progress. */
  | "batch"
  /** More than `maxFailures` instances of this rollout failed: `RolloutPaused`. */
  | "paused"
  /** An operator paused this rollout (`steward rollout pause`): `RolloutPaused` until resumed. */
  | "paused-by-operator";

export const TERMINAL_INTENT_STATUSES: readonly IntentStatus[] = ["superseded", "retired"];

export interface IntentRecord {
  instanceKey: string;
  generation: number;
  assignment: string;
  node: string;
  revision: string;
  hash: string;
  state: "running" | "stopped";
  version?: string;
  status: IntentStatus;
  holdReason?: HoldReason;
  /** Last known outcome; kept when the intent is superseded, so history shows how it ended. */
  outcome?: "converged" | "blocked" | "stuck" | "failed" | "ambiguous";
  failureClass?: FailureClass;
  reason?: string;
  message?: string;
  /** Failures counted against the budget for this generation (waiting never counts). */
  failures: number;
  firstFailureAt?: string;
  nextAttemptAt?: string;
  /** End of the current wait: the attempt's lease, the probe grace after success, the ambiguity timeout. */
  deadlineAt?: string;
  lastAttemptId?: string;
  /** The last attempt whose outcome is already counted (so a rerun of reconcile never counts twice). */
  accountedAttemptId?: string;
  everConverged: boolean;
  convergedAt?: string;
  supersededBy?: number;
  createdAt: string;
  updatedAt: string;
}

/**
 * queued: in the outbox. dispatched: handed to the transport, lease running. succeeded/failed: the
 * result is known. ambiguous: the result is lost. lost: a later report settled the state without
 * knowing the attempt. cancelled: never handed over because a newer generation superseded it.
 * superseded: handed over (or its result lost), then a newer generation (`supersededBy`) took over:
 * its result no longer matters, and a late one is only kept as evidence.
 */
export type AttemptStatus =
  | "queued"
  | "dispatched"
  | "succeeded"
  | "failed"
  | "ambiguous"
  | "lost"
  | "cancelled"
  | "superseded";

/** Attempt statuses whose result is still awaited. */
export const IN_FLIGHT_ATTEMPT_STATUSES: readonly AttemptStatus[] = ["queued", "dispatched", "ambiguous"];

export interface AttemptRecord {
  id: string;
  instanceKey: string;
  generation: number;
  assignment: string;
  node: string;
  status: AttemptStatus;
  failureClass?: FailureClass;
  reason?: string;
  message?: string;
  evidence?: unknown;
  createdAt: string;
  dispatchedAt?: string;
  leaseExpiresAt?: string;
  /** When the agent says it finished (its clock). */
  finishedAt?: string;
  /**
   * When this hub recorded its result (the hub's clock): the wait for the report that confirms it
   * starts here, so a result that sat in a busy hub's queue, or an agent's clock behind the hub's,
   * does not use the wait up before the report behind it could be read.
   */
  recordedAt?: string;
  settledBy?: "result" | "report" | "dispatch" | "superseded";
  /** For a superseded attempt: the generation that took over. */
  supersededBy?: number;
  /** For a superseded attempt: the result that still came, as the agent reported it (evidence only). */
  lateResult?: { outcome: "succeeded" | "failed"; reason?: string; at: string };
  /**
   * For an ambiguous attempt: only a report taken after this time settles it — the end of its lease
   * (it may have run until then), or when the transport said it was lost.
   */
  settleAfter?: string;
}

export interface OutboxRow {
  attemptId: string;
  node: string;
  bundle: string;
  createdAt: string;
}

/** The desired side of one instance: its current generation, as the syncer recorded it. */
export interface DesiredInstance {
  key: string;
  assignment: string;
  node: string;
  generation: number;
  hash: string;
  revision: string;
  retiredAt?: string;
  spec: InstanceSpec;
  rollout: Rollout;
  budget: EffectiveBudget;
}

export interface NodeRecord {
  name: string;
  transport: "local" | "nats" | "ssh";
  spec: Node;
  revision?: string;
  removedAt?: string;
  draining: boolean;
  drainReason?: string;
  drainedAt?: string;
  drainedBy?: string;
  lastHeartbeatAt?: string;
  lastReportAt?: string;
}

/** The latest observation of one instance. */
export interface Observation {
  instanceKey: string;
  node: string;
  assignment: string;
  generation: number;
  hash?: string;
  state: "running" | "stopped" | "unknown";
  version?: string;
  converged: boolean;
  takenAt: string;
  report: InstanceReport;
}

export type ConditionType =
  | "InvalidRevision"
  | "Blocked"
  | "Stuck"
  | "Ambiguous"
  | "NodeSilent"
  | "ProbeFailing"
  | "DriftUnhealed"
  | "DestructiveRepairNeeded"
  | "RolloutPaused"
  | "TransportDegraded"
  | "StatusWriteFailing"
  | "HumanProcedureRequired"
  /** A one-shot command started and left no outcome: a person decides whether it ran (`--outcome ran|rerun`). */
  | "OneShotInterrupted"
  /** A host asks to join as a node: a person approves (`steward enrolments approve`) or denies it. */
  | "EnrolmentRequested"
  /** A host presents, for a node, another identity than the fleet declares or another host asked with. */
  | "IdentityConflict"
  /** A host reached over SSH has an identity its Node document does not declare yet: add it. */
  | "IdentityUndeclared";

export type SubjectKind = "node" | "instance" | "revision" | "rollout" | "transport" | "status";

export type Resolver = "operator" | "agent" | "steward";

export interface ConditionRecord {
  id: string;
  type: ConditionType;
  subjectKind: SubjectKind;
  subject: string;
  status: "open" | "resolved";
  /** When status or reason last changed. */
  since: string;
  lastObserved: string;
  reason: string;
  message: string;
  evidence: Record<string, unknown>;
  /** Attempt ids tried, oldest first. */
  tried: string[];
  resolver: Resolver;
  procedure?: string;
  assignment?: string;
  node?: string;
  revision?: string;
  generation?: number;
  attemptId?: string;
  openedAt: string;
  resolvedAt?: string;
  resolution?: string;
}

export interface ConditionEvent {
  conditionId: string;
  at: string;
  event: "opened" | "updated" | "resolved";
  reason: string;
  message: string;
  attemptId?: string;
}

export type TaskStatus = "open" | "claimed" | "resolved" | "closed";

/**
 * A decision an answer to a task carries: an interrupted one-shot `ran` (record it as done) or is to
 * `rerun`; a paused rollout is to `resume` past the failures it has seen.
 */
export type TaskOutcome = "ran" | "rerun" | "resume";

export interface TaskRecord {
  id: string;
  conditionId: string;
  type: ConditionType;
  subjectKind: SubjectKind;
  subject: string;
  status: TaskStatus;
  createdAt: string;
  claimedBy?: string;
  claimedAt?: string;
  resolvedBy?: string;
  resolvedAt?: string;
  action?: string;
  /** The decision the answer carries (`ran` or `rerun` for an interrupted one-shot, `resume` for a paused rollout). */
  outcome?: TaskOutcome;
  closedReason?: string;
  /** When the task was handed to the bus's task queue (absent: not published). */
  publishedAt?: string;
}

/**
 * Why a rollout goes on around a node instead of waiting for it: the node is drained, this hub does
 * not run its transport (an open `TransportDegraded` `TransportNotEnabled`), or it is silent (an
 * open `NodeSilent`). Its instances hold no in-flight slot and count as no failure.
 */
export type SkipReason = "drained" | "transport-not-run" | "silent";

/** An operator's decision about one rollout (an assignment at a revision), as recorded. */
export interface RolloutDecisionRecord {
  /** Order of decisions; the latest of a rollout is in force. */
  seq: number;
  assignment: string;
  revision: string;
  /** `pause`: hold the members that have not started. `resume`: go on past the failures seen so far. */
  decision: "pause" | "resume";
  /** Who decided (`--as`, `STEWARD_OPERATOR`, `USER`, or the agent that answered the task). */
  by: string;
  /** Why, in their words. */
  reason: string;
  at: string;
  /** The `RolloutPaused` task this decision answered, when it came as an answer. */
  taskId?: string;
  /** For `resume`: the failed instances the rollout goes on past (those an earlier resume accepted too). */
  accepted: string[];
}

/** A synced revision, as the syncer recorded it. */
export interface RevisionRecord {
  sha: string;
  seq: number;
  branch: string;
  authorName: string;
  message: string;
  committedAt: string;
  syncedAt: string;
  outcome: "applied" | "invalid" | "superseded";
  diagnostics?: Diagnostic[];
  supersededBy?: string;
  changedAssignments: string[];
}

/** A hub replica sharing the store, as it last renewed itself (table `replicas`). */
export interface ReplicaRecord {
  id: string;
  /** Where its HTTP endpoints answer (`http://host:port`), when it serves them. */
  address?: string;
  startedAt: string;
  renewedAt: string;
  /** Gone once this has passed without a renewal. */
  expiresAt: string;
  /** Shard leases it held at its last renewal, and the nodes in them. */
  shards: number;
  nodes: number;
  /** The database session it keeps open while it lives (Store.session), if the database has sessions. */
  session?: string;
}

/** A lease only one replica holds at a time (`shard:N`, `sync`), with its fencing token. */
export interface LeaseRecord {
  name: string;
  holder: string;
  token: number;
  expiresAt: string;
}
