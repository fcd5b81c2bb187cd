/**
 * The story of one object — an instance, a node, a revision, a condition or an attempt — as one
 * plain, JSON-serialisable model read from the store: what should be, what is (with evidence), what
 * was tried, what is not right and what happened before. `steward describe` renders it as text (or
 * prints it as JSON or YAML) and the hub's web view renders the very same model as HTML, so the two
 * never disagree. Pure reads; rendering lives with each renderer.
 */

import { errorLine } from "../model/error-line.js";
import type { ProbeReport } from "../model/generated.js";
import { compare } from "./decide.js";
import { attemptErrorLine } from "./evidence.js";
import { type RevisionProgress, revisionProgress } from "./progress.js";
import type {
  AttemptRecord,
  ConditionEvent,
  ConditionRecord,
  IntentRecord,
  NodeRecord,
  RevisionRecord,
  TaskRecord,
} from "./records.js";
import { redact } from "./redact.js";
import { type DisplayState, intentDisplayState } from "./states.js";
import type { Store } from "./store/store.js";
import { type InstanceView, instanceViewByKey, instanceViewOf } from "./views.js";

/** How many resolved conditions and attempts a story shows (the newest). */
const RECENT = 10;

/** One resource as the latest report saw it, with the line of its evidence that names the error. */
export interface ResourceStory {
  kind: string;
  name: string;
  /** The report's status: ok, drifted, failed, blocked, waiting, stuck. */
  status: string;
  diff?: string[];
  failureClass?: string;
  reason?: string;
  message?: string;
  blockedBy?: string;
  /** What the agent recorded: for a command or service its exit code or signal and its last lines of output. */
  evidence?: string;
  errorLine?: string;
  consecutiveFailures: number;
  everApplied: boolean;
}

/** The latest observation of an instance. */
export interface ObservedStory {
  takenAt: string;
  /** The generation last applied completely (0: none). */
  generation: number;
  hash?: string;
  state: string;
  version?: string;
  /** Compared with the desired generation: converged, and what differs if not. */
  converged: boolean;
  summary: string;
  resources: ResourceStory[];
  probes: ProbeReport[];
}

/** One attempt: outcome, failure class, id, and what its evidence says. */
export interface AttemptStory {
  id: string;
  instance: string;
  generation: number;
  status: AttemptRecord["status"];
  failureClass?: string;
  reason?: string;
  message?: string;
  errorLine?: string;
  createdAt: string;
  dispatchedAt?: string;
  finishedAt?: string;
  settledBy?: string;
  /** Per failed resource: its message and evidence, as the agent sent them. */
  evidence?: unknown;
}

/** A condition with what happened to it and the task it became, if any. */
export interface ConditionStory extends ConditionRecord {
  history: ConditionEvent[];
  task?: TaskRecord;
}

/** One generation of an instance: how its intent stands or ended. */
export interface IntentStory {
  generation: number;
  revision: string;
  hash: string;
  state: DisplayState;
  status: IntentRecord["status"];
  holdReason?: string;
  outcome?: string;
  failureClass?: string;
  failures: number;
  lastAttemptId?: string;
  message?: string;
  createdAt: string;
  updatedAt: string;
  convergedAt?: string;
}

export interface InstanceStory {
  kind: "instance";
  /** `assignment@node`. */
  name: string;
  assignment: string;
  node: string;
  /** How it stands now (the shared display state, with the view's counters). */
  now: InstanceView;
  desired: {
    generation: number;
    hash: string;
    revision: string;
    revisionSubject?: string;
    state: "running" | "stopped";
    version?: string;
    retiredAt?: string;
    resources: { kind: string; name: string }[];
    probes: string[];
    dependsOn: string[];
    rollout: unknown;
    budget: { attempts: number; withinMs: number };
  };
  observed?: ObservedStory;
  attempts: AttemptStory[];
  conditions: { open: ConditionStory[]; recent: ConditionStory[] };
  history: IntentStory[];
}

