/**
 * The Store port: everything the hub keeps durably, as domain operations. SQLite (sqlite.ts) is the
 * embedded default; a NATS JetStream KV store can implement the same port for several hub replicas.
 * Calls are synchronous and every state change a caller makes inside `transaction` commits together
 * (an attempt with its outbox row, an intent with its conditions).
 */
import type { EffectiveBudget, FleetSettings } from "../../model/fleet.js";
import type { Report, Rollout } from "../../model/generated.js";
import type {
  AttemptRecord,
  ConditionEvent,
  ConditionRecord,
  ConditionType,
  DesiredInstance,
  HoldReason,
  IntentRecord,
  IntentStatus,
  NodeRecord,
  Observation,
  OutboxRow,
  RevisionRecord,
  RolloutDecisionRecord,
  SkipReason,
  SubjectKind,
  TaskRecord,
  TaskStatus,
} from "../records.js";

/** What a rollout gate counts of a rollout's intents (one assignment at one revision). */
export interface RolloutCounts {
  /** Started and not finished (dispatched, verifying, ambiguous, backoff), on nodes not skipped. */
  inProgress: number;
  /** Blocked or stuck, on nodes not skipped, and not accepted by an operator's resume. */
  failed: number;
}

/** A fact about the sync itself, as the syncer recorded it (table `sync_events`). */
export interface SyncEventRecord {
  branch: string;
  kind: "force-push" | "fetch-failed" | string;
  head?: string;
  lastGood?: string;
  message: string;
  openedAt: string;
}

export interface ConditionFilter {
  status?: "open" | "resolved";
  type?: ConditionType;
  subjectKind?: SubjectKind;
  subject?: string;
  revision?: string;
  assignment?: string;
  node?: string;
}

export interface Store {
  /** Runs `fn` in one transaction (nested calls join the outer one). */
  transaction<T>(fn: () => T): T;

  meta(key: string): string | undefined;
  setMeta(key: string, value: string): void;

  // Desired state, as the syncer wrote it (rollout and budget: the assignment's current policy).
  desired(instanceKey: string): DesiredInstance | undefined;
  desiredAt(instanceKey: string, generation: number): DesiredInstance | undefined;
  /** Every instance row (current generation), retired ones included, sorted by key. */
  instanceList(): {
    key: string;
    assignment: string;
    node: string;
    generation: number;
    revision: string;
    retiredAt?: string;
  }[];
  activeInstanceKeysOfNode(node: string): string[];
  activeInstanceKeysOfAssignment(assignment: string): string[];
  /** Instances whose current generation `sha` produced, and those it retired. */
  instanceKeysChangedBy(sha: string): string[];
  /** Instances `sha` produced generations for (current or since superseded), with that generation. */
  generationsOfRevision(
    sha: string,
  ): { instanceKey: string; generation: number; assignment: string; node: string }[];
  revisionsAfter(seq: number): RevisionRecord[];
  /** The syncer's open events (a refused force-push, a failing fetch); none before the syncer's tables exist. */
  openSyncEvents(): SyncEventRecord[];
  revision(sha: string): RevisionRecord | undefined;
  latestRevision(): RevisionRecord | undefined;
  /** The first applied revision synced after sequence number `seq`: the one that carried it forward. */
  nextAppliedRevision(seq: number): RevisionRecord | undefined;
  /** The last applied revision synced before sequence number `seq`. */
  previousAppliedRevision(seq: number): RevisionRecord | undefined;
  /** The revision whose sha starts with `prefix`, when exactly one does. */
  revisionByPrefix(prefix: string): RevisionRecord | undefined;
  /** Instances that need a reconcile after a restart: current generation not converged or not yet taken in. */
  recoveryKeys(): string[];
  /** Nodes of a rollout (assignment at revision), sorted by name. */
  rolloutNodes(assignment: string, revision: string, limit?: number): string[];
  rolloutSize(assignment: string, revision: string): number;

  // Nodes.
  node(name: string): NodeRecord | undefined;
  nodes(): NodeRecord[];
  upsertNode(node: Pick<NodeRecord, "name" | "transport" | "spec" | "revision">): void;
  markNodesRemoved(declared: readonly string[], at: string): void;
  setDraining(name: string, draining: boolean, detail: { by: string; reason?: string; at: string }): boolean;
  touchNode(name: string, at: { heartbeatAt?: string; reportAt?: string }): void;
  /** Records the policy an assignment declares now; returns true when it changed. */
  savePolicy(assignment: string, revision: string, rollout: Rollout, budget: EffectiveBudget): boolean;
  fleetSettings(): FleetSettings | undefined;
  saveFleetSettings(revision: string, settings: FleetSettings): void;

