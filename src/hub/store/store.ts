/**
 * The store ports: what the hub keeps durably, one narrow port per concern, each owning its tables.
 * Every call is asynchronous. Reads on the `Store` see committed state; writes happen only inside a
 * unit of work (`store.transaction(async (tx) => ...)`), whose ports read their own writes and commit
 * together — an attempt with its outbox row, an intent with its conditions — or not at all. Inside a
 * unit, `tx.transaction(...)` is a step: a step that fails rolls back alone (the unit runs its steps
 * without savepoints, and once more with them when one failed: StepsRerun). A unit of work runs
 * its steps one after another and never waits for anything but the store (no transport call inside).
 *
 * Implementations: SQLite (sqlite.ts, the embedded default: units of work one at a time) and
 * PostgreSQL (postgres.ts, for several hub replicas). Both run the same SQL (sql/*.ts); one
 * conformance suite (test/hub/store/) holds them to the same contract.
 */
import type { EffectiveBudget, FleetSettings } from "../../model/fleet.js";
import type { Report, Rollout } from "../../model/generated.js";
import type { GenerationStore, SyncState } from "../../repo/store.js";
import type { EnrolmentRecord, EnrolmentStatus, IssuedCredential } from "../enrolment/records.js";
import type {
  AttemptRecord,
  ConditionEvent,
  ConditionRecord,
  ConditionType,
  DesiredInstance,
  HoldReason,
  IntentRecord,
  IntentStatus,
  LeaseRecord,
  NodeRecord,
  Observation,
  OutboxRow,
  ReplicaRecord,
  RevisionRecord,
  RolloutDecisionRecord,
  SkipReason,
  SubjectKind,
  TaskRecord,
  TaskStatus,
} from "../records.js";
import type { CommitState, CommitStatus } from "../status.js";

/** A fact about the sync itself, as the syncer recorded it (table `sync_events`). */
export interface SyncEventRecord {
  branch: string;
  kind: "force-push" | "fetch-failed" | string;
  head?: string;
  lastGood?: string;
  message: string;
  openedAt: string;
}

/** One instance row (its current generation), as `desired.instances()` lists them. */
export interface InstanceRow {
  key: string;
  assignment: string;
  node: string;
  generation: number;
  revision: string;
  retiredAt?: string;
}

/** A generation a revision produced (current or since superseded). */
export interface RevisionMember {
  instanceKey: string;
  generation: number;
  assignment: string;
  node: string;
}

/**
 * Desired state: revisions, generations and instances as the syncer recorded them (the syncer's
 * `GenerationStore` writes them), and what the hub records of a revision's declarations besides:
 * each assignment's current rollout policy and budget, and the fleet settings.
 */
export interface DesiredStateReads {
  /** The instance's current generation with the assignment's current policy (retired ones too). */
  instance(instanceKey: string): Promise<DesiredInstance | undefined>;
  /** Generation `generation` of the instance, with the policy it was recorded with. */
  at(instanceKey: string, generation: number): Promise<DesiredInstance | undefined>;
  /** Every instance row (current generation), retired ones included, sorted by key. */
  instances(): Promise<InstanceRow[]>;
  /** Keys of the live instances on `node`, sorted. */
  activeKeysOfNode(node: string): Promise<string[]>;
  /** Keys of the live instances on any of `nodes`, by node, then key: one query for a fleet's nodes. */
  activeKeysOfNodes(nodes: readonly string[]): Promise<string[]>;
  /** Keys of the live instances of `assignment`, sorted. */
  activeKeysOfAssignment(assignment: string): Promise<string[]>;
  /** Instances whose current generation `sha` produced, and those it retired. */
  keysChangedBy(sha: string): Promise<string[]>;
  /** Instances `sha` produced generations for (current or since superseded), by assignment and node. */
  generationsOf(sha: string): Promise<RevisionMember[]>;
  /** Revisions synced after sequence number `seq`, in order. */
  revisionsAfter(seq: number): Promise<RevisionRecord[]>;
  revision(sha: string): Promise<RevisionRecord | undefined>;
  latestRevision(): Promise<RevisionRecord | undefined>;
  /** The first applied revision synced after sequence number `seq`: the one that carried it forward. */
  nextAppliedRevision(seq: number): Promise<RevisionRecord | undefined>;
  /** The last applied revision synced before sequence number `seq`. */
  previousAppliedRevision(seq: number): Promise<RevisionRecord | undefined>;
  /** The revision whose sha starts with `prefix`, when exactly one does. */
  revisionByPrefix(prefix: string): Promise<RevisionRecord | undefined>;
  /** The syncer's open events (a refused force-push, a failing fetch). */
  openSyncEvents(): Promise<SyncEventRecord[]>;
  /** Where the syncer stands on `branch`. */
  syncState(branch: string): Promise<SyncState | undefined>;
  /** The fleet settings (steward.yaml) of the revision the hub serves. */
  fleetSettings(): Promise<FleetSettings | undefined>;
}