export interface NodeStory {
  kind: "node";
  name: string;
  transport: NodeRecord["transport"];
  declared: boolean;
  revision?: string;
  draining: boolean;
  drainReason?: string;
  drainedBy?: string;
  drainedAt?: string;
  lastHeartbeatAt?: string;
  lastReportAt?: string;
  labels: Record<string, string>;
  instances: InstanceView[];
  attempts: AttemptStory[];
  conditions: { open: ConditionStory[]; recent: ConditionStory[] };
}

export interface RevisionStory {
  kind: "revision";
  sha: string;
  seq: number;
  branch: string;
  author: string;
  subject: string;
  message: string;
  committedAt: string;
  syncedAt: string;
  outcome: RevisionRecord["outcome"];
  supersededBy?: string;
  changedAssignments: string[];
  diagnostics: NonNullable<RevisionRecord["diagnostics"]>;
  /** Per assignment the rollout's progress: what commit statuses are made from. */
  progress?: RevisionProgress;
  /** The instances this revision gave a generation, as they stand at that generation. */
  instances: {
    instance: string;
    generation: number;
    state: DisplayState;
    status: string;
    attemptId?: string;
  }[];
  conditions: { open: ConditionStory[]; recent: ConditionStory[] };
}

export interface ConditionStoryOf {
  kind: "condition";
  condition: ConditionStory;
  /** The attempts it names in `tried`, newest first. */
  attempts: AttemptStory[];
}

export interface AttemptStoryOf {
  kind: "attempt";
  attempt: AttemptStory;
  /** The intent at the attempt's generation. */
  intent?: IntentStory;
  /** Conditions that cite it (as their attempt, or among what was tried). */
  conditions: ConditionStory[];
}

/** Any object's story. */
export type Story = InstanceStory | NodeStory | RevisionStory | ConditionStoryOf | AttemptStoryOf;

/** The fields of `source` named by `keys` that are set (optional fields stay absent, never `undefined`). */
function defined<T extends object, K extends keyof T>(
  source: T,
  keys: readonly K[],
): { [P in K]?: Exclude<T[P], undefined> } {
  const out: Partial<Record<K, unknown>> = {};
  for (const key of keys) if (source[key] !== undefined && source[key] !== "") out[key] = source[key];
  return out as { [P in K]?: Exclude<T[P], undefined> };
}

function attemptStory(attempt: AttemptRecord): AttemptStory {
  const line = attemptErrorLine(attempt);
  return {
    id: attempt.id,
    instance: attempt.instanceKey,
    generation: attempt.generation,
    status: attempt.status,
    createdAt: attempt.createdAt,
    ...defined(attempt, [
      "failureClass",
      "reason",
      "message",
      "dispatchedAt",
      "finishedAt",
      "settledBy",
      "evidence",
    ]),
    ...(line ? { errorLine: line } : {}),
  };
}

function conditionStory(store: Store, condition: ConditionRecord): ConditionStory {
  const story: ConditionStory = { ...condition, history: store.conditionHistory(condition.id) };
  const task = store.taskOfCondition(condition.id);
  if (task) story.task = task;
  return story;
}

function intentStory(intent: IntentRecord): IntentStory {
  return {
    generation: intent.generation,
    revision: intent.revision,
    hash: intent.hash,
    state: intentDisplayState(intent),
    status: intent.status,
    failures: intent.failures,
    createdAt: intent.createdAt,
    updatedAt: intent.updatedAt,
    ...defined(intent, ["holdReason", "outcome", "failureClass", "lastAttemptId", "message", "convergedAt"]),
  };
}

