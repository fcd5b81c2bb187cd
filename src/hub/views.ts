/**
 * Read-only views of the hub's records for people and scripts: `steward get`, `steward status`,
 * `steward history` and `steward up`'s summary. Each returns JSON-serialisable rows; the CLI only
 * formats them. Views never write.
 */
import { compare } from "./decide.js";
import { attemptErrorLine } from "./evidence.js";
import type { ConditionRecord, DesiredInstance, IntentRecord } from "./records.js";
import { type DisplayState, displayState } from "./states.js";
import type { StoreReads } from "./store/store.js";

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
  holdReason?: IntentRecord["holdReason"];
  /** How it is shown and counted (states.ts). */
  state: DisplayState;
  converged: boolean;
  /** Failures counted against the budget at this generation. */
  failures: number;
  /** The assignment's budget: at most `attempts` failures within `withinMs`. */
  budget: { attempts: number; withinMs: number };
  /** When the next attempt is due, for a failure within budget (or a stuck instance's slow retry). */
  nextAttemptAt?: string;
  /** Why it is not converged, as a word (`CommandFailed`, `ServiceExited`...). */
  reason?: string;
  lastAttemptId?: string;
  message?: string;
  /** For a failed attempt: the line of its evidence that names the error (src/hub/evidence.ts). */
  errorLine?: string;
  openConditions: string[];
  retired: boolean;
}

export interface AssignmentView {
  name: string;
  stage: string;
  instances: number;
  converged: number;
  /** Failing within budget, stuck, blocked, ambiguous or interrupted. */
  failing: number;
  /** Held by the rollout, or waiting for a dependency. */
  held: number;
}

async function openConditionsBy(store: StoreReads): Promise<Map<string, string[]>> {
  const bySubject = new Map<string, string[]>();
  for (const condition of await store.conditions.list({ status: "open" })) {
    const key = `${condition.subjectKind}:${condition.subject}`;
    bySubject.set(key, [...(bySubject.get(key) ?? []), condition.type]);
  }
  return bySubject;
}

/** States an assignment counts as failing: failed, or failing within budget, or its result lost. */
const FAILING_STATES: ReadonlySet<DisplayState> = new Set([
  "failing",
  "stuck",
  "blocked",
  "ambiguous",
  "interrupted",
]);

/** States whose last attempt failed: their evidence is worth a look. */
const FAILED_STATES: ReadonlySet<DisplayState> = new Set(["failing", "stuck", "blocked"]);

/**
 * The view of one instance from its desired side and the types of the conditions open on it: the
 * one place an instance's current intent and observation become what people are shown.
 */
export async function instanceViewOf(
  store: StoreReads,
  desired: DesiredInstance,
  openConditions: readonly string[],
): Promise<InstanceView> {
  const key = desired.key;
  const intent = await store.intents.get(key, desired.generation);
  const observation = await store.observations.get(key);
  const status = intent?.status ?? "not-started";
  const converged = compare(desired, observation).converged;
  const state = displayState({
    status,
    ...(intent?.holdReason ? { holdReason: intent.holdReason } : {}),
    converged,
    openConditions,
  });
  const view: InstanceView = {
    instance: key,
    assignment: desired.assignment,
    node: desired.node,
    generation: desired.generation,
    status,
    state,
    converged,
    failures: intent?.failures ?? 0,
    budget: { attempts: desired.budget.attempts, withinMs: desired.budget.withinMs },
    openConditions: [...openConditions],
    retired: desired.retiredAt !== undefined,
  };
  if (observation) view.observedGeneration = observation.generation;
  if (intent?.holdReason) view.holdReason = intent.holdReason;
  if (intent?.nextAttemptAt && !converged) view.nextAttemptAt = intent.nextAttemptAt;
  if (intent?.reason && !converged) view.reason = intent.reason;
  if (intent?.lastAttemptId) view.lastAttemptId = intent.lastAttemptId;
  if (intent?.message) view.message = intent.message;
  if (intent?.lastAttemptId && FAILED_STATES.has(state)) {
    const line = attemptErrorLine(await store.attempts.get(intent.lastAttemptId));
    if (line) view.errorLine = line;
  }
  return view;
}