/** The rollout and budget an assignment declares. */
export interface AssignmentPolicy {
  assignment: string;
  rollout: Rollout;
  budget: EffectiveBudget;
}

/** Desired state, with the hub's writes of a revision's declarations. */
export interface DesiredState extends DesiredStateReads {
  /**
   * Records the policies the assignments declare now (read in one query, written only where
   * changed); resolves with the assignments whose policy changed.
   */
  savePolicies(revision: string, policies: readonly AssignmentPolicy[]): Promise<string[]>;
  saveFleetSettings(revision: string, settings: FleetSettings): Promise<void>;
}

/** Nodes as last declared, with their drain state and when they were last heard (table `nodes`). */
export interface NodeReads {
  get(name: string): Promise<NodeRecord | undefined>;
  /** The nodes `names` names that the store knows, by name. */
  named(names: Iterable<string>): Promise<Map<string, NodeRecord>>;
  /** Every node, removed ones included, by name. */
  list(): Promise<NodeRecord[]>;
  /** Why the rollouts go on around `name` now, or undefined when they wait for it. */
  skip(name: string): Promise<SkipReason | undefined>;
}

export interface Nodes extends NodeReads {
  upsert(node: Pick<NodeRecord, "name" | "transport" | "spec" | "revision">): Promise<void>;
  /** Marks every node not in `declared` removed (kept: its history stays readable). */
  markRemoved(declared: readonly string[], at: string): Promise<void>;
  /** Resolves false for a node the store does not know. */
  setDraining(
    name: string,
    draining: boolean,
    detail: { by: string; reason?: string; at: string },
  ): Promise<boolean>;
  /** Moves the node's last heartbeat (never back) and last report times. */
  touch(name: string, at: { heartbeatAt?: string; reportAt?: string }): Promise<void>;
}

/** Intents: the hub's promise that an instance reaches a generation (table `intents`). */
export interface IntentReads {
  get(instanceKey: string, generation: number): Promise<IntentRecord | undefined>;
  /** Every intent of an instance, oldest generation first. */
  ofInstance(instanceKey: string): Promise<IntentRecord[]>;
  list(filter?: { status?: IntentStatus; node?: string; assignment?: string }): Promise<IntentRecord[]>;
  /** Intents of older generations that are not yet superseded or retired. */
  olderLive(instanceKey: string, generation: number): Promise<IntentRecord[]>;
  /** Instance keys on `node` whose intent has one of `statuses`. */
  keysOfNode(node: string, statuses: readonly IntentStatus[]): Promise<string[]>;
  /** The nodes with an intent in one of `statuses`, sorted. */
  nodesWith(statuses: readonly IntentStatus[]): Promise<string[]>;
  countsByStatus(): Promise<Record<string, number>>;
  /** Instances that need a reconcile after a restart: current generation not converged or not yet taken in. */
  recoveryKeys(): Promise<string[]>;
}

export interface Intents extends IntentReads {
  save(intent: IntentRecord): Promise<void>;
}

/**
 * Rollouts (one assignment at one revision): what their gates count, and the operators' decisions
 * about them (tables `rollout_decisions`, `rollout_accepted_failures`).
 */
