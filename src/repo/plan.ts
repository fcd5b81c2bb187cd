/**
 * What a change to the fleet repository will do, as data: `planChange(before, after)` compares two
 * desired states and returns, per node, the instances added, retired and given a new generation
 * with a resource-by-resource diff (a unified diff for file contents), and how each assignment's
 * rollout policy stages the new generations. Pure and JSON-serialisable: `steward plan` prints it,
 * the GitHub Action posts it on pull requests, tests assert it. Rendering is in plan-render.ts.
 */
import { createTwoFilesPatch, FILE_HEADERS_ONLY } from "diff";
import { bytesHash, canonicalJson } from "../model/canonical.js";
import type { InstanceSpec, Rollout, SecretCiphertext } from "../model/generated.js";
import type { DesiredState, Instance } from "../model/render.js";

/** A changed value at a path inside a spec or resource (`state`, `mode`, `exec[1]`...). */
export interface FieldChange {
  path: string;
  before?: unknown;
  after?: unknown;
}

/** One resource (or probe) of an instance, compared by name. */
export interface ResourceChange {
  name: string;
  kind: string;
  change: "added" | "removed" | "changed";
  /** Changed attributes other than file content. */
  fields: FieldChange[];
  /** Unified diff of the content (files, systemd units); for binary content a one-line note. */
  diff?: string;
  /**
   * Secrets the resource uses whose ciphertext changed (or that it uses anew): never their
   * content, which only the host can read — the hashes of the ciphertext as it is in Git.
   */
  secrets?: SecretChange[];
}

/** A secret file whose ciphertext differs: `sha256:` of its bytes before and after. */
export interface SecretChange {
  path: string;
  before?: string;
  after?: string;
}

/** What happens to one instance. */
export interface InstancePlan {
  key: string;
  assignment: string;
  node: string;
  /** `changed`: a new generation. `retired`: no longer managed (nothing is deleted on the node). */
  change: "added" | "retired" | "changed";
  beforeHash?: string;
  afterHash?: string;
  /** Changed spec fields other than resources and probes (state, version, dependsOn, roots). */
  fields: FieldChange[];
  resources: ResourceChange[];
  probes: ResourceChange[];
}

/** The instances of one node that change. */
export interface NodePlan {
  node: string;
  instances: InstancePlan[];
}

/** One step of a rollout: canary nodes (then a soak), or a batch of at most maxInFlight nodes. */
export type RolloutStep =
  | { kind: "canary"; nodes: string[]; soak?: string }
  | { kind: "batch"; nodes: string[] };

/** How an assignment's new generations are staged across its nodes. */
export interface RolloutPlan {
  assignment: string;
  /** `observe`: reports are compared, nothing is dispatched. */
  stage: "observe" | "apply";
  /** Nodes whose instance is added or gets a new generation, by name. */
  nodes: string[];
  /** Empty when `stage` is `observe`. */
  steps: RolloutStep[];
  /** Failed nodes tolerated before the rollout pauses. */
  maxFailures: number;
}

/** Everything a change does, JSON-serialisable. */
export interface Plan {
  summary: { added: number; retired: number; changed: number; unchanged: number; nodes: number };
  /** Nodes with at least one change, by name; instances by key. */
  nodes: NodePlan[];
  /** Assignments with instances to roll out, by name. */
  rollout: RolloutPlan[];
}

const CONTENT_KINDS = new Set(["file", "systemd-unit"]);

/** Compares two desired states (`before` undefined: an empty repository). */
export function planChange(before: DesiredState | undefined, after: DesiredState): Plan {
  const old = before?.instances ?? new Map<string, Instance>();
  const plans: InstancePlan[] = [];
  let unchanged = 0;
  for (const instance of after.instances.values()) {
    const previous = old.get(instance.key);
    if (previous?.hash === instance.hash) {
      unchanged++;
      continue;
    }
    plans.push(instancePlan(instance, previous, previous ? "changed" : "added"));
  }
  for (const previous of old.values())
    if (!after.instances.has(previous.key)) plans.push(instancePlan(undefined, previous, "retired"));

  const byNode = new Map<string, InstancePlan[]>();
  for (const plan of plans) {
    const list = byNode.get(plan.node);
    if (list) list.push(plan);
    else byNode.set(plan.node, [plan]);
  }
  const nodes = [...byNode.entries()]
    .sort(([a], [b]) => compare(a, b))
    .map(([node, instances]) => ({ node, instances: instances.sort((a, b) => compare(a.key, b.key)) }));

  const placed = new Map<string, { rollout: Rollout; count: number }>();
  for (const instance of after.instances.values()) {
    const entry = placed.get(instance.assignment);
    if (entry) entry.count++;
    else placed.set(instance.assignment, { rollout: instance.rollout, count: 1 });
  }
  const affected = new Map<string, string[]>();
  for (const plan of plans) {
    if (plan.change === "retired") continue;
    const list = affected.get(plan.assignment);
    if (list) list.push(plan.node);
    else affected.set(plan.assignment, [plan.node]);
  }
  const rollout = [...affected.entries()]
    .sort(([a], [b]) => compare(a, b))
    .map(([assignment, list]) => {
      const { rollout: policy, count } = placed.get(assignment)!;
      return stageRollout(assignment, policy, list.sort(compare), count);
    });

  const count = (change: InstancePlan["change"]) => plans.filter((p) => p.change === change).length;
  return {
    summary: {
      added: count("added"),
      retired: count("retired"),
      changed: count("changed"),
      unchanged,
      nodes: nodes.length,
    },
    nodes,
    rollout,
  };
}

