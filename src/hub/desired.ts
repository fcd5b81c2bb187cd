/**
 * What the hub keeps of a synced revision besides generations: the declared nodes (how to reach
 * them, their roots), each assignment's current rollout policy and budget, and the fleet settings
 * (mode, heartbeat). The syncer records generations; the hub records these from the same
 * DesiredState, so dispatch knows each node's transport and a policy change (observe → apply, a new
 * canary) takes effect even though it is not a new generation.
 */
import { canonicalJson } from "../model/canonical.js";
import { effectiveBudget, type FleetSettings } from "../model/fleet.js";
import type { Assignment, Node } from "../model/generated.js";
import type { Store } from "./store/store.js";

/** The parts of a rendered DesiredState the hub needs (load.ts's `desired`). */
export interface DeclaredFleet {
  fleet: FleetSettings;
  nodes: ReadonlyMap<string, { value: Node }>;
  assignments: ReadonlyMap<string, { value: Assignment }>;
}

/** What changed in the declarations, beyond generations. */
export interface DeclarationChanges {
  /** Nodes added, changed or removed: their instances need a reconcile (a node moved transport, say). */
  nodes: string[];
  /** Assignments whose rollout policy or budget changed. */
  assignments: string[];
}

/** The hub's meta key naming the revision whose declarations are recorded. */
const DECLARED_REVISION = "declared_revision";

/**
 * The revision whose declarations the store holds now. The hub takes in a revision's generations
 * only once its declarations (or a later revision's) are recorded: an attempt must never go out
 * with a Node document the fleet repository no longer declares (a host key no longer pinned).
 */
export function declaredRevision(store: Store): string | undefined {
  return store.meta(DECLARED_REVISION);
}

/** Records the nodes, assignment policies and fleet settings `revision` declares. */
export function recordDeclaredFleet(
  store: Store,
  revision: string,
  declared: DeclaredFleet,
  now: string,
): DeclarationChanges {
  return store.transaction(() => {
    store.setMeta(DECLARED_REVISION, revision);
    const changes: DeclarationChanges = { nodes: [], assignments: [] };
    for (const [name, { value }] of declared.nodes) {
      const existing = store.node(name);
      if (existing && !existing.removedAt && canonicalJson(existing.spec) === canonicalJson(value)) continue;
      store.upsertNode({ name, transport: value.spec.transport, spec: value, revision });
      changes.nodes.push(name);
    }
    for (const node of store.nodes())
      if (!node.removedAt && !declared.nodes.has(node.name)) changes.nodes.push(node.name);
    store.markNodesRemoved([...declared.nodes.keys()], now);
    for (const [name, { value }] of declared.assignments) {
      const rollout = { stage: declared.fleet.mode, ...value.spec.rollout };
      const budget = effectiveBudget(value.spec.budget, declared.fleet.budget);
      if (store.savePolicy(name, revision, rollout, budget)) changes.assignments.push(name);
    }
    store.saveFleetSettings(revision, declared.fleet);
    return changes;
  });
}
