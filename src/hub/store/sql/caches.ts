/**
 * What a store keeps in memory between units of work, to spare the database work a record already
 * in hand answers: parsed specs (many instances share one text) and the last
 * stored body of each observation (a report that repeats it rewrites nothing). The observation
 * caches are dropped whenever a unit of work rolls back, and per node whenever another writer may
 * have written the node's observations (a node's lease changed hands between hub replicas: only
 * the replica that owns a node records its reports, see hub/replicas/replica.ts).
 */
import type { Observation } from "../../records.js";

/**
 * Parsed JSON by its text, for the few texts many rows share: an assignment's spec is the same on
 * every node it renders alike, its rollout and budget on all of them. Memory is bounded by the
 * texts kept, not by instances or generations: past `max`, the one cached first goes.
 */
export class ParsedJson {
  private readonly parsed = new Map<string, unknown>();

  constructor(private readonly max = 4_096) {}

  parse(text: string): unknown {
    let value = this.parsed.get(text);
    if (value === undefined) {
      value = frozen(JSON.parse(text));
      if (this.parsed.size >= this.max) this.parsed.delete(this.parsed.keys().next().value as string);
      this.parsed.set(text, value);
    }
    return value;
  }
}

/** `value`, frozen all the way down: a reader that changed a shared value would change it for all. */
function frozen<T>(value: T): T {
  if (value !== null && typeof value === "object") {
    for (const member of Object.values(value)) frozen(member);
    Object.freeze(value);
  }
  return value;
}

export class StoreCaches {
  /** Desired instances' specs, rollouts and budgets (shared: never to be changed by a reader). */
  readonly specs = new ParsedJson();
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