/**
 * How a rollout policy stages new generations on `affected` nodes (sorted) of an assignment placed
 * on `placedCount` nodes: canary nodes first (named ones that are affected, or the first `count` by
 * name), then batches of `maxInFlight` (a count, or a percentage of the placed nodes rounded up);
 * nothing for `observe`.
 */
export function stageRollout(
  assignment: string,
  rollout: Rollout,
  affected: readonly string[],
  placedCount: number,
): RolloutPlan {
  const stage = rollout.stage ?? "apply";
  const plan: RolloutPlan = {
    assignment,
    stage,
    nodes: [...affected],
    steps: [],
    maxFailures: rollout.maxFailures ?? 0,
  };
  if (stage === "observe" || affected.length === 0) return plan;
  let rest = [...affected];
  const canary = rollout.canary;
  if (canary) {
    const chosen = canary.nodes
      ? canary.nodes.filter((n) => rest.includes(n))
      : rest.slice(0, Math.min(canary.count ?? 0, rest.length));
    if (chosen.length > 0) {
      const step: RolloutStep = { kind: "canary", nodes: chosen };
      if (canary.soak) step.soak = canary.soak;
      plan.steps.push(step);
      rest = rest.filter((n) => !chosen.includes(n));
    }
  }
  const size = batchSize(rollout.maxInFlight, placedCount, rest.length);
  for (let i = 0; i < rest.length; i += size)
    plan.steps.push({ kind: "batch", nodes: rest.slice(i, i + size) });
  return plan;
}

function batchSize(maxInFlight: number | string | undefined, placedCount: number, remaining: number): number {
  if (typeof maxInFlight === "number") return Math.max(1, maxInFlight);
  if (typeof maxInFlight === "string" && maxInFlight.endsWith("%"))
    return Math.max(1, Math.ceil((Number.parseInt(maxInFlight, 10) / 100) * placedCount));
  return Math.max(1, remaining);
}

function instancePlan(
  after: Instance | undefined,
  before: Instance | undefined,
  change: InstancePlan["change"],
): InstancePlan {
  const subject = (after ?? before)!;
  const plan: InstancePlan = {
    key: subject.key,
    assignment: subject.assignment,
    node: subject.node,
    change,
    fields: [],
    resources: [],
    probes: [],
  };
  if (before) plan.beforeHash = before.hash;
  if (after) plan.afterHash = after.hash;
  if (change === "retired") {
    // Retiring stops management; listing what is no longer managed is enough.
    plan.resources = before!.spec.resources.map((r) => ({
      name: r.name ?? r.kind,
      kind: r.kind,
      change: "removed",
      fields: [],
    }));
    return plan;
  }
  const a = before?.spec;
  const b = after!.spec;
  for (const field of ["state", "version", "dependsOn", "roots"] as const) {
    const x = a?.[field];
    const y = b[field];
    if (canonicalJson(x) !== canonicalJson(y)) plan.fields.push(fieldChange(field, x, y));
  }
  plan.resources = namedChanges(a?.resources ?? [], b.resources, subject.node, {
    before: a?.secrets ?? {},
    after: b.secrets ?? {},
  });
  plan.probes = namedChanges(a?.probes ?? [], b.probes, subject.node);
  return plan;
}

/** The ciphertext of each secret of two specs, to compare by hash. */
interface SecretSides {
  before: NonNullable<InstanceSpec["secrets"]>;
  after: NonNullable<InstanceSpec["secrets"]>;
}

/** `sha256:` of a secret's bytes as the repository holds them. */
function ciphertextHash(secret: SecretCiphertext | undefined): string | undefined {
  if (!secret) return undefined;
  return bytesHash(Buffer.from(secret.content, secret.encoding === "base64" ? "base64" : "utf8"));
}

