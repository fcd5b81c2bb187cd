/**
 * The order resources apply in, and what may run side by side. Pure.
 *
 * Resources apply in declared order, moved later only as far as `dependsOn` (and `restartOn`)
 * require: a stable topological order. Within it, commands, services, containers, packages, units
 * and atomic group members are barriers: they wait for everything before them and everything after
 * waits for them. Between barriers, files, directories and symlinks that do not touch each other's
 * paths (same path, ancestor or descendant) may apply concurrently; that is what makes a thousand
 * files fast while any observable order (a command reading a file) stays the declared one.
 */
import type { Resource } from "../model/generated.js";

/** The bundle cannot be put in order (duplicate names, unknown references, a cycle): nothing is applied. */
export class BundleError extends Error {
  override readonly name = "BundleError";
}

/** One resource in application order, with what it must wait for. */
export interface Step {
  /** Index in the bundle's resource list. */
  index: number;
  name: string;
  /** Indices of the resources this one declared `dependsOn` (a failure there blocks it). */
  dependsOn: number[];
  /** Indices that must finish first (dependsOn included). */
  after: number[];
}

const FS_KINDS = new Set(["file", "directory", "symlink"]);

function nameOf(resource: Resource): string {
  if (resource.name) return resource.name;
  return "path" in resource ? resource.path : resource.kind;
}

function isBarrier(resource: Resource): boolean {
  return !FS_KINDS.has(resource.kind) || resource.atomic !== undefined;
}

function ancestors(path: string): string[] {
  const out: string[] = [];
  let at = path;
  for (let slash = at.lastIndexOf("/"); slash > 0; slash = at.lastIndexOf("/")) {
    at = at.slice(0, slash);
    out.push(at);
  }
  return out;
}

/**
 * The steps in application order. Throws BundleError for duplicate names, unknown references and
 * dependency cycles (the syncer refuses those too; the agent does not trust its input).
 */
export function applicationOrder(resources: readonly Resource[]): Step[] {
  const byName = new Map<string, number>();
  resources.forEach((resource, index) => {
    const name = nameOf(resource);
    if (byName.has(name)) throw new BundleError(`two resources are named ${JSON.stringify(name)}`);
    byName.set(name, index);
  });
  const lookup = (from: string, name: string, field: string) => {
    const index = byName.get(name);
    if (index === undefined)
      throw new BundleError(
        `resource ${JSON.stringify(from)} ${field} ${JSON.stringify(name)}, which is not in the bundle`,
      );
    return index;
  };
  const dependsOn = resources.map((resource) =>
    (resource.dependsOn ?? []).map((name) => lookup(nameOf(resource), name, "depends on")),
  );
  const ordering = resources.map((resource, i) => {
    const restartOn = resource.kind === "service" ? (resource.restartOn ?? []) : [];
    return [
      ...new Set([
        ...dependsOn[i]!,
        ...restartOn.map((name) => lookup(nameOf(resource), name, "restarts on")),
      ]),
    ];
  });

  // Kahn's algorithm, always taking the earliest declared resource that is ready: stable.
  const waiting = ordering.map((deps) => deps.length);
  const dependents = resources.map(() => [] as number[]);
  ordering.forEach((deps, i) => {
    for (const d of deps) dependents[d]!.push(i);
  });
  const ready = new MinHeap();
  waiting.forEach((count, i) => {
    if (count === 0) ready.push(i);
  });
  const order: number[] = [];
  while (ready.size > 0) {
    const next = ready.pop();
    order.push(next);
    for (const d of dependents[next]!) if (--waiting[d]! === 0) ready.push(d);
  }
  if (order.length < resources.length) {
    const cyclic = resources.map(nameOf).filter((_, i) => !order.includes(i));
    throw new BundleError(`resources depend on each other in a cycle: ${cyclic.join(", ")}`);
  }

  // Ordering edges between barriers and path-related filesystem resources.
  const steps: Step[] = [];
  let lastBarrier: number | undefined;
  let sinceBarrier: number[] = [];
  let atPath = new Map<string, number[]>();
  let below = new Map<string, number[]>();
  for (const index of order) {
    const resource = resources[index]!;
    const after = new Set(ordering[index]);
    if (isBarrier(resource)) {
      for (const i of sinceBarrier) after.add(i);
      if (lastBarrier !== undefined) after.add(lastBarrier);
      lastBarrier = index;
      sinceBarrier = [];
      atPath = new Map();
      below = new Map();
    } else {
      if (lastBarrier !== undefined) after.add(lastBarrier);
      const path = (resource as { path: string }).path;
      for (const i of atPath.get(path) ?? []) after.add(i);
      for (const i of below.get(path) ?? []) after.add(i);
      for (const ancestor of ancestors(path)) for (const i of atPath.get(ancestor) ?? []) after.add(i);
      push(atPath, path, index);
      for (const ancestor of ancestors(path)) push(below, ancestor, index);
      sinceBarrier.push(index);
    }
    after.delete(index);
    steps.push({ index, name: nameOf(resource), dependsOn: dependsOn[index]!, after: [...after] });
  }
  return steps;
}

function push(map: Map<string, number[]>, key: string, value: number): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/** A binary min-heap of indices: the earliest ready resource first, in O(log n). */
class MinHeap {
  private readonly items: number[] = [];
  get size(): number {
    return this.items.length;
  }
  push(value: number): void {
    const items = this.items;
    items.push(value);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (items[parent]! <= value) break;
      items[i] = items[parent]!;
      i = parent;
    }
    items[i] = value;
  }
  pop(): number {
    const items = this.items;
    const top = items[0]!;
    const last = items.pop()!;
    if (items.length > 0) {
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        if (left >= items.length) break;
        const right = left + 1;
        const child = right < items.length && items[right]! < items[left]! ? right : left;
        if (items[child]! >= last) break;
        items[i] = items[child]!;
        i = child;
      }
      items[i] = last;
    }
    return top;
  }
}