export interface RolloutReads {
  /** Nodes of a rollout, sorted by name (at most `limit`). */
  nodes(assignment: string, revision: string, limit?: number): Promise<string[]>;
  size(assignment: string, revision: string): Promise<number>;
  /**
   * A rollout's intents in progress (dispatched, verifying, ambiguous, backoff) that hold one of its
   * in-flight slots: those on skipped nodes (drained, transport not run here, silent: SkipReason)
   * hold none.
   */
  countInFlight(assignment: string, revision: string): Promise<number>;
  /**
   * A rollout's failed intents (blocked, stuck) that count against `maxFailures`: not those on
   * skipped nodes, nor those an operator's resume accepted.
   */
  countFailed(assignment: string, revision: string): Promise<number>;
  /** Current intents of a rollout that have had an attempt. */
  countStarted(assignment: string, revision: string): Promise<number>;
  /** The failures `countFailed` counts, by node. */
  failures(assignment: string, revision: string, limit: number): Promise<IntentRecord[]>;
  /** Unconverged intents of a rollout on skipped nodes, with why, by node. */
  skipped(
    assignment: string,
    revision: string,
    limit: number,
  ): Promise<{ instanceKey: string; node: string; status: IntentStatus; skip: SkipReason }[]>;
  /** Rollouts with a live, unconverged intent on `node`. */
  ofNode(node: string): Promise<{ assignment: string; revision: string }[]>;
  /** Held intents of a rollout that a freed slot or a resolved pause may release, oldest node first. */
  held(assignment: string, revision: string, limit: number): Promise<string[]>;
  /** Whether any intent of the rollout is held by it (by default for any rollout reason). */
  anyHeld(assignment: string, revision: string, reasons?: readonly HoldReason[]): Promise<boolean>;
  /** The decision in force for a rollout (its latest), if an operator made one. */
  decision(assignment: string, revision: string): Promise<RolloutDecisionRecord | undefined>;
}

export interface Rollouts extends RolloutReads {
  /**
   * Records an operator's decision. A `resume` also accepts the rollout's failed instances of now
   * (blocked or stuck), which then no longer count against `maxFailures`; `accepted` lists every
   * failure the rollout goes on past (an earlier resume's too).
   */
  recordDecision(decision: Omit<RolloutDecisionRecord, "seq" | "accepted">): Promise<RolloutDecisionRecord>;
}

/** Attempts and their outbox (tables `attempts`, `outbox`). */
export interface AttemptReads {
  get(id: string): Promise<AttemptRecord | undefined>;
  /** An instance's attempts (at one generation, when given), oldest first. */
  ofInstance(instanceKey: string, generation?: number): Promise<AttemptRecord[]>;
  outbox(): Promise<OutboxRow[]>;
  /** The outbox rows of these attempts, each with its attempt, in the order given (those without a row left out). */
  outboxRows(attemptIds: readonly string[]): Promise<{ row: OutboxRow; attempt: AttemptRecord }[]>;
  /** Attempts of any of `nodes` that are queued, dispatched or ambiguous, by id: one query for them all. */
  openOfNodes(nodes: readonly string[]): Promise<AttemptRecord[]>;
  countsByStatus(): Promise<Record<string, number>>;
}

export interface Attempts extends AttemptReads {
  /** Inserts a new attempt and its outbox row (in the unit of work that decided it). */
  insert(attempt: AttemptRecord, bundle: string): Promise<void>;
  save(attempt: AttemptRecord): Promise<void>;
  /**
   * Saves attempts being handed over (status `dispatched`, their leases set) and, for each still
   * its intent's in-flight attempt, moves the intent's deadline to the lease's end: what a reconcile
   * of the intent would write, without one.
   */
  saveDispatched(attempts: readonly (AttemptRecord & { leaseExpiresAt: string })[]): Promise<void>;
  /** Takes the attempts' rows out of the outbox (their transports accepted them, or they never go). */
  deleteOutbox(attemptIds: readonly string[]): Promise<void>;
}

/** The latest full report of each node and the observation of each instance (tables `reports`, `observations`). */
export interface ObservationReads {
  /** When the node's latest stored report was taken, and its sequence number. */
  reportOf(node: string): Promise<{ takenAt: string; seq?: number } | undefined>;
  get(instanceKey: string): Promise<Observation | undefined>;
}