/** The secret files a resource uses: a secret source, and the files of `{secret, key}` values. */
function secretPaths(resource: Record<string, unknown>): string[] {
  const paths = new Set<string>();
  if (resource.secret === true && typeof resource.source === "string") paths.add(resource.source);
  const env = resource.env;
  if (env && typeof env === "object")
    for (const value of Object.values(env as Record<string, unknown>))
      if (value && typeof value === "object" && typeof (value as { secret?: unknown }).secret === "string")
        paths.add((value as { secret: string }).secret);
  return [...paths].sort(compare);
}

/** The secrets of `resource` whose ciphertext is not what `previous` used. */
function secretChanges(
  previous: Record<string, unknown> | undefined,
  resource: Record<string, unknown>,
  sides: SecretSides,
): SecretChange[] {
  const used = previous ? new Set(secretPaths(previous)) : new Set<string>();
  const out: SecretChange[] = [];
  for (const path of secretPaths(resource)) {
    const before = used.has(path) ? ciphertextHash(sides.before[path]) : undefined;
    const after = ciphertextHash(sides.after[path]);
    if (before === after) continue;
    const change: SecretChange = { path };
    if (before) change.before = before;
    if (after) change.after = after;
    out.push(change);
  }
  return out;
}

type Named = InstanceSpec["resources"][number] | InstanceSpec["probes"][number];

function namedChanges(
  before: readonly Named[],
  after: readonly Named[],
  node: string,
  secrets?: SecretSides,
): ResourceChange[] {
  const out: ResourceChange[] = [];
  const old = new Map(before.map((r) => [r.name ?? r.kind, r]));
  const seen = new Set<string>();
  for (const item of after) {
    const name = item.name ?? item.kind;
    seen.add(name);
    const previous = old.get(name);
    const secretChanged = secrets
      ? secretChanges(
          previous as Record<string, unknown> | undefined,
          item as unknown as Record<string, unknown>,
          secrets,
        )
      : [];
    if (previous && canonicalJson(previous) === canonicalJson(item) && secretChanged.length === 0) continue;
    const change: ResourceChange = {
      name,
      kind: item.kind,
      change: previous ? "changed" : "added",
      fields: [],
    };
    const x = (previous ?? {}) as Record<string, unknown>;
    const y = item as unknown as Record<string, unknown>;
    const hasContent = CONTENT_KINDS.has(item.kind);
    for (const key of [...new Set([...Object.keys(x), ...Object.keys(y)])].sort(compare)) {
      if (key === "name" || (hasContent && (key === "content" || key === "encoding"))) continue;
      if (previous && canonicalJson(x[key]) !== canonicalJson(y[key]))
        change.fields.push(fieldChange(key, x[key], y[key]));
    }
    // A secret's content is never shown: it is not in the spec, only its ciphertext is.
    if (hasContent && y.secret !== true) {
      const diff = contentDiff(previous ? x : undefined, y, node);
      if (diff) change.diff = diff;
    }
    if (secretChanged.length > 0) change.secrets = secretChanged;
    out.push(change);
  }
  for (const [name, item] of old)
    if (!seen.has(name)) out.push({ name, kind: item.kind, change: "removed", fields: [] });
  return out;
}

function fieldChange(path: string, before: unknown, after: unknown): FieldChange {
  const change: FieldChange = { path };
  if (before !== undefined) change.before = before;
  if (after !== undefined) change.after = after;
  return change;
}

/** A unified diff between two resources' contents, or a note for binary content; undefined if equal. */
function contentDiff(
  before: Record<string, unknown> | undefined,
  after: Record<string, unknown>,
  node: string,
): string | undefined {
  const text = (r: Record<string, unknown> | undefined) => (typeof r?.content === "string" ? r.content : "");
  const binary = (r: Record<string, unknown> | undefined) => r?.encoding === "base64";
  if (before && text(before) === text(after) && binary(before) === binary(after)) return undefined;
  const path = String(after.path ?? after.name ?? "content");
  if (binary(before) || binary(after)) {
    const size = (r: Record<string, unknown> | undefined) =>
      r === undefined ? 0 : binary(r) ? Buffer.from(text(r), "base64").length : Buffer.byteLength(text(r));
    return `binary content of ${path} on ${node}: ${before ? `${size(before)} bytes` : "new"} → ${size(after)} bytes`;
  }
  return createTwoFilesPatch(
    before ? `a${path}` : "/dev/null",
    `b${path}`,
    text(before),
    text(after),
    undefined,
    undefined,
    {
      context: 3,
      headerOptions: FILE_HEADERS_ONLY,
    },
  );
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