/** The view of instance `key` (retired ones too), or undefined when the hub has no such instance. */
export async function instanceViewByKey(store: StoreReads, key: string): Promise<InstanceView | undefined> {
  const desired = await store.desired.instance(key);
  if (!desired) return undefined;
  return instanceViewOf(
    store,
    desired,
    (await store.conditions.openOf("instance", key)).map((c) => c.type),
  );
}

/** Every instance the hub knows, with its current intent and observation. */
export async function instanceViews(
  store: StoreReads,
  options: { retired?: boolean } = {},
): Promise<InstanceView[]> {
  const conditions = await openConditionsBy(store);
  const views: InstanceView[] = [];
  for (const instance of await store.desired.instances()) {
    if (instance.retiredAt && !options.retired) continue;
    const desired = await store.desired.instance(instance.key);
    if (!desired) continue;
    views.push(await instanceViewOf(store, desired, conditions.get(`instance:${instance.key}`) ?? []));
  }
  return views;
}

export async function nodeViews(store: StoreReads): Promise<NodeView[]> {
  const conditions = await openConditionsBy(store);
  const instances = await instanceViews(store);
  return (await store.nodes.list()).map((node) => {
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

export async function assignmentViews(store: StoreReads): Promise<AssignmentView[]> {
  const byName = new Map<string, AssignmentView>();
  for (const instance of await instanceViews(store)) {
    let view = byName.get(instance.assignment);
    if (!view) {
      const stage = (await store.desired.instance(instance.instance))?.rollout.stage ?? "apply";
      view = { name: instance.assignment, stage, instances: 0, converged: 0, failing: 0, held: 0 };
      byName.set(instance.assignment, view);
    }
    view.instances++;
    if (instance.converged) view.converged++;
    if (FAILING_STATES.has(instance.state)) view.failing++;
    if (instance.state === "held" || instance.state === "waiting") view.held++;
  }
  return [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
}

/** Intents, newest generation first per instance; `all` includes superseded and retired ones. */
export async function intentViews(
  store: StoreReads,
  options: { all?: boolean } = {},
): Promise<IntentRecord[]> {
  const intents = await store.intents.list();
  if (options.all) return intents;
  return intents.filter((i) => i.status !== "superseded" && i.status !== "retired");
}

/** Open conditions, oldest first. */
export function openConditions(store: StoreReads): Promise<ConditionRecord[]> {
  return store.conditions.list({ status: "open" });
}

/** How an instance's generation stands, for `steward history`: outcome, failure class, correlation id. */
export interface GenerationOutcome {
  /** converged, blocked, stuck, failed, ambiguous, in-flight, waiting, held, superseded... */
  outcome: string;
  failureClass?: "transient" | "permanent" | "ambiguous" | "waiting";
  /** The last attempt's ULID, as found in logs, reports, conditions and commit statuses. */
  correlationId: string;
}

const IN_FLIGHT: ReadonlySet<string> = new Set(["dispatched", "verifying"]);

/**
 * The history seam for the syncer's `steward history`: what became of each generation, from the
 * hub's intents and attempts. Generations never attempted (held, waiting, superseded first) have
 * no correlation id and are left out.
 */
export function generationOutcomes(
  store: StoreReads,
): (instanceKey: string, generation: number) => Promise<GenerationOutcome | undefined> {
  return async (instanceKey, generation) => {
    const intent = await store.intents.get(instanceKey, generation);
    if (!intent?.lastAttemptId) return undefined;
    const outcome =
      intent.status === "superseded" || intent.status === "retired"
        ? (intent.outcome ?? intent.status)
        : IN_FLIGHT.has(intent.status)
          ? "in-flight"
          : intent.status === "backoff"
            ? "failed"
            : intent.status;
    const result: GenerationOutcome = { outcome, correlationId: intent.lastAttemptId };
    if (intent.status === "waiting") result.failureClass = "waiting";
    else if (intent.outcome === "ambiguous" || intent.status === "ambiguous")
      result.failureClass = "ambiguous";
    else if (intent.failureClass && outcome !== "converged") result.failureClass = intent.failureClass;
    return result;
  };
}
