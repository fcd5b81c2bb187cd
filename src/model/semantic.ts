/**
 * Checks that need more than one document, or more than the schema can say: names that must exist,
 * cycles, conflicts between assignments, and confinement of paths to a node's roots.
 */
import { posix } from "node:path";
import type { AnyDocument, AssignmentDocument, NodeDocument, SourcedDocument } from "./documents.js";
import type { Finding } from "./findings.js";
import type { Assignment, Node, Resource } from "./generated.js";
import { containingRoot, hasDotSegments } from "./paths.js";
import { placeAll } from "./placement.js";
import { resourceName } from "./render.js";
import { didYouMean } from "./suggest.js";
import { substituteString } from "./template.js";

export interface LocatedFinding {
  document: SourcedDocument<unknown>;
  finding: Finding;
}

export interface SemanticInput {
  documents: readonly AnyDocument[];
  nodes: ReadonlyMap<string, NodeDocument>;
  assignments: ReadonlyMap<string, AssignmentDocument>;
  /** Names of documents that exist but failed schema validation (to avoid cascading errors). */
  invalidNames: ReadonlySet<string>;
  /** Whether a repo-relative path exists (for `source:`). */
  exists: (path: string) => boolean;
  /** Placement of each valid assignment (see `placeAll`); computed here when absent. */
  placements?: ReadonlyMap<string, readonly Node[]>;
}

type Push = (document: SourcedDocument<unknown>, finding: Finding) => void;

/** `node "a"`, or `nodes "a", "b" and 3 more`. */
function nodeList(nodes: readonly Node[]): string {
  const names = nodes.slice(0, 3).map((node) => `"${node.metadata.name}"`);
  const more = nodes.length > 3 ? ` and ${nodes.length - 3} more` : "";
  return `${nodes.length === 1 ? "node" : "nodes"} ${names.join(", ")}${more}`;
}

/** Missing template values are reported once, by rendering; the checks here only need the text. */
const ignoreMissing = () => {};

/** A path a resource touches: its field, the path, and for a relative symlink target the link it is relative to. */
interface ConfinedPath {
  field: (string | number)[];
  path: string;
  relativeTo?: string;
}

/** Every path-like field of a resource that must be confined to the node's roots. */
function confinedPaths(resource: Resource): ConfinedPath[] {
  const out: ConfinedPath[] = [];
  if ("path" in resource && resource.path) out.push({ field: ["path"], path: resource.path });
  if (resource.kind === "symlink")
    out.push(
      resource.target.startsWith("/")
        ? { field: ["target"], path: resource.target }
        : { field: ["target"], path: resource.target, relativeTo: resource.path },
    );
  if (resource.kind === "command" && resource.creates)
    out.push({ field: ["creates"], path: resource.creates });
  if ((resource.kind === "command" || resource.kind === "service") && resource.cwd)
    out.push({ field: ["cwd"], path: resource.cwd });
  if (resource.kind === "container")
    for (const [i, volume] of (resource.volumes ?? []).entries()) {
      const host = volume.split(":")[0] ?? "";
      if (host.startsWith("/")) out.push({ field: ["volumes", i], path: host });
    }
  return out;
}

/** What a resource owns on a host, for conflicts between assignments: `path:/etc/x`, `service:web`... */
function ownedThing(resource: Resource): string | undefined {
  switch (resource.kind) {
    case "file":
    case "directory":
    case "symlink":
      return `path:${posix.normalize(resource.path)}`;
    case "service":
    case "container":
    case "package":
    case "systemd-unit":
      return `${resource.kind}:${resource.name}`;
    default:
      return undefined;
  }
}