  // Intents.
  intent(instanceKey: string, generation: number): IntentRecord | undefined;
  intentsOf(instanceKey: string): IntentRecord[];
  intents(filter?: { status?: IntentStatus; node?: string; assignment?: string }): IntentRecord[];
  saveIntent(intent: IntentRecord): void;
  /** Intents of older generations that are not yet superseded or retired. */
  olderLiveIntents(instanceKey: string, generation: number): IntentRecord[];
  /**
   * A rollout's intents in progress (dispatched, verifying, ambiguous, backoff) that hold one of its
   * in-flight slots: those on skipped nodes (drained, transport not run here, silent: SkipReason)
   * hold none. An index range of the rollout, and one node lookup per row it counts.
   */
  countInFlight(assignment: string, revision: string): number;
  /**
   * A rollout's failed intents (blocked, stuck) that count against `maxFailures`: not those on
   * skipped nodes, nor those an operator's resume accepted.
   */
  countFailed(assignment: string, revision: string): number;
  /** Current intents of a rollout that have had an attempt. */
  countStarted(assignment: string, revision: string): number;
  /** The failures `countFailed` counts (not skipped, not accepted), by node. */
  rolloutFailures(assignment: string, revision: string, limit: number): IntentRecord[];
  /** Unconverged intents of a rollout on skipped nodes, with why, by node. */
  rolloutSkipped(
    assignment: string,
    revision: string,
    limit: number,
  ): { instanceKey: string; node: string; status: IntentStatus; skip: SkipReason }[];
  /** Why the rollouts go on around `node` now, or undefined when they wait for it. */
  nodeSkip(name: string): SkipReason | undefined;
  /** Rollouts (assignment at revision) with a live, unconverged intent on `node`. */
  rolloutsOfNode(node: string): { assignment: string; revision: string }[];
  /** Held intents of a rollout that a freed slot or a resolved pause may release, oldest node first. */
  heldIntents(assignment: string, revision: string, limit: number): string[];
  /** Whether any intent of the rollout is held by it (by default for any rollout reason: canary, batch, paused). */
  anyHeld(assignment: string, revision: string, reasons?: readonly HoldReason[]): boolean;
  /** The decision in force for a rollout (its latest), if an operator made one. */
  rolloutDecision(assignment: string, revision: string): RolloutDecisionRecord | undefined;
  /**
   * Records an operator's decision. A `resume` also accepts the rollout's failed instances of now
   * (blocked or stuck), which then no longer count against `maxFailures`; `accepted` lists every
   * failure the rollout goes on past (an earlier resume's too).
   */
  recordRolloutDecision(decision: Omit<RolloutDecisionRecord, "seq" | "accepted">): RolloutDecisionRecord;
  /** Instance keys on `node` whose intent has one of `statuses`. */
  intentKeysOfNode(node: string, statuses: readonly IntentStatus[]): string[];
  intentCountsByStatus(): Record<string, number>;

  // Attempts and the outbox.
  attempt(id: string): AttemptRecord | undefined;
  attemptsOf(instanceKey: string, generation?: number): AttemptRecord[];
  /** Inserts an attempt and its outbox row (call inside the transaction that decided it). */
  insertAttempt(attempt: AttemptRecord, bundle: string): void;
  saveAttempt(attempt: AttemptRecord): void;
  /**
   * Saves an attempt being handed over (status `dispatched`, its lease set) and, while it is still
   * its intent's in-flight attempt, moves the intent's deadline to the lease's end: what a reconcile
   * of the intent would write, without one.
   */
  saveDispatched(attempt: AttemptRecord & { leaseExpiresAt: string }): void;
  outbox(): OutboxRow[];
  outboxRow(attemptId: string): OutboxRow | undefined;
  deleteOutbox(attemptId: string): void;
  /** Attempts of `node` that are dispatched or ambiguous. */
  openAttemptsOfNode(node: string): AttemptRecord[];
  attemptCountsByStatus(): Record<string, number>;

  // Observations.
  reportMeta(node: string): { takenAt: string; seq?: number } | undefined;
  /**
   * Stores a full report as the node's latest observation: an instance it does not mention loses
   * its observation (the node holds nothing of it). Returns the instance keys whose observation
   * changed, or undefined (storing nothing) when the report is older than the stored one.
   */
  saveReport(report: Report, receivedAt: string): string[] | undefined;
  observation(instanceKey: string): Observation | undefined;

  // Conditions and tasks.
  /** The open condition of this type on this subject (with this reason and generation, when given). */
  openCondition(
    type: ConditionType,
    subjectKind: SubjectKind,
    subject: string,
    reason?: string,
    generation?: number,
  ): ConditionRecord | undefined;
  condition(id: string): ConditionRecord | undefined;
  openConditionsOf(subjectKind: SubjectKind, subject: string): ConditionRecord[];
  conditions(filter?: ConditionFilter): ConditionRecord[];
  insertCondition(condition: ConditionRecord): void;
  saveCondition(condition: ConditionRecord): void;
  /**
   * Calls `listener` with a condition's id whenever it is inserted or saved — inside the writer's
   * transaction, which may still roll back: read the condition after it (the next turn of the event
   * loop). Returns a function that removes the listener.
   */
  onConditionWrite(listener: (id: string) => void): () => void;
  appendConditionEvent(event: ConditionEvent): void;
  conditionHistory(conditionId: string): ConditionEvent[];
  openConditionCountsByType(): Record<string, number>;
  task(id: string): TaskRecord | undefined;
  taskOfCondition(conditionId: string): TaskRecord | undefined;
  tasks(filter?: { status?: TaskStatus }): TaskRecord[];
  insertTask(task: TaskRecord): void;
  /** Open tasks not yet handed to the bus's task queue, oldest first. */
  unpublishedTasks(): TaskRecord[];
  markTaskPublished(id: string, at: string): void;
  saveTask(task: TaskRecord): void;

  close(): void;
}
