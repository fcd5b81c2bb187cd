/**
 * Read-only views of the hub's records for people and scripts: `steward get`, `steward status`,
 * `steward history` and `steward up`'s summary. Each returns JSON-serialisable rows; the CLI only
 * formats them. Views never write.
 */
import { compare } from "./decide.js";
import type { ConditionRecord, IntentRecord } from "./records.js";
import type { Store } from "./store/store.js";

export interface NodeView {
  name: string;
  transport: string;
  declared: boolean;
  draining: boolean;
  drainReason?: string;
  drainedBy?: string;
  lastHeartbeatAt?: string;
  lastReportAt?: string;
  instances: number;
  converged: number;
  openConditions: string[];
}

export interface InstanceView {
  instance: string;
  assignment: string;
  node: string;
  generation: number;
  /** Generation the node last applied completely, from its latest report. */
  observedGeneration?: number;
  status: IntentRecord["status"] | "not-started";
  holdReason?: string;
  converged: boolean;
  failures: number;
  lastAttemptId?: string;
  message?: string;
  openConditions: string[];
  retired: boolean;
}

export interface AssignmentView {
  name: string;
  stage: string;
  instances: number;
  converged: number;
  failing: number;
  held: number;
}

export interface HistoryEntry {
  instance: string;
  generation: number;
  revision: string;
  hash: string;
  createdAt: string;
  status: IntentRecord["status"] | "not-started";
  /** How it ended or stands: converged, blocked, stuck, failed, ambiguous. */
  outcome?: string;
  failureClass?: string;
  reason?: string;
  /** The last attempt: the correlation id of everything it caused. */
  attemptId?: string;
  attempts: number;
}

function openConditionsBy(store: Store): Map<string, string[]> {
  const bySubject = new Map<string, string[]>();
  for (const condition of store.conditions({ status: "open" })) {
    const key = `${condition.subjectKind}:${condition.subject}`;
    bySubject.set(key, [...(bySubject.get(key) ?? []), condition.type]);
  }
  return bySubject;
}

/** Every instance the hub knows, with its current intent and observation. */
export function instanceViews(store: Store, options: { retired?: boolean } = {}): InstanceView[] {
  const conditions = openConditionsBy(store);
  const views: InstanceView[] = [];
  for (const instance of store.instanceList()) {
    if (instance.retiredAt && !options.retired) continue;
    const desired = store.desired(instance.key);
    if (!desired) continue;
    const intent = store.intent(instance.key, instance.generation);
    const observation = store.observation(instance.key);
    const view: InstanceView = {
      instance: instance.key,
      assignment: instance.assignment,
      node: instance.node,
      generation: instance.generation,
      status: intent?.status ?? "not-started",
      converged: compare(desired, observation).converged,
      failures: intent?.failures ?? 0,
      openConditions: conditions.get(`instance:${instance.key}`) ?? [],
      retired: instance.retiredAt !== undefined,
    };
    if (observation) view.observedGeneration = observation.generation;
    if (intent?.holdReason) view.holdReason = intent.holdReason;
    if (intent?.lastAttemptId) view.lastAttemptId = intent.lastAttemptId;
    if (intent?.message) view.message = intent.message;
    views.push(view);
  }
  return views;
}

export function nodeViews(store: Store): NodeView[] {
  const conditions = openConditionsBy(store);
  const instances = instanceViews(store);
  return store.nodes().map((node) => {
    const mine = instances.filter((i) => i.node === node.name);
    const view: NodeView = {
      name: node.name,
      transport: node.transport,
      declared: !node.removedAt,
      draining: node.draining,
      instances: mine.length,
      converged: mine.filter((i) => i.converged).length,
      openConditions: conditions.get(`node:${node.name}`) ?? [],
    };
    if (node.drainReason) view.drainReason = node.drainReason;
    if (node.drainedBy) view.drainedBy = node.drainedBy;
    if (node.lastHeartbeatAt) view.lastHeartbeatAt = node.lastHeartbeatAt;
    if (node.lastReportAt) view.lastReportAt = node.lastReportAt;
    return view;
  });
}

export function assignmentViews(store: Store): AssignmentView[] {
  const byName = new Map<string, AssignmentView>();
  for (const instance of instanceViews(store)) {
    let view = byName.get(instance.assignment);
    if (!view) {
      const stage = store.desired(instance.instance)?.rollout.stage ?? "apply";
      view = { name: instance.assignment, stage, instances: 0, converged: 0, failing: 0, held: 0 };
      byName.set(instance.assignment, view);
    }
    view.instances++;
    if (instance.converged) view.converged++;
    if (instance.status === "blocked" || instance.status === "stuck" || instance.status === "ambiguous")
      view.failing++;
    if (instance.status === "held" || instance.status === "waiting") view.held++;
  }
  return [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
}

/** Intents, newest generation first per instance; `all` includes superseded and retired ones. */
export function intentViews(store: Store, options: { all?: boolean } = {}): IntentRecord[] {
  const intents = store.intents();
  if (options.all) return intents;
  return intents.filter((i) => i.status !== "superseded" && i.status !== "retired");
}

/** Every generation of an assignment's instances with how it ended: outcome, failure class, attempt id. */
export function instanceHistory(store: Store, assignment: string, node?: string): HistoryEntry[] {
  const entries: HistoryEntry[] = [];
  for (const instance of store.instanceList()) {
    if (instance.assignment !== assignment || (node && instance.node !== node)) continue;
    for (let generation = instance.generation; generation >= 1; generation--) {
      const desired = store.desiredAt(instance.key, generation);
      if (!desired) continue;
      const intent = store.intent(instance.key, generation);
      const entry: HistoryEntry = {
        instance: instance.key,
        generation,
        revision: desired.revision,
        hash: desired.hash,
        createdAt: store.generationCreatedAt(instance.key, generation) ?? "",
        status: intent?.status ?? "not-started",
        attempts: store.attemptsOf(instance.key, generation).length,
      };
      if (intent?.outcome) entry.outcome = intent.outcome;
      if (intent?.failureClass) entry.failureClass = intent.failureClass;
      if (intent?.reason) entry.reason = intent.reason;
      if (intent?.lastAttemptId) entry.attemptId = intent.lastAttemptId;
      entries.push(entry);
    }
  }
  return entries;
}

/** Open conditions, oldest first. */
export function openConditions(store: Store): ConditionRecord[] {
  return store.conditions({ status: "open" });
}