function findCycle(edges: ReadonlyMap<string, readonly string[]>): string[] | undefined {
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

function checkDuplicateNames(input: SemanticInput, push: Push): void {
  // Per kind, so no `kind/name` key is built for each of thousands of documents.
  const seen = new Map<string, Map<string, AnyDocument>>();
  let fleet: AnyDocument | undefined;
  for (const doc of input.documents) {
    if (doc.kind === "Fleet") {
      if (doc.file !== "steward.yaml")
        push(doc, {
          severity: "error",
          code: "fleet/location",
          path: ["kind"],
          message: "a Fleet document must be in steward.yaml at the root of the repository",
          fix: "move this document to steward.yaml",
        });
      else if (fleet)
        push(doc, {
          severity: "error",
          code: "fleet/duplicate",
          path: ["kind"],
          message: `a second Fleet document (the first is ${fleet.file}, document ${fleet.index + 1})`,
          fix: "keep one Fleet document and merge the settings into it",
        });
      else fleet = doc;
      continue;
    }
    if (!doc.kind || !doc.name) continue;
    let ofKind = seen.get(doc.kind);
    if (!ofKind) {
      ofKind = new Map();
      seen.set(doc.kind, ofKind);
    }
    const first = ofKind.get(doc.name);
    if (first)
      push(doc, {
        severity: "error",
        code: "name/duplicate",
        path: ["metadata", "name"],
        message: `${doc.kind} "${doc.name}" is declared twice (also in ${first.file})`,
        fix: "rename one of them or delete the duplicate",
      });
    else ofKind.set(doc.name, doc);
  }
}

function checkNodes(input: SemanticInput, push: Push): void {
  for (const doc of input.nodes.values()) {
    const spec = doc.value.spec;
    if (spec.transport === "ssh" && !spec.ssh)
      push(doc, {
        severity: "error",
        code: "node/ssh-missing",
        path: ["spec", "transport"],
        message: `node "${doc.value.metadata.name}" uses transport ssh but has no spec.ssh`,
        fix: "add spec.ssh with host, user and the pinned hostKey",
      });
    if (spec.transport === "ssh" && spec.ssh && !spec.ssh.hostKey)
      push(doc, {
        severity: "warning",
        code: "node/host-key",
        path: ["spec", "ssh"],
        message: `node "${doc.value.metadata.name}" has no pinned spec.ssh.hostKey; the hub will refuse it unless its known_hosts file has the key`,
        fix: `add hostKey (from \`ssh-keyscan -t ed25519 ${spec.ssh.host}\`, checked out of band)`,
      });
    if (spec.transport !== "ssh" && spec.ssh)
      push(doc, {
        severity: "warning",
        code: "node/ssh-unused",
        path: ["spec", "ssh"],
        message: `spec.ssh is ignored: node "${doc.value.metadata.name}" uses transport ${spec.transport}`,
        fix: "remove spec.ssh or set transport: ssh",
      });
    for (const [i, root] of spec.roots.entries())
      if (hasDotSegments(root))
        push(doc, {
          severity: "error",
          code: "path/dot-segments",
          path: ["spec", "roots", i],
          message: `root ${JSON.stringify(root)} has \`.\` or \`..\` segments`,
          fix: "write the root as a canonical absolute path",
        });
  }
}

/** Per node, what each assignment's resources own there, to find two managing the same thing. */
type Owners = Map<string, Ownership>;

/** A resource claiming a thing on some nodes. */
interface Claim {
  doc: AssignmentDocument;
  index: number;
}

/**
 * Who owns one thing (`path:/etc/x`), on which nodes. Most things have one claim, kept as it is; a
 * thing claimed again gets a per-node map, so checking is linear in (claims × nodes) of shared things.
 */
interface Ownership {
  first: Claim;
  nodes: readonly Node[];
  byNode?: Map<Node, Claim>;
}

/** Records `claim` of `thing` on `nodes`; returns, per earlier claim in its way, the nodes they share. */
function claimThing(owners: Owners, thing: string, nodes: readonly Node[], claim: Claim): Map<Claim, Node[]> {
  const clashes = new Map<Claim, Node[]>();
  const known = owners.get(thing);
  if (!known) {
    owners.set(thing, { first: claim, nodes });
    return clashes;
  }
  if (!known.byNode) {
    known.byNode = new Map();
    for (const node of known.nodes) known.byNode.set(node, known.first);
  }
  for (const node of nodes) {
    const other = known.byNode.get(node);
    if (!other) known.byNode.set(node, claim);
    else if (other.doc !== claim.doc || other.index !== claim.index) {
      const shared = clashes.get(other);
      if (shared) shared.push(node);
      else clashes.set(other, [node]);
    }
  }
  return clashes;
}

/**
 * What the checks of one assignment need from its own document alone, worked out once per parsed
 * document: its value keeps its identity while its file is unchanged, so a sync of a large fleet
 * re-checks only the documents that changed (the checks across documents still run, as lookups).
 */
interface AssignmentFacts {
  /** Findings that depend on this document alone. */
  findings: Finding[];
  /** Canonical paths that must be inside the roots of each node it is placed on. */
  confined: (ConfinedPath & { index: number })[];
  /** What each resource owns on a host (before per-node substitution). */
  owned: { index: number; template: string }[];
  /** Well-formed `source:` paths, which must exist in the repository. */
  sources: { index: number; source: string }[];
  /** Resources already reported as duplicates: not reported again as a conflict with themselves. */
  duplicates: Set<number>;
}

const assignmentFacts = new WeakMap<Assignment, AssignmentFacts>();

function factsOf(assignment: Assignment): AssignmentFacts {
  const cached = assignmentFacts.get(assignment);
  if (cached) return cached;
  const spec = assignment.spec;
  const name = assignment.metadata.name;
  const facts: AssignmentFacts = {
    findings: [],
    confined: [],
    owned: [],
    sources: [],
    duplicates: new Set(),
  };
  const names = new Map<string, number>();
  const edges = new Map<string, string[]>();
  for (const [i, resource] of spec.resources.entries()) {
    const resName = resourceName(resource);
    const first = names.get(resName);
    if (first !== undefined) {
      facts.duplicates.add(i);
      facts.findings.push({
        severity: "error",
        code: "resource/duplicate",
        path: ["spec", "resources", i, resource.name ? "name" : "path"],
        message: `resource "${resName}" is declared twice in assignment "${name}" (first at spec.resources[${first}])`,
        fix: "remove the duplicate or give each resource its own name",
      });
    } else names.set(resName, i);
    edges.set(resName, resource.dependsOn ?? []);
    for (const field of confinedPaths(resource)) {
      if (field.relativeTo === undefined && (hasDotSegments(field.path) || field.path.includes("//")))
        facts.findings.push({
          severity: "error",
          code: "path/dot-segments",
          path: ["spec", "resources", i, ...field.field],
          message: `${JSON.stringify(field.path)} is not a canonical path (it has \`.\`, \`..\` or \`//\`)`,
          fix: "write the absolute path without `.` or `..` segments",
        });
      else facts.confined.push({ index: i, ...field });
    }
    if ((resource.kind === "file" || resource.kind === "systemd-unit") && resource.source !== undefined) {
      const source = resource.source;
      if (source.startsWith("/") || hasDotSegments(source) || source.startsWith("./"))
        facts.findings.push({
          severity: "error",
          code: "source/path",
          path: ["spec", "resources", i, "source"],
          message: `source ${JSON.stringify(source)} must be a path relative to the repository root, without \`.\` or \`..\``,
          fix: 'write it like "files/nginx.conf"',
        });
      else facts.sources.push({ index: i, source });
    }
    const template = ownedThing(resource);
    if (template) facts.owned.push({ index: i, template });
  }
  for (const [i, resource] of spec.resources.entries()) {
    for (const [j, dependency] of (resource.dependsOn ?? []).entries())
      if (!names.has(dependency))
        facts.findings.push({
          severity: "error",
          code: "depends-on/unknown",
          path: ["spec", "resources", i, "dependsOn", j],
          message: `resource "${dependency}" does not exist in assignment "${name}"${didYouMean(dependency, names.keys())}`,
          fix: "name a resource of the same assignment (its name, or its path for files)",
        });
    if (resource.kind === "service")
      for (const [j, dependency] of (resource.restartOn ?? []).entries())
        if (!names.has(dependency))
          facts.findings.push({
            severity: "error",
            code: "restart-on/unknown",
            path: ["spec", "resources", i, "restartOn", j],
            message: `resource "${dependency}" does not exist in assignment "${name}"${didYouMean(dependency, names.keys())}`,
            fix: "name a resource of the same assignment",
          });
  }
  const probeNames = new Map<string, number>();
  for (const [i, probe] of (spec.probes ?? []).entries()) {
    const first = probeNames.get(probe.name);
    if (first === undefined) probeNames.set(probe.name, i);
    else
      facts.findings.push({
        severity: "error",
        code: "probe/duplicate",
        path: ["spec", "probes", i, "name"],
        message: `probe "${probe.name}" is declared twice in assignment "${name}" (first at spec.probes[${first}])`,
        fix: "give each probe its own name: reports and conditions name probes",
      });
  }
  // Only resources with dependencies can be on a cycle; most have none.
  const cycle = spec.resources.some((r) => r.dependsOn?.length) ? findCycle(edges) : undefined;
  if (cycle) {
    const index = names.get(cycle[0]!) ?? 0;
    facts.findings.push({
      severity: "error",
      code: "depends-on/cycle",
      path: ["spec", "resources", index, "dependsOn"],
      message: `resources depend on each other in a cycle: ${cycle.join(" → ")}`,
      fix: "remove one dependsOn so the order is well defined",
    });
  }
  assignmentFacts.set(assignment, facts);
  return facts;
}

/** Findings for the paths of an assignment on the nodes it is placed on: inside their roots, canonical. */
function checkConfinement(
  doc: AssignmentDocument,
  confined: AssignmentFacts["confined"],
  placed: readonly Node[],
  push: Push,
): void {
  for (const { index, field, path, relativeTo } of confined) {
    const where = ["spec", "resources", index, ...field];
    if (relativeTo !== undefined) {
      // A relative link target may use `..`; where it resolves to must still be inside the roots.
      for (const node of placed) {
        const context = { node, assignment: doc.value };
        const link = substituteString(relativeTo, context, ignoreMissing);
        const target = substituteString(path, context, ignoreMissing);
        const resolved = posix.resolve(posix.dirname(link), target);
        if (containingRoot(resolved, node.spec.roots)) continue;
        push(doc, {
          severity: "error",
          code: "path/outside-roots",
          path: where,
          message: `${JSON.stringify(target)} resolves to ${JSON.stringify(resolved)}, outside the roots of node "${node.metadata.name}" (${node.spec.roots.join(", ")})`,
          fix: "point the link inside a declared root",
        });
      }
      continue;
    }
    const templated = path.includes("${");
    for (const node of placed) {
      const actual = templated
        ? substituteString(path, { node, assignment: doc.value }, ignoreMissing)
        : path;
      if (templated && !actual.startsWith("/")) {
        push(doc, {
          severity: "error",
          code: "path/not-absolute",
          path: where,
          message: `${JSON.stringify(actual)} on node "${node.metadata.name}" is not a canonical absolute path`,
          fix: `make the node's value absolute (spec.vars of nodes/${node.metadata.name})`,
        });
        continue;
      }
      if (templated && (hasDotSegments(actual) || actual.includes("//"))) {
        push(doc, {
          severity: "error",
          code: "path/dot-segments",
          path: where,
          message: `${JSON.stringify(path)} becomes ${JSON.stringify(actual)} on node "${node.metadata.name}", which is not a canonical path`,
          fix: "fix the node's value so the path has no `.`, `..` or `//`",
        });
        continue;
      }
      if (containingRoot(actual, node.spec.roots)) continue;
      push(doc, {
        severity: "error",
        code: "path/outside-roots",
        path: where,
        message: `${JSON.stringify(actual)} is outside the roots of node "${node.metadata.name}" (${node.spec.roots.join(", ")})`,
        fix: `move it under a declared root, or add a root to nodes/${node.metadata.name}`,
      });
    }
  }
}

/** Claims what each resource owns on the nodes it is placed on, reporting what someone else owns. */
function checkOwnership(
  doc: AssignmentDocument,
  facts: AssignmentFacts,
  placed: readonly Node[],
  push: Push,
  owners: Owners,
): void {
  const reported = new Set(facts.duplicates);
  for (const { index, template } of facts.owned) {
    const claim = { doc, index };
    // A thing named with `${node...}` is a different thing on each node.
    const claims: [string, readonly Node[]][] = template.includes("${")
      ? placed.map((node) => [
          substituteString(template, { node, assignment: doc.value }, ignoreMissing),
          [node],
        ])
      : [[template, placed]];
    for (const [owned, nodes] of claims)
      for (const [other, shared] of claimThing(owners, owned, nodes, claim)) {
        const what = owned.replace(":", " ");
        if (other.doc !== doc)
          push(doc, {
            severity: "error",
            code: "resource/conflict",
            path: ["spec", "resources", index],
            message: `${what} on ${nodeList(shared)} is also managed by assignment "${other.doc.value.metadata.name}" (${other.doc.file})`,
            fix: "manage it from one assignment only; steward never picks a winner between two",
          });
        else if (!reported.has(index)) {
          reported.add(index);
          push(doc, {
            severity: "error",
            code: "resource/conflict",
            path: ["spec", "resources", index],
            message: `${what} is also managed by spec.resources[${other.index}] of this assignment`,
            fix: "manage each path, service, container or package with one resource",
          });
        }
      }
  }
}

function checkAssignment(
  doc: AssignmentDocument,
  input: SemanticInput,
  placements: ReadonlyMap<string, readonly Node[]>,
  push: Push,
  owners: Owners,
): void {
  const spec = doc.value.spec;
  const name = doc.value.metadata.name;
  for (const [i, nodeName] of (spec.nodes ?? []).entries()) {
    if (input.nodes.has(nodeName) || input.invalidNames.has(`Node/${nodeName}`)) continue;
    push(doc, {
      severity: "error",
      code: "node/undeclared",
      path: ["spec", "nodes", i],
      message: `node "${nodeName}" is not declared${didYouMean(nodeName, input.nodes.keys())}`,
      fix: `add a Node document named "${nodeName}" (e.g. nodes/${nodeName}.yaml) or fix spec.nodes`,
    });
  }
  const placed = placements.get(name) ?? [];
  if (spec.selector && !spec.nodes?.length && placed.length === 0)
    push(doc, {
      severity: "warning",
      code: "selector/no-match",
      path: ["spec", "selector", "matchLabels"],
      message: `selector of assignment "${name}" matches no node: it will run nowhere`,
      fix: "fix the labels, or label the nodes it is meant for",
    });
  for (const [i, dependency] of (spec.dependsOn ?? []).entries()) {
    if (input.assignments.has(dependency) || input.invalidNames.has(`Assignment/${dependency}`)) {
      const theirs = placements.get(dependency);
      if (!theirs || dependency === name) continue;
      const there = new Set(theirs);
      const without = placed.filter((node) => !there.has(node));
      if (without.length > 0)
        push(doc, {
          severity: "warning",
          code: "depends-on/not-placed",
          path: ["spec", "dependsOn", i],
          message: `assignment "${dependency}" is not placed on ${nodeList(without)}, so "${name}" would wait for it there for ever`,
          fix: `place "${dependency}" on the same nodes, or drop it from spec.dependsOn`,
        });
      continue;
    }
    push(doc, {
      severity: "error",
      code: "depends-on/unknown",
      path: ["spec", "dependsOn", i],
      message: `assignment "${dependency}" does not exist${didYouMean(dependency, input.assignments.keys())}`,
      fix: "name an existing assignment in spec.dependsOn",
    });
  }
  const canary = spec.rollout?.canary?.nodes ?? [];
  if (canary.length > 0) {
    const placedNames = new Set(placed.map((n) => n.metadata.name));
    for (const [i, nodeName] of canary.entries())
      if (!placedNames.has(nodeName) && !input.invalidNames.has(`Node/${nodeName}`))
        push(doc, {
          severity: "error",
          code: "rollout/canary-node",
          path: ["spec", "rollout", "canary", "nodes", i],
          message: `canary node "${nodeName}" is not one of the nodes this assignment is placed on`,
          fix: `use one of: ${[...placedNames].join(", ") || "(none)"}`,
        });
  }

  const facts = factsOf(doc.value);
  for (const finding of facts.findings) push(doc, finding);
  for (const { index, source } of facts.sources)
    if (!input.exists(source))
      push(doc, {
        severity: "error",
        code: "source/missing",
        path: ["spec", "resources", index, "source"],
        message: `source file ${JSON.stringify(source)} does not exist in the repository`,
        fix: "add the file, or fix the path (relative to the repository root)",
      });
  checkConfinement(doc, facts.confined, placed, push);
  checkOwnership(doc, facts, placed, push, owners);
}

/** Runs every semantic check; findings are attached to the document they are about. */
export function semanticFindings(input: SemanticInput): LocatedFinding[] {
  const out: LocatedFinding[] = [];
  const push: Push = (document, finding) => out.push({ document, finding });
  checkDuplicateNames(input, push);
  checkNodes(input, push);
  const placements =
    input.placements ??
    placeAll(
      [...input.assignments.values()].map((doc) => doc.value),
      input.nodes,
    );
  const owners: Owners = new Map();
  for (const doc of input.assignments.values()) checkAssignment(doc, input, placements, push, owners);
  // Only assignments with dependencies can be on a cycle; most have none.
  const assignmentEdges = new Map<string, string[]>();
  for (const [name, doc] of input.assignments)
    if (doc.value.spec.dependsOn?.length) assignmentEdges.set(name, doc.value.spec.dependsOn);
  const cycle = findCycle(assignmentEdges);
  if (cycle) {
    const doc = input.assignments.get(cycle[0]!)!;
    push(doc, {
      severity: "error",
      code: "depends-on/cycle",
      path: ["spec", "dependsOn"],
      message: `assignments depend on each other in a cycle: ${cycle.join(" → ")}`,
      fix: "remove one spec.dependsOn so the order is well defined",
    });
  }
  return out;
}
