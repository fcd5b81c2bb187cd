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
import type { StoreReads, Transactional } from "./store/store.js";

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
export function declaredRevision(store: StoreReads): Promise<string | undefined> {
  return store.meta.get(DECLARED_REVISION);
}

/** Records the nodes, assignment policies and fleet settings `revision` declares. */
export function recordDeclaredFleet(
  store: Transactional,
  revision: string,
  declared: DeclaredFleet,
  now: string,
): Promise<DeclarationChanges> {
  return store.transaction(async (tx) => {
    await tx.meta.set(DECLARED_REVISION, revision);
    const changes: DeclarationChanges = { nodes: [], assignments: [] };
    for (const [name, { value }] of declared.nodes) {
      const existing = await tx.nodes.get(name);
      if (existing && !existing.removedAt && canonicalJson(existing.spec) === canonicalJson(value)) continue;
      await tx.nodes.upsert({ name, transport: value.spec.transport, spec: value, revision });
      changes.nodes.push(name);
    }
    for (const node of await tx.nodes.list())
      if (!node.removedAt && !declared.nodes.has(node.name)) changes.nodes.push(node.name);
    await tx.nodes.markRemoved([...declared.nodes.keys()], now);
    for (const [name, { value }] of declared.assignments) {
      const rollout = { stage: declared.fleet.mode, ...value.spec.rollout };
      const budget = effectiveBudget(value.spec.budget, declared.fleet.budget);
      if (await tx.desired.savePolicy(name, revision, rollout, budget)) changes.assignments.push(name);
    }
    await tx.desired.saveFleetSettings(revision, declared.fleet);
    return changes;
  });
}
