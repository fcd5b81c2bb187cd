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
import { SortedMap } from "../model/sorted.js";
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

/**
 * The Node documents this process recorded last, as parsed, and the revision they were recorded
 * for: unchanged files keep their parsed values between revisions (the analysis cache), so a node
 * whose value is the very same object needs no reading back and comparing, and a commit that
 * touches one file costs one file, not the fleet. Used only while the store's declared revision is
 * still the one recorded (another replica recording in between makes it compare everything again).
 */
export interface RecordedNodes {
  revision?: string;
  nodes: DeclaredFleet["nodes"];
}

/**
 * Records the nodes, assignment policies and fleet settings `revision` declares. With `recorded`
 * (kept by the caller between revisions, filled here), nodes recorded before as the same object
 * are skipped.
 */
export async function recordDeclaredFleet(
  store: Transactional,
  revision: string,
  declared: DeclaredFleet,
  now: string,
  recorded?: RecordedNodes,
): Promise<DeclarationChanges> {
  const changes = await store.transaction(async (tx) => {
    const known =
      recorded && recorded.nodes.size > 0 && recorded.revision === (await tx.meta.get(DECLARED_REVISION))
        ? recorded.nodes
        : undefined;
    await tx.meta.set(DECLARED_REVISION, revision);
    const changes: DeclarationChanges = { nodes: [], assignments: [] };
    // Only the nodes whose parsed value is not the one recorded last: between two maps the loader
    // made one from the other, the parts of the map a commit did not touch are not looked at.
    const since = known
      ? SortedMap.changesSince(declared.nodes, known, (a, b) => a.value === b.value)
      : undefined;
    for (const [name, { value }] of since?.changed ?? declared.nodes) {
      const existing = await tx.nodes.get(name);
      if (existing && !existing.removedAt && canonicalJson(existing.spec) === canonicalJson(value)) continue;
      await tx.nodes.upsert({ name, transport: value.spec.transport, spec: value, revision });
      changes.nodes.push(name);
    }
    // Every node recorded before is still declared: none was removed.
    if (!since || since.removed.length > 0) {
      for (const node of await tx.nodes.list())
        if (!node.removedAt && !declared.nodes.has(node.name)) changes.nodes.push(node.name);
      await tx.nodes.markRemoved([...declared.nodes.keys()], now);
    }
    changes.assignments.push(
      ...(await tx.desired.savePolicies(
        revision,
        [...declared.assignments].map(([assignment, { value }]) => ({
          assignment,
          rollout: { stage: declared.fleet.mode, ...value.spec.rollout },
          budget: effectiveBudget(value.spec.budget, declared.fleet.budget),
        })),
      )),
    );
    await tx.desired.saveFleetSettings(revision, declared.fleet);
    return changes;
  });
  if (recorded) {
    recorded.revision = revision;
    recorded.nodes = declared.nodes;
  }
  return changes;
}
