/**
 * Whether this hub reaches a node, as conditions: `TransportDegraded` (TransportNotEnabled) on a
 * declared node whose transport this hub does not run, and the transport problems an earlier run
 * observed that no longer hold. Level-based: run at start, whenever a node's declaration changes,
 * and at a node's first report of this run.
 */
import { markOpen, markResolved } from "./conditions.js";
import type { NodeRecord } from "./records.js";
import type { UnitOfWork } from "./store/store.js";

/** What the reach checks are given. */
export interface ReachContext {
  newId: () => string;
  /** Whether this hub runs the node's transport. */
  reaches: (node: NodeRecord) => boolean;
  /** The transports this hub runs, for the message. */
  transportNames: readonly string[];
}

/**
 * A declared node on a transport this hub does not run is not right either: its instances are
 * never dispatched. `TransportDegraded` (TransportNotEnabled) on the node says so until a hub that
 * runs the transport starts, or the node moves to one that runs here or is removed. Every other
 * reason a transport observed holds only while that transport is how this hub reaches the node:
 * one observed over a transport the hub does not run (an earlier hub's, or the node's before it
 * moved) no longer holds and resolves, so a node never shows an old run's `NoCredentials` beside
 * this run's `TransportNotEnabled`. Returns whether a condition opened or resolved (the rollouts
 * that wait for the node are then looked at again).
 */
export async function checkReach(
  ctx: ReachContext,
  tx: UnitOfWork,
  node: NodeRecord,
  now: string,
): Promise<boolean> {
  const store = tx;
  const reached = !node.removedAt && ctx.reaches(node);
  let changed = false;
  const resolve = async (reason: string, resolution: string) => {
    if (await markResolved(store, "TransportDegraded", "node", node.name, now, resolution, reason))
      changed = true;
  };
  for (const condition of await store.conditions.list({
    status: "open",
    type: "TransportDegraded",
    subjectKind: "node",
    subject: node.name,
  })) {
    const via = typeof condition.evidence.transport === "string" ? condition.evidence.transport : undefined;
    if (node.removedAt) await resolve(condition.reason, `node ${node.name} is no longer declared`);
    else if (condition.reason === "TransportNotEnabled") {
      if (reached) await resolve(condition.reason, `this hub runs transport ${node.transport}`);
    } else if (!reached)
      await resolve(
        condition.reason,
        `this hub does not run transport ${node.transport}: ${via ?? "that transport"} does not reach node ${node.name} now (TransportNotEnabled says why nothing does)`,
      );
    else if (via !== undefined && via !== node.transport)
      await resolve(
        condition.reason,
        `node ${node.name} now uses transport ${node.transport}: ${via} no longer reaches it`,
      );
  }
  if (!reached && !node.removedAt) {
    const instances = await store.desired.activeKeysOfNode(node.name);
    const { change } = await markOpen(
      store,
      {
        type: "TransportDegraded",
        subjectKind: "node",
        subject: node.name,
        reason: "TransportNotEnabled",
        message: `node ${node.name} uses transport ${node.transport}, which this hub does not run (it runs ${ctx.transportNames.join(", ") || "none"}): its ${instances.length} instances are not dispatched`,
        evidence: { transport: node.transport, instances: instances.slice(0, 20) },
        resolver: "operator",
        node: node.name,
      },
      now,
      ctx.newId,
    );
    if (change === "opened") changed = true;
  }
  return changed;
}

/**
 * A node's first report since this hub started (at `startedAt`), over `transport`, taken at
 * `takenAt`: that transport reaches it. Its `TransportDegraded` conditions that an earlier hub run
 * observed over that transport (and nothing in this run has observed since), before the report was
 * taken, no longer hold: the transport that would say they ended kept them in memory and is gone.
 * Within one run the transport itself says when a problem ends.
 */
export async function reachedAgain(
  store: UnitOfWork,
  node: { name: string; transport: string; takenAt: string; startedAt: string },
  now: string,
): Promise<void> {
  const { name, transport, takenAt } = node;
  for (const condition of await store.conditions.list({
    status: "open",
    type: "TransportDegraded",
    subjectKind: "node",
    subject: name,
  }))
    if (
      condition.evidence.transport === transport &&
      condition.lastObserved < node.startedAt &&
      condition.since < takenAt
    )
      await markResolved(
        store,
        "TransportDegraded",
        "node",
        name,
        now,
        `node ${name} reported over ${transport} at ${takenAt}, after this was observed`,
        condition.reason,
      );
}