export interface Observations extends ObservationReads {
  /**
   * Stores a full report as the node's latest observation: an instance it does not mention loses
   * its observation (the node holds nothing of it). Resolves with the instance keys whose
   * observation changed, or undefined (storing nothing) when the report is older than the stored one.
   */
  saveReport(report: Report, receivedAt: string): Promise<string[] | undefined>;
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

/** Conditions and their history (tables `conditions`, `condition_history`). */
export interface ConditionReads {
  /** The open condition of this type on this subject (with this reason and generation, when given). */
  findOpen(
    type: ConditionType,
    subjectKind: SubjectKind,
    subject: string,
    reason?: string,
    generation?: number,
  ): Promise<ConditionRecord | undefined>;
  get(id: string): Promise<ConditionRecord | undefined>;
  /** The open conditions on one subject, oldest first. */
  openOf(subjectKind: SubjectKind, subject: string): Promise<ConditionRecord[]>;
  list(filter?: ConditionFilter): Promise<ConditionRecord[]>;
  history(conditionId: string): Promise<ConditionEvent[]>;
  openCountsByType(): Promise<Record<string, number>>;
}

export interface Conditions extends ConditionReads {
  insert(condition: ConditionRecord): Promise<void>;
  save(condition: ConditionRecord): Promise<void>;
  appendEvent(event: ConditionEvent): Promise<void>;
}

/** Tasks: conditions that need judgement, as work for an agent (table `tasks`). */
export interface TaskReads {
  get(id: string): Promise<TaskRecord | undefined>;
  ofCondition(conditionId: string): Promise<TaskRecord | undefined>;
  /** Tasks (of one status, when given), oldest first. */
  list(filter?: { status?: TaskStatus }): Promise<TaskRecord[]>;
  /** Open tasks not yet handed to the bus's task queue, oldest first. */
  unpublished(): Promise<TaskRecord[]>;
}

export interface Tasks extends TaskReads {
  insert(task: TaskRecord): Promise<void>;
  save(task: TaskRecord): Promise<void>;
  markPublished(id: string, at: string): Promise<void>;
}

/** The hub's own key/value facts (table `hub_meta`): how far it took in revisions, which declarations it holds. */
export interface MetaReads {
  get(key: string): Promise<string | undefined>;
}

export interface Meta extends MetaReads {
  set(key: string, value: string): Promise<void>;
}

/** One commit status row: the desired status of a context on a commit at one destination, and what it last got. */
export interface StatusRecord {
  provider: string;
  desired: CommitStatus;
  posted?: CommitStatus;
  postedAt?: string;
  /** Failed writes of the desired status since it was set. */
  failures: number;
  lastError?: string;
}

/**
 * Commit statuses (table `commit_statuses`): per destination, commit and context, what should be
 * shown and what the destination last acknowledged. The publisher posts only where the two differ.
 */
export interface StatusReads {
  get(provider: string, sha: string, context: string): Promise<StatusRecord | undefined>;
  /** Statuses `provider` should show and does not yet: the work left over from before a restart. */
  unposted(provider: string): Promise<CommitStatus[]>;
  /** Every row of a commit, the fleet's context first. */
  forRevision(sha: string): Promise<StatusRecord[]>;
}

export interface Statuses extends StatusReads {
  /**
   * Records `wanted` as what each status should show at `provider` and resolves with those the
   * destination does not show yet (statuses equal to the posted ones are dropped).
   */
  desire(provider: string, wanted: readonly CommitStatus[], at: Date): Promise<CommitStatus[]>;
  /** The destination acknowledged these statuses. */
  posted(provider: string, statuses: readonly CommitStatus[], at: Date): Promise<void>;
  /** A write of `status` failed with `error` (already free of secrets). */
  failed(provider: string, status: CommitStatus, error: string): Promise<void>;
}

/** Hosts' requests to join and the credentials the hub issued (tables `enrolment_requests`, `issued_credentials`). */
export interface EnrolmentReads {
  request(node: string, nkey: string): Promise<EnrolmentRecord | undefined>;
  requestsOf(node: string): Promise<EnrolmentRecord[]>;
  /** Every request (with `statuses`: only those), oldest first. */
  requests(statuses?: readonly EnrolmentStatus[]): Promise<EnrolmentRecord[]>;
  /** Requests a person still has to decide (queued or conflict). */
  countUndecided(): Promise<number>;
  issued(): Promise<IssuedCredential[]>;
}

export interface Enrolments extends EnrolmentReads {
  saveRequest(record: EnrolmentRecord): Promise<void>;
  /** Records a JWT issued for `nkey` (before it is sent: a crash never leaves one unrecorded). */
  recordIssued(credential: IssuedCredential): Promise<void>;
}

/** The hub replicas sharing the store and the leases dividing their work (tables `replicas`, `leases`). */
export interface ReplicaReads {
  /** Every replica row, gone ones included (until a clean stop removes it), by id. */
  list(): Promise<ReplicaRecord[]>;
  /** Replicas whose lease has not run out at `at`, by id. */
  live(at: string): Promise<ReplicaRecord[]>;
  /**
   * Live replicas but `self` whose session (Store.session) the database no longer has: their
   * process is gone though their lease has not run out. None where the database has no sessions.
   */
  gone(at: string, self: string): Promise<string[]>;
  leases(): Promise<LeaseRecord[]>;
}

export interface Replicas extends ReplicaReads {
  /** Whether `holder` holds each lease with that token (locking them until the unit of work ends). */
  holds(holder: string, leases: readonly { name: string; token: number }[]): Promise<boolean>;
  heartbeat(replica: ReplicaRecord): Promise<void>;
  /** Ends the rows and leases of the replicas `gone` names, at once; resolves with their ids. */
  expireGone(at: string, self: string): Promise<string[]>;
  /**
   * Takes lease `name` for `holder` until `expiresAt` when it is free, has run out at `at`, or is
   * `holder`'s already; resolves with its token (greater than any earlier holder's), or undefined.
   */
  acquire(name: string, holder: string, at: string, expiresAt: string): Promise<number | undefined>;
  /** Extends those of `names` that `holder` still holds; resolves with them and their tokens. */
  renew(holder: string, names: readonly string[], expiresAt: string): Promise<Map<string, number>>;
  /** Gives up leases (they run out at once; the next holder's token is greater). */
  release(holder: string, names: readonly string[]): Promise<void>;
  /** A replica that stops cleanly: its leases released, its row gone. */
  remove(id: string): Promise<void>;
}

/** Short messages to every process sharing the store, on a named channel (at most 7,000 bytes each). */
export interface Signals {
  send(channel: string, payload: string): Promise<void>;
  /** Calls `listener` with each payload sent on `channel` (by any process, this one included). */
  listen(channel: string, listener: (payload: string) => void): Promise<void>;
}

/** The leases a replica holds, as `UnitOfWork.fence` checks them. */
export interface Fencing {
  readonly holder: string;
  /** The leases (name and token) covering `nodes`, or undefined when one of them is not held here. */
  leasesFor(nodes: Iterable<string>): { name: string; token: number }[] | undefined;
}

/** A unit of work about nodes whose leases this replica does not hold (now): nothing of it is written. */
export class FencedError extends Error {
  override readonly name = "FencedError";
  constructor(readonly nodes: readonly string[]) {
    super(
      `this hub replica no longer holds the lease of ${nodes.length === 1 ? `node ${nodes[0]}` : `${nodes.length} nodes`}: another replica took it over`,
    );
  }
}

/**
 * A step of a unit of work failed while the unit ran its steps without savepoints (as it first
 * does: a savepoint is a round trip per step on PostgreSQL, and steps seldom fail). Nothing of the
 * unit commits: the store runs it again from the start with a savepoint per step, where the step's
 * own error rolls back that step alone. A caller that catches a step's errors passes this one on.
 */
export class StepsRerun extends Error {
  override readonly name = "StepsRerun";
  /** `cause`: the step's own error. */
  constructor(cause: unknown) {
    super("a step failed in a unit of work run without savepoints: the unit runs again with them", {
      cause,
    });
  }
}

/** Every port, for reading. Both the `Store` (committed state) and a unit of work offer them. */
export interface StoreReads {
  readonly desired: DesiredStateReads;
  readonly nodes: NodeReads;
  readonly intents: IntentReads;
  readonly rollouts: RolloutReads;
  readonly attempts: AttemptReads;
  readonly observations: ObservationReads;
  readonly conditions: ConditionReads;
  readonly tasks: TaskReads;
  readonly meta: MetaReads;
  readonly statuses: StatusReads;
  readonly enrolments: EnrolmentReads;
  readonly replicas: ReplicaReads;
}

/** Starts a unit of work: the store (a new one), or a unit of work (a step inside it, which fails alone). */
export interface Transactional {
  /**
   * Runs `work` as one unit of work: everything it writes commits together when it resolves, and
   * nothing of it when it rejects (the rejection is passed on).
   */
  transaction<T>(work: (tx: UnitOfWork) => Promise<T>): Promise<T>;
}

/** A unit of work: every port, reading its own writes; commits when its work resolves. */
export interface UnitOfWork extends StoreReads, Transactional {
  readonly desired: DesiredState;
  readonly nodes: Nodes;
  readonly intents: Intents;
  readonly rollouts: Rollouts;
  readonly attempts: Attempts;
  readonly observations: Observations;
  readonly conditions: Conditions;
  readonly tasks: Tasks;
  readonly meta: Meta;
  readonly statuses: Statuses;
  readonly enrolments: Enrolments;
  readonly replicas: Replicas;
  /**
   * Refuses (FencedError) a unit of work about `nodes` unless this replica holds their shards'
   * leases with its tokens, and keeps them held until the unit ends. Without replicas, a no-op.
   */
  fence(nodes: Iterable<string>): Promise<void>;
  /**
   * Reads ahead, for these instances, what a reconcile of each reads first — its desired state, its
   * current and live intents with their last attempts, its node, the node's latest report and its
   * instances waiting for another, its observation and its open conditions — in a query per table for all of them, rather than a query
   * per table for each: reads of those rows later in this unit of work are answered without the
   * database, and the unit's own writes keep them true.
   */
  readAhead(keys: readonly string[]): Promise<void>;
  /**
   * Reads ahead what a batch of transport events reads first: the attempts results and losses name,
   * and for nodes that reported, which of their intents wait for a report (`waiting`) and which
   * assignments they have observations of — a query for all of them rather than one per event.
   */
  readAheadEvents(events: {
    attempts: readonly string[];
    reported: readonly string[];
    waiting: readonly IntentStatus[];
  }): Promise<void>;
}

/** The hub's durable state: committed reads, units of work, and the syncer's port over the same database. */
export interface Store extends StoreReads, Transactional {
  /** `sqlite:PATH` or `postgres://user@host/db` (never with a password): what `--store` names. */
  readonly location: string;
  /** The syncer's port (revisions, generations, sync state): each write one unit of work. */
  readonly generations: GenerationStore;
  /**
   * Calls `listener` with a condition's id after a unit of work that inserted or saved it committed
   * (in this process). Returns a function that removes the listener.
   */
  onConditionWrite(listener: (id: string) => void): () => void;
  /** Fences every unit of work's `fence(nodes)` with these leases (a replica's, replicas/replica.ts). */
  useFencing(fencing: Fencing): void;
  /**
   * A unit of work on the replicas' rows and leases alone, run beside the others rather than after
   * them: a replica's renewal never waits behind a long batch of reconciles (which would let its
   * leases run out under load). Nothing else writes those rows, so it cannot interleave with a
   * write of the hub's parts.
   */
  leaseTransaction<T>(work: (tx: Pick<UnitOfWork, "replicas">) => Promise<T>): Promise<T>;
  /**
   * Messages between the processes sharing the store (PostgreSQL's LISTEN/NOTIFY): what a replica
   * hands to another. Absent where one process has the store to itself (SQLite).
   */
  readonly signals?: Signals;
  /**
   * Keeps a session open in the database for replica `id` while this process lives, and resolves
   * with its name (PostgreSQL: a connection's application_name); the server drops it the moment the
   * process dies, and the other replicas then see it gone (Replicas.gone). Undefined where the
   * database has no sessions (SQLite).
   */
  announce(id: string): Promise<string | undefined>;
  /** The session `announce` keeps, while it is open (it is opened again after a connection is lost). */
  session(): string | undefined;
  /** Another writer (the replica that held the node before) may have written `node`'s observations. */
  forgetNode(node: string): void;
  close(): Promise<void>;
}

export type { CommitState };