/** Open conditions, and the newest resolved ones, of these filters' union. */
function conditionsOf(store: Store, lists: ConditionRecord[][]): InstanceStory["conditions"] {
  const seen = new Map<string, ConditionRecord>();
  for (const list of lists) for (const c of list) seen.set(c.id, c);
  const all = [...seen.values()];
  const open = all.filter((c) => c.status === "open").sort((a, b) => (a.openedAt < b.openedAt ? -1 : 1));
  const recent = all
    .filter((c) => c.status === "resolved")
    .sort((a, b) => ((a.resolvedAt ?? "") > (b.resolvedAt ?? "") ? -1 : 1))
    .slice(0, RECENT);
  return {
    open: open.map((c) => conditionStory(store, c)),
    recent: recent.map((c) => conditionStory(store, c)),
  };
}

function newestFirst(attempts: AttemptRecord[]): AttemptRecord[] {
  return [...attempts].sort((a, b) =>
    a.createdAt === b.createdAt ? (a.id > b.id ? -1 : 1) : a.createdAt > b.createdAt ? -1 : 1,
  );
}

/** The story of instance `key` (`assignment@node`), or undefined when the hub has no such instance. */
export function instanceStory(store: Store, key: string): InstanceStory | undefined {
  const desired = store.desired(key);
  if (!desired) return undefined;
  const now = instanceViewOf(
    store,
    desired,
    store.openConditionsOf("instance", key).map((c) => c.type),
  );
  if (!now) return undefined;
  const spec = desired.spec;
  const story: InstanceStory = {
    kind: "instance",
    name: key,
    assignment: desired.assignment,
    node: desired.node,
    now,
    desired: {
      generation: desired.generation,
      hash: desired.hash,
      revision: desired.revision,
      state: spec.state,
      resources: spec.resources.map((r) => ({ kind: r.kind, name: r.name ?? "" })),
      probes: spec.probes.map((p) => p.name ?? p.kind),
      dependsOn: [...spec.dependsOn],
      rollout: desired.rollout,
      budget: { attempts: desired.budget.attempts, withinMs: desired.budget.withinMs },
    },
    attempts: newestFirst(store.attemptsOf(key)).slice(0, RECENT).map(attemptStory),
    conditions: conditionsOf(store, [store.conditions({ subjectKind: "instance", subject: key })]),
    history: [...store.intentsOf(key)].sort((a, b) => b.generation - a.generation).map(intentStory),
  };
  const subject = store.revision(desired.revision)?.message.split("\n", 1)[0];
  if (subject) story.desired.revisionSubject = subject;
  if (spec.version !== undefined) story.desired.version = spec.version;
  if (desired.retiredAt) story.desired.retiredAt = desired.retiredAt;
  const observation = store.observation(key);
  if (observation) {
    const comparison = compare(desired, observation);
    const report = observation.report;
    story.observed = {
      takenAt: observation.takenAt,
      generation: report.generation,
      state: report.state,
      converged: comparison.converged,
      summary: comparison.summary,
      // A report is what the node saw, output included: what looks like a secret is masked here,
      // as the hub masks results and conditions when it records them.
      resources: report.resources.map((r) => {
        const evidence = r.evidence === undefined ? undefined : redact(r.evidence);
        const line = errorLine(evidence);
        const resource: ResourceStory = {
          kind: r.kind,
          name: r.name,
          status: r.status,
          consecutiveFailures: r.counters.consecutiveFailures,
          everApplied: r.counters.everApplied,
          ...defined({ ...r, evidence, message: r.message && redact(r.message) }, [
            "failureClass",
            "reason",
            "message",
            "blockedBy",
            "evidence",
          ]),
          ...(r.diff?.length ? { diff: r.diff.map(redact) } : {}),
          ...(line ? { errorLine: line } : {}),
        };
        return resource;
      }),
      probes: report.probes.map((p) => ({
        ...p,
        ...(p.message === undefined ? {} : { message: redact(p.message) }),
        ...(p.evidence === undefined ? {} : { evidence: redact(p.evidence) }),
      })),
    };
    if (report.hash) story.observed.hash = report.hash;
    if (report.version !== undefined) story.observed.version = report.version;
  }
  return story;
}

