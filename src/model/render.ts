/**
 * Rendering: an assignment placed on a node becomes an instance with a self-contained spec (files
 * from `source:` inlined, every resource named) and a content hash. The hash covers what the agent
 * applies, not where the YAML lives, so renaming a file changes nothing while any change of content
 * (including back to older content) changes the hash.
 */
import { createHash } from "node:crypto";
import { canonicalJson } from "./canonical.js";
import type { AssignmentDocument, NodeDocument } from "./documents.js";
import { factsOf, resourceName } from "./facts.js";
import { type EffectiveBudget, effectiveBudget, type FleetSettings } from "./fleet.js";
import type {
  Assignment,
  Bundle,
  InstanceSpec,
  Node,
  Probe,
  Resource,
  Rollout,
  SecretCiphertext,
} from "./generated.js";
import { NodeIndex } from "./placement.js";
import { emptySorted, SortedMap } from "./sorted.js";
import { hasReferences, lookup, substitute } from "./template.js";

/** One assignment on one node: the unit of convergence. */
export interface Instance {
  /** `assignment@node`. */
  key: string;
  assignment: string;
  node: string;
  spec: InstanceSpec;
  /** `sha256:...` of the canonical JSON of `spec` (computed when first read, then kept). */
  hash: string;
  rollout: Rollout;
  budget: EffectiveBudget;
  /** Where the assignment is declared. */
  file: string;
}

/** What the repository says should be true: validated documents and every rendered instance. */
export interface DesiredState {
  fleet: FleetSettings;
  /** By name, sorted by name. */
  nodes: ReadonlyMap<string, NodeDocument>;
  /** By name, sorted by name. */
  assignments: ReadonlyMap<string, AssignmentDocument>;
  /** By instance key, sorted by key. */
  instances: ReadonlyMap<string, Instance>;
}

export function instanceKey(assignment: string, node: string): string {
  // Joined, not concatenated: V8 makes `${assignment}@${node}` a rope (a string object over two
  // others), some 27 bytes more than the flat string a join makes, in every instance a hub keeps.
  return [assignment, node].join("@");
}

/** A file's bytes from the repo, with an id that is equal for equal bytes (a git blob id). */
export interface SourceContent {
  id: string;
  bytes: Uint8Array;
}

export { resourceName } from "./facts.js";

/** Whether the assignment selects this node, by name or by labels. */
export function selects(assignment: Assignment, node: Node): boolean {
  if (assignment.spec.nodes?.includes(node.metadata.name)) return true;
  const match = assignment.spec.selector?.matchLabels;
  if (!match) return false;
  const labels = node.metadata.labels ?? {};
  return Object.entries(match).every(([key, value]) => labels[key] === value);
}

/**
 * The resource as the agent receives it: named, with a `source:` file's bytes inlined as content.
 * A secret source stays a path: its ciphertext travels once per instance, in the spec's `secrets`.
 */
function renderResource(resource: Resource, sources: ReadonlyMap<string, SourceContent>): Resource {
  const rendered = { ...resource, name: resourceName(resource) } as Resource & { source?: string };
  if ((rendered.kind !== "file" && rendered.kind !== "systemd-unit") || rendered.source === undefined)
    return rendered;
  if (rendered.secret === true) return rendered;
  const { source, ...rest } = rendered;
  const bytes = sources.get(source)?.bytes ?? new Uint8Array();
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const utf8 = buffer.toString("utf8");
  if (Buffer.from(utf8, "utf8").equals(buffer)) return { ...rest, content: utf8 } as Resource;
  return { ...rest, content: buffer.toString("base64"), encoding: "base64" } as Resource;
}

/**
 * The ciphertext of every secret file an assignment's resources use, by path (sorted), as the
 * repository holds it: text as text, a binary age file as base64. Undefined when it uses none.
 */
function renderSecrets(
  assignment: Assignment,
  sources: ReadonlyMap<string, SourceContent>,
): Record<string, SecretCiphertext> | undefined {
  const paths = [
    ...new Set(
      factsOf(assignment)
        .sources.filter((use) => use.secret)
        .map((use) => use.source),
    ),
  ];
  if (paths.length === 0) return undefined;
  const secrets: Record<string, SecretCiphertext> = {};
  for (const path of paths.sort()) {
    const bytes = sources.get(path)?.bytes ?? new Uint8Array();
    const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const text = buffer.toString("utf8");
    secrets[path] = Buffer.from(text, "utf8").equals(buffer)
      ? { content: text }
      : { content: buffer.toString("base64"), encoding: "base64" };
  }
  return secrets;
}

