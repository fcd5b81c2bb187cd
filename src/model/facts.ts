/**
 * What the checks need from one assignment document alone: findings about the document itself
 * (duplicate resources, unknown dependencies, cycles, paths that are not canonical) and what the
 * cross-document checks look up (paths to confine, things owned, sources, template references).
 * Worked out once per parsed value: a file unchanged between syncs keeps its value, and its facts.
 */
import { posix } from "node:path";
import type { Finding } from "./findings.js";
import type { Assignment, Resource, SecretValue } from "./generated.js";
import { hasDotSegments } from "./paths.js";
import { didYouMean } from "./suggest.js";
import { type Reference, references } from "./template.js";

/** The name a resource is known by: its `name`, or its path for files, directories and symlinks. */
export function resourceName(resource: Resource): string {
  if (resource.name) return resource.name;
  if ("path" in resource) return resource.path;
  return resource.kind;
}

/**
 * A path a resource touches that must be confined to the node's roots: the resource, its field, the
 * path, and for a relative symlink target the link it is relative to.
 */
export interface ConfinedPath {
  index: number;
  field: readonly (string | number)[];
  path: string;
  relativeTo: string | undefined;
}

// One array per field for every confined path (facts are kept for every assignment of a fleet).
const PATH = ["path"] as const;
const TARGET = ["target"] as const;
const CREATES = ["creates"] as const;
const CWD = ["cwd"] as const;

/** Every path-like field of resource `index` that must be confined to the node's roots. */
function confinedPaths(resource: Resource, index: number, out: ConfinedPath[]): void {
  if ("path" in resource && resource.path)
    out.push({ index, field: PATH, path: resource.path, relativeTo: undefined });
  if (resource.kind === "symlink")
    out.push({
      index,
      field: TARGET,
      path: resource.target,
      relativeTo: resource.target.startsWith("/") ? undefined : resource.path,
    });
  if (resource.kind === "command" && resource.creates)
    out.push({ index, field: CREATES, path: resource.creates, relativeTo: undefined });
  if ((resource.kind === "command" || resource.kind === "service") && resource.cwd)
    out.push({ index, field: CWD, path: resource.cwd, relativeTo: undefined });
  if (resource.kind === "container")
    for (const [i, volume] of (resource.volumes ?? []).entries()) {
      const host = volume.split(":")[0] ?? "";
      if (host.startsWith("/")) out.push({ index, field: ["volumes", i], path: host, relativeTo: undefined });
    }
}

/**
 * What resource `index` owns on a host, for conflicts between assignments: a path, or a service,
 * container, package or systemd unit by name. `name` may hold `${node...}` references.
 */
export interface OwnedThing {
  index: number;
  /** `path`, or the resource kind. */
  category: string;
  name: string;
}

function ownedThing(resource: Resource, index: number): OwnedThing | undefined {
  switch (resource.kind) {
    case "file":
    case "directory":
    case "symlink": {
      // Most paths are canonical already: the string of the document is kept as it is.
      const path = resource.path;
      const canonical =
        !hasDotSegments(path) && !path.includes("//") && (path === "/" || !path.endsWith("/"));
      return { index, category: "path", name: canonical ? path : posix.normalize(path) };
    }
    case "service":
    case "container":
    case "package":
    case "systemd-unit":
      return { index, category: resource.kind, name: resource.name };
    default:
      return undefined;
  }
}

/** A cycle of `edges` (names to the names they depend on) as the names along it, first repeated at the end. */
export function findCycle(edges: ReadonlyMap<string, readonly string[]>): string[] | undefined {
  const state = new Map<string, 1 | 2>();
  const stack: string[] = [];
  const visit = (name: string): string[] | undefined => {
    state.set(name, 1);
    stack.push(name);
    for (const next of edges.get(name) ?? []) {
      if (!edges.has(next)) continue;
      const seen = state.get(next);
      if (seen === 1) return [...stack.slice(stack.indexOf(next)), next];
      if (seen === undefined) {
        const cycle = visit(next);
        if (cycle) return cycle;
      }
    }
    stack.pop();
    state.set(name, 2);
    return undefined;
  };
  for (const name of edges.keys()) {
    if (state.has(name)) continue;
    const cycle = visit(name);
    if (cycle) return cycle;
  }
  return undefined;
}

/**
 * What the checks of one assignment need from its own document alone, worked out once per parsed
 * document: its value keeps its identity while its file is unchanged, so a sync of a large fleet
 * re-checks only the documents that changed (the checks across documents still run, as lookups).
 */