/** The story of node `name`, or undefined when the hub has never known it. */
export function nodeStory(store: Store, name: string): NodeStory | undefined {
  const node = store.node(name);
  if (!node) return undefined;
  const instances = store
    .activeInstanceKeysOfNode(name)
    .flatMap((key) => instanceViewByKey(store, key) ?? []);
  const attempts = newestFirst(instances.flatMap((i) => store.attemptsOf(i.instance))).slice(0, RECENT);
  const story: NodeStory = {
    kind: "node",
    name,
    transport: node.transport,
    declared: !node.removedAt,
    draining: node.draining,
    labels: { ...(node.spec.metadata?.labels ?? {}) },
    instances,
    attempts: attempts.map(attemptStory),
    conditions: conditionsOf(store, [
      store.conditions({ node: name }),
      store.conditions({ subjectKind: "node", subject: name }),
    ]),
    ...defined(node, [
      "revision",
      "drainReason",
      "drainedBy",
      "drainedAt",
      "lastHeartbeatAt",
      "lastReportAt",
    ]),
  };
  return story;
}

/** The story of revision `sha` (a full sha the hub synced), or undefined. */
export function revisionStory(store: Store, sha: string): RevisionStory | undefined {
  const revision = store.revision(sha);
  if (!revision) return undefined;
  const story: RevisionStory = {
    kind: "revision",
    sha,
    seq: revision.seq,
    branch: revision.branch,
    author: revision.authorName,
    subject: revision.message.split("\n", 1)[0] ?? "",
    message: revision.message,
    committedAt: revision.committedAt,
    syncedAt: revision.syncedAt,
    outcome: revision.outcome,
    changedAssignments: [...revision.changedAssignments],
    diagnostics: revision.diagnostics ?? [],
    instances: store.generationsOfRevision(sha).map((member) => {
      const intent = store.intent(member.instanceKey, member.generation);
      const row: RevisionStory["instances"][number] = {
        instance: member.instanceKey,
        generation: member.generation,
        state: intent ? intentDisplayState(intent) : "converging",
        status: intent?.status ?? "not-started",
      };
      if (intent?.lastAttemptId) row.attemptId = intent.lastAttemptId;
      return row;
    }),
    conditions: conditionsOf(store, [store.conditions({ revision: sha })]),
  };
  if (revision.supersededBy) story.supersededBy = revision.supersededBy;
  const progress = revisionProgress(store, sha);
  if (progress) story.progress = progress;
  return story;
}

/** The story of condition `id`, or undefined. */
export function conditionStoryOf(store: Store, id: string): ConditionStoryOf | undefined {
  const condition = store.condition(id);
  if (!condition) return undefined;
  const attempts = condition.tried
    .map((attemptId) => store.attempt(attemptId))
    .filter((a): a is AttemptRecord => a !== undefined);
  return {
    kind: "condition",
    condition: conditionStory(store, condition),
    attempts: newestFirst(attempts).map(attemptStory),
  };
}

/** The story of attempt `id`, or undefined. */
export function attemptStoryOf(store: Store, id: string): AttemptStoryOf | undefined {
  const attempt = store.attempt(id);
  if (!attempt) return undefined;
  const intent = store.intent(attempt.instanceKey, attempt.generation);
  const citing = store
    .conditions({ subjectKind: "instance", subject: attempt.instanceKey })
    .filter((c) => c.attemptId === id || c.tried.includes(id));
  const story: AttemptStoryOf = {
    kind: "attempt",
    attempt: attemptStory(attempt),
    conditions: citing.map((c) => conditionStory(store, c)),
  };
  if (intent) story.intent = intentStory(intent);
  return story;
}

/** Every attempt the hub keeps, newest first, as `steward get attempts` lists them. */
export function attemptStories(store: Store): AttemptStory[] {
  return newestFirst(store.instanceList().flatMap((i) => store.attemptsOf(i.key))).map(attemptStory);
}