/**
 * A resource or probe of an assignment, prepared once for all its nodes: when it has no `${`, its
 * rendered form and canonical JSON are the same on every node.
 */
type Part<T> = { fixed: true; value: T; json?: string } | { fixed: false; raw: T };

/** What every instance of one assignment shares, and the instances rendered last time. */
interface AssignmentPlan {
  /** Source contents, fleet defaults and file the plan was made with; another key is another plan. */
  key: string;
  resources: Part<Resource>[];
  probes: Part<Probe>[];
  /** The secrets the resources use (the same on every node), and their canonical JSON. */
  secrets: { value: Record<string, SecretCiphertext>; json: string } | undefined;
  rollout: Rollout;
  budget: EffectiveBudget;
  /** Instances of the last rendering by node value: an unchanged node gets the same instance back. */
  instances: Map<Node, Instance>;
  /**
   * The rendered resources, probes and dependencies when no part refers to the node: one array that
   * every instance of the plan shares (instances are immutable), not one per node.
   */
  shared: { resources?: Resource[]; probes?: Probe[]; dependsOn: string[] };
}

/** What `dependsOn` is when an assignment names none: one array for all. */
const NO_DEPENDENCIES: string[] = Object.freeze([]) as unknown as string[];

/** Plans by the assignment's parsed value: unchanged files keep their values between syncs. */
const plans = new WeakMap<Assignment, AssignmentPlan>();

function planFor(
  assignment: AssignmentDocument,
  fleet: FleetSettings,
  sources: ReadonlyMap<string, SourceContent>,
): AssignmentPlan {
  const spec = assignment.value.spec;
  let sourceIds = "";
  for (const { source } of factsOf(assignment.value).sources)
    sourceIds += `${sources.get(source)?.id ?? "missing"},`;
  const key = `${sourceIds}\0${fleet.budget.attempts}/${fleet.budget.withinMs}/${fleet.mode}\0${assignment.file}`;
  const known = plans.get(assignment.value);
  if (known?.key === key) return known;
  const secrets = renderSecrets(assignment.value, sources);
  const plan: AssignmentPlan = {
    key,
    secrets: secrets ? { value: secrets, json: canonicalJson(secrets) } : undefined,
    resources: spec.resources.map((raw) =>
      hasReferences(raw) ? { fixed: false, raw } : { fixed: true, value: renderResource(raw, sources) },
    ),
    probes: (spec.probes ?? []).map((raw) =>
      hasReferences(raw) ? { fixed: false, raw } : { fixed: true, value: raw },
    ),
    rollout: { stage: fleet.mode, ...spec.rollout },
    budget: effectiveBudget(spec.budget, fleet.budget),
    instances: new Map(),
    shared: { dependsOn: spec.dependsOn ?? NO_DEPENDENCIES },
  };
  const fixed = <T>(parts: Part<T>[]): T[] | undefined =>
    parts.every((part) => part.fixed) ? parts.map((part) => (part as { value: T }).value) : undefined;
  const resources = fixed(plan.resources);
  if (resources) plan.shared.resources = resources;
  const probes = fixed(plan.probes);
  if (probes) plan.shared.probes = probes;
  plans.set(assignment.value, plan);
  return plan;
}

/** Canonical JSON of a rendered part: once per plan for a part that is the same on every node. */
function partJson<T>(part: Part<T>, rendered: T): string {
  if (!part.fixed) return canonicalJson(rendered);
  part.json ??= canonicalJson(part.value);
  return part.json;
}

/**
 * `sha256:` of `canonicalJson(spec)`, assembled from the plan's pieces rather than serialising the
 * parts shared by every node again for each of them.
 */