export interface AssignmentFacts {
  /** Findings that depend on this document alone. */
  findings: readonly Finding[];
  /** Canonical paths that must be inside the roots of each node it is placed on. */
  confined: readonly ConfinedPath[];
  /** What each resource owns on a host (before per-node substitution). */
  owned: readonly OwnedThing[];
  /**
   * Well-formed repository paths the resources read, which must exist in the repository: `source:`
   * files and the files of `{secret, key}` values, at `field` of resource `index`. `secret` says the
   * file must be encrypted (and for whom is checked against the nodes); a plain `source:` must not
   * be. `key` is the entry a value takes from a secret map.
   */
  sources: readonly SourceUse[];
  /** Resources already reported as duplicates: not reported again as a conflict with themselves. */
  duplicates: ReadonlySet<number> | undefined;
  /** Every `${...}` of its resources and probes, in the order substitution meets them. */
  references: readonly Reference[];
  /**
   * Resources and probes whose references land in a field the schema constrains (a name, a
   * dependency, a port, the start of a URL): checked against the schema again once substituted
   * for each node, as the agent checks its bundle. Paths are checked with confinement.
   */
  substituted: readonly { part: "resources" | "probes"; index: number }[];
}

/** A repository file a resource reads (see AssignmentFacts.sources). */
export interface SourceUse {
  index: number;
  source: string;
  field: readonly (string | number)[];
  secret: boolean;
  key?: string;
}

const SOURCE = ["source"] as const;

/** The `{secret, key}` values of a resource's `env`, by variable name. */
export function secretValues(resource: Resource): [string, SecretValue][] {
  if (resource.kind !== "command" && resource.kind !== "service" && resource.kind !== "container") return [];
  const out: [string, SecretValue][] = [];
  for (const [name, value] of Object.entries(resource.env ?? {}))
    if (typeof value === "object") out.push([name, value]);
  return out;
}

/** Whether `path` is a repository path steward reads: relative to the root, without `.` or `..`. */
function repositoryPath(path: string): boolean {
  return !(path.startsWith("/") || hasDotSegments(path) || path.startsWith("./"));
}

/** Fields of resources whose `${...}` may make a name the schema refuses. */
const NAMING_FIELDS = new Set<string | number | undefined>(["name", "dependsOn", "restartOn"]);

const assignmentFacts = new WeakMap<Assignment, AssignmentFacts>();

/**
 * The list as kept in facts: arrays grown by `push` reserve room for 17 entries, and facts are kept
 * for every assignment of a fleet.
 */
function kept<T>(list: T[]): readonly T[] {
  return list.length === 0 ? [] : list.slice();
}

