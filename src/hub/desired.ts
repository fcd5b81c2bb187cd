/**
 * What the hub keeps of a synced revision besides generations: the declared nodes (how to reach
 * them, their roots) and the fleet settings (mode, heartbeat). The syncer records generations; the
 * hub records these from the same DesiredState, so dispatch knows each node's transport and address.
 */
import { canonicalJson } from "../model/canonical.js";
import type { FleetSettings } from "../model/fleet.js";
import type { Node } from "../model/generated.js";
import type { Store } from "./store/store.js";

/** The parts of a rendered DesiredState the hub needs (load.ts's `desired`). */
export interface DeclaredFleet {
  fleet: FleetSettings;
  nodes: ReadonlyMap<string, { value: Node }>;
}

/**
 * Records the nodes and fleet settings `revision` declares. Returns the names of nodes whose
 * declaration changed (added, changed or removed): their instances need a reconcile even when no
 * instance hash changed (a node moved to another transport, say).
 */
export function recordDeclaredFleet(
  store: Store,
  revision: string,
  declared: DeclaredFleet,
  now: string,
): string[] {
  return store.transaction(() => {
    const changed: string[] = [];
    for (const [name, { value }] of declared.nodes) {
      const existing = store.node(name);
      if (existing && !existing.removedAt && canonicalJson(existing.spec) === canonicalJson(value)) continue;
      store.upsertNode({ name, transport: value.spec.transport, spec: value, revision });
      changed.push(name);
    }
    for (const node of store.nodes())
      if (!node.removedAt && !declared.nodes.has(node.name)) changed.push(node.name);
    store.markNodesRemoved([...declared.nodes.keys()], now);
    store.saveFleetSettings(revision, declared.fleet);
    return changed;
  });
}
