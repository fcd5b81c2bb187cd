/**
 * What a store keeps in memory between units of work, to spare the database work a record already
 * in hand answers: parsed generation specs (a generation never changes once written) and the last
 * stored body of each observation (a report that repeats it rewrites nothing). The observation
 * caches are dropped whenever a unit of work rolls back, and per node whenever another writer may
 * have written the node's observations (a node's lease changed hands between hub replicas: only
 * the replica that owns a node records its reports, see hub/replicas/replica.ts).
 */
import type { DesiredInstance, Observation } from "../../records.js";

export class StoreCaches {
  readonly specs = new Map<string, Pick<DesiredInstance, "spec" | "rollout" | "budget">>();
  /** Last stored body of each observation, to skip rewriting what a report repeats. */
  readonly observed = new Map<string, string>();
  /** The instance keys each node has an observation of (read once per node, then kept). */
  readonly observedKeys = new Map<string, Set<string>>();
  readonly parsedObservations = new Map<
    string,
    { body: string; takenAt: string; observation: Observation }
  >();

  /** After a rollback: what was cached may be ahead of the database. */
  rolledBack(): void {
    this.observed.clear();
    this.observedKeys.clear();
  }

  /** Another writer may have written `node`'s observations. */
  forgetNode(node: string): void {
    const keys = this.observedKeys.get(node);
    if (keys) for (const key of keys) this.observed.delete(key);
    this.observedKeys.delete(node);
  }
}