function specHash(plan: AssignmentPlan, spec: InstanceSpec): string {
  const resources = spec.resources.map((resource, i) => partJson(plan.resources[i]!, resource));
  const probes = spec.probes.map((probe, i) => partJson(plan.probes[i]!, probe));
  // The members of InstanceSpec in canonicalJson's (sorted) order.
  const json =
    `{"assignment":${JSON.stringify(spec.assignment)},"dependsOn":${canonicalJson(spec.dependsOn)}` +
    `,"node":${JSON.stringify(spec.node)},"probes":[${probes.join(",")}],"resources":[${resources.join(",")}]` +
    `,"roots":${canonicalJson(spec.roots)}${plan.secrets ? `,"secrets":${plan.secrets.json}` : ""}` +
    `,"state":${JSON.stringify(spec.state)}` +
    `${spec.version === undefined ? "" : `,"version":${JSON.stringify(spec.version)}`}}`;
  return flat(`sha256:${createHash("sha256").update(json).digest("hex")}`);
}

/**
 * `text` as one flat string: a concatenation is a pair of pointers to its halves, and kept for the
 * life of an instance that is 120 bytes where the flat copy is 96.
 */
function flat(text: string): string {
  return Buffer.from(text, "latin1").toString("latin1");
}

/** Renders the assignment of `plan` on `node`. */
function render(
  assignment: AssignmentDocument,
  plan: AssignmentPlan,
  node: Node,
  sources: ReadonlyMap<string, SourceContent>,
  missing: MissingVariable[],
): Instance {
  const spec = assignment.value.spec;
  const name = assignment.value.metadata.name;
  const context = { node, assignment: assignment.value };
  const onMissing = (path: (string | number)[], variable: string) =>
    missing.push({ assignment, node: node.metadata.name, path: ["spec", ...path], variable });
  // `map` makes arrays of their exact length, where `push` leaves room to grow in each of them.
  const resources =
    plan.shared.resources ??
    plan.resources.map((part, i) =>
      part.fixed
        ? part.value
        : renderResource(substitute(part.raw, context, onMissing, ["resources", i]), sources),
    );
  const probes =
    plan.shared.probes ??
    plan.probes.map((part, i) =>
      part.fixed ? part.value : substitute(part.raw, context, onMissing, ["probes", i]),
    );
  const instanceSpec: InstanceSpec = {
    assignment: name,
    node: node.metadata.name,
    state: spec.state ?? "running",
    dependsOn: plan.shared.dependsOn,
    roots: node.spec.roots,
    resources,
    probes,
  };
  if (spec.version !== undefined) instanceSpec.version = spec.version;
  if (plan.secrets) instanceSpec.secrets = plan.secrets.value;
  return {
    key: instanceKey(name, node.metadata.name),
    assignment: name,
    node: node.metadata.name,
    spec: instanceSpec,
    // Computed now, not when first read: a getter that replaced itself with its value left every
    // instance in dictionary mode, some 380 bytes more each (a fleet's rendering lives in the hub).
    hash: specHash(plan, instanceSpec),
    rollout: plan.rollout,
    budget: plan.budget,
    file: assignment.file,
  };
}

/**
 * Renders one assignment for one node. Memoised on the identity of the assignment's and the node's
 * parsed values (unchanged files keep them between syncs), the content ids of `source:` files and
 * the fleet defaults, so a sync re-renders only what changed. Instances are immutable.
 */
export function renderInstance(
  assignment: AssignmentDocument,
  node: Node,
  fleet: FleetSettings,
  sources: ReadonlyMap<string, SourceContent>,
  missing: MissingVariable[] = [],
): Instance {
  const plan = planFor(assignment, fleet, sources);
  const known = plan.instances.get(node);
  if (known) return known;
  const before = missing.length;
  const instance = render(assignment, plan, node, sources, missing);
  if (missing.length === before) plan.instances.set(node, instance);
  return instance;
}

/** A `${node...}` reference with no value on the node an assignment was rendered for. */
export interface MissingVariable {
  assignment: AssignmentDocument;
  node: string;
  path: (string | number)[];
  variable: string;
}

/** The nodes an assignment lands on, sorted by name (see NodeIndex to place many assignments). */
export function placement(assignment: Assignment, nodes: ReadonlyMap<string, NodeDocument>): Node[] {
  return new NodeIndex(nodes).place(assignment);
}

/** The instances of one assignment, in the order of the nodes it is placed on, with what they lack. */
function renderAssignment(
  assignment: AssignmentDocument,
  placed: readonly Node[],
  fleet: FleetSettings,
  sources: ReadonlyMap<string, SourceContent>,
  missing: MissingVariable[],
): Instance[] {
  const plan = planFor(assignment, fleet, sources);
  // Keep only this rendering's instances, so a removed node is not held by the plan.
  const previous = plan.instances;
  plan.instances = new Map();
  const out: Instance[] = [];
  for (const node of placed) {
    let instance = previous.get(node);
    if (!instance) {
      const before = missing.length;
      instance = render(assignment, plan, node, sources, missing);
      if (missing.length > before) {
        out.push(instance);
        continue;
      }
    }
    plan.instances.set(node, instance);
    out.push(instance);
  }
  return out;
}

