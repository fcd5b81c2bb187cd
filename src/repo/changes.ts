/**
 * From rendered instances to generations: the one rule of the syncer, as a pure function. An
 * instance whose hash differs from its current generation's (including a change back to older
 * content) gets the next generation; an instance that appears, or comes back after being retired,
 * too; an unchanged hash changes nothing, wherever the YAML moved; an instance no longer rendered is
 * retired. Generations only ever grow by one.
 */
import type { Instance } from "../model/render.js";
import type { CurrentInstance, NewGeneration } from "./store.js";

/** What one valid revision changes. */
export interface GenerationChanges {
  generations: NewGeneration[];
  /** Keys of instances to retire (managed now, absent from the revision). */
  retired: string[];
  /** Instances whose hash is unchanged. */
  unchanged: number;
  /** Sorted names of assignments with a new generation or a retirement. */
  changedAssignments: string[];
}

/**
 * Compares the desired instances of a revision with the store's current ones. `keys`, when given,
 * are the only instance keys that may differ (see `changedInstanceKeys`): the current instances must
 * then be exactly those of the revision the keys are relative to, and only they are compared.
 */
export function generationChanges(
  current: ReadonlyMap<string, CurrentInstance>,
  desired: ReadonlyMap<string, Instance>,
  keys?: ReadonlySet<string>,
): GenerationChanges {
  const generations: NewGeneration[] = [];
  const retired: string[] = [];
  const assignments = new Set<string>();
  const compare = (instance: Instance) => {
    const now = current.get(instance.key);
    if (now && !now.retiredAt && now.hash === instance.hash) return;
    generations.push({
      instanceKey: instance.key,
      generation: (now?.generation ?? 0) + 1,
      assignment: instance.assignment,
      node: instance.node,
      hash: instance.hash,
      spec: instance.spec,
      rollout: instance.rollout,
      budget: instance.budget,
    });
    assignments.add(instance.assignment);
  };
  const retire = (now: CurrentInstance) => {
    if (now.retiredAt || desired.has(now.instanceKey)) return;
    retired.push(now.instanceKey);
    assignments.add(now.assignment);
  };
  if (keys) {
    // In key order, as a comparison of every instance would list them.
    for (const key of [...keys].sort()) {
      const instance = desired.get(key);
      if (instance) compare(instance);
      else {
        const now = current.get(key);
        if (now) retire(now);
      }
    }
  } else {
    for (const instance of desired.values()) compare(instance);
    for (const now of current.values()) retire(now);
  }
  return {
    generations,
    retired: retired.sort(),
    unchanged: desired.size - generations.length,
    changedAssignments: [...assignments].sort(),
  };
}
