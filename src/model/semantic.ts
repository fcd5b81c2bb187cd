/**
 * Checks that need more than one document, or more than the schema can say: names that must exist,
 * cycles, conflicts between assignments, and confinement of paths to a node's roots.
 *
 * FleetChecks keeps them up to date by difference: a load says which documents left and which
 * came, and only the checks those documents take part in run again — the changed assignments, the
 * assignments that depend on them, and the claimants of what they own. An unchanged document costs
 * nothing. A change of nodes (or of which names are invalid) places and checks every assignment
 * again, as a first load does: that is the same code with everything changed.
 */
import { posix } from "node:path";
import {
  type AnyDocument,
  type AssignmentDocument,
  FLEET_FILE,
  type FleetDocument,
  type NodeDocument,
  type SourcedDocument,
} from "./documents.js";
import { type AssignmentFacts, factsOf, findCycle } from "./facts.js";
import { type Finding, formatPath } from "./findings.js";
import type { Node } from "./generated.js";
import { containingRoot, hasDotSegments } from "./paths.js";
import { NodeIndex } from "./placement.js";
import { STEWARD_SCHEMA_ID, schemaFindings, validatorFor } from "./schema.js";
import { emptySorted, type SortedMap } from "./sorted.js";
import { didYouMean } from "./suggest.js";
import { substitute, substituteString } from "./template.js";