function byInstanceKey(a: Instance, b: Instance): number {
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

/** Maps `Rendering.render` made by difference: the map each was made from, and the keys it changed. */
const derivations = new WeakMap<
  ReadonlyMap<string, Instance>,
  { from: WeakRef<ReadonlyMap<string, Instance>>; keys: ReadonlySet<string> }
>();

/**
 * The keys whose instance may differ between two instance maps of the same repository's loads
 * (added, removed or rendered again), when `next` was made from `previous` by difference or is the
 * same map; undefined when that is not known, and every key must be compared. Told once: the keys
 * are let go as they are returned (a whole fleet's, after a change to every instance), and a second
 * call for the same two maps compares every key.
 */
export function changedInstanceKeys(
  previous: ReadonlyMap<string, Instance>,
  next: ReadonlyMap<string, Instance>,
): ReadonlySet<string> | undefined {
  if (previous instanceof DeferredInstances) previous = previous.render();
  if (next instanceof DeferredInstances) next = next.render();
  if (previous === next) return new Set();
  const derivation = derivations.get(next);
  if (derivation?.from.deref() !== previous) return undefined;
  derivations.delete(next);
  return derivation.keys;
}

/**
 * A load's instances before they are rendered: the count is known from the placements, and
 * anything else renders them (once).
 */
export class DeferredInstances implements ReadonlyMap<string, Instance> {
  private rendered?: SortedMap<Instance>;

  constructor(
    readonly size: number,
    private readonly make: () => SortedMap<Instance>,
  ) {}

  /** The rendered instances (rendered now if they were not yet). */
  render(): SortedMap<Instance> {
    this.rendered ??= this.make();
    return this.rendered;
  }

  get(key: string): Instance | undefined {
    return this.render().get(key);
  }

  has(key: string): boolean {
    return this.render().has(key);
  }

  forEach(callback: (value: Instance, key: string, map: ReadonlyMap<string, Instance>) => void): void {
    this.render().forEach((value, key) => {
      callback(value, key, this);
    });
  }

  entries(): MapIterator<[string, Instance]> {
    return this.render().entries();
  }

  keys(): MapIterator<string> {
    return this.render().keys();
  }

  values(): MapIterator<Instance> {
    return this.render().values();
  }

  [Symbol.iterator](): MapIterator<[string, Instance]> {
    return this.render().entries();
  }

  get [Symbol.toStringTag](): string {
    return "DeferredInstances";
  }
}

/**
 * The `${...}` references of `assignment` that have no value on the nodes it is placed on, in the
 * order rendering meets them (node by node, then resource by resource): what rendering would
 * report as missing, found without rendering.
 */
function missingVariables(assignment: AssignmentDocument, placed: readonly Node[]): MissingVariable[] {
  const refs = factsOf(assignment.value).references;
  const missing: MissingVariable[] = [];
  if (refs.length === 0) return missing;
  for (const node of placed) {
    const context = { node, assignment: assignment.value };
    for (const { path, variable } of refs)
      if (lookup(variable, context) === undefined)
        missing.push({ assignment, node: node.metadata.name, path: ["spec", ...path], variable });
  }
  return missing;
}

/** Assignments to work on again: every one, or those named. */
class Pending {
  all = true;
  readonly names = new Set<string>();

  add(all: boolean, names: Iterable<string>): void {
    if (all) this.all = true;
    else for (const name of names) this.names.add(name);
  }

  clear(): void {
    this.all = false;
    this.names.clear();
  }
}

/**
 * Every instance of a repository, kept up to date by difference: `invalidate` says which
 * assignments changed (a load calls it whether or not it renders). `check` finds the `${...}`
 * without a value in what changed, without rendering; `render` renders what changed and keeps the
 * rest. Instances whose assignment, node, sources and fleet defaults are unchanged since they were
 * rendered are returned as they were (same objects). The map `render` returns is never changed
 * afterwards.
 */
export class Rendering {
  private instances: SortedMap<Instance> = emptySorted();
  private readonly byAssignment = new Map<string, Instance[]>();
  /** Missing variables of each assignment that has any. */
  private readonly lacking = new Map<string, MissingVariable[]>();
  /** Instances of each assignment as of the last check, and of all of them. */
  private readonly counts = new Map<string, number>();
  private total = 0;
  private readonly toCheck = new Pending();
  private readonly toRender = new Pending();

  /** Marks assignments (or all of them) to check and render again. */
  invalidate(all: boolean, assignments: Iterable<string> = []): void {
    const names = [...assignments];
    this.toCheck.add(all, names);
    this.toRender.add(all, names);
  }

  /**
   * Every `${...}` without a value, by assignment name, then node, then place in the assignment.
   * `placements` gives the nodes of each assignment (see NodeIndex).
   */
  check(
    assignments: ReadonlyMap<string, AssignmentDocument>,
    placements: ReadonlyMap<string, readonly Node[]>,
  ): MissingVariable[] {
    const checkOne = (name: string, assignment: AssignmentDocument | undefined) => {
      const placed = placements.get(name) ?? [];
      const missing = assignment ? missingVariables(assignment, placed) : [];
      if (missing.length > 0) this.lacking.set(name, missing);
      else this.lacking.delete(name);
      this.total += (assignment ? placed.length : 0) - (this.counts.get(name) ?? 0);
      if (assignment) this.counts.set(name, placed.length);
      else this.counts.delete(name);
    };
    if (this.toCheck.all) {
      this.lacking.clear();
      this.counts.clear();
      this.total = 0;
      for (const [name, assignment] of assignments) checkOne(name, assignment);
    } else for (const name of this.toCheck.names) checkOne(name, assignments.get(name));
    this.toCheck.clear();
    const missing: MissingVariable[] = [];
    for (const name of [...this.lacking.keys()].sort()) missing.push(...this.lacking.get(name)!);
    return missing;
  }

  /** How many instances the assignments of the last `check` have. */
  get size(): number {
    return this.total;
  }

  /**
   * Renders what changed since the last call (call it after a `check` that found nothing
   * missing). `sources` gives the content of each `source:` file.
   */
  render(
    fleet: FleetSettings,
    assignments: ReadonlyMap<string, AssignmentDocument>,
    placements: ReadonlyMap<string, readonly Node[]>,
    sources: ReadonlyMap<string, SourceContent>,
  ): SortedMap<Instance> {
    const renderOne = (name: string, assignment: AssignmentDocument) => {
      const instances = renderAssignment(assignment, placements.get(name) ?? [], fleet, sources, []);
      this.byAssignment.set(name, instances);
      return instances;
    };
    if (this.toRender.all) {
      this.byAssignment.clear();
      const list: Instance[] = [];
      for (const [name, assignment] of assignments)
        for (const instance of renderOne(name, assignment)) list.push(instance);
      list.sort(byInstanceKey);
      this.instances = SortedMap.fromSorted(list.map((instance) => [instance.key, instance] as const));
    } else if (this.toRender.names.size > 0) {
      const changes = new Map<string, Instance | undefined>();
      for (const name of this.toRender.names) {
        for (const instance of this.byAssignment.get(name) ?? []) changes.set(instance.key, undefined);
        this.byAssignment.delete(name);
        const assignment = assignments.get(name);
        if (assignment)
          for (const instance of renderOne(name, assignment)) changes.set(instance.key, instance);
      }
      const previous = this.instances;
      this.instances = previous.with(changes);
      // A weak link, one step back: whoever compares the two holds the previous map; once nobody
      // does, a whole fleet's previous rendering is not kept alive by the current one.
      derivations.delete(previous);
      derivations.set(this.instances, { from: new WeakRef(previous), keys: new Set(changes.keys()) });
    }
    this.toRender.clear();
    return this.instances;
  }
}

/** The message an attempt carries: the instance's whole desired spec at a generation. */
export function bundleFor(instance: Instance, generation: number, attemptId: string, issuedAt: Date): Bundle {
  return {
    apiVersion: "steward.dev/v1",
    kind: "Bundle",
    attemptId,
    generation,
    hash: instance.hash,
    spec: instance.spec,
    budget: { attempts: instance.budget.attempts, withinMs: instance.budget.withinMs },
    issuedAt: issuedAt.toISOString(),
  };
}
