/**
 * Rendering: an assignment placed on a node becomes an instance with a self-contained spec (files
 * from `source:` inlined, every resource named) and a content hash. The hash covers what the agent
 * applies, not where the YAML lives, so renaming a file changes nothing while any change of content
 * (including back to older content) changes the hash.
 */
import { contentHash } from "./canonical.js";
import type { AssignmentDocument, NodeDocument } from "./documents.js";
import { type EffectiveBudget, effectiveBudget, type FleetSettings } from "./fleet.js";
import type { Assignment, Bundle, InstanceSpec, Node, Resource, Rollout } from "./generated.js";
import { PerNodeMemo } from "./memo.js";
import { substitute } from "./template.js";

/** One assignment on one node: the unit of convergence. */
export interface Instance {
  /** `assignment@node`. */
  key: string;
  assignment: string;
  node: string;
  spec: InstanceSpec;
  /** `sha256:...` of the canonical JSON of `spec`. */
  hash: string;
  rollout: Rollout;
  budget: EffectiveBudget;
  /** Where the assignment is declared. */
  file: string;
}

/** What the repository says should be true: validated documents and every rendered instance. */
export interface DesiredState {
  fleet: FleetSettings;
  nodes: Map<string, NodeDocument>;
  assignments: Map<string, AssignmentDocument>;
  /** By instance key, sorted by key. */
  instances: Map<string, Instance>;
}

export function instanceKey(assignment: string, node: string): string {
  return `${assignment}@${node}`;
}

/** A file's bytes from the repo, with an id that is equal for equal bytes (a git blob id). */
export interface SourceContent {
  id: string;
  bytes: Uint8Array;
}

/** The name a resource is known by: its `name`, or its path for files, directories and symlinks. */
export function resourceName(resource: Resource): string {
  if (resource.name) return resource.name;
  if ("path" in resource) return resource.path;
  return resource.kind;
}

/** Whether the assignment selects this node, by name or by labels. */
export function selects(assignment: Assignment, node: Node): boolean {
  if (assignment.spec.nodes?.includes(node.metadata.name)) return true;
  const match = assignment.spec.selector?.matchLabels;
  if (!match) return false;
  const labels = node.metadata.labels ?? {};
  return Object.entries(match).every(([key, value]) => labels[key] === value);
}

function renderResource(resource: Resource, sources: ReadonlyMap<string, SourceContent>): Resource {
  const rendered = { ...resource, name: resourceName(resource) } as Resource & { source?: string };
  if ((rendered.kind === "file" || rendered.kind === "systemd-unit") && rendered.source !== undefined) {
    const content = sources.get(rendered.source);
    const { source: _source, ...rest } = rendered;
    const bytes = content?.bytes ?? new Uint8Array();
    const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const utf8 = text.toString("utf8");
    if (Buffer.from(utf8, "utf8").equals(text)) return { ...rest, content: utf8 } as Resource;
    return { ...rest, content: text.toString("base64"), encoding: "base64" } as Resource;
  }
  return rendered;
}

/** What a rendered instance depends on besides the assignment and node values it is keyed by. */
interface RenderMemo {
  sourceIds: string;
  attempts: number;
  withinMs: number;
  mode: string;
  file: string;
  instance: Instance;
}

/** Rendered instances by assignment value, then node value: both keep their identity while their file is unchanged. */
const renderCache = new PerNodeMemo<Assignment, RenderMemo>();

/**
 * Renders one assignment for one node. Memoised on the identity of the assignment and node values
 * (unchanged files keep their parsed values between syncs), the content ids of `source:` files and
 * the fleet settings, so a sync re-renders only what changed.
 */
export function renderInstance(
  assignment: AssignmentDocument,
  node: Node,
  fleet: FleetSettings,
  sources: ReadonlyMap<string, SourceContent>,
  missing: MissingVariable[] = [],
): Instance {
  const spec = assignment.value.spec;
  let sourceIds = "";
  for (const r of spec.resources)
    if ("source" in r && r.source) sourceIds += `${sources.get(r.source)?.id ?? "missing"},`;
  const cached = renderCache.get(assignment.value, node);
  if (
    cached &&
    cached.sourceIds === sourceIds &&
    cached.attempts === fleet.budget.attempts &&
    cached.withinMs === fleet.budget.withinMs &&
    cached.mode === fleet.mode &&
    cached.file === assignment.file
  )
    return cached.instance;
  const name = assignment.value.metadata.name;
  const context = { node, assignment: assignment.value };
  const before = missing.length;
  const onMissing = (path: (string | number)[], variable: string) =>
    missing.push({ assignment, node: node.metadata.name, path: ["spec", ...path], variable });
  const instanceSpec: InstanceSpec = {
    assignment: name,
    node: node.metadata.name,
    state: spec.state ?? "running",
    dependsOn: spec.dependsOn ?? [],
    roots: node.spec.roots,
    resources: substitute(spec.resources, context, onMissing, ["resources"]).map((r) =>
      renderResource(r, sources),
    ),
    probes: substitute(spec.probes ?? [], context, onMissing, ["probes"]),
  };
  if (spec.version !== undefined) instanceSpec.version = spec.version;
  const instance: Instance = {
    key: instanceKey(name, node.metadata.name),
    assignment: name,
    node: node.metadata.name,
    spec: instanceSpec,
    hash: contentHash(instanceSpec),
    rollout: { stage: fleet.mode, ...spec.rollout },
    budget: effectiveBudget(spec.budget, fleet.budget),
    file: assignment.file,
  };
  if (missing.length > before) return instance;
  renderCache.set(assignment.value, node, {
    sourceIds,
    attempts: fleet.budget.attempts,
    withinMs: fleet.budget.withinMs,
    mode: fleet.mode,
    file: assignment.file,
    instance,
  });
  return instance;
}

/** A `${node...}` reference with no value on the node an assignment was rendered for. */
export interface MissingVariable {
  assignment: AssignmentDocument;
  node: string;
  path: (string | number)[];
  variable: string;
}

/** The nodes an assignment lands on, sorted by name. */
export function placement(assignment: Assignment, nodes: ReadonlyMap<string, NodeDocument>): Node[] {
  const placed: Node[] = [];
  if (assignment.spec.selector?.matchLabels) {
    for (const node of nodes.values()) if (selects(assignment, node.value)) placed.push(node.value);
  } else {
    // Placed by name only: look the names up instead of scanning every node (a fleet has thousands
    // of assignments, and this runs for each of them on every sync).
    const names = assignment.spec.nodes ?? [];
    const unique = names.length > 16 ? new Set(names) : names;
    for (const name of unique) {
      const node = nodes.get(name)?.value;
      if (node && (unique !== names || !placed.includes(node))) placed.push(node);
    }
  }
  if (placed.length > 1) placed.sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
  return placed;
}

/** Every instance of the repository, keyed and sorted by instance key. */
export function renderInstances(
  fleet: FleetSettings,
  nodes: ReadonlyMap<string, NodeDocument>,
  assignments: ReadonlyMap<string, AssignmentDocument>,
  sources: ReadonlyMap<string, SourceContent>,
  missing: MissingVariable[] = [],
): Map<string, Instance> {
  const list: Instance[] = [];
  for (const assignment of assignments.values()) {
    for (const node of placement(assignment.value, nodes))
      list.push(renderInstance(assignment, node, fleet, sources, missing));
  }
  list.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const instances = new Map<string, Instance>();
  for (const instance of list) instances.set(instance.key, instance);
  return instances;
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