/** The facts of a schema-valid assignment (worked out once per parsed value). */
export function factsOf(assignment: Assignment): AssignmentFacts {
  const cached = assignmentFacts.get(assignment);
  if (cached) return cached;
  const spec = assignment.spec;
  const name = assignment.metadata.name;
  const findings: Finding[] = [];
  const confined: ConfinedPath[] = [];
  const owned: OwnedThing[] = [];
  const sources: SourceUse[] = [];
  const refs: Reference[] = [];
  let duplicates: Set<number> | undefined;
  const names = new Map<string, number>();
  const resources = spec.resources;
  const touched: ConfinedPath[] = [];
  for (let i = 0; i < resources.length; i++) {
    const resource = resources[i]!;
    const resName = resourceName(resource);
    const first = names.get(resName);
    if (first !== undefined) {
      duplicates ??= new Set();
      duplicates.add(i);
      findings.push({
        severity: "error",
        code: "resource/duplicate",
        path: ["spec", "resources", i, resource.name ? "name" : "path"],
        message: `resource "${resName}" is declared twice in assignment "${name}" (first at spec.resources[${first}])`,
        fix: "remove the duplicate or give each resource its own name",
      });
    } else names.set(resName, i);
    touched.length = 0;
    confinedPaths(resource, i, touched);
    for (const field of touched) {
      if (field.relativeTo === undefined && (hasDotSegments(field.path) || field.path.includes("//")))
        findings.push({
          severity: "error",
          code: "path/dot-segments",
          path: ["spec", "resources", i, ...field.field],
          message: `${JSON.stringify(field.path)} is not a canonical path (it has \`.\`, \`..\` or \`//\`)`,
          fix: "write the absolute path without `.` or `..` segments",
        });
      else confined.push(field);
    }
    if ((resource.kind === "file" || resource.kind === "systemd-unit") && resource.source !== undefined) {
      const source = resource.source;
      if (!repositoryPath(source))
        findings.push({
          severity: "error",
          code: "source/path",
          path: ["spec", "resources", i, "source"],
          message: `source ${JSON.stringify(source)} must be a path relative to the repository root, without \`.\` or \`..\``,
          fix: 'write it like "files/nginx.conf"',
        });
      else sources.push({ index: i, source, field: SOURCE, secret: resource.secret === true });
    } else if ((resource.kind === "file" || resource.kind === "systemd-unit") && resource.secret === true)
      findings.push({
        severity: "error",
        code: "secret/content",
        path: ["spec", "resources", i, "secret"],
        message: `secret: true takes the content from an encrypted \`source\` file, but resource "${resName}" has ${resource.kind === "file" && resource.content === undefined ? "no source" : "its content in the clear, in Git"}`,
        fix: `encrypt the content (steward secret encrypt --assignment ${name} FILE --out FILE.age) and give it as source: FILE.age`,
      });
    for (const [variable, value] of secretValues(resource)) {
      const field = ["env", variable, "secret"];
      if (!repositoryPath(value.secret))
        findings.push({
          severity: "error",
          code: "source/path",
          path: ["spec", "resources", i, ...field],
          message: `secret ${JSON.stringify(value.secret)} must be a path relative to the repository root, without \`.\` or \`..\``,
          fix: 'write it like "secrets/db.yaml.age"',
        });
      else sources.push({ index: i, source: value.secret, field, secret: true, key: value.key });
    }
    const thing = ownedThing(resource, i);
    if (thing) owned.push(thing);
  }
  /** Findings for the names in `field` of resource `i` that name no resource of this assignment. */
  const unknownNames = (
    i: number,
    field: string,
    list: readonly string[] | undefined,
    code: string,
    fix: string,
  ) => {
    for (const [j, dependency] of (list ?? []).entries())
      if (!names.has(dependency))
        findings.push({
          severity: "error",
          code,
          path: ["spec", "resources", i, field, j],
          message: `resource "${dependency}" does not exist in assignment "${name}"${didYouMean(dependency, names.keys())}`,
          fix,
        });
  };
  for (const [i, resource] of spec.resources.entries()) {
    unknownNames(
      i,
      "dependsOn",
      resource.dependsOn,
      "depends-on/unknown",
      "name a resource of the same assignment (its name, or its path for files)",
    );
    if (resource.kind === "service")
      unknownNames(
        i,
        "restartOn",
        resource.restartOn,
        "restart-on/unknown",
        "name a resource of the same assignment",
      );
  }
  const probeNames = new Map<string, number>();
  for (const [i, probe] of (spec.probes ?? []).entries()) {
    const first = probeNames.get(probe.name);
    if (first === undefined) probeNames.set(probe.name, i);
    else
      findings.push({
        severity: "error",
        code: "probe/duplicate",
        path: ["spec", "probes", i, "name"],
        message: `probe "${probe.name}" is declared twice in assignment "${name}" (first at spec.probes[${first}])`,
        fix: "give each probe its own name: reports and conditions name probes",
      });
  }
  // Only resources with dependencies can be on a cycle; most have none.
  let cycle: string[] | undefined;
  if (resources.some((r) => r.dependsOn?.length)) {
    const edges = new Map<string, readonly string[]>();
    for (const resource of resources) edges.set(resourceName(resource), resource.dependsOn ?? []);
    cycle = findCycle(edges);
  }
  if (cycle) {
    const index = names.get(cycle[0]!) ?? 0;
    findings.push({
      severity: "error",
      code: "depends-on/cycle",
      path: ["spec", "resources", index, "dependsOn"],
      message: `resources depend on each other in a cycle: ${cycle.join(" → ")}`,
      fix: "remove one dependsOn so the order is well defined",
    });
  }
  for (const [i, resource] of spec.resources.entries())
    for (const reference of references(resource, ["resources", i])) refs.push(reference);
  for (const [i, probe] of (spec.probes ?? []).entries())
    for (const reference of references(probe, ["probes", i])) refs.push(reference);
  const substituted: { part: "resources" | "probes"; index: number }[] = [];
  for (const { path } of refs) {
    const [part, index, field] = path as ["resources" | "probes", number, string];
    const constrained =
      part === "resources"
        ? NAMING_FIELDS.has(field)
        : field === "port" ||
          (field === "url" && !/^https?:\/\//.test((spec.probes![index] as { url: string }).url));
    const last = substituted[substituted.length - 1];
    if (constrained && (last?.part !== part || last.index !== index)) substituted.push({ part, index });
  }
  const facts: AssignmentFacts = {
    findings: kept(findings),
    confined: kept(confined),
    owned: kept(owned),
    sources: kept(sources),
    duplicates,
    references: kept(refs),
    substituted: kept(substituted),
  };
  assignmentFacts.set(assignment, facts);
  return facts;
}