export interface LocatedFinding {
  document: SourcedDocument<unknown>;
  finding: Finding;
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
      // The path as the agent's schema reads it, once the node's values are in.
      if (templated && field[0] !== "volumes" && !validatorFor(STEWARD_SCHEMA_ID, "ResourcePath")(actual)) {
        push(doc, {
          severity: "error",
          code: "path/invalid",
          path: where,
          message: `${JSON.stringify(path)} becomes ${JSON.stringify(actual)} on node "${node.metadata.name}", which has a control character (NUL, line break, tab) or a trailing "/"`,
          fix: `fix the node's value (spec.vars of nodes/${node.metadata.name})`,
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

/** A resource that owns something on a host: conflicts are reported per pair of owners. */
interface Owner {
  doc: AssignmentDocument;
  index: number;
}

/**
 * A resource's claim on one thing (the path /etc/x, the service web) on some nodes. Claims are
 * settled in assignment name order, then in `rank` order within an assignment: the first claim of
 * a thing on a node owns it.
 */
interface Claim {
  state: AssignmentState;
  owner: Owner;
  rank: number;
  /** `path`, or a resource kind. */
  category: string;
  name: string;
  nodes: readonly Node[];
  /** The thing, once the claim is indexed. */
  thing: Thing | undefined;
}

/** Every claim on one thing, in settling order; who owns it on each node is worked out when asked. */
interface Thing {
  category: string;
  name: string;
  claims: Claim[];
  byNode?: Map<Node, Owner> | undefined;
}

function settledBefore(a: Claim, b: Claim): boolean {
  const x = a.state.name;
  const y = b.state.name;
  return x < y || (x === y && a.rank < b.rank);
}

function ownersOf(thing: Thing): Map<Node, Owner> {
  if (!thing.byNode) {
    thing.byNode = new Map();
    for (const claim of thing.claims)
      for (const node of claim.nodes) if (!thing.byNode.has(node)) thing.byNode.set(node, claim.owner);
  }
  return thing.byNode;
}

/** What each resource of an assignment owns on the nodes it is placed on. */
function claimsOf(state: AssignmentState, facts: AssignmentFacts): Claim[] {
  const { doc, placed } = state;
  const claims: Claim[] = [];
  if (placed.length === 0) return claims;
  for (const { index, category, name } of facts.owned) {
    const owner: Owner = { doc, index };
    // A thing named with `${node...}` is a different thing on each node.
    if (name.includes("${"))
      for (const node of placed)
        claims.push({
          state,
          owner,
          rank: claims.length,
          category,
          name: substituteString(name, { node, assignment: doc.value }, ignoreMissing),
          nodes: [node],
          thing: undefined,
        });
    else claims.push({ state, owner, rank: claims.length, category, name, nodes: placed, thing: undefined });
  }
  // Kept for every assignment: without the room a growing array reserves.
  return claims.slice();
}

/** Conflicts of an assignment's claims with claims settled before them (its own included). */
function ownershipFindings(state: AssignmentState, facts: AssignmentFacts): LocatedFinding[] {
  const out: LocatedFinding[] = [];
  const doc = state.doc;
  let reported: Set<number> | undefined;
  for (const claim of state.claims) {
    const thing = claim.thing!;
    // Most things have one claim: this one.
    if (thing.claims.length < 2) continue;
    const byNode = ownersOf(thing);
    let clashes: Map<Owner, Node[]> | undefined;
    for (const node of claim.nodes) {
      const other = byNode.get(node)!;
      if (other === claim.owner) continue;
      clashes ??= new Map();
      const shared = clashes.get(other);
      if (shared) shared.push(node);
      else clashes.set(other, [node]);
    }
    if (!clashes) continue;
    const what = `${claim.category} ${claim.name}`;
    const index = claim.owner.index;
    for (const [other, shared] of clashes) {
      if (other.doc !== doc)
        out.push({
          document: doc,
          finding: {
            severity: "error",
            code: "resource/conflict",
            path: ["spec", "resources", index],
            message: `${what} on ${nodeList(shared)} is also managed by assignment "${other.doc.value.metadata.name}" (${other.doc.file})`,
            fix: "manage it from one assignment only; steward never picks a winner between two",
          },
        });
      else {
        reported ??= new Set(facts.duplicates);
        if (reported.has(index)) continue;
        reported.add(index);
        out.push({
          document: doc,
          finding: {
            severity: "error",
            code: "resource/conflict",
            path: ["spec", "resources", index],
            message: `${what} is also managed by spec.resources[${other.index}] of this assignment`,
            fix: "manage each path, service, container or package with one resource",
          },
        });
      }
    }
  }
  return out;
}

/** What the checks of one assignment look up in the rest of the repository. */
interface CheckContext {
  nodes: ReadonlyMap<string, NodeDocument>;
  assignments: ReadonlyMap<string, AssignmentDocument>;
  /** `Kind/name` of documents that exist but failed schema validation (to avoid cascading errors). */
  invalid: ReadonlyMap<string, number>;
  placements: ReadonlyMap<string, readonly Node[]>;
  /** Whether a repo-relative path exists (for `source:`). */
  exists(path: string): boolean;
  /** Secret files that do not exist yet are no error: the secret commands are about to write them. */
  pendingSecrets: boolean;
}

/**
 * The checks of one assignment but its conflicts with others. Returns true when a finding names
 * the closest assignment name: it changes when assignments come or go.
 */
function checkAssignment(
  doc: AssignmentDocument,
  facts: AssignmentFacts,
  placed: readonly Node[],
  context: CheckContext,
  push: Push,
): boolean {
  const spec = doc.value.spec;
  const name = doc.value.metadata.name;
  let suggests = false;
  for (const [i, nodeName] of (spec.nodes ?? []).entries()) {
    if (context.nodes.has(nodeName) || context.invalid.has(`Node/${nodeName}`)) continue;
    push(doc, {
      severity: "error",
      code: "node/undeclared",
      path: ["spec", "nodes", i],
      message: `node "${nodeName}" is not declared${didYouMean(nodeName, context.nodes.keys())}`,
      fix: `add a Node document named "${nodeName}" (e.g. nodes/${nodeName}.yaml) or fix spec.nodes`,
    });
  }
  if (spec.selector && !spec.nodes?.length && placed.length === 0)
    push(doc, {
      severity: "warning",
      code: "selector/no-match",
      path: ["spec", "selector", "matchLabels"],
      message: `selector of assignment "${name}" matches no node: it will run nowhere`,
      fix: "fix the labels, or label the nodes it is meant for",
    });
  for (const [i, dependency] of (spec.dependsOn ?? []).entries()) {
    if (context.assignments.has(dependency) || context.invalid.has(`Assignment/${dependency}`)) {
      const theirs = context.placements.get(dependency);
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
    suggests = true;
    push(doc, {
      severity: "error",
      code: "depends-on/unknown",
      path: ["spec", "dependsOn", i],
      message: `assignment "${dependency}" does not exist${didYouMean(dependency, context.assignments.keys())}`,
      fix: "name an existing assignment in spec.dependsOn",
    });
  }
  const canary = spec.rollout?.canary?.nodes ?? [];
  if (canary.length > 0) {
    const placedNames = new Set(placed.map((n) => n.metadata.name));
    for (const [i, nodeName] of canary.entries())
      if (!placedNames.has(nodeName) && !context.invalid.has(`Node/${nodeName}`))
        push(doc, {
          severity: "error",
          code: "rollout/canary-node",
          path: ["spec", "rollout", "canary", "nodes", i],
          message: `canary node "${nodeName}" is not one of the nodes this assignment is placed on`,
          fix: `use one of: ${[...placedNames].join(", ") || "(none)"}`,
        });
  }
  for (const finding of facts.findings) push(doc, finding);
  for (const { index, source, field, secret } of facts.sources)
    if (!context.exists(source) && !(secret && context.pendingSecrets))
      push(doc, {
        severity: "error",
        code: "source/missing",
        path: ["spec", "resources", index, ...field],
        message: `${field[0] === "source" ? "source" : "secret"} file ${JSON.stringify(source)} does not exist in the repository`,
        fix: "add the file, or fix the path (relative to the repository root)",
      });
  checkConfinement(doc, facts.confined, placed, push);
  checkSubstituted(doc, facts.substituted, placed, push);
  return suggests;
}

/**
 * Findings for resources and probes that the schema refuses once a node's values are substituted
 * (see AssignmentFacts.substituted): the agent checks its bundle against the same schema. One
 * finding per resource or probe, naming the first node it fails on.
 */
function checkSubstituted(
  doc: AssignmentDocument,
  substituted: AssignmentFacts["substituted"],
  placed: readonly Node[],
  push: Push,
): void {
  for (const { part, index } of substituted) {
    const raw = part === "resources" ? doc.value.spec.resources[index] : doc.value.spec.probes?.[index];
    const validate = validatorFor(STEWARD_SCHEMA_ID, part === "resources" ? "Resource" : "Probe");
    for (const node of placed) {
      const rendered = substitute(raw, { node, assignment: doc.value }, ignoreMissing);
      if (validate(rendered)) continue;
      const [first] = schemaFindings(validate, rendered);
      if (!first) continue;
      const path = ["spec", part, index, ...first.path];
      const inside = formatPath(first.path);
      const message = first.message.startsWith(inside)
        ? formatPath(path) + first.message.slice(inside.length)
        : first.message;
      push(doc, {
        severity: "error",
        code: first.code,
        path,
        message: `${message} on node "${node.metadata.name}", once its values are filled in`,
        fix: `fix the values it uses on node "${node.metadata.name}" (spec.vars, labels) or the field${first.fix ? `: ${first.fix}` : ""}`,
      });
      break;
    }
  }
}

function checkNode(doc: NodeDocument, push: Push): void {
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

/** Fleet documents, in repository order: only one, and only in steward.yaml. */
function checkFleetDocuments(documents: readonly AnyDocument[], push: Push): void {
  let fleet: AnyDocument | undefined;
  for (const doc of documents) {
    if (doc.file !== FLEET_FILE)
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
  }
}

/** Documents of one kind and name, in repository order: every one after the first is a duplicate. */
function checkNames(documents: readonly AnyDocument[], push: Push): void {
  const first = documents[0];
  for (let i = 1; i < documents.length; i++) {
    const doc = documents[i]!;
    push(doc, {
      severity: "error",
      code: "name/duplicate",
      path: ["metadata", "name"],
      message: `${doc.kind} "${doc.name}" is declared twice (also in ${first!.file})`,
      fix: "rename one of them or delete the duplicate",
    });
  }
}

/** Findings of one check, replaced as a whole when it runs again. */
interface Held {
  findings: LocatedFinding[];
}

/** The documents of one kind and name, and the valid one that counts (the first). */
interface NameGroup extends Held {
  kind: string;
  name: string;
  docs: AnyDocument[];
  winner: AnyDocument | undefined;
}

/** An assignment as last checked: its document, placement, claims, and what its findings depend on. */
interface AssignmentState {
  name: string;
  doc: AssignmentDocument;
  placed: readonly Node[];
  claims: Claim[];
  local: Held;
  owned: Held;
}

/** Where documents come in the repository: steward.yaml first, then by path, then by position in the file. */
export function documentOrder(a: SourcedDocument<unknown>, b: SourcedDocument<unknown>): number {
  if (a.file !== b.file) {
    if (a.file === FLEET_FILE) return -1;
    if (b.file === FLEET_FILE) return 1;
    return a.file < b.file ? -1 : 1;
  }
  return a.index - b.index;
}

/** Inserts `doc` into a list kept in repository order (usually at its end). */
function insertDocument(list: AnyDocument[], doc: AnyDocument): void {
  let i = list.length;
  while (i > 0 && documentOrder(doc, list[i - 1]!) < 0) i--;
  list.splice(i, 0, doc);
}

function removeItem<T>(list: T[], item: T): void {
  const i = list.indexOf(item);
  if (i >= 0) list.splice(i, 1);
}

function addTo(index: Map<string, Set<string>>, key: string, name: string): void {
  const set = index.get(key);
  if (set) set.add(name);
  else index.set(key, new Set([name]));
}

function removeFrom(index: Map<string, Set<string>>, key: string, name: string): void {
  const set = index.get(key);
  if (set?.delete(name) && set.size === 0) index.delete(key);
}

/** What one update of the checks was given. */
export interface DocumentChanges {
  /** Documents no longer in the repository (a changed file's old documents among them). */
  removed: readonly AnyDocument[];
  /** Documents new to the repository. */
  added: readonly AnyDocument[];
  /** Files (of any kind) added to or removed from the repository since the last update. */
  paths: readonly string[];
  /** Whether a repo-relative path exists now (for `source:`). */
  exists(path: string): boolean;
  /** See CheckContext.pendingSecrets (keep it the same across the loads of one state). */
  pendingSecrets?: boolean;
}

/** Which assignments may render differently after an update. */
export interface RenderChanges {
  /** Every assignment: nodes changed. */
  all: boolean;
  /** Assignments whose document changed, came or went. */
  assignments: readonly string[];
}

/**
 * The cross-document checks of a repository, kept up to date by difference (see the top of this
 * file). `update` takes what changed and returns which assignments may render differently; the
 * maps it exposes are replaced, never changed, so a result handed out stays as it was.
 */
export class FleetChecks {
  /** Valid nodes by name, sorted: the first valid document of each name. */
  nodes: SortedMap<NodeDocument> = emptySorted();
  /** Valid assignments by name, sorted: the first valid document of each name. */
  assignments: SortedMap<AssignmentDocument> = emptySorted();
  /** The Fleet document of steward.yaml, when it is valid. */
  fleet?: FleetDocument;
  /** The nodes each valid assignment is placed on. */
  readonly placements = new Map<string, readonly Node[]>();

  private index = new NodeIndex([]);
  private readonly named = new Map<string, Map<string, NameGroup>>();
  private readonly fleetDocuments: AnyDocument[] = [];
  private readonly invalid = new Map<string, number>();
  private readonly states = new Map<string, AssignmentState>();
  private readonly nodeChecks = new Map<string, Held>();
  /** Things claimed, by category and name. */
  private readonly things = new Map<string, Map<string, Thing>>();
  /** Assignment name → names of the assignments whose spec.dependsOn names it. */
  private readonly dependents = new Map<string, Set<string>>();
  /** `source:` path → names of the assignments that read it. */
  private readonly sourceUsers = new Map<string, Set<string>>();
  /** Assignments whose findings suggest the closest assignment name. */
  private readonly suggesting = new Set<string>();
  /** Assignments with a spec.dependsOn: the only ones that can be on a cycle. */
  private readonly withDependencies = new Set<string>();
  private readonly fleetFindings: Held = { findings: [] };
  private readonly cycleFindings: Held = { findings: [] };
  /** Every Held with findings. */
  private readonly flagged = new Set<Held>();

  /** Every current finding, grouped by check (the order of a group is the order it was found in). */
  findings(): LocatedFinding[] {
    const out: LocatedFinding[] = [];
    for (const held of this.flagged) for (const finding of held.findings) out.push(finding);
    return out;
  }

  /** Applies what changed in the repository's documents and files; runs the checks they affect. */
  update(changes: DocumentChanges): RenderChanges {
    const touched = new Set<NameGroup>();
    let fleetTouched = false;
    let invalidChanged = false;
    const count = (key: string, delta: number) => {
      const before = this.invalid.get(key) ?? 0;
      if (before + delta === 0) this.invalid.delete(key);
      else this.invalid.set(key, before + delta);
      if (before === 0 || before + delta === 0) invalidChanged = true;
    };
    for (const [delta, docs] of [
      [-1, changes.removed],
      [1, changes.added],
    ] as const)
      for (const doc of docs) {
        if (!doc.kind) continue;
        if (!doc.valid && doc.name) count(`${doc.kind}/${doc.name}`, delta);
        if (doc.kind === "Fleet") {
          if (delta < 0) removeItem(this.fleetDocuments, doc);
          else insertDocument(this.fleetDocuments, doc);
          fleetTouched = true;
          continue;
        }
        if (!doc.name) continue;
        const group = this.group(doc.kind, doc.name, delta > 0 ? doc : undefined);
        if (delta < 0) removeItem(group.docs, doc);
        else if (!group.docs.includes(doc)) insertDocument(group.docs, doc);
        touched.add(group);
      }

    if (fleetTouched) {
      this.hold(
        this.fleetFindings,
        collect((push) => checkFleetDocuments(this.fleetDocuments, push)),
      );
      this.fleet = this.fleetDocuments.find((doc) => doc.valid && doc.file === FLEET_FILE) as
        | FleetDocument
        | undefined;
    }
    const nodeChanges = new Map<string, NodeDocument | undefined>();
    const assignmentChanges = new Map<string, AssignmentDocument | undefined>();
    for (const group of touched) {
      this.hold(group, group.docs.length > 1 ? collect((push) => checkNames(group.docs, push)) : []);
      if (group.kind === "Node" || group.kind === "Assignment") {
        const winner = group.docs.find((doc) => doc.valid);
        if (winner !== group.winner) {
          group.winner = winner;
          if (group.kind === "Node") nodeChanges.set(group.name, winner as NodeDocument | undefined);
          else assignmentChanges.set(group.name, winner as AssignmentDocument | undefined);
        }
      }
      if (group.docs.length === 0) this.named.get(group.kind)?.delete(group.name);
    }

    if (nodeChanges.size > 0) {
      this.nodes = this.nodes.with(nodeChanges);
      this.index = new NodeIndex(this.nodes);
      for (const [name, doc] of nodeChanges) {
        let held = this.nodeChecks.get(name);
        if (!held) {
          held = { findings: [] };
          this.nodeChecks.set(name, held);
        }
        this.hold(held, doc ? collect((push) => checkNode(doc, push)) : []);
        if (!doc) this.nodeChecks.delete(name);
      }
    }
    let renamed = false;
    let cycleChanged = false;
    for (const [name, doc] of assignmentChanges) {
      if (doc === undefined || !this.assignments.has(name)) renamed = true;
      if (this.withDependencies.has(name) || doc?.value.spec.dependsOn?.length) cycleChanged = true;
    }
    this.assignments = this.assignments.with(assignmentChanges);

    // Which assignments to check again: after a change of nodes or of invalid names, all of them.
    const everything = nodeChanges.size > 0 || invalidChanged || this.states.size === 0;
    const dirty = new Set<string>();
    // Placements first: an assignment's checks read the placement of those it depends on.
    if (everything) {
      this.placements.clear();
      for (const [name, doc] of this.assignments) this.placements.set(name, this.index.place(doc.value));
    } else {
      for (const name of assignmentChanges.keys()) {
        dirty.add(name);
        for (const dependent of this.dependents.get(name) ?? []) dirty.add(dependent);
        const doc = this.assignments.get(name);
        if (doc) this.placements.set(name, this.index.place(doc.value));
        else this.placements.delete(name);
      }
      if (renamed) for (const name of this.suggesting) dirty.add(name);
      for (const path of changes.paths) for (const user of this.sourceUsers.get(path) ?? []) dirty.add(user);
    }
    const context: CheckContext = {
      nodes: this.nodes,
      assignments: this.assignments,
      invalid: this.invalid,
      placements: this.placements,
      exists: changes.exists,
      pendingSecrets: changes.pendingSecrets === true,
    };
    const touchedThings = new Set<Thing>();
    const checked: AssignmentState[] = [];
    // Everything: forget every assignment at once and check them in name order, so each claim goes
    // to the end of its thing's list and every claimant is checked for conflicts anyway.
    if (everything) this.forgetAll();
    for (const name of everything ? this.assignments.keys() : dirty) {
      const previous = everything ? undefined : this.states.get(name);
      if (previous) this.forget(previous, touchedThings);
      const doc = this.assignments.get(name);
      if (doc) checked.push(this.check(name, doc, context, everything ? undefined : touchedThings));
    }
    // Conflicts: every claimant of a thing whose claims changed is checked again.
    const affected = new Set<AssignmentState>(checked);
    for (const thing of touchedThings) {
      if (thing.claims.length === 0) continue;
      for (const claim of thing.claims) affected.add(claim.state);
    }
    for (const state of affected) this.hold(state.owned, ownershipFindings(state, factsOf(state.doc.value)));
    for (const thing of touchedThings)
      if (thing.claims.length === 0) this.things.get(thing.category)?.delete(thing.name);

    if (cycleChanged || everything) this.checkCycle();
    return { all: nodeChanges.size > 0, assignments: [...assignmentChanges.keys()] };
  }

  /** The group of documents of one kind and name; a new group starts with `first` in it. */
  private group(kind: string, name: string, first: AnyDocument | undefined): NameGroup {
    let ofKind = this.named.get(kind);
    if (!ofKind) {
      ofKind = new Map();
      this.named.set(kind, ofKind);
    }
    let group = ofKind.get(name);
    if (!group) {
      // Every field from the start, and a list of the one document: there is a group per name.
      group = { kind, name, docs: first ? [first] : [], findings: [], winner: undefined };
      ofKind.set(name, group);
    }
    return group;
  }

  /** Names of the assignments that read the file at `path` through `source:`. */
  readersOf(path: string): Iterable<string> {
    return this.sourceUsers.get(path) ?? [];
  }

  /**
   * Checks one assignment (but its conflicts), indexes what it depends on and claims what it owns;
   * the things it claims are added to `touched` when given.
   */
  private check(
    name: string,
    doc: AssignmentDocument,
    context: CheckContext,
    touched: Set<Thing> | undefined,
  ): AssignmentState {
    const state: AssignmentState = {
      name,
      doc,
      placed: this.placements.get(name) ?? [],
      claims: [],
      local: { findings: [] },
      owned: { findings: [] },
    };
    this.states.set(name, state);
    const facts = factsOf(doc.value);
    const local: LocatedFinding[] = [];
    const suggests = checkAssignment(doc, facts, state.placed, context, (document, finding) =>
      local.push({ document, finding }),
    );
    this.hold(state.local, local);
    if (suggests) this.suggesting.add(name);
    const dependsOn = doc.value.spec.dependsOn;
    if (dependsOn?.length) {
      for (const dependency of dependsOn) addTo(this.dependents, dependency, name);
      this.withDependencies.add(name);
    }
    for (const { source } of facts.sources) addTo(this.sourceUsers, source, name);
    state.claims = claimsOf(state, facts);
    for (const claim of state.claims) {
      let named = this.things.get(claim.category);
      if (!named) {
        named = new Map();
        this.things.set(claim.category, named);
      }
      let thing = named.get(claim.name);
      if (!thing) {
        // Most things have this one claim only.
        thing = { category: claim.category, name: claim.name, claims: [claim], byNode: undefined };
        named.set(claim.name, thing);
      } else {
        let i = thing.claims.length;
        while (i > 0 && settledBefore(claim, thing.claims[i - 1]!)) i--;
        thing.claims.splice(i, 0, claim);
        thing.byNode = undefined;
      }
      claim.thing = thing;
      touched?.add(thing);
    }
    return state;
  }

  /** Forgets every assignment's last check and what it indexed. */
  private forgetAll(): void {
    for (const state of this.states.values()) {
      this.hold(state.local, []);
      this.hold(state.owned, []);
    }
    this.states.clear();
    this.things.clear();
    this.dependents.clear();
    this.sourceUsers.clear();
    this.suggesting.clear();
    this.withDependencies.clear();
  }

  /** Removes what an assignment's last check indexed; its claims' things are touched. */
  private forget(state: AssignmentState, touchedThings: Set<Thing>): void {
    this.states.delete(state.name);
    this.hold(state.local, []);
    this.hold(state.owned, []);
    this.suggesting.delete(state.name);
    this.withDependencies.delete(state.name);
    for (const dependency of state.doc.value.spec.dependsOn ?? [])
      removeFrom(this.dependents, dependency, state.name);
    for (const { source } of factsOf(state.doc.value).sources)
      removeFrom(this.sourceUsers, source, state.name);
    for (const claim of state.claims) {
      const thing = claim.thing;
      if (!thing) continue;
      removeItem(thing.claims, claim);
      thing.byNode = undefined;
      touchedThings.add(thing);
    }
  }

  private checkCycle(): void {
    // Only assignments with dependencies can be on a cycle; most have none.
    const edges = new Map<string, readonly string[]>();
    for (const name of [...this.withDependencies].sort())
      edges.set(name, this.assignments.get(name)!.value.spec.dependsOn!);
    const cycle = findCycle(edges);
    const findings: LocatedFinding[] = [];
    if (cycle)
      findings.push({
        document: this.assignments.get(cycle[0]!)!,
        finding: {
          severity: "error",
          code: "depends-on/cycle",
          path: ["spec", "dependsOn"],
          message: `assignments depend on each other in a cycle: ${cycle.join(" → ")}`,
          fix: "remove one spec.dependsOn so the order is well defined",
        },
      });
    this.hold(this.cycleFindings, findings);
  }

  private hold(held: Held, findings: LocatedFinding[]): void {
    held.findings = findings;
    if (findings.length > 0) this.flagged.add(held);
    else this.flagged.delete(held);
  }
}

function collect(check: (push: Push) => void): LocatedFinding[] {
  const out: LocatedFinding[] = [];
  check((document, finding) => out.push({ document, finding }));
  return out;
}
